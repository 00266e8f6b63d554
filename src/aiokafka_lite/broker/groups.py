"""The embedded broker's group coordinator (classic protocol) and coordinator lookup.

One ``GroupCoordinator`` serves a whole embedded cluster: group state lives once, and
each group has a *coordinator broker* chosen the way Kafka maps a group to a
``__consumer_offsets`` partition (Java ``String.hashCode`` of the key modulo
``offsets.topic.num.partitions``), that partition being "led" by one of the live brokers.
Requests for a group reaching another broker get NOT_COORDINATOR. Fault injection can
pin a group to a broker (``move_coordinator``) or expire a member (``expire_member``).

The state machine is Kafka's classic one (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead) with its rules: KIP-394 member ids, the join barrier
(every known member rejoins or the rebalance timeout removes it), the initial rebalance
delay, leader election, protocol selection by votes, SyncGroup propagation, session
expiry, the pending-sync timeout, static membership (KIP-345, KIP-814), group size
limit. The broker never looks inside assignments: the leader assigns.

Time comes from a ``Clock`` (the event loop by default, a fake one in tests). Timers are
loop ``TimerHandle``s owned by the coordinator and cancelled by ``stop()``. Requests
that must wait (JoinGroup in the barrier, SyncGroup of followers) wait on futures the
state machine completes.

Deviations from Kafka, all deliberate for an in-process test broker: committed offsets
persist in a JSON-lines file (see ``offsets``), not in ``__consumer_offsets``; group
membership is not persisted (after a cluster restart members get UNKNOWN_MEMBER_ID and
rejoin); offsets never expire by retention; only the classic protocol is served
(ConsumerGroupHeartbeat, KIP-848, is not).
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import logging
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Final, Protocol

from aiokafka_lite import errors
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.offsets import CommittedOffset, OffsetStore
from aiokafka_lite.broker.state import BROKER_CONFIG_DEFAULTS, BrokerInfo, ClusterState
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    ConsumerProtocolSubscription,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

if TYPE_CHECKING:
    from aiokafka_lite.broker.transactions import TransactionCoordinator

__all__ = [
    "Cancellable",
    "Clock",
    "CoordinatorPlacement",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "JoinResult",
    "LoopClock",
    "ManualClock",
    "SyncResult",
    "expire_member",
    "get_group_coordinator",
    "java_string_hash",
    "move_coordinator",
    "placement_for",
    "register_group_handlers",
]

log = logging.getLogger("aiokafka_lite.broker.groups")

NONE: Final = 0
UNKNOWN_SERVER_ERROR: Final = errors.UnknownServerError.code
COORDINATOR_NOT_AVAILABLE: Final = errors.CoordinatorNotAvailableError.code
NOT_COORDINATOR: Final = errors.NotCoordinatorError.code
ILLEGAL_GENERATION: Final = errors.IllegalGenerationError.code
INCONSISTENT_GROUP_PROTOCOL: Final = errors.InconsistentGroupProtocolError.code
INVALID_GROUP_ID: Final = errors.InvalidGroupIdError.code
UNKNOWN_MEMBER_ID: Final = errors.UnknownMemberIdError.code
INVALID_SESSION_TIMEOUT: Final = errors.InvalidSessionTimeoutError.code
REBALANCE_IN_PROGRESS: Final = errors.RebalanceInProgressError.code
MEMBER_ID_REQUIRED: Final = errors.MemberIdRequiredError.code
GROUP_MAX_SIZE_REACHED: Final = errors.GroupMaxSizeReachedError.code
FENCED_INSTANCE_ID: Final = errors.FencedInstanceIdError.code
UNKNOWN_TOPIC_OR_PARTITION: Final = errors.UnknownTopicOrPartitionError.code
OFFSET_METADATA_TOO_LARGE: Final = errors.OffsetMetadataTooLargeError.code
NON_EMPTY_GROUP: Final = errors.NonEmptyGroupError.code
GROUP_ID_NOT_FOUND: Final = errors.GroupIdNotFoundError.code
GROUP_SUBSCRIBED_TO_TOPIC: Final = errors.GroupSubscribedToTopicError.code
UNSTABLE_OFFSET_COMMIT: Final = errors.UnstableOffsetCommitError.code
INVALID_REQUEST: Final = errors.InvalidRequestError.code

GROUP_KEY: Final = 0
TXN_KEY: Final = 1
NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 5 * 60 * 1000  # Kafka's bound on a new member's pending JoinGroup
# DescribeGroups authorized operations when asked: READ, DELETE, DESCRIBE (no ACLs here).
_GROUP_OPERATIONS: Final = (1 << 3) | (1 << 6) | (1 << 8)


# -- time --------------------------------------------------------------------------
class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Milliseconds and one-shot timers (the event loop's, or a test's fake)."""

    def now_ms(self) -> float: ...

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> Cancellable: ...


class LoopClock:
    """The running event loop's monotonic clock and ``call_later``."""

    def now_ms(self) -> float:
        return asyncio.get_running_loop().time() * 1000.0

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> Cancellable:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0.0) / 1000.0, fn)


class _ManualTimer:
    __slots__ = ("cancelled", "fn", "when")

    def __init__(self, when: float, fn: Callable[[], None]) -> None:
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to: deterministic coordinator tests."""

    def __init__(self, start_ms: float = 0.0) -> None:
        self._now = start_ms
        self._timers: list[tuple[float, int, _ManualTimer]] = []
        self._seq = 0

    def now_ms(self) -> float:
        return self._now

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> Cancellable:
        t = _ManualTimer(self._now + max(delay_ms, 0.0), fn)
        self._seq += 1
        heapq.heappush(self._timers, (t.when, self._seq, t))
        return t

    def advance(self, ms: float) -> None:
        """Moves time forward, running every timer that falls due, in order."""
        target = self._now + ms
        while self._timers and self._timers[0][0] <= target:
            when, _, t = heapq.heappop(self._timers)
            if t.cancelled:
                continue
            self._now = max(self._now, when)
            t.fn()
        self._now = target

    def pending(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)


class Timers:
    """Timers owned by a coordinator: all cancelled at once by ``cancel_all``."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._live: set[Cancellable] = set()
        self.closed = False

    def schedule(self, delay_ms: float, fn: Callable[[], None]) -> Cancellable:
        handle: Cancellable | None = None

        def run() -> None:
            if handle is not None:
                self._live.discard(handle)
            if self.closed:
                return
            try:
                fn()
            except Exception:
                log.exception("coordinator timer failed")

        handle = self.clock.call_later(delay_ms, run)
        self._live.add(handle)
        return handle

    def cancel(self, handle: Cancellable | None) -> None:
        if handle is not None:
            handle.cancel()
            self._live.discard(handle)

    def cancel_all(self) -> None:
        self.closed = True
        for h in list(self._live):
            h.cancel()
        self._live.clear()

    def __len__(self) -> int:
        return len(self._live)


