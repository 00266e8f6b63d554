"""The record type handed out by the share consumer, and the acknowledgement types."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple

from aiokafka_lite.wire.records import TimestampType

__all__ = ["AcknowledgeType", "ShareRecord"]


class AcknowledgeType(IntEnum):
    """What happens to an acquired record; the values are the protocol's (ShareAcknowledge).

    ``GAP`` is never given by the application: the consumer sends it for acquired
    offsets that hold no record (compacted away, transaction markers), as Java does.
    """

    GAP = 0
    ACCEPT = 1  # processed: never delivered again
    RELEASE = 2  # give it back: delivered again (to any member), delivery count + 1
    REJECT = 3  # unprocessable: archived, never delivered again


class ShareRecord(NamedTuple):
    """One record acquired from a share group.

    The fields of :class:`aiokafka_lite.Record` plus ``delivery_count``: how many times
    the broker has handed this record out, this time included (1 on the first delivery).
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
    delivery_count: int
