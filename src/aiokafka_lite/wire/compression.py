"""Record batch compression codecs (gzip, snappy, lz4, zstd) on top of ``cramjam``.

Decompression is always bounded by a caller-provided ``max_size``: the output is
written into a buffer that starts near the expected size and grows geometrically up
to ``max_size``, so a decompression bomb costs at most ``max_size`` bytes of memory
(never an amount chosen by the sender) before it is rejected with
:class:`~aiokafka_lite.core.errors.CorruptRecordError`.

LZ4 in Kafka is one LZ4 frame whose blocks are *independent*: Kafka's frame reader
rejects a frame without the block-independence flag ("Dependent block stream is
unsupported"), so that is what we write; any valid frame is accepted on read.

Snappy in Kafka is the *xerial* framing written by the Java client (a magic header
followed by big-endian length-prefixed raw snappy blocks); plain raw-block snappy and
the official snappy framing format are accepted on read too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import IntEnum
from typing import Final

import cramjam

from aiokafka_lite.core.errors import ConfigError, CorruptRecordError, UnsupportedCodecError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Compression",
    "codec_from_attributes",
    "compress",
    "decompress",
    "decompress_to_buffer",
    "validate_level",
]

Buffer = bytes | bytearray | memoryview

#: Default cap on the decompressed size of one batch (or one legacy wrapper message).
DEFAULT_MAX_DECOMPRESSED_SIZE: Final = 100 * 1024 * 1024


class Compression(IntEnum):
    """Compression codec ids as stored in the low 3 bits of the batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_CODEC_MASK: Final = 0x07

# Inclusive level ranges accepted by the Java client (compression.<codec>.level), and
# the level used when the caller passes ``None``. lz4 defaults to the fast mode (the
# frame compressor's HC levels cost ~5x the CPU for a few percent of ratio).
_LEVELS: Final[dict[Compression, tuple[int, int, int]]] = {
    Compression.GZIP: (1, 9, 6),
    Compression.LZ4: (1, 17, 1),
    Compression.ZSTD: (-131072, 22, 3),
}

# Upper bounds on the expansion ratio of each format, used to reject impossible
# outputs early instead of growing the buffer all the way to ``max_size``. They are
# deliberately loose: deflate tops out at ~1032:1, lz4 at ~255:1, zstd RLE blocks at
# ~43690:1 (3-byte header + 1 byte for a 128 KiB block).
_MAX_RATIO_GZIP: Final = 1100
_MAX_RATIO_LZ4: Final = 300
_MAX_RATIO_ZSTD: Final = 65536

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")
_XERIAL_BLOCK_SIZE: Final = 32 * 1024
_SNAPPY_FRAMED_MAGIC: Final = b"\xff\x06\x00\x00sNaPpY"
_U32BE: Final = struct.Struct(">I")
_U32LE: Final = struct.Struct("<I")
_U64LE: Final = struct.Struct("<Q")
# Raw snappy blocks expand at most ~21x (a 3-byte copy emits up to 64 bytes); 32x
# plus slack bounds the declared length before anything is allocated.
_SNAPPY_MAX_RATIO: Final = 32
_BUFFER_FULL_MARKERS: Final = ("failed to write whole buffer", "smaller than required")
_INITIAL_MIN: Final = 4096


def codec_from_attributes(attributes: int) -> Compression:
    """Map batch attributes to a codec, raising ``UnsupportedCodecError`` for 5-7."""
    code = attributes & _CODEC_MASK
    try:
        return Compression(code)
    except ValueError:
        raise UnsupportedCodecError(f"unknown compression codec id {code}") from None


def validate_level(codec: Compression, level: int | None) -> int | None:
    """Check ``level`` for ``codec`` (``ConfigError`` if invalid); return the effective level."""
    spec = _LEVELS.get(codec)
    if spec is None:
        if level is not None:
            raise ConfigError(f"compression codec {codec.name} does not take a level (got {level})")
        return None
    low, high, default = spec
    if level is None:
        return default
    if not low <= level <= high:
        raise ConfigError(f"{codec.name} compression level must be in [{low}, {high}], got {level}")
    return level


