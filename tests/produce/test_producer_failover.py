"""Cluster changes while producing: a broker crash, partitions added, cancelled sends."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from producer_testlib import read_topic

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.produce import Producer, RecordMetadata


@pytest.mark.kafka_embedded
async def test_broker_crash_moves_leaders_and_nothing_is_lost(
    kafka_cluster_factory: Callable[..., Awaitable[EmbeddedCluster]],
) -> None:
    cluster = await kafka_cluster_factory(brokers=3)
    cluster.create_topic("crash", 3, replication_factor=3)
    leaders = {p.leader_id for p in cluster.topic("crash").partitions}
    assert len(leaders) > 1
    async with Producer(
        cluster.bootstrap, linger_ms=1, retry_backoff_ms=20, request_timeout_ms=3000
    ) as producer:
        futs = []
        for i in range(6000):
            if i == 2000:
                await cluster.stop_broker(sorted(leaders)[0])
            futs.append(await producer.enqueue("crash", b"%05d" % i, key=b"k%d" % (i % 7)))
            if i % 200 == 0:
                await asyncio.sleep(0.001)
        await producer.flush()
        assert all(f.exception() is None for f in futs)
    stopped = sorted(leaders)[0]
    assert stopped not in {p.leader_id for p in cluster.topic("crash").partitions}
    got = await read_topic(cluster.bootstrap, "crash", 3)
    values = sorted(r.value for records in got.values() for r in records if r.value is not None)
    assert values == [b"%05d" % i for i in range(6000)]
    for records in got.values():  # per-key order survives the fail-over
        by_key: dict[bytes | None, list[bytes | None]] = {}
        for r in records:
            by_key.setdefault(r.key, []).append(r.value)
        assert all(v == sorted(v) for v in by_key.values())  # type: ignore[type-var]


@pytest.mark.kafka_embedded
async def test_new_partitions_are_picked_up(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("grow", 2)
    async with Producer(kafka_cluster.bootstrap) as producer:
        await producer.send("grow", b"v")
        kafka_cluster.state.add_partitions("grow", 4)
        md = await producer.send("grow", b"v", partition=3)  # waits for metadata to show it
        assert md.partition == 3 and md.offset == 0
        assert await producer.partitions_for("grow") == [0, 1, 2, 3]


async def test_cancelled_send_still_delivers_and_leaves_producer_usable(
    kafka_cluster: EmbeddedCluster,
) -> None:
    kafka_cluster.create_topic("cx", 1)
    # linger_ms: the window for cancelling "a" while it waits for its delivery.
    async with Producer(kafka_cluster.bootstrap, linger_ms=1000) as producer:
        task = asyncio.create_task(producer.send("cx", b"a"))
        # Cancel once "a" is in a batch (the first send waits for the topic's metadata
        # first; a fixed sleep cancelled that wait instead on a busy machine).
        async with asyncio.timeout(30):
            while not producer._acc.incomplete:  # noqa: ASYNC110 - the accumulator has no event
                await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        md = await producer.send("cx", b"b")
        assert md == RecordMetadata("cx", 0, 1, md.timestamp_ms)  # "a" went out first
        fut = await producer.enqueue("cx", b"c")
        real = fut.as_future()
        assert (await real).offset == 2 and real.done()
