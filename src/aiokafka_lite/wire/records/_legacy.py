"""Read-only support for legacy message sets (magic 0 and 1).

Each top-level message is exposed as a :class:`LegacyRecordBatch` with the same
record-access API as :class:`RecordBatch`. A compressed message ("wrapper") carries a
whole inner message set as its value; with magic 1 the inner offsets are relative
and the wrapper offset is the absolute offset of the last inner message.

Legacy messages use CRC-32 (IEEE, ``zlib.crc32``) over magic..end, not CRC-32C.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Final

from aiokafka_lite.core.errors import CorruptRecordError, UnsupportedCodecError
from aiokafka_lite.wire.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    codec_from_attributes,
    decompress_to_buffer,
)
from aiokafka_lite.wire.records._model import (
    ATTR_CODEC_MASK,
    ATTR_TIMESTAMP_TYPE,
    LOG_OVERHEAD,
    Record,
    TimestampType,
)

# offset q, message size i, crc I, magic b, attributes b
_PREFIX: Final = struct.Struct(">qiIbb")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_CRC_START: Final = 16  # magic..end is covered by the CRC
#: Smallest message (crc..value) for magic 0 / magic 1: crc, magic, attrs, [ts], key len, value len.
LEGACY_MIN_SIZE: Final = (14, 22)

_P1: Final = 2654435761
_P2: Final = 2246822519
_P3: Final = 3266489917
_P4: Final = 668265263
_P5: Final = 374761393
_M32: Final = 0xFFFFFFFF


def _xxh32_short(data: bytes) -> int:
    """xxHash32 (seed 0) of fewer than 16 bytes: enough for an LZ4 frame descriptor."""
    n = len(data)
    h = (_P5 + n) & _M32
    i = 0
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i : i + 4], "little") * _P3) & _M32
        h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
        i += 4
    while i < n:
        h = (h + data[i] * _P5) & _M32
        h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def fix_kafka_lz4_header(data: bytes | bytearray | memoryview) -> bytes:
    """Repair the LZ4 frame header checksum written by magic-0 era Kafka.

    Kafka before 0.10 hashed the frame magic together with the descriptor, so a
    standard decoder rejects the header. Recompute the checksum over the descriptor
    only; a frame that already has the right byte is returned unchanged.
    """
    buf = bytearray(data)
    if len(buf) < 7 or buf[:4] != b"\x04\x22\x4d\x18":
        return bytes(buf)
    flg = buf[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if hc_pos >= len(buf):
        return bytes(buf)
    buf[hc_pos] = (_xxh32_short(bytes(buf[4:hc_pos])) >> 8) & 0xFF
    return bytes(buf)


class _Message:
    """One parsed legacy message (no copies: key/value are (start, length) in ``view``)."""

    __slots__ = (
        "attributes",
        "crc",
        "end",
        "key_len",
        "key_pos",
        "magic",
        "offset",
        "position",
        "timestamp",
        "value_len",
        "value_pos",
    )

    def __init__(self, view: memoryview, pos: int, end: int) -> None:
        """Parse the message framed at ``view[pos:end]``; every length must fit exactly."""
        if end - pos < LOG_OVERHEAD + LEGACY_MIN_SIZE[0]:
            raise CorruptRecordError(f"legacy message at byte {pos} is too short ({end - pos} bytes)")
        self.offset, _, self.crc, self.magic, self.attributes = _PREFIX.unpack_from(view, pos)
        self.position = pos
        self.end = end
        if self.magic not in (0, 1):
            raise CorruptRecordError(f"legacy message at byte {pos} has magic {self.magic}")
        p = pos + _PREFIX.size
        if self.magic == 1:
            if end - pos < LOG_OVERHEAD + LEGACY_MIN_SIZE[1]:
                raise CorruptRecordError(f"legacy message at byte {pos} is too short ({end - pos} bytes)")
            (self.timestamp,) = _I64.unpack_from(view, p)
            p += 8
        else:
            self.timestamp = -1
        self.key_pos, self.key_len, p = self._field(view, p, end, "key")
        if end - p < 4:
            raise CorruptRecordError(f"legacy message at byte {pos}: value length truncated")
        self.value_pos, self.value_len, p = self._field(view, p, end, "value")
        if p != end:
            raise CorruptRecordError(f"legacy message at byte {pos}: {end - p} unexpected trailing bytes")

    def _field(self, view: memoryview, p: int, end: int, what: str) -> tuple[int, int, int]:
        (length,) = _I32.unpack_from(view, p)
        p += 4
        if length < -1 or length > end - p:
            raise CorruptRecordError(
                f"legacy message at byte {self.position}: invalid {what} length {length}"
            )
        return p, length, p + max(length, 0)

    def check_crc(self, view: memoryview) -> None:
        computed = zlib.crc32(view[self.position + _CRC_START : self.end])
        if computed != self.crc:
            raise CorruptRecordError(
                f"CRC mismatch in legacy message at byte {self.position} (offset {self.offset}): "
                f"stored 0x{self.crc:08x}, computed 0x{computed:08x}"
            )

    def key(self, view: memoryview) -> bytes | None:
        return None if self.key_len < 0 else bytes(view[self.key_pos : self.key_pos + self.key_len])

    def value(self, view: memoryview) -> bytes | None:
        return None if self.value_len < 0 else bytes(view[self.value_pos : self.value_pos + self.value_len])


def _iter_inner(view: memoryview) -> Iterator[_Message]:
    """Strictly frame an inner (decompressed) message set: no partial tail allowed."""
    pos = 0
    n = len(view)
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            raise CorruptRecordError(f"inner message set truncated at byte {pos}")
        (size,) = _I32.unpack_from(view, pos + 8)
        if size < LEGACY_MIN_SIZE[0] or size > n - pos - LOG_OVERHEAD:
            raise CorruptRecordError(f"inner message at byte {pos} has invalid size {size}")
        end = pos + LOG_OVERHEAD + size
        yield _Message(view, pos, end)
        pos = end


class LegacyRecordBatch:
    """A magic 0/1 top-level message, viewed as a batch of one or more records."""

    __slots__ = ("_check_crc", "_data", "_max_decompressed_size", "_msg", "_records")

    is_transactional: Final = False
    is_control: Final = False
    has_delete_horizon: Final = False
    delete_horizon_ms: Final = None
    partition_leader_epoch: Final = -1
    producer_id: Final = -1
    producer_epoch: Final = -1
    base_sequence: Final = -1

    def __init__(
        self,
        data: memoryview,
        position: int,
        end: int,
        *,
        check_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self._data = data
        self._msg = _Message(data, position, end)
        self._check_crc = check_crc
        self._max_decompressed_size = max_decompressed_size
        self._records: list[Record] | None = None

    # -- header-like fields -----------------------------------------------------------

    @property
    def position(self) -> int:
        """Byte position of this message in the decoded buffer."""
        return self._msg.position

    @property
    def magic(self) -> int:
        return int(self._msg.magic)

    @property
    def crc(self) -> int:
        return int(self._msg.crc)

    @property
    def attributes(self) -> int:
        return int(self._msg.attributes)

    @property
    def batch_length(self) -> int:
        return self._msg.end - self._msg.position - LOG_OVERHEAD

    @property
    def size_in_bytes(self) -> int:
        return self._msg.end - self._msg.position

    @property
    def buffer(self) -> memoryview:
        return self._data[self._msg.position : self._msg.end]

    @property
    def compression(self) -> Compression:
        return codec_from_attributes(self._msg.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        """NO_TIMESTAMP for magic 0, else attributes bit 3."""
        if self._msg.magic == 0:
            return TimestampType.NO_TIMESTAMP
        return TimestampType(1 if self._msg.attributes & ATTR_TIMESTAMP_TYPE else 0)

    @property
    def last_offset(self) -> int:
        """Last record's offset: the message offset, or for a wrapper its last inner record."""
        if not self._msg.attributes & ATTR_CODEC_MASK:
            return int(self._msg.offset)
        records = self._decoded()
        return records[-1].offset if records else int(self._msg.offset)

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_offset(self) -> int:
        """First record's offset; decompresses a wrapper to find it."""
        if not self._msg.attributes & ATTR_CODEC_MASK:
            return int(self._msg.offset)
        records = self._decoded()
        return records[0].offset if records else int(self._msg.offset)

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def record_count(self) -> int:
        if not self._msg.attributes & ATTR_CODEC_MASK:
            return 1
        return len(self._decoded())

    @property
    def base_timestamp(self) -> int:
        return int(self._msg.timestamp)

    @property
    def max_timestamp(self) -> int:
        return int(self._msg.timestamp)

    def _where(self) -> str:
        codec = self._msg.attributes & ATTR_CODEC_MASK
        try:
            name = Compression(codec).name
        except ValueError:
            name = f"unknown({codec})"
        return f"legacy batch at byte {self._msg.position} (offset {self._msg.offset}, magic {self._msg.magic}, codec {name})"

    def validate_crc(self) -> None:
        """Raise ``CorruptRecordError`` on a CRC-32 mismatch of the (outer) message."""
        self._msg.check_crc(self._data)

    def validate_header(self) -> None:
        """Nothing beyond framing, which the constructor already checked."""

    def validate_records(self) -> list[Record]:
        """Decode everything (checking inner CRCs); legacy offsets are not re-checked."""
        return self.records()

    # -- records --------------------------------------------------------------------

    def records(self) -> list[Record]:
        """Decode the record(s); a wrapper is decompressed (bounded) and unpacked."""
        return list(self._decoded())

    def __iter__(self) -> Iterator[Record]:
        return iter(self._decoded())

    def _decoded(self) -> list[Record]:
        if self._records is None:
            try:
                self._records = self._decode()
            except UnsupportedCodecError as exc:
                raise UnsupportedCodecError(f"{self._where()}: {exc}") from None
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{self._where()}: {exc}") from None
        return self._records

    def _decode(self) -> list[Record]:
        msg = self._msg
        view = self._data
        if not msg.attributes & ATTR_CODEC_MASK:
            return [Record(msg.offset, msg.timestamp, msg.key(view), msg.value(view), [])]
        codec = codec_from_attributes(msg.attributes)
        if msg.value_len < 0:
            raise CorruptRecordError("compressed wrapper message has a null value")
        payload: bytes | bytearray | memoryview = view[msg.value_pos : msg.value_pos + msg.value_len]
        if codec is Compression.LZ4 and msg.magic == 0:
            payload = fix_kafka_lz4_header(payload)
        inner_view = memoryview(decompress_to_buffer(codec, payload, self._max_decompressed_size))
        inner = list(_iter_inner(inner_view))
        if not inner:
            return []
        log_append = msg.magic == 1 and bool(msg.attributes & ATTR_TIMESTAMP_TYPE)
        # magic 1: inner offsets are relative, the wrapper holds the last one's absolute
        # offset. A negative base means the offsets were never assigned (a client-built
        # produce payload has wrapper offset 0): keep the inner offsets as they are.
        shift = msg.offset - inner[-1].offset if msg.magic >= 1 else 0
        if shift + inner[0].offset < 0:
            shift = 0
        out: list[Record] = []
        for m in inner:
            if m.attributes & ATTR_CODEC_MASK:
                raise CorruptRecordError(f"nested compression in inner message at byte {m.position}")
            if self._check_crc:
                m.check_crc(inner_view)
            timestamp = msg.timestamp if log_append else m.timestamp
            out.append(Record(m.offset + shift, timestamp, m.key(inner_view), m.value(inner_view), []))
        return out
