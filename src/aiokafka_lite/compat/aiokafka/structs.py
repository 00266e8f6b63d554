"""aiokafka's record and offset structures (``aiokafka.structs``), built from ours.

``TopicPartition`` is our own (a NamedTuple of topic and partition, as aiokafka's), so
partitions flow between the compat layer and the native API unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "TopicPartition",
]

KT = TypeVar("KT")
VT = TypeVar("VT")


class RecordMetadata(NamedTuple):
    """Where a record was written (aiokafka's field names; ``timestamp`` in ms)."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int | None
    timestamp_type: int
    log_start_offset: int | None


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int | None


@dataclass
class ConsumerRecord(Generic[KT, VT]):
    """One consumed record with aiokafka's field names (``timestamp`` in ms)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: KT | None
    value: VT | None
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: Any


def _size(data: Any) -> int:
    return len(data) if isinstance(data, (bytes, bytearray, memoryview)) else -1


def record_from_native(rec: Any) -> ConsumerRecord[Any, Any]:
    """Our ``Record`` as aiokafka's ``ConsumerRecord``. The serialized sizes are those of
    the bytes when no deserializer ran, else -1 (the native record does not keep them)."""
    return ConsumerRecord(
        rec.topic,
        rec.partition,
        rec.offset,
        rec.timestamp_ms,
        int(rec.timestamp_type),
        rec.key,
        rec.value,
        None,
        _size(rec.key),
        _size(rec.value),
        list(rec.headers),
    )
