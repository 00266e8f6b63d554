"""The differential cases, registered by area (produce, fetch, groups, txn, admin).

Keys starting with ``_`` (error messages) are shown by ``report.py`` but not compared.
"""

from __future__ import annotations

import asyncio
import time

import lz4.frame
import xxhash
from _diffkit import (
    PRODUCE_VERSION,
    Observation,
    Target,
    add_partitions,
    batch,
    case,
    end_txn,
    fetch,
    find_coordinator,
    init_producer_id,
    legacy_message,
    now_ms,
    patch,
    produce,
    raw_batch,
    raw_record,
)

from aiokafka_lite.core.errors import KafkaConnectionError
from aiokafka_lite.wire.messages import ProduceRequest
from aiokafka_lite.wire.records import Compression


async def _produce_then_fetch(t: Target, prefix: str, data: bytes | None, **topic: object) -> Observation:
    """Produces ``data`` to a fresh topic, then reports the answer and what a fetch sees."""
    name = await t.create_topic(prefix, **topic)  # type: ignore[arg-type]
    c = await t.client()
    r = await produce(c, name, data)
    return {**r.observe(), "_msg": r.message, **(await fetch(c, name)).observe()}


# -- produce: the record set ------------------------------------------------------------


@case("produce")
async def case_valid_batch(t: Target) -> Observation:
    topic = await t.create_topic("valid")
    c = await t.client()
    first = await produce(c, topic, batch(3))
    second = await produce(c, topic, batch(2))
    return {"first": first.observe(), "second": second.observe(), **(await fetch(c, topic)).observe()}


@case("produce")
async def case_bad_crc(t: Target) -> Observation:
    data = bytearray(batch(2))
    data[-1] ^= 0xFF  # last byte of the last record
    return await _produce_then_fetch(t, "crc", bytes(data))


@case("produce")
async def case_magic_0_message(t: Target) -> Observation:
    return await _produce_then_fetch(t, "magic0", legacy_message(0, b"k", b"v"))


@case("produce")
async def case_magic_1_message(t: Target) -> Observation:
    return await _produce_then_fetch(t, "magic1", legacy_message(1, b"k", b"v"))


@case("produce")
async def case_magic_3_batch(t: Target) -> Observation:
    return await _produce_then_fetch(t, "magic3", patch(batch(1), magic=3))


@case("produce")
async def case_last_offset_delta_beyond_count(t: Target) -> Observation:
    return await _produce_then_fetch(t, "lod-big", patch(batch(2), last_offset_delta=2))


@case("produce")
async def case_last_offset_delta_below_count(t: Target) -> Observation:
    return await _produce_then_fetch(t, "lod-small", patch(batch(3), last_offset_delta=1))


@case("produce")
async def case_negative_last_offset_delta(t: Target) -> Observation:
    return await _produce_then_fetch(t, "lod-neg", patch(batch(1), last_offset_delta=-1))


@case("produce")
async def case_record_count_zero(t: Target) -> Observation:
    return await _produce_then_fetch(t, "count0", patch(batch(1), record_count=0, last_offset_delta=-1))


@case("produce")
async def case_record_count_above_records(t: Target) -> Observation:
    # Header says 3 records (offset deltas 0..2) but only 2 are encoded.
    return await _produce_then_fetch(t, "count-more", patch(batch(2), record_count=3, last_offset_delta=2))


@case("produce")
async def case_record_count_below_records(t: Target) -> Observation:
    # Header says 1 record but 2 are encoded.
    return await _produce_then_fetch(t, "count-less", patch(batch(2), record_count=1, last_offset_delta=0))


@case("produce")
async def case_record_offset_deltas_not_sequential(t: Target) -> Observation:
    records = [raw_record(0, b"a", b"1"), raw_record(2, b"b", b"2")]
    return await _produce_then_fetch(t, "deltas", raw_batch(records, count=2, last_offset_delta=1))


@case("produce")
async def case_compressed_offset_deltas_not_sequential(t: Target) -> Observation:
    import gzip

    records = gzip.compress(raw_record(0, b"a", b"1") + raw_record(5, b"b", b"2"))
    data = raw_batch(records, count=2, last_offset_delta=1, attributes=Compression.GZIP)
    return await _produce_then_fetch(t, "zdeltas", data)


@case("produce")
async def case_two_batches_in_one_request(t: Target) -> Observation:
    return await _produce_then_fetch(t, "two", batch(1) + batch(1))


@case("produce")
async def case_trailing_bytes_after_batch(t: Target) -> Observation:
    return await _produce_then_fetch(t, "trail", batch(1) + b"\x00\x01\x02")


@case("produce")
async def case_trailing_zero_bytes_after_batch(t: Target) -> Observation:
    return await _produce_then_fetch(t, "trail0", batch(1) + bytes(20))


