"""Classic consumer-group membership as a pure state machine (no I/O, no clock, no asyncio).

The driver (``coordinator.GroupCoordinator``) feeds events in and executes the actions
that come out, in order. Time is an argument (``now``, monotonic milliseconds), so every
transition is reproducible in a unit test.

States::

    UNJOINED --tick--> PREPARING --(callbacks done) join_request()--> JOINING
    JOINING --join_response(leader)--> ASSIGNING --assignment_computed--> SYNCING
    JOINING --join_response(follower)--> SYNCING --sync_response--> STABLE
    STABLE --heartbeat REBALANCE_IN_PROGRESS / subscription or metadata change--> (rejoin) PREPARING
    any --fatal error--> FAILED          any --close()--> CLOSED

``PREPARING`` is where partitions are revoked (eager: all; cooperative: those of topics
no longer subscribed) or declared lost (the generation was reset, so another member may
own them). It ends when the driver, having run the callbacks, asks ``join_request`` for
the JoinGroup to send: built at that moment, so it carries the member id and owned
partitions as they are after the callbacks.

Who owns what: the machine keeps its own view of the assignment (``owned``); the driver
mirrors it into ``SubscriptionState`` through ``AddPartitions``/``RemovePartitions``.
Heartbeats are a separate loop in the driver: ``heartbeat_request``/``heartbeat_response``
only change state (rejoin needed, member reset, coordinator lost); the resulting work
happens at the next ``tick``.

Every request action carries the ``attempt`` it belongs to; a reset (fencing, a new join,
close) bumps the attempt so that a response arriving for an abandoned exchange is ignored.

A lost session: the broker expires a member it has not heard from for
``session_timeout_ms``, and hands its partitions to others. The machine keeps its own
clock of that session (the last answer that proved it alive: a heartbeat answered, a
join or sync completed). Once it has run out (``expire_session``, called by the driver
from its heartbeat loop, from every poll and by ``tick``), another member may own those
partitions already, so the member stops handing out their records at once
(``FreezePartitions``) and looks the coordinator up again. What follows is the
coordinator's answer, as in the Java client: expired (UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION) means the partitions are lost (lost listener, no commit, removed; the
next owner, or this member after rejoining, reads on from the committed offsets); a
heartbeat answered normally means the session survived (a coordinator that moved or
failed over restarts every member's session when it takes the group over), and the
partitions are handed out again (``ThawPartitions``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiokafka_lite.consume.groups.assignors import Assignor, cooperative_diff, get_assignor
from aiokafka_lite.consume.groups.listener import ListenerKind
from aiokafka_lite.consume.groups.protocol import (
    PROTOCOL_TYPE,
    JoinedMember,
    decode_assignment,
    encode_subscription,
)
from aiokafka_lite.consume.groups.session_clock import SessionClock
from aiokafka_lite.core.errors import (
    CommitFailedError,
    ConfigError,
    CorruptFrameError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaError,
    UnsupportedVersionError,
    error_for,
)
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.retry import Backoff
from aiokafka_lite.wire.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = [
    "Action",
    "AddPartitions",
    "CommitOffsets",
    "ComputeAssignment",
    "FindCoordinator",
    "FreezePartitions",
    "GroupSettings",
    "InvokeListener",
    "MemberState",
    "Membership",
    "RemovePartitions",
    "SendJoinGroup",
    "SendLeaveGroup",
    "SendSyncGroup",
    "ThawPartitions",
    "leave_group_request",
]

log = logging.getLogger(__name__)

# Error codes (named here once, so transitions read like the protocol guide).
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
UNSTABLE_OFFSET_COMMIT = 88

_COORDINATOR_MOVED = (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)
# Errors after which retrying cannot help: the application must hear about them.
_FATAL = (
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    InvalidGroupIdError,
    GroupAuthorizationFailedError,
    UnsupportedVersionError,
)

JOIN_TIMEOUT_LAPSE_MS = 5000
"""JoinGroup may be parked by the broker for the whole rebalance timeout; wait that
long plus this margin before calling the request failed (as the Java client does)."""


class MemberState(enum.Enum):
    UNJOINED = "unjoined"  # must (re)join; may still hold a member id, generation and partitions
    PREPARING = "preparing"  # revoke/lost callbacks before JoinGroup
    JOINING = "joining"  # JoinGroup in flight
    ASSIGNING = "assigning"  # leader: running the assignor
    SYNCING = "syncing"  # SyncGroup in flight
    STABLE = "stable"
    CLOSED = "closed"
    FAILED = "failed"  # fatal error; see Membership.fatal


# A JoinGroup/SyncGroup exchange is under way: the generation is being replaced.
_EXCHANGING: Final = frozenset({MemberState.JOINING, MemberState.ASSIGNING, MemberState.SYNCING})


# ----------------------------------------------------------------------------- settings


def _assignors(strategy: Any) -> tuple[Assignor, ...]:
    if isinstance(strategy, str) or not isinstance(strategy, Sequence | tuple | list):
        strategy = [strategy]
    out = tuple(get_assignor(s) for s in strategy)
    if not out:
        raise ConfigError("partition_assignment_strategy: must name at least one assignor")
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"partition_assignment_strategy: duplicate assignor names {names}")
    return out


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What the machine needs from the consumer configuration (Java defaults)."""

    group_id: str
    group_instance_id: str | None = None
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    rebalance_timeout_ms: int | None = None  # None: max_poll_interval_ms
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    assignors: tuple[Assignor, ...] = field(default_factory=lambda: _assignors(["cooperative-sticky"]))
    rack: str | None = None
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigError("group_id must not be empty")
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ConfigError("group_instance_id must not be empty (use None for a dynamic member)")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError("heartbeat_interval_ms must be lower than session_timeout_ms")
        if not self.assignors:
            raise ConfigError("at least one partition assignor is required")

    @classmethod
    def from_config(cls, config: Any) -> GroupSettings:
        """Build from a ``ConsumerConfig`` (or any object with the same attribute names)."""
        group_id = getattr(config, "group_id", None)
        if not group_id:
            raise ConfigError("a group coordinator needs a group_id")
        protocol = getattr(config, "group_protocol", "classic")
        if protocol != "classic":
            raise ConfigError(
                f"group_protocol={protocol!r}: GroupCoordinator drives the classic protocol; the consumer "
                "protocol is driven by groups.consumer_coordinator.ConsumerGroupCoordinator"
            )

        def get(name: str, default: Any) -> Any:
            value = getattr(config, name, default)
            return default if value is None else value

        rack = getattr(config, "client_rack", None) or None
        return cls(
            group_id=group_id,
            group_instance_id=getattr(config, "group_instance_id", None),
            session_timeout_ms=int(get("session_timeout_ms", 45000)),
            heartbeat_interval_ms=int(get("heartbeat_interval_ms", 3000)),
            max_poll_interval_ms=int(get("max_poll_interval_ms", 300000)),
            rebalance_timeout_ms=getattr(config, "rebalance_timeout_ms", None),
            enable_auto_commit=bool(get("enable_auto_commit", True)),
            auto_commit_interval_ms=int(get("auto_commit_interval_ms", 5000)),
            assignors=_assignors(get("partition_assignment_strategy", ["cooperative-sticky"])),
            rack=rack,
            retry_backoff_ms=int(get("retry_backoff_ms", 100)),
            retry_backoff_max_ms=int(get("retry_backoff_max_ms", 1000)),
        )

    @property
    def effective_rebalance_timeout_ms(self) -> int:
        return (
            self.rebalance_timeout_ms if self.rebalance_timeout_ms is not None else self.max_poll_interval_ms
        )

    @property
    def rebalance_protocol(self) -> str:
        """Cooperative only when every configured assignor is (KIP-429 upgrade rule): with
        an eager one in the list the group may pick it, so we must revoke as eager does."""
        if all(a.rebalance_protocol == "cooperative" for a in self.assignors):
            return "cooperative"
        return "eager"

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


