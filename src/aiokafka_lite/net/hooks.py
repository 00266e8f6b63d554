"""Observability: hook callbacks and per-broker metrics.

Hooks are plain objects implementing any subset of the ``Hooks`` methods (in the
spirit of franz-go's hooks): the client calls only the methods an object defines, so
a hook class may implement just ``on_response_read``. Hooks run synchronously on the
event loop, must be quick and must not raise (exceptions are logged and swallowed).
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "BATCH_BYTES_BUCKETS",
    "BATCH_RECORDS_BUCKETS",
    "LATENCY_BUCKETS_S",
    "BrokerStats",
    "Histogram",
    "HookDispatcher",
    "Hooks",
]

log = logging.getLogger("aiokafka_lite.net.hooks")


class Hooks(Protocol):
    """Every callback is optional; ``node_id`` is negative for bootstrap connections."""

    def on_broker_connect(
        self, node_id: int, host: str, port: int, elapsed_s: float, error: BaseException | None
    ) -> None:
        """A connection attempt finished (``error`` is None on success, after ApiVersions/SASL)."""

    def on_broker_disconnect(self, node_id: int, host: str, port: int) -> None:
        """An established connection closed."""

    def on_request_written(
        self, node_id: int, api_key: int, api_version: int, bytes_written: int, error: BaseException | None
    ) -> None:
        """A request frame was handed to the transport."""

    def on_response_read(
        self,
        node_id: int,
        api_key: int,
        api_version: int,
        bytes_read: int,
        latency_s: float,
        error: BaseException | None,
    ) -> None:
        """A response arrived (or the request failed: timeout, disconnect, corrupt frame)."""

    def on_throttle(self, node_id: int, throttle_ms: int, api_key: int) -> None:
        """A broker reported quota throttling; the client delays further sends to it."""


_HOOK_NAMES = (
    "on_broker_connect",
    "on_broker_disconnect",
    "on_request_written",
    "on_response_read",
    "on_throttle",
)


class HookDispatcher:
    """Calls every registered hook implementing a method; never propagates their errors."""

    __slots__ = ("_by_name",)

    def __init__(self) -> None:
        self._by_name: dict[str, list[Any]] = {name: [] for name in _HOOK_NAMES}

    def add(self, hooks: object) -> None:
        found = False
        for name in _HOOK_NAMES:
            fn = getattr(hooks, name, None)
            if callable(fn):
                self._by_name[name].append(fn)
                found = True
        if not found:
            raise TypeError(f"{type(hooks).__name__} implements none of the hook methods {_HOOK_NAMES}")

    def remove(self, hooks: object) -> None:
        """Unregister ``hooks`` (a no-op for methods it was never registered for)."""
        for name in _HOOK_NAMES:
            fn = getattr(hooks, name, None)
            if fn is not None:
                self._by_name[name] = [f for f in self._by_name[name] if f != fn]

    def has(self, name: str) -> bool:
        return bool(self._by_name[name])

    def call(self, name: str, *args: Any) -> None:
        for fn in self._by_name[name]:
            try:
                fn(*args)
            except Exception:
                log.exception("hook %s raised; ignoring", name)


#: Bucket upper bounds (seconds) of request latency histograms: the explicit boundaries
#: OpenTelemetry's messaging semantic conventions advise for
#: ``messaging.client.operation.duration``.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip

#: Bucket upper bounds of the producer's batch histograms (bytes, records per batch), here
#: beside the latency ones so the sender and the OpenTelemetry metrics share them without
#: integrations importing produce.
BATCH_BYTES_BUCKETS: tuple[float, ...] = tuple(float(256 * 4**i) for i in range(9))
BATCH_RECORDS_BUCKETS: tuple[float, ...] = (
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0,
)  # fmt: skip


class Histogram:
    """A cumulative fixed-bucket histogram: ``counts[i]`` observations fell at or below
    ``bounds[i]`` and above ``bounds[i-1]``; the last count is above every bound.

    Recording is a bisect and three adds (no allocation), so it can sit on per-request
    and per-batch paths. ``listener``, when set (by an exporter such as
    ``aiokafka_lite.integrations.otel.metrics``), is called with every value recorded.
    """

    __slots__ = ("bounds", "count", "counts", "listener", "max", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0
        self.max = 0.0
        self.listener: Callable[[float], None] | None = None

    def record(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value
        if value > self.max:
            self.max = value
        if self.listener is not None:
            self.listener(value)

    def snapshot(self) -> dict[str, Any]:
        return {
            "bounds": list(self.bounds),
            "counts": list(self.counts),
            "count": self.count,
            "sum": self.sum,
            "max": self.max,
        }


@dataclass(slots=True)
class BrokerStats:
    """Counters for one broker, kept across reconnects."""

    max_samples: int = 1024
    requests: int = 0
    errors: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    connects: int = 0
    connect_errors: int = 0
    disconnects: int = 0
    throttle_ms_total: int = 0
    in_flight: int = 0
    latencies: deque[float] = field(default_factory=deque)
    #: Request latency per API key (a response or a failure ends the request).
    latency_by_api: dict[int, Histogram] = field(default_factory=dict)
    #: Requests that failed without a response (disconnect, timeout, corrupt frame), per API key.
    errors_by_api: dict[int, int] = field(default_factory=dict)

    def record_latency(self, seconds: float, api_key: int = -1) -> None:
        hist = self.latency_by_api.get(api_key)
        if hist is None:
            hist = self.latency_by_api[api_key] = Histogram(LATENCY_BUCKETS_S)
        hist.record(seconds)
        lat = self.latencies
        if len(lat) >= self.max_samples:
            lat.popleft()
        lat.append(seconds)

    def snapshot(self) -> dict[str, Any]:
        data = sorted(self.latencies)
        return {
            "requests": self.requests,
            "errors": self.errors,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "connects": self.connects,
            "connect_errors": self.connect_errors,
            "disconnects": self.disconnects,
            "throttle_ms_total": self.throttle_ms_total,
            "in_flight": self.in_flight,
            "latency_by_api": {api: h.snapshot() for api, h in sorted(self.latency_by_api.items())},
            "errors_by_api": dict(sorted(self.errors_by_api.items())),
            "latency_ms": {
                "p50": _percentile(data, 50),
                "p90": _percentile(data, 90),
                "p99": _percentile(data, 99),
                "max": data[-1] * 1000 if data else None,
                "samples": len(data),
            },
        }


def _percentile(sorted_data: list[float], pct: float) -> float | None:
    """Nearest-rank percentile in milliseconds."""
    if not sorted_data:
        return None
    rank = max(1, math.ceil(pct / 100 * len(sorted_data)))
    return sorted_data[rank - 1] * 1000
