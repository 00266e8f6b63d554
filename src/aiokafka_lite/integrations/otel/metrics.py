"""The clients' metrics through OpenTelemetry metrics.

``instrument_metrics(meter_provider=None)`` reports every Producer, Consumer, Admin and
ShareConsumer, those created later included, until ``uninstrument_metrics()``:

* counters, up-down counters and gauges are observable instruments whose callbacks read
  the clients' own counters (``metrics()``) at each collection, so the clients pay
  nothing extra while sending and fetching;
* histograms are recorded as values come (OpenTelemetry has no observable histogram):
  request latency (``messaging.client.operation.duration``,
  ``aiokafka_lite.request.duration``) from the ``on_response_read`` hook, batch sizes
  and handler durations (``messaging.process.duration``) through the listener of the
  client's own histogram; none of it is called while not instrumented.

Names, units and attributes are those of ``aiokafka_lite.core.client_metrics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import metadata as _pkg_metadata
from typing import Any

from aiokafka_lite.core import client_metrics as obs

__all__ = ["KafkaMetrics", "instrument_metrics", "is_metrics_instrumented", "uninstrument_metrics"]

_METER_NAME = "aiokafka_lite"
_current: KafkaMetrics | None = None


def _version() -> str:
    try:
        return _pkg_metadata.version("aiokafka_lite")
    except _pkg_metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "0"


class _LatencyHook:
    """``on_response_read`` for one ``Client``: records each request's latency."""

    def __init__(self, owner: KafkaMetrics, client: Any, net: Any) -> None:
        self._owner = owner
        self._net = net
        self._base = {
            "messaging.system": "kafka",
            "aiokafka_lite.client.kind": obs.client_kind(client),
            "messaging.client.id": net.config.client_id,
        }
        self._brokers: dict[int, dict[str, Any]] = {}
        self._api_names: dict[int, str] = {}

    def _broker(self, node_id: int) -> dict[str, Any]:
        attrs = self._brokers.get(node_id)
        if attrs is None:
            attrs = {**self._base, "kafka.broker.id": node_id}
            address = self._net.broker_address(node_id)
            if address is not None:
                attrs["server.address"], attrs["server.port"] = address
            self._brokers[node_id] = attrs
        return attrs

    def on_response_read(
        self,
        node_id: int,
        api_key: int,
        api_version: int,
        bytes_read: int,
        latency_s: float,
        error: BaseException | None,
    ) -> None:
        owner = self._owner
        if not owner.active:
            return
        broker = self._broker(node_id)
        name = self._api_names.get(api_key)
        if name is None:
            from aiokafka_lite.net.connection import api_name

            name = self._api_names[api_key] = api_name(api_key)
        attrs = {**broker, "kafka.api.name": name}
        if error is not None:
            from aiokafka_lite.net.client import error_type_name

            attrs["error.type"] = error_type_name(error)
        owner.request_duration.record(latency_s, attrs)
        op = obs.operation_for_api(api_key)
        if op is not None:
            op_attrs = {**broker, "messaging.operation.name": op[0], "messaging.operation.type": op[1]}
            if error is not None:
                op_attrs["error.type"] = attrs["error.type"]
            owner.operation_duration.record(latency_s, op_attrs)


