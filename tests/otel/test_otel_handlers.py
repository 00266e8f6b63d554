"""OrderedWorkers, ShareWorkers and TransactSession run handlers inside the record's trace;
a trace begun by another W3C-compliant producer (confluent-kafka) continues too."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from otel_testlib import Spans, unique

from aiokafka_lite import Admin, Consumer, Producer
from aiokafka_lite.admin import ConfigResource
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume import Record
from aiokafka_lite.consume.share import ShareConsumer, ShareRecord
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.processing import ShareWorkers
from aiokafka_lite.processing.ordered_workers import OrderedWorkers
from aiokafka_lite.processing.transact import TransactSession
from aiokafka_lite.testing.apache import ApacheCluster


@pytest.fixture
def share_broker(kafka_cluster: EmbeddedCluster | ApacheCluster) -> EmbeddedCluster | ApacheCluster:
    """``kafka_cluster``: the embedded broker, or under --kafka=apache Apache Kafka (scripts/test.sh
    runs this module in its Apache 4.4 pass).

    Share groups need Kafka 4.1+ (KIP-932's released protocol, which this client speaks;
    4.0 had an early-access version of it), so a 4.0 broker cannot run them."""
    broker = kafka_cluster
    version = getattr(broker, "version", None)
    if version is not None and tuple(int(x) for x in version.split(".")[:2]) < (4, 1):
        pytest.skip(f"share groups need Apache Kafka 4.1 or later, this broker is {version}")
    return broker


def assert_chain(spans: Spans, handler_span_id: int, send: ReadableSpan) -> ReadableSpan:
    """handler span -> process span -> the record's send span, one trace; the process span."""
    handler = spans.by_id(handler_span_id)
    assert handler.parent is not None
    process = spans.by_id(handler.parent.span_id)
    assert process.kind is SpanKind.CONSUMER and process.name.startswith("process ")
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert handler.context.trace_id == process.context.trace_id == send.context.trace_id
    return process


async def produce_traced(spans: Spans, bootstrap: str, topic: str, n: int) -> dict[int, ReadableSpan]:
    """n records, each sent under its own request span; their send spans by offset."""
    async with Producer(bootstrap) as producer:
        for i in range(n):
            with spans.tracer.start_as_current_span(f"request-{i}"):
                await producer.send(topic, b"job-%d" % i, key=b"%d" % i)
    return {(s.attributes or {})["messaging.kafka.offset"]: s for s in spans.named("send ")}  # type: ignore[misc]


