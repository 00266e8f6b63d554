"""What the worker pools do when a record handler fails: shared by ``OrderedWorkers``
(``groups.workers``) and ``ShareWorkers`` (``share.workers``).

The decisions are plain functions and a small counter with no I/O, so they are tested
directly; the pools only call them:

* :func:`call_handler` runs one handler call under ``handler_timeout_ms``: a handler
  still running at the deadline is cancelled and the call raises
  :class:`HandlerTimeoutError`, a failure of its own kind (``FailureKind.TIMEOUT``);
* :class:`FailureWindow` counts failures over a sliding time window, like
  go_kafka_client's failure counter: once *more than* ``threshold`` failures fall within
  ``window_ms`` it answers with their counts (and starts counting afresh), and the pool
  asks the user's callback what to do (:class:`FailureDecision`);
* :func:`dead_letter_headers` builds the headers of a dead letter: the record's own
  headers, then the error and where the record came from.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aiokafka_lite.core import concurrency
from aiokafka_lite.core.errors import ConfigError, KafkaError, KafkaTimeoutError
from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "FailureCallback",
    "FailureCounts",
    "FailureDecision",
    "FailureKind",
    "FailureReport",
    "FailureThresholdError",
    "FailureWindow",
    "HandlerTimeoutError",
    "call_handler",
    "dead_letter_headers",
    "decide",
    "failure_kind",
]


class HandlerTimeoutError(KafkaTimeoutError):
    """A record handler ran longer than ``handler_timeout_ms`` and was cancelled."""

    def __init__(self, timeout_ms: float) -> None:
        self.timeout_ms = timeout_ms
        super().__init__(f"handler timed out after {timeout_ms:g} ms and was cancelled")


class FailureKind(StrEnum):
    """Why a handler call failed."""

    ERROR = "error"  # it raised
    TIMEOUT = "timeout"  # it ran past handler_timeout_ms and was cancelled


def failure_kind(exc: BaseException) -> FailureKind:
    return FailureKind.TIMEOUT if isinstance(exc, HandlerTimeoutError) else FailureKind.ERROR


class FailureDecision(StrEnum):
    """What the failure-threshold callback wants done (plain strings are accepted too)."""

    STOP = "stop"  # stop the pool: ``run`` raises FailureThresholdError
    PAUSE = "pause"  # OrderedWorkers: pause the failing partition; ShareWorkers: stop polling
    CONTINUE = "continue"  # carry on under the failure policy


@dataclass(frozen=True, slots=True)
class FailureCounts:
    """Failures within the window, by kind."""

    errors: int = 0
    timeouts: int = 0

    @property
    def total(self) -> int:
        return self.errors + self.timeouts


@dataclass(frozen=True, slots=True)
class FailureReport:
    """What the failure-threshold callback is told.

    ``partition`` is the partition whose failures crossed the threshold (OrderedWorkers
    counts per partition) or None (ShareWorkers counts for the whole pool); ``record``
    and ``error`` are the failure that crossed it.
    """

    partition: TopicPartition | None
    counts: FailureCounts
    threshold: int
    window_ms: float
    record: Any
    error: BaseException


FailureCallback = Callable[[FailureReport], FailureDecision | str | Awaitable[FailureDecision | str]]


class FailureThresholdError(KafkaError):
    """The failure-threshold callback said stop (or raised: then it is the ``__cause__``)."""

    def __init__(self, report: FailureReport) -> None:
        self.report = report
        where = (
            "" if report.partition is None else f" on {report.partition.topic}-{report.partition.partition}"
        )
        super().__init__(
            f"{report.counts.total} handler failures{where} within {report.window_ms:g} ms "
            f"({report.counts.errors} errors, {report.counts.timeouts} timeouts; threshold "
            f"{report.threshold}), last: {report.error!r}"
        )


class FailureWindow:
    """Counts failures over the last ``window_ms``; crossing ``threshold`` is reported once.

    ``add`` returns the counts when, with this failure, *more than* ``threshold``
    failures happened within ``window_ms`` (this one included), and then forgets them,
    so the next report needs another ``threshold + 1`` failures. Otherwise None. Times
    are milliseconds on any monotonic clock, passed in by the caller.
    """

    __slots__ = ("_failures", "threshold", "window_ms")

    def __init__(self, threshold: int, window_ms: float) -> None:
        if threshold < 0:
            raise ConfigError(f"failure_threshold must be >= 0, got {threshold}")
        if window_ms <= 0:
            raise ConfigError(f"failure_window_ms must be > 0, got {window_ms}")
        self.threshold = threshold
        self.window_ms = window_ms
        self._failures: deque[tuple[float, FailureKind]] = deque()

    def _expire(self, now_ms: float) -> None:
        failures = self._failures
        horizon = now_ms - self.window_ms
        while failures and failures[0][0] <= horizon:
            failures.popleft()

    def add(self, kind: FailureKind, now_ms: float) -> FailureCounts | None:
        self._expire(now_ms)
        self._failures.append((now_ms, kind))
        if len(self._failures) <= self.threshold:
            return None
        counts = self.counts(now_ms)
        self._failures.clear()
        return counts

    def counts(self, now_ms: float) -> FailureCounts:
        """The failures within the window ending at ``now_ms``."""
        self._expire(now_ms)
        timeouts = sum(1 for _, kind in self._failures if kind is FailureKind.TIMEOUT)
        return FailureCounts(errors=len(self._failures) - timeouts, timeouts=timeouts)

    def clear(self) -> None:
        self._failures.clear()


async def call_handler(handler: Callable[[Any], Any], record: Any, timeout_ms: float | None) -> None:
    """Run ``handler(record)``; await its result when it returns an awaitable.

    With ``timeout_ms``, an awaitable still pending at the deadline is cancelled and
    ``HandlerTimeoutError`` raised. A ``TimeoutError`` the handler raises itself stays
    an ordinary error. A synchronous handler cannot be interrupted: it runs to its end.
    """
    result = handler(record)
    if not inspect.isawaitable(result):
        return
    if timeout_ms is None:
        await result
        return
    async with concurrency.deadline(timeout_ms / 1000) as limit:
        await result
    if limit.expired:
        raise HandlerTimeoutError(timeout_ms)


async def decide(callback: FailureCallback, report: FailureReport) -> FailureDecision:
    """Ask ``callback``; an answer that is no decision raises ``ConfigError``."""
    answer = callback(report)
    if inspect.isawaitable(answer):
        answer = await answer
    try:
        return FailureDecision(answer)
    except ValueError:
        raise ConfigError(
            f"the failure-threshold callback must return 'stop', 'pause' or 'continue' "
            f"(a FailureDecision), got {answer!r}"
        ) from None


def dead_letter_headers(
    *,
    headers: Sequence[tuple[str, bytes | None]],
    error: BaseException,
    topic: str,
    partition: int,
    offset: int,
    attempts: int,
) -> list[tuple[str, bytes | None]]:
    """The record's headers followed by ``dlt.error`` (the message), ``dlt.error.type``
    (the exception class, ``HandlerTimeoutError`` for a timeout), ``dlt.topic``,
    ``dlt.partition``, ``dlt.offset`` and ``dlt.attempts`` (handler calls made)."""
    return [
        *headers,
        ("dlt.error", str(error).encode()),
        ("dlt.error.type", type(error).__qualname__.encode()),
        ("dlt.topic", topic.encode()),
        ("dlt.partition", str(partition).encode()),
        ("dlt.offset", str(offset).encode()),
        ("dlt.attempts", str(attempts).encode()),
    ]
