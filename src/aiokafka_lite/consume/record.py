"""The record type handed to users by the consumer."""

from __future__ import annotations

from typing import Any, NamedTuple

from aiokafka_lite.wire.records import TimestampType

__all__ = ["Record", "TimestampType"]


class Record(NamedTuple):
    """One consumed record.

    A ``NamedTuple``: creating millions of them is cheap (one allocation, no
    ``__init__``), fields are read by C-level getters, and records compare and unpack
    like tuples.

    ``key``/``value`` are bytes (or ``None``), or whatever the configured
    deserializers return. ``headers`` is a tuple of ``(str, bytes | None)`` pairs
    (immutable, and the empty tuple is shared: one object less per record for the
    garbage collector to scan). ``leader_epoch`` is the partition leader epoch of the
    record's batch (``None`` for old message formats).
    """

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    timestamp_type: TimestampType
    leader_epoch: int | None