@case("produce")
async def case_trailing_partial_batch(t: Target) -> Observation:
    return await _produce_then_fetch(t, "trailpart", batch(1) + batch(2)[:30])


@case("produce")
async def case_batch_length_below_legacy_minimum(t: Target) -> Observation:
    data = batch(1)
    return await _produce_then_fetch(t, "tiny", patch(data, batch_length=10, fix_crc=False)[: 12 + 10])


@case("produce")
async def case_v2_batch_of_52_bytes(t: Target) -> Observation:
    data = batch(1)
    return await _produce_then_fetch(t, "short52", patch(data, batch_length=40, fix_crc=False)[: 12 + 40])


@case("produce")
async def case_negative_magic(t: Target) -> Observation:
    return await _produce_then_fetch(t, "magicneg", patch(batch(1), magic=-1))


@case("produce")
async def case_compressed_record_count_above_records(t: Target) -> Observation:
    data = batch(2, compression=Compression.GZIP)
    return await _produce_then_fetch(t, "zcount-more", patch(data, record_count=3, last_offset_delta=2))


@case("produce")
async def case_compressed_record_count_below_records(t: Target) -> Observation:
    data = batch(3, compression=Compression.GZIP)
    return await _produce_then_fetch(t, "zcount-less", patch(data, record_count=2, last_offset_delta=1))


@case("produce")
async def case_record_with_garbage_length(t: Target) -> Observation:
    records = raw_record(0, b"a", b"1") + b"\x7f" + b"\x00" * 10
    return await _produce_then_fetch(t, "garbage", raw_batch(records, count=2, last_offset_delta=1))


@case("produce")
async def case_zstd_with_produce_v3(t: Target) -> Observation:
    topic = await t.create_topic("zstd3")
    c = await t.client()
    r = await produce(c, topic, batch(1, compression=Compression.ZSTD), version=3)
    return {**r.observe(), "_msg": r.message, **(await fetch(c, topic)).observe()}


@case("produce")
async def case_zstd_with_produce_v7(t: Target) -> Observation:
    topic = await t.create_topic("zstd7")
    c = await t.client()
    r = await produce(c, topic, batch(1, compression=Compression.ZSTD), version=7)
    return {**r.observe(), "_msg": r.message, **(await fetch(c, topic)).observe()}


@case("produce")
async def case_producer_sets_log_append_time(t: Target) -> Observation:
    return await _produce_then_fetch(t, "latbit", patch(batch(2), attributes=0x08))


@case("produce")
async def case_producer_sets_log_append_time_on_lat_topic(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "latbit2", patch(batch(2), attributes=0x08), configs={"message.timestamp.type": "LogAppendTime"}
    )


@case("produce")
async def case_wrong_max_timestamp_in_header(t: Target) -> Observation:
    data = batch(2)
    return await _produce_then_fetch(t, "maxts", patch(data, max_timestamp=now_ms() + 10 * 86_400_000))


@case("produce")
async def case_several_bad_records_compacted_and_timestamps(t: Target) -> Observation:
    old = now_ms() - 3_600_000
    records = b"".join(
        [
            raw_record(0, b"a", b"1"),
            raw_record(1, None, b"2"),
            raw_record(2, b"c", b"3", timestamp_delta=-3_600_000),
            raw_record(3, None, b"4", timestamp_delta=-3_600_000),
            raw_record(4, None, b"5"),
            raw_record(5, None, b"6"),
        ]
    )
    del old
    return await _produce_then_fetch(
        t,
        "manybad",
        raw_batch(records, count=6, last_offset_delta=5),
        configs={"cleanup.policy": "compact", "message.timestamp.before.max.ms": "60000"},
    )


@case("produce")
async def case_several_keyless_records_to_compacted_topic(t: Target) -> Observation:
    return await _produce_then_fetch(
        t,
        "manykeyless",
        batch(6, keys=[b"a", None, None, b"d", None, None]),
        configs={"cleanup.policy": "compact"},
    )


@case("produce")
async def case_timestamp_minus_one_with_bounds(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "tsnone", batch(1, timestamp=-1), configs={"message.timestamp.before.max.ms": "60000"}
    )


@case("produce")
async def case_timestamp_minus_five_with_bounds(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "tsneg5", batch(1, timestamp=-5), configs={"message.timestamp.before.max.ms": "60000"}
    )


@case("produce")
async def case_size_over_limit_and_bad_crc(t: Target) -> Observation:
    data = bytearray(batch([b"x" * 2000]))
    data[-1] ^= 0xFF
    return await _produce_then_fetch(t, "bigcrc", bytes(data), configs={"max.message.bytes": "1000"})


@case("produce")
async def case_base_offset_and_bad_crc(t: Target) -> Observation:
    data = bytearray(patch(batch(1), base_offset=7))
    data[-1] ^= 0xFF
    return await _produce_then_fetch(t, "basecrc", bytes(data))


