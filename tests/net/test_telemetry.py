"""KIP-714 client metrics push: the sans-I/O state machine and the OTLP encoder."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from otlp_reader import decode_metrics

from aiokafka_lite.net.telemetry import (
    DEFAULT_PUSH_INTERVAL_MS,
    MetricPoint,
    TelemetryMachine,
    TelemetryState,
    encode_metrics_data,
    standard_metrics,
)
from aiokafka_lite.wire.compression import Compression, decompress
from aiokafka_lite.wire.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

CID = uuid.UUID("12345678-1234-5678-1234-567812345678")


# --------------------------------------------------------------------------- helpers


def subscription(**kw: Any) -> GetTelemetrySubscriptionsResponse:
    args: dict[str, Any] = {
        "client_instance_id": CID,
        "subscription_id": 7,
        "accepted_compression_types": [],
        "push_interval_ms": 1000,
        "telemetry_max_bytes": 1 << 20,
        "requested_metrics": ["org.apache.kafka.producer."],
    }
    args.update(kw)
    return GetTelemetrySubscriptionsResponse(**args)


def machine(points: list[MetricPoint] | None = None) -> TelemetryMachine:
    pts = points or [MetricPoint("org.apache.kafka.producer.record.send.total", "sum", 5)]

    def payload(sub: Any, terminating: bool, now_ms: int) -> bytes:
        return encode_metrics_data([p for p in pts if sub.wants(p.name)], now_ns=now_ms * 1_000_000)

    return TelemetryMachine(payload, rng=random.Random(1))


def subscribed(m: TelemetryMachine, now: float = 0.0, **kw: Any) -> None:
    req = m.next_request(now)
    assert isinstance(req, GetTelemetrySubscriptionsRequest)
    m.on_subscription(subscription(**kw), now)


def push_due(m: TelemetryMachine, now: float) -> tuple[PushTelemetryRequest, float]:
    wait = m.wait_ms(now)
    assert wait is not None
    req = m.next_request(now + wait)
    assert isinstance(req, PushTelemetryRequest)
    return req, now + wait


# --------------------------------------------------------------------------- state machine


def test_first_request_is_a_subscription_with_a_zero_instance_id() -> None:
    m = machine()
    req = m.next_request(0)
    assert isinstance(req, GetTelemetrySubscriptionsRequest)
    assert req.client_instance_id == uuid.UUID(int=0)
    assert m.state is TelemetryState.SUBSCRIPTION_IN_PROGRESS
    assert m.next_request(0) is None  # one in flight at a time
    m.on_subscription(subscription(), 0)
    assert m.client_instance_id == CID
    assert m.state is TelemetryState.PUSH_NEEDED


def test_first_push_is_jittered_then_every_interval() -> None:
    waits = []
    for seed in range(20):
        m = TelemetryMachine(lambda *a: b"", rng=random.Random(seed))
        subscribed(m)
        wait = m.wait_ms(0)
        assert wait is not None
        waits.append(wait)
    assert all(500 <= w <= 1500 for w in waits)
    assert len(set(waits)) > 1
    m = machine()
    subscribed(m)
    req, now = push_due(m, 0)
    assert req.client_instance_id == CID and req.subscription_id == 7 and not req.terminating
    assert m.next_request(now) is None
    m.on_push(PushTelemetryResponse(), now)
    assert m.wait_ms(now) == pytest.approx(1000)
    assert m.next_request(now + 999) is None
    assert isinstance(m.next_request(now + 1000.001), PushTelemetryRequest)


def test_payload_has_only_requested_metrics() -> None:
    m = machine(
        [
            MetricPoint("org.apache.kafka.producer.record.send.total", "sum", 5),
            MetricPoint(
                "org.apache.kafka.producer.node.request.latency.avg", "gauge", 2.5, (("node_id", "node-1"),)
            ),
        ]
    )
    subscribed(m, requested_metrics=["org.apache.kafka.producer.node."])
    req, _ = push_due(m, 0)
    _, metrics = decode_metrics(req.metrics)
    assert set(metrics) == {"org.apache.kafka.producer.node.request.latency.avg"}
    m2 = machine([MetricPoint("org.apache.kafka.producer.a", "sum", 1), MetricPoint("x.y", "sum", 1)])
    subscribed(m2, requested_metrics=[""])  # a single empty prefix: every metric
    req, _ = push_due(m2, 0)
    assert set(decode_metrics(req.metrics)[1]) == {"org.apache.kafka.producer.a", "x.y"}


def test_empty_requested_metrics_refetches_after_interval_without_pushing() -> None:
    m = machine()
    subscribed(m, requested_metrics=[], push_interval_ms=2000)
    assert m.state is TelemetryState.SUBSCRIPTION_NEEDED
    assert m.next_request(1999) is None
    req = m.next_request(2000)
    assert isinstance(req, GetTelemetrySubscriptionsRequest)
    assert req.client_instance_id == CID  # the id the broker gave is kept


def test_non_positive_push_interval_uses_the_default() -> None:
    m = machine()
    subscribed(m, push_interval_ms=0)
    assert m.subscription is not None
    assert m.subscription.push_interval_ms == DEFAULT_PUSH_INTERVAL_MS


def test_unknown_subscription_id_refetches_at_once() -> None:
    m = machine()
    subscribed(m)
    _, now = push_due(m, 0)
    m.on_push(PushTelemetryResponse(error_code=117), now)
    assert m.state is TelemetryState.SUBSCRIPTION_NEEDED
    assert isinstance(m.next_request(now), GetTelemetrySubscriptionsRequest)
    m.on_subscription(subscription(subscription_id=8), now)
    req, _ = push_due(m, now)
    assert req.subscription_id == 8


def test_unsupported_compression_refetches_at_once_other_errors_after_interval() -> None:
    m = machine()
    subscribed(m)
    _, now = push_due(m, 0)
    m.on_push(PushTelemetryResponse(error_code=76), now)
    assert m.wait_ms(now) == 0
    m = machine()
    subscribed(m)
    _, now = push_due(m, 0)
    m.on_push(PushTelemetryResponse(error_code=89), now)  # THROTTLING_QUOTA_EXCEEDED
    assert m.state is TelemetryState.SUBSCRIPTION_NEEDED and m.wait_ms(now) == pytest.approx(1000)


def test_fatal_errors_disable_telemetry() -> None:
    for code in (35, 42, 87):
        m = machine()
        subscribed(m)
        _, now = push_due(m, 0)
        m.on_push(PushTelemetryResponse(error_code=code), now)
        assert m.done and m.disabled_reason is not None
        assert m.next_request(now + 10**9) is None
    m = machine()
    m.next_request(0)
    m.on_subscription(subscription(error_code=35), 0)
    assert m.done


def test_transport_failure_backs_off_and_refetches() -> None:
    m = machine()
    subscribed(m)
    _, now = push_due(m, 0)
    m.on_failure(now)
    assert m.state is TelemetryState.SUBSCRIPTION_NEEDED
    wait = m.wait_ms(now)
    assert wait is not None and 0 < wait <= 1000


def test_close_sends_a_terminating_push_then_terminates() -> None:
    m = machine()
    subscribed(m)
    m.initiate_close()
    req = m.next_request(0)  # at once, not at the push deadline
    assert isinstance(req, PushTelemetryRequest) and req.terminating
    assert m.state is TelemetryState.TERMINATING_PUSH_IN_PROGRESS
    m.on_push(PushTelemetryResponse(), 0)
    assert m.done and m.pushes == 1


def test_close_while_a_push_is_in_flight_pushes_terminating_after_it() -> None:
    m = machine()
    subscribed(m)
    _, now = push_due(m, 0)
    m.initiate_close()
    assert m.next_request(now) is None
    m.on_push(PushTelemetryResponse(), now)
    req = m.next_request(now)
    assert isinstance(req, PushTelemetryRequest) and req.terminating


def test_close_without_subscription_terminates_without_push() -> None:
    m = machine()
    m.initiate_close()
    assert m.done
    m = machine()
    subscribed(m, requested_metrics=[])
    m.initiate_close()
    assert m.done


def test_payload_is_compressed_with_the_first_accepted_codec() -> None:
    m = machine([MetricPoint(f"org.apache.kafka.producer.m{i}", "sum", i) for i in range(50)])
    subscribed(m, accepted_compression_types=[int(Compression.ZSTD), int(Compression.GZIP)])
    req, _ = push_due(m, 0)
    assert req.compression_type in (int(Compression.ZSTD), int(Compression.GZIP))
    raw = decompress(Compression(req.compression_type), req.metrics)
    assert len(decode_metrics(raw)[1]) == 50
    assert len(req.metrics) < len(raw)


# --------------------------------------------------------------------------- OTLP encoding


def test_otlp_sum_and_gauge_with_attributes_and_resource() -> None:
    data = encode_metrics_data(
        [
            MetricPoint("a.total", "sum", 42),
            MetricPoint("a.latency", "gauge", 1.25, (("node_id", "node-1"),)),
            MetricPoint("a.latency", "gauge", 3.0, (("node_id", "node-2"),)),
        ],
        resource=(("client_id", "me"),),
        delta=True,
        start_ns=100,
        now_ns=200,
    )
    resource, metrics = decode_metrics(data)
    assert resource == {"client_id": "me"}
    total = metrics["a.total"]
    assert total["kind"] == "sum" and total["temporality"] == 1 and total["monotonic"] == 1
    assert total["points"] == [({}, 42, 100, 200)]
    lat = metrics["a.latency"]
    assert lat["kind"] == "gauge"
    assert [(p[0], p[1]) for p in lat["points"]] == [
        ({"node_id": "node-1"}, 1.25),
        ({"node_id": "node-2"}, 3),
    ]
    cumulative = decode_metrics(encode_metrics_data([MetricPoint("s", "sum", 1)]))[1]
    assert cumulative["s"]["temporality"] == 2


def test_otlp_decodes_with_googles_protobuf_runtime() -> None:
    """A second, independent decoder: descriptors for the OTLP messages built at run time."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(name="otlp_min.proto", package="t", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto

    def msg(name: str, *fields: tuple[str, int, int, str | None, bool]) -> None:
        m = f.message_type.add(name=name)
        for fname, num, typ, tname, rep in fields:
            fd = m.field.add(name=fname, number=num, type=typ)
            fd.label = T.LABEL_REPEATED if rep else T.LABEL_OPTIONAL
            if tname:
                fd.type_name = tname

    msg("AnyValue", ("string_value", 1, T.TYPE_STRING, None, False))
    msg(
        "KeyValue", ("key", 1, T.TYPE_STRING, None, False), ("value", 2, T.TYPE_MESSAGE, ".t.AnyValue", False)
    )
    msg(
        "NumberDataPoint",
        ("start_time_unix_nano", 2, T.TYPE_FIXED64, None, False),
        ("time_unix_nano", 3, T.TYPE_FIXED64, None, False),
        ("as_double", 4, T.TYPE_DOUBLE, None, False),
        ("as_int", 6, T.TYPE_SFIXED64, None, False),
        ("attributes", 7, T.TYPE_MESSAGE, ".t.KeyValue", True),
    )
    msg("Gauge", ("data_points", 1, T.TYPE_MESSAGE, ".t.NumberDataPoint", True))
    msg(
        "Sum",
        ("data_points", 1, T.TYPE_MESSAGE, ".t.NumberDataPoint", True),
        ("aggregation_temporality", 2, T.TYPE_INT32, None, False),
        ("is_monotonic", 3, T.TYPE_BOOL, None, False),
    )
    msg(
        "Metric",
        ("name", 1, T.TYPE_STRING, None, False),
        ("gauge", 5, T.TYPE_MESSAGE, ".t.Gauge", False),
        ("sum", 7, T.TYPE_MESSAGE, ".t.Sum", False),
    )
    msg("Scope", ("name", 1, T.TYPE_STRING, None, False))
    msg(
        "ScopeMetrics",
        ("scope", 1, T.TYPE_MESSAGE, ".t.Scope", False),
        ("metrics", 2, T.TYPE_MESSAGE, ".t.Metric", True),
    )
    msg("Resource", ("attributes", 1, T.TYPE_MESSAGE, ".t.KeyValue", True))
    msg(
        "ResourceMetrics",
        ("resource", 1, T.TYPE_MESSAGE, ".t.Resource", False),
        ("scope_metrics", 2, T.TYPE_MESSAGE, ".t.ScopeMetrics", True),
    )
    msg("MetricsData", ("resource_metrics", 1, T.TYPE_MESSAGE, ".t.ResourceMetrics", True))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.MetricsData"))
    md = cls.FromString(
        encode_metrics_data(
            [MetricPoint("n.total", "sum", 7), MetricPoint("n.avg", "gauge", 0.5, (("k", "v"),))],
            resource=(("client_id", "c"),),
        )
    )
    (rm,) = md.resource_metrics
    assert rm.resource.attributes[0].key == "client_id"
    metrics = {m.name: m for m in rm.scope_metrics[0].metrics}
    assert metrics["n.total"].sum.data_points[0].as_int == 7
    assert metrics["n.total"].sum.aggregation_temporality == 2
    assert metrics["n.avg"].gauge.data_points[0].as_double == 0.5
    assert metrics["n.avg"].gauge.data_points[0].attributes[0].value.string_value == "v"


