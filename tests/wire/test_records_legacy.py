"""Legacy message sets (magic 0 and 1): plain messages and compressed wrappers."""

from __future__ import annotations

import struct

import cramjam
import pytest
from test_records_support import legacy_message

from aiokafka_lite.core.errors import CorruptRecordError, UnsupportedCodecError
from aiokafka_lite.wire.compression import Compression, compress
from aiokafka_lite.wire.records import (
    LegacyRecordBatch,
    RecordBatch,
    TimestampType,
    decode_batches,
    encode_batch,
)
from aiokafka_lite.wire.records._legacy import _xxh32_short, fix_kafka_lz4_header

LEGACY_CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


def legacy(data: bytes, **kwargs: bool) -> list[LegacyRecordBatch]:
    batches = decode_batches(data, **kwargs)  # type: ignore[arg-type]
    assert all(isinstance(b, LegacyRecordBatch) for b in batches)
    return batches  # type: ignore[return-value]


def broken_lz4(data: bytes) -> bytes:
    """LZ4 frame with the pre-0.10 Kafka header checksum (hashes magic + descriptor)."""
    frame = bytearray(cramjam.lz4.compress(data))
    flg = frame[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    frame[hc_pos] = (_xxh32_short(bytes(frame[:hc_pos])) >> 8) & 0xFF
    return bytes(frame)


def wrapper(
    magic: int, codec: Compression, inner: bytes, offset: int, timestamp: int = -1, attrs: int = 0
) -> bytes:
    value = broken_lz4(inner) if (codec is Compression.LZ4 and magic == 0) else compress(codec, inner)
    return legacy_message(
        offset, None, value, magic=magic, attributes=int(codec) | attrs, timestamp=timestamp
    )


@pytest.mark.parametrize(("data", "expected"), [(b"", 0x02CC5D05), (b"a", 0x550D7456), (b"abc", 0x32D153FF)])
def test_xxh32_vectors(data: bytes, expected: int) -> None:
    assert _xxh32_short(data) == expected


def test_lz4_header_fix_matches_standard_frames() -> None:
    good = bytes(cramjam.lz4.compress(b"payload" * 100))
    assert fix_kafka_lz4_header(good) == good
    bad = broken_lz4(b"payload" * 100)
    assert bad != good and fix_kafka_lz4_header(bad) == good
    assert fix_kafka_lz4_header(b"short") == b"short"


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_messages(magic: int) -> None:
    data = (
        legacy_message(10, b"k1", b"v1", magic=magic, timestamp=1000)
        + legacy_message(11, None, None, magic=magic, timestamp=1001)
        + legacy_message(12, b"", b"", magic=magic, timestamp=1002)
    )
    batches = legacy(data)
    assert len(batches) == 3
    first = batches[0]
    assert first.magic == magic and first.compression is Compression.NONE
    assert first.base_offset == first.last_offset == 10 and first.next_offset == 11
    assert first.record_count == 1 and first.last_offset_delta == 0
    assert first.size_in_bytes == batches[1].position and first.batch_length == batches[1].position - 12
    assert not first.is_transactional and not first.is_control and first.producer_id == -1
    expected_ts = [1000, 1001, 1002] if magic else [-1, -1, -1]
    assert first.timestamp_type is (TimestampType.CREATE_TIME if magic else TimestampType.NO_TIMESTAMP)
    records = [r for b in batches for r in b.records()]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (10, expected_ts[0], b"k1", b"v1", []),
        (11, expected_ts[1], None, None, []),
        (12, expected_ts[2], b"", b"", []),
    ]
    assert bytes(batches[1].buffer) == data[batches[1].position : batches[2].position]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_magic1_wrapper_relative_offsets(codec: Compression) -> None:
    inner = b"".join(legacy_message(i, b"k%d" % i, b"v%d" % i, magic=1, timestamp=500 + i) for i in range(5))
    (batch,) = legacy(wrapper(1, codec, inner, offset=104, timestamp=504))
    assert batch.compression is codec
    assert batch.base_offset == 100 and batch.last_offset == 104 and batch.record_count == 5
    assert batch.last_offset_delta == 4
    records = batch.records()
    assert [(r.offset, r.timestamp, r.key) for r in records] == [
        (100 + i, 500 + i, b"k%d" % i) for i in range(5)
    ]
    assert batch.records() == records and list(batch) == records


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_magic1_wrapper_log_append_time(codec: Compression) -> None:
    inner = b"".join(legacy_message(i, None, b"v", magic=1, timestamp=i) for i in range(3))
    (batch,) = legacy(wrapper(1, codec, inner, offset=2, timestamp=777, attrs=0x08))
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [777, 777, 777]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_magic0_wrapper_absolute_offsets(codec: Compression) -> None:
    inner = b"".join(legacy_message(50 + i, None, b"v%d" % i, magic=0) for i in range(4))
    (batch,) = legacy(wrapper(0, codec, inner, offset=53))
    assert [(r.offset, r.timestamp, r.value) for r in batch.records()] == [
        (50 + i, -1, b"v%d" % i) for i in range(4)
    ]
    assert batch.base_offset == 50