# ----------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class FindCoordinator:
    """Look the coordinator up; ``invalidate`` forgets the client's cached answer first."""

    invalidate: bool = False


@dataclass(frozen=True, slots=True)
class SendJoinGroup:
    """Ask ``Membership.join_request(attempt, now)`` for the request and send it (the
    request is built late, after the preceding callbacks ran). ``None`` means the attempt
    was abandoned meanwhile: stop executing this batch of actions."""

    attempt: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class ComputeAssignment:
    """Leader: run ``assignor`` over ``members`` with fresh metadata, then report back
    through ``assignment_computed`` (or ``assignment_failed``)."""

    attempt: int
    assignor: Assignor
    members: tuple[JoinedMember, ...]
    generation: int


@dataclass(frozen=True, slots=True)
class SendSyncGroup:
    """Followers' SyncGroup is parked until the leader's arrives: like JoinGroup, it may
    take up to the rebalance timeout (``timeout_ms``)."""

    attempt: int
    request: SyncGroupRequest
    timeout_ms: int = 0


@dataclass(frozen=True, slots=True)
class SendLeaveGroup:
    """Best effort (no retries, response only logged). Build it with ``leave_group_request``."""

    member_id: str
    group_instance_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class FreezePartitions:
    """Stop handing out records of these partitions (they are about to go)."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ThawPartitions:
    """Hand out records of these partitions again (frozen when the session seemed lost;
    the coordinator has since answered that it was not)."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class InvokeListener:
    kind: ListenerKind
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class CommitOffsets:
    """Commit consumed positions (auto-commit): of ``partitions``, or of everything when None."""

    partitions: frozenset[TopicPartition] | None


@dataclass(frozen=True, slots=True)
class RemovePartitions:
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class AddPartitions:
    partitions: frozenset[TopicPartition]


