"""Every class of bad input maps to a typed error with a useful message, on both backends."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable

import pytest
from test_records_support import Backend, make_backend_fixture, raw_batch, record, require_c_backend, varint

from aiokafka_lite.core.errors import CorruptRecordError, KafkaError, UnsupportedCodecError
from aiokafka_lite.wire.compression import Compression, compress
from aiokafka_lite.wire.records import RecordBatch, _pyimpl, decode_batches, encode_batch

backend = make_backend_fixture()


GOOD = record(b"\x00", varint(0), varint(0), varint(1), b"k", varint(1), b"v", varint(0))


def records_error(data: bytes, **kwargs: object) -> str:
    (batch,) = decode_batches(data, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(CorruptRecordError) as info:
        batch.records()
    return str(info.value)


def test_raw_batch_helper_is_valid(backend: Backend) -> None:
    (batch,) = decode_batches(raw_batch(GOOD, 1, base_offset=9))
    assert [(r.offset, r.key, r.value) for r in batch.records()] == [(9, b"k", b"v")]


# Negative key, value and header value lengths other than -1 are not here: Kafka's reader
# takes any negative length as null (test_records_batch_parser.py checks that).
BAD_RECORDS: list[tuple[str, bytes, int, str]] = [
    ("count too large", record(b"\x00\x00\x00", varint(-1), varint(7), b"value!!", varint(0)), 2,
     "record 1: truncated record"),
    ("count beyond bytes", GOOD, 1000, "cannot fit"),
    ("negative count", GOOD, -1, "negative record count"),
    ("trailing bytes", GOOD + b"\x00\x00", 1, "bytes left after 1 records"),
    ("record length too small", varint(3) + b"\x00" * 6, 1, "invalid record length 3"),
    ("record length negative", varint(-2) + GOOD, 1, "invalid record length -2"),
    ("record length beyond batch", varint(100) + GOOD[1:], 1, "invalid record length 100"),
    ("record length mismatch", varint(9) + GOOD[1:] + b"\x00", 1, "record length mismatch (-1 bytes)"),
    # the header value length is a 2-byte (non-canonical) varint straddling the record end
    ("record length mismatch +", varint(8) + b"\x00\x00\x00\x01\x01\x02\x00\x81" + b"\x00", 1,
     "record length mismatch (+1 bytes)"),
    ("varint32 too long", record(b"\x00", b"\x00", b"\x80\x80\x80\x80\x80\x01", b"\x01\x01\x00"), 1,
     "varint longer than 5 bytes"),
    ("varint32 overflow", record(b"\x00", b"\x00", b"\xff\xff\xff\xff\x1f", b"\x01\x01\x00"), 1,
     "varint overflows int32"),
    ("varint64 too long", record(b"\x00", b"\x80" * 10 + b"\x01", b"\x00\x01\x01\x00"), 1,
     "varint longer than 10 bytes"),
    ("varint64 overflow", record(b"\x00", b"\xff" * 9 + b"\x02", b"\x00\x01\x01\x00"), 1, "varint overflows int64"),
    ("truncated varint", varint(6) + b"\x00\x00\x00\x00\x00\x80", 1, "record 0:"),
    ("key beyond record", record(b"\x00\x00\x00", varint(50), b"abc", varint(-1), varint(0)), 1,
     "key length 50 exceeds record"),
    ("value beyond record", record(b"\x00\x00\x00", varint(-1), varint(9), b"ab", varint(0)), 1,
     "value length 9 exceeds record"),
    ("negative header count", record(b"\x00\x00\x00", varint(-1), varint(-1), varint(-1)), 1,
     "invalid header count -1"),
    ("header count beyond record", record(b"\x00\x00\x00", varint(-1), varint(-1), varint(1 << 30)), 1,
     "invalid header count"),
    ("null header key", record(b"\x00\x00\x00", varint(-1), varint(-1), varint(1), varint(-1), varint(-1)), 1,
     "invalid header key length -1"),
    ("header key beyond record", record(b"\x00\x00\x00", varint(-1), varint(-1), varint(1), varint(40), b"xy"), 1,
     "invalid header key length 40"),
    ("header value beyond record",
     record(b"\x00\x00\x00", varint(-1), varint(-1), varint(1), varint(1), b"h", varint(20), b"x"), 1,
     "header value length 20 exceeds record"),
    ("header truncated", record(b"\x00\x00\x00", varint(-1), varint(-1), varint(1), varint(1), b"h"), 1,
     "record 0:"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "payload", "count", "message"), BAD_RECORDS, ids=[c[0] for c in BAD_RECORDS]
)
def test_bad_records(backend: Backend, name: str, payload: bytes, count: int, message: str) -> None:
    text = records_error(raw_batch(payload, count, base_offset=321))
    assert message in text
    assert "batch at byte 0 (base offset 321, codec NONE)" in text


@pytest.mark.parametrize(
    ("name", "payload", "count", "message"), BAD_RECORDS, ids=[c[0] for c in BAD_RECORDS]
)
@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_bad_records_inside_compressed_batch(
    backend: Backend, name: str, payload: bytes, count: int, message: str, codec: Compression
) -> None:
    text = records_error(raw_batch(compress(codec, payload), count, attributes=int(codec)))
    assert message in text and f"codec {codec.name}" in text


def test_backends_report_identical_errors() -> None:
    from aiokafka_lite.wire.records._c_extension import c_ext

    require_c_backend()
    assert c_ext is not None
    for _name, payload, count, _ in BAD_RECORDS:
        errors = []
        for fn in (c_ext.decode_records, _pyimpl.decode_records):
            with pytest.raises(CorruptRecordError) as info:
                fn(payload, 0, len(payload), count, 0, 0, None)
            errors.append(str(info.value))
        assert errors[0] == errors[1]


# ------------------------------------------------------------------ batch framing


def test_crc_mismatch_names_batch() -> None:
    good = encode_batch([(0, b"k", b"v", ())], base_offset=5)
    data = bytearray(good * 2)
    data[len(good) + 40] ^= 1  # second batch, inside the CRC-covered region
    with pytest.raises(
        CorruptRecordError, match=r"CRC mismatch in batch at byte 70 \(base offset 5, codec NONE\)"
    ):
        decode_batches(data)
    batches = decode_batches(data, check_crc=False)
    assert len(batches) == 2
    batches[0].validate_crc()
    with pytest.raises(CorruptRecordError):
        batches[1].validate_crc()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [(lambda b: struct.pack_into(">i", b, 8, -5), "negative length -5"),
     (lambda b: struct.pack_into(">i", b, 8, 3), "too short"),
     (lambda b: struct.pack_into(">i", b, 8, 30), "v2 batch at byte 0 is too short"),
     (lambda b: struct.pack_into(">b", b, 16, 3), "unknown magic 3"),
     (lambda b: struct.pack_into(">b", b, 16, -1), "unknown magic 255")],
)  # fmt: skip
def test_bad_framing(mutate: Callable[[bytearray], None], message: str) -> None:
    data = bytearray(encode_batch([(0, b"k", b"v", ())]))
    mutate(data)
    with pytest.raises(CorruptRecordError, match=message):
        decode_batches(bytes(data) + b"\x00" * 100)


@pytest.mark.parametrize("code", [5, 6, 7])
def test_unknown_codec(backend: Backend, code: int) -> None:
    (batch,) = decode_batches(raw_batch(b"whatever", 1, attributes=code))
    assert isinstance(batch, RecordBatch)
    with pytest.raises(UnsupportedCodecError, match=f"unknown compression codec id {code}"):
        batch.records()
    with pytest.raises(UnsupportedCodecError):
        _ = batch.compression
    with pytest.raises(UnsupportedCodecError, match=rf"codec unknown\({code}\)"):
        batch.records()


@pytest.mark.parametrize("codec", [c for c in Compression if c])
def test_corrupt_compressed_payload(backend: Backend, codec: Compression) -> None:
    payload = bytearray(compress(codec, GOOD * 50))
    payload[len(payload) // 2 :] = b"\xa5" * (len(payload) - len(payload) // 2)
    text = records_error(raw_batch(bytes(payload), 50, attributes=int(codec)))
    assert codec.name in text


@pytest.mark.parametrize("codec", [c for c in Compression if c])
def test_decompression_cap(backend: Backend, codec: Compression) -> None:
    data = encode_batch([(0, None, b"\x00" * 100_000, ())] * 20, compression=codec)
    assert len(decode_batches(data, max_decompressed_size=3_000_000)[0].records()) == 20
    text = records_error(data, max_decompressed_size=1_000_000)
    assert "exceeds cap of 1000000 bytes" in text and codec.name in text


def test_claimed_sizes_do_not_allocate(backend: Backend) -> None:
    cases = [
        raw_batch(GOOD, (1 << 31) - 1),
        raw_batch(record(b"\x00\x00\x00", varint((1 << 31) - 1), b"k", varint(-1), varint(0)), 1),
        raw_batch(record(b"\x00\x00\x00", varint(-1), varint(-1), varint((1 << 31) - 1)), 1),
        raw_batch(varint((1 << 31) - 1) + GOOD, 1),
    ]
    tracemalloc.start()
    try:
        for data in cases:
            with pytest.raises(CorruptRecordError):
                decode_batches(data)[0].records()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_every_error_is_a_kafka_error() -> None:
    assert issubclass(CorruptRecordError, KafkaError) and issubclass(
        UnsupportedCodecError, CorruptRecordError
    )
