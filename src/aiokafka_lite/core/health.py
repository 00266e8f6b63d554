"""``health()``: a small typed summary of a client for readiness probes and dashboards.

The judgement (``Health.ready``), the same for every client:

1. the client is started and not closed;
2. at least one broker is reachable: a connection to it is open, or its last connection
   attempt succeeded (connections close when idle, which is no sign of trouble; a broker
   that went away shows up as a failed reconnect, which the client makes as soon as it
   needs the broker or refreshes metadata);
3. a producer has no fatal error (fenced, transactional state FATAL_ERROR...);
4. a consumer whose subscription a group manages is a stable member (not joining,
   rebalancing, failed or left); a share consumer likewise; a consumer without a group,
   or assigning partitions itself, needs nothing more.

Not ready means "do not route work here now", not "restart me": a rebalance makes a
consumer briefly not ready. ``reasons`` says which rule failed. Lag and the last error are
reported but never judged: what lag is too much depends on the application.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from aiokafka_lite.core.structs import TopicPartition

__all__ = ["BrokerHealth", "ErrorInfo", "Health", "build_health", "judge"]


@dataclass(frozen=True, slots=True)
class BrokerHealth:
    """One broker as a client sees it; ``reachable`` unless its last connect failed."""

    node_id: int
    host: str
    port: int
    connected: bool
    #: Consecutive failed connection attempts (0 once one succeeds).
    connect_failures: int

    @property
    def reachable(self) -> bool:
        return self.connected or self.connect_failures == 0


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The latest error a client saw (connect, request, partition answer, delivery)."""

    #: The broker's error name (``NOT_LEADER_OR_FOLLOWER``) or the exception class.
    type: str
    message: str
    #: Wall-clock time (``time.time()``) it happened.
    at: float

    @property
    def age_s(self) -> float:
        return max(time.time() - self.at, 0.0)


@dataclass(frozen=True, slots=True)
class Health:
    """What ``health()`` returns. ``ready``: started and not closed, a broker reachable
    (connected, or its last connection attempt succeeded), no fatal error, and for a
    group-managed consumer or a share consumer a stable member; ``reasons`` says which
    rule failed. Lag and ``last_error`` are reported, never judged."""

    #: ``producer``, ``consumer``, ``admin`` or ``share_consumer``.
    client: str
    client_id: str
    ready: bool
    #: Why it is not ready (empty when ready).
    reasons: tuple[str, ...]
    #: ``new``, ``running`` or ``closed``.
    state: str
    brokers: tuple[BrokerHealth, ...]
    group_id: str | None = None
    #: Membership state (``stable``, ``joining``...) for group and share consumers.
    group_state: str | None = None
    assigned_partitions: frozenset[TopicPartition] | None = None
    #: Total lag over the assigned partitions whose lag is known (consumers only).
    lag: int | None = None
    last_error: ErrorInfo | None = None

    @property
    def brokers_connected(self) -> int:
        return sum(1 for b in self.brokers if b.connected)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (for a ``/health`` endpoint)."""
        out = asdict(self)
        out["reasons"] = list(self.reasons)
        out["brokers"] = [asdict(b) for b in self.brokers]
        out["brokers_connected"] = self.brokers_connected
        if self.assigned_partitions is not None:
            out["assigned_partitions"] = [
                {"topic": tp.topic, "partition": tp.partition} for tp in sorted(self.assigned_partitions)
            ]
        if self.last_error is not None:
            out["last_error"] = {**asdict(self.last_error), "age_s": round(self.last_error.age_s, 3)}
        return out


def brokers_from(client_metrics: dict[str, Any]) -> tuple[BrokerHealth, ...]:
    """The brokers of a ``Client.metrics()`` snapshot: those from metadata, or the
    bootstrap servers while none is known."""
    items = client_metrics.get("brokers", {})
    known = {n: b for n, b in items.items() if n >= 0} or items
    return tuple(
        BrokerHealth(n, b["host"], b["port"], bool(b["connected"]), int(b.get("connect_failures", 0)))
        for n, b in sorted(known.items())
    )


def last_error_from(client_metrics: dict[str, Any]) -> ErrorInfo | None:
    err = client_metrics.get("last_error")
    return None if err is None else ErrorInfo(err["type"], err["message"], err["time"])


def judge(
    *,
    started: bool,
    closed: bool,
    brokers: tuple[BrokerHealth, ...],
    fatal: str | None = None,
    group_state: str | None = None,
    stable_state: str = "stable",
) -> tuple[str, tuple[str, ...]]:
    """``(state, reasons)`` by the rules of the module docstring; ready when no reasons."""
    if closed:
        return "closed", ("closed",)
    if not started:
        return "new", ("not started",)
    reasons: list[str] = []
    if not any(b.reachable for b in brokers):
        reasons.append("no broker reachable")
    if fatal is not None:
        reasons.append(f"fatal error: {fatal}")
    if group_state is not None and group_state != stable_state:
        reasons.append(f"group member is {group_state}, not {stable_state}")
    return "running", tuple(reasons)


def build_health(
    kind: str,
    client_metrics: dict[str, Any],
    client_id: str,
    *,
    started: bool,
    closed: bool,
    fatal: BaseException | None = None,
    group_id: str | None = None,
    group_state: str | None = None,
    group_managed: bool = True,
    assigned: frozenset[TopicPartition] | None = None,
    lag: int | None = None,
) -> Health:
    """The ``Health`` of a client from its parts (what each client's ``health()`` calls).
    ``group_managed=False``: the group state is reported but not judged (a consumer that
    assigns partitions itself and uses its group_id only to commit)."""
    brokers = brokers_from(client_metrics)
    state, reasons = judge(
        started=started,
        closed=closed,
        brokers=brokers,
        fatal=None if fatal is None else f"{type(fatal).__name__}: {fatal}",
        group_state=group_state if group_managed else None,
    )
    return Health(
        client=kind,
        client_id=client_id,
        ready=not reasons,
        reasons=reasons,
        state=state,
        brokers=brokers,
        group_id=group_id,
        group_state=group_state,
        assigned_partitions=assigned,
        lag=lag,
        last_error=last_error_from(client_metrics),
    )
