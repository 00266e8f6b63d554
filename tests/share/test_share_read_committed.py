"""share.isolation.level=read_committed, on the embedded broker and Apache Kafka 4.4: a
share group delivers only records below the last stable offset, never those of aborted
transactions; read_uncommitted delivers everything, at once."""

from __future__ import annotations

import asyncio
import uuid

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


async def poll_values(consumer: ShareConsumer, want: int, within_s: float = 30.0) -> list[ShareRecord]:
    out: list[ShareRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while len(out) < want and loop.time() < deadline:
        out += await consumer.poll(timeout_ms=300)
    return out


async def test_read_committed_share_group_skips_aborted_and_waits_for_open_transactions(
    share_broker: Broker,
) -> None:
    suffix = uuid.uuid4().hex[:10]
    topic, committed_group, uncommitted_group = (
        f"share-rc-{suffix}",
        f"share-rc-{suffix}",
        f"share-ru-{suffix}",
    )
    share_broker.create_topic(topic, partitions=1)
    async with Admin(share_broker.bootstrap) as admin:
        changes = {
            ConfigResource.group(committed_group): {
                "share.auto.offset.reset": "earliest",
                "share.isolation.level": "read_committed",
            },
            ConfigResource.group(uncommitted_group): {"share.auto.offset.reset": "earliest"},
        }
        (await admin.incremental_alter_configs(changes)).raise_errors()
    async with (
        Producer(share_broker.bootstrap) as plain,
        Producer(share_broker.bootstrap, transactional_id=f"rc-a-{suffix}") as txn,
        Producer(share_broker.bootstrap, transactional_id=f"rc-b-{suffix}") as open_txn,
    ):
        await plain.send(topic, b"plain-0")
        await txn.begin_transaction()
        await txn.send(topic, b"committed-1")
        await txn.send(topic, b"committed-2")
        await txn.commit_transaction()
        await txn.begin_transaction()
        await txn.send(topic, b"aborted-1")
        await txn.send(topic, b"aborted-2")
        await txn.abort_transaction()
        await plain.send(topic, b"plain-1")
        await open_txn.begin_transaction()
        await open_txn.send(topic, b"open-1")
        await open_txn.flush()
        await plain.send(topic, b"plain-2")  # behind the open transaction

        async with (
            ShareConsumer(share_broker.bootstrap, group_id=committed_group, topics=[topic]) as rc,
            ShareConsumer(share_broker.bootstrap, group_id=uncommitted_group, topics=[topic]) as ru,
        ):
            everything = await poll_values(ru, 8)
            assert [r.value for r in everything] == [
                b"plain-0",
                b"committed-1",
                b"committed-2",
                b"aborted-1",
                b"aborted-2",
                b"plain-1",
                b"open-1",
                b"plain-2",
            ]
            stable = await poll_values(rc, 4)
            assert [r.value for r in stable] == [b"plain-0", b"committed-1", b"committed-2", b"plain-1"]
            # Nothing at or past the open transaction's first record, for as long as it is open.
            assert await poll_values(rc, 1, within_s=3) == []
            await open_txn.commit_transaction()
            rest = await poll_values(rc, 2)
            assert [r.value for r in rest] == [b"open-1", b"plain-2"]
            assert await poll_values(rc, 1, within_s=2) == []
            assert await poll_values(ru, 1, within_s=1) == []
    delivered = everything + stable + rest
    assert {r.delivery_count for r in delivered} == {1}
    offsets = [r.offset for r in everything]
    assert offsets == sorted(offsets)
    # The same records at the same offsets for both groups (markers take offsets too).
    by_value = {r.value: r.offset for r in everything}
    assert all(by_value[r.value] == r.offset for r in stable + rest)
