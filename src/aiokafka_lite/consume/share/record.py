"""The record type handed out by the share consumer, and the acknowledgement types."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple

from aiokafka_lite.wire.records import TimestampType

__all__ = ["AcknowledgeType", "ShareRecord"]


class AcknowledgeType(IntEnum):
    """What happens to an acquired record; the values are the protocol's (ShareAcknowledge).

    ``RENEW`` is not a decision: the broker restarts the record's acquisition lock (no
    delivery is counted) and, once it has answered, a later ``poll`` hands the record out
    again (same ``delivery_count``) to be acknowledged for good, or renewed again. Like
    the Java client, a renewed record counts as acknowledged for the explicit-mode rule
    that a poll's records are acknowledged before the next poll.

    ``GAP`` is never given by the application: the consumer sends it for acquired
    offsets that hold no record (compacted away, transaction markers), as Java does.
    """

    GAP = 0
    ACCEPT = 1  # processed: never delivered again
    RELEASE = 2  # give it back: delivered again (to any member), delivery count + 1
    REJECT = 3  # unprocessable: archived, never delivered again
    RENEW = 4  # still working on it: restart its acquisition lock (KIP-1222, Kafka 4.2+)


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
