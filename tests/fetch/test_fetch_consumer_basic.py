"""Consumer against a broker (embedded, or Apache Kafka with --kafka=apache): assignment,
iteration, getmany, seek, pause, lookups."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable

import pytest
from fetch_testlib import fill, produce_raw, sent_requests, take

from aiokafka_lite.admin import Admin
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.wire.records import Compression, TimestampType

Factory = Callable[..., Awaitable[EmbeddedCluster]]
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


async def test_manual_assignment_across_three_brokers(kafka_cluster_factory: Factory) -> None:
    cluster = await kafka_cluster_factory(brokers=3)
    cluster.create_topic("t", 6)
    async with Admin(cluster.bootstrap) as admin:
        desc = (await admin.describe_topics(["t"])).raise_errors()["t"]
    # The partitions really are spread over the brokers.
    assert {p.leader for p in desc.partitions} == {1, 2, 3}
    tps = [TopicPartition("t", p) for p in range(6)]
    await fill(cluster.bootstrap, {tp: 40 + tp.partition for tp in tps}, batch=9)
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        assert consumer.assignment() == set(tps)
        recs = await take(consumer, sum(40 + p for p in range(6)))
        by_tp: dict[int, list[int]] = {}
        for r in recs:
            assert r.topic == "t"
            by_tp.setdefault(r.partition, []).append(r.offset)
            assert r.value == b"t-%d-%d" % (r.partition, r.offset)
        assert {p: offs for p, offs in by_tp.items()} == {p: list(range(40 + p)) for p in range(6)}
        for tp in tps:
            assert await consumer.position(tp) == 40 + tp.partition
        assert len(consumer.metrics()["fetch_sessions"]) == 3  # one fetch loop (session) per broker


async def test_topics_without_group_reads_all_partitions_no_commits(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 3)
    await fill(kafka_cluster.bootstrap, {TopicPartition("t", p): 5 for p in range(3)})
    async with Consumer(kafka_cluster.bootstrap, topics="t", auto_offset_reset="earliest") as consumer:
        recs = await take(consumer, 15)
        assert sorted((r.partition, r.offset) for r in recs) == [(p, o) for p in range(3) for o in range(5)]
        assert consumer.assignment() == {TopicPartition("t", p) for p in range(3)}
        assert consumer.subscription() == {"t"}
        with pytest.raises(E.IllegalStateError):
            await consumer.commit()


async def test_record_fields_and_deserializers(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    async with Client(kafka_cluster.bootstrap) as client:
        await produce_raw(
            client, T0, [(b"k1", b"v1"), (None, None)], timestamp=1234, headers=[("h", b"x"), ("n", None)]
        )
    async with Consumer(
        kafka_cluster.bootstrap,
        auto_offset_reset="earliest",
        key_deserializer=lambda b: None if b is None else b.decode(),
        value_deserializer=lambda b: None if b is None else b.upper(),
    ) as consumer:
        consumer.assign([T0])
        a, b = await take(consumer, 2)
    assert a.key == "k1" and a.value == b"V1" and a.headers == (("h", b"x"), ("n", None))
    assert a.timestamp_ms == 1234 and b.timestamp_ms == 1235
    assert a.timestamp_type is TimestampType.CREATE_TIME
    assert a.leader_epoch == 0 and (a.topic, a.partition, a.offset) == ("t", 0, 0)
    assert b.key is None and b.value is None


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
async def test_log_append_time_topic_stamps_records_at_the_broker(
    kafka_cluster: EmbeddedCluster, compression: Compression
) -> None:
    kafka_cluster.create_topic("t", 1, configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    async with Client(kafka_cluster.bootstrap) as client:
        await produce_raw(
            client, T0, [(None, b"a"), (None, b"b"), (None, b"c")], timestamp=1234, compression=compression
        )
    after = int(time.time() * 1000)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([T0])
        recs = await take(consumer, 3)
    assert [r.value for r in recs] == [b"a", b"b", b"c"]
    assert {r.timestamp_type for r in recs} == {TimestampType.LOG_APPEND_TIME}
    # One append time for the whole batch, the broker's clock instead of the producer's 1234.
    assert len({r.timestamp_ms for r in recs}) == 1
    assert before - 1000 <= recs[0].timestamp_ms <= after + 1000


async def test_getmany_limits_timeout_and_partition_filter(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    await fill(kafka_cluster.bootstrap, {T0: 30, T1: 30})
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([T0, T1])
        got: dict[TopicPartition, list[int]] = {T0: [], T1: []}
        while sum(map(len, got.values())) < 60:
            batch = await consumer.getmany(timeout_ms=5000, max_records=7)
            assert 0 < sum(map(len, batch.values())) <= 7
            for tp, recs in batch.items():
                got[tp].extend(r.offset for r in recs)
        assert got == {T0: list(range(30)), T1: list(range(30))}
        assert await consumer.getmany(timeout_ms=50) == {}
        await fill(kafka_cluster.bootstrap, {T0: 3, T1: 3})
        only = {}
        async with asyncio.timeout(10):
            while not only:
                only = await consumer.getmany(T1, timeout_ms=1000)
        assert set(only) == {T1}
        assert [r.offset for r in only[T1]] == [30, 31, 32]
        with pytest.raises(ValueError):
            await consumer.getmany(max_records=0)


async def test_pause_resume_with_buffered_records(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    await fill(kafka_cluster.bootstrap, {T0: 200, T1: 200})
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([T0, T1])
        seen: dict[int, list[int]] = {0: [], 1: []}
        # Read a few records of partition 0 so it has a chunk in progress and buffered data.
        async with asyncio.timeout(10):
            async for rec in consumer:
                seen[rec.partition].append(rec.offset)
                if len(seen[0]) == 5:
                    break
        assert consumer.fetcher is not None
        assert consumer.fetcher.buffer.has_data(T0)
        consumer.pause(T0)
        assert consumer.paused() == {T0}
        for _ in range(20):
            batch = await consumer.getmany(timeout_ms=200)
            assert T0 not in batch
            for r in batch.get(T1, []):
                seen[1].append(r.offset)
            if len(seen[1]) == 200:
                break
        assert seen[1] == list(range(200))
        assert consumer.fetcher.buffer.has_data(T0)  # still buffered while paused
        consumer.resume(T0)
        async with asyncio.timeout(10):
            async for rec in consumer:
                assert rec.partition == 0
                seen[0].append(rec.offset)
                if len(seen[0]) == 200:
                    break
        assert seen[0] == list(range(200))  # nothing lost or repeated around the pause


async def test_seek_forms(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    await fill(kafka_cluster.bootstrap, {T0: 50})
    async with Consumer(kafka_cluster.bootstrap, fetch_max_wait_ms=50) as consumer:
        consumer.assign([T0])
        # default auto_offset_reset=latest
        assert await consumer.position(T0) == 50
        consumer.seek(T0, 10)
        assert await consumer.position(T0) == 10
        assert [r.offset for r in await take(consumer, 3)] == [10, 11, 12]
        # Seek while a chunk is in progress: the next record comes from the new position.
        consumer.seek(T0, 40)
        assert (await take(consumer, 1))[0].offset == 40
        await consumer.seek_to_beginning(T0)
        assert await consumer.position(T0) == 0
        assert (await take(consumer, 1))[0].offset == 0
        consumer.seek_to_end()  # lazy form, all partitions
        assert await consumer.position(T0) == 50
        await fill(kafka_cluster.bootstrap, {T0: 2})
        assert [r.offset for r in await take(consumer, 2)] == [50, 51]
        consumer.seek_to_beginning()
        assert (await take(consumer, 1))[0].offset == 0
        with pytest.raises(ValueError):
            consumer.seek(T0, -1)
        with pytest.raises(E.IllegalStateError):
            consumer.seek(T1, 0)  # not assigned


async def test_offset_lookups(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    async with Client(kafka_cluster.bootstrap) as client:
        await produce_raw(client, T0, [(None, b"a")] * 5, timestamp=1000)  # 1000..1004
        await produce_raw(client, T0, [(None, b"b")] * 5, timestamp=2000)  # 2000..2004
    async with Consumer(kafka_cluster.bootstrap, fetch_max_wait_ms=50) as consumer:
        consumer.assign([T0, T1])
        assert await consumer.beginning_offsets([T0, T1]) == {T0: 0, T1: 0}
        assert await consumer.end_offsets([T0, T1]) == {T0: 10, T1: 0}
        found = await consumer.offsets_for_times({T0: 1003, T1: 0})
        t0 = found[T0]
        assert t0 is not None and (t0.offset, t0.timestamp) == (3, 1003)
        assert found[T1] is None
        found = await consumer.offsets_for_times({T0: 1500})
        assert found[T0] is not None and found[T0].offset == 5
        assert (await consumer.offsets_for_times({T0: 99999}))[T0] is None
        with pytest.raises(ValueError):
            await consumer.offsets_for_times({T0: -5})
        # Use the answer to seek: the classic "replay from time" recipe.
        consumer.seek(T0, 5)
        assert (await take(consumer, 1))[0].value == b"b"


async def test_regex_subscription_sees_new_topics(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("ev-a", 1)
    kafka_cluster.create_topic("ev-skip", 1)
    kafka_cluster.create_topic("other", 1)
    await fill(kafka_cluster.bootstrap, {TopicPartition("ev-a", 0): 3, TopicPartition("ev-skip", 0): 3})
    async with Consumer(
        kafka_cluster.bootstrap,
        pattern=re.compile(r"ev-.*"),
        exclude=r"ev-skip",
        auto_offset_reset="earliest",
        metadata_max_age_ms=200,
        fetch_max_wait_ms=50,
    ) as consumer:
        recs = await take(consumer, 3)
        assert {r.topic for r in recs} == {"ev-a"}
        assert consumer.subscription() == {"ev-a"}
        kafka_cluster.create_topic("ev-b", 2)
        await fill(kafka_cluster.bootstrap, {TopicPartition("ev-b", 1): 4})
        recs = await take(consumer, 4)
        assert [(r.topic, r.partition, r.offset) for r in recs] == [("ev-b", 1, i) for i in range(4)]
        assert consumer.subscription() == {"ev-a", "ev-b"}
        assert TopicPartition("ev-skip", 0) not in consumer.assignment()


async def test_close_from_another_task_ends_iteration(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    consumer = Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    consumer.assign([T0])
    seen: list[int] = []
    three = asyncio.Event()

    async def run() -> str:
        async for rec in consumer:
            seen.append(rec.offset)
            if len(seen) == 3:
                three.set()
        return "ended"

    task = asyncio.create_task(run())
    await fill(kafka_cluster.bootstrap, {T0: 3})
    async with asyncio.timeout(10):
        await three.wait()
    await consumer.close()
    async with asyncio.timeout(5):
        assert await task == "ended"
    assert seen == [0, 1, 2]
    with pytest.raises(E.ClosedError):
        await consumer.getmany()
    await consumer.close()  # idempotent


async def test_not_started_and_bad_options() -> None:
    with pytest.raises(E.ConfigError, match="did you mean"):
        Consumer("127.0.0.1:1", fetch_max_byte=10)
    with pytest.raises(E.ConfigError):
        Consumer("127.0.0.1:1", auto_offset_reset="sometimes")
    with pytest.raises(E.ConfigError):
        Consumer()
    c = Consumer("127.0.0.1:1", request_timeout_ms=1000)
    with pytest.raises(E.IllegalStateError):
        await c.getmany()
    with pytest.raises(E.ConfigError, match="client="):
        Consumer(client=Client("127.0.0.1:1"), request_timeout_ms=5)


async def test_fetch_request_carries_options(kafka_cluster: EmbeddedCluster) -> None:
    from aiokafka_lite.net.api_versions import CLIENT_API_VERSIONS
    from aiokafka_lite.wire.messages import FetchRequest

    kafka_cluster.create_topic("t", 2)
    await fill(kafka_cluster.bootstrap, {T0: 3})
    async with Consumer(
        kafka_cluster.bootstrap,
        auto_offset_reset="earliest",
        fetch_min_bytes=7,
        fetch_max_wait_ms=60,
        fetch_max_bytes=5000,
        max_partition_fetch_bytes=1500,
        isolation_level="read_committed",
        client_rack="rack-a",
    ) as consumer:
        with sent_requests(consumer.client, FetchRequest) as sent:
            consumer.assign([T0, T1])
            await take(consumer, 3)
        broker_max = (await consumer.client.connection(1)).api_versions[FetchRequest.API_KEY][1]
    req = sent[0].request
    assert (req.min_bytes, req.max_wait_ms, req.isolation_level, req.rack_id) == (7, 60, 1, "rack-a")
    assert req.max_bytes <= 5000
    assert {p.partition_max_bytes for t in req.topics for p in t.partitions} == {1500}
    # The highest version both sides support.
    assert sent[0].version == min(CLIENT_API_VERSIONS[FetchRequest.API_KEY], broker_max)


async def test_topic_subscription_before_the_topic_exists(kafka_cluster: EmbeddedCluster) -> None:
    async with Consumer(
        kafka_cluster.bootstrap,
        topics=["later"],
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
        allow_auto_topic_creation=False,  # a client option, passed through
    ) as consumer:
        assert await consumer.getmany(timeout_ms=100) == {}
        kafka_cluster.create_topic("later", 2)
        await fill(kafka_cluster.bootstrap, {TopicPartition("later", 1): 3})
        recs = await take(consumer, 3)
        assert [(r.partition, r.offset) for r in recs] == [(1, 0), (1, 1), (1, 2)]


async def test_start_without_brokers_fails_cleanly() -> None:
    consumer = Consumer("127.0.0.1:1", request_timeout_ms=300, reconnect_backoff_ms=10)
    with pytest.raises((E.NoBrokersAvailableError, E.KafkaTimeoutError)):
        await consumer.start()
    assert consumer.client.closed
