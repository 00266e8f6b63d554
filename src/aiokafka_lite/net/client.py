"""``Client``: the shared cluster view, connections and request routing.

One ``Client`` serves a Producer, a Consumer and an Admin alike. It owns:

* one ``BrokerConnection`` per broker and *lane* (``Lane``), opened on demand, with
  exponential reconnect backoff (and jitter) after failures, closed after
  ``connections_max_idle_ms`` idle. Brokers serve a connection's requests one at a
  time, in order, so group-coordinator traffic travels on its own lane instead of
  queueing behind a long-polling Fetch (the Java client keeps a separate coordinator
  connection for the same reason);
* the ``ClusterMetadata`` snapshot, refreshed every ``metadata_max_age_ms``, on demand
  (``request_metadata_refresh`` after NOT_LEADER_OR_FOLLOWER and friends) and after
  unexpected disconnects, with concurrent refreshes coalesced into one request;
* the coordinator cache (``CoordinatorLookup`` in coordinators.py: FindCoordinator,
  batched for brokers that support it);
* every background task it starts; ``close()`` cancels and awaits all of them;
* recovery when the brokers it knows are gone (KIP-899, KIP-1102; ``rebootstrap.py``
  decides when): with ``metadata_recovery_strategy='rebootstrap'`` it drops every broker
  learned from metadata and starts again from ``bootstrap_servers``, whose names are
  resolved anew at that point (``client_dns_lookup``). Unlike Java, which replaces its
  whole metadata cache by the bootstrap nodes, the topic layout is kept until the next
  Metadata response replaces it, so a consumer's subscription does not see its topics
  vanish for the moment of the rebootstrap; requests to a dropped broker fail as
  retriable connection errors meanwhile. Callers keep their deadlines throughout.

``send`` is a single attempt; ``retry`` wraps an operation with backoff-and-deadline
retries of retriable errors, refreshing metadata when an error says it is stale. Every
backoff (``retry_backoff``, ``reconnect_backoff``) is the one policy of ``net/retry.py``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, TypeVar

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.client_config import ClientConfig
from aiokafka_lite.net.connection import (
    BrokerConnection,
    Opener,
    api_name,
    canonical_host_names,
    describe_error,
    negotiate_version,
)
from aiokafka_lite.net.coordinators import CoordinatorLookup
from aiokafka_lite.net.hooks import BrokerStats, HookDispatcher
from aiokafka_lite.net.metadata import (
    BrokerInfo,
    ClusterMetadata,
    CoordinatorType,
    LeaderHint,
    TopicInfo,
    apply_leader_hints,
    apply_metadata,
    topic_error,
)
from aiokafka_lite.net.rebootstrap import REBOOTSTRAP_REQUIRED, RebootstrapPolicy
from aiokafka_lite.net.retry import Backoff, Retry
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

__all__ = ["Client", "Lane", "error_type_name", "parse_bootstrap"]

log = logging.getLogger("aiokafka_lite.net.client")

T = TypeVar("T")

_METADATA_KEY: Final = MetadataRequest.API_KEY
_FIND_COORDINATOR_KEY: Final = FindCoordinatorRequest.API_KEY
# What a coordinator lookup's authorization error most likely means (an ACL is missing).
_AUTHORIZATION_HINTS: Final = {
    E.GroupAuthorizationFailedError.code: "no ACL allows {principal} to use group {key!r} "
    "(a member needs Read on the group; describing it needs Describe)",
    E.TransactionalIdAuthorizationFailedError.code: "no ACL allows {principal} to use "
    "transactional id {key!r} (a transactional producer needs Write on it)",
}
_RETRIABLE_COORDINATOR: Final = frozenset({14, 15})  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or ``["h1:9092", ...]`` -> [(host, port)]; IPv6 as ``[::1]:9092``."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        if not isinstance(raw, str):
            raise E.ConfigError(f"bootstrap server must be a 'host:port' string, got {raw!r}")
        item = raw.strip()
        if not item:
            continue
        host, sep, port_text = item.rpartition(":")
        if not sep:
            host, port_text = item, "9092"
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port = int(port_text)
        except ValueError:
            raise E.ConfigError(f"invalid port in bootstrap server {item!r}") from None
        if not host or not 0 < port < 65536:
            raise E.ConfigError(f"invalid bootstrap server {item!r}")
        out.append((host, port))
    if not out:
        raise E.ConfigError("bootstrap_servers is empty")
    return out


def error_type_name(exc: BaseException) -> str:
    """How metrics and health name an error: a broker error by its protocol name
    (``NOT_LEADER_OR_FOLLOWER``), anything else by its class (``KafkaConnectionError``)."""
    if isinstance(exc, E.BrokerResponseError):
        return exc.name
    return type(exc).__name__


class Lane(StrEnum):
    """Which of a broker's connections a request travels on.

    ``DEFAULT`` carries everything (Produce, Fetch, Metadata, Admin...);
    ``COORDINATOR`` carries group-coordinator requests (JoinGroup, SyncGroup,
    Heartbeat, OffsetCommit/Fetch, LeaveGroup), so they never wait behind a Fetch
    long poll on the same socket. Each (broker, lane) gets its own connection,
    opened lazily: a lane nobody uses costs nothing.
    """

    DEFAULT = "default"
    COORDINATOR = "coordinator"


_DEFAULT_ONLY: Final = (Lane.DEFAULT,)
_ALL_LANES: Final = tuple(Lane)


@dataclass(eq=False, slots=True)
class _Slot:
    """One lane's connection to one broker."""

    conn: BrokerConnection | None = None
    connecting: asyncio.Task[BrokerConnection] | None = None


