"""One description of the clients' metrics, shared by every exporter.

Each client keeps plain counters (``metrics()``); ``collect(*clients)`` turns them into
``MetricFamily`` objects: an OpenTelemetry-style dotted name, an instrument kind, a UCUM
unit and points with attributes. ``aiokafka_lite.integrations.prometheus`` renders those as the
Prometheus text format; ``aiokafka_lite.integrations.otel.metrics`` reports them through OpenTelemetry
observable instruments. Names follow OpenTelemetry's messaging semantic conventions
where one exists (``messaging.client.sent.messages``, ``messaging.client.consumed.messages``,
``messaging.client.operation.duration``); the Kafka-specific rest is under ``aiokafka_lite.``.

Clients and what runs handlers (``OrderedWorkers``, ``ShareWorkers``,
``TransactSession``: the handlers' ``messaging.process.duration``) register themselves here when created (a weak
reference: the registry never keeps one alive), so an exporter set up once sees those
created later too.

Pure and dependency-free: importing it loads no client module.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

__all__ = [
    "SPECS",
    "HistogramValue",
    "MetricFamily",
    "MetricSpec",
    "Point",
    "collect",
    "enable_handler_timing",
    "live_clients",
    "on_track",
    "track",
]

Kind = Literal["counter", "updowncounter", "gauge", "histogram"]
Attrs = tuple[tuple[str, str], ...]


class ObservedClient(Protocol):
    """What ``collect`` needs of a client (Producer, Consumer, Admin, ShareConsumer)."""

    def metrics(self) -> dict[str, Any]: ...


# --------------------------------------------------------------------------- handler timing

#: Whether OrderedWorkers, ShareWorkers and TransactSession time their handlers
#: (``messaging.process.duration``). Off by default: two clock reads per record cost more
#: than every counter together (about 0.4 us per record in bench/metrics_overhead.py).
#: ``instrument_metrics`` switches it on; with the Prometheus text alone, call
#: ``enable_handler_timing()``.
handler_timing = False


def enable_handler_timing(enabled: bool = True) -> None:
    """Time handlers from now on (or stop: ``False``) for ``messaging.process.duration``."""
    global handler_timing
    handler_timing = enabled


# --------------------------------------------------------------------------- registry

_clients: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_order = itertools.count()
_listeners: list[Callable[[Any], None]] = []


def track(client: object) -> None:
    """Register a client (its constructor calls this); listeners hear of it at once."""
    _clients[next(_order)] = client
    for listener in list(_listeners):
        listener(client)


def live_clients() -> list[Any]:
    """Registered clients (and worker pools) still alive and not closed, oldest first."""
    return [c for _, c in sorted(_clients.items()) if not _closed(c)]


def _closed(client: object) -> bool:
    if getattr(client, "closed", False):
        return True
    consumer = _consumer_of(client)  # worker pools: closed with their consumer
    return consumer is not None and bool(getattr(consumer, "closed", False))


def on_track(listener: Callable[[Any], None]) -> Callable[[], None]:
    """Call ``listener`` with every client created from now on; returns the unsubscribe."""
    _listeners.append(listener)

    def remove() -> None:
        if listener in _listeners:
            _listeners.remove(listener)

    return remove


# --------------------------------------------------------------------------- model


@dataclass(slots=True)
class HistogramValue:
    """Cumulative histogram: ``counts[i]`` observations in (bounds[i-1], bounds[i]]; the
    last count is above every bound."""

    bounds: tuple[float, ...]
    counts: list[int]
    count: int
    sum: float

    def merge(self, other: HistogramValue) -> None:
        if other.bounds != self.bounds:  # pragma: no cover - one bucket layout per metric
            raise ValueError("cannot merge histograms with different buckets")
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.count += other.count
        self.sum += other.sum


@dataclass(slots=True)
class Point:
    attributes: Attrs
    value: float | HistogramValue


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    kind: Kind
    unit: str
    description: str


@dataclass(slots=True)
class MetricFamily:
    spec: MetricSpec
    points: list[Point] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name


def _spec(name: str, kind: Kind, unit: str, description: str) -> MetricSpec:
    return MetricSpec(name, kind, unit, description)


#: Every metric ``collect`` can report, in output order.
SPECS: dict[str, MetricSpec] = {
    s.name: s
    for s in (
        # --- OpenTelemetry messaging semantic conventions
        _spec(
            "messaging.client.sent.messages",
            "counter",
            "{message}",
            "Records the producer sent: acknowledged by the broker (acks=0: written), or failed "
            "for good (error.type set).",
        ),
        _spec(
            "messaging.client.consumed.messages",
            "counter",
            "{message}",
            "Records delivered to the application.",
        ),
        _spec(
            "messaging.client.operation.duration",
            "histogram",
            "s",
            "Duration of Produce (send), Fetch/ShareFetch (receive) and OffsetCommit/ShareAcknowledge "
            "(settle) requests, from write to response.",
        ),
        _spec(
            "messaging.process.duration",
            "histogram",
            "s",
            "Duration of the handler OrderedWorkers or ShareWorkers ran on a record, successful or not.",
        ),
        # --- Kafka-specific
        _spec(
            "aiokafka_lite.request.duration",
            "histogram",
            "s",
            "Kafka request latency by API and broker, from write to response.",
        ),
        _spec("aiokafka_lite.requests", "counter", "{request}", "Requests written, by broker."),
        _spec(
            "aiokafka_lite.request.errors",
            "counter",
            "{request}",
            "Requests that ended without a response (disconnect, timeout, corrupt frame), by API and broker.",
        ),
        _spec(
            "aiokafka_lite.requests.in_flight",
            "updowncounter",
            "{request}",
            "Requests written and not answered yet, by broker.",
        ),
        _spec(
            "aiokafka_lite.network.io",
            "counter",
            "By",
            "Bytes written to and read from brokers (network.io.direction transmit/receive).",
        ),
        _spec(
            "aiokafka_lite.broker.connected",
            "updowncounter",
            "{broker}",
            "1 while a connection to the broker is open.",
        ),
        _spec("aiokafka_lite.connections", "counter", "{connection}", "Connections established, by broker."),
        _spec(
            "aiokafka_lite.connection.errors",
            "counter",
            "{connection}",
            "Failed connection attempts, by broker.",
        ),
        _spec("aiokafka_lite.disconnects", "counter", "{connection}", "Established connections that closed."),
        _spec(
            "aiokafka_lite.throttle.time", "counter", "s", "Quota throttling the brokers asked for (KIP-219)."
        ),
        _spec(
            "aiokafka_lite.client.retries",
            "counter",
            "{retry}",
            "Retriable request failures retried (metadata, coordinator, admin, offsets...).",
        ),
        _spec(
            "aiokafka_lite.client.errors",
            "counter",
            "{error}",
            "Errors seen by the client (failed connects, requests and partition answers), by error.type.",
        ),
        _spec(
            "aiokafka_lite.producer.sent.bytes",
            "counter",
            "By",
            "Record-batch bytes the broker acknowledged (after compression).",
        ),
        _spec(
            "aiokafka_lite.producer.batches", "counter", "{batch}", "Record batches the broker acknowledged."
        ),
        _spec(
            "aiokafka_lite.producer.batch.size",
            "histogram",
            "By",
            "Size of acknowledged record batches on the wire (after compression).",
        ),
        _spec(
            "aiokafka_lite.producer.batch.records",
            "histogram",
            "{message}",
            "Records per acknowledged record batch.",
        ),
        _spec(
            "aiokafka_lite.producer.retries",
            "counter",
            "{message}",
            "Records re-enqueued after a retriable error.",
        ),
        _spec(
            "aiokafka_lite.producer.buffer.available",
            "updowncounter",
            "By",
            "Unused buffer_memory (records waiting or in flight hold the rest).",
        ),
        _spec("aiokafka_lite.producer.buffer.limit", "updowncounter", "By", "buffer_memory."),
        _spec(
            "aiokafka_lite.producer.requests.in_flight",
            "updowncounter",
            "{request}",
            "Produce requests awaiting an answer.",
        ),
        _spec(
            "aiokafka_lite.consumer.fetched.bytes",
            "counter",
            "By",
            "Record-batch bytes received in fetch answers.",
        ),
        _spec(
            "aiokafka_lite.consumer.lag",
            "gauge",
            "{message}",
            "Records between the position and the high watermark (read_committed: last stable offset).",
        ),
        _spec(
            "aiokafka_lite.consumer.assigned_partitions",
            "updowncounter",
            "{partition}",
            "Partitions assigned to the consumer.",
        ),
        _spec(
            "aiokafka_lite.consumer.buffered.bytes",
            "updowncounter",
            "By",
            "Fetched record bytes not handed out yet.",
        ),
        _spec("aiokafka_lite.consumer.rebalances", "counter", "{rebalance}", "Completed group rebalances."),
        _spec(
            "aiokafka_lite.consumer.rebalance.time",
            "counter",
            "s",
            "Time spent in completed rebalances (from preparing to join to the installed assignment).",
        ),
        _spec(
            "aiokafka_lite.share.acknowledged",
            "counter",
            "{message}",
            "Share-group records whose acknowledgement the broker answered (outcome ok/failed).",
        ),
    )
}


# --------------------------------------------------------------------------- collection

#: Request APIs that are messaging operations: (operation name, operation type).
_OPERATIONS = {
    0: ("send", "send"),  # Produce
    1: ("receive", "receive"),  # Fetch
    8: ("commit", "settle"),  # OffsetCommit
    78: ("receive", "receive"),  # ShareFetch
    79: ("acknowledge", "settle"),  # ShareAcknowledge
}


def operation_for_api(api_key: int) -> tuple[str, str] | None:
    """``(messaging.operation.name, messaging.operation.type)`` for a request API, or
    None when it is not a messaging operation (Metadata, JoinGroup...)."""
    return _OPERATIONS.get(api_key)


def client_kind(client: object) -> str:
    return {
        "Producer": "producer",
        "Consumer": "consumer",
        "Admin": "admin",
        "ShareConsumer": "share_consumer",
        "OrderedWorkers": "ordered_workers",
        "ShareWorkers": "share_workers",
        "TransactSession": "transact_session",
    }.get(type(client).__name__, type(client).__name__.lower())


#: Kinds that run handlers (and report messaging.process.duration) rather than clients.
PROCESSOR_KINDS = frozenset({"ordered_workers", "share_workers", "transact_session"})


def _consumer_of(workers: object) -> Any:
    return getattr(workers, "consumer", None) or getattr(workers, "_consumer", None)


class _Collector:
    def __init__(self) -> None:
        self._points: dict[str, dict[Attrs, Point]] = {name: {} for name in SPECS}

    def add(self, name: str, attrs: dict[str, Any], value: float | HistogramValue) -> None:
        key: Attrs = tuple(sorted((k, str(v)) for k, v in attrs.items()))
        points = self._points[name]
        old = points.get(key)
        if old is None:
            points[key] = Point(key, value)
        elif isinstance(old.value, HistogramValue):
            assert isinstance(value, HistogramValue)
            old.value.merge(value)
        else:
            # Clients sharing a client_id: their series add up (every metric here is additive).
            assert not isinstance(value, HistogramValue)
            old.value += value

    def families(self) -> list[MetricFamily]:
        return [MetricFamily(SPECS[name], list(points.values())) for name, points in self._points.items()]


def _hist(snapshot: dict[str, Any]) -> HistogramValue:
    return HistogramValue(
        tuple(snapshot["bounds"]), list(snapshot["counts"]), int(snapshot["count"]), float(snapshot["sum"])
    )


def _client_of(client: object) -> Any:
    return getattr(client, "client", None) or getattr(client, "_client", None)


def collect(*clients: object, names: Iterable[str] | None = None) -> list[MetricFamily]:
    """Metric families of ``clients`` (default: every live registered client), all of
    ``SPECS`` or only ``names``. Points with the same attributes (clients sharing a
    ``client_id``) are summed; a ``Client`` shared by several of them is counted once
    (under the first)."""
    targets = list(clients) if clients else live_clients()
    out = _Collector()
    seen_net: set[int] = set()
    for client in targets:
        snap: dict[str, Any] = cast(Any, client).metrics()
        kind = client_kind(client)
        workers = kind in PROCESSOR_KINDS
        net = _client_of(_consumer_of(client) if workers else client)
        base = {
            "messaging.system": "kafka",
            "aiokafka_lite.client.kind": kind,
            "messaging.client.id": net.config.client_id if net is not None else "",
        }
        if workers:
            process = {
                **base,
                "messaging.consumer.group.name": snap["group_id"] or "",
                "messaging.operation.name": "process",
                "messaging.operation.type": "process",
            }
            out.add("messaging.process.duration", process, _hist(snap["process_duration"]))
            continue
        client_snap = snap.get("client", snap)
        if net is not None and id(net) not in seen_net:
            seen_net.add(id(net))
            _collect_client(out, base, client_snap, net.describe_api)
        if kind == "producer":
            _collect_producer(out, base, snap)
        elif kind in ("consumer", "share_consumer"):
            _collect_consumer(out, base, snap)
    families = out.families()
    if names is not None:
        wanted = set(names)
        families = [f for f in families if f.name in wanted]
    return families


def _collect_client(
    out: _Collector, base: dict[str, Any], snap: dict[str, Any], api_name: Callable[[int], str]
) -> None:
    """``api_name``: the network client's own naming of API keys (core knows no protocol)."""
    out.add("aiokafka_lite.client.retries", base, snap.get("retries", 0))
    for kind, n in snap.get("errors_by_type", {}).items():
        out.add("aiokafka_lite.client.errors", {**base, "error.type": kind}, n)
    for node_id, b in snap.get("brokers", {}).items():
        broker = {**base, "kafka.broker.id": node_id, "server.address": b["host"], "server.port": b["port"]}
        out.add("aiokafka_lite.requests", broker, b["requests"])
        out.add("aiokafka_lite.requests.in_flight", broker, b["in_flight"])
        out.add("aiokafka_lite.network.io", {**broker, "network.io.direction": "transmit"}, b["bytes_sent"])
        out.add(
            "aiokafka_lite.network.io", {**broker, "network.io.direction": "receive"}, b["bytes_received"]
        )
        out.add("aiokafka_lite.broker.connected", broker, 1 if b["connected"] else 0)
        out.add("aiokafka_lite.connections", broker, b["connects"])
        out.add("aiokafka_lite.connection.errors", broker, b["connect_errors"])
        out.add("aiokafka_lite.disconnects", broker, b["disconnects"])
        out.add("aiokafka_lite.throttle.time", broker, b["throttle_ms_total"] / 1000)
        for api, hist in b.get("latency_by_api", {}).items():
            api_attrs = {**broker, "kafka.api.name": api_name(api)}
            out.add("aiokafka_lite.request.duration", api_attrs, _hist(hist))
            op = operation_for_api(api)
            if op is not None:
                op_attrs = {
                    **broker,
                    "messaging.operation.name": op[0],
                    "messaging.operation.type": op[1],
                }
                out.add("messaging.client.operation.duration", op_attrs, _hist(hist))
        for api, n in b.get("errors_by_api", {}).items():
            out.add("aiokafka_lite.request.errors", {**broker, "kafka.api.name": api_name(api)}, n)


