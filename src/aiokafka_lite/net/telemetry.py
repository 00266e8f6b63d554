"""Client metrics push (KIP-714): the subscription/push state machine, the OTLP encoder,
the KIP's standard metric names, and a thin async shell that drives them.

Protocol decisions are pure code (``TelemetryMachine``): it says which request is due and
when, and takes the responses; ``TelemetryReporter`` only sends what the machine asks for
and sleeps until the next deadline. The states and transitions follow the Java client's
``ClientTelemetryReporter``:

- ``GetTelemetrySubscriptions`` first, at once; its answer gives the client instance id,
  the subscription id, the accepted compression types, the push interval, the requested
  metric prefixes (``[]`` none, ``[""]`` all) and the temporality (delta or cumulative).
- The first push waits a random 0.5-1.5 push intervals (so that clients started together
  do not push together), later ones one interval.
- A subscription with no requested metrics is re-fetched after the push interval, without
  pushing.
- ``UNKNOWN_SUBSCRIPTION_ID`` and ``UNSUPPORTED_COMPRESSION_TYPE`` re-fetch the subscription
  at once; ``INVALID_REQUEST``, ``INVALID_RECORD`` and ``UNSUPPORTED_VERSION`` (and a broker
  without the APIs) switch telemetry off for the client's life; other errors re-fetch the
  subscription after the push interval; transport failures after an exponential backoff.
- Closing asks for a last push with ``Terminating=true`` when a subscription with metrics
  is active; after it (or without one) the machine is ``TERMINATED``.

The OTLP payload (``MetricsData`` of opentelemetry-proto's ``metrics.proto``) is written by a
small protobuf encoder here rather than with the ``opentelemetry-proto`` package: the client
needs six message types (MetricsData, ResourceMetrics, ScopeMetrics, Metric, Sum/Gauge,
NumberDataPoint, KeyValue) and only writes them, so a few dozen lines avoid a dependency
(and its protobuf runtime) for every user of the client.

Metric names are the KIP's: ``org.apache.kafka.`` + the Java metric group without
``-metrics`` + the metric name, dots for dashes (``producer-node-metrics``/
``request-latency-avg`` becomes ``org.apache.kafka.producer.node.request.latency.avg``).
They are built from the counters the client already keeps (``metrics()`` snapshots);
``standard_metrics`` lists which. Not sourced (the client keeps no such counter):
``record.queue.time.avg/max``, ``produce.throttle.time.avg/max`` (only a total is kept),
``consumer.poll.idle.ratio.avg``, ``consumer.coordinator.commit.latency.*``,
``consumer.fetch.manager.fetch.latency.*`` (available per API as node request latency),
``connection.creation.rate`` (the total is pushed; a rate is its delta).
"""

from __future__ import annotations

import enum
import logging
import random
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiokafka_lite.core import concurrency
from aiokafka_lite.core import errors as E
from aiokafka_lite.net.retry import Backoff
from aiokafka_lite.wire.compression import Compression, compress
from aiokafka_lite.wire.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

__all__ = [
    "DEFAULT_PUSH_INTERVAL_MS",
    "MetricPoint",
    "TelemetryMachine",
    "TelemetryReporter",
    "TelemetryState",
    "TelemetrySubscription",
    "encode_metrics_data",
    "standard_metrics",
    "start_reporter",
]

log = logging.getLogger(__name__)

#: Java's default when the broker answers an error or a push interval <= 0 (5 minutes).
DEFAULT_PUSH_INTERVAL_MS: Final = 5 * 60 * 1000
_ZERO_UUID: Final = uuid.UUID(int=0)