async def test_ordered_workers_run_the_handler_in_the_records_trace(
    kafka_cluster: EmbeddedCluster, spans: Spans
) -> None:
    topic, group = unique("workers"), unique("group")
    kafka_cluster.create_topic(topic, 1)
    sends = await produce_traced(spans, kafka_cluster.bootstrap, topic, 4)
    seen: dict[int, int] = {}
    all_seen = asyncio.Event()

    async def handle(record: Record) -> None:
        await asyncio.sleep(0)
        with spans.tracer.start_as_current_span("handle") as span:
            seen[record.offset] = span.get_span_context().span_id
        if len(seen) == 4:
            all_seen.set()

    async with Consumer(
        kafka_cluster.bootstrap,
        topics=topic,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as consumer:
        workers = OrderedWorkers(consumer, handle, concurrency=2, fetch_timeout_ms=50)
        runner = asyncio.create_task(workers.run())
        async with asyncio.timeout(60):
            await all_seen.wait()
        workers.stop()
        await runner
    for offset, span_id in seen.items():
        process = assert_chain(spans, span_id, sends[offset])
        attrs = process.attributes or {}
        assert attrs["messaging.kafka.offset"] == offset and attrs["messaging.consumer.group.name"] == group


async def test_share_workers_run_the_handler_in_the_records_trace(
    share_broker: EmbeddedCluster | ApacheCluster, spans: Spans
) -> None:
    kafka_cluster = share_broker
    topic, group = unique("share"), unique("share-group")
    kafka_cluster.create_topic(topic, 1)
    async with Admin(kafka_cluster.bootstrap) as admin:
        results = await admin.incremental_alter_configs(
            {ConfigResource.group(group): {"share.auto.offset.reset": "earliest"}}
        )
        assert all(r.error is None for r in results.values())
    sends = await produce_traced(spans, kafka_cluster.bootstrap, topic, 3)
    seen: dict[int, int] = {}
    all_seen = asyncio.Event()

    async def handle(record: ShareRecord) -> None:
        with spans.tracer.start_as_current_span("handle") as span:
            seen[record.offset] = span.get_span_context().span_id
        if len(seen) == 3:
            all_seen.set()

    async with ShareConsumer(
        kafka_cluster.bootstrap, group_id=group, topics=[topic], acknowledgement_mode="explicit"
    ) as consumer:
        workers = ShareWorkers(consumer, handle, concurrency=2)
        runner = asyncio.create_task(workers.run())
        async with asyncio.timeout(60):
            await all_seen.wait()
        workers.stop()
        await runner
    for offset, span_id in seen.items():
        process = assert_chain(spans, span_id, sends[offset])
        attrs = process.attributes or {}
        assert attrs["messaging.consumer.group.name"] == group
        assert attrs["messaging.kafka.message.delivery_count"] == 1


async def test_transact_session_handler_continues_the_trace_into_its_output(
    kafka_cluster: EmbeddedCluster, spans: Spans
) -> None:
    source, sink, group = unique("txn-in"), unique("txn-out"), unique("txn-group")
    kafka_cluster.create_topic(source, 1)
    kafka_cluster.create_topic(sink, 1)
    (send,) = (await produce_traced(spans, kafka_cluster.bootstrap, source, 1)).values()
    handled: list[int] = []

    async def handle(batch: dict[TopicPartition, list[Record]], producer: Producer) -> None:
        with spans.tracer.start_as_current_span("transform") as span:
            handled.append(span.get_span_context().span_id)
            for records in batch.values():
                for r in records:
                    await producer.send(sink, r.value.upper())

    async with TransactSession(
        kafka_cluster.bootstrap,
        group_id=group,
        transactional_id=unique("txn"),
        topics=[source],
        consumer_options={"auto_offset_reset": "earliest"},
    ) as session:
        async with asyncio.timeout(60):
            while await session.process(handle, timeout_ms=200) is None:
                pass
    (handler_id,) = handled
    process = assert_chain(spans, handler_id, send)
    assert (process.attributes or {})["messaging.batch.message_count"] == 1
    output_sends = spans.named(f"send {sink}")
    assert len(output_sends) == 1
    out = output_sends[0]
    assert out.parent is not None and out.parent.span_id == handler_id
    async with Consumer(
        kafka_cluster.bootstrap, topics=sink, auto_offset_reset="earliest", isolation_level="read_committed"
    ) as reader:
        async with asyncio.timeout(60):
            records: list[Record] = []
            while not records:
                for recs in (await reader.getmany(timeout_ms=200)).values():
                    records += recs
    (header,) = [v for k, v in records[0].headers if k == "traceparent"]
    assert header is not None
    assert int(header.decode().split("-")[1], 16) == send.context.trace_id  # one trace, end to end


async def test_a_foreign_w3c_producers_trace_continues(kafka_bootstrap: str, spans: Spans) -> None:
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = unique("foreign"), unique("group")
    trace_id, parent_id = 0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7

    def produce() -> None:
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        for f in admin.create_topics([NewTopic(topic, 1, -1)]).values():
            f.result(30)
        p = ConfluentProducer({"bootstrap.servers": kafka_bootstrap})
        header = f"00-{trace_id:032x}-{parent_id:016x}-01"
        p.produce(topic, value=b"from-confluent", headers=[("traceparent", header.encode())])
        assert p.flush(30) == 0

    await asyncio.to_thread(produce)
    async with Consumer(
        kafka_bootstrap, topics=topic, group_id=group, auto_offset_reset="earliest"
    ) as consumer:
        async with asyncio.timeout(60):
            record = await consumer.getone()
            with spans.tracer.start_as_current_span("handle") as handle:
                pass
    assert record.value == b"from-confluent"
    (process,) = spans.named("process ")
    assert process.context.trace_id == trace_id
    assert process.parent is not None and process.parent.span_id == parent_id and process.parent.is_remote
    handle_span = spans.by_id(handle.get_span_context().span_id)
    assert handle_span.parent is not None and handle_span.parent.span_id == process.context.span_id


async def test_share_consumer_iteration_continues_the_trace(
    share_broker: EmbeddedCluster | ApacheCluster, spans: Spans
) -> None:
    kafka_cluster = share_broker
    topic, group = unique("share-iter"), unique("share-group")
    kafka_cluster.create_topic(topic, 1)
    async with Admin(kafka_cluster.bootstrap) as admin:
        results = await admin.incremental_alter_configs(
            {ConfigResource.group(group): {"share.auto.offset.reset": "earliest"}}
        )
        assert all(r.error is None for r in results.values())
    sends = await produce_traced(spans, kafka_cluster.bootstrap, topic, 2)
    seen: dict[int, int] = {}
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as consumer:
        async with asyncio.timeout(60):
            async for record in consumer:
                with spans.tracer.start_as_current_span("handle") as span:
                    seen[record.offset] = span.get_span_context().span_id
                if len(seen) == 2:
                    break
    for offset, span_id in seen.items():
        process = assert_chain(spans, span_id, sends[offset])
        assert (process.attributes or {})["messaging.consumer.group.name"] == group
    assert spans.named(f"poll {topic}")  # and the polls that fetched them
