"""Traces across producer -> broker -> consumer (embedded broker and, with --kafka=apache, Kafka)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from otel_testlib import Spans, unique

from aiokafka_lite import Consumer, Producer, otel
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume import Record
from aiokafka_lite.core import errors as E


def traceparent(record: Record) -> tuple[int, int]:
    """(trace id, span id) of the record's single traceparent header."""
    values = [v for k, v in record.headers if k == "traceparent"]
    assert len(values) == 1, record.headers
    _, trace_id, span_id, _ = values[0].decode().split("-")  # type: ignore[union-attr]
    return int(trace_id, 16), int(span_id, 16)


async def consume(bootstrap: str, topic: str, n: int, **options: Any) -> list[Record]:
    out: list[Record] = []
    async with Consumer(bootstrap, topics=topic, auto_offset_reset="earliest", **options) as consumer:
        async with asyncio.timeout(60):
            while len(out) < n:
                for recs in (await consumer.getmany(timeout_ms=200)).values():
                    out.extend(recs)
    return out


def check_send_span(span: ReadableSpan, topic: str, partition: int, offset: int) -> None:
    assert span.name == f"send {topic}" and span.kind is SpanKind.PRODUCER
    attrs = span.attributes or {}
    assert attrs["messaging.system"] == "kafka"
    assert attrs["messaging.operation.name"] == "send" and attrs["messaging.operation.type"] == "send"
    assert attrs["messaging.destination.name"] == topic
    assert attrs["messaging.destination.partition.id"] == str(partition)
    assert attrs["messaging.kafka.offset"] == offset
    assert attrs["messaging.client.id"] == "aiokafka-lite"


async def test_send_spans_follow_semconv_and_carry_their_context_in_headers(
    kafka_cluster: EmbeddedCluster, spans: Spans
) -> None:
    topic = unique("send")
    kafka_cluster.create_topic(topic, 2)
    async with Producer(kafka_cluster.bootstrap) as producer:
        with spans.tracer.start_as_current_span("request") as request:
            md = await producer.send(
                topic, b"v", key=b"user-1", partition=1, headers=[("traceparent", b"stale"), ("h", b"1")]
            )
            fut = await producer.enqueue(topic, None, key=b"\xff\xfe", partition=0)
            tomb = await fut
            batch = await producer.send_batch(topic, [b"a", b"b"], partition=0)
    sends = sorted(spans.named("send "), key=lambda s: s.start_time or 0)
    assert len(sends) == 4
    check_send_span(sends[0], topic, 1, md.offset)
    check_send_span(sends[1], topic, 0, tomb.offset)
    check_send_span(sends[2], topic, 0, batch[0].offset)
    check_send_span(sends[3], topic, 0, batch[1].offset)
    assert (sends[0].attributes or {})["messaging.kafka.message.key"] == "user-1"
    assert (sends[1].attributes or {})["messaging.kafka.message.tombstone"] is True
    assert "messaging.kafka.message.key" not in (sends[1].attributes or {})  # no text form
    assert "messaging.kafka.message.key" not in (sends[2].attributes or {})
    for span in sends:  # children of the application's span: one trace
        assert span.parent is not None and span.parent.span_id == request.get_span_context().span_id
        assert span.context.trace_id == request.get_span_context().trace_id
    records = await consume(kafka_cluster.bootstrap, topic, 4)
    by_offset = {(r.partition, r.offset): r for r in records}
    first = by_offset[(1, md.offset)]
    # the caller's stale traceparent was replaced, not duplicated; other headers kept, in order
    assert [k for k, _ in first.headers] == ["h", "traceparent"]
    assert traceparent(first) == (sends[0].context.trace_id, sends[0].context.span_id)
    assert traceparent(by_offset[(0, batch[1].offset)])[1] == sends[3].context.span_id


async def test_consumer_iteration_continues_the_producers_trace(
    kafka_cluster: EmbeddedCluster, spans: Spans
) -> None:
    topic, group = unique("iter"), unique("group")
    kafka_cluster.create_topic(topic, 1)
    async with Producer(kafka_cluster.bootstrap) as producer:
        for i in range(3):
            with spans.tracer.start_as_current_span(f"request-{i}"):
                await producer.send(topic, b"job-%d" % i, key=b"k%d" % i)
    sends = {(s.attributes or {})["messaging.kafka.offset"]: s for s in spans.named("send ")}
    handled: dict[int, tuple[int, int]] = {}
    async with Consumer(
        kafka_cluster.bootstrap, topics=topic, group_id=group, auto_offset_reset="earliest"
    ) as consumer:
        async with asyncio.timeout(60):
            async for record in consumer:
                with spans.tracer.start_as_current_span("handle") as handle:
                    ctx = handle.get_span_context()
                    handled[record.offset] = (ctx.trace_id, ctx.span_id)
                if len(handled) == 3:
                    break
    process = {(s.attributes or {})["messaging.kafka.offset"]: s for s in spans.named("process ")}
    assert sorted(process) == [0, 1, 2]  # the last one ended when the consumer closed
    for offset, span in process.items():
        send = sends[offset]
        assert span.kind is SpanKind.CONSUMER and span.name == f"process {topic}"
        assert span.context.trace_id == send.context.trace_id  # the trace crossed the broker
        assert span.parent is not None and span.parent.span_id == send.context.span_id
        assert [link.context.span_id for link in span.links] == [send.context.span_id]
        attrs = span.attributes or {}
        assert attrs["messaging.consumer.group.name"] == group
        assert attrs["messaging.destination.name"] == topic
        assert attrs["messaging.destination.partition.id"] == "0"
        assert attrs["messaging.kafka.message.key"] == f"k{offset}"
        assert attrs["messaging.operation.type"] == "process"
        # the loop body's span is a child of the record's process span
        handle_span = spans.by_id(handled[offset][1])
        assert handle_span.parent is not None and handle_span.parent.span_id == span.context.span_id
        assert handled[offset][0] == send.context.trace_id
    # each process span ended before the next record was handed out
    ordered = [process[o] for o in range(3)]
    for earlier, later in itertools.pairwise(ordered):
        assert (earlier.end_time or 0) <= (later.start_time or 0)


