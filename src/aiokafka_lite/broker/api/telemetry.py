"""GetTelemetrySubscriptions and PushTelemetry (KIP-714) for the embedded broker.

As Kafka's ``ClientMetricsManager``, simplified: the broker gives each client an instance
id, answers the active subscription (the union of the configured ones; none configured:
no metrics requested and the default 5-minute interval), accepts zstd, lz4, gzip and
snappy, and takes pushes. It does not export metrics anywhere: it keeps each decompressed
payload (``received(state)``) so tests can read what a client pushed. Subscriptions are
set with ``set_subscription`` (the embedded broker has no CLIENT_METRICS config resource).
Not modelled: the per-client push-rate check (``THROTTLING_QUOTA_EXCEEDED`` for a push
before its interval) and client-matching patterns of subscriptions.
"""

from __future__ import annotations

import uuid
import weakref
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.wire.compression import Compression, decompress
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

__all__ = [
    "ReceivedPush",
    "received",
    "register_telemetry_handlers",
    "set_subscription",
    "subscription_names",
]

DEFAULT_INTERVAL_MS: Final = 5 * 60 * 1000
TELEMETRY_MAX_BYTES: Final = 1024 * 1024  # Kafka's telemetry.max.bytes default
ACCEPTED: Final = (Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY)
_ZERO: Final = uuid.UUID(int=0)
_INVALID_REQUEST: Final = 42
_UNKNOWN_SUBSCRIPTION_ID: Final = 117
_UNSUPPORTED_COMPRESSION_TYPE: Final = 76
_TELEMETRY_TOO_LARGE: Final = 118


@dataclass(frozen=True, slots=True)
class ReceivedPush:
    client_instance_id: uuid.UUID
    client_id: str | None
    subscription_id: int
    terminating: bool
    compression_type: int
    metrics: bytes  # decompressed OTLP MetricsData


@dataclass
class _Telemetry:
    subscriptions: dict[str, tuple[tuple[str, ...], int]] = field(default_factory=dict)
    pushes: list[ReceivedPush] = field(default_factory=list)
    terminated: set[uuid.UUID] = field(default_factory=set)
    known: set[uuid.UUID] = field(default_factory=set)

    def active(self) -> tuple[tuple[str, ...], int, int]:
        """(requested prefixes, interval, subscription id) of the union of subscriptions."""
        metrics = sorted({m for ms, _ in self.subscriptions.values() for m in ms})
        intervals = [i for _, i in self.subscriptions.values()]
        interval = min(intervals) if intervals else DEFAULT_INTERVAL_MS
        prefixes = tuple("" if m == "*" else m for m in metrics)
        sub_id = zlib.crc32(repr((prefixes, interval)).encode()) & 0x7FFFFFFF
        return prefixes, interval, sub_id


_STATES: weakref.WeakKeyDictionary[ClusterState, _Telemetry] = weakref.WeakKeyDictionary()


def _of(state: ClusterState) -> _Telemetry:
    t = _STATES.get(state)
    if t is None:
        t = _STATES[state] = _Telemetry()
    return t


def set_subscription(state: ClusterState, name: str, metrics: Sequence[str], interval_ms: int) -> None:
    """Set (or with no ``metrics`` remove) the client-metrics subscription ``name``
    (``metrics``: name prefixes, ``"*"`` for all, as Kafka's ``metrics`` config)."""
    t = _of(state)
    if metrics:
        t.subscriptions[name] = (tuple(metrics), interval_ms)
    else:
        t.subscriptions.pop(name, None)


def subscription_names(state: ClusterState) -> list[str]:
    """Names of the client metrics subscriptions (ListConfigResources' CLIENT_METRICS)."""
    return sorted(_of(state).subscriptions)


def received(state: ClusterState) -> list[ReceivedPush]:
    """The pushes the cluster took, oldest first."""
    return list(_of(state).pushes)


async def get_subscriptions(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, GetTelemetrySubscriptionsRequest)
    t = _of(ctx.cluster)
    instance = req.client_instance_id if req.client_instance_id != _ZERO else uuid.uuid4()
    t.known.add(instance)
    prefixes, interval, sub_id = t.active()
    return GetTelemetrySubscriptionsResponse(
        client_instance_id=instance,
        subscription_id=sub_id,
        accepted_compression_types=[int(c) for c in ACCEPTED],
        push_interval_ms=interval,
        telemetry_max_bytes=TELEMETRY_MAX_BYTES,
        delta_temporality=True,
        requested_metrics=list(prefixes),
    )


async def push(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, PushTelemetryRequest)
    t = _of(ctx.cluster)
    instance = req.client_instance_id
    if instance == _ZERO or instance in t.terminated:
        return PushTelemetryResponse(error_code=_INVALID_REQUEST)
    if instance not in t.known or req.subscription_id != t.active()[2]:
        return PushTelemetryResponse(error_code=_UNKNOWN_SUBSCRIPTION_ID)
    if req.compression_type != Compression.NONE and req.compression_type not in [int(c) for c in ACCEPTED]:
        return PushTelemetryResponse(error_code=_UNSUPPORTED_COMPRESSION_TYPE)
    if len(req.metrics) > TELEMETRY_MAX_BYTES:
        return PushTelemetryResponse(error_code=_TELEMETRY_TOO_LARGE)
    body = bytes(req.metrics)
    if req.compression_type != Compression.NONE:
        try:
            body = decompress(Compression(req.compression_type), body, max_size=16 * TELEMETRY_MAX_BYTES)
        except Exception:
            return PushTelemetryResponse(error_code=_INVALID_REQUEST)
    if req.terminating:
        t.terminated.add(instance)
    t.pushes.append(
        ReceivedPush(
            instance, ctx.client_id, req.subscription_id, req.terminating, req.compression_type, body
        )
    )
    return PushTelemetryResponse()


def register_telemetry_handlers(registry: HandlerRegistry, state: ClusterState) -> None:
    registry.register(GetTelemetrySubscriptionsRequest.API_KEY, get_subscriptions, 0, 0)
    registry.register(PushTelemetryRequest.API_KEY, push, 0, 0)
