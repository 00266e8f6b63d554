"""The record type handed to users by the consumer."""

from __future__ import annotations

from typing import Any, NamedTuple

from aiokafka_lite.wire.records import TimestampType

__all__ = ["Record", "TimestampType"]


class Record(NamedTuple):
    """One consumed record.

    A ``NamedTuple``: creating millions of them is cheap (one tuple allocation, no
    ``__init__``), attribute access is a C-level getter, and records compare, hash
    (with hashable key/value) and unpack like tuples.

    ``key``/``value`` are bytes (or ``None``), or whatever the configured
    deserializers return. ``headers`` is a list of ``(str, bytes | None)`` pairs.
    ``leader_epoch`` is the partition leader epoch of the record's batch (``None``
    for old message formats).
    """

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int
    timestamp_type: TimestampType
    leader_epoch: int | None
