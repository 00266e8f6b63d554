"""Backpressure: buffer_memory bounds what is buffered, writers block up to max_block_ms,
memory stays bounded under sustained overload."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

import pytest

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.produce import Producer
from aiokafka_lite.wire.messages import ProduceRequest

# Every test here slows the broker down on purpose (embedded broker's add_latency).
pytestmark = pytest.mark.kafka_embedded


async def test_full_buffer_blocks_then_times_out(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("bp", 1)
    async with Producer(
        kafka_cluster.bootstrap, buffer_memory=40_000, batch_size=10_000, max_block_ms=200, linger_ms=0
    ) as producer:
        await producer.send("bp", b"warm-up")
        kafka_cluster.add_latency(ProduceRequest, 1.0)
        loop = asyncio.get_running_loop()
        with pytest.raises(E.KafkaTimeoutError, match="buffer memory"):
            for _ in range(1000):
                await producer.enqueue("bp", b"x" * 1000)
        assert producer.metrics()["buffer_available_bytes"] < 10_000
        # a waiter is released as soon as memory comes back
        kafka_cluster.clear_faults()
        start = loop.time()
        await asyncio.wait_for(producer.flush(), 10)
        fut = await producer.enqueue("bp", b"x" * 1000)
        assert loop.time() - start < 5
        await producer.flush()
        assert fut.result().offset > 0


async def test_blocked_writers_fail_on_close(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("bc", 1)
    producer = Producer(kafka_cluster.bootstrap, buffer_memory=20_000, batch_size=10_000, linger_ms=0)
    await producer.start()
    await producer.send("bc", b"warm-up")
    kafka_cluster.add_latency(ProduceRequest, 0.5)

    async def writer() -> None:
        while True:
            await producer.enqueue("bc", b"x" * 1000)

    task = asyncio.create_task(writer())
    await asyncio.sleep(0.1)
    assert not task.done()  # blocked on memory
    await producer.abort()
    with pytest.raises(E.ProducerClosedError):
        await task


def _client_side_bytes() -> int:
    """Traced bytes not allocated by the (in-process) broker, which keeps its log."""
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, "*/aiokafka_lite/broker/*", all_frames=True)]
    )
    return sum(stat.size for stat in snap.statistics("filename"))


async def test_memory_stays_bounded_under_sustained_overload(kafka_cluster: EmbeddedCluster) -> None:
    """10 MB pushed by 4 writers through a 256 KB buffer into a slow broker: the
    producer's memory stays near the buffer size instead of growing with the backlog."""
    buffer = 256 * 1024
    kafka_cluster.create_topic("over", 2)
    kafka_cluster.add_latency(ProduceRequest, 0.002)
    value = b"v" * 1000
    per_writer = 2500
    samples: list[int] = []
    async with Producer(
        kafka_cluster.bootstrap, buffer_memory=buffer, batch_size=16384, linger_ms=1
    ) as producer:
        await producer.send("over", value)
        gc.collect()
        tracemalloc.start(12)
        try:
            baseline = _client_side_bytes()
            peak_used = 0

            async def writer(sampler: bool) -> None:
                nonlocal peak_used
                for i in range(per_writer):
                    await producer.enqueue("over", value)
                    if i % 250 == 0:
                        peak_used = max(peak_used, buffer - producer.metrics()["buffer_available_bytes"])
                        if sampler:
                            samples.append(_client_side_bytes() - baseline)

            await asyncio.gather(writer(True), writer(False), writer(False), writer(False))
            await producer.flush()
        finally:
            tracemalloc.stop()
    assert 4 * per_writer * len(value) >= 10_000_000
    assert 0 < peak_used <= buffer
    assert len(samples) == per_writer // 250
    # Unbounded buffering would hold tens of MB by the end; allow slack for in-flight
    # request frames, socket buffers and interpreter noise.
    assert max(samples) < 8 * buffer, samples