class KafkaMetrics:
    """What ``instrument_metrics`` set up; ``uninstrument()`` stops it."""

    def __init__(self, meter_provider: Any = None, clients: Iterable[object] | None = None) -> None:
        from opentelemetry import metrics as otel_metrics

        provider = meter_provider if meter_provider is not None else otel_metrics.get_meter_provider()
        self.meter = provider.get_meter(_METER_NAME, _version())
        self.active = True
        #: Only these clients (None: every registered client).
        self._only = list(clients) if clients is not None else None
        self._hooks: dict[int, tuple[Any, _LatencyHook]] = {}  # id(Client) -> (Client, hook)
        self._listened: list[Any] = []  # client histograms whose listener records here
        specs = obs.SPECS
        for name, spec in specs.items():
            if spec.kind == "histogram":
                continue
            callback = self._callback(name)
            if spec.kind == "counter":
                self.meter.create_observable_counter(name, [callback], spec.unit, spec.description)
            elif spec.kind == "updowncounter":
                self.meter.create_observable_up_down_counter(name, [callback], spec.unit, spec.description)
            else:
                self.meter.create_observable_gauge(name, [callback], spec.unit, spec.description)
        latency = list(_latency_buckets())
        self.operation_duration = _histogram(
            self.meter, specs["messaging.client.operation.duration"], latency
        )
        self.request_duration = _histogram(self.meter, specs["aiokafka_lite.request.duration"], latency)
        self.process_duration = _histogram(self.meter, specs["messaging.process.duration"], latency)
        from aiokafka_lite.net.hooks import BATCH_BYTES_BUCKETS, BATCH_RECORDS_BUCKETS

        self.batch_size = _histogram(
            self.meter, specs["aiokafka_lite.producer.batch.size"], list(BATCH_BYTES_BUCKETS)
        )
        self.batch_records = _histogram(
            self.meter, specs["aiokafka_lite.producer.batch.records"], list(BATCH_RECORDS_BUCKETS)
        )
        # Handler timing costs two clock reads per record: on while instrumented.
        self._timing_was = obs.handler_timing
        obs.enable_handler_timing()
        for client in self._clients():
            self._attach(client)
        self._stop_tracking = obs.on_track(self._attach) if self._only is None else None

    def _clients(self) -> list[Any]:
        if self._only is not None:
            return [c for c in self._only if not getattr(c, "closed", False)]
        return obs.live_clients()

    def _attach(self, client: Any) -> None:
        if not self.active:
            return
        kind = obs.client_kind(client)
        if kind in obs.PROCESSOR_KINDS:
            consumer = getattr(client, "consumer", None) or getattr(client, "_consumer", None)
            net = getattr(consumer, "client", None) or getattr(consumer, "_client", None)
            attrs = {
                "messaging.system": "kafka",
                "aiokafka_lite.client.kind": kind,
                "messaging.client.id": net.config.client_id if net is not None else "",
                "messaging.consumer.group.name": client.metrics()["group_id"] or "",
                "messaging.operation.name": "process",
                "messaging.operation.type": "process",
            }
            histogram = client.process_seconds if kind == "transact_session" else client.stats.process_seconds
            self._listen(histogram, self.process_duration, attrs)
            return
        net = getattr(client, "client", None) or getattr(client, "_client", None)
        if net is None:
            return
        if kind == "producer":
            # The sender's batch histograms; a producer that fails to start and is started
            # again gets a new sender, whose batches are then in the Prometheus text only.
            sender = client._sender
            attrs = {
                "messaging.system": "kafka",
                "aiokafka_lite.client.kind": kind,
                "messaging.client.id": net.config.client_id,
            }
            self._listen(sender.batch_bytes, self.batch_size, attrs)
            self._listen(sender.batch_records, self.batch_records, attrs)
        if id(net) in self._hooks:
            return
        hook = _LatencyHook(self, client, net)
        net.add_hooks(hook)
        self._hooks[id(net)] = (net, hook)

    def _listen(self, source: Any, target: Any, attrs: dict[str, Any]) -> None:
        """Record every value ``source`` (a client-side Histogram) records into ``target``."""

        def listener(value: float) -> None:
            target.record(value, attrs)

        source.listener = listener
        self._listened.append(source)

    def _callback(self, name: str) -> Callable[[Any], Iterable[Any]]:
        from opentelemetry.metrics import Observation

        def observe(_options: Any) -> Iterable[Any]:
            if not self.active:
                return []
            out = []
            for family in obs.collect(*self._clients(), names=(name,)):
                for point in family.points:
                    value = point.value
                    assert not isinstance(value, obs.HistogramValue)
                    out.append(Observation(value, dict(point.attributes)))
            return out

        return observe

    def uninstrument(self) -> None:
        """Stop reporting: callbacks observe nothing more, hooks are removed."""
        global _current
        if self.active:
            obs.enable_handler_timing(self._timing_was)
        self.active = False
        if self._stop_tracking is not None:
            self._stop_tracking()
        for net, hook in self._hooks.values():
            net.remove_hooks(hook)
        self._hooks.clear()
        for source in self._listened:
            source.listener = None
        self._listened.clear()
        if _current is self:
            _current = None


def _latency_buckets() -> tuple[float, ...]:
    from aiokafka_lite.net.hooks import LATENCY_BUCKETS_S

    return LATENCY_BUCKETS_S


def _histogram(meter: Any, spec: obs.MetricSpec, boundaries: list[float]) -> Any:
    try:
        return meter.create_histogram(
            spec.name,
            unit=spec.unit,
            description=spec.description,
            explicit_bucket_boundaries_advisory=boundaries,
        )
    except TypeError:  # pragma: no cover - opentelemetry-api < 1.23 has no advisory
        return meter.create_histogram(spec.name, unit=spec.unit, description=spec.description)


def instrument_metrics(
    meter_provider: Any = None, *, clients: Iterable[object] | None = None
) -> KafkaMetrics:
    """Report the clients' metrics through OpenTelemetry (``meter_provider`` defaults to
    the global one). Without ``clients``, every client, present and future, until
    ``uninstrument_metrics()``; calling it again replaces the previous setup."""
    global _current
    if _current is not None:
        _current.uninstrument()
    metrics = KafkaMetrics(meter_provider, clients)
    _current = metrics
    return metrics


def uninstrument_metrics() -> None:
    """Undo ``instrument_metrics``."""
    if _current is not None:
        _current.uninstrument()


def is_metrics_instrumented() -> bool:
    return _current is not None