def _collect_producer(out: _Collector, base: dict[str, Any], snap: dict[str, Any]) -> None:
    send = {**base, "messaging.operation.name": "send", "messaging.operation.type": "send"}
    for topic, c in snap.get("sent_by_topic", {}).items():
        dest = {**send, "messaging.destination.name": topic}
        out.add("messaging.client.sent.messages", dest, c["records"])
        out.add("aiokafka_lite.producer.sent.bytes", dest, c["bytes"])
        out.add("aiokafka_lite.producer.batches", dest, c["batches"])
    for topic, by_kind in snap.get("failed_by_topic", {}).items():
        for kind, n in by_kind.items():
            attrs = {**send, "messaging.destination.name": topic, "error.type": kind}
            out.add("messaging.client.sent.messages", attrs, n)
    out.add("aiokafka_lite.producer.batch.size", base, _hist(snap["batch_size_bytes"]))
    out.add("aiokafka_lite.producer.batch.records", base, _hist(snap["batch_size_records"]))
    out.add("aiokafka_lite.producer.retries", base, snap.get("records_retried", 0))
    out.add("aiokafka_lite.producer.buffer.available", base, snap["buffer_available_bytes"])
    out.add("aiokafka_lite.producer.buffer.limit", base, snap["buffer_total_bytes"])
    out.add("aiokafka_lite.producer.requests.in_flight", base, snap["requests_in_flight"])


