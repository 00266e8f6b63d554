"""aiokafka's record and offset structures (``aiokafka.structs``), built from ours.

``TopicPartition`` is our own (a NamedTuple of topic and partition, as aiokafka's), so
partitions flow between the compat layer and the native API unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import itemgetter
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


class _NativeConsumerRecord(ConsumerRecord[Any, Any], tuple[Any, ...]):
    """A consumed record as aiokafka's ``ConsumerRecord``, without a copy: it *is* the
    native ``Record``'s tuple (built by ``tuple.__new__``, in C), and the dataclass
    fields are read from it on access. ``isinstance(r, ConsumerRecord)`` holds and
    equality, ``repr`` and ``dataclasses.fields``/``asdict`` work as for the dataclass;
    the fields are read-only. ``headers`` is the native tuple of ``(key, value)``
    pairs; ``checksum`` is None (as aiokafka for v2 batches); the serialized sizes are
    those of the bytes when no deserializer ran, else -1 (the native record does not
    keep them)."""

    __slots__ = ()

    topic = property(itemgetter(0))
    partition = property(itemgetter(1))
    offset = property(itemgetter(2))
    key = property(itemgetter(3))
    value = property(itemgetter(4))
    headers = property(itemgetter(5))
    timestamp = property(itemgetter(6))

    @property
    def timestamp_type(self) -> int:  # type: ignore[override]  # read-only here
        return int(self[7])  # aiokafka's is a plain int

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELD_NAMES)
        return f"ConsumerRecord({fields})"

    @property
    def checksum(self) -> None:  # type: ignore[override]  # read-only here
        return None

    @property
    def serialized_key_size(self) -> int:  # type: ignore[override]  # read-only here
        return _size(self[3])

    @property
    def serialized_value_size(self) -> int:  # type: ignore[override]  # read-only here
        return _size(self[4])


_new_record = tuple.__new__
_FIELD_NAMES = tuple(f.name for f in fields(ConsumerRecord))


def record_from_native(rec: Any) -> ConsumerRecord[Any, Any]:
    """Our ``Record`` as aiokafka's ``ConsumerRecord`` (one C-level tuple copy)."""
    return _new_record(_NativeConsumerRecord, rec)


def records_from_native(records: list[Any]) -> list[ConsumerRecord[Any, Any]]:
    """``record_from_native`` of each record."""
    new, cls = _new_record, _NativeConsumerRecord
    return [new(cls, rec) for rec in records]