Action = (
    FindCoordinator
    | SendJoinGroup
    | ComputeAssignment
    | SendSyncGroup
    | SendLeaveGroup
    | FreezePartitions
    | ThawPartitions
    | InvokeListener
    | CommitOffsets
    | RemovePartitions
    | AddPartitions
)


def leave_group_request(
    group_id: str, member_id: str, group_instance_id: str | None, reason: str | None, version: int
) -> LeaveGroupRequest:
    """LeaveGroup in the layout of ``version`` (v3+ batches members, KIP-345)."""
    if version <= 2:
        return LeaveGroupRequest(group_id=group_id, member_id=member_id)
    return LeaveGroupRequest(
        group_id=group_id,
        members=[
            LeaveGroupRequest.MemberIdentity(
                member_id=member_id, group_instance_id=group_instance_id, reason=reason
            )
        ],
    )


# ----------------------------------------------------------------------------- machine


class Membership:
    """Membership of one consumer in a classic group. See the module docstring."""

    def __init__(self, settings: GroupSettings, *, now: float = 0.0) -> None:
        self.settings = settings
        self.state = MemberState.UNJOINED
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.coordinator: int | None = None
        self.fatal: KafkaError | None = None

        self.owned: set[TopicPartition] = set()
        # The last assignment and its generation: sticky user data (eager members have
        # already revoked ``owned`` when they rejoin, but the assignor wants to know).
        self._last_assignment: list[TopicPartition] = []
        self._last_assignment_generation = -1

        self.topics: set[str] = set()
        self.subscribed = False
        self.rejoin_needed = False
        self.rejoin_reason = ""
        self.poll_timed_out = False

        self._attempt = 0
        self._finding = False
        self._coordinator_stale = False
        self._backoff_until = 0.0
        # Waits after failed exchanges: retry_backoff_ms doubling up to retry_backoff_max_ms.
        self._retry_backoff = Backoff(
            float(settings.retry_backoff_ms), float(settings.retry_backoff_max_ms), jitter=0
        )
        self._failed_exchanges = 0
        self.last_poll = now
        self._next_auto_commit = now + settings.auto_commit_interval_ms
        # heartbeats
        self._heartbeat_inflight = False
        self._next_heartbeat = now
        self._last_heartbeat_ok = now
        # Session clock (see the module docstring): when the broker last proved our
        # session alive; whether it has run out since (partitions frozen until the
        # coordinator answers), and whether a surviving session's partitions are to thaw.
        self._session = SessionClock(now)
        # leader bookkeeping: partition counts the assignment was computed from
        self.is_leader = False
        self.assigned_topic_counts: dict[str, int] = {}
        # Rebalances (observability): one starts when the member prepares to (re)join and
        # ends when an assignment is installed; retries in between belong to the same one.
        self.rebalances = 0
        self.rebalance_ms_total = 0.0
        self.last_rebalance_ms: float | None = None
        self.rebalance_started: float | None = None

    # ------------------------------------------------------------------ introspection
    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def join_timeout_ms(self) -> int:
        return self.settings.effective_rebalance_timeout_ms + JOIN_TIMEOUT_LAPSE_MS

    @property
    def in_group(self) -> bool:
        """Has a member id or generation the broker may still know."""
        return bool(self.member_id) or self.generation >= 0

    def commit_identity(self) -> tuple[int, str, str | None] | None:
        """``(generation, member_id, instance_id)`` to commit with, or None when offsets
        must not be committed (subscribed but not part of a generation, or a JoinGroup or
        SyncGroup is in flight: as the Java client, commits wait for the rebalance to
        finish, since the broker could only answer ILLEGAL_GENERATION or
        REBALANCE_IN_PROGRESS)."""
        if not self.subscribed:
            return -1, "", None  # offsets-only use of the group (manual assignment)
        if self.generation < 0 or not self.member_id or self.state in _EXCHANGING:
            return None
        return self.generation, self.member_id, self.settings.group_instance_id

    def next_deadline(self, now: float) -> float | None:
        """When ``tick`` may next have something to do without any event (None: never)."""
        if self.state in (MemberState.CLOSED, MemberState.FAILED):
            return None
        deadlines: list[float] = []
        if self._backoff_until > now:
            deadlines.append(self._backoff_until)
        session_end = self.session_deadline()
        if session_end is not None:
            deadlines.append(session_end + 1)
        if self.in_group and not self.poll_timed_out:
            deadlines.append(self.last_poll + self.settings.max_poll_interval_ms)
        if self.state is MemberState.STABLE and self.settings.enable_auto_commit:
            deadlines.append(self._next_auto_commit)
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ session
    @property
    def session_expired(self) -> bool:
        """The session ran out (no answer for ``session_timeout_ms``); the partitions held
        are frozen until the coordinator answers."""
        return self._session.expired

    @property
    def sessions_expired(self) -> int:
        """How many times the session ran out."""
        return self._session.expirations

    def session_deadline(self) -> float | None:
        """When the broker has surely expired this member if no answer proves its session
        alive before (None: no session to lose now). Not while a JoinGroup is in flight:
        the broker keeps a member waiting for a join alive for the rebalance timeout."""
        if self.generation < 0 or not self.member_id or self._session.expired:
            return None
        if self.state in (MemberState.JOINING, MemberState.CLOSED, MemberState.FAILED):
            return None
        return self._session.deadline(self.settings.session_timeout_ms)

    def expire_session(self, now: float) -> list[Action]:
        """Past ``session_deadline``: stop handing out records of the partitions held
        (returned as ``FreezePartitions``, for the driver to apply at once) and look the
        coordinator up again; its next answer says whether they are lost. [] while the
        session may be alive."""
        deadline = self.session_deadline()
        if deadline is None or now <= deadline:
            return []
        log.warning(
            "group %s: member %s heard nothing from the coordinator for %d ms, longer than "
            "session_timeout_ms (%d): the broker has most likely expired it; no record of %s is "
            "handed out until the coordinator answers",
            self.settings.group_id,
            self.member_id,
            now - self._session.alive_at,
            self.settings.session_timeout_ms,
            sorted(self.owned),
        )
        self._session.expire()
        self._coordinator_lost(now)
        return [FreezePartitions(frozenset(self.owned))] if self.owned else []

    def _session_alive(self, now: float) -> None:
        if self._session.alive(now, partitions_kept=self.generation >= 0):
            log.info("group %s: the coordinator kept this member's session", self.settings.group_id)

    # ------------------------------------------------------------------ inputs from the app
    def update_subscription(self, topics: Iterable[str], subscribed: bool = True) -> None:
        """The consumer's subscription (topics now matching) changed."""
        new = set(topics)
        if subscribed and new != self.topics and self.state not in (MemberState.UNJOINED,):
            self._request_rejoin("subscription changed")
        self.topics = new
        self.subscribed = subscribed

    def check_metadata(self, partitions_per_topic: Mapping[str, int]) -> None:
        """Leader: rejoin when a topic of the current assignment changed partition count
        (or appeared/disappeared), so the new partitions get an owner."""
        if not self.is_leader or self.state is not MemberState.STABLE:
            return
        for topic, count in self.assigned_topic_counts.items():
            if partitions_per_topic.get(topic, 0) != count:
                self._request_rejoin(f"partition count of {topic!r} changed")
                return

    def polled(self, now: float) -> bool:
        """The application polled (max_poll_interval_ms bookkeeping). True when this
        ends a poll timeout, i.e. there is now work to do (rejoin)."""
        self.last_poll = now
        if self.poll_timed_out:
            log.info("group %s: application polled again, rejoining", self.settings.group_id)
            self.poll_timed_out = False
            return True
        return False

    def request_rejoin(self, reason: str) -> None:
        """Explicit rejoin (e.g. the consumer's subscription was changed by the user)."""
        self._request_rejoin(reason)

    # ------------------------------------------------------------------ main step
    def tick(self, now: float) -> list[Action]:
        """What to do next when nothing is in flight. Returns [] when idle."""
        if self.state in (MemberState.CLOSED, MemberState.FAILED):
            return []
        expired = self.expire_session(now)
        if expired:
            return expired
        if self._session.take_thaw():
            if self.owned and self.generation >= 0:
                return [ThawPartitions(frozenset(self.owned))]
        if self.state in (
            MemberState.PREPARING,
            MemberState.JOINING,
            MemberState.ASSIGNING,
            MemberState.SYNCING,
        ):
            return []
        if self._finding or self.poll_timed_out:
            return []
        if self.in_group and now - self.last_poll > self.settings.max_poll_interval_ms:
            return self._leave_for_poll_timeout()
        if not self.subscribed:
            if self.in_group or self.owned:
                return self._leave("the consumer unsubscribed", revoke=True)
            return []
        if now < self._backoff_until:
            return []
        if self.coordinator is None:
            self._finding = True
            invalidate, self._coordinator_stale = self._coordinator_stale, False
            return [FindCoordinator(invalidate)]
        if self.state is MemberState.STABLE and not self.rejoin_needed:
            if self.settings.enable_auto_commit and now >= self._next_auto_commit:
                self._next_auto_commit = now + self.settings.auto_commit_interval_ms
                return [CommitOffsets(None)]
            return []
        return self._prepare_join(now)

    def _prepare_join(self, now: float) -> list[Action]:
        if self.rebalance_started is None:
            self.rebalance_started = now
        self.state = MemberState.PREPARING
        self._attempt += 1
        acts: list[Action] = []
        if self.owned:
            if self.generation < 0:
                # Fenced or expired: someone else may own these already.
                acts += self._give_up(self.owned, lost=True)
            elif self.settings.rebalance_protocol == "eager":
                acts += self._give_up(self.owned, lost=False)
            else:
                # Cooperative: keep everything still subscribed; commit progress first so a
                # partition moved by this rebalance resumes where we stopped.
                gone = {tp for tp in self.owned if tp.topic not in self.topics}
                if gone:
                    acts += self._give_up(gone, lost=False)
                if self.settings.enable_auto_commit and self.owned:
                    acts.append(CommitOffsets(frozenset(self.owned)))
        acts.append(SendJoinGroup(self._attempt, self.join_timeout_ms))
        return acts

    def _give_up(self, tps: Iterable[TopicPartition], *, lost: bool) -> list[Action]:
        """Freeze, call back, (commit), remove. Updates ``owned`` immediately."""
        parts = frozenset(tps)
        self.owned -= parts
        acts: list[Action] = [FreezePartitions(parts)]
        if lost:
            acts.append(InvokeListener("lost", parts))
            self._last_assignment = []
            self._last_assignment_generation = -1
        else:
            acts.append(InvokeListener("revoked", parts))
            if self.settings.enable_auto_commit:
                acts.append(CommitOffsets(parts))
        acts.append(RemovePartitions(parts))
        return acts

    # ------------------------------------------------------------------ JoinGroup
    def join_request(self, attempt: int, now: float) -> JoinGroupRequest | None:
        """Build the JoinGroup for ``attempt`` (None if abandoned) and enter JOINING."""
        if attempt != self._attempt or self.state is not MemberState.PREPARING:
            return None
        self.state = MemberState.JOINING
        self.is_leader = False
        topics = sorted(self.topics)
        owned = sorted(self.owned)
        protocols = []
        for a in self.settings.assignors:
            user_data = a.metadata(topics, list(self._last_assignment), self._last_assignment_generation)
            protocols.append(
                JoinGroupRequest.JoinGroupRequestProtocol(
                    name=a.name,
                    metadata=encode_subscription(
                        topics,
                        user_data=user_data,
                        owned=owned,
                        generation=self.generation,
                        rack=self.settings.rack,
                    ),
                )
            )
        reason = self.rejoin_reason or None
        self.rejoin_needed = False
        self.rejoin_reason = ""
        return JoinGroupRequest(
            group_id=self.settings.group_id,
            session_timeout_ms=self.settings.session_timeout_ms,
            rebalance_timeout_ms=self.settings.effective_rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.settings.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=protocols,
            reason=reason,
        )

    def join_response(self, attempt: int, resp: JoinGroupResponse, now: float) -> list[Action]:
        if attempt != self._attempt or self.state is not MemberState.JOINING:
            return []
        code = resp.error_code
        if code == NONE:
            if resp.protocol_type not in (None, PROTOCOL_TYPE):
                return self._fail(
                    InconsistentGroupProtocolError(f"group uses protocol type {resp.protocol_type!r}")
                )
            assignor = self._assignor(resp.protocol_name)
            if assignor is None:
                return self._fail(
                    InconsistentGroupProtocolError(
                        f"coordinator selected unknown assignor {resp.protocol_name!r}"
                    )
                )
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.protocol_name = assignor.name
            self.leader_id = resp.leader
            self._reset_backoff()
            self._last_heartbeat_ok = now
            self._session_alive(now)
            self._next_heartbeat = now + self.settings.heartbeat_interval_ms
            if resp.leader == resp.member_id and not resp.skip_assignment:
                self.is_leader = True
                self.state = MemberState.ASSIGNING
                members = tuple(
                    JoinedMember(m.member_id, m.group_instance_id, bytes(m.metadata)) for m in resp.members
                )
                return [ComputeAssignment(attempt, assignor, members, resp.generation_id)]
            # A static leader rejoining (KIP-814 skip_assignment) keeps the current
            # assignment; it syncs like a follower.
            self.is_leader = resp.leader == resp.member_id
            return self._sync(attempt, {})
        if code == MEMBER_ID_REQUIRED:
            # KIP-394: the coordinator gave us an id; join again with it right away.
            self.member_id = resp.member_id
            return self._rejoin_now(now)
        if code == UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True)
            return self._rejoin_now(now)
        if code == ILLEGAL_GENERATION:
            self._reset_generation(reset_member_id=False)
            return self._rejoin_now(now)
        if code == REBALANCE_IN_PROGRESS:
            return self._rejoin_now(now)
        return self._join_sync_error(code, "JoinGroup", now)

    def join_failed(self, attempt: int, exc: BaseException, now: float) -> list[Action]:
        """JoinGroup could not be sent or answered (connection lost, timeout)."""
        if attempt != self._attempt or self.state is not MemberState.JOINING:
            return []
        return self._transport_failure(exc, now)

    # ------------------------------------------------------------------ assignment
    def assignment_computed(
        self,
        attempt: int,
        assignments: Mapping[str, bytes],
        partitions_per_topic: Mapping[str, int],
        now: float,
    ) -> list[Action]:
        if attempt != self._attempt or self.state is not MemberState.ASSIGNING:
            return []
        self.assigned_topic_counts = dict(partitions_per_topic)
        return self._sync(attempt, assignments)

    def assignment_failed(self, attempt: int, exc: BaseException, now: float) -> list[Action]:
        """The assignor raised: a bug in it, so retrying would loop. Fatal."""
        if attempt != self._attempt or self.state is not MemberState.ASSIGNING:
            return []
        if isinstance(exc, KafkaError):
            return self._fail(exc)
        err = KafkaError(f"partition assignor {self.protocol_name!r} failed: {exc!r}")
        err.__cause__ = exc
        return self._fail(err)

    def assignment_io_failed(self, attempt: int, exc: BaseException, now: float) -> list[Action]:
        """The leader could not get metadata for the assignment: start over after a backoff."""
        if attempt != self._attempt or self.state is not MemberState.ASSIGNING:
            return []
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._backoff(now)
        return []

    def _sync(self, attempt: int, assignments: Mapping[str, bytes]) -> list[Action]:
        self.state = MemberState.SYNCING
        req = SyncGroupRequest(
            group_id=self.settings.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.settings.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in assignments.items()
            ],
        )
        return [SendSyncGroup(attempt, req, self.join_timeout_ms)]

    # ------------------------------------------------------------------ SyncGroup
    def sync_response(self, attempt: int, resp: SyncGroupResponse, now: float) -> list[Action]:
        if attempt != self._attempt or self.state is not MemberState.SYNCING:
            return []
        code = resp.error_code
        if code == NONE:
            if resp.protocol_name is not None and resp.protocol_name != self.protocol_name:
                return self._fail(
                    InconsistentGroupProtocolError(
                        f"SyncGroup protocol {resp.protocol_name!r} differs from JoinGroup's {self.protocol_name!r}"
                    )
                )
            try:
                assigned_list, _user_data = decode_assignment(resp.assignment)
            except CorruptFrameError as exc:
                log.warning("group %s: unreadable assignment (%s); rejoining", self.settings.group_id, exc)
                self.state = MemberState.UNJOINED
                self._backoff(now)
                return []
            return self._install_assignment(set(assigned_list), now)
        if code == REBALANCE_IN_PROGRESS:
            return self._rejoin_now(now)
        if code == UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True)
            return self._rejoin_now(now)
        if code == ILLEGAL_GENERATION:
            self._reset_generation(reset_member_id=False)
            return self._rejoin_now(now)
        return self._join_sync_error(code, "SyncGroup", now)

    def sync_failed(self, attempt: int, exc: BaseException, now: float) -> list[Action]:
        if attempt != self._attempt or self.state is not MemberState.SYNCING:
            return []
        return self._transport_failure(exc, now)

    def _install_assignment(self, assigned: set[TopicPartition], now: float) -> list[Action]:
        self.state = MemberState.STABLE
        started = self.rebalance_started
        if started is not None:
            self.rebalance_started = None
            self.rebalances += 1
            self.last_rebalance_ms = max(now - started, 0.0)
            self.rebalance_ms_total += self.last_rebalance_ms
        self._reset_backoff()
        self._last_heartbeat_ok = now
        self._session_alive(now)
        self._next_heartbeat = now + self.settings.heartbeat_interval_ms
        self._next_auto_commit = now + self.settings.auto_commit_interval_ms
        unexpected = {tp.topic for tp in assigned} - self.topics
        if unexpected:
            log.warning(
                "group %s: assigned topics %s this member does not subscribe to",
                self.settings.group_id,
                sorted(unexpected),
            )
        revoked, added = cooperative_diff(self.owned, assigned)
        acts: list[Action] = []
        if revoked:
            # Cooperative: give these up now; the follow-up rebalance hands them over.
            acts += self._give_up(revoked, lost=False)
            self._request_rejoin("partitions revoked, follow-up rebalance (KIP-429)")
        self.owned = set(assigned)
        self._last_assignment = sorted(assigned)
        self._last_assignment_generation = self.generation
        if added:
            acts.append(AddPartitions(frozenset(added)))
        acts.append(InvokeListener("assigned", frozenset(added)))
        return acts

    # ------------------------------------------------------------------ shared error paths
    def _join_sync_error(self, code: int, api: str, now: float) -> list[Action]:
        err = error_for(code, f"{api} for group {self.settings.group_id!r}")
        if isinstance(err, _FATAL):
            return self._fail(err)
        if code in _COORDINATOR_MOVED:
            self._coordinator_lost(now)
        log.info("group %s: %s failed: %s; retrying", self.settings.group_id, api, err)
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._backoff(now)
        return []

    def _transport_failure(self, exc: BaseException, now: float) -> list[Action]:
        log.info("group %s: coordinator request failed (%r); rediscovering", self.settings.group_id, exc)
        self._coordinator_lost(now)
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._backoff(now)
        return []

    def _rejoin_now(self, now: float) -> list[Action]:
        """Join again immediately (no backoff: the coordinator told us how to proceed)."""
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        return self._prepare_join(now) if self.coordinator is not None else []

    def fail(self, err: KafkaError) -> None:
        """Enter FAILED with ``err`` (the driver hit an error retrying cannot fix)."""
        self._fail(err)

    def _fail(self, err: KafkaError) -> list[Action]:
        log.error("group %s: fatal error: %s", self.settings.group_id, err)
        self.fatal = err
        self.state = MemberState.FAILED
        self._attempt += 1
        return []

    def _assignor(self, name: str | None) -> Assignor | None:
        for a in self.settings.assignors:
            if a.name == name:
                return a
        return None

    # ------------------------------------------------------------------ heartbeats
    def _heartbeats_allowed(self) -> bool:
        if self.coordinator is None or self.generation < 0 or not self.member_id:
            return False
        return self.state in (
            MemberState.STABLE,
            MemberState.PREPARING,
            MemberState.ASSIGNING,
            MemberState.SYNCING,
        )

    def time_to_heartbeat(self, now: float) -> float | None:
        """Milliseconds until the next heartbeat is due (None: no heartbeat in this state)."""
        if not self._heartbeats_allowed() or self._heartbeat_inflight:
            return None
        return max(0.0, self._next_heartbeat - now)

    def heartbeat_request(self, now: float) -> HeartbeatRequest | None:
        """A heartbeat if one is due now (marks it in flight), else None.

        Also the place where a silent coordinator is noticed: no successful heartbeat for
        a whole session timeout means the member must rediscover it.
        """
        if not self._heartbeats_allowed() or self._heartbeat_inflight:
            return None
        if now - self._last_heartbeat_ok > self.settings.session_timeout_ms:
            log.warning("group %s: no heartbeat response within the session timeout", self.settings.group_id)
            self._coordinator_lost(now)
            return None
        if now < self._next_heartbeat:
            return None
        self._heartbeat_inflight = True
        self._next_heartbeat = now + self.settings.heartbeat_interval_ms
        return HeartbeatRequest(
            group_id=self.settings.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.settings.group_instance_id,
        )

    def heartbeat_response(self, request: HeartbeatRequest, error_code: int, now: float) -> None:
        self._heartbeat_inflight = False
        if request.generation_id != self.generation or request.member_id != self.member_id:
            return  # answer for an older generation
        if error_code == NONE:
            self._last_heartbeat_ok = now
            self._session_alive(now)
            return
        if error_code == REBALANCE_IN_PROGRESS:
            # The broker keeps the session alive while it waits for us to rejoin.
            self._last_heartbeat_ok = now
            self._session_alive(now)
            if self.state is MemberState.STABLE:
                self._request_rejoin("group is rebalancing")
            return
        if error_code == ILLEGAL_GENERATION:
            self._reset_generation(reset_member_id=False)
            self._abandon_exchange()
            return
        if error_code == UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True)
            self._abandon_exchange()
            return
        if error_code in _COORDINATOR_MOVED:
            self._coordinator_lost(now)
            self._abandon_exchange()
            return
        err = error_for(error_code, f"Heartbeat for group {self.settings.group_id!r}")
        if isinstance(err, _FATAL):
            self._fail(err)
            return
        # COORDINATOR_LOAD_IN_PROGRESS and the like: try again after a short pause.
        self._next_heartbeat = now + self.settings.retry_backoff_ms

    def heartbeat_failed(self, request: HeartbeatRequest, exc: BaseException, now: float) -> None:
        self._heartbeat_inflight = False
        if request.generation_id != self.generation or request.member_id != self.member_id:
            return
        log.info(
            "group %s: heartbeat failed (%r); rediscovering the coordinator", self.settings.group_id, exc
        )
        self._coordinator_lost(now)
        self._abandon_exchange()

    def _abandon_exchange(self) -> None:
        """A heartbeat outcome invalidated the in-flight SyncGroup/assignment, if any: that
        join starts over. A stable member keeps its generation: a coordinator that moved
        or went away is rediscovered, and heartbeats go on with the new one (as in Java:
        losing the coordinator is no reason to rebalance)."""
        if self.state in (MemberState.ASSIGNING, MemberState.SYNCING):
            self._attempt += 1
            self.state = MemberState.UNJOINED
            self.rejoin_needed = True

    # ------------------------------------------------------------------ coordinator
    def coordinator_found(self, node_id: int, now: float) -> None:
        self._finding = False
        self.coordinator = node_id
        self._reset_backoff()
        self._last_heartbeat_ok = now
        self._next_heartbeat = now

    def coordinator_failed(self, exc: BaseException, now: float) -> None:
        """FindCoordinator failed; retry after a backoff unless the error is fatal."""
        self._finding = False
        if isinstance(exc, _FATAL):
            self._fail(exc)
            return
        log.info("group %s: coordinator lookup failed (%r); retrying", self.settings.group_id, exc)
        self._coordinator_stale = True
        self._backoff(now)

    def coordinator_lost(self, now: float) -> None:
        """The coordinator moved or is unreachable (NOT_COORDINATOR, disconnect...)."""
        self._coordinator_lost(now)

    def _coordinator_lost(self, now: float) -> None:
        if self.coordinator is not None:
            log.info("group %s: coordinator %s lost", self.settings.group_id, self.coordinator)
        self.coordinator = None
        self._coordinator_stale = True
        self._heartbeat_inflight = False

    # ------------------------------------------------------------------ commits
    def commit_failed(self, generation: int, error_code: int, now: float) -> KafkaError:
        """An OffsetCommit was rejected; update state and return the error for the caller.

        Generation problems become ``CommitFailedError`` (and a rejoin); the generation is
        only reset when the commit used the current one, so a late answer to an old
        commit cannot fence a member that has moved on. While a JoinGroup/SyncGroup is in
        flight the rejection changes nothing either: that exchange gets the group's own
        verdict (a new generation, or its error). Resetting then would make the member
        rejoin once more right after the exchange completes, and with commits every few
        hundred milliseconds every rebalance would start the next one.
        """
        current = generation == self.generation and self.state not in _EXCHANGING
        if error_code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            if current:
                self._reset_generation(reset_member_id=error_code == UNKNOWN_MEMBER_ID)
                self._abandon_exchange()
            return CommitFailedError(
                "offset commit rejected: this member is no longer part of the group's current "
                f"generation ({error_for(error_code).name}); its partitions may have been reassigned"
            )
        if error_code == REBALANCE_IN_PROGRESS:
            if current and self.state is MemberState.STABLE:
                self._request_rejoin("commit reported a rebalance")
            return CommitFailedError(
                "offset commit rejected: the group is rebalancing; the commit can be retried "
                "once the rebalance completes (partitions may be reassigned)"
            )
        if error_code == FENCED_INSTANCE_ID:
            err = error_for(error_code, "another consumer uses this group_instance_id")
            self._fail(err)
            return err
        if error_code in _COORDINATOR_MOVED:
            self._coordinator_lost(now)
        return error_for(error_code)

    # ------------------------------------------------------------------ leaving
    def _leave_for_poll_timeout(self) -> list[Action]:
        log.warning(
            "group %s: no poll for more than max_poll_interval_ms (%d ms); leaving the group. "
            "The member rejoins when the application polls again.",
            self.settings.group_id,
            self.settings.max_poll_interval_ms,
        )
        acts: list[Action] = []
        if self.owned:
            # Callbacks run when the application is back (it is busy); until then hand out nothing.
            acts.append(FreezePartitions(frozenset(self.owned)))
        acts += self._leave_request("consumer poll timeout has expired")
        self._reset_generation(reset_member_id=True)
        self.state = MemberState.UNJOINED
        self.poll_timed_out = True
        return acts

    def _leave(self, reason: str, *, revoke: bool) -> list[Action]:
        acts: list[Action] = []
        if self.owned and revoke:
            acts += self._give_up(self.owned, lost=self.generation < 0)
        acts += self._leave_request(reason)
        self._reset_generation(reset_member_id=True)
        self.state = MemberState.UNJOINED
        self.rejoin_needed = False
        return acts

    def _leave_request(self, reason: str) -> list[Action]:
        # Static members never send LeaveGroup (KIP-345): a restart within the session
        # timeout then keeps their assignment without a rebalance.
        if self.settings.is_static or not self.member_id or self.coordinator is None:
            return []
        return [SendLeaveGroup(self.member_id, None, reason)]

    def close(self, now: float) -> list[Action]:
        """Revoke (or lose) everything, commit if auto-commit, leave (dynamic members)."""
        if self.state is MemberState.CLOSED:
            return []
        acts: list[Action] = []
        if self.owned:
            acts += self._give_up(self.owned, lost=self.generation < 0 or self.state is MemberState.FAILED)
        if self.state is not MemberState.FAILED:
            acts += self._leave_request("the consumer is being closed")
        self._attempt += 1
        self.state = MemberState.CLOSED
        return acts

    # ------------------------------------------------------------------ helpers
    def _request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("group %s: rejoin needed: %s", self.settings.group_id, reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def _reset_generation(self, *, reset_member_id: bool) -> None:
        self._session.lost()  # answered: expired; the owned partitions are lost
        self.generation = -1
        self.protocol_name = None
        self.leader_id = None
        self.is_leader = False
        if reset_member_id:
            self.member_id = ""
        self._heartbeat_inflight = False
        self.rejoin_needed = True

    def _backoff(self, now: float) -> None:
        self._backoff_until = now + self._retry_backoff.delay_ms(self._failed_exchanges)
        self._failed_exchanges += 1

    def _reset_backoff(self) -> None:
        self._failed_exchanges = 0
        self._backoff_until = 0.0
