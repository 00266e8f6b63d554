"""KIP-951 in the consumer: a fetch response naming the partition's new leader moves
fetching there at once, without waiting for a metadata refresh."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from fetch_testlib import fill, produce_raw, take

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.wire.messages import MetadataRequest, OffsetForLeaderEpochRequest

Factory = Callable[..., Awaitable[EmbeddedCluster]]
T0 = TopicPartition("t", 0)
FAST = {"fetch_max_wait_ms": 50, "retry_backoff_ms": 20, "metadata_max_age_ms": 600_000}


async def _three_brokers_ten_records(factory: Factory) -> EmbeddedCluster:
    cluster = await factory(brokers=3)
    cluster.create_topic("t", 1, replication_factor=3)
    await fill(cluster.bootstrap, {T0: 10}, batch=5)
    return cluster


@contextlib.asynccontextmanager
async def _consumer_past_the_ten(cluster: EmbeddedCluster) -> AsyncIterator[Consumer]:
    """A consumer of T0 that has read the ten records (so it fetches from the leader)."""
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([T0])
        assert [r.offset for r in await take(consumer, 10)] == list(range(10))
        yield consumer


@pytest.mark.kafka_embedded  # moves a leader and holds metadata answers back
async def test_fetch_follows_the_leader_named_in_the_response(kafka_cluster_factory: Factory) -> None:
    cluster = await _three_brokers_ten_records(kafka_cluster_factory)
    async with _consumer_past_the_ten(cluster) as consumer:
        old = consumer.client.cluster.leader_for(T0)
        new, new_epoch = cluster.move_leader("t", 0)
        assert new != old
        async with Client(cluster.bootstrap) as client:
            await client.refresh_metadata(["t"])
            await produce_raw(client, T0, [(None, b"after-move")])
        # From now on no metadata answer reaches the consumer in time: only the fetch
        # response's CurrentLeader can send it to the new leader.
        cluster.add_latency(MetadataRequest, 3600.0)
        try:
            got = await take(consumer, 1, limit_s=30)
            assert (got[0].offset, got[0].value) == (10, b"after-move")
            assert got[0].leader_epoch == new_epoch
            fetcher = consumer.fetcher
            assert fetcher is not None and fetcher.partitions_moved_by_leader_hint == 1
            assert consumer.client.cluster.leader_for(T0) == new
            assert consumer.client.cluster.leader_epoch(T0) == new_epoch
        finally:
            cluster.clear_faults()


@pytest.mark.kafka_embedded  # moves a leader, holds metadata answers back, fails one request
async def test_position_check_at_a_new_leader_not_ready_yet_retries_without_metadata(
    kafka_cluster_factory: Factory,
) -> None:
    """A new leader can name itself in metadata a moment before it takes the partition
    (Apache applies the metadata image before the partition's state): the first
    OffsetForLeaderEpoch there is refused as UNKNOWN_LEADER_EPOCH. The retry has to go
    to the leader the consumer knows from the hint, not wait for a metadata answer."""
    cluster = await _three_brokers_ten_records(kafka_cluster_factory)
    async with _consumer_past_the_ten(cluster) as consumer:
        consumer.pause(T0)
        fetcher = consumer.fetcher
        assert fetcher is not None
        async with asyncio.timeout(10):  # a fetch sent before the pause would read offset 10
            while T0 in fetcher._inflight:  # noqa: ASYNC110 - in-flight fetches have no event
                await asyncio.sleep(0.005)
        await fill(cluster.bootstrap, {T0: 1})
        old = consumer.client.cluster.leader_for(T0)
        new = next(b.node_id for b in cluster.brokers if b.node_id != old)
        cluster.add_latency(MetadataRequest, 3600.0)
        cluster.inject_error(OffsetForLeaderEpochRequest, 75, broker_id=new)  # UNKNOWN_LEADER_EPOCH
        _, new_epoch = cluster.move_leader("t", 0, new)
        consumer.resume(T0)
        try:
            got = await take(consumer, 1, limit_s=30)
            assert got[0].offset == 10
            assert fetcher.partitions_moved_by_leader_hint == 1
            assert consumer.client.cluster.leader_epoch(T0) == new_epoch
            assert not cluster.faults._errors, "the consumer never asked the new leader"
        finally:
            cluster.clear_faults()
