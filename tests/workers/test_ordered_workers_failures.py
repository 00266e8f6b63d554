"""OrderedWorkers on a scripted consumer: handler timeouts, the failure threshold and its
decisions (stop, pause, continue), dead letters and when their records are committed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from workers_testlib import FakeConsumer, FakeProducer, Rec, eventually

from aiokafka_lite.core.errors import ConfigError, KafkaConnectionError
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.processing.failures import (
    FailureCounts,
    FailureDecision,
    FailureReport,
    FailureThresholdError,
    HandlerTimeoutError,
)
from aiokafka_lite.processing.ordered_workers import OrderedWorkers, WorkerFailedError

TP0, TP1 = TP("t", 0), TP("t", 1)


@pytest.fixture
async def tasks() -> AsyncIterator[list[asyncio.Task[None]]]:
    started: list[asyncio.Task[None]] = []
    yield started
    for t in started:
        t.cancel()
    await asyncio.gather(*started, return_exceptions=True)


def start(pool: OrderedWorkers, tasks: list[asyncio.Task[None]]) -> asyncio.Task[None]:
    task = asyncio.create_task(pool.run())
    tasks.append(task)
    return task


async def test_a_slow_handler_is_cancelled_and_counted_as_a_timeout(tasks: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=6)
    cancelled: list[int] = []

    async def handle(rec: Rec) -> None:
        if rec.offset == 3:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(rec.offset)
                raise

    pool = OrderedWorkers(consumer, handle, on_failure="skip", handler_timeout_ms=30, commit_interval_ms=10)
    task = start(pool, tasks)
    await eventually(lambda: consumer.committed.get(TP0) == 6)
    pool.stop()
    await task
    assert cancelled == [3]
    assert (pool.stats.timeouts, pool.stats.skipped, pool.stats.processed) == (1, 1, 6)


async def test_a_timeout_under_stop_reports_the_timeout() -> None:
    consumer = FakeConsumer(partitions=1, per_partition=5)

    async def handle(rec: Rec) -> None:
        if rec.offset == 2:
            await asyncio.sleep(60)

    pool = OrderedWorkers(consumer, handle, handler_timeout_ms=30)
    with pytest.raises(WorkerFailedError) as info:
        await asyncio.wait_for(pool.run(), 10)
    assert isinstance(info.value.cause, HandlerTimeoutError) and "timed out after 30 ms" in str(info.value)
    assert consumer.committed[TP0] == 2


async def test_threshold_callback_gets_the_counts_and_continue_carries_on(
    tasks: list[asyncio.Task[None]],
) -> None:
    consumer = FakeConsumer(partitions=2, per_partition=10)
    reports: list[FailureReport] = []

    async def handle(rec: Rec) -> None:
        if rec.partition == 0 and rec.offset in (1, 2, 3, 4):
            if rec.offset == 2:
                await asyncio.sleep(60)  # a timeout
            raise ValueError(f"bad {rec.offset}")

    def on_threshold(report: FailureReport) -> str:
        reports.append(report)
        return "continue"

    pool = OrderedWorkers(
        consumer,
        handle,
        on_failure="skip",
        handler_timeout_ms=30,
        failure_threshold=2,
        failure_window_ms=60_000,
        on_failure_threshold=on_threshold,
        commit_interval_ms=10,
    )
    task = start(pool, tasks)
    await eventually(lambda: consumer.committed.get(TP0) == 10 and consumer.committed.get(TP1) == 10)
    pool.stop()
    await task
    # Third failure (offset 3) crosses "more than 2"; the count starts afresh after it.
    assert len(reports) == 1
    (report,) = reports
    assert report.partition == TP0 and report.record.offset == 3
    assert report.counts == FailureCounts(errors=2, timeouts=1)
    assert report.threshold == 2 and report.window_ms == 60_000 and isinstance(report.error, ValueError)
    assert (pool.stats.skipped, pool.stats.timeouts, pool.stats.threshold_reports) == (4, 1, 1)


async def test_threshold_stop_stops_the_pool_without_committing_the_record() -> None:
    consumer = FakeConsumer(partitions=1, per_partition=10)

    def handle(rec: Rec) -> None:
        if rec.offset >= 4:
            raise RuntimeError("downstream down")

    async def on_threshold(report: FailureReport) -> FailureDecision:
        await asyncio.sleep(0)
        return FailureDecision.STOP

    pool = OrderedWorkers(
        consumer,
        handle,
        on_failure="retry",
        max_retries=None,
        retry_backoff_ms=1,
        retry_backoff_max_ms=1,
        failure_threshold=3,
        on_failure_threshold=on_threshold,
    )
    with pytest.raises(FailureThresholdError) as info:
        await asyncio.wait_for(pool.run(), 10)
    assert info.value.report.counts == FailureCounts(errors=4)
    assert info.value.report.record.offset == 4
    assert pool.stats.retries == 3
    assert consumer.committed[TP0] == 4


async def test_threshold_without_callback_or_with_a_failing_one_stops() -> None:
    def handle(rec: Rec) -> None:
        raise RuntimeError("always")

    pool = OrderedWorkers(FakeConsumer(1, 5), handle, on_failure="skip", failure_threshold=1)
    with pytest.raises(FailureThresholdError) as info:
        await asyncio.wait_for(pool.run(), 10)
    assert info.value.report.counts.total == 2

    def broken(report: FailureReport) -> FailureDecision:
        raise KeyError("oops")

    pool = OrderedWorkers(
        FakeConsumer(1, 5), handle, on_failure="skip", failure_threshold=0, on_failure_threshold=broken
    )
    with pytest.raises(FailureThresholdError) as info:
        await asyncio.wait_for(pool.run(), 10)
    assert isinstance(info.value.__cause__, KeyError)

    pool = OrderedWorkers(
        FakeConsumer(1, 5),
        handle,
        on_failure="skip",
        failure_threshold=0,
        on_failure_threshold=lambda r: "later",
    )
    with pytest.raises(FailureThresholdError) as info:
        await asyncio.wait_for(pool.run(), 10)
    assert isinstance(info.value.__cause__, ConfigError)


async def test_threshold_pause_holds_the_partition_until_resumed(tasks: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=2, per_partition=20)
    broken = asyncio.Event()
    broken.set()
    handled: list[tuple[int, int]] = []

    def handle(rec: Rec) -> None:
        if rec.partition == 0 and rec.offset == 5 and broken.is_set():
            raise RuntimeError("downstream down")
        handled.append((rec.partition, rec.offset))

    pool = OrderedWorkers(
        consumer,
        handle,
        on_failure="retry",
        max_retries=None,
        retry_backoff_ms=1,
        retry_backoff_max_ms=1,
        failure_threshold=2,
        on_failure_threshold=lambda r: FailureDecision.PAUSE,
        commit_interval_ms=10,
    )
    task = start(pool, tasks)
    await eventually(lambda: pool.paused_partitions() == {TP0})
    assert TP0 in consumer.paused
    # The other partition is not held up.
    await eventually(lambda: consumer.committed.get(TP1) == 20)
    await asyncio.sleep(0.05)
    assert consumer.committed.get(TP0) == 5 and pool.in_flight() == set()
    assert [o for p, o in handled if p == 0] == [0, 1, 2, 3, 4]
    broken.clear()
    pool.resume_partition(TP0)
    await eventually(lambda: consumer.committed.get(TP0) == 20)
    assert [o for p, o in handled if p == 0] == list(range(20))  # in order, offset 5 retried first
    assert TP0 not in consumer.paused and pool.paused_partitions() == set()
    pool.stop()
    await task
    assert pool.stats.retries == 2  # two retries, the third failure paused


async def test_threshold_pause_with_a_duration_resumes_by_itself(tasks: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=10)
    failures = 0

    def handle(rec: Rec) -> None:
        nonlocal failures
        if rec.offset == 3 and failures < 2:
            failures += 1
            raise RuntimeError("flaky")

    decisions: list[int] = []

    def on_threshold(report: FailureReport) -> str:
        decisions.append(report.counts.total)
        return "pause"

    pool = OrderedWorkers(
        consumer,
        handle,
        on_failure="skip",
        failure_threshold=0,
        failure_pause_ms=50,
        on_failure_threshold=on_threshold,
        commit_interval_ms=10,
    )
    task = start(pool, tasks)
    await eventually(lambda: consumer.committed.get(TP0) == 10)
    pool.stop()
    await task
    assert decisions == [1, 1]  # paused twice, then offset 3 succeeded
    assert pool.stats.skipped == 0 and pool.stats.processed == 10


async def test_skipped_records_are_dead_lettered_before_they_are_committed(
    tasks: list[asyncio.Task[None]],
) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=10)
    producer = FakeProducer()
    producer.gate = asyncio.Event()

    def handle(rec: Rec) -> None:
        if rec.offset == 4:
            raise ValueError("cannot parse")

    pool = OrderedWorkers(
        consumer,
        handle,
        on_failure="retry",
        max_retries=2,
        retry_backoff_ms=1,
        retry_backoff_max_ms=1,
        dead_letter_topic="t.dlt",
        producer=producer,
        commit_interval_ms=10,
    )
    task = start(pool, tasks)
    await eventually(lambda: consumer.committed.get(TP0) == 4)
    await asyncio.sleep(0.1)
    assert consumer.committed[TP0] == 4  # the dead letter is not acknowledged yet
    producer.gate.set()
    await eventually(lambda: consumer.committed.get(TP0) == 10)
    pool.stop()
    await task
    ((topic, value, key, headers),) = producer.sent
    assert (topic, value, key) == ("t.dlt", b"v4", b"k4")
    assert headers == [
        ("h", b"x"),
        ("dlt.error", b"cannot parse"),
        ("dlt.error.type", b"ValueError"),
        ("dlt.topic", b"t"),
        ("dlt.partition", b"0"),
        ("dlt.offset", b"4"),
        ("dlt.attempts", b"3"),
    ]
    assert (pool.stats.dead_lettered, pool.stats.skipped, pool.stats.retries) == (1, 1, 2)


@pytest.mark.parametrize("error", [KafkaConnectionError("target down"), TypeError("cannot serialize")])
async def test_a_failed_dead_letter_stops_the_pool(error: Exception) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=10)
    producer = FakeProducer()
    producer.fail = error

    async def handle(rec: Rec) -> None:
        if rec.offset == 6:
            await asyncio.sleep(60)

    pool = OrderedWorkers(
        consumer, handle, on_failure="skip", handler_timeout_ms=20, dead_letter_topic="d", producer=producer
    )
    with pytest.raises(WorkerFailedError) as info:
        await asyncio.wait_for(pool.run(), 10)
    assert info.value.cause is error
    assert consumer.committed[TP0] == 6 and pool.stats.dead_lettered == 0


def test_failure_configuration_errors() -> None:
    consumer = FakeConsumer(1, 1)

    def handle(rec: Rec) -> None:
        return None

    with pytest.raises(ConfigError, match="handler_timeout_ms"):
        OrderedWorkers(consumer, handle, handler_timeout_ms=0)
    with pytest.raises(ConfigError, match="needs failure_threshold"):
        OrderedWorkers(consumer, handle, on_failure_threshold=lambda r: "stop")
    with pytest.raises(ConfigError, match="failure_window_ms"):
        OrderedWorkers(consumer, handle, failure_threshold=3, failure_window_ms=0)
    with pytest.raises(ConfigError, match="failure_pause_ms"):
        OrderedWorkers(consumer, handle, failure_threshold=3, failure_pause_ms=-1)
    with pytest.raises(ConfigError, match="go together"):
        OrderedWorkers(consumer, handle, on_failure="skip", dead_letter_topic="d")
    with pytest.raises(ConfigError, match="under 'stop'"):
        OrderedWorkers(consumer, handle, dead_letter_topic="d", producer=FakeProducer())
