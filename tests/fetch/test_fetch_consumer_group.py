"""The consumer with a group coordinator plugged in: committed positions, auto_offset_reset."""

from __future__ import annotations

import asyncio

from fetch_testlib import fill, take

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core.structs import TopicPartition

OPTS = {"fetch_max_wait_ms": 50, "heartbeat_interval_ms": 100, "session_timeout_ms": 6000}


async def test_group_consumer_resumes_from_committed(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("g", 2)
    tps = [TopicPartition("g", p) for p in range(2)]
    await fill(kafka_cluster.bootstrap, {tp: 10 for tp in tps})
    async with Consumer(
        kafka_cluster.bootstrap,
        topics=["g"],
        group_id="grp",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **OPTS,
    ) as consumer:
        got = await take(consumer, 20)
        assert sorted((r.partition, r.offset) for r in got) == [(p, o) for p in range(2) for o in range(10)]
        assert consumer.assignment() == set(tps)
        await consumer.commit({tps[0]: 4, tps[1]: 7})
        assert await consumer.committed(tps[0]) == 4
    async with Consumer(
        kafka_cluster.bootstrap, topics=["g"], group_id="grp", auto_offset_reset="latest", **OPTS
    ) as consumer:
        got = await take(consumer, 9)
        assert sorted((r.partition, r.offset) for r in got) == [(0, o) for o in range(4, 10)] + [
            (1, o) for o in range(7, 10)
        ]
        # auto-commit on close commits the consumed positions
    async with Consumer(
        kafka_cluster.bootstrap, topics=["g"], group_id="grp", auto_offset_reset="earliest", **OPTS
    ) as consumer:
        assert await consumer.getmany(timeout_ms=500) == {}
        assert {tp: await consumer.position(tp) for tp in tps} == {tps[0]: 10, tps[1]: 10}


async def test_manual_assignment_with_group_commits(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("m", 1)
    tp = TopicPartition("m", 0)
    await fill(kafka_cluster.bootstrap, {tp: 10})
    async with Consumer(
        kafka_cluster.bootstrap, group_id="manual", auto_offset_reset="earliest", **OPTS
    ) as c:
        c.assign([tp])
        assert [r.offset for r in await take(c, 10)] == list(range(10))
        await c.commit()
        assert await c.committed(tp) == 10
    async with Consumer(
        kafka_cluster.bootstrap, group_id="manual", auto_offset_reset="earliest", **OPTS
    ) as c:
        c.assign([tp])
        assert await c.position(tp) == 10  # from the committed offset, not auto_offset_reset


async def test_auto_commit_commits_only_records_handed_out(kafka_cluster: EmbeddedCluster) -> None:
    """With records fetched far beyond what the loop took, the periodic auto-commit
    commits the position after the last record handed out, never the fetch position."""
    kafka_cluster.create_topic("ac", 1)
    tp = TopicPartition("ac", 0)
    await fill(kafka_cluster.bootstrap, {tp: 500}, batch=250)
    async with Consumer(
        kafka_cluster.bootstrap,
        topics=["ac"],
        group_id="auto",
        auto_offset_reset="earliest",
        auto_commit_interval_ms=100,
        **OPTS,
    ) as consumer:
        got = await take(consumer, 37)
        assert [r.offset for r in got] == list(range(37))
        fetcher = consumer.fetcher
        assert fetcher is not None
        last = fetcher.buffer.last(tp)
        assert last is not None and last.next_fetch_offset > 37  # fetched beyond the loop
        seen: list[int | None] = []
        async with asyncio.timeout(30):
            while not seen or seen[-1] != 37:
                seen.append(await consumer.committed(tp))
                await asyncio.sleep(0.05)
        assert all(c is None or c <= 37 for c in seen), seen
        # The loop goes on from there: the next record is 37.
        assert [r.offset for r in await take(consumer, 3)] == [37, 38, 39]
