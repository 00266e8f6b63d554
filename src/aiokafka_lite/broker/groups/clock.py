"""Time for the coordinators: the event loop's clock, a manual one for tests, owned timers."""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("aiokafka_lite.broker.groups")


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Milliseconds and one-shot timers (the event loop's, or a test's fake)."""

    def now_ms(self) -> float: ...

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> Cancellable: ...


class LoopClock:
    """The running event loop's monotonic clock and ``call_later``."""

    def now_ms(self) -> float:
        return asyncio.get_running_loop().time() * 1000.0

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> Cancellable:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0.0) / 1000.0, fn)


class _ManualTimer:
    __slots__ = ("cancelled", "fn", "when")

    def __init__(self, when: float, fn: Callable[[], None]) -> None:
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to: deterministic coordinator tests."""

    def __init__(self, start_ms: float = 0.0) -> None:
        self._now = start_ms
        self._timers: list[tuple[float, int, _ManualTimer]] = []
        self._seq = 0

    def now_ms(self) -> float:
        return self._now

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> Cancellable:
        t = _ManualTimer(self._now + max(delay_ms, 0.0), fn)
        self._seq += 1
        heapq.heappush(self._timers, (t.when, self._seq, t))
        return t

    def advance(self, ms: float) -> None:
        """Moves time forward, running every timer that falls due, in order."""
        target = self._now + ms
        while self._timers and self._timers[0][0] <= target:
            when, _, t = heapq.heappop(self._timers)
            if t.cancelled:
                continue
            self._now = max(self._now, when)
            t.fn()
        self._now = target

    def pending(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)


class Timers:
    """Timers owned by a coordinator: all cancelled at once by ``cancel_all``."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._live: set[Cancellable] = set()
        self.closed = False

    def schedule(self, delay_ms: float, fn: Callable[[], None]) -> Cancellable:
        handle: Cancellable | None = None

        def run() -> None:
            if handle is not None:
                self._live.discard(handle)
            if self.closed:
                return
            try:
                fn()
            except Exception:
                log.exception("coordinator timer failed")

        handle = self.clock.call_later(delay_ms, run)
        self._live.add(handle)
        return handle

    def cancel(self, handle: Cancellable | None) -> None:
        if handle is not None:
            handle.cancel()
            self._live.discard(handle)

    def cancel_all(self) -> None:
        self.closed = True
        for h in list(self._live):
            h.cancel()
        self._live.clear()

    def __len__(self) -> int:
        return len(self._live)