@dataclass(eq=False)
class _Node:
    """A broker: its address, counters and negotiated versions are shared by its lanes,
    and so is reconnect backoff (a failed connect says the broker is unreachable, not
    the lane)."""

    node_id: int
    host: str
    port: int
    stats: BrokerStats
    lanes: dict[Lane, _Slot] = field(default_factory=dict)
    failures: int = 0
    backoff_until: float = 0.0
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)

    def slot(self, lane: Lane) -> _Slot:
        slot = self.lanes.get(lane)
        if slot is None:
            slot = self.lanes[lane] = _Slot()
        return slot

    def ready_conn(self, lane: Lane) -> BrokerConnection | None:
        slot = self.lanes.get(lane)
        conn = slot.conn if slot is not None else None
        return conn if conn is not None and conn.ready else None

    def open_conns(self) -> list[tuple[Lane, BrokerConnection]]:
        return [(lane, s.conn) for lane, s in self.lanes.items() if s.conn is not None]

    @property
    def connected(self) -> bool:
        return any(c.ready for _, c in self.open_conns())


class Client:
    """Cluster metadata, broker connections and request routing (see module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        config: ClientConfig | None = None,
        opener: Opener | None = None,
        **options: Any,
    ) -> None:
        if config is None:
            self.config = ClientConfig.from_options(**options)
        elif options:
            self.config = config.replace(**options)
        else:
            self.config = config
        #: How long to wait before retrying a failed request (``retry_backoff_ms`` up to
        #: ``retry_backoff_max_ms``, jittered): every retry loop of the client's users too.
        self.retry_backoff = Backoff.for_retries(self.config)
        #: How long a broker is left alone after a failed connect (``reconnect_backoff_ms``...).
        self.reconnect_backoff = Backoff.for_reconnects(self.config)
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._opener = opener
        self._hooks = HookDispatcher()
        self._cluster = ClusterMetadata()
        self._nodes: dict[int, _Node] = {}
        self._install_seeds(self._bootstrap)
        #: When to go back to the bootstrap servers (KIP-899/KIP-1102).
        self.rebootstrap_policy = RebootstrapPolicy(
            enabled=self.config.metadata_recovery_strategy == "rebootstrap",
            trigger_s=self.config.metadata_recovery_rebootstrap_trigger_ms / 1000,
        )
        self._owner: _backend.TaskOwner | None = None  # made at start(), for the running library
        self._topics: set[str] = set()
        self._coordinators = CoordinatorLookup(self._find_coordinators, self._spawn, self.retry_backoff)
        self._refresh_task: asyncio.Task[ClusterMetadata] | None = None
        self._refresh_topics: set[str] | None = None  # None: the running refresh asks for all topics
        self._refresh_wanted: asyncio.Event | None = None
        self._metadata_updated: asyncio.Event | None = None
        self._maintenance: asyncio.Task[None] | None = None
        self._last_refresh = 0.0
        self._last_refresh_attempt = 0.0
        self._start_lock: asyncio.Lock | None = None
        self._started = False
        self._closed = False
        #: Retriable failures ``retry`` retried (the producer counts its batch retries itself).
        self.retries = 0
        #: Errors seen by this client (failed connects, failed or retried requests, and
        #: what the producer/consumer report through ``note_error``), by error type name:
        #: the broker's error name (``NOT_LEADER_OR_FOLLOWER``) or the exception class.
        self.errors_by_type: dict[str, int] = {}
        #: The latest of those errors: (wall-clock time, type name, message).
        self.last_error: tuple[float, str, str] | None = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "started" if self._started else "new"
        return f"<Client {state} brokers={sorted(self._cluster.brokers)} client_id={self.config.client_id!r}>"

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect to a bootstrap server and fetch metadata.

        Raises ``NoBrokersAvailableError`` when no bootstrap server answers,
        ``AuthenticationError`` (or a subclass) when credentials are rejected.
        """
        if self._closed:
            raise E.ClosedError("client is closed")
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = _backend.lock()
        async with self._start_lock:
            if self._started:
                return
            if self._owner is None:
                owner = _backend.current().owner("aiokafka_lite.client")
                await owner.start()
                self._owner = owner
            self._refresh_wanted = _backend.event()
            self._metadata_updated = _backend.event()
            try:
                await self._refresh(set(self._topics), bootstrap=True)
            except BaseException:
                if _backend.structured():
                    # trio: the task group entered above must be left by this task now.
                    await self._close_owner()
                raise
            self._started = True
            self._maintenance = self._spawn(self._maintain(), "metadata-maintenance")
            log.debug("client started; brokers %s", sorted(self._cluster.brokers))

    async def close(self) -> None:
        """Idempotent. Fails in-flight requests with ``ClosedError`` and awaits every owned task."""
        if self._closed:
            return
        if self._owner is not None:
            self._owner.check_host()  # trio: IllegalStateError from another task, nothing closed
        self._closed = True
        self._coordinators.fail_waiting(E.ClosedError("client closed"))
        conns = []
        for node in self._nodes.values():
            for lane, conn in node.open_conns():
                conns.append(conn)
                node.lanes[lane].conn = None
                conn.close(E.ClosedError("client closed"))
        # trio: leaving the task group waits for its tasks even in a cancelled caller
        # (they are cancelled with it), so no task outlives close().
        await self._close_owner()
        for conn in conns:
            await conn.wait_closed()
        log.debug("client closed")

    async def _close_owner(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            await owner.aclose()

    async def __aenter__(self) -> Client:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise E.ClosedError("client is closed")

    async def _ensure_started(self) -> None:
        if not self._started:
            await self.start()

    def _spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        owner = self._owner
        if owner is None or self._closed:
            coro.close()
            raise (
                E.ClosedError("client is closed")
                if self._closed
                else E.IllegalStateError("client not started")
            )
        task: asyncio.Task[T] = owner.spawn(coro, name)
        return task

    async def _join(self, task: asyncio.Task[T]) -> T:
        """Await a task the client owns without letting the caller cancel it; a task
        cancelled by ``close()`` surfaces as ``ClosedError``, not as a stray cancellation."""
        try:
            return await _backend.shield(task)
        except _backend.FutureCancelledError:
            # trio: close() cancelled the task (awaiting a trio task never cancels it).
            raise E.ClosedError("client closed") from None
        except asyncio.CancelledError:
            # asyncio: close() cancelled the task, unless the caller itself is being
            # cancelled (trio's own cancellation is trio.Cancelled: it passes through).
            if task.cancelled() and self._closed and not _backend.Interruptible.caller_cancelled():
                raise E.ClosedError("client closed") from None
            raise

    # ------------------------------------------------------------------ observability

    def add_hooks(self, hooks: object) -> None:
        """Register an object implementing any of the ``aiokafka_lite.net.hooks.Hooks`` methods."""
        self._hooks.add(hooks)

    def broker_address(self, node_id: int) -> tuple[str, int] | None:
        """``(host, port)`` of a broker (or bootstrap server, negative id) this client knows."""
        node = self._nodes.get(node_id)
        return None if node is None else (node.host, node.port)

    def remove_hooks(self, hooks: object) -> None:
        """Unregister hooks added with ``add_hooks`` (unknown ones are ignored)."""
        self._hooks.remove(hooks)

    def note_error(self, exc: BaseException, type_name: str | None = None) -> None:
        """Count ``exc`` under its type name and remember it as the last error (for
        ``metrics()`` and ``health()``). Called on error paths only."""
        name = type_name or error_type_name(exc)
        self.errors_by_type[name] = self.errors_by_type.get(name, 0) + 1
        self.last_error = (time.time(), name, str(exc))

    def metrics(self) -> dict[str, Any]:
        """Snapshot: per-broker counters and latency percentiles (ms), keyed by node id.

        Counters cover all of a broker's lanes; ``connected`` is true when any lane is,
        ``lanes`` maps each lane used so far to whether it is connected now. Negative node
        ids are bootstrap servers. ``latency_by_api`` holds a cumulative latency histogram
        (seconds) per API key; ``errors_by_type`` counts errors by type name and
        ``last_error`` is the latest (wall-clock ``time``).
        """
        brokers = {}
        for node_id, node in sorted(self._nodes.items()):
            snap = node.stats.snapshot()
            snap["host"] = node.host
            snap["port"] = node.port
            snap["connected"] = node.connected
            snap["connect_failures"] = node.failures  # consecutive; 0 after a successful connect
            snap["lanes"] = {
                lane.value: slot.conn is not None and slot.conn.ready for lane, slot in node.lanes.items()
            }
            brokers[node_id] = snap
        return {
            "brokers": brokers,
            "metadata_age_s": (_backend.loop().time() - self._last_refresh) if self._last_refresh else None,
            "topics_tracked": len(self._topics),
            "coordinators_cached": len(self._coordinators),
            "retries": self.retries,
            "errors_by_type": dict(sorted(self.errors_by_type.items())),
            "last_error": None
            if self.last_error is None
            else {"time": self.last_error[0], "type": self.last_error[1], "message": self.last_error[2]},
        }

    # ------------------------------------------------------------------ connections

    @property
    def cluster(self) -> ClusterMetadata:
        return self._cluster

    @property
    def principal_hint(self) -> str:
        """The broker's likely name for this client in ACLs, for error messages:
        ``User:<name>`` for PLAIN/SCRAM logins, ``User:ANONYMOUS`` without SASL or TLS."""
        cfg = self.config
        if cfg.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            if cfg.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and cfg.sasl_plain_username:
                return f"principal User:{cfg.sasl_plain_username}"
            return "the client's principal"
        if cfg.security_protocol == "SSL":
            return "the client's principal (from its TLS certificate)"
        return "principal User:ANONYMOUS"

    def _add_node(self, node_id: int, host: str, port: int) -> _Node:
        node = self._nodes.get(node_id)
        if node is None:
            node = _Node(node_id, host, port, BrokerStats(self.config.metrics_latency_samples))
            self._nodes[node_id] = node
        elif (node.host, node.port) != (host, port):
            log.info("node %s moved from %s:%s to %s:%s", node_id, node.host, node.port, host, port)
            node.host, node.port = host, port
            for lane, conn in node.open_conns():
                node.lanes[lane].conn = None
                conn.close(E.KafkaConnectionError(f"node {node_id} changed address"))
            node.failures = 0
            node.backoff_until = 0.0
        return node

    def _install_seeds(self, servers: Sequence[tuple[str, int]], failures: int = 0) -> None:
        """Make the bootstrap servers the nodes with ids -1, -2, ... (no backoff). ``failures``
        carries the dropped brokers' state over a rebootstrap: a client none of whose brokers
        answered is not "reachable" again (health) before a bootstrap server answers."""
        for seed_id in [n for n in self._nodes if n < 0]:
            self._drop_node(seed_id, "bootstrap servers reinstalled")
        for i, (host, port) in enumerate(servers):
            node_id = -1 - i
            node = _Node(node_id, host, port, BrokerStats(self.config.metrics_latency_samples))
            node.failures = failures
            self._nodes[node_id] = node

    def _drop_node(self, node_id: int, why: str) -> None:
        node = self._nodes.pop(node_id, None)
        if node is None:
            return
        self._coordinators.forget_node(node_id)
        for lane, conn in node.open_conns():
            node.lanes[lane].conn = None
            conn.close(E.KafkaConnectionError(f"node {node_id} ({node.host}:{node.port}) dropped: {why}"))

    async def _rebootstrap(self, reason: str) -> None:
        """Forget every broker learned from metadata and start over from the bootstrap
        servers, resolving their names again (KIP-899, KIP-1102)."""
        servers: list[tuple[str, int]] = list(self._bootstrap)
        if self.config.client_dns_lookup == "resolve_canonical_bootstrap_servers_only":
            resolved: list[tuple[str, int]] = []
            for host, port in self._bootstrap:
                try:
                    # bounded as one connection attempt is: the refresh keeps its deadline
                    async with _backend.timeout(self.config.socket_connection_setup_timeout_ms / 1000):
                        names = await canonical_host_names(host, port)
                except (E.KafkaConnectionError, TimeoutError) as exc:
                    log.debug("rebootstrap: resolving %s:%s failed: %s", host, port, exc)
                    continue
                resolved.extend((name, port) for name in names if (name, port) not in resolved)
            servers = resolved or servers
        log.info(
            "rebootstrapping from %s: %s",
            ",".join(f"{h}:{p}" for h, p in servers),
            reason,
        )
        # 0 when some broker was still reachable (REBOOTSTRAP_REQUIRED), else the fewest
        # consecutive connect failures among them (the old seeds, idle since start, say nothing).
        failures = min(
            (0 if node.connected else node.failures for n, node in self._nodes.items() if n >= 0), default=0
        )
        for node_id in [n for n in self._nodes if n >= 0]:
            self._drop_node(node_id, "rebootstrap")
        self._install_seeds(servers, failures)
        old = self._cluster
        self._cluster = ClusterMetadata(topics=dict(old.topics))
        self.rebootstrap_policy.rebootstrapped(_backend.loop().time())

    def _on_conn_close(self, conn: BrokerConnection, exc: BaseException | None) -> None:
        node = self._nodes.get(conn.node_id)
        if node is None:
            return
        for slot in node.lanes.values():
            if slot.conn is conn:
                slot.conn = None
                break
        else:
            return  # already replaced or reaped
        if self._closed or isinstance(exc, E.ClosedError):
            return
        # Unexpected disconnect: back off a little and re-check where things live.
        node.backoff_until = _backend.loop().time() + self.reconnect_backoff.delay_s(0)
        self._coordinators.forget_node(conn.node_id)
        self.request_metadata_refresh()

    def is_connected(self, node_id: int, lane: Lane = Lane.DEFAULT) -> bool:
        node = self._nodes.get(node_id)
        return node is not None and node.ready_conn(lane) is not None

    async def connection(
        self, node_id: int, timeout_ms: float | None = None, *, lane: Lane = Lane.DEFAULT
    ) -> BrokerConnection:
        """The ready connection to ``node_id`` on ``lane``, connecting (after any backoff) if needed."""
        self._check_open()
        await self._ensure_started()
        timeout = (self.config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        return await self._connection(node_id, _backend.loop().time() + timeout, _lane(lane))

    async def _connection(self, node_id: int, deadline: float, lane: Lane = Lane.DEFAULT) -> BrokerConnection:
        loop = _backend.loop()
        node = self._nodes.get(node_id)
        if node is None:
            raise E.KafkaConnectionError(f"unknown broker node {node_id}")
        slot = node.slot(lane)
        while True:
            conn = slot.conn
            if conn is not None and conn.ready:
                return conn
            task = slot.connecting
            if task is None or task.done():
                wait = node.backoff_until - loop.time()
                if wait > 0:
                    if loop.time() + wait > deadline:
                        raise E.KafkaConnectionError(
                            f"node {node_id} ({node.host}:{node.port}) is in reconnect backoff for {wait * 1000:.0f} ms"
                        )
                    await _backend.sleep(wait)
                    continue  # someone else may have connected meanwhile
                task = slot.connecting = self._spawn(
                    self._connect(node, lane, slot), f"connect-{node_id}-{lane.value}"
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise E.KafkaTimeoutError(f"connecting to node {node_id} timed out")
            try:
                async with _backend.timeout(remaining):
                    return await self._join(task)
            except TimeoutError as e:
                if isinstance(e, E.KafkaError):
                    raise
                raise E.KafkaTimeoutError(f"connecting to node {node_id} timed out") from None

    async def _connect(self, node: _Node, lane: Lane, slot: _Slot) -> BrokerConnection:
        loop = _backend.loop()
        conn = BrokerConnection(
            node.node_id,
            node.host,
            node.port,
            self.config,
            hooks=self._hooks,
            stats=node.stats,
            on_close=self._on_conn_close,
            opener=self._opener,
            owner=self._owner,
        )
        try:
            await conn.connect()
        except _backend.cancelled_exc():
            raise
        except Exception as exc:
            node.backoff_until = loop.time() + self.reconnect_backoff.delay_s(node.failures)
            node.failures += 1
            self.note_error(exc)
            log.debug(
                "connect to node %s (%s:%s, %s lane) failed: %s",
                node.node_id,
                node.host,
                node.port,
                lane.value,
                exc,
            )
            raise
        finally:
            slot.connecting = None
        if self._closed:
            conn.close(E.ClosedError("client closed"))
            raise E.ClosedError("client closed")
        if self._nodes.get(node.node_id) is not node:
            # A rebootstrap dropped the node while it was connecting: nobody owns this
            # connection any more (it would never be reaped or closed).
            conn.close(E.KafkaConnectionError(f"node {node.node_id} was dropped by a rebootstrap"))
            raise E.KafkaConnectionError(f"node {node.node_id} was dropped by a rebootstrap")
        node.failures = 0
        slot.conn = conn
        node.api_versions = conn.api_versions
        return conn

    def least_loaded_node(self) -> int:
        """The node a request that can go anywhere would be sent to now (see ``send``)."""
        return self._pick()[0]

    def _pick(self, exclude: Iterable[int] = (), lanes: Sequence[Lane] = _DEFAULT_ONLY) -> tuple[int, Lane]:
        """Pick a (node, lane) for a request that can go anywhere, among ``lanes``.

        Ready connections with the fewest requests in flight first (so a quick request
        need not wait behind a long-polling Fetch when another connection is idle),
        then known brokers not in backoff (reachable ones first), then bootstrap
        servers (only while no broker is known: at start and after a rebootstrap),
        then whichever node's backoff ends first.
        """
        now = _backend.loop().time()
        excluded = set(exclude)
        brokers = [n for n in self._nodes.values() if n.node_id not in excluded]
        if not brokers:
            brokers = list(self._nodes.values())
        known = set(self._cluster.brokers)
        ready: list[tuple[int, int, Lane]] = []
        for n in brokers:
            if n.node_id in known or n.node_id < 0:
                for lane in lanes:
                    conn = n.ready_conn(lane)
                    if conn is not None:
                        ready.append((conn.load, n.node_id, lane))
        first = lanes[0]
        if ready:
            best = min(r[0] for r in ready)
            _, node_id, lane = random.choice([r for r in ready if r[0] == best])
            return node_id, lane
        members = [n for n in brokers if n.node_id in known]
        idle = [n for n in members if n.backoff_until <= now]
        if idle:
            connecting = [
                n for n in idle if (s := n.lanes.get(first)) is not None and s.connecting is not None
            ]
            return random.choice(connecting or [n for n in idle if n.connected] or idle).node_id, first
        seeds = [n for n in brokers if n.node_id < 0]
        if known:
            # As Java: once the cluster's brokers are known, the bootstrap servers are
            # used again only by a rebootstrap (``_rebootstrap``, never with
            # metadata_recovery_strategy='none'), which forgets the known brokers.
            seeds = []
        idle = [n for n in seeds if n.backoff_until <= now]
        if idle:
            return idle[0].node_id, first
        pool = members or seeds or [n for n in self._nodes.values() if n.node_id in known] or brokers
        return min(pool, key=lambda n: n.backoff_until).node_id, first

    # ------------------------------------------------------------------ requests

    async def send(
        self,
        request: Request,
        *,
        node_id: int | None = None,
        version: int | None = None,
        timeout_ms: float | None = None,
        expect_response: bool = True,
        lane: Lane = Lane.DEFAULT,
    ) -> Response | None:
        """One attempt at one request; error codes inside the response are the caller's.

        ``node_id`` None sends to the least-loaded broker; ``version`` None uses the
        negotiated one. ``lane`` picks which of the broker's connections carries the
        request: brokers answer a connection's requests one at a time, in order, so a
        request on ``Lane.DEFAULT`` waits behind a long-polling Fetch sent before it on
        that connection (up to its ``max_wait_ms``), while ``Lane.COORDINATOR``, a
        separate connection opened on first use, does not. Group-coordinator traffic
        (JoinGroup, SyncGroup, Heartbeat, OffsetCommit...) belongs there. Lanes share
        the broker's negotiated versions, configuration (TLS, SASL), reconnect
        backoff and metrics; each is idle-closed, reconnected and closed on its own.
        """
        if self._closed:
            raise E.ClosedError("client is closed")
        if not self._started:
            await self.start()
        loop = _backend.loop()
        timeout = (self.config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = loop.time() + timeout
        if node_id is None:
            lane = _lane(lane)
            node_id = self._pick(lanes=(lane,))[0]
        node = self._nodes.get(node_id)
        conn = node.ready_conn(lane) if node is not None else None
        if conn is None:  # else the fast path: already connected
            conn = await self._connection(node_id, deadline, _lane(lane))
        if version is None:
            version = conn.version_for(request.API_KEY)
        return await conn.send(
            request, version, expect_response=expect_response, timeout_s=max(deadline - loop.time(), 0.001)
        )

    def api_version(self, node_id: int, api_key: int) -> int:
        """Negotiated version for a node connected at least once (``KeyError`` otherwise)."""
        node = self._nodes.get(node_id)
        if node is None or not node.api_versions:
            raise KeyError(f"no API versions known for node {node_id}; connect first")
        return negotiate_version(
            api_key, node.api_versions, self.config.max_versions.get(api_key), node_id=node_id
        )

    def finalized_features(self) -> dict[str, int]:
        """The finalized feature levels reported by the connected broker with the newest
        ``finalized_features_epoch`` (as Java's ApiVersions keeps them); empty when no
        connected broker reported any (ApiVersions below v3, or not connected yet)."""
        best: tuple[int, dict[str, int]] = (-2, {})
        for node in self._nodes.values():
            for lane in _ALL_LANES:
                conn = node.ready_conn(lane)
                if conn is not None and conn.finalized_features_epoch > best[0]:
                    best = (conn.finalized_features_epoch, conn.finalized_features)
        return dict(best[1])

    async def negotiated_version(
        self, node_id: int | None, api_key: int, *, lane: Lane = Lane.DEFAULT, timeout_ms: float | None = None
    ) -> int:
        """Negotiated version of ``api_key`` with ``node_id``, from whichever of its lanes is
        connected; connects ``lane`` only when none is (so asking does not open a
        connection the caller will not use). Connecting waits at most ``timeout_ms``
        (default ``request_timeout_ms``): pass the caller's remaining time."""
        lane = _lane(lane)
        if node_id is None:
            node_id = self._pick(lanes=(lane,))[0]
        node = self._nodes.get(node_id)
        if node is not None:
            for candidate in (lane, *_ALL_LANES):
                conn = node.ready_conn(candidate)
                if conn is not None:
                    return conn.version_for(api_key)
        conn = await self.connection(node_id, timeout_ms, lane=lane)
        return conn.version_for(api_key)

    async def retry(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        timeout_ms: float | None = None,
        what: str = "request",
    ) -> T:
        """Run ``op`` until it succeeds, retrying retriable ``KafkaError``s with backoff.

        Errors flagged ``invalidates_metadata`` trigger a metadata refresh before the
        next attempt. Gives up with the last error once ``timeout_ms`` (default
        ``request_timeout_ms``) has elapsed; non-retriable errors propagate at once.
        """
        loop = _backend.loop()
        deadline = loop.time() + (self.config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        retry = Retry(self.retry_backoff, clock=loop.time, deadline=deadline)
        while True:
            try:
                return await op()
            except E.KafkaError as exc:
                if not self._closed:
                    self.note_error(exc)
                if not exc.retriable or self._closed:
                    raise
                delay = retry.next_delay()
                if delay is None:
                    raise
                self.retries += 1
                log.debug(
                    "%s failed (attempt %d), retrying in %.0f ms: %s", what, retry.attempts, delay * 1000, exc
                )
                await _backend.sleep(delay)
                if getattr(exc, "invalidates_metadata", False):
                    # Refresh before the next attempt, so it goes where the data now lives.
                    try:
                        await self.refresh_before_retry(None, delay, deadline)
                    except E.KafkaError as refresh_exc:
                        if not refresh_exc.retriable:
                            raise
                elif isinstance(exc, E.KafkaConnectionError):
                    self.request_metadata_refresh()

    # ------------------------------------------------------------------ metadata

    def track_topics(self, topics: Iterable[str]) -> None:
        """Include these topics in every future metadata refresh."""
        self._topics.update(topics)

    def untrack_topics(self, topics: Iterable[str]) -> None:
        self._topics.difference_update(topics)

    @property
    def tracked_topics(self) -> frozenset[str]:
        return frozenset(self._topics)

    def request_metadata_refresh(self) -> None:
        """Ask the background task for a refresh soon (non-blocking, rate-limited)."""
        if self._refresh_wanted is not None and not self._closed:
            self._refresh_wanted.set()

    async def refresh_metadata(
        self,
        topics: Iterable[str] | None = None,
        *,
        all_topics: bool = False,
        track: bool = True,
        timeout_ms: float | None = None,
    ) -> ClusterMetadata:
        """Fetch metadata for the tracked topics plus ``topics`` (or every topic with
        ``all_topics``); concurrent callers share one request when it covers them.
        ``track=False`` asks about ``topics`` once without adding them to the periodic refresh.

        The shared request gives up after ``request_timeout_ms``; ``timeout_ms`` bounds
        this caller's wait for it (``KafkaTimeoutError``; the request goes on for others)."""
        self._check_open()
        wanted = set(topics) if topics is not None else set()
        if track:
            self._topics |= wanted
        await self._ensure_started()
        if timeout_ms is None:
            return await self._refresh(wanted, all_topics=all_topics)
        try:
            async with _backend.timeout(max(timeout_ms, 0.0) / 1000):
                return await self._refresh(wanted, all_topics=all_topics)
        except TimeoutError as e:
            if isinstance(e, E.KafkaError):
                raise
            raise E.KafkaTimeoutError(
                f"metadata refresh did not complete within {timeout_ms:.0f} ms"
            ) from None

    async def refresh_before_retry(
        self, topics: Iterable[str] | None, backoff_s: float, deadline: float
    ) -> None:
        """Refresh metadata for ``topics`` (None: the tracked ones) before a retry, waiting
        for the answer no longer than the retry's backoff (at least ``retry_backoff_ms``)
        and never past ``deadline`` (the loop's clock). A metadata answer normally comes
        back within that; when it does not (a slow node, a partition), the retry goes by
        the view we have, which a leader hint may have updated meanwhile, as Java's
        clients do, and the refresh goes on for the next one. ``KafkaTimeoutError`` when
        the wait ends first."""
        wait_s = min(max(backoff_s, self.config.retry_backoff_ms / 1000), deadline - _backend.loop().time())
        await self.refresh_metadata(topics, timeout_ms=max(wait_s, 0.001) * 1000)

    async def _refresh(
        self, wanted: set[str], *, all_topics: bool = False, bootstrap: bool = False
    ) -> ClusterMetadata:
        while True:
            task = self._refresh_task
            if task is not None and not task.done():
                covering = self._refresh_topics
                if covering is None or (not all_topics and wanted <= covering):
                    return await self._join(task)
                try:
                    await self._join(task)
                except E.KafkaError:
                    pass
                continue
            request_topics = None if all_topics else set(self._topics) | wanted
            self._refresh_topics = request_topics
            task = self._refresh_task = self._spawn(
                self._do_refresh(request_topics, bootstrap), "metadata-refresh"
            )
            return await self._join(task)

    async def _do_refresh(self, topics: set[str] | None, bootstrap: bool) -> ClusterMetadata:
        loop = _backend.loop()
        deadline = loop.time() + self.config.request_timeout_ms / 1000
        self._last_refresh_attempt = loop.time()
        self.rebootstrap_policy.attempt_started(loop.time())
        tried: set[int] = set()
        retry = Retry(self.retry_backoff, clock=loop.time, deadline=deadline)
        last: BaseException | None = None
        while True:
            node_id, lane = self._pick(exclude=tried, lanes=_ALL_LANES)
            error_code = 0
            try:
                conn = await self._connection(node_id, deadline, lane)
                version = conn.version_for(_METADATA_KEY)
                if topics is None:
                    req_topics: list[MetadataRequest.MetadataRequestTopic] | None = None
                else:
                    req_topics = [MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(topics)]
                req = MetadataRequest(
                    topics=req_topics, allow_auto_topic_creation=self.config.allow_auto_topic_creation
                )
                resp = await conn.send(req, version, timeout_s=max(deadline - loop.time(), 0.001))
                assert isinstance(resp, MetadataResponse)
                error_code = resp.error_code
                if error_code:  # the top-level error of Metadata v13+ (KIP-1102)
                    raise E.error_for(error_code, f"Metadata from node {node_id}")
            except E.KafkaError as exc:
                # REBOOTSTRAP_REQUIRED is not retriable as an error, but a Metadata
                # answer carrying it is a failed attempt (another node, or rebootstrap).
                if not exc.retriable and error_code != REBOOTSTRAP_REQUIRED:
                    raise
                last = exc
                tried.add(node_id)
                reason = self.rebootstrap_policy.after_failure(
                    loop.time(),
                    known_brokers=set(self._cluster.brokers),
                    failed=tried,
                    error_code=error_code,
                )
                if reason is not None:
                    await self._rebootstrap(reason)
                    tried.clear()
                if bootstrap and not self._cluster.brokers and all(n in tried for n in self._nodes):
                    servers = ",".join(f"{h}:{p}" for h, p in self._bootstrap)
                    raise E.NoBrokersAvailableError(
                        f"no bootstrap server reachable ({servers}): {describe_error(exc)}"
                    ) from exc
                if len(tried) >= len(self._nodes):
                    tried.clear()
                delay = retry.next_delay()
                if delay is None:
                    if isinstance(last, E.KafkaTimeoutError):
                        raise
                    raise E.KafkaTimeoutError(
                        f"metadata refresh failed within request_timeout_ms: {describe_error(exc)}"
                    ) from last
                await _backend.sleep(delay)
                continue
            self._apply_metadata(resp, full=topics is None, via=conn)
            self.rebootstrap_policy.succeeded()
            return self._cluster

    def _apply_metadata(
        self, resp: MetadataResponse, *, full: bool, via: BrokerConnection | None = None
    ) -> None:
        new = apply_metadata(self._cluster, resp, full=full)
        for broker in new.brokers.values():
            self._add_node(broker.node_id, broker.host, broker.port)
        # Adopt bootstrap connections that turn out to be a known broker: saves a connect.
        for seed_id in [n for n in self._nodes if n < 0]:
            seed = self._nodes[seed_id]
            conns = [(lane, c) for lane, c in seed.open_conns() if c.ready]
            if not conns:
                continue
            target = next(
                (
                    self._nodes[b.node_id]
                    for b in new.brokers.values()
                    if (b.host, b.port) == (seed.host, seed.port)
                ),
                None,
            )
            if target is None:
                continue
            if target.stats.requests == 0 and not target.lanes:  # carry the handshake's counters over
                target.stats, seed.stats = seed.stats, BrokerStats(self.config.metrics_latency_samples)
                adopted_stats = True
            else:
                adopted_stats = False
            for lane, conn in conns:
                slot = target.slot(lane)
                if slot.conn is not None:
                    continue  # the broker has its own; the seed's is reaped when idle
                seed.lanes[lane].conn = None
                conn.node_id = target.node_id
                if not adopted_stats:
                    target.stats.connects += 1
                conn.stats = target.stats
                slot.conn = conn
                target.api_versions = conn.api_versions
        if (
            new.controller_id != self._cluster.controller_id
            or new.brokers.keys() != self._cluster.brokers.keys()
        ):
            log.debug("metadata: brokers %s, controller %s", sorted(new.brokers), new.controller_id)
        self._cluster = new
        self._last_refresh = _backend.loop().time()
        if self._metadata_updated is not None:
            self._metadata_updated.set()
            self._metadata_updated = _backend.event()

    def apply_leader_hints(
        self, hints: Mapping[TopicPartition, LeaderHint], endpoints: Iterable[BrokerInfo] = ()
    ) -> set[TopicPartition]:
        """Take the new leaders a Produce or Fetch response names (KIP-951) into the
        cluster view at once (see ``metadata.apply_leader_hints``); the partitions moved."""
        new, moved = apply_leader_hints(self._cluster, hints, endpoints)
        if moved:
            for broker in new.brokers.values():
                self._add_node(broker.node_id, broker.host, broker.port)
            self._cluster = new
        return moved

    async def wait_for_topic(self, topic: str, timeout_ms: float) -> TopicInfo:
        """Metadata of ``topic`` once it exists with partitions; ``UnknownTopicOrPartitionError``
        after ``timeout_ms``; authorization and invalid-name errors at once."""
        self._check_open()
        loop = _backend.loop()
        deadline = loop.time() + timeout_ms / 1000
        self._topics.add(topic)
        attempt = 0
        while True:
            info = self._cluster.topics.get(topic)
            if info is not None and info.partitions:
                return info
            code = self._cluster.topic_errors.get(topic, 0)
            if code and not E.for_code(code).retriable:
                raise topic_error(topic, code)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise E.UnknownTopicOrPartitionError(
                    f"topic {topic!r} not available after {timeout_ms:.0f} ms"
                )
            try:
                async with _backend.timeout(remaining):
                    await self.refresh_metadata([topic])
                    info = self._cluster.topics.get(topic)
                    if info is None or not info.partitions:
                        await _backend.sleep(
                            min(self.retry_backoff.delay_s(attempt), max(deadline - loop.time(), 0))
                        )
            except TimeoutError:
                pass
            except E.KafkaError as exc:
                if not exc.retriable:
                    raise
            attempt += 1

    async def leader_for(self, tp: TopicPartition, timeout_ms: float | None = None) -> tuple[int, int]:
        """(leader node id, leader epoch) of a partition, refreshing metadata until known."""
        self._check_open()
        loop = _backend.loop()
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = loop.time() + timeout / 1000
        self._topics.add(tp.topic)
        attempt = 0
        while True:
            part = self._cluster.partition(tp)
            if part is not None and part.leader >= 0:
                return part.leader, part.leader_epoch
            code = self._cluster.topic_errors.get(tp.topic, 0)
            if code and not E.for_code(code).retriable:
                raise topic_error(tp.topic, code)
            remaining = deadline - loop.time()
            if remaining <= 0:
                if part is not None:
                    raise E.LeaderNotAvailableError(f"no leader for {tp.topic}-{tp.partition}")
                raise E.UnknownTopicOrPartitionError(
                    f"{tp.topic}-{tp.partition} not found after {timeout:.0f} ms"
                )
            try:
                async with _backend.timeout(remaining):
                    if attempt:
                        await _backend.sleep(self.retry_backoff.delay_s(attempt - 1))
                    await self.refresh_metadata([tp.topic])
            except TimeoutError:
                pass
            except E.KafkaError as exc:
                if not exc.retriable:
                    raise
            attempt += 1

    async def _maintain(self) -> None:
        """Background: periodic/triggered metadata refresh and idle-connection reaping."""
        loop = _backend.loop()
        cfg = self.config
        idle_s = cfg.connections_max_idle_ms / 1000
        max_age = cfg.metadata_max_age_ms / 1000
        min_interval = cfg.retry_backoff_ms / 1000
        failures = 0
        wanted = self._refresh_wanted
        assert wanted is not None
        while True:
            now = loop.time()
            next_refresh = self._last_refresh + max_age
            next_idle = now + min(max(idle_s / 2, 0.01), 5.0)
            timeout = max(min(next_refresh, next_idle) - now, 0.0)
            if not wanted.is_set() and timeout > 0:
                try:
                    async with _backend.timeout(timeout):
                        await wanted.wait()
                except TimeoutError:
                    pass
            now = loop.time()
            due = now >= self._last_refresh + max_age
            if wanted.is_set() or due:
                # Rate-limit triggered refreshes (Java's retry.backoff for metadata).
                since = now - self._last_refresh_attempt
                wait = max(min_interval - since, 0.0) if not due else 0.0
                if failures:
                    wait = max(wait, self.retry_backoff.delay_s(failures - 1))
                if wait > 0:
                    await _backend.sleep(wait)
                wanted.clear()
                try:
                    await self._refresh(set())
                    failures = 0
                except _backend.cancelled_exc():
                    raise
                except Exception as exc:
                    failures += 1
                    log.debug("background metadata refresh failed: %s", exc)
                    wanted.set()
            self._reap_idle(loop.time(), idle_s)

    def _reap_idle(self, now: float, idle_s: float) -> None:
        for node in self._nodes.values():
            for lane, conn in node.open_conns():
                if conn.ready and conn.load == 0 and now - conn.last_used >= idle_s:
                    log.debug("closing idle %s connection to node %s", lane.value, node.node_id)
                    node.lanes[lane].conn = None
                    conn.close(E.ClosedError("idle connection closed"))

    # ------------------------------------------------------------------ coordinators

    async def find_coordinator(
        self, key: str, key_type: CoordinatorType = CoordinatorType.GROUP, *, timeout_ms: float | None = None
    ) -> int:
        """Node id of the group/transaction coordinator for ``key`` (cached).

        Concurrent lookups of the same type are batched into one FindCoordinator
        (v4+, KIP-699). Retriable coordinator errors are retried until ``timeout_ms``
        (default ``request_timeout_ms``). A caller that finds a lookup already running
        waits for it at most until its own ``timeout_ms`` has passed
        (``KafkaTimeoutError``); the lookup goes on for the others.
        """
        self._check_open()
        timeout_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        loop = _backend.loop()
        started = loop.time()
        await self._ensure_started()
        waited_ms = (loop.time() - started) * 1000
        return await self._coordinators.find(key, key_type, max(timeout_ms - waited_ms, 0.0))

    def invalidate_coordinator(self, key: str, key_type: CoordinatorType = CoordinatorType.GROUP) -> None:
        self._coordinators.invalidate(key, key_type)

    async def _find_coordinators(
        self, key_type: CoordinatorType, keys: list[str], deadline: float
    ) -> dict[str, int | E.KafkaError]:
        loop = _backend.loop()
        node_id, lane = self._pick(lanes=_ALL_LANES)
        conn = await self._connection(node_id, deadline, lane)
        version = conn.version_for(_FIND_COORDINATOR_KEY)
        if key_type != CoordinatorType.GROUP and version < 1:
            raise E.UnsupportedVersionError("FindCoordinator for transactions needs version 1+")
        out: dict[str, int | E.KafkaError] = {}

        def record(k: str, code: int, message: str | None, nid: int, host: str, port: int) -> None:
            if code:
                text = f"{key_type.name.lower()} coordinator for {k!r}: {message or ''}".rstrip(": ")
                if code in _AUTHORIZATION_HINTS:
                    text += "; " + _AUTHORIZATION_HINTS[code].format(principal=self.principal_hint, key=k)
                out[k] = E.error_for(code, text)
            else:
                self._add_node(nid, host, port)
                out[k] = nid

        if version >= 4:
            req = FindCoordinatorRequest(key_type=int(key_type), coordinator_keys=keys)
            resp = await conn.send(req, version, timeout_s=max(deadline - loop.time(), 0.001))
            assert isinstance(resp, FindCoordinatorResponse)
            for c in resp.coordinators:
                record(c.key, c.error_code, c.error_message, c.node_id, c.host, c.port)
            return out

        async def one(k: str) -> None:
            req = FindCoordinatorRequest(key=k, key_type=int(key_type))
            resp = await conn.send(req, version, timeout_s=max(deadline - loop.time(), 0.001))
            assert isinstance(resp, FindCoordinatorResponse)
            record(k, resp.error_code, resp.error_message, resp.node_id, resp.host, resp.port)

        await _backend.gather(*(one(k) for k in keys))
        return out

    # ------------------------------------------------------------------ helpers for callers

    def broker(self, node_id: int) -> BrokerInfo | None:
        info = self._cluster.brokers.get(node_id)
        if info is None and node_id in self._nodes:
            n = self._nodes[node_id]
            return BrokerInfo(node_id, n.host, n.port, None)
        return info

    def describe_api(self, api_key: int) -> str:
        return api_name(api_key)


def _lane(lane: Lane | str) -> Lane:
    try:
        return Lane(lane)
    except ValueError:
        raise E.ConfigError(
            f"unknown connection lane {lane!r}; expected one of {[m.value for m in Lane]}"
        ) from None