@case("produce")
async def case_bad_crc_and_bad_count(t: Target) -> Observation:
    return await _produce_then_fetch(t, "crccount", patch(batch(2), record_count=5, fix_crc=False))


@case("produce")
async def case_unknown_codec_and_bad_count(t: Target) -> Observation:
    return await _produce_then_fetch(t, "codeccount", patch(batch(2), attributes=6, record_count=5))


@case("produce")
async def case_truncated_batch(t: Target) -> Observation:
    return await _produce_then_fetch(t, "trunc", batch(3)[:-5])


@case("produce")
async def case_batch_length_too_short(t: Target) -> Observation:
    data = batch(1)
    return await _produce_then_fetch(t, "short", patch(data, batch_length=30, fix_crc=False)[: 12 + 30])


@case("produce")
async def case_null_records(t: Target) -> Observation:
    """Kafka's request handler fails on null records and never answers; the embedded
    broker closes the connection. Either way the client gets no answer."""
    topic = await t.create_topic("null")
    c = await t.client()
    try:
        await c.request(
            ProduceRequest(
                acks=-1,
                timeout_ms=30000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=topic,
                        partition_data=[ProduceRequest.PartitionProduceData(index=0, records=None)],
                    )
                ],
            ),
            PRODUCE_VERSION,
            within=3,
        )
        answered = True
    except (TimeoutError, KafkaConnectionError):
        answered = False
    return {"answered": answered, **(await fetch(await t.client(), topic)).observe()}


@case("produce")
async def case_empty_records(t: Target) -> Observation:
    return await _produce_then_fetch(t, "empty", b"")


@case("produce")
async def case_nonzero_base_offset_from_client(t: Target) -> Observation:
    return await _produce_then_fetch(t, "base", patch(batch(2), base_offset=42))


@case("produce")
async def case_unknown_codec_5(t: Target) -> Observation:
    return await _produce_then_fetch(t, "codec5", patch(batch(1), attributes=5))


@case("produce")
async def case_unknown_codec_7(t: Target) -> Observation:
    return await _produce_then_fetch(t, "codec7", patch(batch(1), attributes=7))


@case("produce")
async def case_gzip_garbage(t: Target) -> Observation:
    records = b"\x1f\x8b\x08\x00garbage-not-deflate"
    data = raw_batch(records, count=1, last_offset_delta=0, attributes=Compression.GZIP)
    return await _produce_then_fetch(t, "gzbad", data)


def _lz4_batch(*, linked: bool = False, **frame_options: object) -> bytes:
    records = raw_record(0, b"k", b"v" * 100) + raw_record(1, b"k2", b"w" * 100)
    frame = bytearray(lz4.frame.compress(records, block_linked=False, **frame_options))  # type: ignore[arg-type]
    if linked:
        # Clear the block-independence flag (FLG bit 5) and fix the descriptor checksum.
        frame[4] &= ~0x20
        hc_pos = 6 + (8 if frame[4] & 0x08 else 0)
        frame[hc_pos] = (xxhash.xxh32_intdigest(bytes(frame[4:hc_pos])) >> 8) & 0xFF
    return raw_batch(bytes(frame), count=2, last_offset_delta=1, attributes=Compression.LZ4)


@case("produce")
async def case_lz4_independent_blocks(t: Target) -> Observation:
    return await _produce_then_fetch(t, "lz4ok", _lz4_batch(store_size=False))


@case("produce")
async def case_lz4_linked_blocks(t: Target) -> Observation:
    return await _produce_then_fetch(t, "lz4linked", _lz4_batch(linked=True, store_size=False))


@case("produce")
async def case_lz4_content_size(t: Target) -> Observation:
    return await _produce_then_fetch(t, "lz4size", _lz4_batch(store_size=True))


@case("produce")
async def case_lz4_content_checksum(t: Target) -> Observation:
    return await _produce_then_fetch(t, "lz4sum", _lz4_batch(store_size=False, content_checksum=True))


@case("produce")
async def case_control_batch_from_client(t: Target) -> Observation:
    data = patch(batch(1), attributes=0x20)  # control, not transactional
    return await _produce_then_fetch(t, "ctrl", data)


@case("produce")
async def case_transactional_control_batch_from_client(t: Target) -> Observation:
    topic = await t.create_topic("txctrl")
    c = await t.client()
    txn = t.unique("txn")
    pid = await init_producer_id(c, txn)
    await add_partitions(c, txn, pid.producer_id, pid.producer_epoch, topic)
    data = patch(
        batch(1, producer_id=pid.producer_id, producer_epoch=pid.producer_epoch, base_sequence=0),
        attributes=0x30,
    )
    r = await produce(c, topic, data, transactional_id=txn)
    return {**r.observe(), "_msg": r.message, **(await fetch(c, topic)).observe()}


@case("produce")
async def case_transactional_batch_without_producer_id(t: Target) -> Observation:
    return await _produce_then_fetch(t, "txnnopid", patch(batch(1), attributes=0x10))


