"""Control batches: transaction commit/abort markers."""

from __future__ import annotations

import struct

import pytest
from test_records_support import Backend, make_backend_fixture

from aiokafka_lite.core.errors import CorruptRecordError
from aiokafka_lite.wire.records import (
    ControlRecordType,
    Record,
    RecordBatch,
    build_control_batch,
    control_record_key,
    decode_batches,
    encode_batch,
    parse_control_record,
)

backend = make_backend_fixture()


@pytest.mark.parametrize("commit", [True, False])
def test_marker_round_trip(backend: Backend, commit: bool) -> None:
    data = build_control_batch(
        commit=commit,
        producer_id=4000,
        producer_epoch=7,
        coordinator_epoch=12,
        timestamp=1234,
        base_offset=55,
    )
    (batch,) = decode_batches(data)
    assert isinstance(batch, RecordBatch)
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4000, 7, -1)
    assert batch.base_offset == 55 and batch.record_count == 1
    (rec,) = batch.records()
    assert rec.offset == 55 and rec.timestamp == 1234
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    # key: version 0, type; value: version 0, coordinator epoch
    assert rec.key == struct.pack(">hh", 0, kind) == control_record_key(kind)
    assert rec.value == struct.pack(">hi", 0, 12)
    assert parse_control_record(rec) == (kind, 12)
    assert parse_control_record(rec)[0] is kind


def test_attributes_bits(backend: Backend) -> None:
    data = build_control_batch(commit=True, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0)
    assert struct.unpack_from(">h", data, 21)[0] == 0x30  # transactional | control, no codec


def test_parse_newer_versions_and_unknown_types() -> None:
    newer = Record(0, 0, struct.pack(">hh", 1, 1) + b"extra", struct.pack(">hi", 3, 9) + b"more", [])
    assert parse_control_record(newer) == (ControlRecordType.COMMIT, 9)
    leader_change = Record(0, 0, struct.pack(">hh", 0, 2), b"\x00\x00whatever", [])
    assert parse_control_record(leader_change) == (2, -1)


@pytest.mark.parametrize(
    ("key", "value"),
    [(None, b"\x00\x00\x00\x00\x00\x00"), (b"\x00\x00\x00", b"\x00" * 6), (b"\x00\x00\x00\x01", None),
     (b"\x00\x00\x00\x00", b"\x00\x00\x00"), (b"\xff\xff\x00\x01", b"\x00" * 6)],
)  # fmt: skip
def test_malformed_control_records(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(CorruptRecordError):
        parse_control_record(Record(3, 0, key, value, []))


def test_control_flag_via_encode_batch(backend: Backend) -> None:
    data = encode_batch([(0, control_record_key(ControlRecordType.ABORT), b"\x00\x00\x00\x00\x00\x05", ())],
                        is_control=True, is_transactional=True, producer_id=9, producer_epoch=1)  # fmt: skip
    (batch,) = decode_batches(data)
    assert batch.is_control
    assert parse_control_record(batch.records()[0]) == (ControlRecordType.ABORT, 5)
