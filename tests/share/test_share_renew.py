"""RENEW acknowledgements (KIP-1222), on the embedded broker and Apache Kafka 4.4: a
renewed record keeps its acquisition lock past the lock duration and comes back to the
application (same delivery) for its final acknowledgement. (That an unrenewed lock runs
out is test_share_consumer's lost-member case.)"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from aiokafka_lite import Producer
from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume.share import AcknowledgeType, ShareConsumer, ShareRecord
from aiokafka_lite.core.errors import IllegalStateError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.testing.apache import ApacheCluster

Broker = EmbeddedCluster | ApacheCluster
LOCK_S = 15  # the shortest lock a group may have with Kafka's default bounds


@pytest.fixture
def share_broker(kafka_cluster: Broker) -> Broker:
    """``kafka_cluster``: the embedded broker, or under --kafka=apache Apache Kafka (scripts/test.sh
    runs this module in its Apache 4.4 pass)."""
    return kafka_cluster


async def poll_until(consumer: ShareConsumer, want: int, within_s: float) -> list[ShareRecord]:
    out: list[ShareRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while len(out) < want and loop.time() < deadline:
        out += await consumer.poll(timeout_ms=300)
    return out


async def test_renewed_record_outlives_its_lock_and_comes_back_for_the_final_ack(
    share_broker: Broker,
) -> None:
    suffix = uuid.uuid4().hex[:10]
    topic, group = f"share-renew-{suffix}", f"share-renew-{suffix}"
    share_broker.create_topic(topic, partitions=1)
    async with Admin(share_broker.bootstrap) as admin:
        configs = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_S * 1000)}
        (await admin.incremental_alter_configs({ConfigResource.group(group): configs})).raise_errors()
    async with Producer(share_broker.bootstrap) as producer:
        await producer.send(topic, b"long-job")
    tp = TopicPartition(topic, 0)
    loop = asyncio.get_running_loop()
    async with ShareConsumer(
        share_broker.bootstrap, group_id=group, topics=[topic], acknowledgement_mode="explicit"
    ) as consumer:
        (long_job,) = await poll_until(consumer, 1, within_s=30)
        acquired_at = loop.time()
        assert (long_job.offset, long_job.delivery_count) == (0, 1)
        await asyncio.sleep(LOCK_S * 2 / 3)  # working on the long job...
        consumer.acknowledge(long_job, AcknowledgeType.RENEW)
        with pytest.raises(IllegalStateError, match="already acknowledged"):
            consumer.acknowledge(long_job, AcknowledgeType.ACCEPT)  # not until it comes back
        assert await consumer.commit() == {tp: None}  # the lock restarts now
        # Past the first lock. Had it run out, the broker would have made the record
        # available again, the consumer (fetching all along) would have acquired it again
        # (delivery 2), and the first delivery's acknowledgement would fail.
        await asyncio.sleep(max(0.0, acquired_at + LOCK_S + 1 - loop.time()))
        again = await consumer.poll(timeout_ms=5000)
        assert [(r.offset, r.delivery_count, r.value) for r in again] == [(0, 1, b"long-job")]
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        assert await consumer.commit() == {tp: None}
        assert await poll_until(consumer, 1, within_s=2) == []
