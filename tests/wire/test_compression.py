"""Compression codecs: round trips, levels, xerial snappy framing, bounded decompression."""

from __future__ import annotations

import gzip
import os
import struct
import time
import tracemalloc

import cramjam
import lz4.block as lz4_block
import lz4.frame as lz4_frame  # kafka-python's lz4 codec dependency
import pytest
import zstandard  # kafka-python's zstd codec dependency

from aiokafka_lite.core.errors import ConfigError, CorruptRecordError, UnsupportedCodecError
from aiokafka_lite.wire import compression as C
from aiokafka_lite.wire.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    codec_from_attributes,
    compress,
    decompress,
    decompress_to_buffer,
    validate_level,
)

CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c]
SAMPLES = [b"", b"a", b"hello world" * 1000, os.urandom(100_000), bytes(range(256)) * 1000, b"\x00" * 300_000]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("index", range(len(SAMPLES)))
def test_round_trip(codec: Compression, index: int) -> None:
    data = SAMPLES[index]
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed, len(data)) == data
    assert decompress(codec, memoryview(bytearray(packed)), len(data) + 10) == data
    assert bytes(decompress_to_buffer(codec, packed)) == data


@pytest.mark.parametrize(
    ("codec", "levels"),
    [(Compression.GZIP, [1, 5, 9]), (Compression.LZ4, [1, 9, 17]), (Compression.ZSTD, [-5, 1, 3, 19, 22])],
)
def test_levels(codec: Compression, levels: list[int]) -> None:
    data = b"compress me please " * 5000
    sizes = {level: len(compress(codec, data, level)) for level in levels}
    for level in levels:
        assert decompress(codec, compress(codec, data, level), len(data)) == data
    assert sizes[levels[-1]] <= sizes[levels[0]]


@pytest.mark.parametrize(
    ("codec", "level"),
    [(Compression.GZIP, 0), (Compression.GZIP, 10), (Compression.LZ4, 0), (Compression.LZ4, 18),
     (Compression.ZSTD, 23), (Compression.ZSTD, -131073), (Compression.SNAPPY, 1), (Compression.NONE, 1)],
)  # fmt: skip
def test_invalid_levels(codec: Compression, level: int) -> None:
    with pytest.raises(ConfigError):
        compress(codec, b"x", level)
    with pytest.raises(ConfigError):
        validate_level(codec, level)


def test_default_levels() -> None:
    assert validate_level(Compression.GZIP, None) == 6
    assert validate_level(Compression.ZSTD, None) == 3
    assert validate_level(Compression.LZ4, None) == 1
    assert validate_level(Compression.SNAPPY, None) is None


def test_unknown_codecs() -> None:
    for code in (5, 6, 7):
        with pytest.raises(UnsupportedCodecError, match=f"id {code}"):
            codec_from_attributes(0x10 | code)
        with pytest.raises(UnsupportedCodecError):
            decompress(code, b"x", 10)  # type: ignore[arg-type]
    assert codec_from_attributes(0x3B) is Compression.LZ4


# ------------------------------------------------------------------ snappy framing


def test_xerial_layout() -> None:
    data = os.urandom(80_000)
    packed = compress(Compression.SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">I", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [32768, 32768, 80_000 - 65536]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_and_framed_and_xerial_variants() -> None:
    data = b"snappy payload " * 3000
    raw = bytes(cramjam.snappy.compress_raw(data))
    framed = bytes(cramjam.snappy.compress(data))
    assert decompress(Compression.SNAPPY, raw, len(data)) == data
    assert decompress(Compression.SNAPPY, framed, len(data)) == data
    # a xerial stream with a different version pair and one big block is still read
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">I", len(raw)) + raw
    assert decompress(Compression.SNAPPY, xerial, len(data)) == data
    assert decompress(Compression.SNAPPY, b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1), 0) == b""


@pytest.mark.parametrize(
    "bad",
    [b"\x82SNAPPY\x00\x00\x00", b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00",
     b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x10abc", b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x02\x05a",
     b"\xff\xff\xff\xff\x0f", b"\x05hel", b"", b"\xff\x06\x00\x00sNaPpY\x01\x02"],
)  # fmt: skip
def test_snappy_corrupt(bad: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="SNAPPY"):
        decompress(Compression.SNAPPY, bad, 1 << 20)


