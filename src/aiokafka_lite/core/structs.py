"""Small value types shared across the client."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A (topic, partition) pair.

    A ``NamedTuple`` so it is hashable (usable as a dict key / set member), sorts by
    topic then partition (the order assignors and offset commits rely on), and is
    cheap to create in bulk.
    """

    topic: str
    partition: int