async def test_getmany_poll_span_links_every_record(kafka_cluster: EmbeddedCluster, spans: Spans) -> None:
    topic = unique("poll")
    kafka_cluster.create_topic(topic, 1)
    async with Producer(kafka_cluster.bootstrap) as producer:
        await producer.send_batch(topic, [b"a", b"b", b"c"])
    sent = {s.context.span_id for s in spans.named("send ")}
    assert len(sent) == 3
    records = await consume(kafka_cluster.bootstrap, topic, 3)
    assert len(records) == 3
    polls = spans.named("poll")
    assert polls and all(s.kind is SpanKind.CLIENT for s in polls)
    assert sum((s.attributes or {})["messaging.batch.message_count"] for s in polls) == 3  # type: ignore[misc]
    assert {link.context.span_id for s in polls for link in s.links} == sent
    attrs = polls[0].attributes or {}
    assert attrs["messaging.operation.name"] == "poll" and attrs["messaging.operation.type"] == "receive"
    assert attrs["messaging.destination.name"] == topic and polls[0].name == f"poll {topic}"
    assert not spans.named("process ")  # getmany hands out batches: no per-record spans


async def test_failed_sends_are_recorded_on_their_spans(kafka_cluster: EmbeddedCluster, spans: Spans) -> None:
    topic = unique("error")
    kafka_cluster.create_topic(topic, 1, configs={"max.message.bytes": "1024"})
    async with Producer(kafka_cluster.bootstrap, max_request_size=8192) as producer:
        with pytest.raises(E.KafkaError) as refused:  # the producer refuses it: never enqueued
            await producer.send(topic, b"x" * 16384)
        fut = await producer.enqueue(topic, b"y" * 4096)  # the broker refuses it: fails later
        with pytest.raises(E.KafkaError) as rejected:
            await fut
    first, second = sorted(spans.named("send "), key=lambda s: s.start_time or 0)
    for span, exc in ((first, refused.value), (second, rejected.value)):
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == type(exc).__qualname__
        assert [e.name for e in span.events] == ["exception"]
        assert "messaging.kafka.offset" not in (span.attributes or {})
    assert type(rejected.value).__qualname__ != "ProducerRecordTooLargeError"


async def test_uninstrument_stops_spans_and_headers(kafka_cluster: EmbeddedCluster, spans: Spans) -> None:
    topic = unique("off")
    kafka_cluster.create_topic(topic, 1)
    async with Producer(kafka_cluster.bootstrap) as producer:
        await producer.send(topic, b"traced")
        assert otel.is_instrumented()
        otel.uninstrument()
        assert not otel.is_instrumented()
        await producer.send(topic, b"plain", headers=[("h", b"1")])
        await (await producer.enqueue(topic, b"plain-too"))
    records = await consume(kafka_cluster.bootstrap, topic, 3)
    assert len(spans.named("send ")) == 1 and not spans.named("poll")
    assert [[k for k, _ in r.headers] for r in records] == [["traceparent"], ["h"], []]


async def test_tracer_provider_option_traces_that_client_only(kafka_cluster: EmbeddedCluster) -> None:
    exporter = InMemorySpanExporter()
    provider = SdkTracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    topic = unique("own")
    kafka_cluster.create_topic(topic, 1)
    assert not otel.is_instrumented()
    async with (
        Producer(kafka_cluster.bootstrap, tracer_provider=provider) as traced,
        Producer(kafka_cluster.bootstrap) as plain,
    ):
        await traced.send(topic, b"1")
        await plain.send(topic, b"2")
    records = await consume(kafka_cluster.bootstrap, topic, 2, tracer_provider=provider)
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names[-1] == f"send {topic}" and names.count(f"send {topic}") == 1
    assert all(n.startswith("poll") for n in names[:-1])
    assert [[k for k, _ in r.headers] for r in sorted(records, key=lambda r: r.offset)] == [
        ["traceparent"],
        [],
    ]
    provider.shutdown()


async def test_cancelling_an_enqueue_handle_does_not_end_its_span_early(
    kafka_cluster: EmbeddedCluster, spans: Spans
) -> None:
    topic = unique("cancel")
    kafka_cluster.create_topic(topic, 1)
    async with Producer(kafka_cluster.bootstrap, linger_ms=50) as producer:
        fut = await producer.enqueue(topic, b"still delivered")
        assert fut.cancel()  # the caller stops waiting; the record is still sent
        await producer.flush()
    (span,) = spans.named("send ")
    assert span.status.status_code is StatusCode.UNSET
    assert (span.attributes or {})["messaging.kafka.offset"] == 0
