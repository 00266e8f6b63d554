"""The one retry and backoff policy of the client (sans-I/O).

Every loop that retries (the network client's ``retry``, reconnects and metadata
refreshes, the admin calls, the producer's sender and transactions, the group
coordinator, the fetcher) takes its delays from here:

* ``Backoff`` is the formula: exponential from ``initial_ms``, capped at ``max_ms``,
  with +/-``jitter`` (20 % by default) so that clients failing together do not retry
  together. This is the Java client's ``retry.backoff.ms`` / ``retry.backoff.max.ms``
  (KIP-580) and ``reconnect.backoff.ms`` / ``reconnect.backoff.max.ms``.
* ``Retry`` is one operation's schedule: the failed attempts so far and an optional
  deadline. ``next_delay()`` counts a failure and says how long to wait before the
  next attempt, or ``None`` when that wait would reach the deadline (give up).

What stays with each loop: which errors are retriable, what to do between attempts
(refresh metadata, forget a coordinator, re-enqueue a batch), and the sleeping itself
(``concurrency.sleep``, or a wake-able wait). Nothing here does I/O or sleeps; the clock
is whatever the caller passes (the event loop's ``time()`` in seconds, usually).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Backoff", "BackoffSettings", "Retry"]

#: 2 ** 30 times any sane initial backoff is far past any cap; stops float overflow.
_MAX_EXPONENT = 30


class BackoffSettings(Protocol):
    """The options ``Backoff.for_retries`` / ``for_reconnects`` read (``ClientConfig`` has them)."""

    @property
    def retry_backoff_ms(self) -> float: ...
    @property
    def retry_backoff_max_ms(self) -> float: ...
    @property
    def reconnect_backoff_ms(self) -> float: ...
    @property
    def reconnect_backoff_max_ms(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: attempt ``n`` (0-based: the wait after the first
    failure is attempt 0) waits ``min(initial_ms * 2**n, max_ms)``, times a random factor
    in ``[1 - jitter, 1 + jitter]``. ``initial_ms <= 0`` means no wait at all."""

    initial_ms: float
    max_ms: float
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")

    @classmethod
    def for_retries(cls, config: BackoffSettings) -> Backoff:
        """``retry_backoff_ms`` growing to ``retry_backoff_max_ms`` (never below the first)."""
        base = config.retry_backoff_ms
        return cls(base, max(config.retry_backoff_max_ms, base))

    @classmethod
    def for_reconnects(cls, config: BackoffSettings) -> Backoff:
        """``reconnect_backoff_ms`` growing to ``reconnect_backoff_max_ms``."""
        base = config.reconnect_backoff_ms
        return cls(base, max(config.reconnect_backoff_max_ms, base))

    def delay_ms(self, attempt: int) -> float:
        """The wait after failed attempt number ``attempt`` (0-based), in milliseconds."""
        if self.initial_ms <= 0:
            return 0.0
        delay = min(self.max_ms, self.initial_ms * 2.0 ** min(max(attempt, 0), _MAX_EXPONENT))
        if self.jitter:
            delay *= random.uniform(1 - self.jitter, 1 + self.jitter)
        return delay

    def delay_s(self, attempt: int) -> float:
        """``delay_ms(attempt)`` in seconds (what ``concurrency.sleep`` takes)."""
        return self.delay_ms(attempt) / 1000


class Retry:
    """The attempts of one retrying operation: a failure counter and an optional deadline.

    ``clock`` is the caller's (seconds; the event loop's ``time()`` usually), and
    ``deadline`` is on that clock (``None``: retry for as long as the caller wants).
    Typical loop::

        retry = Retry(backoff, clock=loop.time, deadline=loop.time() + timeout_s)
        while True:
            try:
                return await attempt()
            except KafkaError as exc:
                delay = retry.next_delay() if exc.retriable else None
                if delay is None:
                    raise
                await concurrency.sleep(delay)
                ...  # what this loop does between attempts
    """

    __slots__ = ("attempts", "backoff", "clock", "deadline")

    def __init__(
        self,
        backoff: Backoff,
        *,
        clock: Callable[[], float],
        deadline: float | None = None,
    ) -> None:
        self.backoff = backoff
        self.clock = clock
        self.deadline = deadline
        #: Failed attempts so far (``next_delay`` counts them; ``succeeded`` resets).
        self.attempts = 0

    def next_delay(self, backoff: Backoff | None = None) -> float | None:
        """Count a failed attempt and return the wait before the next one (seconds), or
        ``None`` if waiting would reach the deadline. ``backoff`` overrides the policy
        for this wait (e.g. a shorter one for an error known to clear fast)."""
        delay = (backoff or self.backoff).delay_s(self.attempts)
        self.attempts += 1
        if self.deadline is not None and self.clock() + delay >= self.deadline:
            return None
        return delay

    def succeeded(self) -> None:
        """The operation worked: the next failure starts from the initial backoff again."""
        self.attempts = 0

    def remaining_s(self) -> float:
        """Seconds until the deadline (0 once past it; ``inf`` without one)."""
        if self.deadline is None:
            return float("inf")
        return max(self.deadline - self.clock(), 0.0)

    @property
    def expired(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline
