"""The pure failure logic shared by OrderedWorkers and ShareWorkers: the sliding failure
window, the handler timeout, the callback's decision and the dead-letter headers."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite.core.errors import ConfigError, KafkaTimeoutError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.processing.failures import (
    FailureCounts,
    FailureDecision,
    FailureKind,
    FailureReport,
    FailureThresholdError,
    FailureWindow,
    HandlerTimeoutError,
    call_handler,
    dead_letter_headers,
    decide,
    failure_kind,
)

E, T = FailureKind.ERROR, FailureKind.TIMEOUT


def test_window_reports_only_more_than_threshold_failures_within_the_window() -> None:
    window = FailureWindow(threshold=3, window_ms=1000)
    assert window.add(E, 0) is None
    assert window.add(T, 100) is None
    assert window.add(E, 200) is None  # 3 failures: not more than the threshold
    assert window.add(T, 300) == FailureCounts(errors=2, timeouts=2)
    # Reported once: counting starts afresh.
    assert window.counts(300) == FailureCounts()
    assert [window.add(E, t) for t in (400, 500, 600)] == [None, None, None]
    assert window.add(E, 700) == FailureCounts(errors=4)


def test_window_forgets_failures_older_than_the_window() -> None:
    window = FailureWindow(threshold=2, window_ms=1000)
    assert window.add(E, 0) is None
    assert window.add(E, 500) is None
    # The first failure is exactly window_ms old: outside (the window is (now - W, now]).
    assert window.add(E, 1000) is None
    assert window.counts(1000) == FailureCounts(errors=2)
    assert window.add(T, 1499) == FailureCounts(errors=2, timeouts=1)
    # Slow failures never add up.
    slow = FailureWindow(threshold=1, window_ms=100)
    assert all(slow.add(E, t * 100) is None for t in range(20))


def test_threshold_zero_reports_every_failure() -> None:
    window = FailureWindow(threshold=0, window_ms=10)
    assert window.add(T, 0) == FailureCounts(timeouts=1)
    assert window.add(E, 1) == FailureCounts(errors=1)


def test_window_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="failure_threshold"):
        FailureWindow(threshold=-1, window_ms=10)
    with pytest.raises(ConfigError, match="failure_window_ms"):
        FailureWindow(threshold=1, window_ms=0)


async def test_call_handler_cancels_a_slow_handler_and_raises_a_timeout() -> None:
    cancelled = asyncio.Event()

    async def slow(record: int) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(HandlerTimeoutError) as info:
        await call_handler(slow, 1, timeout_ms=20)
    assert cancelled.is_set()
    assert info.value.timeout_ms == 20 and "20 ms" in str(info.value)
    assert isinstance(info.value, KafkaTimeoutError) and isinstance(info.value, TimeoutError)
    assert failure_kind(info.value) is FailureKind.TIMEOUT


async def test_call_handler_keeps_the_handlers_own_timeout_error_an_error() -> None:
    async def gives_up(record: int) -> None:
        raise TimeoutError("downstream timed out")

    with pytest.raises(TimeoutError) as info:
        await call_handler(gives_up, 1, timeout_ms=10_000)
    assert not isinstance(info.value, HandlerTimeoutError)
    assert failure_kind(info.value) is FailureKind.ERROR


async def test_call_handler_sync_async_and_no_timeout() -> None:
    seen: list[int] = []

    def sync(record: int) -> None:
        seen.append(record)

    async def fast(record: int) -> None:
        await asyncio.sleep(0)
        seen.append(record * 10)

    await call_handler(sync, 1, timeout_ms=5)
    await call_handler(fast, 2, timeout_ms=5_000)
    await call_handler(fast, 3, timeout_ms=None)
    assert seen == [1, 20, 30]
    with pytest.raises(ValueError):
        await call_handler(lambda r: int("x"), 1, timeout_ms=5)


def _report(error: BaseException) -> FailureReport:
    return FailureReport(
        partition=TopicPartition("t", 3),
        counts=FailureCounts(errors=2, timeouts=3),
        threshold=4,
        window_ms=500,
        record=None,
        error=error,
    )


async def test_decide_accepts_enums_strings_and_coroutines() -> None:
    report = _report(ValueError("x"))
    assert await decide(lambda r: FailureDecision.PAUSE, report) is FailureDecision.PAUSE
    assert await decide(lambda r: "continue", report) is FailureDecision.CONTINUE

    async def later(r: FailureReport) -> str:
        return "stop"

    assert await decide(later, report) is FailureDecision.STOP
    with pytest.raises(ConfigError, match="'stop', 'pause' or 'continue'"):
        await decide(lambda r: None, report)  # type: ignore[arg-type,return-value]


def test_threshold_error_names_the_counts_and_partition() -> None:
    err = FailureThresholdError(_report(HandlerTimeoutError(50)))
    text = str(err)
    assert "5 handler failures on t-3 within 500 ms" in text
    assert "2 errors, 3 timeouts; threshold 4" in text and "HandlerTimeoutError" in text
    assert err.report.counts.total == 5


def test_dead_letter_headers_keep_the_records_headers_first() -> None:
    headers = dead_letter_headers(
        headers=[("trace", b"abc"), ("empty", None)],
        error=HandlerTimeoutError(250),
        topic="orders",
        partition=2,
        offset=41,
        attempts=4,
    )
    assert headers == [
        ("trace", b"abc"),
        ("empty", None),
        ("dlt.error", b"handler timed out after 250 ms and was cancelled"),
        ("dlt.error.type", b"HandlerTimeoutError"),
        ("dlt.topic", b"orders"),
        ("dlt.partition", b"2"),
        ("dlt.offset", b"41"),
        ("dlt.attempts", b"4"),
    ]
