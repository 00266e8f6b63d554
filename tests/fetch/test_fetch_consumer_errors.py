"""Consumer error paths: out of range, broker restarts and leader moves, KIP-320 truncation,
oversized records, corrupt batches. Leader moves on request, truncation and corruption
need the embedded broker's control API; the rest also runs against Apache Kafka, where a
leader moves because its broker stops."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest
from fetch_testlib import fill, produce_raw, sent_requests, take

from aiokafka_lite.admin import Admin
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.broker.log import PartitionLog
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.wire.messages import FetchRequest, OffsetForLeaderEpochRequest

Factory = Callable[..., Awaitable[EmbeddedCluster]]
T0 = TopicPartition("t", 0)
FAST = {"fetch_max_wait_ms": 50, "retry_backoff_ms": 20}


def plog(cluster: EmbeddedCluster, tp: TopicPartition = T0) -> PartitionLog:
    return cluster.topic(tp.topic).partitions[tp.partition].log


async def test_out_of_range_earliest_and_latest(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    await fill(kafka_cluster.bootstrap, {T0: 10}, batch=5)
    async with Admin(kafka_cluster.bootstrap) as admin:
        (await admin.delete_records({T0: 5})).raise_errors()
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 2)  # below the log start now
        assert [r.offset for r in await take(consumer, 5)] == [5, 6, 7, 8, 9]
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="latest", **FAST) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 1000)  # beyond the end
        async with asyncio.timeout(10):
            while consumer.subscription_state.position(T0) != 10:
                await consumer.getmany(timeout_ms=50)
        async with Client(kafka_cluster.bootstrap) as client:
            await produce_raw(client, T0, [(None, b"new")])
        rec = (await take(consumer, 1))[0]
        assert (rec.offset, rec.value) == (10, b"new")


async def test_out_of_range_none_raises_until_seek(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    await fill(kafka_cluster.bootstrap, {T0: 10})
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="none", **FAST) as consumer:
        consumer.assign([T0])
        # No position and no group: nothing to start from.
        with pytest.raises(E.OffsetOutOfRangeError, match="t-0"):
            async with asyncio.timeout(10):
                while True:
                    await consumer.getmany(timeout_ms=100)
        consumer.seek(T0, 1000)
        for _ in range(2):  # raised on every poll until the user seeks
            with pytest.raises(E.OffsetOutOfRangeError):
                async with asyncio.timeout(10):
                    while True:
                        await consumer.getmany(timeout_ms=100)
        consumer.seek(T0, 8)
        assert [r.offset for r in await take(consumer, 2)] == [8, 9]


@pytest.mark.kafka_embedded  # injected errors
async def test_not_leader_errors_resume_from_same_position(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    await fill(kafka_cluster.bootstrap, {T0: 10}, batch=3)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([T0])
        first = await take(consumer, 10)
        with kafka_cluster.record_requests(FetchRequest) as rec:
            kafka_cluster.inject_error(FetchRequest, E.NotLeaderOrFollowerError.code, count=3)
            async with Client(kafka_cluster.bootstrap) as client:
                for i in range(10, 30):
                    await produce_raw(client, T0, [(None, b"t-0-%d" % i)])
            rest = await take(consumer, 20)
            assert len(rec.requests) >= 4  # three failed fetches, then the ones that worked
        assert [r.offset for r in first + rest] == list(range(30))
        assert [r.value for r in rest] == [b"t-0-%d" % i for i in range(10, 30)]


async def test_consumption_continues_across_a_broker_restart(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    await fill(kafka_cluster.bootstrap, {T0: 10}, batch=3)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([T0])
        first = await take(consumer, 10)
        await kafka_cluster.restart_broker(1)
        async with Client(kafka_cluster.bootstrap) as client:
            for i in range(10, 20):
                await produce_raw(client, T0, [(None, b"t-0-%d" % i)])
        rest = await take(consumer, 10, limit_s=60)
    assert [r.offset for r in first + rest] == list(range(20))
    assert [r.value for r in rest] == [b"t-0-%d" % i for i in range(10, 20)]


async def test_stopped_leader_the_consumer_validates_its_position_with_the_new_one(
    kafka_cluster_factory: Factory,
) -> None:
    cluster = await kafka_cluster_factory(brokers=3)
    cluster.create_topic("t", 1, replication_factor=3)
    await fill(cluster.bootstrap, {T0: 20}, batch=4)
    async with Admin(cluster.bootstrap) as admin:
        (old,) = (await admin.describe_topics(["t"])).raise_errors()["t"].partitions
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([T0])
        first = await take(consumer, 20)
        assert [r.offset for r in first] == list(range(20))
        with sent_requests(consumer.client, OffsetForLeaderEpochRequest) as validations:
            await cluster.stop_broker(old.leader)  # its partitions move to the other replicas
            async with Client(cluster.bootstrap) as client:
                await produce_raw(client, T0, [(None, b"after-move")])
            got = await take(consumer, 1, limit_s=60)
        assert (got[0].offset, got[0].value) == (20, b"after-move")
        before, after = first[-1].leader_epoch, got[0].leader_epoch
        assert before is not None and after is not None and after > before
        assert validations, "position was not validated with OffsetForLeaderEpoch after the leader change"
        assert all(v.node_id != old.leader for v in validations)


@pytest.mark.kafka_embedded  # moves a leader on request and watches the broker's side
async def test_leader_move_validates_position(kafka_cluster_factory: Factory) -> None:
    cluster = await kafka_cluster_factory(brokers=3)
    cluster.create_topic("t", 1)
    await fill(cluster.bootstrap, {T0: 20}, batch=4)
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([T0])
        assert [r.offset for r in await take(consumer, 20)] == list(range(20))
        with cluster.record_requests(OffsetForLeaderEpochRequest) as rec:
            cluster.move_leader("t", 0)
            async with Client(cluster.bootstrap) as client:
                await client.refresh_metadata(["t"])
                await produce_raw(client, T0, [(None, b"after-move")])
            got = await take(consumer, 1)
            assert (got[0].offset, got[0].value) == (20, b"after-move")
            assert got[0].leader_epoch == 1
            assert rec.requests, (
                "position was not validated with OffsetForLeaderEpoch after the leader change"
            )


def _truncate(log: PartitionLog, offset: int) -> None:
    """Simulate an unclean leader election: the new leader's log ends at ``offset``."""
    keep = [b for b in log._batches[log._first :] if b.last < offset]
    assert keep[-1].last == offset - 1, "truncate at a batch boundary"
    log._batches = keep
    log._bases = [b.base for b in keep]
    log._first = 0
    log.log_end_offset = offset