def _collect_consumer(out: _Collector, base: dict[str, Any], snap: dict[str, Any]) -> None:
    group = snap.get("group") or {}
    attrs = dict(base)
    if group.get("group_id"):
        attrs["messaging.consumer.group.name"] = group["group_id"]
    receive = {**attrs, "messaging.operation.name": "poll", "messaging.operation.type": "receive"}
    for topic, n in snap.get("consumed_by_topic", {}).items():
        out.add("messaging.client.consumed.messages", {**receive, "messaging.destination.name": topic}, n)
    for topic, n in snap.get("fetched_bytes_by_topic", {}).items():
        out.add("aiokafka_lite.consumer.fetched.bytes", {**attrs, "messaging.destination.name": topic}, n)
    out.add("aiokafka_lite.consumer.assigned_partitions", attrs, snap.get("assigned_partitions", 0))
    for p in snap.get("partitions", ()):
        if p["lag"] is not None:
            where = {
                **attrs,
                "messaging.destination.name": p["topic"],
                "messaging.destination.partition.id": p["partition"],
            }
            out.add("aiokafka_lite.consumer.lag", where, p["lag"])
    if "buffered_bytes" in snap:
        out.add("aiokafka_lite.consumer.buffered.bytes", attrs, snap["buffered_bytes"])
    if "rebalances" in group:
        out.add("aiokafka_lite.consumer.rebalances", attrs, group["rebalances"])
        out.add("aiokafka_lite.consumer.rebalance.time", attrs, group["rebalance_seconds_total"])
    if "acknowledged" in snap:
        out.add(
            "aiokafka_lite.share.acknowledged",
            {**attrs, "aiokafka_lite.outcome": "ok"},
            snap["acknowledged"],
        )
        out.add(
            "aiokafka_lite.share.acknowledged",
            {**attrs, "aiokafka_lite.outcome": "failed"},
            snap["acknowledge_failed"],
        )
