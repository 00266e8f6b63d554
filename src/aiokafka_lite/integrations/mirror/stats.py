"""Progress of a mirror: per-partition counters, lag and rate (pure bookkeeping).

The mirror updates these as the target acknowledges records (at-least-once) or as
transactions commit (exactly-once), so "copied" always means "durable on the target".
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from aiokafka_lite.core.structs import TopicPartition

__all__ = ["MirrorStats", "PartitionStats", "RateMeter"]


class RateMeter:
    """Events per second over a sliding window (``window_s``), from ``(time, count)``
    samples; the caller passes the clock so that this stays pure and testable."""

    __slots__ = ("_samples", "_window")

    def __init__(self, window_s: float = 10.0) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be > 0")
        self._window = window_s
        self._samples: collections.deque[tuple[float, int]] = collections.deque()

    def add(self, now: float, count: int) -> None:
        self._samples.append((now, count))
        self._trim(now)

    def _trim(self, now: float) -> None:
        samples = self._samples
        while samples and samples[0][0] < now - self._window:
            samples.popleft()

    def rate(self, now: float) -> float:
        """Events per second over the window ending at ``now``; 0 without samples."""
        self._trim(now)
        samples = self._samples
        if not samples:
            return 0.0
        total = sum(c for _, c in samples)
        # Over the whole window once it has filled, else since the first sample (at least
        # one second), so a just-started mirror is not shown at a fraction of its speed.
        span = min(self._window, max(now - samples[0][0], 1.0))
        return total / span


@dataclass
class PartitionStats:
    """One source partition being mirrored.

    ``position`` is the next source offset that is durable on the target (committed in
    exactly-once mode, acknowledged in at-least-once mode); ``lag`` is the source high
    watermark minus that (None until the first fetch told us the high watermark)."""

    source: TopicPartition
    target: TopicPartition
    position: int | None = None
    #: Next source offset handed to the target producer (ahead of ``position`` while
    #: records are in flight or in the open transaction).
    read: int | None = None
    high_watermark: int | None = None
    records: int = 0
    bytes: int = 0
    records_per_s: float = 0.0

    @property
    def lag(self) -> int | None:
        if self.high_watermark is None or self.position is None:
            return None
        return max(self.high_watermark - self.position, 0)


@dataclass
class MirrorStats:
    """A snapshot of the whole mirror (``Mirror.stats()``)."""

    partitions: dict[TopicPartition, PartitionStats] = field(default_factory=dict)
    records: int = 0
    bytes: int = 0
    records_per_s: float = 0.0
    bytes_per_s: float = 0.0
    transactions: int = 0
    commits: int = 0
    topics_created: int = 0

    @property
    def lag(self) -> int:
        """Total lag of the partitions whose lag is known."""
        return sum(p.lag or 0 for p in self.partitions.values())

    def as_dict(self) -> dict[str, object]:
        """Plain data (JSON-ready), keyed ``"topic:partition"``."""
        return {
            "records": self.records,
            "bytes": self.bytes,
            "records_per_s": round(self.records_per_s, 1),
            "bytes_per_s": round(self.bytes_per_s, 1),
            "lag": self.lag,
            "transactions": self.transactions,
            "commits": self.commits,
            "topics_created": self.topics_created,
            "partitions": {
                f"{tp.topic}:{tp.partition}": {
                    "target": f"{p.target.topic}:{p.target.partition}",
                    "position": p.position,
                    "read": p.read,
                    "high_watermark": p.high_watermark,
                    "lag": p.lag,
                    "records": p.records,
                    "records_per_s": round(p.records_per_s, 1),
                }
                for tp, p in sorted(self.partitions.items())
            },
        }