@case("produce")
async def case_producer_id_without_sequence(t: Target) -> Observation:
    topic = await t.create_topic("noseq")
    c = await t.client()
    pid = await init_producer_id(c)
    r = await produce(c, topic, batch(1, producer_id=pid.producer_id, producer_epoch=pid.producer_epoch))
    return {**r.observe(), "_msg": r.message, **(await fetch(c, topic)).observe()}


# -- produce: request-level -----------------------------------------------------------


@case("produce")
async def case_acks_2(t: Target) -> Observation:
    topic = await t.create_topic("acks2")
    c = await t.client()
    r = await produce(c, topic, batch(1), acks=2)
    return {**r.observe(), "_msg": r.message, **(await fetch(c, topic)).observe()}


@case("produce")
async def case_acks_minus_2(t: Target) -> Observation:
    topic = await t.create_topic("acksm2")
    c = await t.client()
    r = await produce(c, topic, batch(1), acks=-2)
    return {**r.observe(), "_msg": r.message, **(await fetch(c, topic)).observe()}


@case("produce")
async def case_unknown_topic(t: Target) -> Observation:
    c = await t.client()
    r = await produce(c, t.unique("nosuch"), batch(1))
    return {**r.observe(), "_msg": r.message}


@case("produce")
async def case_unknown_partition(t: Target) -> Observation:
    topic = await t.create_topic("nopart")
    c = await t.client()
    r = await produce(c, topic, batch(1), partition=3)
    return {**r.observe(), "_msg": r.message}


@case("produce")
async def case_invalid_topic_name(t: Target) -> Observation:
    c = await t.client()
    r = await produce(c, "bad name!", batch(1))
    return {**r.observe(), "_msg": r.message}


@case("produce")
async def case_internal_topic(t: Target) -> Observation:
    c = await t.client()
    assert await find_coordinator(c, t.unique("group"), 0) == 0  # creates __consumer_offsets
    r = await produce(c, "__consumer_offsets", batch(1))
    return {**r.observe(), "_msg": r.message}


# -- produce: topic configs -----------------------------------------------------------


@case("produce")
async def case_keyless_record_to_compacted_topic(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "compact", batch(2, keys=[b"k", None]), configs={"cleanup.policy": "compact"}
    )


@case("produce")
async def case_keyless_compressed_record_to_compacted_topic(t: Target) -> Observation:
    return await _produce_then_fetch(
        t,
        "compactz",
        batch(2, keys=[b"k", None], compression=Compression.GZIP),
        configs={"cleanup.policy": "compact"},
    )


@case("produce")
async def case_tombstone_to_compacted_topic(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "tomb", batch([b"v", None], keys=[b"k", b"k"]), configs={"cleanup.policy": "compact"}
    )


@case("produce")
async def case_batch_over_max_message_bytes(t: Target) -> Observation:
    return await _produce_then_fetch(t, "big", batch([b"x" * 2000]), configs={"max.message.bytes": "1000"})


@case("produce")
async def case_batch_at_max_message_bytes(t: Target) -> Observation:
    data = batch([b"x" * 900])
    return await _produce_then_fetch(t, "exact", data, configs={"max.message.bytes": str(len(data))})


@case("produce")
async def case_batch_one_over_max_message_bytes(t: Target) -> Observation:
    data = batch([b"x" * 900])
    return await _produce_then_fetch(t, "exact1", data, configs={"max.message.bytes": str(len(data) - 1)})


@case("produce")
async def case_compressed_batch_small_enough(t: Target) -> Observation:
    # 20 kB of records compress far below the 1000-byte limit: the limit is on the batch.
    data = batch([b"x" * 2000] * 10, compression=Compression.GZIP)
    return await _produce_then_fetch(t, "zsmall", data, configs={"max.message.bytes": "1000"})


@case("produce")
async def case_timestamp_before_max(t: Target) -> Observation:
    return await _produce_then_fetch(
        t,
        "tsold",
        batch(1, timestamp=now_ms() - 3_600_000),
        configs={"message.timestamp.before.max.ms": "60000"},
    )


@case("produce")
async def case_timestamp_after_max(t: Target) -> Observation:
    return await _produce_then_fetch(
        t,
        "tsnew",
        batch(1, timestamp=now_ms() + 3_600_000),
        configs={"message.timestamp.after.max.ms": "60000"},
    )


@case("produce")
async def case_timestamp_within_bounds(t: Target) -> Observation:
    return await _produce_then_fetch(
        t,
        "tsok",
        batch(1),
        configs={"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"},
    )


@case("produce")
async def case_timestamp_far_future_default_config(t: Target) -> Observation:
    return await _produce_then_fetch(t, "tsfuture", batch(1, timestamp=now_ms() + 7 * 86_400_000))


