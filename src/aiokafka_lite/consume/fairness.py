"""Fairness of loops over buffered records: the event loop's other tasks get a turn.

While an iterator serves records it already holds, nothing needs to wait, so without
help a loop whose body never awaits would keep every other task of the event loop (an
HTTP handler, a timer) waiting until the buffer runs dry. The iterators
(``Consumer.__anext__``/``getmany``, ``ShareConsumer.__anext__``) therefore give the
loop a turn themselves once ``YIELD_INTERVAL_S`` has passed since the last one.

Reading the clock for every record would cost more than handing the record out, so the
clock is read only at *check points*: the iterator hands records out by index up to a
stop index, and ``TurnPacer.due`` (at the stop index) spaces the next check point so
that about ``CHECK_SPACING_S`` of the caller's time (its loop body included) passes
between two: every record when the body is slow, up to ``MAX_CHECK_EVERY`` records
when it is fast. A turn costs ~20-45 us of CPU in a process with open connections (an
event-loop iteration and the cache it disturbs); every 3 ms keeps the whole mechanism
near 1% of a loop that does nothing but iterate (2 ms cost ~2%,
``bench/consume_fairness.py --toggled``).
"""

from __future__ import annotations

import time
from typing import Final

from aiokafka_lite.core import concurrency as _backend

__all__ = ["CHECK_SPACING_S", "MAX_CHECK_EVERY", "YIELD_INTERVAL_S", "TurnPacer"]

YIELD_INTERVAL_S: Final = 0.003
CHECK_SPACING_S: Final = 0.0005
MAX_CHECK_EVERY: Final = 1024


class TurnPacer:
    """When an iterator's next check point is, and whether a turn is due there.

    The iterator owns the chunk it hands out and its stop index; the pacer owns the
    clock: how many records apart check points are (``every``), when the last check
    point and the last turn were, and the records handed out since the last check point
    in chunks already finished.
    """

    __slots__ = ("_base", "_carry", "_checked_at", "_yielded_at", "every")

    def __init__(self) -> None:
        self.every = 16
        self._checked_at = self._yielded_at = time.monotonic()
        self._base = 0  # index in the current chunk of the last check point
        self._carry = 0  # records handed out since then in finished chunks

    def due(self, idx: int) -> bool:
        """At a check point (``idx`` in the current chunk): read the clock, respace the
        check points after the caller's measured time per record, and say whether other
        tasks are due a turn."""
        now = time.monotonic()
        handed = self._carry + idx - self._base
        elapsed = now - self._checked_at
        self._checked_at = now
        self._base = idx
        self._carry = 0
        if handed > 0:
            every = int(CHECK_SPACING_S * handed / elapsed) if elapsed > 0 else MAX_CHECK_EVERY
            self.every = max(1, min(every, MAX_CHECK_EVERY))
        return now - self._yielded_at >= YIELD_INTERVAL_S

    def overdue(self) -> bool:
        """Whether a turn is due now (for calls that hand out many records at once)."""
        return time.monotonic() - self._yielded_at >= YIELD_INTERVAL_S

    def chunk_finished(self, handed: int) -> None:
        """The current chunk is dropped after ``handed`` of its records were handed out;
        the next chunk's indexes start at 0."""
        if handed > self._base:
            self._carry += handed - self._base
        self._base = 0

    def rested(self) -> None:
        """The caller just waited (for data, or a turn): the other tasks had their turn,
        and the time spent waiting is not the caller's time per record."""
        self._yielded_at = self._checked_at = time.monotonic()

    async def take_turn(self) -> None:
        """Let the other tasks of the event loop run once."""
        try:
            await _backend.sleep(0)
        finally:
            # Also when cancelled here: the next step is not due a turn at once (or a
            # step cancelled at every yield would never hand out a record).
            self.rested()