def test_snappy_claimed_length_checked_before_allocating() -> None:
    # raw block preamble claiming 1 GiB from 5 bytes: rejected on the ratio, nothing allocated
    claim = bytes(cramjam.snappy.compress_raw(b"")).replace(b"\x00", b"\x80\x80\x80\x80\x04", 1)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="claims"):
            decompress(Compression.SNAPPY, claim + b"\x00", 1 << 31)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 16


# ------------------------------------------------------------------ bounded decompression


@pytest.mark.parametrize("codec", CODECS)
def test_cap_boundary(codec: Compression) -> None:
    data = b"0123456789abcdef" * 4096  # 64 KiB
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data
    with pytest.raises(CorruptRecordError, match=f"exceeds cap of {len(data) - 1} bytes"):
        decompress(codec, packed, len(data) - 1)
    assert decompress(codec, compress(codec, b""), 0) == b""


BOMBS: dict[Compression, bytes] = {}


@pytest.mark.parametrize("codec", COMPRESSED)
def test_zip_bomb_is_bounded(codec: Compression) -> None:
    big = 64 << 20  # 64 MiB of zeros against an 8 MiB cap
    bomb = BOMBS.get(codec)
    if bomb is None:
        bomb = BOMBS[codec] = compress(codec, b"\x00" * big)
    cap = 8 << 20
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(CorruptRecordError, match=f"{codec.name}.*(cap|claims|ratio)"):
            decompress(codec, bomb, cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= cap + (1 << 20)
    assert time.perf_counter() - t0 < 10


def test_zstd_declared_size_rejected_without_allocating() -> None:
    bomb = bytes(cramjam.zstd.compress(b"\x00" * (64 << 20), level=1))
    assert C._zstd_sizes(bomb) == (64 << 20, 64 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="exceeds cap"):
            decompress(Compression.ZSTD, bomb, 1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 16


def test_default_cap() -> None:
    assert DEFAULT_MAX_DECOMPRESSED_SIZE == 100 * 1024 * 1024


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("bad", [b"", b"garbage!" * 10, b"\x00" * 40])
def test_garbage_is_corrupt(codec: Compression, bad: bytes) -> None:
    with pytest.raises(CorruptRecordError, match=codec.name):
        decompress(codec, bad, 1 << 20)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_is_corrupt(codec: Compression) -> None:
    packed = compress(codec, os.urandom(50_000))
    for cut in (1, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptRecordError):
            decompress(codec, packed[:cut], 1 << 20)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_cramjam_buffer_full_message_is_recognised(codec: Compression) -> None:
    # Pins the cramjam behaviour the growth loop relies on: a too-small output buffer
    # is reported with a recognisable message rather than silently truncated.
    module = {Compression.GZIP: cramjam.gzip, Compression.LZ4: cramjam.lz4, Compression.ZSTD: cramjam.zstd}[
        codec
    ]
    packed = bytes(module.compress(b"x" * 10_000))
    with pytest.raises(cramjam.DecompressionError) as info:
        module.decompress_into(packed, bytearray(100))
    assert C._is_buffer_full(info.value)


def test_growth_without_size_information(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"\x00" * (3 << 20)
    monkeypatch.setattr(C, "_gzip_sizes", lambda _data: None)
    packed = compress(Compression.GZIP, data)
    assert decompress(Compression.GZIP, packed, len(data)) == data
    with pytest.raises(CorruptRecordError, match="cap"):
        decompress(Compression.GZIP, packed, len(data) - 1)


# ------------------------------------------------------------------ size walks


def test_lz4_sizes_bound_real_frames() -> None:
    for data in SAMPLES:
        for kwargs in (
            {},
            {"block_size": lz4_frame.BLOCKSIZE_MAX4MB, "content_checksum": True, "block_checksum": True},
            {"store_size": False, "block_linked": False},
            {"compression_level": 12},
        ):
            packed = lz4_frame.compress(data, **kwargs)
            sizes = C._lz4_sizes(packed)
            assert sizes is not None
            assert sizes[0] <= len(data) <= sizes[1]
            assert decompress(Compression.LZ4, packed, len(data)) == data
    assert C._lz4_sizes(b"not lz4 at all") is None


def _lz4_frame_blocks(frame: bytes) -> tuple[int, int, list[tuple[bool, bytes]]]:
    """(FLG, BD, [(compressed, block bytes)]) of a single LZ4 frame, per the LZ4 frame format."""
    (magic,) = struct.unpack_from("<I", frame, 0)
    assert magic == 0x184D2204
    flg, bd = frame[4], frame[5]
    pos = 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    blocks = []
    while True:
        (size,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if size == 0:
            break
        raw = size & 0x7FFFFFFF
        blocks.append((not size & 0x80000000, frame[pos : pos + raw]))
        pos += raw + (4 if flg & 0x10 else 0)
    assert pos + (4 if flg & 0x04 else 0) == len(frame)  # one frame, nothing after it
    return flg, bd, blocks


@pytest.mark.parametrize("level", [None, 1, 9, 17])
def test_lz4_frames_have_independent_blocks_like_kafkas_producer(level: int | None) -> None:
    # Kafka's LZ4 reader refuses a frame whose FLG byte lacks the block-independence
    # bit ("Dependent block stream is unsupported") and answers the produce request with
    # UNKNOWN_SERVER_ERROR. A 40 KB random chunk repeated across 64 KiB blocks would make
    # a linked encoder refer back to the previous block, so each block decoding on its
    # own shows that they really are independent.
    chunk = os.urandom(40_000)
    data = chunk * 8 + b"tail"
    packed = compress(Compression.LZ4, memoryview(bytearray(data)), level)
    flg, bd, blocks = _lz4_frame_blocks(packed)
    assert flg >> 6 == 0b01  # frame format version 1
    assert flg & 0x20, f"FLG {flg:#04x} lacks the block-independence bit"
    assert flg & 0x03 == 0  # reserved bit and dictionary id unset
    assert not flg & 0x04  # no content checksum, as Kafka's producer writes
    assert bd == 0x40  # 64 KiB blocks: what Kafka writes and sizes its buffers for
    assert len(blocks) == -(-len(data) // 65536)
    out = bytearray()
    for compressed, block in blocks:
        out += lz4_block.decompress(block, uncompressed_size=65536) if compressed else block
    assert out == data
    assert any(compressed for compressed, _ in blocks)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"block_linked": True, "content_checksum": True},  # what this client wrote before
        {
            "block_linked": False,
            "block_checksum": False,
            "content_checksum": False,
            "store_size": False,
        },  # Java
        {"block_linked": False, "block_size": lz4_frame.BLOCKSIZE_MAX1MB, "block_checksum": True},
        {"block_linked": True, "compression_level": 12, "store_size": True},
    ],
)
def test_lz4_reads_frames_of_any_block_mode(kwargs: dict[str, object]) -> None:
    data = (os.urandom(30_000) * 10)[:250_000]
    packed = lz4_frame.compress(data, **kwargs)
    assert bool(packed[4] & 0x20) != kwargs["block_linked"]
    assert decompress(Compression.LZ4, packed, len(data)) == data


def test_zstd_sizes_bound_real_frames() -> None:
    for data in SAMPLES:
        for packed in (
            zstandard.ZstdCompressor(write_content_size=False).compress(data),
            zstandard.ZstdCompressor(write_checksum=True, level=19).compress(data),
            bytes(cramjam.zstd.compress(data)) * 2,  # two concatenated frames
        ):
            sizes = C._zstd_sizes(packed)
            assert sizes is not None
            expected = len(data) * (2 if packed.count(b"\x28\xb5\x2f\xfd") == 2 and len(data) else 1)
            assert sizes[0] <= expected <= sizes[1]
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc" + bytes(cramjam.zstd.compress(b"hi"))
    assert C._zstd_sizes(skippable) == (2, 2)
    assert decompress(Compression.ZSTD, skippable, 2) == b"hi"


def test_stdlib_gzip_interop() -> None:
    data = b"interop" * 10_000
    assert decompress(Compression.GZIP, gzip.compress(data), len(data)) == data
    assert gzip.decompress(compress(Compression.GZIP, data)) == data


def test_kafka_python_codec_interop() -> None:
    from kafka import codec as kc

    data = b"kafka-python codec interop " * 5000
    assert decompress(Compression.SNAPPY, kc.snappy_encode(data, xerial_compatible=True), len(data)) == data
    assert decompress(Compression.SNAPPY, kc.snappy_encode(data, xerial_compatible=False), len(data)) == data
    assert kc.snappy_decode(compress(Compression.SNAPPY, data)) == data
    assert decompress(Compression.LZ4, kc.lz4_encode(data), len(data)) == data
    assert kc.lz4_decode(compress(Compression.LZ4, data)) == data
    assert decompress(Compression.ZSTD, kc.zstd_encode(data), len(data)) == data
    assert kc.zstd_decode(compress(Compression.ZSTD, data)) == data
    assert decompress(Compression.GZIP, kc.gzip_encode(data), len(data)) == data
    assert kc.gzip_decode(compress(Compression.GZIP, data)) == data
