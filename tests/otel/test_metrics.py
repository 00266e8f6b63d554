"""OpenTelemetry metrics: the SDK's in-memory reader sees the clients' real counters."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)

from aiokafka_lite import Consumer, Producer, observability
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.integrations.otel.metrics import (
    instrument_metrics,
    is_metrics_instrumented,
    uninstrument_metrics,
)
from aiokafka_lite.integrations.prometheus import render_prometheus
from aiokafka_lite.processing import OrderedWorkers
from aiokafka_lite.processing.transact import TransactSession


class Reading:
    def __init__(self, reader: InMemoryMetricReader) -> None:
        self.metrics: dict[str, Any] = {}
        data = reader.get_metrics_data()
        assert data is not None
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                assert sm.scope.name == "aiokafka_lite"
                for m in sm.metrics:
                    self.metrics[m.name] = m

    def points(self, name: str, **attrs: Any) -> list[Any]:
        metric = self.metrics.get(name)
        if metric is None:
            return []
        return [p for p in metric.data.data_points if all(p.attributes.get(k) == v for k, v in attrs.items())]

    def total(self, name: str, **attrs: Any) -> float:
        pts = self.points(name, **attrs)
        assert all(isinstance(p, NumberDataPoint) for p in pts)
        return sum(p.value for p in pts)

    def unit(self, name: str) -> str:
        return str(self.metrics[name].unit)


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrument_metrics(provider)
    try:
        yield reader
    finally:
        uninstrument_metrics()
        provider.shutdown()


async def test_a_reading_matches_the_records_produced_and_consumed(
    kafka_cluster: EmbeddedCluster, reader: InMemoryMetricReader
) -> None:
    topic = f"otel-metrics-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    kafka_cluster.create_topic(topic, 2)
    async with Producer(kafka_cluster.bootstrap, linger_ms=2, client_id="metrics-p") as producer:
        futures = [await producer.enqueue(topic, b"v" * 50, key=b"k%d" % i) for i in range(40)]
        await producer.flush()
        assert all(f.done() and f.exception() is None for f in futures)
        await producer.send(topic, b"last", key=b"k1")
        async with Consumer(
            kafka_cluster.bootstrap,
            topics=topic,
            group_id=group,
            auto_offset_reset="earliest",
            client_id="metrics-c",
        ) as consumer:
            got = 0
            async for _ in consumer:
                got += 1
                if got == 25:
                    break
            batch = await consumer.getmany(timeout_ms=5000, max_records=5)
            got += sum(len(v) for v in batch.values())
            r = Reading(reader)
            pm, cm = producer.metrics(), consumer.metrics()

            assert r.unit("messaging.client.sent.messages") == "{message}"
            sent = r.total("messaging.client.sent.messages", **{"messaging.destination.name": topic})
            assert sent == 41 == pm["records_sent"]
            (sent_point,) = r.points("messaging.client.sent.messages", **{"messaging.client.id": "metrics-p"})
            assert sent_point.attributes["messaging.system"] == "kafka"
            assert sent_point.attributes["messaging.operation.name"] == "send"
            consumed = r.total(
                "messaging.client.consumed.messages",
                **{"messaging.destination.name": topic, "messaging.consumer.group.name": group},
            )
            assert consumed == got == cm["records_consumed"]
            assert r.total("aiokafka_lite.producer.sent.bytes") == pm["bytes_sent"] > 41 * 50 // 2
            assert r.total("aiokafka_lite.producer.batches") == pm["batches_sent"]
            assert (
                r.total("aiokafka_lite.consumer.fetched.bytes", **{"messaging.client.id": "metrics-c"})
                == (cm["bytes_fetched"])
            )
            lag = {
                int(p.attributes["messaging.destination.partition.id"]): p.value
                for p in r.points("aiokafka_lite.consumer.lag", **{"messaging.destination.name": topic})
            }
            assert lag == {p["partition"]: p["lag"] for p in cm["partitions"] if p["lag"] is not None}
            assert sum(lag.values()) == 41 - got
            assert (
                r.total("aiokafka_lite.consumer.rebalances", **{"messaging.consumer.group.name": group}) == 1
            )
            assert (
                r.total("aiokafka_lite.consumer.assigned_partitions", **{"messaging.client.id": "metrics-c"})
                == 2
            )
            assert r.unit("aiokafka_lite.network.io") == "By"

            # Latency: one histogram observation per Produce request the producer's client made.
            assert r.unit("messaging.client.operation.duration") == "s"
            sends = r.points(
                "messaging.client.operation.duration",
                **{"messaging.operation.name": "send", "messaging.client.id": "metrics-p"},
            )
            assert sends and all(isinstance(p, HistogramDataPoint) for p in sends)
            produce_requests = sum(
                b["latency_by_api"][0]["count"]
                for b in pm["client"]["brokers"].values()
                if 0 in b["latency_by_api"]
            )
            assert sum(p.count for p in sends) == produce_requests > 0
            fetches = r.points(
                "aiokafka_lite.request.duration",
                **{"kafka.api.name": "Fetch", "messaging.client.id": "metrics-c"},
            )
            assert fetches and all(p.attributes["server.port"] > 0 for p in fetches)


async def test_clients_created_later_are_reported_and_uninstrument_stops(
    kafka_cluster: EmbeddedCluster,
) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrument_metrics(provider)
    topic = f"otel-later-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, 1)
    try:
        assert is_metrics_instrumented() and observability.handler_timing  # on while instrumented
        async with Producer(kafka_cluster.bootstrap, client_id="later") as producer:  # after instrument
            for _ in range(3):
                await producer.send(topic, b"x")
            r = Reading(reader)
            assert r.total("messaging.client.sent.messages", **{"messaging.destination.name": topic}) == 3
            assert r.points("messaging.client.operation.duration", **{"messaging.client.id": "later"})
            uninstrument_metrics()
            assert not is_metrics_instrumented() and not observability.handler_timing
            await producer.send(topic, b"x")
            assert producer.metrics()["records_sent"] == 4
            after = Reading(reader)
            assert (
                after.points("messaging.client.sent.messages", **{"messaging.destination.name": topic}) == []
            )
    finally:
        uninstrument_metrics()
        provider.shutdown()


async def test_only_the_given_clients(kafka_cluster: EmbeddedCluster) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    topic = f"otel-only-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, 1)
    try:
        async with (
            Producer(kafka_cluster.bootstrap, client_id="chosen") as chosen,
            Producer(kafka_cluster.bootstrap, client_id="other") as other,
        ):
            instrument_metrics(provider, clients=[chosen])
            await chosen.send(topic, b"a")
            await other.send(topic, b"b")
            r = Reading(reader)
            ids = {p.attributes["messaging.client.id"] for p in r.points("messaging.client.sent.messages")}
            assert ids == {"chosen"}
    finally:
        uninstrument_metrics()
        provider.shutdown()


async def test_handler_durations_and_batch_sizes_are_histograms(
    kafka_cluster: EmbeddedCluster, reader: InMemoryMetricReader
) -> None:
    topic = f"otel-process-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    kafka_cluster.create_topic(topic, 3)
    async with Producer(kafka_cluster.bootstrap, linger_ms=2, client_id="process-p") as producer:
        for i in range(30):
            await producer.enqueue(topic, b"job-%d" % i, key=b"%d" % i)
        await producer.flush()
        pm = producer.metrics()
    done: list[int] = []

    async def handle(record: Any) -> None:
        await asyncio.sleep(0.001)
        done.append(record.offset)

    async with Consumer(
        kafka_cluster.bootstrap,
        topics=topic,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        client_id="process-c",
    ) as consumer:
        workers = OrderedWorkers(consumer, handle, concurrency=3, commit_interval_ms=50)
        run = asyncio.create_task(workers.run())
        async with asyncio.timeout(60):
            while len(done) < 30:  # noqa: ASYNC110 - polling the handler's progress
                await asyncio.sleep(0.02)
        workers.stop()
        await run
        r = Reading(reader)
        (point,) = r.points("messaging.process.duration", **{"messaging.consumer.group.name": group})
        assert isinstance(point, HistogramDataPoint)
        assert point.count == 30 == workers.stats.processed
        assert point.attributes["messaging.operation.type"] == "process"
        assert point.sum >= 30 * 0.001
        text = render_prometheus(workers)
        assert f"messaging_process_duration_seconds_count{{{_labels(point.attributes)}}} 30" in text

    (batch_sizes,) = r.points("aiokafka_lite.producer.batch.size", **{"messaging.client.id": "process-p"})
    assert batch_sizes.count == pm["batches_sent"] and batch_sizes.sum == pm["bytes_sent"]
    (batch_records,) = r.points(
        "aiokafka_lite.producer.batch.records", **{"messaging.client.id": "process-p"}
    )
    assert batch_records.sum == 30


def _labels(attributes: Any) -> str:
    return ",".join(f'{k.replace(".", "_")}="{v}"' for k, v in sorted(attributes.items()))


async def test_transact_session_handler_rounds_are_timed(
    kafka_cluster: EmbeddedCluster, reader: InMemoryMetricReader
) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, sink, group = f"tx-in-{suffix}", f"tx-out-{suffix}", f"tx-g-{suffix}"
    kafka_cluster.create_topic(source, 1)
    kafka_cluster.create_topic(sink, 1)
    async with Producer(kafka_cluster.bootstrap) as producer:
        await producer.send_batch(source, [b"%d" % i for i in range(10)])
    session = TransactSession(
        kafka_cluster.bootstrap,
        group_id=group,
        transactional_id=f"tx-{suffix}",
        topics=[source],
        consumer_options={"auto_offset_reset": "earliest"},
    )
    handled = 0

    async def handle(batch: dict[Any, list[Any]], out: Producer) -> None:
        nonlocal handled
        for records in batch.values():
            await out.send_batch(sink, [r.value for r in records])
            handled += len(records)

    rounds = 0
    async with session:
        async with asyncio.timeout(60):
            while handled < 10:
                if await session.process(handle, timeout_ms=200) is not None:
                    rounds += 1
        r = Reading(reader)
        (point,) = r.points("messaging.process.duration", **{"messaging.consumer.group.name": group})
        assert point.count == rounds == session.metrics()["process_duration"]["count"]
        assert point.attributes["aiokafka_lite.client.kind"] == "transact_session"