# Error codes (Kafka's protocol numbers) with a meaning of their own here.
_NONE: Final = 0
_UNSUPPORTED_VERSION: Final = 35
_INVALID_REQUEST: Final = 42
_INVALID_RECORD: Final = 87
_UNKNOWN_SUBSCRIPTION_ID: Final = 117
_UNSUPPORTED_COMPRESSION_TYPE: Final = 76
_FATAL: Final = frozenset({_UNSUPPORTED_VERSION, _INVALID_REQUEST, _INVALID_RECORD})
_REFETCH_NOW: Final = frozenset({_UNKNOWN_SUBSCRIPTION_ID, _UNSUPPORTED_COMPRESSION_TYPE})


class TelemetryState(enum.Enum):
    SUBSCRIPTION_NEEDED = "subscription_needed"
    SUBSCRIPTION_IN_PROGRESS = "subscription_in_progress"
    PUSH_NEEDED = "push_needed"
    PUSH_IN_PROGRESS = "push_in_progress"
    TERMINATING_PUSH_NEEDED = "terminating_push_needed"
    TERMINATING_PUSH_IN_PROGRESS = "terminating_push_in_progress"
    TERMINATED = "terminated"


@dataclass(frozen=True, slots=True)
class TelemetrySubscription:
    client_instance_id: uuid.UUID
    subscription_id: int
    accepted_compression_types: tuple[int, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    requested_metrics: tuple[str, ...]

    def wants(self, name: str) -> bool:
        """Whether the metric ``name`` matches a requested prefix (``""`` matches all)."""
        return any(name.startswith(prefix) for prefix in self.requested_metrics)

    def compression(self) -> Compression:
        """The first accepted codec this client can write (Java's preference), else none."""
        for code in self.accepted_compression_types:
            try:
                codec = Compression(code)
            except ValueError:
                continue
            if _codec_available(codec):
                return codec
        return Compression.NONE


def _codec_available(codec: Compression) -> bool:
    try:
        compress(codec, b"")
    except Exception:
        return False
    return True


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One value of one standard metric: ``sum`` (monotonic cumulative counter) or ``gauge``."""

    name: str
    kind: str  # "sum" | "gauge"
    value: float
    attributes: tuple[tuple[str, str], ...] = ()
    description: str = ""


class TelemetryMachine:
    """Sans-I/O KIP-714 client state. Times are monotonic milliseconds given by the caller.

    ``next_request(now_ms)`` returns the request due now (and moves to the matching
    in-progress state) or None; ``wait_ms(now_ms)`` how long until one may be due. The
    caller passes every outcome back: ``on_subscription``/``on_push`` with the response,
    ``on_failure`` when no response came.
    """

    def __init__(
        self,
        payload: Callable[[TelemetrySubscription, bool, int], bytes],
        *,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """``payload(subscription, terminating, now_ms)`` gives the OTLP bytes to push."""
        self.state = TelemetryState.SUBSCRIPTION_NEEDED
        self.subscription: TelemetrySubscription | None = None
        self.client_instance_id: uuid.UUID = _ZERO_UUID
        self.disabled_reason: str | None = None
        self.pushes = 0
        self._payload = payload
        self._backoff = backoff or Backoff(100.0, 1000.0)
        self._rng = rng or random.Random()
        self._due_ms = 0.0
        self._failures = 0
        self._close_requested = False

    # ------------------------------------------------------------------ queries

    @property
    def done(self) -> bool:
        return self.state is TelemetryState.TERMINATED

    def wait_ms(self, now_ms: float) -> float | None:
        """Milliseconds until a request is due; None while one is in flight or when done."""
        if self.state in (TelemetryState.SUBSCRIPTION_NEEDED, TelemetryState.PUSH_NEEDED):
            return max(self._due_ms - now_ms, 0.0)
        if self.state is TelemetryState.TERMINATING_PUSH_NEEDED:
            return 0.0
        return None

    def next_request(self, now_ms: float) -> GetTelemetrySubscriptionsRequest | PushTelemetryRequest | None:
        wait = self.wait_ms(now_ms)
        if wait is None or wait > 0:
            return None
        if self.state is TelemetryState.SUBSCRIPTION_NEEDED:
            self.state = TelemetryState.SUBSCRIPTION_IN_PROGRESS
            return GetTelemetrySubscriptionsRequest(client_instance_id=self.client_instance_id)
        terminating = self.state is TelemetryState.TERMINATING_PUSH_NEEDED
        sub = self.subscription
        assert sub is not None  # PUSH_NEEDED and TERMINATING_PUSH_NEEDED need one
        codec = sub.compression()
        raw = self._payload(sub, terminating, int(now_ms))
        body = raw
        if codec is not Compression.NONE:
            try:
                body = compress(codec, raw)
            except Exception:
                codec, body = Compression.NONE, raw
        self.state = (
            TelemetryState.TERMINATING_PUSH_IN_PROGRESS if terminating else TelemetryState.PUSH_IN_PROGRESS
        )
        return PushTelemetryRequest(
            client_instance_id=sub.client_instance_id,
            subscription_id=sub.subscription_id,
            terminating=terminating,
            compression_type=int(codec),
            metrics=body,
        )

    # ------------------------------------------------------------------ outcomes

    def on_subscription(self, resp: GetTelemetrySubscriptionsResponse, now_ms: float) -> None:
        if self.state is not TelemetryState.SUBSCRIPTION_IN_PROGRESS:
            return
        self._failures = 0
        if resp.error_code != _NONE:
            self._after_error(resp.error_code, self._interval(), now_ms)
            return
        sub = TelemetrySubscription(
            client_instance_id=resp.client_instance_id,
            subscription_id=resp.subscription_id,
            accepted_compression_types=tuple(resp.accepted_compression_types),
            push_interval_ms=resp.push_interval_ms if resp.push_interval_ms > 0 else DEFAULT_PUSH_INTERVAL_MS,
            telemetry_max_bytes=resp.telemetry_max_bytes,
            delta_temporality=resp.delta_temporality,
            requested_metrics=tuple(resp.requested_metrics),
        )
        if self.client_instance_id == _ZERO_UUID:
            self.client_instance_id = resp.client_instance_id
        self.subscription = sub
        if self._close_requested:
            self.state = (
                TelemetryState.TERMINATING_PUSH_NEEDED if sub.requested_metrics else TelemetryState.TERMINATED
            )
            return
        if not sub.requested_metrics:
            # Nothing requested: ask again after the interval (the operator may add metrics).
            self._schedule(TelemetryState.SUBSCRIPTION_NEEDED, now_ms + sub.push_interval_ms)
            return
        # First push of a subscription: jittered over [0.5, 1.5) intervals.
        self._schedule(
            TelemetryState.PUSH_NEEDED, now_ms + sub.push_interval_ms * self._rng.uniform(0.5, 1.5)
        )

    def on_push(self, resp: PushTelemetryResponse, now_ms: float) -> None:
        if self.state is TelemetryState.TERMINATING_PUSH_IN_PROGRESS:
            self.pushes += resp.error_code == _NONE
            self.state = TelemetryState.TERMINATED
            return
        if self.state is not TelemetryState.PUSH_IN_PROGRESS:
            return
        self._failures = 0
        if resp.error_code != _NONE:
            self._after_error(resp.error_code, self._interval(), now_ms)
            return
        self.pushes += 1
        if self._close_requested:
            self.state = TelemetryState.TERMINATING_PUSH_NEEDED
            return
        self._schedule(TelemetryState.PUSH_NEEDED, now_ms + self._interval())

    def on_failure(self, now_ms: float) -> None:
        """No response (disconnect, timeout): try the subscription again after a backoff."""
        if self.state is TelemetryState.TERMINATING_PUSH_IN_PROGRESS or (
            self._close_requested and self.state is TelemetryState.SUBSCRIPTION_IN_PROGRESS
        ):
            self.state = TelemetryState.TERMINATED
            return
        if self.state not in (TelemetryState.SUBSCRIPTION_IN_PROGRESS, TelemetryState.PUSH_IN_PROGRESS):
            return
        delay = self._backoff.delay_ms(self._failures)
        self._failures += 1
        self._schedule(TelemetryState.SUBSCRIPTION_NEEDED, now_ms + delay)

    def disable(self, reason: str) -> None:
        """Telemetry off for good (a broker without the APIs, a fatal error)."""
        self.disabled_reason = reason
        self.state = TelemetryState.TERMINATED

    def initiate_close(self) -> None:
        """Ask for the terminating push: at once when idle with metrics requested, after the
        request in flight otherwise; ``TERMINATED`` when there is nothing to push."""
        self._close_requested = True
        sub = self.subscription
        if self.state is TelemetryState.PUSH_NEEDED or (
            self.state is TelemetryState.SUBSCRIPTION_NEEDED and sub is not None and sub.requested_metrics
        ):
            self.state = TelemetryState.TERMINATING_PUSH_NEEDED
        elif self.state is TelemetryState.SUBSCRIPTION_NEEDED:
            self.state = TelemetryState.TERMINATED

    # ------------------------------------------------------------------ internals

    def _interval(self) -> float:
        return float(self.subscription.push_interval_ms if self.subscription else DEFAULT_PUSH_INTERVAL_MS)

    def _after_error(self, code: int, interval_ms: float, now_ms: float) -> None:
        if code in _FATAL:
            log.warning("client metrics push disabled: the broker answered error %d", code)
            self.disable(f"error {code}")
            return
        if code == _UNKNOWN_SUBSCRIPTION_ID:
            self.subscription = None
        delay = 0.0 if code in _REFETCH_NOW else interval_ms
        if self._close_requested:
            self.state = TelemetryState.TERMINATED
            return
        self._schedule(TelemetryState.SUBSCRIPTION_NEEDED, now_ms + delay)

    def _schedule(self, state: TelemetryState, due_ms: float) -> None:
        self.state = state
        self._due_ms = due_ms


# --------------------------------------------------------------------------- OTLP encoding
# Protobuf wire format: a field key is (number << 3 | wire type); 0 varint, 1 fixed64,
# 2 length-delimited. Field numbers are those of opentelemetry-proto v1 (metrics.proto,
# common.proto, resource.proto).

_DELTA: Final = 1  # AggregationTemporality
_CUMULATIVE: Final = 2


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_bytes(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _field_str(number: int, text: str) -> bytes:
    return _field_bytes(number, text.encode()) if text else b""


def _field_varint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def _field_fixed64(number: int, value: int) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<Q", value)


def _field_double(number: int, value: float) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<d", value)


def _key_value(key: str, value: str) -> bytes:
    any_value = _field_str(1, value)  # AnyValue.string_value
    return _field_str(1, key) + _field_bytes(2, any_value)


def _number_point(value: float, attributes: Iterable[tuple[str, str]], start_ns: int, now_ns: int) -> bytes:
    out = b"".join(_field_bytes(7, _key_value(k, v)) for k, v in attributes)
    out += _field_fixed64(2, start_ns) + _field_fixed64(3, now_ns)
    if float(value).is_integer() and abs(value) < 2**63:
        return out + _varint(6 << 3 | 1) + struct.pack("<q", int(value))  # as_int (sfixed64)
    return out + _field_double(4, value)  # as_double


def encode_metrics_data(
    points: Sequence[MetricPoint],
    *,
    resource: Iterable[tuple[str, str]] = (),
    delta: bool = False,
    start_ns: int = 0,
    now_ns: int | None = None,
) -> bytes:
    """An OTLP ``MetricsData`` with one resource and one scope holding ``points``: sums as
    monotonic ``Sum`` (delta or cumulative temporality), the rest as ``Gauge``. Points of
    one name become one ``Metric`` with several data points."""
    now = time.time_ns() if now_ns is None else now_ns
    by_name: dict[str, list[MetricPoint]] = {}
    for p in points:
        by_name.setdefault(p.name, []).append(p)
    metrics = bytearray()
    for name, group in by_name.items():
        kind = group[0].kind
        data = b"".join(_field_bytes(1, _number_point(p.value, p.attributes, start_ns, now)) for p in group)
        if kind == "sum":
            data += _field_varint(2, _DELTA if delta else _CUMULATIVE) + _field_varint(3, 1)
            body = _field_bytes(7, data)
        else:
            body = _field_bytes(5, data)
        metric = _field_str(1, name) + _field_str(2, group[0].description) + body
        metrics += _field_bytes(2, metric)
    scope = _field_str(1, "aiokafka_lite")
    scope_metrics = _field_bytes(1, scope) + bytes(metrics)
    res = b"".join(_field_bytes(1, _key_value(k, v)) for k, v in resource)
    resource_metrics = _field_bytes(1, res) + _field_bytes(2, scope_metrics)
    return _field_bytes(1, resource_metrics)


# --------------------------------------------------------------------------- standard metrics


def _hist_avg_max(hists: Iterable[dict[str, Any]], scale: float = 1.0) -> tuple[float, float] | None:
    count = 0
    total = 0.0
    top = 0.0
    for h in hists:
        count += int(h.get("count", 0))
        total += float(h.get("sum", 0.0))
        top = max(top, float(h.get("max", 0.0)))
    if count == 0:
        return None
    return total / count * scale, top * scale


def _client_points(prefix: str, net: dict[str, Any]) -> list[MetricPoint]:
    out: list[MetricPoint] = []
    brokers: dict[Any, dict[str, Any]] = net.get("brokers", {})
    connects = sum(int(b.get("connects", 0)) for b in brokers.values())
    out.append(MetricPoint(f"{prefix}.connection.creation.total", "sum", connects))
    closes = sum(int(b.get("disconnects", 0)) for b in brokers.values())
    out.append(MetricPoint(f"{prefix}.connection.close.total", "sum", closes))
    out.append(
        MetricPoint(
            f"{prefix}.request.total", "sum", sum(int(b.get("requests", 0)) for b in brokers.values())
        )
    )
    out.append(
        MetricPoint(
            f"{prefix}.outgoing.byte.total", "sum", sum(int(b.get("bytes_sent", 0)) for b in brokers.values())
        )
    )
    out.append(
        MetricPoint(
            f"{prefix}.incoming.byte.total",
            "sum",
            sum(int(b.get("bytes_received", 0)) for b in brokers.values()),
        )
    )
    for node_id, b in brokers.items():
        if int(node_id) < 0:
            continue  # bootstrap seeds are not nodes
        stats = _hist_avg_max(b.get("latency_by_api", {}).values(), 1000.0)
        if stats is None:
            continue
        attrs = (("node_id", f"node-{node_id}"),)
        out.append(MetricPoint(f"{prefix}.node.request.latency.avg", "gauge", stats[0], attrs))
        out.append(MetricPoint(f"{prefix}.node.request.latency.max", "gauge", stats[1], attrs))
    return out


def standard_metrics(kind: str, snapshot: dict[str, Any]) -> list[MetricPoint]:
    """The KIP-714 standard metrics of a producer's or consumer's ``metrics()`` snapshot
    (``kind`` "producer" or "consumer"; anything else gets the connection metrics)."""
    prefix = f"org.apache.kafka.{kind if kind in ('producer', 'consumer') else 'client'}"
    out = _client_points(prefix, snapshot.get("client", snapshot))
    if kind == "producer":
        sent = snapshot.get("sent_by_topic", {})
        for topic, c in sent.items():
            attrs = (("topic", str(topic)),)
            out.append(MetricPoint(f"{prefix}.topic.record.send.total", "sum", c.get("records", 0), attrs))
            out.append(MetricPoint(f"{prefix}.topic.byte.total", "sum", c.get("bytes", 0), attrs))
        out.append(
            MetricPoint(f"{prefix}.record.send.total", "sum", sum(c.get("records", 0) for c in sent.values()))
        )
        failed = sum(sum(v.values()) for v in snapshot.get("failed_by_topic", {}).values())
        out.append(MetricPoint(f"{prefix}.record.error.total", "sum", failed))
        out.append(MetricPoint(f"{prefix}.record.retry.total", "sum", snapshot.get("records_retried", 0)))
        if "buffer_available_bytes" in snapshot:
            out.append(
                MetricPoint(f"{prefix}.buffer.available.bytes", "gauge", snapshot["buffer_available_bytes"])
            )
        if "buffer_total_bytes" in snapshot:
            out.append(MetricPoint(f"{prefix}.buffer.total.bytes", "gauge", snapshot["buffer_total_bytes"]))
        if "requests_in_flight" in snapshot:
            out.append(MetricPoint(f"{prefix}.requests.in.flight", "gauge", snapshot["requests_in_flight"]))
        batch = snapshot.get("batch_size_bytes")
        stats = _hist_avg_max([batch]) if isinstance(batch, dict) else None
        if stats is not None:
            out.append(MetricPoint(f"{prefix}.batch.size.avg", "gauge", stats[0]))
            out.append(MetricPoint(f"{prefix}.batch.size.max", "gauge", stats[1]))
    elif kind == "consumer":
        consumed = snapshot.get("consumed_by_topic", {})
        fetched = snapshot.get("fetched_bytes_by_topic", {})
        out.append(
            MetricPoint(f"{prefix}.fetch.manager.records.consumed.total", "sum", sum(consumed.values()))
        )
        out.append(MetricPoint(f"{prefix}.fetch.manager.bytes.consumed.total", "sum", sum(fetched.values())))
        for topic, n in consumed.items():
            attrs = (("topic", str(topic)),)
            out.append(MetricPoint(f"{prefix}.fetch.manager.topic.records.consumed.total", "sum", n, attrs))
        for topic, n in fetched.items():
            attrs = (("topic", str(topic)),)
            out.append(MetricPoint(f"{prefix}.fetch.manager.topic.bytes.consumed.total", "sum", n, attrs))
        out.append(
            MetricPoint(
                f"{prefix}.coordinator.assigned.partitions", "gauge", snapshot.get("assigned_partitions", 0)
            )
        )
        lags = [p["lag"] for p in snapshot.get("partitions", ()) if p.get("lag") is not None]
        if lags:
            out.append(MetricPoint(f"{prefix}.fetch.manager.records.lag.max", "gauge", max(lags)))
        group = snapshot.get("group") or {}
        if "rebalances" in group:
            out.append(MetricPoint(f"{prefix}.coordinator.rebalance.total", "sum", group["rebalances"]))
            out.append(
                MetricPoint(
                    f"{prefix}.coordinator.rebalance.latency.total",
                    "sum",
                    float(group.get("rebalance_seconds_total", 0.0)) * 1000.0,
                )
            )
    return out


# --------------------------------------------------------------------------- async shell


@dataclass
class _DeltaState:
    last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)
    start_ns: int = 0


class TelemetryReporter:
    """Drives a ``TelemetryMachine`` over a ``Client``: one task per client, owned by the
    client's lifetime (``run`` until ``close``). ``source()`` gives the standard metric
    points; ``resource`` the OTLP resource attributes (client id, software name...)."""

    def __init__(
        self,
        client: Any,
        source: Callable[[], list[MetricPoint]],
        *,
        resource: Sequence[tuple[str, str]] = (),
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self._source = source
        self._resource = tuple(resource)
        self._start_ns = time.time_ns()
        self._delta = _DeltaState(start_ns=self._start_ns)
        self._wake: Any = concurrency.event()
        self._last_payload: bytes | None = None
        self.machine = TelemetryMachine(
            self._payload,
            backoff=Backoff(float(client.config.retry_backoff_ms), float(client.config.retry_backoff_max_ms)),
            rng=rng,
        )

    @property
    def client_instance_id(self) -> uuid.UUID:
        return self.machine.client_instance_id

    def _payload(self, sub: TelemetrySubscription, terminating: bool, now_ms: int) -> bytes:
        points = [p for p in self._source() if sub.wants(p.name)]
        now_ns = time.time_ns()
        start = self._start_ns
        if sub.delta_temporality:
            start = self._delta.start_ns
            deltas: list[MetricPoint] = []
            for p in points:
                if p.kind == "sum":
                    key = (p.name, p.attributes)
                    prev = self._delta.last.get(key, 0.0)
                    self._delta.last[key] = p.value
                    p = MetricPoint(p.name, p.kind, p.value - prev, p.attributes, p.description)
                deltas.append(p)
            points = deltas
            self._delta.start_ns = now_ns
        payload = encode_metrics_data(
            points, resource=self._resource, delta=sub.delta_temporality, start_ns=start, now_ns=now_ns
        )
        self._last_payload = payload
        return payload

    def _now_ms(self) -> float:
        return time.monotonic() * 1000.0

    async def run(self) -> None:
        """Until the machine is terminated: send what is due, sleep until the next deadline
        or until ``close`` wakes it for the terminating push."""
        self._wake = concurrency.event()
        if self.machine._close_requested:
            self._wake.set()
        machine = self.machine
        while not machine.done:
            request = machine.next_request(self._now_ms())
            if request is None:
                wait = machine.wait_ms(self._now_ms())
                if wait is None:  # pragma: no cover - no request is in flight outside _exchange
                    return
                await concurrency.wait_any([self._wake], wait / 1000.0)
                self._wake.clear()
                continue
            await self._exchange(request)

    async def _exchange(self, request: GetTelemetrySubscriptionsRequest | PushTelemetryRequest) -> None:
        machine = self.machine
        try:
            resp = await self._client.send(request)
        except E.UnsupportedVersionError as exc:
            machine.disable(f"the broker does not support {type(request).__name__}: {exc}")
            return
        except (E.KafkaError, OSError) as exc:
            log.debug("client metrics push: %s failed: %r", type(request).__name__, exc)
            machine.on_failure(self._now_ms())
            return
        if isinstance(resp, GetTelemetrySubscriptionsResponse):
            machine.on_subscription(resp, self._now_ms())
        elif isinstance(resp, PushTelemetryResponse):
            machine.on_push(resp, self._now_ms())
        else:  # pragma: no cover - the client always answers with the request's response
            machine.on_failure(self._now_ms())

    def close(self) -> None:
        """Ask ``run`` for the terminating push and its end; the owner then waits for the
        task within its own close timeout (``concurrency.stop_task``)."""
        self.machine.initiate_close()
        self._wake.set()

    def start(self) -> None:
        """Run in a task of the client (its task group under trio): the client's lifetime
        owns it."""
        self._task: Any = self._client._spawn(self.run(), "aiokafka_lite.telemetry")

    async def stop(self, deadline: float | None) -> None:
        """The terminating push, then the task's end, within what is left of the owner's
        close: until ``deadline`` (a ``time.monotonic()`` value; None: close has no
        deadline) and never longer than ``request_timeout_ms``."""
        self.close()
        task = getattr(self, "_task", None)
        if task is not None:
            grace_s = self._client.config.request_timeout_ms / 1000
            if deadline is not None:
                grace_s = max(0.0, min(deadline - time.monotonic(), grace_s))
            await concurrency.stop_task(task, grace_s)


def start_reporter(
    client: Any, kind: str, metrics: Callable[[], dict[str, Any]], resource: Sequence[tuple[str, str]] = ()
) -> TelemetryReporter:
    """A started reporter pushing ``kind``'s ("producer", "consumer") standard metrics."""
    res = (
        ("client_software_name", "aiokafka_lite"),
        ("client_id", str(client.config.client_id)),
        *resource,
    )
    reporter = TelemetryReporter(client, lambda: standard_metrics(kind, metrics()), resource=res)
    reporter.start()
    return reporter