# --------------------------------------------------------------------------- standard names


def test_standard_metrics_from_snapshots() -> None:
    client = {
        "brokers": {
            -1: {"connects": 1, "disconnects": 1, "requests": 1, "bytes_sent": 10, "bytes_received": 20},
            1: {
                "connects": 2,
                "disconnects": 0,
                "requests": 5,
                "bytes_sent": 100,
                "bytes_received": 200,
                "latency_by_api": {
                    0: {"count": 2, "sum": 0.004, "max": 0.003},
                    3: {"count": 2, "sum": 0.0, "max": 0.0},
                },
            },
        }
    }
    producer = {
        "client": client,
        "sent_by_topic": {"t": {"records": 9, "bytes": 90, "batches": 2}},
        "failed_by_topic": {"t": {"TimeoutError": 1}},
        "records_retried": 3,
        "buffer_available_bytes": 1000,
        "buffer_total_bytes": 2000,
        "requests_in_flight": 0,
        "batch_size_bytes": {"count": 2, "sum": 90.0, "max": 60.0},
    }
    got = {(p.name, p.attributes): p for p in standard_metrics("producer", producer)}
    P = "org.apache.kafka.producer."
    assert got[(P + "connection.creation.total", ())].value == 3
    assert got[(P + "node.request.latency.avg", (("node_id", "node-1"),))].value == 1.0  # ms
    assert got[(P + "node.request.latency.max", (("node_id", "node-1"),))].value == 3.0
    assert got[(P + "record.send.total", ())].value == 9
    assert got[(P + "record.error.total", ())].value == 1
    assert got[(P + "record.retry.total", ())].value == 3
    assert got[(P + "topic.record.send.total", (("topic", "t"),))].value == 9
    assert got[(P + "batch.size.avg", ())].value == 45
    consumer = {
        "client": client,
        "consumed_by_topic": {"t": 4},
        "fetched_bytes_by_topic": {"t": 400},
        "assigned_partitions": 2,
        "partitions": [{"topic": "t", "partition": 0, "lag": 5}, {"topic": "t", "partition": 1, "lag": None}],
        "group": {"group_id": "g", "rebalances": 1, "rebalance_seconds_total": 0.5},
    }
    got = {(p.name, p.attributes): p for p in standard_metrics("consumer", consumer)}
    C = "org.apache.kafka.consumer."
    assert got[(C + "fetch.manager.records.consumed.total", ())].value == 4
    assert got[(C + "fetch.manager.bytes.consumed.total", ())].value == 400
    assert got[(C + "coordinator.assigned.partitions", ())].value == 2
    assert got[(C + "fetch.manager.records.lag.max", ())].value == 5
    assert got[(C + "coordinator.rebalance.latency.total", ())].value == 500
    assert got[(C + "connection.creation.total", ())].kind == "sum"
