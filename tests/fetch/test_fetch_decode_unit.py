"""parse_partition / CompletedFetch: framing, CRC, positions, read_committed, deserializers."""

from __future__ import annotations

import pytest

from aiokafka_lite.consume.fetch.decode import CompletedFetch, parse_partition
from aiokafka_lite.consume.record import Record
from aiokafka_lite.core.errors import CorruptRecordError, RecordDeserializationError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.records import Compression, TimestampType, build_control_batch, encode_batch

TP = TopicPartition("t", 3)


def batch(base: int, n: int, *, pid: int = -1, txn: bool = False, epoch: int = 4, **kw: object) -> bytes:
    recs = [
        (1000 + base + i, f"k{base + i}".encode(), f"v{base + i}".encode(), [("h", b"x")]) for i in range(n)
    ]
    return encode_batch(
        recs,
        base_offset=base,
        partition_leader_epoch=epoch,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn,
        **kw,  # type: ignore[arg-type]
    )


def marker(offset: int, pid: int, commit: bool) -> bytes:
    return build_control_batch(
        commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=1, timestamp=1, base_offset=offset
    )


def drain(cf: CompletedFetch, position: int, **kw: object) -> list[Record]:
    out: list[Record] = []
    while True:
        recs = cf.next_records(position, **kw)  # type: ignore[arg-type]
        if not recs:
            return out
        out.extend(recs)
        position = recs[-1].offset + 1


def test_records_have_all_fields() -> None:
    cf = parse_partition(TP, 0, batch(0, 3), high_watermark=3)
    recs = drain(cf, 0)
    assert [r.offset for r in recs] == [0, 1, 2]
    r = recs[1]
    assert r == Record("t", 3, 1, b"k1", b"v1", (("h", b"x"),), 1001, TimestampType.CREATE_TIME, 4)
    assert cf.next_fetch_offset == 3 and cf.exhausted and cf.size > 0 and cf.last_epoch == 4


def test_position_inside_first_batch_and_partial_tail() -> None:
    data = batch(0, 5) + batch(5, 5, compression=Compression.LZ4)
    cut = data + batch(10, 5)[:30]
    cf = parse_partition(TP, 3, cut)
    assert [r.offset for r in drain(cf, 3)] == [3, 4, 5, 6, 7, 8, 9]
    assert cf.next_fetch_offset == 10 and cf.error is None


def test_batches_before_fetch_offset_are_dropped() -> None:
    cf = parse_partition(TP, 5, batch(0, 5) + batch(5, 2))
    assert len(cf.batches) == 1
    assert [r.offset for r in drain(cf, 5)] == [5, 6]


def test_crc_mismatch_is_positional() -> None:
    good = batch(0, 2)
    bad = bytearray(batch(2, 2))
    bad[-1] ^= 0xFF
    cf = parse_partition(TP, 0, good + bytes(bad) + batch(4, 2))
    assert [r.offset for r in drain(cf, 0)] == [0, 1]
    assert isinstance(cf.error, CorruptRecordError)
    assert "t-3" in str(cf.error) and "offset 2" in str(cf.error)
    assert cf.next_fetch_offset == 2
    # Without CRC checks the corruption goes unnoticed at this stage.
    assert parse_partition(TP, 0, good + bytes(bad), check_crcs=False).error is None


def test_only_partial_batch_is_an_error() -> None:
    cf = parse_partition(TP, 0, batch(0, 3)[:40])
    assert isinstance(cf.error, CorruptRecordError)
    assert parse_partition(TP, 0, b"").error is None


def test_read_committed_filters_aborted_and_control() -> None:
    data = (
        batch(0, 2, pid=7, txn=True)  # committed txn of 7
        + batch(2, 2, pid=8, txn=True)  # aborted txn of 8
        + marker(4, 7, True)
        + batch(5, 1)  # non transactional
        + marker(6, 8, False)
        + batch(7, 2, pid=8, txn=True)  # a later, committed txn of 8
        + marker(9, 8, True)
    )
    aborted = [(8, 2)]
    committed = parse_partition(TP, 0, data, read_committed=True, aborted_transactions=aborted)
    assert [r.offset for r in drain(committed, 0)] == [0, 1, 5, 7, 8]
    assert committed.next_fetch_offset == 10
    uncommitted = parse_partition(TP, 0, data, aborted_transactions=aborted)
    # Control records never surface, even read_uncommitted.
    assert [r.offset for r in drain(uncommitted, 0)] == [0, 1, 2, 3, 5, 7, 8]


def test_read_committed_starting_at_abort_marker() -> None:
    # The fetch starts at the marker of an aborted txn; later batches of the same
    # producer belong to a new transaction and must not be dropped.
    data = marker(4, 8, False) + batch(5, 2, pid=8, txn=True) + marker(7, 8, True)
    cf = parse_partition(TP, 4, data, read_committed=True, aborted_transactions=[(8, 2)])
    assert [r.offset for r in drain(cf, 4)] == [5, 6]


def test_read_committed_stops_at_last_stable_offset() -> None:
    data = batch(0, 2) + batch(2, 2, pid=9, txn=True)
    cf = parse_partition(TP, 0, data, read_committed=True, last_stable_offset=2)
    assert [r.offset for r in drain(cf, 0)] == [0, 1]
    assert cf.next_fetch_offset == 2


def test_deserializers_and_failure_position() -> None:
    cf = parse_partition(TP, 0, batch(0, 4))
    recs = drain(cf, 0, key_deserializer=bytes.decode, value_deserializer=lambda v: v.upper())
    assert recs[0].key == "k0" and recs[0].value == b"V0"

    def picky(v: bytes) -> bytes:
        if v == b"v2":
            raise ValueError("nope")
        return v

    cf = parse_partition(TP, 0, batch(0, 4) + batch(4, 1))
    assert [r.offset for r in drain(cf, 0, value_deserializer=picky)] == [0, 1]
    assert isinstance(cf.error, RecordDeserializationError)
    assert (cf.error.partition, cf.error.offset) == (3, 2)
    assert cf.next_fetch_offset == 2


def test_legacy_timestamp_type_and_no_epoch() -> None:
    cf = parse_partition(TP, 0, batch(0, 1, epoch=-1, timestamp_type=1))
    (r,) = drain(cf, 0)
    assert r.leader_epoch is None and r.timestamp_type is TimestampType.LOG_APPEND_TIME


def test_undecodable_batch_raises_with_partition() -> None:
    raw = bytearray(batch(0, 3, compression=Compression.GZIP))
    raw[70:80] = b"\x00" * 10  # garble compressed payload, CRC unchecked
    cf = parse_partition(TP, 0, bytes(raw), check_crcs=False)
    with pytest.raises(CorruptRecordError, match="t-3"):
        cf.next_records(0)
    with pytest.raises(CorruptRecordError):
        cf.next_records(0)  # stays put until the consumer seeks