@pytest.mark.kafka_embedded  # truncates the broker's log
@pytest.mark.parametrize("reset", ["earliest", "none"])
async def test_log_truncation_is_detected(
    kafka_cluster: EmbeddedCluster, reset: str, caplog: pytest.LogCaptureFixture
) -> None:
    kafka_cluster.create_topic("t", 1)
    await fill(kafka_cluster.bootstrap, {T0: 10}, batch=5)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset=reset, **FAST) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        assert [r.offset for r in await take(consumer, 10)] == list(range(10))
        _truncate(plog(kafka_cluster), 5)
        kafka_cluster.move_leader("t", 0)  # new epoch starting at offset 5
        async with Client(kafka_cluster.bootstrap) as client:
            await client.refresh_metadata(["t"])
            await produce_raw(client, T0, [(None, b"r%d" % i) for i in range(3)])  # offsets 5..7
        if reset == "none":
            with pytest.raises(E.LogTruncationError) as info:
                async with asyncio.timeout(10):
                    while True:
                        await consumer.getmany(timeout_ms=100)
            assert info.value.divergent_offsets == {T0: 5}
            assert "t-0" in str(info.value) and "offset 5" in str(info.value)
            consumer.seek(T0, 5)
        else:
            with caplog.at_level(logging.WARNING, logger="aiokafka_lite.consume.fetch.fetcher"):
                got = await take(consumer, 3)
            assert any("truncation detected" in m for m in caplog.messages)
            assert [(r.offset, r.value) for r in got] == [(5, b"r0"), (6, b"r1"), (7, b"r2")]
            return
        got = await take(consumer, 3)
        assert [(r.offset, r.value) for r in got] == [(5, b"r0"), (6, b"r1"), (7, b"r2")]