def test_mixed_legacy_and_v2_with_partial_tail() -> None:
    v2 = encode_batch([(5, b"k", b"new", ())], base_offset=3)
    data = legacy_message(0, None, b"old0", magic=0) + wrapper(
        1, Compression.GZIP, legacy_message(0, None, b"old1", magic=1, timestamp=1), offset=1
    )
    data += legacy_message(2, None, b"old2", magic=1, timestamp=2) + v2
    batches = decode_batches(data + v2[:30])
    assert [type(b) for b in batches] == [
        LegacyRecordBatch,
        LegacyRecordBatch,
        LegacyRecordBatch,
        RecordBatch,
    ]
    assert [r.value for b in batches for r in b.records()] == [b"old0", b"old1", b"old2", b"new"]
    assert [r.offset for b in batches for r in b.records()] == [0, 1, 2, 3]


def test_outer_crc_mismatch() -> None:
    data = bytearray(legacy_message(7, b"k", b"value", magic=1, timestamp=3))
    data[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC mismatch in legacy message at byte 0 \\(offset 7\\)"):
        decode_batches(bytes(data))
    (batch,) = legacy(bytes(data), check_crc=False)
    assert batch.records()[0].value == b"valud"


def test_inner_crc_mismatch() -> None:
    inner = bytearray(legacy_message(0, None, b"inner", magic=1, timestamp=1))
    inner[-1] ^= 0x01
    data = wrapper(1, Compression.GZIP, bytes(inner), offset=0)
    (batch,) = legacy(data)
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        batch.records()
    (batch,) = legacy(data, check_crc=False)
    assert batch.records()[0].value == b"innes"


@pytest.mark.parametrize(
    ("make", "message"),
    [(lambda: wrapper(1, Compression.GZIP, wrapper(1, Compression.GZIP, legacy_message(0, None, b"x"), 0), 0),
      "nested compression"),
     (lambda: legacy_message(0, None, None, magic=1, attributes=1), "null value"),
     (lambda: wrapper(1, Compression.GZIP, b"\x00" * 11, 0), "inner message set truncated"),
     (lambda: wrapper(1, Compression.GZIP, legacy_message(0, None, b"x")[:-1], 0), "invalid size"),
     (lambda: wrapper(1, Compression.GZIP, legacy_message(0, None, b"x").replace(b"\x01\x00", b"\x05\x00", 1), 0),
      "magic 5"),
     (lambda: legacy_message(0, None, b"not gzip", magic=1, attributes=1), "GZIP")],
)  # fmt: skip
def test_bad_wrappers(make: object, message: str) -> None:
    (batch,) = legacy(make(), check_crc=False)  # type: ignore[operator]
    with pytest.raises(CorruptRecordError, match=message):
        batch.records()
    with pytest.raises(CorruptRecordError, match="legacy batch at byte 0"):
        _ = batch.record_count


def test_unknown_codec_in_legacy() -> None:
    (batch,) = legacy(legacy_message(0, None, b"x", magic=1, attributes=6))
    with pytest.raises(UnsupportedCodecError):
        batch.records()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [(lambda b: struct.pack_into(">i", b, 26, 1000), "invalid key length 1000"),
     (lambda b: struct.pack_into(">i", b, 26, -3), "invalid key length -3"),
     (lambda b: struct.pack_into(">i", b, len(b) - 9, 999), "invalid value length 999")],
)  # fmt: skip
def test_bad_legacy_fields(mutate: object, message: str) -> None:
    data = bytearray(legacy_message(0, b"k", b"value", magic=1, timestamp=0))
    mutate(data)  # type: ignore[operator]
    with pytest.raises(CorruptRecordError, match=message):
        decode_batches(bytes(data), check_crc=False)


def test_legacy_minimum_sizes() -> None:
    data = bytearray(legacy_message(0, None, None, magic=1, timestamp=0))
    struct.pack_into(">i", data, 8, 21)  # magic 1 needs 22 bytes
    with pytest.raises(CorruptRecordError, match="too short"):
        decode_batches(bytes(data[:33]))
    data = bytearray(legacy_message(0, None, None, magic=0))
    assert len(data) == 12 + 14
    assert legacy(bytes(data))[0].records()[0].value is None


def test_unassigned_wrapper_offset_keeps_inner_offsets() -> None:
    # A client-built magic-1 produce payload: wrapper offset 0, inner offsets 0..n-1.
    inner = b"".join(legacy_message(i, None, b"v", magic=1, timestamp=i) for i in range(3))
    (batch,) = legacy(wrapper(1, Compression.GZIP, inner, offset=0))
    assert [r.offset for r in batch.records()] == [0, 1, 2]
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (0, 2, 3)
