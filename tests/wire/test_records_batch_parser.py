"""The one batch parser (``parse_batches`` / ``read_batch``) and ``RecordBatch.summarize``.

Framing follows how Kafka walks a record set; ``summarize`` walks records like
``records()`` (same errors, on both backends) without building them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from test_records_errors import BAD_RECORDS
from test_records_support import raw_batch, record, require_c_backend, varint

from aiokafka_lite.core.errors import CorruptRecordError, UnsupportedCodecError
from aiokafka_lite.wire.compression import Compression, compress
from aiokafka_lite.wire.records import (
    BatchTooShortError,
    CompressedPayloadError,
    LegacyRecordBatch,
    RecordBatch,
    RecordsSummary,
    _pyimpl,
    _v2,
    as_byte_view,
    encode_batch,
    parse_batches,
    read_batch,
)
from aiokafka_lite.wire.records._c_extension import c_ext


@pytest.fixture(params=["c", "python"])
def scan_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "c":
        require_c_backend()
        assert c_ext is not None
        monkeypatch.setattr(_v2, "scan_records", c_ext.scan_records)
    else:
        monkeypatch.setattr(_v2, "scan_records", _pyimpl.scan_records)
    yield request.param


def one(data: bytes) -> RecordBatch:
    batch = read_batch(as_byte_view(data))
    assert isinstance(batch, RecordBatch)
    return batch


def legacy(magic: int) -> bytes:
    import zlib

    body = (
        struct.pack(">bb", magic, 0)
        + (struct.pack(">q", 5) if magic else b"")
        + struct.pack(">ii", -1, 1)
        + b"v"
    )
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 7, len(msg)) + msg


# ------------------------------------------------------------------ framing


def test_parse_batches_yields_each_batch_with_its_position() -> None:
    blobs = [encode_batch([(i, b"k", b"v" * i, ())], base_offset=i) for i in range(3)]
    data = b"".join(blobs) + legacy(1) + legacy(0)
    batches = list(parse_batches(as_byte_view(data)))
    assert [type(b) for b in batches] == [RecordBatch] * 3 + [LegacyRecordBatch] * 2
    ends = [b.position + b.size_in_bytes for b in batches]
    assert ends[-1] == len(data) and [b.position for b in batches[1:]] == ends[:-1]
    assert read_batch(as_byte_view(data), len(blobs[0])).base_offset == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "tail", [b"\x00\x01\x02", b"\x00" * 11, struct.pack(">qi", 0, 100) + b"\x00\x00", b"?"]
)
def test_incomplete_tails_end_the_walk(tail: bytes) -> None:
    """Fewer than 12 bytes, a magic byte not yet there, or a length beyond the data: the
    walk stops quietly (a fetch cut at its limit; Kafka ignores it after a produced batch)."""
    good = encode_batch([(0, b"k", b"v", ())])
    assert [b.base_offset for b in parse_batches(as_byte_view(good + tail))] == [0]
    assert read_batch(as_byte_view(tail)) is None


def test_partial_second_batch_is_left_out() -> None:
    good = encode_batch([(0, b"k", b"v", ())])
    assert len(list(parse_batches(as_byte_view(good + good[:40])))) == 1


@pytest.mark.parametrize(
    ("length", "message"),
    [(-1, "negative length -1"), (0, r"too short \(0 bytes"), (13, r"too short \(13 bytes")],
)
def test_lengths_below_the_smallest_message_are_corrupt_even_at_the_tail(length: int, message: str) -> None:
    good = encode_batch([(0, b"k", b"v", ())])
    data = as_byte_view(good + struct.pack(">qi", 0, length))
    batches = parse_batches(data)
    assert next(batches).base_offset == 0  # good batches before the corrupt one come first
    with pytest.raises(CorruptRecordError, match=message):
        next(batches)


@pytest.mark.parametrize("magic", [3, 0x7F, 0xFF])
def test_unknown_magic(magic: int) -> None:
    data = bytearray(encode_batch([(0, b"k", b"v", ())]))
    data[16] = magic
    with pytest.raises(CorruptRecordError, match=f"unknown magic {magic}"):
        read_batch(as_byte_view(data))


def test_too_short_for_the_header_names_magic_and_size() -> None:
    data = bytearray(encode_batch([(0, b"k", b"v", ())]))
    struct.pack_into(">i", data, 8, 40)
    with pytest.raises(BatchTooShortError, match="v2 batch at byte 0 is too short") as info:
        read_batch(as_byte_view(data[:52]))
    assert (info.value.magic, info.value.size) == (2, 52)
    short_legacy = bytearray(legacy(1))
    struct.pack_into(">i", short_legacy, 8, 20)  # magic 1 needs 22 bytes after the length
    with pytest.raises(BatchTooShortError, match="magic 1 message") as info:
        read_batch(as_byte_view(short_legacy[:32]))
    assert (info.value.magic, info.value.size) == (1, 32)
    assert isinstance(info.value, CorruptRecordError)


def test_read_batch_of_nothing() -> None:
    assert read_batch(as_byte_view(b"")) is None


def test_last_sequence_wraps() -> None:
    data = encode_batch([(0, b"k", b"v", ())] * 3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    assert one(data).last_sequence == 0
    assert one(encode_batch([(0, b"k", b"v", ())] * 3)).last_sequence == -1


def test_payload_is_the_records_region() -> None:
    data = encode_batch([(0, b"k", b"v", ())], compression=Compression.GZIP)
    assert bytes(one(data).payload) == data[61:]


# ------------------------------------------------------------------ summarize


@pytest.mark.parametrize("codec", list(Compression))
def test_summarize(scan_backend: str, codec: Compression) -> None:
    data = encode_batch(
        [
            (1000, b"a", b"1", ()),
            (990, None, b"2", [("h", b"x")]),
            (1050, b"c", None, ()),
            (1000, None, None, ()),
        ],
        compression=codec,
    )
    assert one(data).summarize() == RecordsSummary(990, 1050, [1, 3], True)


def test_summarize_reports_offset_gaps(scan_backend: str) -> None:
    def rec(delta: int) -> bytes:
        return record(b"\x00\x00", varint(delta), varint(1), b"k", varint(-1), varint(0))

    for codec in (Compression.NONE, Compression.ZSTD):
        payload = rec(0) + rec(2)
        data = raw_batch(compress(codec, payload) if codec else payload, 2, attributes=int(codec))
        assert one(data).summarize().sequential_offsets is False


def test_summarize_log_append_time_uses_the_batch_timestamp(scan_backend: str) -> None:
    data = bytearray(encode_batch([(5, b"k", b"v", ()), (9, b"k", b"v", ())]))
    from aiokafka_lite.wire.records import set_log_append_time

    set_log_append_time(data, 0, 777)
    assert one(bytes(data)).summarize()[:2] == (777, 777)


@pytest.mark.parametrize(
    ("name", "payload", "count", "message"), BAD_RECORDS, ids=[c[0] for c in BAD_RECORDS]
)
def test_summarize_raises_what_records_raises(
    scan_backend: str, name: str, payload: bytes, count: int, message: str
) -> None:
    batch = one(raw_batch(payload, count, base_offset=3))
    with pytest.raises(CorruptRecordError) as decoded:
        batch.records()
    with pytest.raises(CorruptRecordError) as scanned:
        batch.summarize()
    assert str(scanned.value) == str(decoded.value) and message in str(scanned.value)
    assert not isinstance(scanned.value, CompressedPayloadError)


def test_backends_scan_identically() -> None:
    require_c_backend()
    assert c_ext is not None
    for _name, payload, count, _ in BAD_RECORDS:
        errors = []
        for fn in (c_ext.scan_records, _pyimpl.scan_records):
            with pytest.raises(CorruptRecordError) as info:
                fn(payload, 0, len(payload), count)
            errors.append(str(info.value))
        assert errors[0] == errors[1]
    good = encode_batch([(7, b"k", b"v", ()), (3, None, b"w", [("a", None)])])
    assert c_ext.scan_records(good, 61, len(good), 2) == _pyimpl.scan_records(good, 61, len(good), 2)


def test_summarize_tells_undecompressable_payloads_apart(scan_backend: str) -> None:
    garbage = raw_batch(b"\x1f\x8b\x08\x00 not deflate", 1, attributes=int(Compression.GZIP))
    with pytest.raises(CompressedPayloadError, match="codec GZIP"):
        one(garbage).summarize()
    with pytest.raises(UnsupportedCodecError, match="unknown compression codec id 6"):
        one(raw_batch(b"whatever", 1, attributes=6)).summarize()


def test_negative_lengths_read_as_null(scan_backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's reader takes any negative key, value or header value length as null (a
    broker stores such records, Java consumers read them); so do both backends."""
    payload = record(b"\x00\x00\x00", varint(-2), varint(-7), varint(1), varint(1), b"h", varint(-3))
    for name in ("c", "python"):
        if name == "c":
            if c_ext is None:
                continue
            monkeypatch.setattr(_v2, "decode_records", c_ext.decode_records)
        else:
            monkeypatch.setattr(_v2, "decode_records", _pyimpl.decode_records)
        batch = one(raw_batch(payload, 1))
        (rec,) = batch.records()
        assert (rec.key, rec.value, rec.headers) == (None, None, [("h", None)])
    assert one(raw_batch(payload, 1)).summarize().keyless == [0]