# -- configuration -------------------------------------------------------------------
def config_int(cluster: ClusterState, key: str, default: int) -> int:
    """A broker setting from ``BrokerConfig.extra`` (server.properties names), else Kafka's default."""
    raw = cluster.config.extra.get(key, BROKER_CONFIG_DEFAULTS.get(key))
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        log.warning("ignoring non-integer %s=%r", key, raw)
        return default


@dataclass(slots=True)
class GroupConfig:
    """Group coordinator settings (Kafka's broker config names in comments)."""

    initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms (Kafka: 3000)
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes

    @classmethod
    def from_cluster(cls, cluster: ClusterState) -> GroupConfig:
        return cls(
            initial_rebalance_delay_ms=config_int(cluster, "group.initial.rebalance.delay.ms", 0),
            min_session_timeout_ms=config_int(cluster, "group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=config_int(cluster, "group.max.session.timeout.ms", 1_800_000),
            max_size=config_int(cluster, "group.max.size", 2**31 - 1),
            offset_metadata_max_bytes=config_int(cluster, "offset.metadata.max.bytes", 4096),
        )


# -- coordinator placement -------------------------------------------------------------
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=4096)
def _cached_hash(key: str) -> int:
    # Every group request looks its coordinator up; the hash is the costly part.
    return java_string_hash(key)


def _java_abs(n: int) -> int:
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 rather than staying negative.
    return 0 if n == -(2**31) else abs(n)


class CoordinatorPlacement:
    """Which broker coordinates a group / transactional id.

    Kafka: partition = abs(hash(key)) % N of ``__consumer_offsets`` (groups) or
    ``__transaction_state`` (transactional ids); the coordinator is that partition's
    leader. Here the "leader" of internal partition p is the p-th live broker (modulo),
    so a broker going down moves its keys to live brokers. ``move`` pins a key.
    """

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.partitions = {
            GROUP_KEY: max(config_int(cluster, "offsets.topic.num.partitions", 50), 1),
            TXN_KEY: max(config_int(cluster, "transaction.state.log.num.partitions", 50), 1),
        }
        self._pinned: dict[tuple[int, str], int] = {}

    def partition_for(self, key: str, key_type: int = GROUP_KEY) -> int:
        return _java_abs(_cached_hash(key)) % self.partitions[key_type]

    def coordinator(self, key: str, key_type: int = GROUP_KEY) -> BrokerInfo | None:
        """The coordinator broker, or None when no broker is alive."""
        pinned = self._pinned.get((key_type, key))
        if pinned is not None and self.cluster.is_alive(pinned):
            return self.cluster.brokers[pinned]
        live = sorted(self.cluster.live_brokers(), key=lambda b: b.node_id)
        if not live:
            return None
        return live[self.partition_for(key, key_type) % len(live)]

    def coordinator_id(self, key: str, key_type: int = GROUP_KEY) -> int:
        b = self.coordinator(key, key_type)
        return b.node_id if b is not None else -1

    def move(self, key: str, broker_id: int, key_type: int = GROUP_KEY) -> None:
        if broker_id not in self.cluster.brokers:
            raise errors.InvalidRequestError(f"no broker {broker_id}")
        self._pinned[(key_type, key)] = broker_id

    def unpin(self, key: str, key_type: int = GROUP_KEY) -> None:
        self._pinned.pop((key_type, key), None)

    def check(self, key: str, key_type: int, broker_id: int) -> int:
        """NONE if ``broker_id`` coordinates ``key``, else the error Kafka answers."""
        b = self.coordinator(key, key_type)
        if b is None:
            return COORDINATOR_NOT_AVAILABLE
        return NONE if b.node_id == broker_id else NOT_COORDINATOR


_PLACEMENTS: weakref.WeakKeyDictionary[ClusterState, CoordinatorPlacement] = weakref.WeakKeyDictionary()


def placement_for(cluster: ClusterState) -> CoordinatorPlacement:
    """The cluster's (single) placement, shared by the group and transaction coordinators."""
    p = _PLACEMENTS.get(cluster)
    if p is None:
        p = _PLACEMENTS[cluster] = CoordinatorPlacement(cluster)
    return p


# -- group state ----------------------------------------------------------------------
class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False
    legacy_leader: str = ""  # leader to report to JoinGroup < v9 when skip_assignment is set


