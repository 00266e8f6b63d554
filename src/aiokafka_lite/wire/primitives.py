"""Kafka protocol primitive types: a ``Reader`` over a buffer and a ``Writer`` into one.

The generated message classes call these methods field by field. Design points:

* ``Reader`` works on a ``memoryview`` and never copies more than the field it returns;
  record sets come back as zero-copy ``memoryview`` slices.
* Every length is checked against the bytes actually remaining *before* anything is
  allocated, so a frame claiming a 2 GiB string costs nothing.
* Fixed-width reads rely on ``struct.unpack_from`` raising ``struct.error`` on short
  buffers; the message-level ``decode`` turns that into ``CorruptFrameError``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Final
from uuid import UUID

from aiokafka_lite.core.errors import CorruptFrameError, VersionError

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_F64: Final = struct.Struct(">d")
_BOOL: Final = struct.Struct(">?")

ZERO_UUID: Final = UUID(int=0)

# Aliases: the classes below have methods named after these builtins.
_bytes = bytes
_bool = bool
BytesLike = bytes | bytearray | memoryview


class Reader:
    """Sequential decoder over a bytes-like buffer."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = data if isinstance(data, memoryview) else memoryview(data)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> memoryview:
        pos = self.pos
        if n < 0 or n > self.end - pos:
            raise CorruptFrameError(
                f"length {n} exceeds the {self.end - pos} bytes remaining at offset {pos}"
            )
        self.pos = pos + n
        return self.buf[pos : pos + n]

    def _fixed(self, st: struct.Struct) -> int:
        pos = self.pos
        if pos + st.size > self.end:
            raise CorruptFrameError(f"truncated at offset {pos}: need {st.size} bytes")
        self.pos = pos + st.size
        v: int = st.unpack_from(self.buf, pos)[0]
        return v

    # -- fixed width -------------------------------------------------------------
    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def float64(self) -> float:
        pos = self.pos
        if pos + 8 > self.end:
            raise CorruptFrameError(f"truncated at offset {pos}: need 8 bytes")
        self.pos = pos + 8
        v: float = _F64.unpack_from(self.buf, pos)[0]
        return v

    def bool(self) -> _bool:
        return self._fixed(_I8) != 0

    def uuid(self) -> UUID:
        return UUID(bytes=bytes(self._take(16)))

    # -- varints -----------------------------------------------------------------
    def uvarint(self) -> int:
        """Unsigned LEB128, at most 5 bytes (Kafka's unsigned varint is 32-bit)."""
        buf, pos, end = self.buf, self.pos, self.end
        result = 0
        shift = 0
        while True:
            if pos >= end:
                raise CorruptFrameError(f"truncated varint at offset {self.pos}")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= 35:
                raise CorruptFrameError(f"unsigned varint longer than 5 bytes at offset {self.pos}")
        self.pos = pos
        return result

    def uvarlong(self) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        result = 0
        shift = 0
        while True:
            if pos >= end:
                raise CorruptFrameError(f"truncated varint at offset {self.pos}")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= 70:
                raise CorruptFrameError(f"varlong longer than 10 bytes at offset {self.pos}")
        self.pos = pos
        return result

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        v = self.uvarlong()
        return (v >> 1) ^ -(v & 1)

    # -- strings -----------------------------------------------------------------
    def _utf8(self, n: int) -> str:
        raw = self._take(n)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise CorruptFrameError(f"invalid UTF-8 string at offset {self.pos - n}") from e

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise CorruptFrameError(f"null or negative string length {n} at offset {self.pos - 2}")
        return self._utf8(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise CorruptFrameError(f"negative string length {n} at offset {self.pos - 2}")
        return self._utf8(n)

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptFrameError(f"null compact string where not nullable at offset {self.pos}")
        return self._utf8(n)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._utf8(n)

    # -- bytes -------------------------------------------------------------------
    def bytes(self) -> _bytes:
        n = self.int32()
        if n < 0:
            raise CorruptFrameError(f"null or negative bytes length {n} at offset {self.pos - 4}")
        return bytes(self._take(n))

    def nullable_bytes(self) -> _bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise CorruptFrameError(f"negative bytes length {n} at offset {self.pos - 4}")
        return bytes(self._take(n))

    def compact_bytes(self) -> _bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptFrameError(f"null compact bytes where not nullable at offset {self.pos}")
        return bytes(self._take(n))

    def compact_nullable_bytes(self) -> _bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return bytes(self._take(n))

    # Record sets are returned as zero-copy views into the frame.
    def records(self) -> memoryview | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise CorruptFrameError(f"negative records length {n} at offset {self.pos - 4}")
        return self._take(n)

    def compact_records(self) -> memoryview | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._take(n)

    # -- arrays ------------------------------------------------------------------
    def _check_count(self, n: int) -> int:
        # Every element occupies at least one byte, except structs with no fields in
        # this version; bounding by the bytes left stops claimed-length allocations.
        if n > self.end - self.pos:
            raise CorruptFrameError(
                f"array of {n} elements exceeds the {self.end - self.pos} bytes remaining"
            )
        return n

    def array_len(self) -> int:
        n = self.int32()
        if n < 0:
            raise CorruptFrameError(f"null or negative array length {n} where not nullable")
        return self._check_count(n)

    def nullable_array_len(self) -> int:
        """Returns -1 for a null array."""
        n = self.int32()
        if n < -1:
            raise CorruptFrameError(f"negative array length {n}")
        return n if n == -1 else self._check_count(n)

    def compact_array_len(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptFrameError("null compact array where not nullable")
        return self._check_count(n)

    def compact_nullable_array_len(self) -> int:
        n = self.uvarint() - 1
        return n if n == -1 else self._check_count(n)

    def int32_array(self, n: int) -> list[int]:
        pos = self.pos
        if 4 * n > self.end - pos:
            raise CorruptFrameError(f"int32 array of {n} elements exceeds remaining bytes")
        self.pos = pos + 4 * n
        return list(struct.unpack_from(f">{n}i", self.buf, pos))

    def int64_array(self, n: int) -> list[int]:
        pos = self.pos
        if 8 * n > self.end - pos:
            raise CorruptFrameError(f"int64 array of {n} elements exceeds remaining bytes")
        self.pos = pos + 8 * n
        return list(struct.unpack_from(f">{n}q", self.buf, pos))

    # -- tagged fields -----------------------------------------------------------
    def tagged_fields(self) -> Iterator[tuple[int, Reader]]:
        """Yields ``(tag, sub_reader)``; the sub-reader covers exactly that field's bytes."""
        count = self.uvarint()
        self._check_count(count)
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise CorruptFrameError(f"tagged fields out of order or duplicated (tag {tag})")
            last = tag
            size = self.uvarint()
            start = self.pos
            self._take(size)
            yield tag, Reader(self.buf, start, start + size)

    def rest(self) -> _bytes:
        return bytes(self._take(self.end - self.pos))


class Writer:
    """Appends encoded primitives to a growing ``bytearray``."""

    __slots__ = ("buf",)

    def __init__(self, buf: bytearray | None = None) -> None:
        self.buf = bytearray() if buf is None else buf

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def bool(self, v: _bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: UUID) -> None:
        self.buf += v.bytes

    def uvarint(self, v: int) -> None:
        if v < 0:
            raise VersionError(f"unsigned varint cannot hold {v}")
        buf = self.buf
        while v > 0x7F:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 31))

    def varlong(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 63))

    # -- strings -----------------------------------------------------------------
    def string(self, v: str | None) -> None:
        if v is None:
            raise VersionError("null string in a non-nullable field/version")
        raw = v.encode()
        self.buf += _I16.pack(len(raw))
        self.buf += raw

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str | None) -> None:
        if v is None:
            raise VersionError("null string in a non-nullable field/version")
        raw = v.encode()
        self.uvarint(len(raw) + 1)
        self.buf += raw

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    # -- bytes (also used for record sets) ---------------------------------------
    def bytes(self, v: BytesLike | None) -> None:
        if v is None:
            raise VersionError("null bytes in a non-nullable field/version")
        self.buf += _I32.pack(len(v))
        self.buf += v

    def nullable_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes(v)

    def compact_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            raise VersionError("null bytes in a non-nullable field/version")
        self.uvarint(len(v) + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    # -- arrays ------------------------------------------------------------------
    def array_len(self, v: Sequence[object] | None) -> None:
        if v is None:
            raise VersionError("null array in a non-nullable field/version")
        self.buf += _I32.pack(len(v))

    def nullable_array_len(self, v: Sequence[object] | None) -> None:
        self.buf += _I32.pack(-1 if v is None else len(v))

    def compact_array_len(self, v: Sequence[object] | None) -> None:
        if v is None:
            raise VersionError("null array in a non-nullable field/version")
        self.uvarint(len(v) + 1)

    def compact_nullable_array_len(self, v: Sequence[object] | None) -> None:
        self.uvarint(0 if v is None else len(v) + 1)

    def int32_array(self, v: Sequence[int]) -> None:
        self.buf += struct.pack(f">{len(v)}i", *v)

    def int64_array(self, v: Sequence[int]) -> None:
        self.buf += struct.pack(f">{len(v)}q", *v)

    # -- tagged fields -----------------------------------------------------------
    def tagged_fields(self, fields: dict[int, _bytes] | None) -> None:
        """Writes a tagged-field section from already-encoded field bodies."""
        if not fields:
            self.buf.append(0)
            return
        self.uvarint(len(fields))
        for tag in sorted(fields):
            body = fields[tag]
            self.uvarint(tag)
            self.uvarint(len(body))
            self.buf += body
