"""Producer against the embedded cluster: API behaviour, batching, errors, lifecycle."""

from __future__ import annotations

import asyncio
import json

import pytest
from producer_testlib import read_partition, read_topic

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.produce import Producer, RecordMetadata, key_partition
from aiokafka_lite.wire.messages import MetadataRequest, MetadataResponse, ProduceRequest


async def test_send_enqueue_flush_round_trip(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("events", 3)
    async with Producer(kafka_cluster.bootstrap, acks="all", linger_ms=5, compression="lz4") as producer:
        md = await producer.send("events", b"value", key=b"k", headers=[("h", b"v")], timestamp_ms=1234)
        assert md == RecordMetadata("events", key_partition(b"k", 3), 0, 1234)
        fut = await producer.enqueue("events", b"value2", key=b"k")
        await producer.flush()
        assert fut.done() and fut.result().offset == 1 and fut.result().partition == md.partition
    records = (await read_topic(kafka_cluster.bootstrap, "events", 3))[md.partition]
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k", b"value"), (1, b"k", b"value2")]
    assert records[0].headers == [("h", b"v")] and records[0].timestamp == 1234


async def test_keyed_records_follow_murmur2_keyless_spread(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 6)
    async with Producer(kafka_cluster.bootstrap, batch_size=512, linger_ms=0) as producer:
        keys = [f"user-{i}".encode() for i in range(60)]
        mds = [await producer.send("t", b"v", key=k) for k in keys]
        assert [m.partition for m in mds] == [key_partition(k, 6) for k in keys]
        result = await producer.send_batch("t", [b"x" * 100] * 600)
        assert len({m.partition for m in result}) > 1  # sticky switches after batch_size bytes


async def test_send_batch_preserves_order_and_offsets(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("p", 1)
    async with Producer(kafka_cluster.bootstrap, batch_size=1024) as producer:
        values = [b"%05d" % i for i in range(2000)]
        result = await producer.send_batch(
            "p", values, keys=[b"k"] * 2000, headers=[[("i", v)] for v in values]
        )
        assert [m.offset for m in result] == list(range(2000))
        pending = await producer.enqueue_batch("p", [b"a", b"b"], partition=0)
        await pending
        assert [m.offset for m in pending] == [2000, 2001]
    async with Client(kafka_cluster.bootstrap) as client:
        records = await read_partition(client, "p", 0)
    assert [r.value for r in records[:2000]] == values
    assert records[1999].headers == [("i", b"01999")]


async def test_keyed_batch_lands_where_send_would_in_input_order_per_partition(
    kafka_cluster: EmbeddedCluster,
) -> None:
    # Keyed bulk appends group the records by partition; each partition still gets its
    # records in input order, and the result answers in input order. Small batches and
    # little buffer memory make appends roll over into new batches and wait for memory.
    kafka_cluster.create_topic("kb", 6)
    keys = [f"user-{i % 97}".encode() for i in range(3000)]
    values = [b"%05d" % i for i in range(3000)]
    async with Producer(
        kafka_cluster.bootstrap, batch_size=1024, buffer_memory=16 * 1024, linger_ms=1
    ) as producer:
        result = await producer.send_batch("kb", values, keys=keys)
        assert len(result) == 3000
        assert [m.partition for m in result] == [key_partition(k, 6) for k in keys]
        per_partition: dict[int, list[int]] = {}
        for m in result:
            per_partition.setdefault(m.partition, []).append(m.offset)
        assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())
        assert result[-1] == list(result)[-1] and result[5:8] == list(result)[5:8]
        counts = result.counts_by_partition()
        assert {tp.partition: n for tp, n in counts.items()} == {p: len(o) for p, o in per_partition.items()}
    stored = await read_topic(kafka_cluster.bootstrap, "kb", 6)
    for partition, records in stored.items():
        expected = [(k, v) for k, v in zip(keys, values, strict=True) if key_partition(k, 6) == partition]
        assert [(r.key, r.value) for r in records] == expected


async def test_keyed_batch_with_key_serializer_and_its_errors(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("ks", 3)
    async with Producer(kafka_cluster.bootstrap, key_serializer=lambda k: k.encode()) as producer:
        result = await producer.send_batch("ks", [b"a", b"b", b"c"], keys=["x", "y", "x"])
        assert [m.partition for m in result] == [key_partition(k, 3) for k in (b"x", b"y", b"x")]
    # A serializer runs once per record, also for the records that roll over into a new
    # batch (small batches: most do).
    async with Producer(
        kafka_cluster.bootstrap, value_serializer=lambda v: v.encode(), batch_size=256
    ) as producer:
        texts = [f"text-{i:04d}" for i in range(200)]
        keyless = await producer.send_batch("ks", texts, partition=0)
        keyed = await producer.send_batch("ks", texts, keys=[b"k%d" % i for i in range(200)])
        assert len(keyless) == len(keyed) == 200
    stored = await read_topic(kafka_cluster.bootstrap, "ks", 3)
    assert [r.value for r in stored[0] if r.key is None] == [t.encode() for t in texts]
    assert sorted(r.value for recs in stored.values() for r in recs if r.key not in (None, b"x", b"y")) == [
        t.encode() for t in texts
    ]
    async with Producer(kafka_cluster.bootstrap) as producer:
        # A value of the wrong type is named, as on the record-by-record path.
        with pytest.raises(TypeError, match="value"):
            await producer.enqueue_batch("ks", [b"ok", "text"], keys=[b"k1", b"k2"])
        # Keys missing or not bytes take the record-by-record path: same partitions.
        mixed = await producer.send_batch("ks", [b"1", b"2"], keys=[b"k", None])
        assert mixed[0].partition == key_partition(b"k", 3)
        short = await producer.send_batch("ks", [b"1", b"2"], keys=[b"k"])
        assert short[0].partition == key_partition(b"k", 3) and len(short) == 2


async def test_acks_zero_and_one(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("a", 1)
    async with Producer(kafka_cluster.bootstrap, acks=0) as producer:
        md = await producer.send("a", b"fire")
        assert md.offset == -1
    async with Producer(kafka_cluster.bootstrap, acks=1) as producer:
        md = await producer.send("a", b"leader")
        assert md.offset == 1
        assert producer.metrics()["producer_id"] == -1  # idempotence quietly off with acks=1


async def test_serializers_and_type_errors(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("s", 1)
    async with Producer(
        kafka_cluster.bootstrap,
        key_serializer=str.encode,
        value_serializer=lambda v: json.dumps(v).encode(),
    ) as producer:
        await producer.send("s", {"a": 1}, key="k")
        await producer.send("s", None, key="tombstone")  # None is not serialized
    async with Producer(kafka_cluster.bootstrap) as producer:
        with pytest.raises(TypeError, match="value must be bytes"):
            await producer.send("s", "text")
        with pytest.raises(TypeError, match="key must be bytes"):
            await producer.enqueue("s", b"v", key=5)
        with pytest.raises(E.InvalidTimestampError):
            await producer.send("s", b"v", timestamp_ms=-5)
        await producer.send("s", memoryview(b"view"), key=bytearray(b"ba"))
    async with Client(kafka_cluster.bootstrap) as client:
        records = await read_partition(client, "s", 0)
    assert [(r.key, r.value) for r in records] == [
        (b"k", b'{"a": 1}'),
        (b"tombstone", None),
        (b"ba", b"view"),
    ]


async def test_partitioner_options(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("rr", 4)
    async with Producer(kafka_cluster.bootstrap, partitioner="round_robin", linger_ms=0) as producer:
        parts = [(await producer.send("rr", b"v", key=b"same")).partition for _ in range(8)]
        assert parts == [0, 1, 2, 3, 0, 1, 2, 3]
    calls = []

    def last(topic: str, key: bytes | None, count: int) -> int:
        calls.append((topic, key, count))
        return count - 1

    async with Producer(kafka_cluster.bootstrap, partitioner=last) as producer:
        assert (await producer.send("rr", b"v", key=b"x")).partition == 3
        assert (await producer.send("rr", b"v", partition=1)).partition == 1  # explicit wins
        assert calls == [("rr", b"x", 4)]
    async with Producer(kafka_cluster.bootstrap, partitioner=lambda t, k, n: n) as producer:
        with pytest.raises(E.UnknownTopicOrPartitionError, match="partitioner returned"):
            await producer.send("rr", b"v")
    async with Producer(kafka_cluster.bootstrap, max_block_ms=300) as producer:
        with pytest.raises(E.UnknownTopicOrPartitionError, match="partition 9"):
            await producer.send("rr", b"v", partition=9)


async def test_unknown_topic_waits_max_block_then_fails(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(auto_create_topics=False)
    async with Producer(cluster.bootstrap, max_block_ms=300) as producer:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(E.UnknownTopicOrPartitionError):
            await producer.send("missing", b"v")
        assert loop.time() - start >= 0.25
        # created meanwhile: a later send finds it
        cluster.create_topic("late", 1)
        assert (await producer.send("late", b"v")).offset == 0


async def test_record_too_large_fails_at_once_without_poisoning_batch(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("big", 1)
    async with Producer(kafka_cluster.bootstrap, max_request_size=10000, linger_ms=50) as producer:
        before = await producer.enqueue("big", b"a" * 100)
        with pytest.raises(E.MessageSizeTooLargeError, match="max_request_size"):
            await producer.enqueue("big", b"x" * 10000)
        with pytest.raises(E.RecordTooLargeError):
            await producer.send("big", b"x" * 20000)
        after = await producer.enqueue("big", b"b" * 100)
        await producer.flush()
        assert (before.result().offset, after.result().offset) == (0, 1)
    async with Producer(kafka_cluster.bootstrap, buffer_memory=5000, batch_size=1000) as producer:
        with pytest.raises(E.MessageSizeTooLargeError, match="buffer_memory"):
            await producer.send("big", b"x" * 6000)


@pytest.mark.kafka_embedded
async def test_broker_message_too_large_splits_batch(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("split", 1)
    async with Producer(kafka_cluster.bootstrap, linger_ms=1000, batch_size=4096) as producer:
        futs = [await producer.enqueue("split", b"%04d" % i * 25) for i in range(100)]
        kafka_cluster.inject_error(ProduceRequest, E.MessageSizeTooLargeError.code, count=1)
        await producer.flush()
        assert [f.result().offset for f in futs] == list(range(100))
        assert producer.metrics()["batches_split"] == 1
    async with Client(kafka_cluster.bootstrap) as client:
        records = await read_partition(client, "split", 0)
    assert [r.value for r in records] == [b"%04d" % i * 25 for i in range(100)]


@pytest.mark.kafka_embedded
async def test_retriable_errors_are_retried(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("r", 2)
    async with Producer(kafka_cluster.bootstrap, retry_backoff_ms=10) as producer:
        kafka_cluster.inject_error(ProduceRequest, E.NotEnoughReplicasError.code, count=2)
        kafka_cluster.inject_error(ProduceRequest, E.NotLeaderOrFollowerError.code, count=1)
        md = await producer.send("r", b"v", partition=1)
        assert md.offset == 0
        assert producer.metrics()["batches_retried"] == 3


@pytest.mark.kafka_embedded
async def test_non_retriable_error_fails_records(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("n", 1)
    async with Producer(kafka_cluster.bootstrap) as producer:
        kafka_cluster.inject_error(ProduceRequest, E.TopicAuthorizationFailedError.code, count=1)
        with pytest.raises(E.TopicAuthorizationFailedError, match="n-0"):
            await producer.send("n", b"v")
        # the sequence gap was renumbered away (epoch bump): later sends succeed
        md = await producer.send("n", b"w")
        assert md.offset == 0
        assert producer.metrics()["epoch_bumps"] == 1


@pytest.mark.kafka_embedded
async def test_retries_zero_without_idempotence_fails_fast(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("z", 1)
    async with Producer(kafka_cluster.bootstrap, retries=0) as producer:
        kafka_cluster.inject_error(ProduceRequest, E.NotEnoughReplicasError.code, count=1)
        with pytest.raises(E.NotEnoughReplicasError):
            await producer.send("z", b"v")


@pytest.mark.kafka_embedded
async def test_delivery_timeout_expires_records(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("d", 1)
    async with Producer(
        kafka_cluster.bootstrap,
        delivery_timeout_ms=400,
        request_timeout_ms=300,
        linger_ms=0,
        retry_backoff_ms=20,
    ) as producer:
        await producer.send("d", b"warm-up")
        kafka_cluster.inject_error(ProduceRequest, E.NotEnoughReplicasError.code, count=None)
        # Retried until the deadline: the record fails with the timeout or, if the deadline
        # passed while a retry was in flight, with the broker's answer itself (as in Java).
        with pytest.raises((E.KafkaTimeoutError, E.NotEnoughReplicasError)):
            await producer.send("d", b"v")
        kafka_cluster.clear_faults()
        assert (await producer.send("d", b"after")).offset >= 1


@pytest.mark.kafka_embedded
async def test_expired_record_says_why_it_was_retried(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("why", 1)
    async with Producer(
        kafka_cluster.bootstrap,
        delivery_timeout_ms=400,
        request_timeout_ms=300,
        linger_ms=0,
        retry_backoff_ms=2000,  # the retry would come after the deadline: it expires queued
        retry_backoff_max_ms=2000,
    ) as producer:
        await producer.send("why", b"warm-up")
        kafka_cluster.inject_error(ProduceRequest, E.NotEnoughReplicasError.code, count=None)
        with pytest.raises(E.KafkaTimeoutError, match="delivery_timeout_ms") as info:
            await producer.send("why", b"v")
        kafka_cluster.clear_faults()
    err = info.value
    assert isinstance(err.__cause__, E.NotEnoughReplicasError)
    assert "why-0 (queued)" in str(err)
    assert "last error: [Error 19] NOT_ENOUGH_REPLICAS: why-0" in str(err)


async def test_too_few_in_sync_replicas_time_out_naming_not_enough_replicas(
    kafka_cluster_factory,
) -> None:  # type: ignore[no-untyped-def]
    # Kafka caps min.insync.replicas at the replication factor, so it takes replicas that
    # fell out of sync: replication factor 3, all 3 required, one broker stopped (three
    # brokers keep a controller quorum). acks=all writes are then refused with
    # NOT_ENOUGH_REPLICAS, a retriable error, until delivery_timeout_ms.
    cluster = await kafka_cluster_factory(brokers=3)
    cluster.create_topic("isr", 1, replication_factor=3, configs={"min.insync.replicas": "3"})
    tp = TopicPartition("isr", 0)
    async with Producer(cluster.bootstrap, acks="all") as settle:  # default timeouts: the cluster is new
        assert (await settle.send("isr", b"all replicas in sync")).offset == 0
    async with Producer(
        cluster.bootstrap,
        acks="all",
        delivery_timeout_ms=3000,
        request_timeout_ms=2000,
        linger_ms=0,
        retry_backoff_ms=6000,  # the retry would come after the deadline: it expires queued
        retry_backoff_max_ms=6000,
    ) as producer:
        await producer.partitions_for("isr")
        replicas = producer.client.cluster.partition(tp)
        assert replicas is not None and len(replicas.isr) == 3
        follower = next(n for n in replicas.replicas if n != replicas.leader)
        await cluster.stop_broker(follower)
        # Ask the leader itself: another broker may apply the ISR change first, and a
        # leader still waiting on the stopped follower holds acks=all writes in purgatory.
        async with asyncio.timeout(60):
            while True:
                if follower not in await _isr_seen_by(producer, replicas.leader, tp):
                    break
                await asyncio.sleep(0.1)
        with pytest.raises(E.KafkaTimeoutError, match="delivery_timeout_ms") as info:
            await producer.send("isr", b"v")
    err = info.value
    assert isinstance(err.__cause__, E.NotEnoughReplicasError)
    assert "last error: [Error 19] NOT_ENOUGH_REPLICAS: isr-0" in str(err)


async def _isr_seen_by(producer: Producer, node_id: int, tp: TopicPartition) -> list[int]:
    conn = await producer.client.connection(node_id)
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=tp.topic)])
    answer = await conn.send(request, conn.version_for(MetadataRequest.API_KEY))
    assert isinstance(answer, MetadataResponse)
    topic = next(t for t in answer.topics if t.name == tp.topic)
    return next(p.isr_nodes for p in topic.partitions if p.partition_index == tp.partition)


@pytest.mark.kafka_embedded
async def test_linger_collects_records_into_one_request(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("l", 3)
    with kafka_cluster.record_requests(ProduceRequest) as rec:
        async with Producer(kafka_cluster.bootstrap, linger_ms=200) as producer:
            await producer.send("l", b"warm", partition=0)
            rec.clear()
            await asyncio.gather(*(producer.send("l", b"v%d" % i, partition=i % 3) for i in range(30)))
        requests = rec.of(ProduceRequest.API_KEY)
    assert len(requests) == 1  # one broker: one request carrying every partition
    req = requests[0].request
    assert isinstance(req, ProduceRequest)
    assert sorted(pd.index for td in req.topic_data for pd in td.partition_data) == [0, 1, 2]


@pytest.mark.kafka_embedded
async def test_max_in_flight_per_connection_honoured(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("f", 1)
    kafka_cluster.add_latency(ProduceRequest, 0.02)
    in_flight = 0
    peak = 0
    async with Producer(
        kafka_cluster.bootstrap, linger_ms=0, batch_size=100, max_in_flight_requests_per_connection=2
    ) as producer:
        sender = producer._sender
        original = sender._produce

        async def counting(*args: object) -> None:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                await original(*args)  # type: ignore[arg-type]
            finally:
                in_flight -= 1

        sender._produce = counting  # type: ignore[method-assign]
        # one batch per record (batch_size), one partition: one batch per request
        mds = await asyncio.gather(*(producer.send("f", b"v" * 60) for i in range(20)))
    assert peak == 2
    assert [m.offset for m in mds] == list(range(20))


async def test_close_flushes_abort_fails_and_send_after_close_raises(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("c", 1)
    producer = Producer(kafka_cluster.bootstrap, linger_ms=10000)
    await producer.start()
    fut = await producer.enqueue("c", b"flushed-by-close")
    await producer.close()
    assert fut.result().offset == 0
    with pytest.raises(E.ProducerClosedError):
        await producer.send("c", b"late")
    await producer.close()  # idempotent

    producer = Producer(kafka_cluster.bootstrap, linger_ms=10000)
    await producer.start()
    futs = [await producer.enqueue("c", b"dropped") for _ in range(3)]
    await producer.abort()
    for f in futs:
        with pytest.raises(E.ProducerClosedError):
            f.result()
    assert kafka_cluster.high_watermark("c", 0) == 1


@pytest.mark.kafka_embedded
async def test_close_timeout_fails_what_cannot_be_delivered(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("ct", 1)
    producer = Producer(kafka_cluster.bootstrap, linger_ms=0, retry_backoff_ms=10)
    await producer.start()
    await producer.send("ct", b"warm")
    kafka_cluster.inject_error(ProduceRequest, E.NotEnoughReplicasError.code, count=None)
    fut = await producer.enqueue("ct", b"stuck")
    await producer.close(timeout=0.3)
    with pytest.raises(E.ProducerClosedError):
        fut.result()
    assert (
        not producer._sender._requests
        and producer._sender._task is not None
        and producer._sender._task.done()
    )


async def test_shared_client_is_left_open(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("sh", 1)
    async with Client(kafka_cluster.bootstrap) as client:
        async with Producer(client=client) as producer:
            await producer.send("sh", b"v")
        assert not client.closed
        async with Producer(client=client) as producer:
            assert (await producer.send("sh", b"w")).offset == 1


@pytest.mark.kafka_embedded
async def test_produce_v13_topic_ids(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(topics={"v13": 2})
    with cluster.record_requests(ProduceRequest) as rec:
        async with Producer(cluster.bootstrap) as producer:
            md = await producer.send("v13", b"v", partition=1)
        versions = {r.api_version for r in rec.requests}
    assert md.offset == 0 and md.topic == "v13"
    assert max(versions) == ProduceRequest.MAX_VERSION
    async with Producer(cluster.bootstrap, client_id="old") as producer:
        producer.client.config.max_versions  # noqa: B018 - the Client caps versions via config
    async with Client(cluster.bootstrap, max_versions={ProduceRequest.API_KEY: 9}) as client:
        async with Producer(client=client) as producer:
            assert (await producer.send("v13", b"w", partition=1)).offset == 1


async def test_failed_start_leaves_nothing_running_and_can_be_retried(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("st", 1)
    producer = Producer("127.0.0.1:1", request_timeout_ms=1000)
    before = asyncio.all_tasks()
    with pytest.raises(E.NoBrokersAvailableError):
        await producer.start()
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == before
    await producer.close()
    async with Producer(kafka_cluster.bootstrap) as ok:
        # concurrent starts share one
        await asyncio.gather(ok.start(), ok.start())
        assert (await ok.send("st", b"v")).offset == 0
    async with Client(kafka_cluster.bootstrap) as client:
        pass
    with pytest.raises(E.ClosedError):
        await Producer(client=client).start()


async def test_close_during_start_leaves_no_unretrieved_error() -> None:
    """close() while a start() whose caller gave up is still trying to connect cuts the
    start short and retrieves its outcome: asyncio reports nothing as lost, no task is left."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    try:
        # a "broker" that accepts connections and never answers: start() stays connecting
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        before = asyncio.all_tasks()
        producer = Producer(f"127.0.0.1:{port}", request_timeout_ms=30_000)
        starting = asyncio.create_task(producer.start())
        await asyncio.sleep(0.05)  # start() is inside its connection attempts
        starting.cancel()  # its caller gives up (a timeout, a shutdown): the start goes on
        with pytest.raises(asyncio.CancelledError):
            await starting
        await producer.close()
        del starting, producer
        import gc

        gc.collect()
        await asyncio.sleep(0)
        assert asyncio.all_tasks() - before == {asyncio.current_task()} - before
        assert [c.get("message") for c in reported] == []
        silent.close()
    finally:
        loop.set_exception_handler(previous)


@pytest.mark.kafka_embedded
async def test_linger_zero_sends_at_once_but_bulk_appends_still_batch(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("lz", 1)
    with kafka_cluster.record_requests(ProduceRequest) as rec:
        async with Producer(kafka_cluster.bootstrap, linger_ms=0) as producer:
            await producer.send("lz", b"first")
            assert len(rec.requests) == 1  # went out without waiting for anything else
            result = await producer.send_batch("lz", [b"x"] * 1000)
            assert [m.offset for m in result] == list(range(1, 1001))
            keyed = await producer.send_batch("lz", [b"y"] * 500, keys=[b"k"] * 500)
            assert keyed[-1].offset == 1500
        batches = sum(len(td.partition_data) for r in rec.requests for td in r.request.topic_data)  # type: ignore[attr-defined]
    assert batches < 20


@pytest.mark.kafka_embedded
async def test_topic_names_used_when_metadata_has_no_topic_ids(kafka_cluster: EmbeddedCluster) -> None:
    from aiokafka_lite.wire.messages import MetadataRequest

    kafka_cluster.create_topic("noid", 1)
    with kafka_cluster.record_requests(ProduceRequest) as rec:
        # Metadata v9 carries no topic ids, yet the broker speaks Produce v13 (ids only).
        async with Client(kafka_cluster.bootstrap, max_versions={MetadataRequest.API_KEY: 9}) as client:
            async with Producer(client=client) as producer:
                assert (await producer.send("noid", b"a")).offset == 0
                assert (await producer.send("noid", b"b")).offset == 1
        versions = [r.api_version for r in rec.requests]
    assert versions and max(versions) <= 12