@dataclass(slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


Protocols = list[tuple[str, bytes]]


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    last_heartbeat_ms: float = 0.0
    session_timer: Cancellable | None = None
    is_new: bool = False

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None


class Group:
    """Membership state of one classic group (offsets live in the ``OffsetStore``)."""

    def __init__(self, group_id: str, now_ms: float) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # insertion ordered, like Kafka's
        self.pending_members: dict[str, Cancellable | None] = {}  # KIP-394: got an id, not yet rejoined
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.join_timer: Cancellable | None = None
        self.join_initial = False
        self.initial_remaining_ms = 0
        self.sync_timer: Cancellable | None = None
        self.coordinator_id = -1
        # How many members support each protocol (Kafka keeps the same tally), so join
        # checks stay O(protocols) rather than O(members).
        self.protocol_counts: dict[str, int] = {}

    def __repr__(self) -> str:
        return (
            f"Group({self.group_id!r}, {self.state}, gen={self.generation_id}, members={list(self.members)})"
        )

    def transition(self, state: GroupState, now_ms: float) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def is_static_fenced(self, instance_id: str | None, member_id: str) -> bool:
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def validate_member(self, member_id: str, instance_id: str | None) -> int:
        """Kafka's current-member check: instance id (if any) maps to ``member_id``, which exists."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return UNKNOWN_MEMBER_ID
            if current != member_id:
                return FENCED_INSTANCE_ID
        return NONE if member_id in self.members else UNKNOWN_MEMBER_ID

    def supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        everyone = len(self.members)
        counts = self.protocol_counts
        return self.protocol_type == protocol_type and any(counts.get(name, 0) == everyone for name in names)

    def _count_protocols(self, member: Member, delta: int) -> None:
        counts = self.protocol_counts
        for name in set(member.protocol_names()):
            n = counts.get(name, 0) + delta
            if n:
                counts[name] = n
            else:
                counts.pop(name, None)

    def set_protocols(self, member: Member, protocols: Protocols) -> None:
        """Replaces a member's protocols, keeping the group's tally right."""
        if self.members.get(member.member_id) is member:
            self._count_protocols(member, -1)
            member.protocols = protocols
            self._count_protocols(member, 1)
        else:
            member.protocols = protocols

    def select_protocol(self) -> str:
        """The protocol every member supports with the most first-choice votes."""
        members = list(self.members.values())
        everyone = len(members)
        candidates = [n for n in members[0].protocol_names() if self.protocol_counts.get(n, 0) == everyone]
        if not candidates:  # guarded by supports_protocols at join time
            raise errors.InconsistentGroupProtocolError(f"group {self.group_id} has no common protocol")
        votes = dict.fromkeys(candidates, 0)
        for m in members:
            vote = next(n for n in m.protocol_names() if n in votes)
            votes[vote] += 1
        best = max(votes.values())
        leader = self.members.get(self.leader_id or "") or members[0]
        # Ties (Kafka leaves them to map order): the leader's preference decides.
        return next(n for n in leader.protocol_names() if votes.get(n) == best)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member, waiter: asyncio.Future[JoinResult] | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.join_waiter = waiter
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_sync.discard(member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keeps a rejoined leader or promotes any rejoined member; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        ]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, for consumer groups; None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            sub = _parse_subscription(m.metadata(self.protocol_name))
            if sub is None:
                return None
            topics.update(sub)
        return topics


def _parse_subscription(data: bytes) -> list[str] | None:
    if len(data) < 2:
        return None
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        return None
    try:
        sub = ConsumerProtocolSubscription.decode(
            memoryview(data)[2:], min(version, ConsumerProtocolSubscription.MAX_VERSION), strict=False
        )
    except errors.KafkaError:
        return None
    return list(sub.topics)


# -- the coordinator -----------------------------------------------------------------
class GroupCoordinator:
    """Group membership, rebalances and committed offsets for one embedded cluster.

    Lifecycle: created by ``register_group_handlers`` (published as
    ``cluster.services["groups"]``); ``start()`` loads persisted offsets and watches
    metadata; ``stop()`` (alias ``close()``) cancels every timer, answers waiting
    requests with NOT_COORDINATOR and closes the offsets file.
    """

    def __init__(
        self,
        cluster: ClusterState,
        *,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        store: OffsetStore | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config or GroupConfig.from_cluster(cluster)
        self.clock: Clock = clock or LoopClock()
        self.timers = Timers(self.clock)
        self.placement = placement_for(cluster)
        self.groups: dict[str, Group] = {}
        self.offsets = store if store is not None else OffsetStore(self._offsets_path())
        self._started = False
        self._live_brokers: tuple[int, ...] = ()

    def _offsets_path(self) -> str | None:
        storage = self.cluster.storage
        return str(storage.dir / "groups" / "offsets.jsonl") if storage is not None else None

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.timers.closed = False
        if self.cluster.storage is not None and self.offsets._path is None:
            self.offsets = OffsetStore(self._offsets_path())
        self.offsets.open()
        for group_id in self.offsets.groups():
            self._get_or_create(group_id)
        self._live_brokers = self._live_ids()
        self.cluster.add_listener(self._on_metadata_change)
        self._on_metadata_change()

    async def stop(self) -> None:
        self.timers.cancel_all()
        self.cluster.remove_listener(self._on_metadata_change)
        for group in self.groups.values():
            group.join_timer = group.sync_timer = None
            for m in group.members.values():
                m.session_timer = None
                self._answer_join(m, JoinResult(NOT_COORDINATOR, m.member_id))
                self._answer_sync(m, SyncResult(NOT_COORDINATOR))
        self.offsets.close()
        self._started = False

    close = stop

    def _live_ids(self) -> tuple[int, ...]:
        return tuple(sorted(b.node_id for b in self.cluster.live_brokers()))

    def _on_metadata_change(self) -> None:
        # Deleted topics lose their committed offsets (Kafka cleans them up too).
        existing = set(self.cluster.topics)
        if self.offsets.topics() - existing:
            self.offsets.delete_topics(existing)
        live = self._live_ids()
        if live != self._live_brokers:
            self._live_brokers = live
            for group in self.groups.values():
                self._check_coordinator_moved(group)

    def _check_coordinator_moved(self, group: Group) -> None:
        now_id = self.placement.coordinator_id(group.group_id)
        if group.coordinator_id != now_id:
            old, group.coordinator_id = group.coordinator_id, now_id
            if old != -1:
                self._unload(group)

    def _unload(self, group: Group) -> None:
        """The group moved to another coordinator: in-flight requests fail, sessions restart."""
        now = self.clock.now_ms()
        for m in group.members.values():
            self._answer_join(m, JoinResult(NOT_COORDINATOR, m.member_id))
            self._answer_sync(m, SyncResult(NOT_COORDINATOR))
            m.last_heartbeat_ms = now

    def now(self) -> float:
        return self.clock.now_ms()

    # -- fault injection ------------------------------------------------------------------
    def move_coordinator(self, group_id: str, broker_id: int) -> None:
        """Makes ``broker_id`` the group's coordinator; the old one answers NOT_COORDINATOR."""
        self.placement.move(group_id, broker_id)
        group = self.groups.get(group_id)
        if group is not None:
            self._check_coordinator_moved(group)

    def expire_member(self, group_id: str, member_id: str) -> bool:
        """Expires a member (or pending member) now, as if its session timed out."""
        group = self.groups.get(group_id)
        if group is None:
            return False
        if member_id in group.pending_members:
            self._remove_pending(group, member_id)
            return True
        member = group.members.get(member_id)
        if member is None:
            return False
        self._remove_member_and_update(group, member)
        return True

    # -- helpers ----------------------------------------------------------------------------
    def _get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.now())
            group.coordinator_id = self.placement.coordinator_id(group_id)
        return group

    def coordinator_error(self, group_id: str, broker_id: int) -> int:
        return self.placement.check(group_id, GROUP_KEY, broker_id)

    def _txn_coordinator(self) -> TransactionCoordinator | None:
        from aiokafka_lite.broker.transactions import TransactionCoordinator

        svc = self.cluster.services.get("transactions")
        return svc if isinstance(svc, TransactionCoordinator) else None

    @staticmethod
    def _answer_join(member: Member, result: JoinResult) -> None:
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)

    @staticmethod
    def _answer_sync(member: Member, result: SyncResult) -> None:
        waiter, member.sync_waiter = member.sync_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)

    # -- sessions ---------------------------------------------------------------------------
    def _heartbeat(self, group: Group, member: Member) -> None:
        member.last_heartbeat_ms = self.now()
        if member.session_timer is None:
            member.session_timer = self.timers.schedule(
                member.session_timeout_ms, lambda: self._on_session_timer(group, member)
            )

    def _on_session_timer(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        now = self.now()
        if member.awaiting_join:
            # Members parked in the join barrier stay (the rebalance timeout bounds them),
            # except new members stuck longer than Kafka's new-member join timeout.
            if not member.is_new or now < member.last_heartbeat_ms + NEW_MEMBER_JOIN_TIMEOUT_MS:
                delay = float(member.session_timeout_ms)
                if member.is_new:
                    delay = min(delay, member.last_heartbeat_ms + NEW_MEMBER_JOIN_TIMEOUT_MS - now)
                member.session_timer = self.timers.schedule(
                    delay, lambda: self._on_session_timer(group, member)
                )
                return
        elif member.sync_waiter is not None:
            member.session_timer = self.timers.schedule(
                member.session_timeout_ms, lambda: self._on_session_timer(group, member)
            )
            return
        else:
            deadline = member.last_heartbeat_ms + member.session_timeout_ms
            if now + 0.5 < deadline:  # heartbeats arrived since the timer was set
                member.session_timer = self.timers.schedule(
                    deadline - now, lambda: self._on_session_timer(group, member)
                )
                return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member_and_update(group, member)

    def _add_pending(self, group: Group, member_id: str, session_timeout_ms: int) -> None:
        group.pending_members[member_id] = self.timers.schedule(
            session_timeout_ms, lambda: self._remove_pending(group, member_id)
        )

    def _remove_pending(self, group: Group, member_id: str) -> None:
        if member_id not in group.pending_members:
            return
        self.timers.cancel(group.pending_members.pop(member_id))
        if group.state is GroupState.PREPARING_REBALANCE:
            self._check_join(group)

    def _remove_member_and_update(self, group: Group, member: Member) -> None:
        self._answer_join(member, JoinResult(UNKNOWN_MEMBER_ID, ""))
        self._answer_sync(member, SyncResult(UNKNOWN_MEMBER_ID))
        self.timers.cancel(member.session_timer)
        member.session_timer = None
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._check_join(group)

    # -- rebalance machinery -----------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            # Followers waiting in SyncGroup must rejoin.
            for m in group.members.values():
                m.assignment = b""
                self._answer_sync(m, SyncResult(REBALANCE_IN_PROGRESS))
        self.timers.cancel(group.sync_timer)
        group.sync_timer = None
        self.timers.cancel(group.join_timer)
        initial = group.state is GroupState.EMPTY
        group.join_initial = initial
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_timer = self.timers.schedule(delay, lambda: self._on_initial_join_timer(group))
        else:
            group.join_timer = self.timers.schedule(
                group.rebalance_timeout_ms(), lambda: self._on_join_timer(group)
            )
        group.transition(GroupState.PREPARING_REBALANCE, self.now())
        log.debug("group %s: preparing rebalance (generation %d)", group.group_id, group.generation_id)
        if not initial:
            self._check_join(group)

    def _on_initial_join_timer(self, group: Group) -> None:
        group.join_timer = None
        if group.state is not GroupState.PREPARING_REBALANCE or not group.join_initial:
            return
        if group.new_member_added and group.initial_remaining_ms > 0:
            # Members keep arriving: wait another delay, within the rebalance timeout.
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(
                group.initial_remaining_ms - self.config.initial_rebalance_delay_ms, 0
            )
            group.join_timer = self.timers.schedule(delay, lambda: self._on_initial_join_timer(group))
            return
        self._complete_join(group)

    def _on_join_timer(self, group: Group) -> None:
        group.join_timer = None
        if group.state is GroupState.PREPARING_REBALANCE:
            self._complete_join(group)

    def _check_join(self, group: Group) -> None:
        if group.state is GroupState.PREPARING_REBALANCE and not group.join_initial and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """The join barrier is over: drop laggards, start the next generation, answer joins."""
        self.timers.cancel(group.join_timer)
        group.join_timer = None
        group.join_initial = False
        for m in list(group.members.values()):
            # Dynamic members that did not rejoin are gone; static ones keep their place
            # until their session expires.
            if not m.awaiting_join and m.group_instance_id is None:
                self.timers.cancel(m.session_timer)
                m.session_timer = None
                group.remove(m.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined remain: wait for them (or their expiry).
            group.join_timer = self.timers.schedule(
                group.rebalance_timeout_ms(), lambda: self._on_join_timer(group)
            )
            return
        now = self.now()
        group.generation_id += 1
        group.pending_sync.clear()
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, now)
            log.debug("group %s: empty at generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.debug(
            "group %s: generation %d, protocol %s, leader %s, %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            len(group.members),
        )
        leader_view = group.current_member_metadata()
        for m in group.members.values():
            self._answer_join(
                m,
                JoinResult(
                    NONE,
                    m.member_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    leader_view if group.is_leader(m.member_id) else [],
                ),
            )
            m.is_new = False
            self._heartbeat(group, m)
            group.pending_sync.add(m.member_id)
        generation = group.generation_id
        group.sync_timer = self.timers.schedule(
            group.rebalance_timeout_ms(), lambda: self._on_sync_timeout(group, generation)
        )

    def _on_sync_timeout(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if group.generation_id != generation or not group.pending_sync:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        log.info("group %s: members %s never sent SyncGroup", group.group_id, sorted(group.pending_sync))
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                self._answer_join(member, JoinResult(UNKNOWN_MEMBER_ID, ""))
                self._answer_sync(member, SyncResult(UNKNOWN_MEMBER_ID))
                self.timers.cancel(member.session_timer)
                member.session_timer = None
            group.remove(member_id)
        self._prepare_rebalance(group)

    def _add_member_and_rebalance(
        self, group: Group, member: Member, waiter: asyncio.Future[JoinResult] | None
    ) -> None:
        member.is_new = True
        if group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        self.timers.cancel(group.pending_members.get(member.member_id))
        group.add(member, waiter)
        self._heartbeat(group, member)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: asyncio.Future[JoinResult],
    ) -> None:
        self._update_member(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
        self._maybe_prepare_rebalance(group)

    def _update_member(
        self,
        group: Group,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: asyncio.Future[JoinResult] | None,
    ) -> None:
        if member.join_waiter is not None and member.join_waiter is not waiter:
            # A duplicate JoinGroup (client retry): the older request is answered, not leaked.
            self._answer_join(member, JoinResult(REBALANCE_IN_PROGRESS, member.member_id))
        group.set_protocols(member, protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_waiter = waiter

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.state is GroupState.PREPARING_REBALANCE:
            m = group.members.get(member_id)
            return (m is not None and m.awaiting_join) or group.num_awaiting_join() < self.config.max_size
        return member_id in group.members or len(group.members) < self.config.max_size

    # -- JoinGroup --------------------------------------------------------------------------------
    def join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        supports_skip_assignment: bool,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """JoinGroup after the coordinator check: an immediate result or a future one."""
        if not group_id:
            return JoinResult(INVALID_GROUP_ID, member_id)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResult(INVALID_SESSION_TIMEOUT, member_id)
        unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown:
                return JoinResult(UNKNOWN_MEMBER_ID, member_id)
            group = self._get_or_create(group_id)
        if not self._accept_joining_member(group, member_id):
            # Kafka forgets a rejected member entirely.
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member_and_update(group, member)
            elif member_id in group.pending_members:
                self._remove_pending(group, member_id)
            return JoinResult(GROUP_MAX_SIZE_REACHED, "")
        names = [n for n, _ in protocols]
        result: JoinResult | asyncio.Future[JoinResult]
        if group.state is GroupState.DEAD:
            result = JoinResult(COORDINATOR_NOT_AVAILABLE, member_id)
        elif not group.supports_protocols(protocol_type, names):
            result = JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id)
        elif unknown:
            new_id = f"{group_instance_id or client_id}-{uuid.uuid4()}"
            if group_instance_id is not None:
                result = self._static_join(
                    group,
                    new_id,
                    group_instance_id,
                    session_timeout_ms,
                    rebalance_timeout_ms,
                    protocol_type,
                    protocols,
                    client_id,
                    client_host,
                    supports_skip_assignment,
                )
            elif require_known_member_id:
                self._add_pending(group, new_id, session_timeout_ms)
                result = JoinResult(MEMBER_ID_REQUIRED, new_id)
            else:
                waiter = _join_future()
                member = Member(
                    new_id,
                    None,
                    client_id,
                    client_host,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocol_type,
                    protocols,
                )
                self._add_member_and_rebalance(group, member, waiter)
                result = waiter
        elif member_id in group.pending_members:
            waiter = _join_future()
            member = Member(
                member_id,
                None,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
            self._add_member_and_rebalance(group, member, waiter)
            result = waiter
        else:
            result = self._current_member_join(
                group, member_id, group_instance_id, session_timeout_ms, rebalance_timeout_ms, protocols
            )
        if group.state is GroupState.PREPARING_REBALANCE:
            self._check_join(group)
        return result

    def _static_join(
        self,
        group: Group,
        new_id: str,
        instance_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        client_id: str,
        client_host: str,
        supports_skip: bool,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        waiter = _join_future()
        old_id = group.static_members.get(instance_id)
        if old_id is None or old_id not in group.members:
            member = Member(
                new_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
            self._add_member_and_rebalance(group, member, waiter)
            return waiter
        # A known instance restarted: the new member id replaces the old one, which is fenced.
        prior_leader = group.leader_id or ""
        member = group.members.pop(old_id)
        self._answer_join(member, JoinResult(FENCED_INSTANCE_ID, old_id))
        self._answer_sync(member, SyncResult(FENCED_INSTANCE_ID))
        member.member_id = new_id
        member.client_id, member.client_host = client_id, client_host
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        self._heartbeat(group, member)
        self._update_member(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # The group's protocol stays: no rebalance, the member resumes the generation.
                is_leader = group.is_leader(new_id)
                skip = is_leader and supports_skip
                result = JoinResult(
                    NONE,
                    new_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    group.current_member_metadata() if skip else [],
                    skip_assignment=skip,
                    legacy_leader=prior_leader,
                )
                if not supports_skip:
                    result.leader = prior_leader
                self._answer_join(member, result)
                return result
            self._maybe_prepare_rebalance(group)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already assign with the old member id: start over.
            self._prepare_rebalance(group)
        return waiter

    def _current_member_join(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: Protocols,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        err = group.validate_member(member_id, instance_id)
        if err:
            return JoinResult(err, member_id)
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            waiter = _join_future()
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter
            )
            return waiter
        if group.state is GroupState.COMPLETING_REBALANCE:
            if member.protocols == protocols:
                # Lost JoinGroup response: repeat this generation's answer.
                return JoinResult(
                    NONE,
                    member_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    group.current_member_metadata() if group.is_leader(member_id) else [],
                )
            waiter = _join_future()
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter
            )
            return waiter
        if group.state is GroupState.STABLE:
            if group.is_leader(member_id) or member.protocols != protocols:
                # A leader rejoining forces a rebalance (e.g. it saw new partitions).
                waiter = _join_future()
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter
                )
                return waiter
            return JoinResult(
                NONE,
                member_id,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                group.leader_id or "",
                [],
            )
        return JoinResult(UNKNOWN_MEMBER_ID, member_id)

    # -- SyncGroup ------------------------------------------------------------------------------
    def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult | asyncio.Future[SyncResult]:
        if not group_id:
            return SyncResult(INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(UNKNOWN_MEMBER_ID)
        if group.state is GroupState.DEAD:
            return SyncResult(COORDINATOR_NOT_AVAILABLE)
        err = group.validate_member(member_id, group_instance_id)
        if err:
            return SyncResult(err)
        if generation_id != group.generation_id:
            return SyncResult(ILLEGAL_GENERATION)
        if protocol_type is not None and group.protocol_type != protocol_type:
            return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
        if protocol_name is not None and group.protocol_name != protocol_name:
            return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
        if group.state is GroupState.EMPTY:
            return SyncResult(UNKNOWN_MEMBER_ID)
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        if group.state is GroupState.STABLE:
            self._heartbeat(group, member)
            return SyncResult(NONE, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance: wait for the leader's assignment.
        waiter = _sync_future()
        if member.sync_waiter is not None:
            self._answer_sync(member, SyncResult(REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        if group.is_leader(member_id):
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.transition(GroupState.STABLE, self.now())
            log.debug("group %s: stable at generation %d", group.group_id, group.generation_id)
            for m in group.members.values():
                if m.sync_waiter is not None:
                    self._answer_sync(
                        m, SyncResult(NONE, m.assignment, group.protocol_type, group.protocol_name)
                    )
                    self._heartbeat(group, m)
        return waiter

    # -- Heartbeat / LeaveGroup ---------------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        if not group_id:
            return INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        err = group.validate_member(member_id, group_instance_id)
        if err:
            return err
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if group.state is GroupState.EMPTY:
            return UNKNOWN_MEMBER_ID
        self._heartbeat(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, per-member errors) for (member id, group instance id) pairs."""
        if not group_id:
            return INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            return NONE, [UNKNOWN_MEMBER_ID] * len(members)
        if group.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE, []
        out: list[int] = []
        for member_id, instance_id in members:
            if member_id == "":
                # Administrative removal of a static member by instance id.
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None or current not in group.members:
                    out.append(UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update(group, group.members[current])
                    out.append(NONE)
            elif member_id in group.pending_members:
                self._remove_pending(group, member_id)
                out.append(NONE)
            else:
                err = group.validate_member(member_id, instance_id)
                if err == NONE:
                    log.debug("group %s: member %s left", group_id, member_id)
                    self._remove_member_and_update(group, group.members[member_id])
                out.append(err)
        return NONE, out

    # -- offsets ---------------------------------------------------------------------------
    def _validate_offset_commit(
        self, group: Group, generation_id: int, member_id: str, instance_id: str | None, transactional: bool
    ) -> int:
        if group.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            if group.is_static_fenced(instance_id, member_id):
                return FENCED_INSTANCE_ID
            if member_id != "" and member_id not in group.members:
                return UNKNOWN_MEMBER_ID
            if generation_id >= 0 and generation_id != group.generation_id:
                return ILLEGAL_GENERATION
            return NONE
        if not transactional and group.state is not GroupState.EMPTY:
            # Only members may commit to an active group (simple commits need an empty one).
            return UNKNOWN_MEMBER_ID
        return NONE

    def _partition_errors(
        self, offsets: dict[TopicPartition, CommittedOffset]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, CommittedOffset]]:
        """Per-partition pre-checks: unknown partitions, oversized metadata."""
        errs: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, CommittedOffset] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, c in offsets.items():
            if self.cluster.get_partition(tp.topic, tp.partition) is None:
                errs[tp] = UNKNOWN_TOPIC_OR_PARTITION
            elif len(c.metadata.encode("utf-8")) > limit:
                errs[tp] = OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = c
        return errs, valid

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, CommittedOffset],
        *,
        unknown_group_error: int = ILLEGAL_GENERATION,
    ) -> dict[TopicPartition, int]:
        """OffsetCommit after the coordinator check; per-partition error codes."""
        errs, valid = self._partition_errors(offsets)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return {tp: unknown_group_error if tp not in errs else errs[tp] for tp in offsets}
            group = self._get_or_create(group_id)
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, False)
        if err == NONE and group.state is GroupState.COMPLETING_REBALANCE:
            err = REBALANCE_IN_PROGRESS
        if err:
            return {tp: errs.get(tp, err) for tp in offsets}
        member = group.members.get(member_id)
        if member is not None and group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._heartbeat(group, member)
        self.offsets.commit(group_id, valid)
        return {tp: errs.get(tp, NONE) for tp in offsets}

    def txn_commit_offsets(
        self,
        *,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: offsets stay pending until the producer's transaction ends."""
        errs, valid = self._partition_errors(offsets)
        group = self._get_or_create(group_id)
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, True)
        if err == NONE:
            txn = self._txn_coordinator()
            if txn is not None:
                err = txn.check_offset_commit(transactional_id, producer_id, producer_epoch, group_id)
        if err:
            return {tp: errs.get(tp, err) for tp in offsets}
        self.offsets.add_pending(group_id, producer_id, valid)
        return {tp: errs.get(tp, NONE) for tp in offsets}

    def complete_txn(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        """Called by the transaction coordinator when a transaction with offsets ends."""
        for group_id in group_ids:
            self.offsets.complete_txn(group_id, producer_id, commit)

    def fetch_offsets(
        self, group_id: str, tps: Sequence[TopicPartition] | None, require_stable: bool
    ) -> dict[TopicPartition, tuple[CommittedOffset | None, int]]:
        """OffsetFetch after the coordinator check: (offset or None, error) per partition."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return {tp: (None, NONE) for tp in tps or ()}
        wanted = list(tps) if tps is not None else sorted(self.offsets.all(group_id))
        out: dict[TopicPartition, tuple[CommittedOffset | None, int]] = {}
        for tp in wanted:
            if require_stable and self.offsets.is_pending(group_id, tp):
                out[tp] = (None, UNSTABLE_OFFSET_COMMIT)
            else:
                out[tp] = (self.offsets.get(group_id, tp), NONE)
        return out

    def delete_groups(self, group_ids: Sequence[str], broker_id: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for group_id in group_ids:
            err = self.coordinator_error(group_id, broker_id)
            if err:
                out[group_id] = err
                continue
            group = self.groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                out[group_id] = GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                out[group_id] = NON_EMPTY_GROUP
            else:
                group.transition(GroupState.DEAD, self.now())
                self._drop_group(group)
                out[group_id] = NONE
        return out

    def _drop_group(self, group: Group) -> None:
        for h in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            self.timers.cancel(h)
        for m in group.members.values():
            self.timers.cancel(m.session_timer)
        self.groups.pop(group.group_id, None)
        self.offsets.delete_group(group.group_id)

    def delete_offsets(
        self, group_id: str, tps: Sequence[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete after the coordinator check: (group error, per-partition errors)."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return GROUP_ID_NOT_FOUND, {}
        out: dict[TopicPartition, int] = {}
        eligible: list[TopicPartition] = []
        if group.state is GroupState.EMPTY:
            eligible = list(tps)
        elif group.protocol_type == "consumer":
            subscribed = group.subscribed_topics()
            for tp in tps:
                if subscribed is None or tp.topic in subscribed:
                    out[tp] = GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return NON_EMPTY_GROUP, {}
        self.offsets.delete(group_id, eligible)
        for tp in eligible:
            out[tp] = NONE
        return NONE, out

    # -- request handlers ------------------------------------------------------------------
    def register(self, registry: HandlerRegistry) -> None:
        registry.register(FindCoordinatorRequest.API_KEY, self.handle_find_coordinator, 0, 6)
        registry.register(JoinGroupRequest.API_KEY, self.handle_join_group, 0, 9)
        registry.register(SyncGroupRequest.API_KEY, self.handle_sync_group, 0, 5)
        registry.register(HeartbeatRequest.API_KEY, self.handle_heartbeat, 0, 4)
        registry.register(LeaveGroupRequest.API_KEY, self.handle_leave_group, 0, 5)
        registry.register(OffsetCommitRequest.API_KEY, self.handle_offset_commit, 2, 9)
        registry.register(OffsetFetchRequest.API_KEY, self.handle_offset_fetch, 1, 9)
        registry.register(DescribeGroupsRequest.API_KEY, self.handle_describe_groups, 0, 6)
        registry.register(ListGroupsRequest.API_KEY, self.handle_list_groups, 0, 5)
        registry.register(DeleteGroupsRequest.API_KEY, self.handle_delete_groups, 0, 2)
        registry.register(OffsetDeleteRequest.API_KEY, self.handle_offset_delete, 0, 0)
        registry.register(TxnOffsetCommitRequest.API_KEY, self.handle_txn_offset_commit, 0, 4)

    async def handle_find_coordinator(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, FindCoordinatorRequest)
        v = ctx.api_version
        keys = list(req.coordinator_keys) if v >= 4 else [req.key]
        key_type = req.key_type if v >= 1 else GROUP_KEY
        found = [self._find(k, key_type) for k in keys]
        resp = FindCoordinatorResponse()
        if v >= 4:
            resp.coordinators = [
                FindCoordinatorResponse.Coordinator(
                    key=k, node_id=node, host=host, port=port, error_code=err, error_message=msg
                )
                for k, (err, msg, node, host, port) in zip(keys, found, strict=True)
            ]
        else:
            err, msg, node, host, port = found[0]
            resp.error_code, resp.node_id, resp.host, resp.port = err, node, host, port
            resp.error_message = msg if v >= 1 else None
        return resp

    def _find(self, key: str, key_type: int) -> tuple[int, str | None, int, str, int]:
        if key_type not in (GROUP_KEY, TXN_KEY):
            return INVALID_REQUEST, f"unsupported coordinator key type {key_type}", -1, "", -1
        if key_type == TXN_KEY and not key:
            return INVALID_REQUEST, "empty transactional id", -1, "", -1
        b = self.placement.coordinator(key, key_type)
        if b is None:
            return COORDINATOR_NOT_AVAILABLE, "no broker is alive", -1, "", -1
        return NONE, None, b.node_id, b.host, b.port

    async def handle_join_group(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, JoinGroupRequest)
        v = ctx.api_version
        err = self.coordinator_error(req.group_id, ctx.broker_id) if req.group_id else INVALID_GROUP_ID
        if err:
            return _join_response(v, JoinResult(err, req.member_id))
        res = self.join_group(
            group_id=req.group_id,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id if v >= 5 else None,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            client_id=ctx.client_id or "",
            client_host="/" + ctx.client_host,
            require_known_member_id=v >= 4,
            supports_skip_assignment=v >= 9,
        )
        result = await res if isinstance(res, asyncio.Future) else res
        return _join_response(v, result)

    async def handle_sync_group(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, SyncGroupRequest)
        v = ctx.api_version
        err = self.coordinator_error(req.group_id, ctx.broker_id) if req.group_id else INVALID_GROUP_ID
        if err:
            return SyncGroupResponse(error_code=err)
        res = self.sync_group(
            group_id=req.group_id,
            generation_id=req.generation_id,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id if v >= 3 else None,
            protocol_type=req.protocol_type if v >= 5 else None,
            protocol_name=req.protocol_name if v >= 5 else None,
            assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
        )
        result = await res if isinstance(res, asyncio.Future) else res
        resp = SyncGroupResponse(error_code=result.error, assignment=result.assignment)
        if v >= 5 and result.error == NONE:
            resp.protocol_type, resp.protocol_name = result.protocol_type, result.protocol_name
        return resp

    async def handle_heartbeat(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, HeartbeatRequest)
        err = self.coordinator_error(req.group_id, ctx.broker_id) if req.group_id else INVALID_GROUP_ID
        if not err:
            err = self.heartbeat(
                req.group_id,
                req.generation_id,
                req.member_id,
                req.group_instance_id if ctx.api_version >= 3 else None,
            )
        return HeartbeatResponse(error_code=err)

    async def handle_leave_group(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, LeaveGroupRequest)
        v = ctx.api_version
        if v >= 3:
            identities = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            identities = [(req.member_id, None)]
        err = self.coordinator_error(req.group_id, ctx.broker_id) if req.group_id else INVALID_GROUP_ID
        member_errs: list[int] = []
        if not err:
            err, member_errs = self.leave_group(req.group_id, identities)
        resp = LeaveGroupResponse(error_code=err)
        if v >= 3:
            resp.members = [
                LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e)
                for (mid, iid), e in zip(identities, member_errs, strict=False)
            ]
        elif err == NONE:
            resp.error_code = next((e for e in member_errs if e), NONE)
        return resp

    async def handle_offset_commit(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, OffsetCommitRequest)
        v = ctx.api_version
        now_wall = _wall_ms()
        offsets: dict[TopicPartition, CommittedOffset] = {}
        for t in req.topics:
            for p in t.partitions:
                offsets[TopicPartition(t.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset,
                    p.committed_leader_epoch if v >= 6 else -1,
                    p.committed_metadata or "",
                    now_wall,
                )
        err = self.coordinator_error(req.group_id, ctx.broker_id)
        if err:
            result = dict.fromkeys(offsets, err)
        else:
            result = self.commit_offsets(
                req.group_id,
                req.generation_id_or_member_epoch,
                req.member_id,
                req.group_instance_id if v >= 7 else None,
                offsets,
                unknown_group_error=GROUP_ID_NOT_FOUND if v >= 9 else ILLEGAL_GENERATION,
            )
        return OffsetCommitResponse(
            topics=[
                OffsetCommitResponse.OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetCommitResponse.OffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=result[TopicPartition(t.name, p.partition_index)],
                        )
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ]
        )

    async def handle_txn_offset_commit(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, TxnOffsetCommitRequest)
        v = ctx.api_version
        now_wall = _wall_ms()
        offsets: dict[TopicPartition, CommittedOffset] = {}
        for t in req.topics:
            for p in t.partitions:
                offsets[TopicPartition(t.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset,
                    p.committed_leader_epoch if v >= 2 else -1,
                    p.committed_metadata or "",
                    now_wall,
                )
        err = self.coordinator_error(req.group_id, ctx.broker_id)
        if err:
            result = dict.fromkeys(offsets, err)
        else:
            result = self.txn_commit_offsets(
                transactional_id=req.transactional_id,
                group_id=req.group_id,
                producer_id=req.producer_id,
                producer_epoch=req.producer_epoch,
                generation_id=req.generation_id_or_member_epoch if v >= 3 else -1,
                member_id=req.member_id if v >= 3 else "",
                group_instance_id=req.group_instance_id if v >= 3 else None,
                offsets=offsets,
            )
        return TxnOffsetCommitResponse(
            topics=[
                TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=result[TopicPartition(t.name, p.partition_index)],
                        )
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ]
        )

    async def handle_offset_fetch(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, OffsetFetchRequest)
        v = ctx.api_version
        require_stable = req.require_stable if v >= 7 else False
        if v >= 8:
            groups: list[OffsetFetchResponse.OffsetFetchResponseGroup] = []
            for g in req.groups:
                tps = (
                    None
                    if g.topics is None
                    else [TopicPartition(t.name, i) for t in g.topics for i in t.partition_indexes]
                )
                err = self.coordinator_error(g.group_id, ctx.broker_id)
                if err:
                    groups.append(
                        OffsetFetchResponse.OffsetFetchResponseGroup(group_id=g.group_id, error_code=err)
                    )
                    continue
                fetched = self.fetch_offsets(g.group_id, tps, require_stable)
                by_topic: dict[str, list[OffsetFetchResponse.OffsetFetchResponsePartitions]] = {}
                for tp, (c, e) in fetched.items():
                    by_topic.setdefault(tp.topic, []).append(
                        OffsetFetchResponse.OffsetFetchResponsePartitions(
                            partition_index=tp.partition,
                            committed_offset=c.offset if c is not None else -1,
                            committed_leader_epoch=c.leader_epoch if c is not None else -1,
                            metadata=c.metadata if c is not None else "",
                            error_code=e,
                        )
                    )
                groups.append(
                    OffsetFetchResponse.OffsetFetchResponseGroup(
                        group_id=g.group_id,
                        topics=[
                            OffsetFetchResponse.OffsetFetchResponseTopics(name=name, partitions=parts)
                            for name, parts in by_topic.items()
                        ],
                    )
                )
            return OffsetFetchResponse(groups=groups)
        wanted = (
            None
            if req.topics is None
            else [TopicPartition(t.name, i) for t in req.topics for i in t.partition_indexes]
        )
        err = self.coordinator_error(req.group_id, ctx.broker_id)
        if err:
            if v >= 2:
                return OffsetFetchResponse(error_code=err)
            fetched = {tp: (None, err) for tp in wanted or ()}
        else:
            fetched = self.fetch_offsets(req.group_id, wanted, require_stable)
        topics: dict[str, list[OffsetFetchResponse.OffsetFetchResponsePartition]] = {}
        for tp, (c, e) in fetched.items():
            topics.setdefault(tp.topic, []).append(
                OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=tp.partition,
                    committed_offset=c.offset if c is not None else -1,
                    committed_leader_epoch=c.leader_epoch if c is not None else -1,
                    metadata=c.metadata if c is not None else "",
                    error_code=e,
                )
            )
        return OffsetFetchResponse(
            topics=[
                OffsetFetchResponse.OffsetFetchResponseTopic(name=name, partitions=parts)
                for name, parts in topics.items()
            ]
        )

    async def handle_describe_groups(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, DescribeGroupsRequest)
        v = ctx.api_version
        out: list[DescribeGroupsResponse.DescribedGroup] = []
        for group_id in req.groups:
            d = DescribeGroupsResponse.DescribedGroup(group_id=group_id)
            if v >= 3 and req.include_authorized_operations:
                d.authorized_operations = _GROUP_OPERATIONS
            err = self.coordinator_error(group_id, ctx.broker_id)
            group = self.groups.get(group_id)
            if err:
                d.error_code = err
            elif group is None or group.state is GroupState.DEAD:
                d.group_state = GroupState.DEAD.value
                if v >= 6:
                    d.error_code = GROUP_ID_NOT_FOUND
                    d.error_message = f"group {group_id} not found"
            else:
                d.group_state = group.state.value
                d.protocol_type = group.protocol_type or ""
                stable = group.state is GroupState.STABLE
                d.protocol_data = (group.protocol_name or "") if stable else ""
                d.members = [
                    DescribeGroupsResponse.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata(group.protocol_name) if stable else b"",
                        member_assignment=m.assignment if stable else b"",
                    )
                    for m in group.members.values()
                ]
            out.append(d)
        return DescribeGroupsResponse(groups=out)

    async def handle_list_groups(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ListGroupsRequest)
        v = ctx.api_version
        states = {s.lower() for s in req.states_filter} if v >= 4 else set()
        types = {t.lower() for t in req.types_filter} if v >= 5 else set()
        listed = []
        if not types or "classic" in types:
            for group in self.groups.values():
                if group.state is GroupState.DEAD or self.coordinator_error(group.group_id, ctx.broker_id):
                    continue
                if states and group.state.value.lower() not in states:
                    continue
                listed.append(
                    ListGroupsResponse.ListedGroup(
                        group_id=group.group_id,
                        protocol_type=group.protocol_type or "",
                        group_state=group.state.value,
                        group_type="classic",
                    )
                )
        return ListGroupsResponse(groups=listed)

    async def handle_delete_groups(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, DeleteGroupsRequest)
        result = self.delete_groups(req.groups_names, ctx.broker_id)
        return DeleteGroupsResponse(
            results=[
                DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=result[g])
                for g in req.groups_names
            ]
        )

    async def handle_offset_delete(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, OffsetDeleteRequest)
        tps = [TopicPartition(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        err = self.coordinator_error(req.group_id, ctx.broker_id)
        per: dict[TopicPartition, int] = {}
        if not err:
            known = [tp for tp in tps if self.cluster.get_partition(tp.topic, tp.partition) is not None]
            per = {tp: UNKNOWN_TOPIC_OR_PARTITION for tp in tps if tp not in set(known)}
            err, deleted = self.delete_offsets(req.group_id, known)
            per.update(deleted)
        if err:
            return OffsetDeleteResponse(error_code=err)
        return OffsetDeleteResponse(
            topics=[
                OffsetDeleteResponse.OffsetDeleteResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetDeleteResponse.OffsetDeleteResponsePartition(
                            partition_index=p.partition_index,
                            error_code=per.get(TopicPartition(t.name, p.partition_index), NONE),
                        )
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ]
        )


def _join_response(v: int, r: JoinResult) -> JoinGroupResponse:
    resp = JoinGroupResponse(
        error_code=r.error, generation_id=r.generation_id, member_id=r.member_id, leader=r.leader
    )
    if r.error != NONE:
        resp.protocol_name = None if v >= 7 else ""
        return resp
    resp.protocol_type = r.protocol_type if v >= 7 else None
    resp.protocol_name = r.protocol_name if v >= 7 else (r.protocol_name or "")
    members = r.members
    if r.skip_assignment and v < 9:
        members, resp.leader = [], r.legacy_leader
    resp.skip_assignment = r.skip_assignment and v >= 9
    resp.members = [
        JoinGroupResponse.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
        for mid, iid, meta in members
    ]
    return resp


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _join_future() -> asyncio.Future[JoinResult]:
    return asyncio.get_running_loop().create_future()


def _sync_future() -> asyncio.Future[SyncResult]:
    return asyncio.get_running_loop().create_future()


# -- wiring ---------------------------------------------------------------------------
def get_group_coordinator(cluster: ClusterState) -> GroupCoordinator | None:
    svc = cluster.services.get("groups")
    return svc if isinstance(svc, GroupCoordinator) else None


def register_group_handlers(registry: HandlerRegistry, cluster: ClusterState) -> GroupCoordinator:
    """Registers FindCoordinator and the group APIs; one coordinator per cluster.

    Publishes the coordinator as ``cluster.services["groups"]`` (the cluster calls its
    ``start()``/``stop()``). Safe to call once per broker registry.
    """
    coordinator = get_group_coordinator(cluster)
    if coordinator is None:
        coordinator = GroupCoordinator(cluster)
        cluster.services["groups"] = coordinator
    coordinator.register(registry)
    return coordinator


def expire_member(cluster: ClusterState, group_id: str, member_id: str) -> bool:
    """Fault injection: expire a member's session now. False if there is no such member."""
    coordinator = get_group_coordinator(cluster)
    return coordinator.expire_member(group_id, member_id) if coordinator is not None else False


def move_coordinator(cluster: ClusterState, group_id: str, broker_id: int) -> None:
    """Fault injection: make ``broker_id`` the coordinator of ``group_id``."""
    coordinator = get_group_coordinator(cluster)
    if coordinator is not None:
        coordinator.move_coordinator(group_id, broker_id)
    else:
        placement_for(cluster).move(group_id, broker_id)
