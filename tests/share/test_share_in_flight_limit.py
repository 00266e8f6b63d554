"""The per-partition in-flight limit (share.partition.max.record.locks) with more members
than fit in it, on the embedded broker and Apache Kafka 4.4: as acknowledgements free
room, the members waiting get records too (nobody is starved), and each record is still
accepted exactly once."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from aiokafka_lite import Producer
from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume.share import ShareConsumer, ShareRecord
from aiokafka_lite.testing.apache import ApacheCluster

Broker = EmbeddedCluster | ApacheCluster


@pytest.fixture
def share_broker(kafka_cluster: Broker) -> Broker:
    """``kafka_cluster``: the embedded broker, or under --kafka=apache Apache Kafka (scripts/test.sh
    runs this module in its Apache 4.4 pass)."""
    return kafka_cluster


async def test_members_beyond_the_in_flight_limit_all_get_records(share_broker: Broker) -> None:
    suffix = uuid.uuid4().hex[:10]
    topic, group = f"share-lim-{suffix}", f"share-lim-{suffix}"
    total, members = 1500, 6
    share_broker.create_topic(topic, partitions=1)
    async with Admin(share_broker.bootstrap) as admin:
        configs = {"share.auto.offset.reset": "earliest", "share.partition.max.record.locks": "100"}
        (await admin.incremental_alter_configs({ConfigResource.group(group): configs})).raise_errors()
    async with Producer(share_broker.bootstrap) as producer:
        for start in range(0, total, 100):
            await producer.send_batch(topic, [b"job-%d" % i for i in range(start, start + 100)])
    seen: dict[int, list[ShareRecord]] = {m: [] for m in range(members)}
    done = asyncio.Event()

    async def member(m: int, consumer: ShareConsumer) -> None:
        while not done.is_set():
            records = await consumer.poll(timeout_ms=300)
            seen[m] += records
            if records:
                await asyncio.sleep(0.02)  # the work; accepted by the next poll
            if sum(len(s) for s in seen.values()) >= total:
                done.set()

    # 100 records may be in flight and each member takes up to 50: two members fill it.
    consumers = [
        ShareConsumer(
            share_broker.bootstrap,
            group_id=group,
            topics=[topic],
            max_poll_records=50,
            share_acquire_mode="record_limit",
        )
        for _ in range(members)
    ]
    for c in consumers:
        await c.start()
    try:
        async with asyncio.timeout(90):
            await asyncio.gather(*(member(m, c) for m, c in enumerate(consumers)))
    finally:
        for c in consumers:
            await c.close()
    offsets = Counter(r.offset for s in seen.values() for r in s)
    assert sorted(offsets) == list(range(total)) and max(offsets.values()) == 1
    per_member = {m: len(s) for m, s in seen.items()}
    assert all(n > 0 for n in per_member.values()), per_member
