"""Splitting a records blob into batches, and in-place header rewrites for the broker."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

from crc32c import crc32c

from aiokafka_lite.errors import CorruptRecordError

from ..compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from ._legacy import LEGACY_MIN_SIZE, LegacyRecordBatch
from ._model import (
    ATTR_TIMESTAMP_TYPE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    V2_ATTRIBUTES_OFFSET,
    V2_CRC_OFFSET,
    V2_HEADER_SIZE,
    V2_LEADER_EPOCH_OFFSET,
    V2_MAX_TIMESTAMP_OFFSET,
    Buffer,
)
from ._v2 import RecordBatch

AnyBatch = RecordBatch | LegacyRecordBatch

_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U32: Final = struct.Struct(">I")
_I16: Final = struct.Struct(">h")


def _as_view(data: Buffer) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _iter_frames(view: memoryview, allow_partial_tail: bool) -> Iterator[tuple[int, int, int]]:
    """Yield ``(position, end, magic)`` per complete batch, checking only the framing."""
    n = len(view)
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(view, pos + 8)
        if length < 0:
            raise CorruptRecordError(f"batch at byte {pos} has negative length {length}")
        end = pos + LOG_OVERHEAD + length
        if end > n:
            break
        if length < MAGIC_OFFSET - LOG_OVERHEAD + 1:
            raise CorruptRecordError(f"batch at byte {pos} is too short ({length} bytes after length)")
        magic = view[pos + MAGIC_OFFSET]
        if magic == 2:
            if length < V2_HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptRecordError(f"v2 batch at byte {pos} is too short ({length} bytes after length)")
        elif magic < 2:
            if length < LEGACY_MIN_SIZE[magic]:
                raise CorruptRecordError(
                    f"magic {magic} message at byte {pos} is too short ({length} bytes after length)"
                )
        else:
            raise CorruptRecordError(f"batch at byte {pos} has unknown magic {magic}")
        yield pos, end, magic
        pos = end
    if pos != n and not allow_partial_tail:
        raise CorruptRecordError(f"incomplete batch at byte {pos} ({n - pos} trailing bytes)")


def scan_batches(data: Buffer, *, allow_partial_tail: bool = True) -> tuple[list[tuple[int, int, int]], int]:
    """Frame ``data`` into ``(position, end, magic)`` triples without parsing headers.

    Returns the frames and the number of bytes they cover. A trailing incomplete batch
    (normal in fetch responses cut at max bytes) is left out unless
    ``allow_partial_tail`` is false, in which case it is a ``CorruptRecordError``. A
    non-empty blob with zero bytes consumed means the first batch is larger than what
    was fetched.
    """
    frames = list(_iter_frames(_as_view(data), allow_partial_tail))
    return frames, frames[-1][1] if frames else 0


def iter_batches(
    data: Buffer,
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    allow_partial_tail: bool = True,
) -> Iterator[AnyBatch]:
    """Lazily yield the complete batches of a records blob.

    Unlike :func:`decode_batches`, good batches before a corrupt one are delivered
    before the ``CorruptRecordError`` is raised, which is what a consumer wants.
    Magic 2 batches are :class:`RecordBatch`; magic 0/1 messages are
    :class:`LegacyRecordBatch`. Records are decoded by ``batch.records()``, with
    decompression bounded by ``max_decompressed_size`` per batch.
    """
    view = _as_view(data)
    for pos, end, magic in _iter_frames(view, allow_partial_tail):
        batch: AnyBatch
        if magic == 2:
            batch = RecordBatch(view, pos, max_decompressed_size=max_decompressed_size)
        else:
            batch = LegacyRecordBatch(
                view, pos, end, check_crc=check_crc, max_decompressed_size=max_decompressed_size
            )
        if check_crc:
            batch.validate_crc()
        yield batch


def decode_batches(
    data: Buffer,
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    allow_partial_tail: bool = True,
) -> list[AnyBatch]:
    """Parse every complete batch in a records blob (e.g. one fetched partition).

    All-or-nothing: any corrupt batch (framing, or CRC with ``check_crc``) raises
    ``CorruptRecordError``; see :func:`iter_batches` for the incremental variant.
    """
    return list(
        iter_batches(
            data,
            check_crc=check_crc,
            max_decompressed_size=max_decompressed_size,
            allow_partial_tail=allow_partial_tail,
        )
    )


def read_batch_headers(data: Buffer, *, allow_partial_tail: bool = True) -> list[AnyBatch]:
    """Header-only parse (no CRC check, no decompression), e.g. for a broker.

    A broker validating a produce request should pass ``allow_partial_tail=False``
    and call ``validate_crc()`` / ``validate_header()`` on each batch.
    """
    return decode_batches(data, check_crc=False, allow_partial_tail=allow_partial_tail)


def _check_v2(buf: bytearray | memoryview, pos: int) -> None:
    if pos < 0 or len(buf) - pos < V2_HEADER_SIZE:
        raise ValueError(f"no v2 batch header at byte {pos}")
    if buf[pos + MAGIC_OFFSET] != 2:
        raise ValueError(f"batch at byte {pos} has magic {buf[pos + MAGIC_OFFSET]}, expected 2")


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite a batch's base offset in place (not covered by the CRC, so no re-encode).

    Works for v2 batches and for uncompressed legacy messages (whose offset field is
    likewise outside the CRC).
    """
    if pos < 0 or len(buf) - pos < LOG_OVERHEAD:
        raise ValueError(f"no batch header at byte {pos}")
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite a v2 batch's partition leader epoch in place (outside the CRC)."""
    _check_v2(buf, pos)
    _I32.pack_into(buf, pos + V2_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Mark a v2 batch LOG_APPEND_TIME with ``timestamp`` as max timestamp; recomputes the CRC."""
    _check_v2(buf, pos)
    (length,) = _I32.unpack_from(buf, pos + 8)
    end = pos + LOG_OVERHEAD + length
    if length < V2_HEADER_SIZE - LOG_OVERHEAD or end > len(buf):
        raise ValueError(f"batch at byte {pos} is truncated")
    (attributes,) = _I16.unpack_from(buf, pos + V2_ATTRIBUTES_OFFSET)
    _I16.pack_into(buf, pos + V2_ATTRIBUTES_OFFSET, attributes | ATTR_TIMESTAMP_TYPE)
    _I64.pack_into(buf, pos + V2_MAX_TIMESTAMP_OFFSET, timestamp)
    _U32.pack_into(buf, pos + V2_CRC_OFFSET, crc32c(memoryview(buf)[pos + V2_ATTRIBUTES_OFFSET : end]))
