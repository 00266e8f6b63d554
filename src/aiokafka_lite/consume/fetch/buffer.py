"""Fetched-but-unconsumed data with byte accounting, sans-I/O.

Completed fetches queue per partition in offset order. Partitions with data are
served round-robin, so one busy partition cannot starve the others. Every byte
buffered or reserved by an in-flight fetch counts against ``max_bytes``; fetchers ask
:meth:`FetchBuffer.available` before sending, which is what bounds memory whatever
the topic size or consumer speed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from aiokafka_lite.consume.fetch.decode import CompletedFetch
from aiokafka_lite.core.structs import TopicPartition

__all__ = ["FetchBuffer"]


class FetchBuffer:
    """Per-partition queues of :class:`CompletedFetch` plus the shared byte budget."""

    __slots__ = ("_queues", "_ready", "buffered_bytes", "max_bytes", "reserved_bytes")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.buffered_bytes = 0
        self.reserved_bytes = 0
        self._queues: dict[TopicPartition, deque[CompletedFetch]] = {}
        # Partitions with data, in service order (a dict used as an ordered set).
        self._ready: dict[TopicPartition, None] = {}

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def __repr__(self) -> str:
        return (
            f"FetchBuffer(partitions={len(self._queues)}, buffered={self.buffered_bytes}, "
            f"reserved={self.reserved_bytes}, max={self.max_bytes})"
        )

    # -- budget ---------------------------------------------------------------------
    def available(self) -> int:
        return self.max_bytes - self.buffered_bytes - self.reserved_bytes

    def reserve(self, n: int) -> None:
        """Hold ``n`` bytes for an in-flight fetch (released with :meth:`unreserve`)."""
        self.reserved_bytes += n

    def unreserve(self, n: int) -> None:
        self.reserved_bytes -= n

    # -- data -----------------------------------------------------------------------
    def add(self, cf: CompletedFetch) -> None:
        q = self._queues.get(cf.tp)
        if q is None:
            q = self._queues[cf.tp] = deque()
        q.append(cf)
        self._ready[cf.tp] = None
        self.buffered_bytes += cf.size

    def has_data(self, tp: TopicPartition) -> bool:
        return tp in self._queues

    def partitions(self) -> set[TopicPartition]:
        return set(self._queues)

    def bytes_for(self, tp: TopicPartition) -> int:
        q = self._queues.get(tp)
        return sum(cf.size for cf in q) if q else 0

    def last(self, tp: TopicPartition) -> CompletedFetch | None:
        """The newest completed fetch of ``tp`` (its end is where fetching continues)."""
        q = self._queues.get(tp)
        return q[-1] if q else None

    def first(self, tp: TopicPartition) -> CompletedFetch | None:
        q = self._queues.get(tp)
        return q[0] if q else None

    def next_ready(self, consumable: Callable[[TopicPartition], bool]) -> CompletedFetch | None:
        """Oldest completed fetch of the next consumable partition, rotating service order."""
        ready = self._ready
        for _ in range(len(ready)):
            tp = next(iter(ready))
            del ready[tp]
            q = self._queues.get(tp)
            if not q:
                continue
            ready[tp] = None  # back of the line
            if consumable(tp):
                return q[0]
        return None

    def done(self, cf: CompletedFetch) -> None:
        """``cf`` is fully consumed (or abandoned): free its bytes."""
        q = self._queues.get(cf.tp)
        if q and q[0] is cf:
            q.popleft()
            self.buffered_bytes -= cf.size
            if not q:
                del self._queues[cf.tp]
                self._ready.pop(cf.tp, None)

    def drop(self, tps: Iterable[TopicPartition]) -> int:
        """Forget everything buffered for ``tps``; returns the bytes freed."""
        freed = 0
        for tp in tps:
            q = self._queues.pop(tp, None)
            self._ready.pop(tp, None)
            if q:
                freed += sum(cf.size for cf in q)
        self.buffered_bytes -= freed
        return freed

    def clear(self) -> None:
        self.drop(list(self._queues))
