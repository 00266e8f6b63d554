"""Shared record types and format constants (no behaviour, imported by every backend)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, NamedTuple

from aiokafka_lite.core.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    """One decoded record with absolute offset and timestamp.

    A plain slots dataclass so the C decoder can fill the slots directly; header
    keys are decoded as UTF-8 with ``surrogateescape`` so any byte string round-trips.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


class RecordsSummary(NamedTuple):
    """What a broker checks in a produced batch's records, gathered without building them."""

    #: Smallest and largest record timestamp (the batch max timestamp for LogAppendTime).
    min_timestamp: int
    max_timestamp: int
    #: Indexes (within the batch) of the records that have no key.
    keyless: list[int]
    #: Whether the record offset deltas are exactly 0, 1, ..., count - 1.
    sequential_offsets: bool


class BatchTooShortError(CorruptRecordError):
    """A complete batch whose length cannot hold the header its magic calls for."""

    def __init__(self, message: str, magic: int, size: int) -> None:
        super().__init__(message)
        #: The batch's magic byte and its whole size (length field included).
        self.magic = magic
        self.size = size


class CompressedPayloadError(CorruptRecordError):
    """A batch's compressed records could not be decompressed (as opposed to records that
    decompress fine but are malformed)."""


class TimestampType(IntEnum):
    """Batch timestamp type (attributes bit 3); ``NO_TIMESTAMP`` is for magic 0 only."""

    NO_TIMESTAMP = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    """Control record types carried in a control batch's record key."""

    ABORT = 0
    COMMIT = 1


# RecordBatch v2 header, big-endian:
#   baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I, attributes h,
#   lastOffsetDelta i, baseTimestamp q, maxTimestamp q, producerId q, producerEpoch h,
#   baseSequence i, recordsCount i
V2_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE: Final = V2_HEADER.size  # 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength
# CRC-32C covers attributes..end; it starts after the crc field.
V2_CRC_OFFSET: Final = 17
V2_ATTRIBUTES_OFFSET: Final = 21
V2_MAX_TIMESTAMP_OFFSET: Final = 35
V2_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
# Smallest possible encoded record: length, attributes, timestamp delta, offset delta,
# key length, value length, header count -> 7 one-byte fields.
MIN_RECORD_SIZE: Final = 7

ATTR_CODEC_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20
ATTR_DELETE_HORIZON: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
