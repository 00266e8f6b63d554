"""Pure-Python record encode/decode loops: the fallback for the ``_crecords`` C extension.

Both backends expose the same two things: :func:`decode_records` (records region of a
v2 batch -> list of :class:`Record`) and :class:`RecordsWriter` (incremental encoder of
the records region). Behaviour, including every error, must match the C backend; the
test suite runs against both.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Final

from aiokafka_lite.core.errors import CorruptRecordError
from aiokafka_lite.wire.records._model import MIN_RECORD_SIZE, V2_HEADER_SIZE, Buffer, Header, Record

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_U32_LIMIT: Final = 1 << 32
_U64_LIMIT: Final = 1 << 64

# One-byte varints (zig-zag value < 128), built once: most lengths and deltas hit this.
_ONE_BYTE: Final = [bytes((v,)) for v in range(128)]
_NULL: Final = b"\x01"  # zig-zag(-1)


def _wrap64(value: int) -> int:
    """Two's-complement int64 wrap-around, matching the C backend's arithmetic."""
    return ((value - _INT64_MIN) % _U64_LIMIT) + _INT64_MIN


def _corrupt(index: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(f"record {index}: {what}")


def _read_varint(buf: bytes, pos: int, max_bytes: int, index: int) -> tuple[int, int]:
    """Decode a zig-zag varint of at most ``max_bytes`` bytes (5 for int32, 10 for int64)."""
    result = 0
    shift = 0
    n = len(buf)
    for i in range(max_bytes):
        if pos + i >= n:
            raise _corrupt(index, "truncated varint")
        b = buf[pos + i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >= (_U32_LIMIT if max_bytes == 5 else _U64_LIMIT):
                raise _corrupt(index, f"varint overflows {'int32' if max_bytes == 5 else 'int64'}")
            return (result >> 1) ^ -(result & 1), pos + i + 1
        shift += 7
    raise _corrupt(index, f"varint longer than {max_bytes} bytes")


def decode_records(
    data: Buffer,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> list[Record]:
    """Decode ``count`` records from ``data[start:end]``, which they must fill exactly."""
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    if count > (end - start) // MIN_RECORD_SIZE:
        raise CorruptRecordError(f"record count {count} cannot fit in {end - start} bytes")
    buf = bytes(data[start:end])
    n = len(buf)
    pos = 0
    out: list[Record] = []
    append = out.append
    read = _read_varint
    for i in range(count):
        if pos >= n:
            raise _corrupt(i, "truncated record")
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < n and buf[pos + 1] < 0x80:  # two-byte varint, inline
            raw = (b & 0x7F) | (buf[pos + 1] << 7)
            length = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            length, pos = read(buf, pos, 5, i)
        if length < MIN_RECORD_SIZE - 1 or length > n - pos:
            raise _corrupt(i, f"invalid record length {length} with {n - pos} bytes remaining")
        rec_end = pos + length
        pos += 1  # attributes: unused
        b = buf[pos]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < n and buf[pos + 1] < 0x80:  # two-byte varint, inline
            raw = (b & 0x7F) | (buf[pos + 1] << 7)
            ts_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            ts_delta, pos = read(buf, pos, 10, i)
        if pos >= rec_end:
            raise _corrupt(i, "truncated record")
        b = buf[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < n and buf[pos + 1] < 0x80:  # two-byte varint, inline
            raw = (b & 0x7F) | (buf[pos + 1] << 7)
            offset_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            offset_delta, pos = read(buf, pos, 5, i)
        # key
        if pos >= rec_end:
            raise _corrupt(i, "truncated record")
        b = buf[pos]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < n and buf[pos + 1] < 0x80:  # two-byte varint, inline
            raw = (b & 0x7F) | (buf[pos + 1] << 7)
            klen = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            klen, pos = read(buf, pos, 5, i)
        if klen < 0:
            key = None  # any negative length: null, as Kafka's own reader has it
        else:
            if klen > rec_end - pos:
                raise _corrupt(i, f"key length {klen} exceeds record")
            key = buf[pos : pos + klen]
            pos += klen
        # value
        if pos >= rec_end:
            raise _corrupt(i, "truncated record")
        b = buf[pos]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < n and buf[pos + 1] < 0x80:  # two-byte varint, inline
            raw = (b & 0x7F) | (buf[pos + 1] << 7)
            vlen = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            vlen, pos = read(buf, pos, 5, i)
        if vlen < 0:
            value = None
        else:
            if vlen > rec_end - pos:
                raise _corrupt(i, f"value length {vlen} exceeds record")
            value = buf[pos : pos + vlen]
            pos += vlen
        # headers
        if pos >= rec_end:
            raise _corrupt(i, "truncated record")
        b = buf[pos]
        if b < 0x80:
            hcount = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < n and buf[pos + 1] < 0x80:  # two-byte varint, inline
            raw = (b & 0x7F) | (buf[pos + 1] << 7)
            hcount = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            hcount, pos = read(buf, pos, 5, i)
        if hcount < 0 or hcount > (rec_end - pos) // 2:
            raise _corrupt(i, f"invalid header count {hcount}")
        headers: list[Header] = []
        for _ in range(hcount):
            hklen, pos = read(buf, pos, 5, i)
            if hklen < 0 or hklen > rec_end - pos:
                raise _corrupt(i, f"invalid header key length {hklen}")
            hkey = buf[pos : pos + hklen].decode("utf-8", "surrogateescape")
            pos += hklen
            hvlen, pos = read(buf, pos, 5, i)
            if hvlen < 0:
                hval = None
            else:
                if hvlen > rec_end - pos:
                    raise _corrupt(i, f"header value length {hvlen} exceeds record")
                hval = buf[pos : pos + hvlen]
                pos += hvlen
            headers.append((hkey, hval))
        if pos != rec_end:
            raise _corrupt(i, f"record length mismatch ({pos - rec_end:+d} bytes)")
        if log_append_time is None:
            timestamp = base_timestamp + ts_delta
            if not _INT64_MIN <= timestamp <= _INT64_MAX:
                timestamp = _wrap64(timestamp)
        else:
            timestamp = log_append_time
        offset = base_offset + offset_delta
        if not _INT64_MIN <= offset <= _INT64_MAX:
            offset = _wrap64(offset)
        append(Record(offset, timestamp, key, value, headers))
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes left after {count} records")
    return out


def scan_records(data: Buffer, start: int, end: int, count: int) -> tuple[int, int, list[int], bool]:
    """Walk ``count`` records like :func:`decode_records` (same errors) and summarise them:
    ``(min timestamp delta, max timestamp delta, indexes of keyless records, offset
    deltas are 0..count-1)``. The C twin builds no record objects."""
    records = decode_records(data, start, end, count, 0, 0, None)
    if not records:
        return 0, 0, [], True
    deltas = [r.timestamp for r in records]
    keyless = [i for i, r in enumerate(records) if r.key is None]
    sequential = all(r.offset == i for i, r in enumerate(records))
    return min(deltas), max(deltas), keyless, sequential


def encode_varint(value: int) -> bytes:
    """Zig-zag varint encoding of a signed 64-bit value."""
    v = (value << 1) ^ (value >> 63)
    if v < 0x80:
        return _ONE_BYTE[v]
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _check_len(n: int, what: str) -> None:
    if n > _INT32_MAX:
        raise ValueError(f"{what} of {n} bytes is too large")


class RecordsWriter:
    """Incrementally encodes the records region of a v2 batch into one ``bytearray``."""

    __slots__ = ("_buf", "_count", "_first_timestamp", "_max_batch_size", "_max_timestamp", "_timestamps")

    def _core_init(self, max_batch_size: int) -> None:
        self._timestamps: list[int] | None = None
        self._buf = bytearray()
        self._count = 0
        self._first_timestamp = -1
        self._max_timestamp = -1
        self._max_batch_size = max_batch_size

    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[tuple[str | bytes, Buffer | None]] = (),
    ) -> bool:
        """Append one record; ``False`` if it would push the batch past ``max_batch_size``."""
        timestamp = operator.index(timestamp)
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise OverflowError(f"timestamp {timestamp} does not fit in int64")
        count = self._count
        first = timestamp if count == 0 else self._first_timestamp
        delta = timestamp - first
        if not _INT64_MIN <= delta <= _INT64_MAX:
            raise OverflowError(f"timestamp delta {delta} does not fit in int64")
        if count > _INT32_MAX:
            raise OverflowError("too many records in one batch")
        parts: list[Buffer] = [b"\x00", encode_varint(delta), encode_varint(count)]
        if key is None:
            parts.append(_NULL)
        else:
            key = memoryview(key).cast("B")
            _check_len(len(key), "key")
            parts.append(encode_varint(len(key)))
            parts.append(key)
        if value is None:
            parts.append(_NULL)
        else:
            value = memoryview(value).cast("B")
            _check_len(len(value), "value")
            parts.append(encode_varint(len(value)))
            parts.append(value)
        hdrs = headers if isinstance(headers, list | tuple) else list(headers)
        parts.append(encode_varint(len(hdrs)))
        for hkey, hval in hdrs:
            if isinstance(hkey, str):
                kb: Buffer = hkey.encode("utf-8", "surrogateescape")
            elif isinstance(hkey, bytes | bytearray | memoryview):
                kb = memoryview(hkey).cast("B")
            else:
                raise TypeError(f"header key must be str or bytes, not {type(hkey).__name__}")
            _check_len(len(kb), "header key")
            parts.append(encode_varint(len(kb)))
            parts.append(kb)
            if hval is None:
                parts.append(_NULL)
            else:
                hv = memoryview(hval).cast("B")
                _check_len(len(hv), "header value")
                parts.append(encode_varint(len(hv)))
                parts.append(hv)
        body = b"".join(parts)
        _check_len(len(body), "record")
        prefix = encode_varint(len(body))
        if count and V2_HEADER_SIZE + len(self._buf) + len(prefix) + len(body) > self._max_batch_size:
            return False
        self._buf += prefix
        self._buf += body
        self._count = count + 1
        if count == 0:
            self._first_timestamp = timestamp
            self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return True

    def track_timestamps(self, timestamps: list[int]) -> None:
        """The list :meth:`add` appends each record's timestamp to."""
        if type(timestamps) is not list:
            raise TypeError("track_timestamps() takes a list")
        self._timestamps = timestamps

    def add(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[tuple[str | bytes, Buffer | None]],
    ) -> int:
        """The producer's per-record path: :meth:`append`, then the timestamp into the
        tracked list; the record's index in the batch, or -1 when the batch is full."""
        timestamps = self._timestamps
        if timestamps is None:
            raise RuntimeError("add() needs track_timestamps(list) first")
        if not self.append(timestamp, key, value, headers):
            return -1
        timestamps.append(timestamp)
        return self._count - 1

    @property
    def record_count(self) -> int:
        """Number of records appended so far."""
        return self._count

    @property
    def first_timestamp(self) -> int:
        """Timestamp of the first record (the batch base timestamp), -1 when empty."""
        return self._first_timestamp

    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp, -1 when empty."""
        return self._max_timestamp

    @property
    def records_size(self) -> int:
        """Encoded (uncompressed) size of the records region."""
        return len(self._buf)

    @property
    def max_batch_size(self) -> int:
        """Size limit used by :meth:`append`."""
        return self._max_batch_size

    def records_bytes(self) -> bytes:
        """The encoded records region."""
        return bytes(self._buf)

    def records_view(self) -> memoryview:
        """Read-only zero-copy view of the records region (blocks appends while alive)."""
        return memoryview(self._buf).toreadonly()