async def test_record_larger_than_partition_limit_still_progresses(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    async with Client(kafka_cluster.bootstrap) as client:
        await produce_raw(client, T0, [(None, b"small")])
        await produce_raw(client, T0, [(None, b"x" * 20000)])
        await produce_raw(client, T0, [(None, b"y" * 30000), (None, b"z")])
    async with Consumer(
        kafka_cluster.bootstrap,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=1024,
        fetch_max_bytes=2048,
    ) as consumer:
        consumer.assign([T0])
        got = await take(consumer, 4)
        assert [len(r.value) for r in got] == [5, 20000, 30000, 1]


@pytest.mark.kafka_embedded  # corrupts a stored batch
async def test_corrupt_batch_raises_and_seek_recovers(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    await fill(kafka_cluster.bootstrap, {T0: 15}, batch=5)
    log = plog(kafka_cluster)
    stored = log._batches[1]  # offsets 5..9
    bad = bytearray(stored.buf)
    bad[-3] ^= 0x55
    stored.buf = bytes(bad)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([T0])
        got = await take(consumer, 5)
        assert [r.offset for r in got] == [0, 1, 2, 3, 4]
        for _ in range(2):  # stays raised until the user seeks
            with pytest.raises(E.CorruptRecordError, match="t-0") as info:
                await take(consumer, 1)
            assert "offset 5" in str(info.value)
        assert await consumer.position(T0) == 5
        consumer.seek(T0, 10)
        assert [r.offset for r in await take(consumer, 5)] == [10, 11, 12, 13, 14]
    # check_crcs=False hands the (undetected) corrupt records out.
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", check_crcs=False) as consumer:
        consumer.assign([T0])
        assert len(await take(consumer, 15)) == 15


async def test_deserializer_failure_positions_at_record(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    await fill(kafka_cluster.bootstrap, {T0: 6}, batch=6)

    def picky(v: bytes) -> str:
        if v.endswith(b"-3"):
            raise ValueError("bad record")
        return v.decode()

    async with Consumer(
        kafka_cluster.bootstrap, auto_offset_reset="earliest", value_deserializer=picky, **FAST
    ) as consumer:
        consumer.assign([T0])
        assert [r.value for r in await take(consumer, 3)] == ["t-0-0", "t-0-1", "t-0-2"]
        with pytest.raises(E.RecordDeserializationError) as info:
            await take(consumer, 1)
        assert (info.value.partition, info.value.offset) == (0, 3)
        assert await consumer.position(T0) == 3
        consumer.seek(T0, 4)
        assert [r.value for r in await take(consumer, 2)] == ["t-0-4", "t-0-5"]


async def test_deserializer_failure_message_says_how_to_skip_and_the_iterator_goes_on(
    kafka_cluster: EmbeddedCluster,
) -> None:
    """The error names the partition and offset and the exact seek that skips the record;
    until then every step raises it again (``async for`` and ``getmany``); after the seek
    the same iterator hands out everything but that one record."""
    tp = TopicPartition("t", 1)
    kafka_cluster.create_topic("t", 2)
    await fill(kafka_cluster.bootstrap, {tp: 8}, batch=4)

    def picky(v: bytes) -> str:
        if v == b"t-1-5":
            raise ValueError("not a t-1 value")
        return v.decode()

    async with Consumer(
        kafka_cluster.bootstrap, auto_offset_reset="earliest", value_deserializer=picky, **FAST
    ) as consumer:
        consumer.assign([tp])
        it = aiter(consumer)
        seen = [(await anext(it)).offset for _ in range(5)]
        for _ in range(2):  # the position stays at the record: raised again
            with pytest.raises(E.RecordDeserializationError) as info:
                await anext(it)
            err = info.value
            assert (err.topic, err.partition, err.offset) == ("t", 1, 5)
            assert "consumer.seek(TopicPartition('t', 1), 6)" in str(err)
            assert "offset 5" in str(err) and "not a t-1 value" in str(err)
        with pytest.raises(E.RecordDeserializationError):
            await consumer.getmany(timeout_ms=1000)
        assert await consumer.position(tp) == 5
        consumer.seek(tp, err.offset + 1)
        async with asyncio.timeout(10):
            async for record in it:
                seen.append(record.offset)
                if record.offset == 7:
                    break
    assert seen == [0, 1, 2, 3, 4, 6, 7]