def compress(codec: Compression, data: Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` with ``codec`` (``NONE`` returns the bytes unchanged).

    ``level`` is validated against the ranges the Java client accepts; ``None`` picks
    the codec default (gzip 6, lz4 fast mode, zstd 3).
    """
    codec = Compression(codec)
    lvl = validate_level(codec, level)
    try:
        if codec is Compression.NONE:
            return bytes(data)
        if codec is Compression.GZIP:
            return bytes(cramjam.gzip.compress(data, level=lvl))
        if codec is Compression.SNAPPY:
            return _xerial_compress(data)
        if codec is Compression.LZ4:
            return _lz4_compress(data, lvl)
        return bytes(cramjam.zstd.compress(data, level=lvl))
    except cramjam.CompressionError as exc:  # pragma: no cover - cramjam internal failure
        raise CorruptRecordError(f"{codec.name} compression failed: {exc}") from exc


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    """One LZ4 frame of independent 64 KiB blocks, without a content checksum, as
    Kafka's own producer writes it (``cramjam.lz4.compress`` links blocks, which
    Kafka's reader refuses). cramjam adds block checksums, which Kafka verifies."""
    compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    # The streaming compressor takes only ``bytes``; the copy costs far less than
    # the compression itself.
    compressor.compress(data if isinstance(data, bytes) else bytes(data))
    return bytes(compressor.finish())


def decompress(codec: Compression, data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress ``data``; output larger than ``max_size`` raises ``CorruptRecordError``."""
    out = decompress_to_buffer(codec, data, max_size)
    return out if isinstance(out, bytes) else bytes(out)


def decompress_to_buffer(
    codec: Compression, data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes | bytearray:
    """Like :func:`decompress` but may return a ``bytearray`` to save a copy."""
    try:
        codec = Compression(codec)
    except ValueError:
        raise UnsupportedCodecError(f"unknown compression codec id {codec}") from None
    if max_size < 0:
        raise ValueError("max_size must be >= 0")
    if codec is Compression.NONE:
        if len(data) > max_size:
            raise CorruptRecordError(
                f"uncompressed data of {len(data)} bytes exceeds cap of {max_size} bytes"
            )
        return bytes(data)
    if codec is Compression.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec is Compression.GZIP:
        return _bounded_decompress(
            "GZIP", cramjam.gzip.decompress_into, data, _gzip_sizes(data), max_size, _MAX_RATIO_GZIP
        )
    if codec is Compression.LZ4:
        return _bounded_decompress(
            "LZ4", cramjam.lz4.decompress_into, data, _lz4_sizes(data), max_size, _MAX_RATIO_LZ4
        )
    return _bounded_decompress(
        "ZSTD", cramjam.zstd.decompress_into, data, _zstd_sizes(data), max_size, _MAX_RATIO_ZSTD
    )


def _is_buffer_full(exc: Exception) -> bool:
    text = str(exc)
    return any(marker in text for marker in _BUFFER_FULL_MARKERS)


# (guaranteed minimum output size, initial buffer size) derived from container headers;
# ``None`` when the layout is not understood (the decoder then reports the problem).
Sizes = tuple[int, int] | None


def _bounded_decompress(
    name: str,
    fn: Callable[[Buffer, bytearray], int],
    data: Buffer,
    sizes: Sizes,
    max_size: int,
    max_ratio: int,
) -> bytearray:
    """Decompress into a buffer that doubles (re-decompressing) until the output fits.

    cramjam's ``decompress_into`` stops with an error as soon as the output buffer is
    full, so memory never exceeds the current buffer, which never exceeds ``max_size``
    (nor what the format could produce from ``len(data)`` bytes). Doubling keeps total
    work within ~2x of one pass; with a good initial size there is a single pass.
    """
    n_in = len(data)
    if sizes is not None and sizes[0] > max_size:
        raise CorruptRecordError(f"{name} decompressed size exceeds cap of {max_size} bytes")
    ceiling = min(max_size, n_in * max_ratio + _INITIAL_MIN)
    size = sizes[1] if sizes is not None else n_in * 4
    size = max(min(size, ceiling), min(_INITIAL_MIN, ceiling))
    while True:
        out = bytearray(size)
        try:
            written = fn(data, out)
        except cramjam.DecompressionError as exc:
            del out  # free before allocating the next, larger buffer
            if not _is_buffer_full(exc):
                raise CorruptRecordError(f"{name} decompression failed: {exc}") from None
            if size >= ceiling:
                if ceiling >= max_size:
                    raise CorruptRecordError(
                        f"{name} decompressed size exceeds cap of {max_size} bytes"
                    ) from None
                raise CorruptRecordError(
                    f"{name} data expands beyond the codec's maximum ratio ({n_in} compressed bytes)"
                ) from None
            size = min(size * 2, ceiling)
            continue
        if written < size:
            del out[written:]
        return out


def _gzip_sizes(data: Buffer) -> Sizes:
    # ISIZE: uncompressed length mod 2**32 of the last member; only a guess.
    if len(data) < 18:
        return None
    return 0, int(_U32LE.unpack_from(data, len(data) - 4)[0])


_LZ4_MAGIC: Final = 0x184D2204
_ZSTD_MAGIC: Final = 0xFD2FB528
_LZ4_BLOCK_MAX: Final = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_ZSTD_BLOCK_MAX: Final = 128 << 10


def _is_skippable(magic: int) -> bool:
    return magic & 0xFFFFFFF0 == 0x184D2A50


def _lz4_sizes(data: Buffer) -> Sizes:
    """Walk the frames' block headers: stored blocks are exact, compressed blocks are
    bounded by the frame's block size (and lz4's ~255x ratio).

    This costs one step per 64 KiB+ block and, unlike the optional content-size field,
    yields an upper bound that holds for any well-formed frame, so the output buffer
    is allocated once.
    """
    n = len(data)
    pos = 0
    lower = upper = 0
    while pos < n:
        if n - pos < 8:
            return None
        (magic,) = _U32LE.unpack_from(data, pos)
        if _is_skippable(magic):
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _LZ4_MAGIC:
            return None
        flg = data[pos + 4]
        block_max = _LZ4_BLOCK_MAX.get((data[pos + 5] >> 4) & 7)
        if block_max is None:
            return None
        pos += 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        block_checksum = 4 if flg & 0x10 else 0
        while True:
            if n - pos < 4:
                return None
            (size,) = _U32LE.unpack_from(data, pos)
            pos += 4
            if size == 0:
                break
            raw = size & 0x7FFFFFFF
            if size & 0x80000000:
                lower += raw
                upper += raw
            else:
                upper += min(block_max, raw * 256 + 64)
            pos += raw + block_checksum
            if pos > n:
                return None
        pos += 4 if flg & 0x04 else 0
    return lower, upper


def _zstd_sizes(data: Buffer) -> Sizes:
    """Frame content sizes when declared (the decoder enforces them, so they are exact),
    else a walk over block headers: raw/RLE blocks are exact, compressed blocks hold at
    most 128 KiB."""
    n = len(data)
    pos = 0
    lower = upper = 0
    while pos < n:
        if n - pos < 8:
            return None
        (magic,) = _U32LE.unpack_from(data, pos)
        if _is_skippable(magic):
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            return None
        fhd = data[pos + 4]
        single_segment = (fhd >> 5) & 1
        pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fhd >> 6]
        if pos + fcs_size > n:
            return None
        declared: int | None = None
        if fcs_size:
            declared = int.from_bytes(data[pos : pos + fcs_size], "little") + (256 if fcs_size == 2 else 0)
        pos += fcs_size
        exact = bound = 0
        while True:
            if n - pos < 3:
                return None
            header = int.from_bytes(data[pos : pos + 3], "little")
            pos += 3
            kind = (header >> 1) & 3
            size = header >> 3
            if kind == 0:  # raw
                exact += size
                bound += size
                pos += size
            elif kind == 1:  # RLE: one byte repeated `size` times
                exact += size
                bound += size
                pos += 1
            elif kind == 2:
                bound += _ZSTD_BLOCK_MAX
                pos += size
            else:
                return None
            if pos > n:
                return None
            if header & 1:
                break
        pos += 4 if fhd & 0x04 else 0
        lower += declared if declared is not None else exact
        upper += min(bound, declared) if declared is not None else bound
    return lower, upper


def _xerial_compress(data: Buffer) -> bytes:
    """Write the xerial snappy framing the Java client uses (32 KiB raw blocks)."""
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_U32BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_len(block: Buffer, max_size: int) -> int:
    try:
        declared = int(cramjam.snappy.decompress_raw_len(block))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"SNAPPY block header is invalid: {exc}") from None
    if declared > len(block) * _SNAPPY_MAX_RATIO + 64:
        raise CorruptRecordError(f"SNAPPY block claims {declared} bytes from {len(block)} compressed bytes")
    if declared > max_size:
        raise CorruptRecordError(f"SNAPPY decompressed size exceeds cap of {max_size} bytes")
    return declared


def _snappy_decompress(data: Buffer, max_size: int) -> bytes | bytearray:
    view = memoryview(data).cast("B")
    if bytes(view[:8]) == _XERIAL_MAGIC:
        return _xerial_decompress(view, max_size)
    if bytes(view[:10]) == _SNAPPY_FRAMED_MAGIC:
        # Official framing format (not written by Kafka clients, accepted for leniency).
        return _bounded_decompress(
            "SNAPPY", cramjam.snappy.decompress_into, view, None, max_size, _SNAPPY_MAX_RATIO
        )
    declared = _snappy_raw_len(view, max_size)
    out = bytearray(declared)
    try:
        cramjam.snappy.decompress_raw_into(view, out)
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"SNAPPY decompression failed: {exc}") from None
    return out


def _xerial_decompress(view: memoryview, max_size: int) -> bytearray:
    """Two passes: validate every block header and sum the sizes, then allocate once."""
    if len(view) < 16:
        raise CorruptRecordError("SNAPPY xerial header truncated")
    blocks: list[tuple[memoryview, int]] = []
    total = 0
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"SNAPPY xerial block length truncated at byte {pos}")
        (length,) = _U32BE.unpack_from(view, pos)
        pos += 4
        if length > end - pos:
            raise CorruptRecordError(
                f"SNAPPY xerial block at byte {pos - 4} claims {length} bytes, {end - pos} remain"
            )
        block = view[pos : pos + length]
        pos += length
        declared = _snappy_raw_len(block, max_size)
        total += declared
        if total > max_size:
            raise CorruptRecordError(f"SNAPPY decompressed size exceeds cap of {max_size} bytes")
        blocks.append((block, declared))
    out = bytearray(total)
    target = memoryview(out)
    offset = 0
    try:
        for block, declared in blocks:
            cramjam.snappy.decompress_raw_into(block, target[offset : offset + declared])
            offset += declared
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"SNAPPY decompression failed: {exc}") from None
    finally:
        target.release()
    return out
