"""RecordBatch v2: round trips, header fields, builder semantics, byte vectors."""

from __future__ import annotations

import struct

import pytest
from test_records_support import Backend, make_backend_fixture, raw_batch, record, require_c_backend, varint

from aiokafka_lite.core.errors import ConfigError, CorruptRecordError
from aiokafka_lite.wire import compression as compression_mod
from aiokafka_lite.wire.compression import Compression
from aiokafka_lite.wire.records import (
    RecordBatch,
    TimestampType,
    _pyimpl,
    _v2,
    decode_batches,
    encode_batch,
    read_batch_headers,
    scan_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

backend = make_backend_fixture()

CODECS = list(Compression)


def crc32c_reference(data: bytes) -> int:
    """Bitwise CRC-32C (Castagnoli, reflected 0x82F63B78): independent of the crc32c package."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def only(data: bytes) -> RecordBatch:
    batches = decode_batches(data)
    assert len(batches) == 1
    batch = batches[0]
    assert isinstance(batch, RecordBatch)
    return batch


# ------------------------------------------------------------------ byte vectors


def test_crc32c_reference_check_value() -> None:
    assert crc32c_reference(b"123456789") == 0xE3069283


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (-1, "01"), (1, "02"), (-64, "7f"), (63, "7e"), (64, "8001"), (300, "d804"),
     (-(1 << 31), "ffffffff0f"), ((1 << 63) - 1, "feffffffffffffffff01"), (-(1 << 63), "ffffffffffffffffff01")],
)  # fmt: skip
def test_zigzag_varint_vectors(value: int, encoded: str) -> None:
    assert _pyimpl.encode_varint(value).hex() == encoded
    assert _pyimpl._read_varint(bytes.fromhex(encoded), 0, 10, 0) == (value, len(encoded) // 2)


def test_hand_checked_single_record_batch(backend: Backend) -> None:
    data = encode_batch([(1000, b"k", b"v", ())], producer_id=5, producer_epoch=2, base_sequence=7)
    records = bytes.fromhex(
        "10"  # record length 8 (zig-zag)
        "00"  # attributes
        "00"  # timestamp delta 0
        "00"  # offset delta 0
        "02" "6b"  # key length 1, "k"
        "02" "76"  # value length 1, "v"
        "00"  # header count 0
    )  # fmt: skip
    after_crc = (
        struct.pack(">h", 0)  # attributes
        + struct.pack(">i", 0)  # last offset delta
        + struct.pack(">qq", 1000, 1000)  # base / max timestamp
        + struct.pack(">qhi", 5, 2, 7)  # producer id, epoch, base sequence
        + struct.pack(">i", 1)  # record count
        + records
    )
    expected = (
        struct.pack(">qi", 0, 4 + 1 + 4 + len(after_crc))  # base offset, batch length
        + struct.pack(">ib", -1, 2)  # partition leader epoch, magic
        + struct.pack(">I", crc32c_reference(after_crc))
        + after_crc
    )
    assert data == expected
    assert len(data) == 61 + 9


def test_hand_checked_headers_and_nulls(backend: Backend) -> None:
    data = encode_batch([(5, None, None, [("h", b"x"), ("n", None)])], base_offset=100)
    records = data[61:]
    assert records == bytes.fromhex(
        "1a"  # length 13
        "00" "00" "00"  # attributes, ts delta, offset delta
        "01" "01"  # null key, null value
        "04"  # 2 headers
        "02" "68" "02" "78"  # "h" -> b"x"
        "02" "6e" "01"  # "n" -> null
    )  # fmt: skip
    (rec,) = only(data).records()
    assert (rec.offset, rec.timestamp, rec.key, rec.value) == (100, 5, None, None)
    assert rec.headers == [("h", b"x"), ("n", None)]


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(backend: Backend, codec: Compression) -> None:
    items = [
        (1_700_000_000_000 + i, None if i % 7 == 0 else b"key%d" % i, None if i % 11 == 0 else b"v" * (i * 13 % 300),
         [(f"h{j}", None if j == 2 else b"x" * j) for j in range(i % 6)])
        for i in range(500)
    ]  # fmt: skip
    data = encode_batch(
        items, compression=codec, producer_id=42, producer_epoch=3, base_sequence=1000, base_offset=77
    )
    batch = only(data)
    assert batch.compression is codec
    assert batch.record_count == 500
    assert batch.base_offset == 77
    assert batch.last_offset == 77 + 499
    assert batch.next_offset == 77 + 500
    assert batch.size_in_bytes == len(data)
    got = batch.records()
    assert [r.offset for r in got] == list(range(77, 577))
    assert [(r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (t, k, v, list(h)) for t, k, v, h in items
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_header_fields(backend: Backend, codec: Compression) -> None:
    data = encode_batch(
        [(2000, b"a", b"1", ()), (1500, b"b", b"2", ()), (2600, b"c", b"3", ())],
        compression=codec,
        is_transactional=True,
        base_offset=1 << 40,
        partition_leader_epoch=9,
        producer_id=123456789012,
        producer_epoch=32000,
        base_sequence=2_000_000_000,
    )
    batch = only(data)
    assert batch.magic == 2
    assert batch.base_offset == 1 << 40
    assert batch.batch_length == len(data) - 12
    assert batch.partition_leader_epoch == 9
    assert batch.attributes == int(codec) | 0x10
    assert batch.is_transactional and not batch.is_control and not batch.has_delete_horizon
    assert batch.delete_horizon_ms is None
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert batch.last_offset_delta == 2
    assert batch.base_timestamp == 2000  # first record's timestamp, deltas may go negative
    assert batch.max_timestamp == 2600
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        123456789012,
        32000,
        2_000_000_000,
    )
    assert batch.crc == crc32c_reference(data[21:])
    assert [r.timestamp for r in batch.records()] == [2000, 1500, 2600]
    assert bytes(batch.buffer) == data
    batch.validate_crc()
    batch.validate_header()
    assert "base_offset=1099511627776" in repr(batch)


def test_log_append_time_overrides_record_timestamps(backend: Backend) -> None:
    data = encode_batch([(10, b"a", b"1", ()), (20, b"b", b"2", ())], timestamp_type=1)
    batch = only(data)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [20, 20]
    buf = bytearray(data)
    set_log_append_time(buf, 0, 99999)
    batch = only(bytes(buf))  # CRC recomputed, so the default check passes
    assert batch.max_timestamp == 99999
    assert [r.timestamp for r in batch.records()] == [99999, 99999]


def test_delete_horizon_bit() -> None:
    buf = bytearray(encode_batch([(10, b"a", b"1", ())]))
    struct.pack_into(">h", buf, 21, 0x40)
    batch = decode_batches(bytes(buf), check_crc=False)[0]
    assert isinstance(batch, RecordBatch)
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 10


@pytest.mark.parametrize("codec", CODECS)
def test_large_empty_and_null_values(backend: Backend, codec: Compression) -> None:
    big = bytes(range(256)) * 4096 + b"tail"  # ~1 MiB, incompressible-ish pattern
    items = [(0, b"", b"", ()), (0, None, big, ()), (0, big[:1000], None, [("", b"")]), (0, None, None, ())]
    got = only(encode_batch(items, compression=codec)).records()
    assert [(r.key, r.value, r.headers) for r in got] == [(k, v, list(h)) for _, k, v, h in items]


def test_many_headers_and_unicode_keys(backend: Backend) -> None:
    headers = [(f"clé-{i}-✓", bytes([i]) * i) for i in range(40)] + [("bad\udcff", b"surrogate")]
    (rec,) = only(encode_batch([(1, b"k", b"v", headers)])).records()
    assert rec.headers == headers
    # bytes header keys are accepted on encode and come back as text
    (rec,) = only(encode_batch([(1, b"k", b"v", [(b"raw", b"1"), ["list-pair", bytearray(b"2")]])])).records()
    assert rec.headers == [("raw", b"1"), ("list-pair", b"2")]


def test_header_key_cache_does_not_mix_keys(backend: Backend) -> None:
    # Same length, different bytes at the same header position across records.
    items = [
        (0, None, b"v", [("aa", b"1"), ("bb", b"1" * 70)]),
        (0, None, b"v", [("ab", b"2"), ("bb", b"1" * 70)]),
    ]
    got = only(encode_batch(items)).records()
    assert [r.headers for r in got] == [list(h) for *_, h in items]


def test_buffer_types_accepted(backend: Backend) -> None:
    items = [
        (0, bytearray(b"k"), memoryview(b"xvalue")[1:], ()),
        (0, memoryview(b"k2"), bytearray(b"v2"), ()),
    ]
    got = only(encode_batch(items)).records()
    assert [(r.key, r.value) for r in got] == [(b"k", b"value"), (b"k2", b"v2")]
    assert all(type(r.key) is bytes and type(r.value) is bytes for r in got)


def test_extreme_timestamps_and_offsets(backend: Backend) -> None:
    lo, hi = -(1 << 63), (1 << 63) - 1
    got = only(encode_batch([(0, None, b"a", ()), (hi, None, b"b", ())])).records()
    assert [r.timestamp for r in got] == [0, hi]
    got = only(encode_batch([(-5, None, b"a", ()), (lo + 10, None, b"b", ())])).records()
    assert [r.timestamp for r in got] == [-5, lo + 10]
    with pytest.raises(OverflowError):
        encode_batch([(lo, None, b"a", ()), (hi, None, b"b", ())])
    with pytest.raises(OverflowError):
        encode_batch([(1 << 63, None, b"a", ())])


def test_encode_rejects_bad_types(backend: Backend) -> None:
    with pytest.raises(TypeError):
        encode_batch([(0, "str key", b"v", ())])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        encode_batch([(0, None, b"v", [(None, b"x")])])  # type: ignore[list-item]
    with pytest.raises((TypeError, ValueError)):
        encode_batch([(0, None, b"v", [("only-key",)])])  # type: ignore[list-item]


# ------------------------------------------------------------------ builder


def test_builder_size_limit_and_first_record(backend: Backend) -> None:
    b = _v2.BatchBuilder(max_batch_size=100)
    assert b.is_empty and b.record_count == 0 and b.estimated_size() == 61
    assert b.append(1, None, b"x" * 500)  # first record always accepted
    assert not b.is_empty and b.record_count == 1
    assert not b.append(2, None, b"y")
    assert b.record_count == 1
    data = b.build()
    assert len(data) == b.estimated_size()
    assert [r.value for r in only(data).records()] == [b"x" * 500]

    b = _v2.BatchBuilder(max_batch_size=61 + 3 * 9)  # room for exactly 3 one-byte records
    assert all(b.append(0, b"k", b"v") for _ in range(3))
    assert not b.append(0, b"k", b"v")
    assert b.estimated_size() == 61 + 27


def test_builder_add_notes_timestamps_and_returns_indexes(backend: Backend) -> None:
    """``add``: the producer's per-record path (record, timestamp, index in one call)."""
    b = _v2.BatchBuilder(max_batch_size=61 + 3 * 9)  # room for exactly 3 one-byte records
    with pytest.raises(RuntimeError, match="track_timestamps"):
        b.add(1, b"k", b"v", ())
    assert b.record_count == 0  # nothing appended without a list to note the timestamp in
    with pytest.raises(TypeError, match="list"):
        b.track_timestamps((1, 2))  # type: ignore[arg-type]
    timestamps: list[int] = []
    b.track_timestamps(timestamps)
    assert [b.add(ts, b"k", b"v", ()) for ts in (7, 5, 9)] == [0, 1, 2]
    assert b.add(11, b"k", b"v", ()) == -1  # full: nothing appended, nothing noted
    assert timestamps == [7, 5, 9] and b.record_count == 3
    with pytest.raises(TypeError):
        b.add(1, b"k", b"v")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        b.add(12, 3, b"v", ())  # type: ignore[arg-type]
    assert timestamps == [7, 5, 9] and b.record_count == 3
    records = only(b.build()).records()
    assert [(r.timestamp, r.offset) for r in records] == [(7, 0), (5, 1), (9, 2)]
    b._core_init(100)  # a reset forgets the list too, on both backends
    with pytest.raises(RuntimeError, match="track_timestamps"):
        b.add(1, b"k", b"v", ())
    assert timestamps == [7, 5, 9]


def test_builder_build_again_with_new_producer_fields(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = _v2.compress

    def counting(codec: Compression, data: bytes, level: int | None = None) -> bytes:
        calls.append(codec)
        return real(codec, data, level)

    monkeypatch.setattr(_v2, "compress", counting)
    b = _v2.BatchBuilder(compression=Compression.ZSTD, max_batch_size=1 << 20, is_transactional=True)
    for i in range(100):
        b.append(i, b"k", b"value %d" % i)
    first = b.build(producer_id=1, producer_epoch=0, base_sequence=0)
    second = b.build(producer_id=1, producer_epoch=1, base_sequence=50)
    assert calls == [Compression.ZSTD]  # records compressed once
    assert first[61:] == second[61:]
    for data, epoch, seq in ((first, 0, 0), (second, 1, 50)):
        batch = only(data)
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1, epoch, seq)
        assert len(batch.records()) == 100
    b.append(1000, b"k", b"late")  # appending after a build invalidates the cache
    third = b.build(producer_id=1, producer_epoch=1, base_sequence=50)
    assert calls == [Compression.ZSTD, Compression.ZSTD]
    assert only(third).records()[-1].value == b"late"


def test_builder_uncompressed_build_is_repeatable(backend: Backend) -> None:
    b = _v2.BatchBuilder(max_batch_size=1 << 20)
    b.append(5, b"k", b"v")
    assert b.build() == b.build()
    b.append(6, b"k", b"v2")  # the records view from build() was released
    assert only(b.build()).record_count == 2


def test_empty_builder_builds_empty_batch(backend: Backend) -> None:
    data = _v2.BatchBuilder(max_batch_size=1000).build()
    batch = only(data)
    assert batch.record_count == 0 and batch.last_offset_delta == -1 and batch.records() == []


def test_builder_compression_level_validation() -> None:
    with pytest.raises(ConfigError):
        _v2.BatchBuilder(compression=Compression.GZIP, compression_level=10, max_batch_size=10)
    with pytest.raises(ConfigError):
        _v2.BatchBuilder(compression=Compression.SNAPPY, compression_level=1, max_batch_size=10)
    b = _v2.BatchBuilder(compression=Compression.ZSTD, compression_level=19, max_batch_size=1 << 20)
    assert b.compression is Compression.ZSTD
    b.append(0, None, b"z" * 1000)
    assert only(b.build()).records()[0].value == b"z" * 1000


def test_writer_view_blocks_growth(backend: Backend) -> None:
    b = backend.BatchBuilder(max_batch_size=1 << 30)
    b.append(0, None, b"x")
    view = b.records_view()
    assert bytes(view) == b.records_bytes()
    with pytest.raises(BufferError):
        b.append(0, None, b"y" * 100_000)
    view.release()
    assert b.append(0, None, b"y" * 100_000)
    assert b.record_count == 2


def test_backends_produce_identical_bytes() -> None:
    require_c_backend()
    assert _v2.CBatchBuilder is not None
    items = [(i * 3, b"k%d" % i if i % 3 else None, b"v" * i, [("a", b"1")] * (i % 3)) for i in range(300)]
    outs = []
    for cls in (_v2.CBatchBuilder, _v2.PyBatchBuilder):
        b = cls(max_batch_size=1 << 30, compression=Compression.GZIP)
        for item in items:
            assert b.append(*item)
        outs.append((b.records_bytes(), b.build(producer_id=3), b.first_timestamp, b.max_timestamp))
    assert outs[0] == outs[1]


# ------------------------------------------------------------------ framing


def test_multiple_batches_and_partial_tail(backend: Backend) -> None:
    blobs = [
        encode_batch([(i, b"k", b"v%d" % i, ())], base_offset=i, compression=c) for i, c in enumerate(CODECS)
    ]
    data = b"".join(blobs)
    for cut in range(len(blobs[-1])):
        truncated = data[: len(data) - len(blobs[-1]) + cut]
        batches = decode_batches(truncated)
        assert [b.base_offset for b in batches] == [0, 1, 2, 3]
        assert scan_batches(truncated)[1] == len(data) - len(blobs[-1])
        if cut:
            with pytest.raises(CorruptRecordError, match="incomplete batch"):
                decode_batches(truncated, allow_partial_tail=False)
    assert [b.records()[0].value for b in decode_batches(data)] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert decode_batches(b"") == [] and decode_batches(memoryview(data)[:5]) == []


def test_read_batch_headers_skips_crc_and_decompression(monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytearray(encode_batch([(0, b"k", b"v", ())] * 3, compression=Compression.LZ4))
    data[-1] ^= 0xFF  # corrupt the payload: CRC and decompression would both fail

    def boom(*args: object) -> None:
        raise AssertionError("decompression must not run")

    monkeypatch.setattr(_v2, "decompress_to_buffer", boom)
    (batch,) = read_batch_headers(data)
    assert batch.record_count == 3 and batch.compression is Compression.LZ4
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        batch.validate_crc()
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        decode_batches(data)
    assert len(decode_batches(data, check_crc=False)) == 1


def test_in_place_rewrites_keep_crc_valid() -> None:
    data = bytearray(encode_batch([(0, b"k", b"v", ())] * 2) * 2)
    size = len(data) // 2
    set_base_offset(data, 0, 1000)
    set_base_offset(data, size, 1002)
    set_partition_leader_epoch(data, size, 7)
    batches = decode_batches(data)  # CRC still valid: neither field is covered
    assert [b.base_offset for b in batches] == [1000, 1002]
    assert [r.offset for b in batches for r in b.records()] == [1000, 1001, 1002, 1003]
    assert batches[1].partition_leader_epoch == 7
    with pytest.raises(ValueError):
        set_partition_leader_epoch(data, 5, 1)
    with pytest.raises(ValueError):
        set_base_offset(data, len(data) - 4, 1)


def test_validate_header() -> None:
    good = bytearray(encode_batch([(0, b"k", b"v", ())] * 3))
    (batch,) = read_batch_headers(good)
    batch.validate_header()
    bad = bytearray(good)
    struct.pack_into(">i", bad, 23, 1)  # last offset delta 1 < count - 1
    with pytest.raises(CorruptRecordError, match="last offset delta"):
        read_batch_headers(bad)[0].validate_header()
    bad = bytearray(good)
    struct.pack_into(">i", bad, 57, 1000)  # more records than bytes
    struct.pack_into(">i", bad, 23, 999)
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        read_batch_headers(bad)[0].validate_header()
    bad = bytearray(good)
    struct.pack_into(">i", bad, 57, -1)
    with pytest.raises(CorruptRecordError, match="negative record count"):
        read_batch_headers(bad)[0].validate_header()


def test_compression_level_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = compression_mod.cramjam.gzip.compress

    def spy(data: object, level: int | None = None) -> object:
        seen.append(level)
        return real(data, level=level)

    monkeypatch.setattr(compression_mod.cramjam.gzip, "compress", spy)
    encode_batch([(0, None, b"x", ())], compression=Compression.GZIP, compression_level=2)
    encode_batch([(0, None, b"x", ())], compression=Compression.GZIP)
    assert seen == [2, 6]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_validate_records(backend: Backend, codec: Compression) -> None:
    good = encode_batch([(0, b"k", b"v", ())] * 3, compression=codec, base_offset=40)
    assert [r.offset for r in only(good).validate_records()] == [40, 41, 42]

    def rec(delta: int) -> bytes:
        return record(b"\x00\x00", varint(delta), varint(-1), varint(-1), varint(0))

    gap = raw_batch(compress_if(codec, rec(0) + rec(2)), 2, attributes=int(codec))
    with pytest.raises(CorruptRecordError, match="offset delta 2 where 1 was expected"):
        only(gap).validate_records()
    short = bytearray(raw_batch(compress_if(codec, rec(0) + rec(1)), 2, attributes=int(codec)))
    struct.pack_into(">i", short, 23, 5)  # last offset delta 5 for 2 records (CRC not checked here)
    (batch,) = read_batch_headers(short)
    with pytest.raises(CorruptRecordError, match="does not match 2 records"):
        batch.validate_records()


def compress_if(codec: Compression, data: bytes) -> bytes:
    return compression_mod.compress(codec, data) if codec else data


def test_iter_batches_delivers_good_batches_before_the_corrupt_one() -> None:
    from aiokafka_lite.wire.records import iter_batches

    good = encode_batch([(0, b"k", b"v", ())], base_offset=0)
    bad = bytearray(encode_batch([(0, b"k", b"v", ())], base_offset=1))
    bad[-1] ^= 1
    it = iter_batches(good + bytes(bad) + good)
    assert next(it).base_offset == 0
    with pytest.raises(CorruptRecordError, match="CRC mismatch in batch at byte 70"):
        next(it)
    framing = good + b"\x00" * 8 + b"\xff\xff\xff\xfe" + b"\x00" * 60
    it = iter_batches(framing)
    assert next(it).base_offset == 0
    with pytest.raises(CorruptRecordError, match="negative length"):
        next(it)
    assert scan_batches(framing[: len(good) + 10]) == ([(0, len(good), 2)], len(good))
    assert scan_batches(good[:30]) == ([], 0)


# ------------------------------------------------------------------ the consumer's form


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_records_as_builds_consumer_records_like_records_does(backend: Backend, codec: Compression) -> None:
    import gc

    from aiokafka_lite.consume.record import Record as ConsumerRecord

    items = [
        (3000 + i, None if i % 4 == 0 else b"k%d" % i, b"v" * i, [("h", b"1"), ("n", None)] if i % 3 else [])
        for i in range(40)
    ]
    batch = only(encode_batch(items, compression=codec, base_offset=900, partition_leader_epoch=5))
    records = batch.records_as((ConsumerRecord, "orders", 4, TimestampType.CREATE_TIME, 5))
    expected = [
        ConsumerRecord(
            "orders",
            4,
            r.offset,
            r.key,
            r.value,
            tuple(r.headers),
            r.timestamp,
            TimestampType.CREATE_TIME,
            5,
        )
        for r in batch.records()
    ]
    assert records == expected
    assert all(type(r) is ConsumerRecord for r in records)
    assert records[0].headers == () and records[1].headers == (("h", b"1"), ("n", None))
    assert records[1]._replace(value=b"x").value == b"x"
    if backend.name == "c":
        # Built untracked: they can never be part of a cycle (see _crecords.c).
        assert not any(gc.is_tracked(r) or gc.is_tracked(r.headers) for r in records)
    data = bytes(batch._data)
    with pytest.raises(CorruptRecordError, match="record count 1000 cannot fit"):  # same errors
        _v2.decode_records_as(data, 61, len(data), 1000, 0, 0, None, ConsumerRecord, "t", 0, 0, None)


def test_records_as_rejects_a_class_that_is_not_a_plain_tuple_subclass() -> None:
    require_c_backend()
    batch = only(encode_batch([(1, None, b"v", [])]))
    assert _v2.c_ext is not None

    class WithDict(tuple):  # type: ignore[type-arg]
        pass

    for cls in (list, WithDict, int):
        with pytest.raises(TypeError, match="tuple subclass without slots"):
            _v2.c_ext.decode_records(batch._data, 61, len(batch._data), 1, 0, 0, None, cls, "t", 0, 0, None)
