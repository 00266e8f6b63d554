"""Property tests: decoders only ever raise KafkaError subclasses, backends agree, round trips hold."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_records_support import legacy_message, require_c_backend

from aiokafka_lite.core.errors import CorruptRecordError, KafkaError
from aiokafka_lite.wire.compression import Compression, compress, decompress
from aiokafka_lite.wire.records import (
    TimestampType,
    _pyimpl,
    _v2,
    build_control_batch,
    decode_batches,
    encode_batch,
    parse_control_record,
)
from aiokafka_lite.wire.records._c_extension import c_ext

FUZZ = settings(
    max_examples=int(__import__("os").environ.get("RECORDS_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def consume(data: bytes | bytearray, check_crc: bool) -> None:
    """Everything a consumer would do with a fetched blob; only KafkaError may escape."""
    try:
        batches = decode_batches(data, check_crc=check_crc, max_decompressed_size=1 << 20)
    except KafkaError:
        return
    for batch in batches:
        try:
            for attr in ("base_offset", "last_offset", "record_count", "timestamp_type", "compression"):
                getattr(batch, attr)
            records = batch.records()
        except KafkaError:
            continue
        for rec in records:
            assert isinstance(rec.offset, int) and isinstance(rec.headers, list)
            if batch.is_control:
                try:
                    parse_control_record(rec)
                except KafkaError:
                    pass


def _corpus() -> list[bytes]:
    items = [
        (1000 + i, b"key%d" % i if i % 2 else None, b"value" * i, [("h", b"x")] * (i % 3)) for i in range(6)
    ]
    blobs = [encode_batch(items, compression=c, base_offset=10, producer_id=3) for c in Compression]
    blobs.append(
        build_control_batch(commit=True, producer_id=1, producer_epoch=2, coordinator_epoch=3, timestamp=4)
    )
    inner = b"".join(legacy_message(i, b"k", b"v%d" % i, magic=1, timestamp=i) for i in range(3))
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4):
        blobs.append(
            legacy_message(2, None, compress(codec, inner), magic=1, attributes=int(codec), timestamp=9)
        )
    blobs.append(legacy_message(0, b"k", b"v", magic=0) + legacy_message(1, None, b"v", magic=1, timestamp=5))
    return blobs


CORPUS = _corpus()


@FUZZ
@given(st.binary(max_size=400), st.booleans())
def test_random_bytes(data: bytes, check_crc: bool) -> None:
    consume(data, check_crc)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "int", "cut", "insert", "dup"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif op == "int":
            value = draw(st.sampled_from([0, 1, -1, -2, 0x7F, 0x7FFFFFFF, -0x80000000, 49, 61]))
            data[pos : pos + 4] = value.to_bytes(4, "big", signed=True)
        elif op == "cut":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "dup":
            data += data[pos:]
    return bytes(data)


@FUZZ
@given(mutated(), st.booleans())
def test_mutated_valid_inputs(data: bytes, check_crc: bool) -> None:
    consume(data, check_crc)


@FUZZ
@given(st.sampled_from([c for c in Compression if c]), st.binary(max_size=300))
def test_decompress_random(codec: Compression, data: bytes) -> None:
    try:
        decompress(codec, data, 1 << 20)
    except CorruptRecordError:
        pass


# Module-scoped so hypothesis does not re-run them per example; the availability check
# runs before any example, so a missing C extension skips (locally) or fails (CI) cleanly.
@pytest.fixture(scope="module")
def c_decode_records() -> Any:
    require_c_backend()
    assert c_ext is not None
    return c_ext.decode_records


@pytest.fixture(scope="module", params=["c", "python"])
def builder_class(request: pytest.FixtureRequest) -> Any:
    if request.param == "python":
        return _v2.PyBatchBuilder
    require_c_backend()
    return _v2.CBatchBuilder


def _run(fn: Any, data: bytes, count: int, lat: int | None) -> tuple[str, Any]:
    try:
        return "ok", fn(data, 0, len(data), count, 1000, -7, lat)
    except CorruptRecordError as exc:
        return "error", str(exc)


#: A records region (arbitrary bytes, or a real batch's records), a record count, a
#: LogAppendTime or None: the arguments both decoders are fuzzed with.
RECORDS_REGION = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(CORPUS).map(lambda b: b[61:] if len(b) > 61 else b),
)
RECORD_COUNT = st.integers(-2, 12)
LOG_APPEND_TIME = st.one_of(st.none(), st.integers(-(1 << 63), (1 << 63) - 1))


@FUZZ
@given(RECORDS_REGION, RECORD_COUNT, LOG_APPEND_TIME)
def test_backends_agree_on_arbitrary_records(
    c_decode_records: Any, data: bytes, count: int, lat: int | None
) -> None:
    assert _run(c_decode_records, data, count, lat) == _run(_pyimpl.decode_records, data, count, lat)


header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20)))
record_items = st.lists(
    st.tuples(
        st.integers(-(1 << 40), 1 << 40),
        st.one_of(st.none(), st.binary(max_size=30)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(header, max_size=6),
    ),
    max_size=30,
)


@FUZZ
@given(record_items, st.sampled_from(list(Compression)))
def test_round_trip_property(builder_class: Any, items: list[Any], codec: Compression) -> None:
    builder = builder_class(compression=codec, max_batch_size=1 << 30, base_offset=5)
    for item in items:
        assert builder.append(*item)
    data = builder.build(producer_id=1, producer_epoch=0, base_sequence=0)
    (batch,) = decode_batches(data)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]
    assert got == [(5 + i, t, k, v, h) for i, (t, k, v, h) in enumerate(items)]
    if items:
        assert batch.max_timestamp == max(t for t, *_ in items)


def _as_consumer_records(records: list[Any]) -> list[Any]:
    from aiokafka_lite.consume.record import Record as ConsumerRecord

    return [
        ConsumerRecord(
            "t", 2, r.offset, r.key, r.value, tuple(r.headers), r.timestamp, TimestampType.CREATE_TIME, 9
        )
        for r in records
    ]


@FUZZ
@given(RECORDS_REGION, RECORD_COUNT, LOG_APPEND_TIME)
def test_the_consumers_form_agrees_with_the_pure_python_records(
    c_decode_records: Any, data: bytes, count: int, lat: int | None
) -> None:
    from aiokafka_lite.consume.record import Record as ConsumerRecord

    form = (ConsumerRecord, "t", 2, TimestampType.CREATE_TIME, 9)
    c = _run(lambda *args: c_decode_records(*args, *form), data, count, lat)
    python = _run(lambda *args: _as_consumer_records(_pyimpl.decode_records(*args)), data, count, lat)
    assert c == python