@case("produce")
async def case_timestamp_far_past_default_config(t: Target) -> Observation:
    return await _produce_then_fetch(t, "tspast", batch(1, timestamp=now_ms() - 365 * 86_400_000))


@case("produce")
async def case_timestamp_negative(t: Target) -> Observation:
    return await _produce_then_fetch(t, "tsneg", batch(1, timestamp=-5))


@case("produce")
async def case_timestamp_out_of_bounds_log_append_time(t: Target) -> Observation:
    obs = await _produce_then_fetch(
        t,
        "tslat",
        batch(1, timestamp=now_ms() - 3_600_000),
        configs={"message.timestamp.before.max.ms": "60000", "message.timestamp.type": "LogAppendTime"},
    )
    return obs


# -- produce: idempotence ---------------------------------------------------------------


async def _idempotent(t: Target, prefix: str) -> tuple[str, object, int, int]:
    topic = await t.create_topic(prefix)
    c = await t.client()
    pid = await init_producer_id(c)
    assert pid.error_code == 0, pid
    return topic, c, pid.producer_id, pid.producer_epoch


def _seq_batch(pid: int, epoch: int, seq: int, n: int = 1) -> bytes:
    return batch(
        [b"s%d" % (seq + i) for i in range(n)], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


async def _sends(t: Target, prefix: str, sends: list[tuple[int, int]], epoch_delta: int = 0) -> Observation:
    """Sends (sequence, count) batches of one idempotent producer; reports each answer."""
    topic, c, pid, epoch = await _idempotent(t, prefix)
    out = []
    for seq, n in sends:
        r = await produce(c, topic, _seq_batch(pid, epoch + epoch_delta, seq, n))  # type: ignore[arg-type]
        out.append(r.observe() | {"_msg": r.message})
    return {"answers": out, **(await fetch(c, topic)).observe()}  # type: ignore[arg-type]


@case("idempotence")
async def case_in_order(t: Target) -> Observation:
    return await _sends(t, "seqok", [(0, 2), (2, 1), (3, 3)])


@case("idempotence")
async def case_retry_of_last_batch(t: Target) -> Observation:
    return await _sends(t, "seqdup", [(0, 2), (2, 1), (0, 2), (2, 1)])


@case("idempotence")
async def case_gap_in_sequence(t: Target) -> Observation:
    return await _sends(t, "seqgap", [(0, 1), (5, 1)])


@case("idempotence")
async def case_first_sequence_not_zero(t: Target) -> Observation:
    return await _sends(t, "seqfirst", [(3, 1), (4, 1)])


@case("idempotence")
async def case_retry_older_than_cached_batches(t: Target) -> Observation:
    return await _sends(t, "seqold", [(i, 1) for i in range(7)] + [(0, 1), (1, 1), (2, 1)])


@case("idempotence")
async def case_retry_with_different_count(t: Target) -> Observation:
    return await _sends(t, "seqcount", [(0, 2), (0, 1), (0, 3)])


@case("idempotence")
async def case_sequence_overlapping_last_batch(t: Target) -> Observation:
    return await _sends(t, "seqoverlap", [(0, 3), (1, 3)])


@case("idempotence")
async def case_unknown_producer_id(t: Target) -> Observation:
    topic = await t.create_topic("pidunknown")
    c = await t.client()
    r = await produce(c, topic, _seq_batch(987_654_321, 0, 0))
    return {**r.observe(), "_msg": r.message, **(await fetch(c, topic)).observe()}


@case("idempotence")
async def case_epoch_above_allocated(t: Target) -> Observation:
    return await _sends(t, "epochhigh", [(0, 1), (1, 1)], epoch_delta=3)


@case("idempotence")
async def case_stale_epoch(t: Target) -> Observation:
    topic, c, pid, epoch = await _idempotent(t, "epochstale")
    answers = []
    for data in (
        _seq_batch(pid, epoch + 1, 0),
        _seq_batch(pid, epoch, 1),  # older than the epoch the partition has seen
        _seq_batch(pid, epoch + 1, 1),
        _seq_batch(pid, epoch + 2, 5),  # a new epoch must start at sequence 0
        _seq_batch(pid, epoch + 2, 0),
    ):
        r = await produce(c, topic, data)  # type: ignore[arg-type]
        answers.append(r.observe() | {"_msg": r.message})
    return {"answers": answers, **(await fetch(c, topic)).observe()}  # type: ignore[arg-type]


@case("idempotence")
async def case_bump_epoch_with_init_producer_id(t: Target) -> Observation:
    topic, c, pid, epoch = await _idempotent(t, "epochbump")
    first = await produce(c, topic, _seq_batch(pid, epoch, 0))  # type: ignore[arg-type]
    bumped = await init_producer_id(c, producer_id=pid, producer_epoch=epoch)  # type: ignore[arg-type]
    return {
        "first": first.observe(),
        "bump_error": bumped.error_code,
        "same_pid": bumped.producer_id == pid,
        "epoch": bumped.producer_epoch,
    }


# -- transactions ---------------------------------------------------------------------


async def _txn(t: Target, prefix: str) -> tuple[str, object, str, int, int]:
    topic = await t.create_topic(prefix)
    c = await t.client()
    txn = t.unique("txn")
    pid = await init_producer_id(c, txn)
    assert pid.error_code == 0, pid
    return topic, c, txn, pid.producer_id, pid.producer_epoch


def _txn_batch(pid: int, epoch: int, seq: int, n: int = 1) -> bytes:
    return batch(
        [b"t%d" % (seq + i) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


async def _both_views(c: object, topic: str) -> Observation:
    committed = await fetch(c, topic, read_committed=True)  # type: ignore[arg-type]
    uncommitted = await fetch(c, topic)  # type: ignore[arg-type]
    return {"read_committed": committed.observe(), "read_uncommitted": uncommitted.observe()}


async def _settled_views(c: object, topic: str, within: float = 10.0) -> Observation:
    """Both views once no transaction is open: Kafka writes the markers after it has
    answered EndTxn, so the partition settles a moment later."""
    deadline = time.monotonic() + within
    while True:
        f = await fetch(c, topic)  # type: ignore[arg-type]
        if f.last_stable_offset == f.high_watermark or time.monotonic() > deadline:
            return await _both_views(c, topic)
        await asyncio.sleep(0.02)


async def _end(c: object, txn: str, pid: int, epoch: int, *, commit: bool) -> int:
    """EndTxn as a client sends it: retried while the coordinator finishes the last one."""
    deadline = time.monotonic() + 10
    while True:
        code = await end_txn(c, txn, pid, epoch, commit=commit)  # type: ignore[arg-type]
        if code != 51 or time.monotonic() > deadline:
            return code
        await asyncio.sleep(0.02)


@case("txn")
async def case_produce_before_add_partitions(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnnoadd")
    r = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn)  # type: ignore[arg-type]
    return {**r.observe(), "_msg": r.message, **(await _both_views(c, topic))}


@case("txn")
async def case_produce_v12_before_add_partitions(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnnoadd12")
    r = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=12)  # type: ignore[arg-type]
    return {**r.observe(), "_msg": r.message, **(await _both_views(c, topic))}


@case("txn")
async def case_commit(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txncommit")
    added = await add_partitions(c, txn, pid, epoch, topic)  # type: ignore[arg-type]
    r = await produce(c, topic, _txn_batch(pid, epoch, 0, 2), transactional_id=txn)  # type: ignore[arg-type]
    during = await _both_views(c, topic)
    ended = await _end(c, txn, pid, epoch, commit=True)
    return {
        "added": added,
        "produce": r.observe(),
        "during": during,
        "end": ended,
        "after": await _settled_views(c, topic),
    }


@case("txn")
async def case_abort(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnabort")
    added = await add_partitions(c, txn, pid, epoch, topic)  # type: ignore[arg-type]
    r = await produce(c, topic, _txn_batch(pid, epoch, 0, 2), transactional_id=txn)  # type: ignore[arg-type]
    ended = await _end(c, txn, pid, epoch, commit=False)
    return {"added": added, "produce": r.observe(), "end": ended, "after": await _settled_views(c, topic)}


@case("txn")
async def case_produce_without_transactional_id(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnnoid")
    added = await add_partitions(c, txn, pid, epoch, topic)  # type: ignore[arg-type]
    r = await produce(c, topic, _txn_batch(pid, epoch, 0))  # type: ignore[arg-type]
    return {"added": added, **r.observe(), "_msg": r.message, **(await _both_views(c, topic))}


@case("txn")
async def case_non_transactional_batch_with_transactional_id(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnplain")
    added = await add_partitions(c, txn, pid, epoch, topic)  # type: ignore[arg-type]
    data = batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    r = await produce(c, topic, data, transactional_id=txn)  # type: ignore[arg-type]
    return {"added": added, **r.observe(), "_msg": r.message, **(await _both_views(c, topic))}


@case("txn")
async def case_produce_with_fenced_epoch(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnfenced")
    added = await add_partitions(c, txn, pid, epoch, topic)  # type: ignore[arg-type]
    first = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn)  # type: ignore[arg-type]
    again = await init_producer_id(c, txn)  # type: ignore[arg-type]
    stale = await produce(c, topic, _txn_batch(pid, epoch, 1), transactional_id=txn)  # type: ignore[arg-type]
    stale_add = await add_partitions(c, txn, pid, epoch, topic)  # type: ignore[arg-type]
    stale_end = await end_txn(c, txn, pid, epoch, commit=True)  # type: ignore[arg-type]
    return {
        "added": added,
        "first": first.observe(),
        "reinit": again.error_code,
        "same_pid": again.producer_id == pid,
        "epoch_delta": again.producer_epoch - epoch,
        "stale_produce": stale.observe() | {"_msg": stale.message},
        "stale_add": stale_add,
        "stale_end": stale_end,
        **(await _settled_views(c, topic)),
    }


@case("txn")
async def case_end_without_partitions(t: Target) -> Observation:
    _topic, c, txn, pid, epoch = await _txn(t, "txnempty")
    return {
        "commit": await end_txn(c, txn, pid, epoch, commit=True),  # type: ignore[arg-type]
        "abort": await end_txn(c, txn, pid, epoch, commit=False),  # type: ignore[arg-type]
    }


@case("txn")
async def case_add_partitions_unknown_producer_id(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnbadpid")
    return {"added": await add_partitions(c, txn, pid + 1_000_000, epoch, topic)}  # type: ignore[arg-type]


@case("txn")
async def case_add_partitions_unknown_topic(t: Target) -> Observation:
    _topic, c, txn, pid, epoch = await _txn(t, "txnnotopic")
    return {"added": await add_partitions(c, txn, pid, epoch, t.unique("missing"))}  # type: ignore[arg-type]


@case("txn")
async def case_init_with_timeout_over_max(t: Target) -> Observation:
    c = await t.client()
    r = await init_producer_id(c, t.unique("txn"), timeout_ms=3_600_000)
    return {"error": r.error_code}


@case("txn")
async def case_second_commit_after_commit(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txntwice")
    await add_partitions(c, txn, pid, epoch, topic)  # type: ignore[arg-type]
    await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn)  # type: ignore[arg-type]
    first = await _end(c, txn, pid, epoch, commit=True)
    second = await _end(c, txn, pid, epoch, commit=True)
    abort_after = await _end(c, txn, pid, epoch, commit=False)
    return {
        "first": first,
        "second": second,
        "abort_after_commit": abort_after,
        **(await _settled_views(c, topic)),
    }


@case("produce")
async def case_record_key_length_minus_5(t: Target) -> Observation:
    # A record whose key length is -5: not -1 (null), not a length.
    body = b"\x00" + b"\x00" + b"\x00" + b"\x09" + b"\x02v" + b"\x00"  # attrs, ts, offset, key -5, value "v"
    record = bytes([len(body) << 1]) + body
    return await _produce_then_fetch(t, "keyneg", raw_batch([record], count=1, last_offset_delta=0))


async def _acks_zero(t: Target, prefix: str, data: bytes) -> Observation:
    topic = await t.create_topic(prefix)
    c = await t.client()
    await c.send(
        ProduceRequest(
            acks=0,
            timeout_ms=30000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=data)]
                )
            ],
        ),
        PRODUCE_VERSION,
    )
    try:
        # No answer to acks=0: the fetch's answer is the next frame, unless Kafka closed
        # the connection to tell the producer something went wrong.
        after = (await fetch(c, topic)).observe()
        connection = "open"
    except KafkaConnectionError:
        after = (await fetch(await t.client(), topic)).observe()
        connection = "closed"
    return {"connection": connection, **after}


@case("produce")
async def case_acks_zero(t: Target) -> Observation:
    return await _acks_zero(t, "acks0", batch(2))


@case("produce")
async def case_acks_zero_refused(t: Target) -> Observation:
    data = bytearray(batch(2))
    data[-1] ^= 0xFF
    return await _acks_zero(t, "acks0bad", bytes(data))


# -- produce: the topic's compression.type ------------------------------------------


@case("produce")
async def case_topic_compression_recompresses(t: Target) -> Observation:
    return await _produce_then_fetch(t, "zgzip", batch(3), configs={"compression.type": "gzip"})


@case("produce")
async def case_topic_uncompressed_decompresses(t: Target) -> Observation:
    return await _produce_then_fetch(
        t,
        "zuncompressed",
        batch(3, compression=Compression.LZ4),
        configs={"compression.type": "uncompressed"},
    )


@case("produce")
async def case_topic_compression_same_codec(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "zsame", batch(3, compression=Compression.GZIP), configs={"compression.type": "gzip"}
    )


def _gapped(codec: Compression) -> bytes:
    import gzip

    records = raw_record(0, b"a", b"1") + raw_record(5, b"b", b"2")
    payload = gzip.compress(records) if codec is Compression.GZIP else records
    return raw_batch(payload, count=2, last_offset_delta=1, attributes=int(codec))


@case("produce")
async def case_offset_gaps_recompressed_to_other_codec(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "zgaplz4", _gapped(Compression.GZIP), configs={"compression.type": "lz4"}
    )


@case("produce")
async def case_offset_gaps_same_codec_as_topic(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "zgapgzip", _gapped(Compression.GZIP), configs={"compression.type": "gzip"}
    )


@case("produce")
async def case_uncompressed_offset_gaps_topic_compression(t: Target) -> Observation:
    return await _produce_then_fetch(
        t, "zgapnone", _gapped(Compression.NONE), configs={"compression.type": "gzip"}
    )


@case("txn")
async def case_init_with_empty_transactional_id(t: Target) -> Observation:
    c = await t.client()
    r = await init_producer_id(c, "")
    return {"error": r.error_code}


@case("txn")
async def case_produce_with_other_producer_id(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnotherpid")
    added = await add_partitions(c, txn, pid, epoch, topic)  # type: ignore[arg-type]
    other = await init_producer_id(c)  # type: ignore[arg-type]
    r = await produce(c, topic, _txn_batch(other.producer_id, 0, 0), transactional_id=txn)  # type: ignore[arg-type]
    return {"added": added, **r.observe(), "_msg": r.message, **(await _both_views(c, topic))}


async def _txn_offset_commit(c: object, txn: str, group: str, pid: int, epoch: int, topic: str) -> int:
    from aiokafka_lite.wire.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse

    resp = await c.request(  # type: ignore[attr-defined]
        TxnOffsetCommitRequest(
            transactional_id=txn,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=5, committed_metadata=""
                        )
                    ],
                )
            ],
        ),
        3,
    )
    assert isinstance(resp, TxnOffsetCommitResponse)
    return resp.topics[0].partitions[0].error_code


async def _add_offsets(c: object, txn: str, pid: int, epoch: int, group: str) -> int:
    from aiokafka_lite.wire.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

    resp = await c.request(  # type: ignore[attr-defined]
        AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group), 3
    )
    assert isinstance(resp, AddOffsetsToTxnResponse)
    return resp.error_code


