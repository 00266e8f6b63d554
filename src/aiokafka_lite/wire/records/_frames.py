"""The one batch parser (:func:`parse_batches`: framing and header parsing of a records
blob, used by consumers and the broker alike) and in-place header rewrites for the broker."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

from crc32c import crc32c

from aiokafka_lite.core.errors import CorruptRecordError
from aiokafka_lite.wire.compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from aiokafka_lite.wire.records._legacy import LEGACY_MIN_SIZE, LegacyRecordBatch
from aiokafka_lite.wire.records._model import (
    ATTR_TIMESTAMP_TYPE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    V2_ATTRIBUTES_OFFSET,
    V2_CRC_OFFSET,
    V2_HEADER_SIZE,
    V2_LEADER_EPOCH_OFFSET,
    V2_MAX_TIMESTAMP_OFFSET,
    BatchTooShortError,
    Buffer,
)
from aiokafka_lite.wire.records._v2 import RecordBatch

AnyBatch = RecordBatch | LegacyRecordBatch
assert LOG_OVERHEAD == 12 and MAGIC_OFFSET == 16  # spelled out in parse_batches' loop

# Smallest length field of any message (a magic 0 message without key and value), and of
# a v2 batch (its header after the length field).
_MIN_LENGTH: Final = LEGACY_MIN_SIZE[0]
_V2_MIN_LENGTH: Final = V2_HEADER_SIZE - LOG_OVERHEAD

_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U32: Final = struct.Struct(">I")
_I16: Final = struct.Struct(">h")


def parse_batches(
    view: memoryview,
    pos: int = 0,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[AnyBatch]:
    """Lazily frame the batches of ``view`` from ``pos`` and parse their headers (records
    stay lazy); stops at an incomplete tail.

    This is the one batch parser: consumers, the broker (through :func:`read_batch`)
    and :func:`iter_batches` all frame and parse record sets with it. It walks a record
    set the way Kafka does: fewer than 12 bytes, or fewer than 17 (the magic byte), or
    a length beyond the data is an incomplete tail (a fetch response cut at its size
    limit; Kafka ignores such a fragment after a produced batch too). A length below
    the smallest message (14 bytes) or a magic other than 0, 1 and 2 raises
    ``CorruptRecordError``; a complete batch too short for its format's header raises
    ``BatchTooShortError``. ``check_crc`` applies to legacy messages, whose wrappers
    are checked as they are parsed; a v2 batch's CRC is checked by ``validate_crc()``
    when the caller wants it. ``view`` must be a flat byte view (:func:`as_byte_view`);
    a batch ends at ``batch.position + batch.size_in_bytes``.
    """
    # A generator rather than a function per batch: resuming it costs less than a call,
    # and consumers parse every fetched batch through here.
    n = len(view)
    unpack_length = _I32.unpack_from
    v2 = RecordBatch
    min_length = _MIN_LENGTH
    v2_min_length = _V2_MIN_LENGTH
    while n - pos >= 12:  # LOG_OVERHEAD; the constants are locals in this hot loop
        (length,) = unpack_length(view, pos + 8)
        if length < min_length:
            if length < 0:
                raise CorruptRecordError(f"batch at byte {pos} has negative length {length}")
            raise CorruptRecordError(f"batch at byte {pos} is too short ({length} bytes after length)")
        if n - pos <= 16:  # MAGIC_OFFSET
            return
        magic = view[pos + 16]
        if magic > 2:
            raise CorruptRecordError(f"batch at byte {pos} has unknown magic {magic}")
        end = pos + 12 + length
        if end > n:
            return
        if magic == 2:
            if length < v2_min_length:
                raise BatchTooShortError(
                    f"v2 batch at byte {pos} is too short ({length} bytes after length)", magic, end - pos
                )
            yield v2(view, pos, max_decompressed_size)
        else:
            if length < LEGACY_MIN_SIZE[magic]:
                raise BatchTooShortError(
                    f"magic {magic} message at byte {pos} is too short ({length} bytes after length)",
                    magic,
                    end - pos,
                )
            yield LegacyRecordBatch(
                view, pos, end, check_crc=check_crc, max_decompressed_size=max_decompressed_size
            )
        pos = end


def read_batch(
    view: memoryview,
    pos: int = 0,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> AnyBatch | None:
    """The one batch at ``view[pos:]`` (see :func:`parse_batches`), or ``None`` when the
    bytes stop before it does."""
    return next(parse_batches(view, pos, check_crc, max_decompressed_size), None)


def as_byte_view(data: Buffer) -> memoryview:
    """A flat unsigned-byte ``memoryview`` of ``data`` (no copy)."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _iter(view: memoryview, allow_partial_tail: bool, check_crc: bool, max_size: int) -> Iterator[AnyBatch]:
    pos = 0
    for batch in parse_batches(view, 0, check_crc, max_size):
        pos = batch.position + batch.size_in_bytes
        yield batch
    if pos != len(view) and not allow_partial_tail:
        raise CorruptRecordError(f"incomplete batch at byte {pos} ({len(view) - pos} trailing bytes)")


def scan_batches(data: Buffer, *, allow_partial_tail: bool = True) -> tuple[list[tuple[int, int, int]], int]:
    """Frame ``data`` into ``(position, end, magic)`` triples (no CRC check, no records).

    Returns the frames and the number of bytes they cover. A trailing incomplete batch
    (normal in fetch responses cut at max bytes) is left out unless
    ``allow_partial_tail`` is false, in which case it is a ``CorruptRecordError``. A
    non-empty blob with zero bytes consumed means the first batch is larger than what
    was fetched.
    """
    frames = [
        (b.position, b.position + b.size_in_bytes, b.magic)
        for b in _iter(as_byte_view(data), allow_partial_tail, False, DEFAULT_MAX_DECOMPRESSED_SIZE)
    ]
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
    for batch in _iter(as_byte_view(data), allow_partial_tail, check_crc, max_decompressed_size):
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
    """Header-only parse (no CRC check, no decompression).

    ``validate_crc()`` and ``validate_header()`` check a batch further when wanted.
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


def set_max_timestamp(
    buf: bytearray | memoryview, pos: int, timestamp: int, *, log_append_time: bool
) -> None:
    """Set a v2 batch's max timestamp and timestamp type (attributes bit 3), recomputing
    the CRC: what a broker does to a produced batch (the true max of its records for
    CreateTime, the append time for LogAppendTime)."""
    _check_v2(buf, pos)
    (length,) = _I32.unpack_from(buf, pos + 8)
    end = pos + LOG_OVERHEAD + length
    if length < V2_HEADER_SIZE - LOG_OVERHEAD or end > len(buf):
        raise ValueError(f"batch at byte {pos} is truncated")
    (attributes,) = _I16.unpack_from(buf, pos + V2_ATTRIBUTES_OFFSET)
    if log_append_time:
        attributes |= ATTR_TIMESTAMP_TYPE
    else:
        attributes &= ~ATTR_TIMESTAMP_TYPE
    _I16.pack_into(buf, pos + V2_ATTRIBUTES_OFFSET, attributes)
    _I64.pack_into(buf, pos + V2_MAX_TIMESTAMP_OFFSET, timestamp)
    _U32.pack_into(buf, pos + V2_CRC_OFFSET, crc32c(memoryview(buf)[pos + V2_ATTRIBUTES_OFFSET : end]))


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Mark a v2 batch LOG_APPEND_TIME with ``timestamp`` as max timestamp; recomputes the CRC."""
    set_max_timestamp(buf, pos, timestamp, log_append_time=True)
