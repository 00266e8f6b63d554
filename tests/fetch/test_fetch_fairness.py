"""Fairness: serving buffered records never keeps the event loop from other tasks.

Every test counts the turns of a task that does nothing but ``await asyncio.sleep(0)``
while the consumer hands out records to a loop body that never awaits, and measures the
gaps between its turns in records handed out (not in seconds: the machine may be slow).
Without the consumer's own yields that task gets no turn at all while the buffer lasts.
"""

from __future__ import annotations

import asyncio

from _support.fairness import ticking, turn_gaps
from fetch_testlib import fill

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core.structs import TopicPartition

TP = TopicPartition("fair", 0)
BIG_BUFFER = {
    "max_buffered_bytes": 256 * 1024 * 1024,
    "fetch_max_bytes": 64 * 1024 * 1024,
    "max_partition_fetch_bytes": 64 * 1024 * 1024,
}


async def all_buffered(consumer: Consumer, tp: TopicPartition, end: int) -> None:
    """Waits until the fetcher holds every record of ``tp`` up to ``end``."""
    fetcher = consumer.fetcher
    assert fetcher is not None
    async with asyncio.timeout(60):
        while True:
            last = fetcher.buffer.last(tp)
            if last is not None and last.next_fetch_offset >= end:
                return
            await asyncio.sleep(0.01)


async def test_async_for_over_buffered_records_lets_other_tasks_run(kafka_cluster: EmbeddedCluster) -> None:
    n = 120_000
    kafka_cluster.create_topic(TP.topic, 1)
    await fill(kafka_cluster.bootstrap, {TP: n}, batch=2000)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **BIG_BUFFER) as consumer:
        consumer.assign([TP])
        await all_buffered(consumer, TP, n)
        async with ticking() as ticker:
            turns_at: list[int] = []
            async for rec in consumer:
                turns_at.append(ticker.turns)
                if rec.offset == n - 1:
                    break
    assert len(turns_at) == n
    turns, longest = turn_gaps(turns_at)
    assert turns >= 5, turns
    # 3 ms between turns is a few thousand records at most at this body's speed.
    assert longest < 20_000, longest


async def test_slow_loop_body_still_lets_other_tasks_run(kafka_cluster: EmbeddedCluster) -> None:
    """The check points adapt to a loop body that does synchronous work per record."""
    n = 8_000
    kafka_cluster.create_topic(TP.topic, 1)
    await fill(kafka_cluster.bootstrap, {TP: n}, batch=2000)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **BIG_BUFFER) as consumer:
        consumer.assign([TP])
        await all_buffered(consumer, TP, n)
        async with ticking() as ticker:
            turns_at: list[int] = []
            async for rec in consumer:
                turns_at.append(ticker.turns)
                sum(range(2_000))  # ~20-50 us of work that never awaits
                if rec.offset == n - 1:
                    break
    turns, longest = turn_gaps(turns_at)
    assert turns >= 5, turns
    # The first check point comes after 16 records and respaces them to ~0.5 ms of this
    # body; turns then come every ~3 ms: about a hundred records.
    assert longest < 1_000, longest


async def test_getmany_loop_that_never_awaits_lets_other_tasks_run(kafka_cluster: EmbeddedCluster) -> None:
    n = 120_000
    kafka_cluster.create_topic(TP.topic, 1)
    await fill(kafka_cluster.bootstrap, {TP: n}, batch=2000)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **BIG_BUFFER) as consumer:
        consumer.assign([TP])
        await all_buffered(consumer, TP, n)
        async with ticking() as ticker:
            turns_at: list[int] = []
            while len(turns_at) < n:
                batch = await consumer.getmany(max_records=500)
                for recs in batch.values():
                    turns_at.extend(ticker.turns for _ in recs)
    turns, longest = turn_gaps(turns_at)
    assert turns >= 5, turns
    assert longest < 20_000, longest


async def test_getmany_with_nothing_buffered_lets_the_fetcher_run(kafka_cluster: EmbeddedCluster) -> None:
    """``getmany()`` (``timeout_ms=0``) in a loop that never awaits: each empty call
    yields, so the fetcher fills the buffer and the loop gets the records."""
    kafka_cluster.create_topic(TP.topic, 1)
    await fill(kafka_cluster.bootstrap, {TP: 10})
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        got = 0
        calls = 0
        # Without a yield in the empty call the fetcher never runs: no bound on the
        # calls would be reached then (and nothing else could stop the loop).
        while got < 10 and calls < 2_000_000:
            calls += 1
            batch = await consumer.getmany()
            got += sum(map(len, batch.values()))
        assert got == 10, calls


async def test_cancelled_at_the_yield_loses_no_record(kafka_cluster: EmbeddedCluster) -> None:
    """Steps cancelled while the consumer lets other tasks run take nothing: every record
    is handed out exactly once, in order."""
    n = 30_000
    kafka_cluster.create_topic(TP.topic, 1)
    await fill(kafka_cluster.bootstrap, {TP: n}, batch=2000)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **BIG_BUFFER) as consumer:
        consumer.assign([TP])
        await all_buffered(consumer, TP, n)
        offsets: list[int] = []
        cancelled = 0
        it = aiter(consumer)
        async with asyncio.timeout(120):
            while len(offsets) < n:
                step = asyncio.ensure_future(anext(it))
                await asyncio.sleep(0)  # the step runs up to its first real suspension
                if step.done():
                    offsets.append(step.result().offset)
                    continue
                step.cancel()  # suspended: at a fairness yield (nothing is waited for)
                try:
                    offsets.append((await step).offset)
                except asyncio.CancelledError:
                    cancelled += 1
    assert cancelled > 0  # the pattern did cancel steps at their yields
    assert offsets == list(range(n))