async def _committed(t: Target, group: str, topic: str) -> list[tuple[int, int]]:
    from aiokafka_lite.wire.messages import OffsetFetchRequest, OffsetFetchResponse

    c = await t.client()
    assert await find_coordinator(c, group, 0) == 0
    resp = await c.request(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])],
                )
            ],
            require_stable=False,
        ),
        8,
    )
    assert isinstance(resp, OffsetFetchResponse)
    return [(p.committed_offset, p.error_code) for tp in resp.groups[0].topics for p in tp.partitions]


@case("txn")
async def case_txn_offset_commit_before_add_offsets(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnoff")
    group = t.unique("txngroup")
    assert await find_coordinator(c, group, 0) == 0  # type: ignore[arg-type]
    return {"commit": await _txn_offset_commit(c, txn, group, pid, epoch, topic)}


@case("txn")
async def case_offsets_in_a_transaction(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "txnoffok")
    group = t.unique("txngroup")
    added = await _add_offsets(c, txn, pid, epoch, group)
    assert await find_coordinator(c, group, 0) == 0  # type: ignore[arg-type]
    committed = await _txn_offset_commit(c, txn, group, pid, epoch, topic)
    stale = await _txn_offset_commit(c, txn, group, pid, epoch - 1, topic)
    before = await _committed(t, group, topic)
    ended = await _end(c, txn, pid, epoch, commit=True)
    deadline = time.monotonic() + 10
    after = await _committed(t, group, topic)
    while after != [(5, 0)] and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        after = await _committed(t, group, topic)
    return {
        "add_offsets": added,
        "commit": committed,
        "stale": stale,
        "before_end": before,
        "end": ended,
        "after": after,
    }


@case("txn")
async def case_add_offsets_with_stale_epoch(t: Target) -> Observation:
    _topic, c, txn, pid, epoch = await _txn(t, "txnoffstale")
    again = await init_producer_id(c, txn)  # type: ignore[arg-type]
    return {"reinit": again.error_code, "stale": await _add_offsets(c, txn, pid, epoch, t.unique("g"))}


@case("produce")
async def case_two_transactional_batches_without_transactional_id(t: Target) -> Observation:
    one = patch(batch(1), attributes=0x10, producer_id=5, producer_epoch=0, base_sequence=0)
    return await _produce_then_fetch(t, "twotxn", one + one)


@case("produce")
async def case_transactional_batch_among_other_partitions(t: Target) -> Observation:
    """One transactional batch without a transactional id fails the whole request."""
    plain_topic = await t.create_topic("plainpart")
    txn_topic = await t.create_topic("txnpart")
    c = await t.client()
    txn_batch = patch(batch(1), attributes=0x10, producer_id=5, producer_epoch=0, base_sequence=0)
    resp = await c.request(
        ProduceRequest(
            acks=-1,
            timeout_ms=30000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=plain_topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(1))],
                ),
                ProduceRequest.TopicProduceData(
                    name=txn_topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=0, records=txn_batch)],
                ),
            ],
        ),
        PRODUCE_VERSION,
    )
    from aiokafka_lite.wire.messages import ProduceResponse

    assert isinstance(resp, ProduceResponse)
    return {
        "errors": [p.error_code for tr in resp.responses for p in tr.partition_responses],
        "plain_hw": (await fetch(c, plain_topic)).high_watermark,
    }
