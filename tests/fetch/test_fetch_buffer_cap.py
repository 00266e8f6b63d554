"""FetchBuffer accounting (unit) and the buffered-bytes cap with a slow consumer (broker)."""

from __future__ import annotations

import asyncio

from fetch_testlib import fill, take

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.consume.fetch.buffer import FetchBuffer
from aiokafka_lite.consume.fetch.decode import CompletedFetch
from aiokafka_lite.core.structs import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


def cf(tp: TopicPartition, offset: int, size: int) -> CompletedFetch:
    return CompletedFetch(tp, offset, [], offset + 1, size)


def test_buffer_accounting_and_round_robin() -> None:
    buf = FetchBuffer(100)
    a1, a2, b1 = cf(A, 0, 10), cf(A, 1, 20), cf(B, 0, 30)
    for x in (a1, a2, b1):
        buf.add(x)
    buf.reserve(15)
    assert buf.buffered_bytes == 60 and buf.available() == 25
    assert buf.last(A) is a2 and buf.first(A) is a1 and buf.bytes_for(A) == 30
    yes = lambda tp: True  # noqa: E731
    assert buf.next_ready(yes) is a1
    assert buf.next_ready(yes) is b1  # rotates to the other partition
    assert buf.next_ready(yes) is a1
    assert buf.next_ready(lambda tp: tp == B) is b1  # skips non-consumable (paused) partitions
    buf.done(a1)
    assert buf.first(A) is a2 and buf.buffered_bytes == 50
    buf.done(a1)  # not at the head any more: ignored
    assert buf.buffered_bytes == 50
    assert buf.drop([A]) == 20 and not buf.has_data(A)
    buf.unreserve(15)
    assert buf.available() == 70
    buf.clear()
    assert buf.buffered_bytes == 0 and buf.next_ready(yes) is None


async def test_slow_consumer_stays_under_cap(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 4)
    tps = [TopicPartition("t", p) for p in range(4)]
    await fill(kafka_cluster.bootstrap, {tp: 1500 for tp in tps}, batch=20)  # ~700 KiB
    cap = 32 * 1024
    async with Consumer(
        kafka_cluster.bootstrap,
        auto_offset_reset="earliest",
        max_buffered_bytes=cap,
        max_partition_fetch_bytes=4096,
        fetch_max_wait_ms=50,
    ) as consumer:
        consumer.assign(tps)
        fetcher = consumer.fetcher
        assert fetcher is not None
        peak = 0
        seen = 0
        async with asyncio.timeout(60):
            while seen < 6000:
                batch = await consumer.getmany(timeout_ms=1000, max_records=50)
                seen += sum(map(len, batch.values()))
                peak = max(peak, fetcher.buffer.buffered_bytes + fetcher.buffer.reserved_bytes)
                await asyncio.sleep(0)  # let the fetcher run as much as it wants
        # A response may exceed its request by one batch (KIP-74); nothing more.
        assert peak <= cap + 4096
        assert peak > cap // 2  # and the buffer was actually used


async def test_paused_data_is_evicted_under_pressure(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    await fill(kafka_cluster.bootstrap, {A: 1500, B: 2000}, batch=20)
    async with Consumer(
        kafka_cluster.bootstrap,
        auto_offset_reset="earliest",
        max_buffered_bytes=16 * 1024,
        max_partition_fetch_bytes=2048,
        fetch_max_wait_ms=50,
    ) as consumer:
        consumer.assign([A, B])
        consumer.pause(B)
        first = await take(consumer, 5)
        assert {r.partition for r in first} == {0}
        fetcher = consumer.fetcher
        assert fetcher is not None
        for _ in range(500):  # let A's prefetched data fill the buffer up to the cap
            if fetcher.buffer.bytes_for(A) > 12 * 1024:
                break
            await asyncio.sleep(0.01)
        assert fetcher.buffer.bytes_for(A) > 12 * 1024
        consumer.pause(A)
        consumer.resume(B)
        # B has far more data than the cap while A's buffered data is paused: B must not stall.
        got = await take(consumer, 2000, limit_s=30)
        assert [r.offset for r in got] == list(range(2000))
        assert not fetcher.buffer.has_data(A)  # evicted, to be refetched on resume
        consumer.resume(A)
        rest = await take(consumer, 1495)
        assert [r.offset for r in rest] == list(range(5, 1500))
