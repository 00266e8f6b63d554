"""Membership of a consumer group on the next-generation protocol (KIP-848), as a pure
state machine (no I/O, no clock, no asyncio), beside the classic ``membership.Membership``.

One request, ``ConsumerGroupHeartbeat``, joins, keeps the member alive, reports what it
owns and brings the assignment the *broker* computed. There is no group-wide barrier:
each member reconciles on its own, and the broker hands a partition to a member only
once its previous owner has reported it released.

States (as the Java client's ``MemberState``)::

    UNSUBSCRIBED --subscribed--> JOINING (epoch 0 heartbeat)
    JOINING/STABLE --response with a new assignment--> RECONCILING
    RECONCILING --tick: revoke, commit, revoke listener, remove; ack; add, assign listener--> ACKNOWLEDGING
    ACKNOWLEDGING --ack answered--> STABLE
    any member state --FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID--> FENCED --lost listener--> JOINING
    any member state --no poll for max_poll_interval_ms--> (leave heartbeat) STALE --poll--> lost listener, JOINING
    close()/unsubscribe --> PREPARE_LEAVING (commit, revoke listener) --> LEAVING (epoch -1, -2 static) --> CLOSED/UNSUBSCRIBED
    any --fatal error--> FAILED

The driver (``consumer_coordinator.ConsumerGroupCoordinator``) runs two loops: its main
loop asks ``tick`` for work (coordinator lookup, reconciliation, auto-commit, leaving)
and executes the actions in order; its heartbeat loop sends ``heartbeat_request`` when
one is due and feeds the answer to ``heartbeat_response``. Heartbeats go on while the
listener callbacks of a reconciliation run, as in the Java client (they run on its
background thread there).

Assignments name topics by id. ``tick`` takes a resolver (topic id -> name, from the
client's metadata); partitions of ids it cannot resolve yet wait (``ResolveTopics``
asks the driver for fresh metadata) while the rest are reconciled at once.

A reconciliation is cut in two at ``Continue``: the driver asks ``resume`` for the
second half once the first has run. If the member was fenced, left or got a newer
assignment meanwhile, ``resume`` returns nothing and the next ``tick`` starts over from
what the member owns then.

A lost session: the broker fences a member it has not heard from for the group's session
timeout (``group.consumer.session.timeout.ms``, or the group config
``consumer.session.timeout.ms``), and gives its partitions to others. The client does not
configure that timeout with this protocol; the driver asks the broker for it once the
member has joined (``session_timeout_wanted``, ``DescribeSessionTimeout``), and until it knows, the machine assumes
Kafka's default (45 s). Once no heartbeat has been answered for that long
(``expire_session``), another member may own its partitions already: it stops handing out
their records at once (``FreezePartitions``) and looks the coordinator up again. Its answer
decides, as in the Java client: FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID means FENCED, the
partitions lost (lost listener, no commit) and a rejoin with epoch 0; a normal answer means
the session survived (a coordinator that failed over restarts the sessions), and the
partitions are handed out again (``ThawPartitions``).

Offsets are committed with the member epoch (OffsetCommit v9+): ``commit_identity``
gives ``(member_epoch, member_id, instance_id)``. Time is an argument (``now``,
monotonic milliseconds), so every transition is reproducible in a unit test.
"""

from __future__ import annotations

import enum
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from aiokafka_lite.consume.groups.membership import (
    AddPartitions,
    CommitOffsets,
    FindCoordinator,
    FreezePartitions,
    InvokeListener,
    RemovePartitions,
    ThawPartitions,
)
from aiokafka_lite.consume.groups.session_clock import SessionClock
from aiokafka_lite.core.errors import (
    ClosedError,
    CommitFailedError,
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    VersionError,
    error_for,
)
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.retry import Backoff
from aiokafka_lite.wire.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

__all__ = [
    "ConsumerAction",
    "ConsumerGroupSettings",
    "ConsumerMemberState",
    "ConsumerMembership",
    "Continue",
    "DescribeSessionTimeout",
    "ResolveTopics",
    "SendLeaveHeartbeat",
    "TopicIdPartition",
    "check_re2_pattern",
]

log = logging.getLogger(__name__)

#: (topic id, partition): how the coordinator names assigned partitions.
TopicIdPartition = tuple[uuid.UUID, int]

JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
LEAVE_STATIC_EPOCH: Final = -2
#: Kafka's default group.consumer.session.timeout.ms: assumed until the broker says.
DEFAULT_SESSION_TIMEOUT_MS: Final = 45000

# Error codes, named once so the transitions read like the protocol guide.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113

_COORDINATOR_MOVED: Final = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
_FENCED: Final = frozenset({UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH})

#: Options of the classic protocol that the broker owns with this one (Java refuses them too).
_BROKER_SIDE_OPTIONS: Final = {
    "session_timeout_ms": (45000, "group.consumer.session.timeout.ms"),
    "heartbeat_interval_ms": (3000, "group.consumer.heartbeat.interval.ms"),
}


class ConsumerMemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"  # no subscription: not a member
    JOINING = "joining"  # epoch 0 heartbeat to send or in flight
    RECONCILING = "reconciling"  # the assignment received differs from what the member owns
    ACKNOWLEDGING = "acknowledging"  # reconciled: the next heartbeat reports the partitions owned
    STABLE = "stable"
    FENCED = "fenced"  # lost listener to run, then rejoin with epoch 0
    PREPARE_LEAVING = "prepare_leaving"  # commit and revoke listener before the leave heartbeat
    LEAVING = "leaving"  # the leave heartbeat is to be sent
    STALE = "stale"  # left after max_poll_interval_ms; rejoins when the application polls
    CLOSED = "closed"
    FAILED = "failed"  # fatal error; see ConsumerMembership.fatal


# States in which the broker knows the member with a positive epoch.
_MEMBER: Final = frozenset(
    {ConsumerMemberState.RECONCILING, ConsumerMemberState.ACKNOWLEDGING, ConsumerMemberState.STABLE}
)
# States that send regular heartbeats.
_HEARTBEATING: Final = _MEMBER | {ConsumerMemberState.JOINING, ConsumerMemberState.PREPARE_LEAVING}


# ----------------------------------------------------------------------------- settings

# Python ``re`` constructs RE2/J (the broker's regex engine) does not have.
_RE2_UNSUPPORTED: Final = (
    (re.compile(r"\(\?<?[=!]"), "lookaround assertions ((?=...), (?!...), (?<=...), (?<!...))"),
    (re.compile(r"\(\?P=|\\[1-9]"), "backreferences"),
    (re.compile(r"\(\?>"), "atomic groups"),
    (re.compile(r"\(\?\("), "conditional groups"),
    (re.compile(r"[*+?}]\+"), "possessive quantifiers"),
    (re.compile(r"\\Z"), r"\Z (RE2 spells the end of text \z)"),
)


def check_re2_pattern(pattern: str) -> str:
    """Check that ``pattern`` is a regular expression the broker can use (``SubscribedTopicRegex``
    is RE2/J syntax, matched against whole topic names). Catches what differs from Python's
    ``re`` in ways that can be seen in the text; the broker has the last word
    (INVALID_REGULAR_EXPRESSION)."""
    if not pattern:
        raise ConfigError("the subscription pattern must not be empty")
    # Escaped backslashes must not hide or fake a construct: look at the pattern with them removed.
    unescaped = pattern.replace("\\\\", "")
    for construct, what in _RE2_UNSUPPORTED:
        if construct.search(unescaped):
            raise ConfigError(
                f"subscription pattern {pattern!r} uses {what}, which the broker's regular expression "
                "engine (RE2/J) does not support with group_protocol='consumer'"
            )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"subscription pattern {pattern!r} is not a valid regular expression: {exc}"
        ) from exc
    return pattern


def re2_pattern_of(pattern: re.Pattern[str]) -> str:
    """The RE2/J text for a compiled Python pattern: case-insensitive and dot-all flags
    become inline flags; other flags have no broker-side equivalent."""
    flags = pattern.flags & ~re.UNICODE
    inline = ""
    if flags & re.IGNORECASE:
        inline += "i"
        flags &= ~re.IGNORECASE
    if flags & re.DOTALL:
        inline += "s"
        flags &= ~re.DOTALL
    if flags:
        raise ConfigError(
            f"subscription pattern {pattern.pattern!r}: flags {re.RegexFlag(flags)!r} cannot be sent to the "
            "broker (group_protocol='consumer' matches topics with RE2/J); use inline flags (?i) or (?s)"
        )
    text = check_re2_pattern(pattern.pattern)
    return f"(?{inline}){text}" if inline else text


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """What the machine needs from the consumer configuration (Java defaults)."""

    group_id: str
    group_instance_id: str | None = None
    max_poll_interval_ms: int = 300000
    rebalance_timeout_ms: int | None = None  # None: max_poll_interval_ms
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    remote_assignor: str | None = None  # None: the broker's default (group.consumer.assignors)
    rack: str | None = None
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigError("group_id must not be empty")
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ConfigError("group_instance_id must not be empty (use None for a dynamic member)")
        if self.remote_assignor is not None and not self.remote_assignor:
            raise ConfigError("group_remote_assignor must not be empty (use None for the broker's default)")

    @classmethod
    def from_config(cls, config: Any) -> ConsumerGroupSettings:
        """Build from a ``ConsumerConfig``. As the Java client, options whose values the
        broker owns with this protocol are refused when set to anything but their default."""
        group_id = getattr(config, "group_id", None)
        if not group_id:
            raise ConfigError("a group coordinator needs a group_id")
        for name, (default, broker_config) in _BROKER_SIDE_OPTIONS.items():
            value = getattr(config, name, default)
            if value is not None and value != default:
                raise ConfigError(
                    f"{name} cannot be set with group_protocol='consumer': the broker sets it for the "
                    f"whole group ({broker_config}, or the group config {broker_config.removeprefix('group.')})"
                )
        strategy = getattr(config, "partition_assignment_strategy", ("cooperative-sticky",))
        if tuple(strategy or ()) != ("cooperative-sticky",):
            raise ConfigError(
                "partition_assignment_strategy cannot be set with group_protocol='consumer': the broker "
                "assigns partitions; choose its assignor with group_remote_assignor ('uniform' or 'range')"
            )

        def get(name: str, default: Any) -> Any:
            value = getattr(config, name, default)
            return default if value is None else value

        return cls(
            group_id=group_id,
            group_instance_id=getattr(config, "group_instance_id", None),
            max_poll_interval_ms=int(get("max_poll_interval_ms", 300000)),
            rebalance_timeout_ms=getattr(config, "rebalance_timeout_ms", None),
            enable_auto_commit=bool(get("enable_auto_commit", True)),
            auto_commit_interval_ms=int(get("auto_commit_interval_ms", 5000)),
            remote_assignor=getattr(config, "group_remote_assignor", None),
            rack=getattr(config, "client_rack", None) or None,
            retry_backoff_ms=int(get("retry_backoff_ms", 100)),
            retry_backoff_max_ms=int(get("retry_backoff_max_ms", 1000)),
        )

    @property
    def effective_rebalance_timeout_ms(self) -> int:
        return (
            self.rebalance_timeout_ms if self.rebalance_timeout_ms is not None else self.max_poll_interval_ms
        )

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


# ----------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class ResolveTopics:
    """The assignment names topic ids the metadata does not know yet: refresh it."""

    topic_ids: frozenset[uuid.UUID]


@dataclass(frozen=True, slots=True)
class Continue:
    """Checkpoint: ask ``resume(attempt, step, now)`` for the next actions (none when the
    member moved on while the preceding ones ran)."""

    attempt: int
    step: str


@dataclass(frozen=True, slots=True)
class DescribeSessionTimeout:
    """Ask the broker for the group's session timeout (DescribeConfigs on the GROUP
    resource, ``consumer.session.timeout.ms``) and report it with ``session_timeout_learned``."""


@dataclass(frozen=True, slots=True)
class SendLeaveHeartbeat:
    """Ask ``leave_request(attempt)`` for the epoch -1/-2 heartbeat, send it (best effort),
    then report with ``left(attempt)``."""

    attempt: int


ConsumerAction = (
    FindCoordinator
    | FreezePartitions
    | ThawPartitions
    | InvokeListener
    | CommitOffsets
    | RemovePartitions
    | AddPartitions
    | ResolveTopics
    | Continue
    | SendLeaveHeartbeat
    | DescribeSessionTimeout
)

TopicResolver = Callable[[uuid.UUID], str | None]


@dataclass(slots=True)
class _Sent:
    """Fields the coordinator has from us (a heartbeat only repeats what changed)."""

    topics: tuple[str, ...] | None = None
    regex: str | None = None
    assignor: str | None = None
    owned: frozenset[TopicIdPartition] | None = None


# ----------------------------------------------------------------------------- machine


class ConsumerMembership:
    """One consumer's membership of a consumer-protocol group (see the module docstring)."""

    def __init__(self, settings: ConsumerGroupSettings, *, now: float = 0.0, member_id: str | None = None):
        self.settings = settings
        self.state = ConsumerMemberState.UNSUBSCRIBED
        # KIP-1082: the client makes its member id, once, and keeps it across fencing.
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = JOIN_EPOCH
        self.coordinator: int | None = None
        self.fatal: KafkaError | None = None
        #: A non-fatal error the application should hear about (taken by the driver).
        self.reported: KafkaError | None = None
        #: The coordinator's interval; 0 until the first answer.
        self.heartbeat_interval_ms = 0
        # Rebalances (observability): one starts when the member joins or gets a new target
        # assignment and ends when it is stable again (reconciled and acknowledged).
        self.rebalances = 0
        self.rebalance_ms_total = 0.0
        self.last_rebalance_ms: float | None = None
        self.rebalance_started: float | None = None

        self.topics: tuple[str, ...] = ()
        self.regex: str | None = None
        self.subscribed = False

        #: Partitions this member owns (mirrored into SubscriptionState by the driver).
        self.owned: set[TopicPartition] = set()
        self._owned_ids: frozenset[TopicIdPartition] = frozenset()
        #: The latest assignment from the coordinator (None: none since joining).
        self.target: frozenset[TopicIdPartition] | None = None
        self.target_epoch = -1
        self._first_reconciliation = True
        self._id_names: dict[uuid.UUID, str] = {}
        # The reconciliation whose second half (``resume``) is pending.
        self._pending_ids: frozenset[TopicIdPartition] = frozenset()
        self._pending_added: frozenset[TopicPartition] = frozenset()
        self._pending_complete = False

        # ``_attempt`` numbers batches of actions (a checkpoint of an older one is void);
        # ``_incarnation`` numbers memberships (join, fence, leave): an answer to a
        # heartbeat of an older one is ignored.
        self._attempt = 0
        self._incarnation = 0
        self._finding = False
        self._coordinator_stale = False
        self._backoff_until = 0.0
        # Waits after failures: retry_backoff_ms doubling up to retry_backoff_max_ms.
        self._retry_backoff = Backoff(
            float(settings.retry_backoff_ms), float(settings.retry_backoff_max_ms), jitter=0
        )
        self._failures = 0
        self._resolve_after = 0.0
        self.last_poll = now
        self.poll_timed_out = False
        self._next_auto_commit = now + settings.auto_commit_interval_ms
        self._after_leave = ConsumerMemberState.UNSUBSCRIBED
        # heartbeats
        self._next_heartbeat = now
        self._hb_inflight: tuple[int, _Sent] | None = None  # (incarnation, fields carried)
        self._sent: _Sent | None = None  # None: send every field
        # Session clock (see the module docstring): the group's session timeout (Kafka's
        # default until the broker has told), whether it was asked, and when a heartbeat
        # answer last proved the session alive.
        self.session_timeout_ms = DEFAULT_SESSION_TIMEOUT_MS
        self._session_timeout_asked = False
        self._session = SessionClock(now)

    # ------------------------------------------------------------------ introspection
    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def in_group(self) -> bool:
        """The broker knows this member with a positive epoch."""
        return self.epoch > 0 and self.state in _MEMBER | {ConsumerMemberState.PREPARE_LEAVING}

    def commit_identity(self) -> tuple[int, str, str | None] | None:
        """``(member_epoch, member_id, instance_id)`` to commit offsets with, or None when
        this member may not commit (joining, fenced, stale, failed): as the Java client,
        the commit fails without asking the broker."""
        if not self.subscribed and self.state is ConsumerMemberState.UNSUBSCRIBED:
            return -1, "", None  # offsets-only use of the group (manual assignment)
        if not self.in_group:
            return None
        return self.epoch, self.member_id, self.settings.group_instance_id

    def next_deadline(self, now: float) -> float | None:
        """When ``tick`` may next have something to do without any event (None: never)."""
        if self.state in (ConsumerMemberState.CLOSED, ConsumerMemberState.FAILED):
            return None
        deadlines: list[float] = []
        if self._backoff_until > now:
            deadlines.append(self._backoff_until)
        session_end = self.session_deadline()
        if session_end is not None:
            deadlines.append(session_end + 1)
        if self.state in _MEMBER:
            deadlines.append(self.last_poll + self.settings.max_poll_interval_ms)
            if self.settings.enable_auto_commit:
                deadlines.append(self._next_auto_commit)
        if self.state is ConsumerMemberState.RECONCILING and self._resolve_after > now:
            deadlines.append(self._resolve_after)
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ session
    @property
    def session_expired(self) -> bool:
        """The session ran out (no heartbeat answer for the group's session timeout); the
        partitions held are frozen until the coordinator answers."""
        return self._session.expired

    @property
    def sessions_expired(self) -> int:
        """How many times the session ran out."""
        return self._session.expirations

    def session_deadline(self) -> float | None:
        """When the broker has surely fenced this member if no heartbeat answer proves its
        session alive before (None: not a member now)."""
        if self.state not in _MEMBER or self.epoch <= 0 or self._session.expired:
            return None
        return self._session.deadline(self.session_timeout_ms)

    def expire_session(self, now: float) -> list[ConsumerAction]:
        """Past ``session_deadline``: stop handing out records of the partitions held
        (returned as ``FreezePartitions``, for the driver to apply at once) and look the
        coordinator up again; its next answer says whether they are lost. [] while the
        session may be alive."""
        deadline = self.session_deadline()
        if deadline is None or now <= deadline:
            return []
        log.warning(
            "group %s: member %s heard nothing from the coordinator for %d ms, longer than the "
            "group's session timeout (%d ms): the broker has most likely fenced it; no record of %s "
            "is handed out until the coordinator answers",
            self.settings.group_id,
            self.member_id,
            now - self._session.alive_at,
            self.session_timeout_ms,
            sorted(self.owned),
        )
        self._session.expire()
        self._coordinator_lost()
        self._next_heartbeat = now
        return [FreezePartitions(frozenset(self.owned))] if self.owned else []

    def session_timeout_wanted(self) -> bool:
        """True once, when the member has joined: the driver should then ask the broker
        for the group's session timeout (``DescribeSessionTimeout``) while idle."""
        if self._session_timeout_asked or self.state not in _MEMBER:
            return False
        self._session_timeout_asked = True
        return True

    def session_timeout_learned(self, timeout_ms: int | None) -> None:
        """The group's session timeout as the broker gave it (None: it could not say;
        the default stays)."""
        if timeout_ms is not None and timeout_ms > 0:
            self.session_timeout_ms = timeout_ms

    # ------------------------------------------------------------------ inputs from the app
    def update_subscription(
        self, topics: Iterable[str], regex: str | None, subscribed: bool, now: float
    ) -> None:
        """The subscription changed: topic names, or a broker-side regex (RE2/J)."""
        self.topics = tuple(sorted(set(topics))) if regex is None else ()
        self.regex = regex
        self.subscribed = subscribed
        if subscribed and self.state is ConsumerMemberState.UNSUBSCRIBED:
            self._join(now)
        elif subscribed:
            self._next_heartbeat = now  # the new subscription goes out at once

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions the consumer dropped on its own (its subscription no longer names
        their topic): no longer owned; the next heartbeat reports it."""
        gone = self.owned & set(partitions)
        if gone:
            self.owned -= gone
            self._owned_ids = frozenset(t for t in self._owned_ids if self._tp(t) not in gone)

    def polled(self, now: float) -> bool:
        """The application polled (max_poll_interval_ms). True when this ends a poll
        timeout, i.e. there is now work to do (lost listener, rejoin)."""
        self.last_poll = now
        if self.poll_timed_out:
            self.poll_timed_out = False
            log.info("group %s: application polled again, rejoining", self.settings.group_id)
            return True
        return False

    # ------------------------------------------------------------------ main step
    def tick(self, now: float, resolve: TopicResolver) -> list[ConsumerAction]:
        """What to do next (called when no action of a previous batch is pending)."""
        if self.state in (ConsumerMemberState.CLOSED, ConsumerMemberState.FAILED):
            return []
        expired = self.expire_session(now)
        if expired:
            return expired
        if self._session.take_thaw():
            if self.owned and self.state in _MEMBER:
                return [ThawPartitions(frozenset(self.owned))]
        st = self.state
        if st is ConsumerMemberState.STALE:
            if self.poll_timed_out:
                return []
            return self._release("lost", then="rejoin")
        if not self.subscribed:
            if st in _MEMBER or st is ConsumerMemberState.JOINING or self.owned:
                return self._leave(then=ConsumerMemberState.UNSUBSCRIBED)
            self.state = ConsumerMemberState.UNSUBSCRIBED
            return []
        if st is ConsumerMemberState.UNSUBSCRIBED:
            self._join(now)
        if st in _MEMBER and now - self.last_poll > self.settings.max_poll_interval_ms:
            return self._leave_for_poll_timeout()
        if st is ConsumerMemberState.FENCED:
            return self._release("lost", then="rejoin")
        if self.coordinator is None:
            if self._finding or now < self._backoff_until:
                return []
            self._finding = True
            invalidate, self._coordinator_stale = self._coordinator_stale, False
            return [FindCoordinator(invalidate)]
        if st is ConsumerMemberState.RECONCILING:
            return self._reconcile(now, resolve)
        if st in (ConsumerMemberState.STABLE, ConsumerMemberState.ACKNOWLEDGING):
            if self.settings.enable_auto_commit and now >= self._next_auto_commit:
                self._next_auto_commit = now + self.settings.auto_commit_interval_ms
                return [CommitOffsets(None)]
        return []

    # ------------------------------------------------------------------ reconciliation
    def _reconcile(self, now: float, resolve: TopicResolver) -> list[ConsumerAction]:
        target = self.target or frozenset()
        resolved: dict[TopicIdPartition, TopicPartition] = {}
        unresolved: set[uuid.UUID] = set()
        for tid, p in target:
            name = resolve(tid)
            if name is None:
                unresolved.add(tid)
            else:
                self._id_names[tid] = name
                resolved[(tid, p)] = TopicPartition(name, p)
        acts: list[ConsumerAction] = []
        if unresolved and now >= self._resolve_after:
            # Java keeps these pending and asks for metadata; a topic created a moment ago
            # may take a few refreshes to show up.
            self._resolve_after = now + self._backoff_ms
            acts.append(ResolveTopics(frozenset(unresolved)))
        new_owned = set(resolved.values())
        revoked = self.owned - new_owned
        added = new_owned - self.owned
        first = self._first_reconciliation
        if not revoked and not added and frozenset(resolved) == self._owned_ids and not first:
            if not unresolved:
                self._acknowledge(now)
            return acts
        self._attempt += 1
        self._first_reconciliation = False
        self._pending_ids = frozenset(resolved)
        self._pending_added = frozenset(added)
        self._pending_complete = not unresolved
        if revoked:
            acts += self._give_up(revoked, lost=False)
        acts.append(Continue(self._attempt, "assign"))
        return acts

    def _give_up(self, tps: Iterable[TopicPartition], *, lost: bool) -> list[ConsumerAction]:
        """Stop handing out records, commit (auto-commit; not when lost), call back, remove.
        Updates ``owned`` at once, so a fence meanwhile only loses what is left. What the
        heartbeats report (``_owned_ids``) changes only once all of it has run: until then
        the coordinator must not hand these partitions to anyone else."""
        parts = frozenset(tps)
        self.owned -= parts
        acts: list[ConsumerAction] = [FreezePartitions(parts)]
        if lost:
            acts.append(InvokeListener("lost", parts))
        else:
            if self.settings.enable_auto_commit:
                # Java commits every consumed position before a revocation.
                acts.append(CommitOffsets(None))
            acts.append(InvokeListener("revoked", parts))
        acts.append(RemovePartitions(parts))
        return acts

    def _tp(self, tip: TopicIdPartition) -> TopicPartition | None:
        name = self._id_names.get(tip[0])
        return None if name is None else TopicPartition(name, tip[1])

    def resume(self, attempt: int, step: str, now: float) -> list[ConsumerAction]:
        """Second half of a batch (see ``Continue``); [] when the member moved on."""
        if attempt != self._attempt:
            return []
        if step == "assign":
            if self.state is not ConsumerMemberState.RECONCILING:
                return []
            added = self._pending_added
            self.owned |= added
            self._owned_ids = self._pending_ids
            if self._pending_complete:
                self._acknowledge(now)
            else:
                self._next_heartbeat = now  # report the partial reconciliation at once
            # The revocation is acknowledged before the new partitions are taken: the
            # coordinator can hand the revoked ones on while our assign listener runs.
            acts: list[ConsumerAction] = []
            if added:
                acts.append(AddPartitions(added))
            acts.append(InvokeListener("assigned", added))
            return acts
        if step == "rejoin":
            if self.state in (ConsumerMemberState.FENCED, ConsumerMemberState.STALE):
                self._join(now)
            return []
        raise ValueError(f"unknown step {step!r}")  # pragma: no cover

    def _acknowledge(self, now: float) -> None:
        self.state = ConsumerMemberState.ACKNOWLEDGING
        self._next_heartbeat = now

    def _release(self, kind: str, *, then: str) -> list[ConsumerAction]:
        """Fenced or stale: call the lost listener for everything owned, then rejoin."""
        self._attempt += 1
        acts: list[ConsumerAction] = []
        if self.owned:
            acts += self._give_up(self.owned, lost=kind == "lost")
        acts.append(Continue(self._attempt, then))
        return acts

    # ------------------------------------------------------------------ joining and leaving
    def _join(self, now: float) -> None:
        self.state = ConsumerMemberState.JOINING
        if self.rebalance_started is None:
            self.rebalance_started = now
        self.epoch = JOIN_EPOCH
        self._owned_ids = frozenset()
        self.target = None
        self.target_epoch = -1
        self._first_reconciliation = True
        self._sent = None
        self._attempt += 1
        self._incarnation += 1
        self._next_heartbeat = now

    @property
    def leave_epoch(self) -> int:
        """-2 keeps a static member's assignment for the session timeout (KIP-848's KIP-345)."""
        return LEAVE_STATIC_EPOCH if self.settings.is_static else LEAVE_EPOCH

    def _leave(self, *, then: ConsumerMemberState) -> list[ConsumerAction]:
        """Commit and revoke (lost when no longer a member), then the leave heartbeat (also
        while joining, as the Java client: the coordinator may have added us already)."""
        member = self.in_group
        leave = member or (self.state is ConsumerMemberState.JOINING and self.coordinator is not None)
        self._attempt += 1
        self.state = ConsumerMemberState.PREPARE_LEAVING if leave else then
        self._after_leave = then
        acts: list[ConsumerAction] = []
        if self.owned:
            acts += self._give_up(self.owned, lost=not member)
        self._owned_ids = frozenset()
        if leave:
            acts.append(SendLeaveHeartbeat(self._attempt))
        else:
            self.epoch = JOIN_EPOCH
        return acts

    def _leave_for_poll_timeout(self) -> list[ConsumerAction]:
        log.warning(
            "group %s: no poll for more than max_poll_interval_ms (%d ms); leaving the group. "
            "The member rejoins when the application polls again.",
            self.settings.group_id,
            self.settings.max_poll_interval_ms,
        )
        self._attempt += 1
        self.poll_timed_out = True
        self.state = ConsumerMemberState.PREPARE_LEAVING
        self._after_leave = ConsumerMemberState.STALE
        acts: list[ConsumerAction] = []
        if self.owned:
            # The lost listener runs when the application is back (it is busy); until then
            # no record of these partitions is handed out.
            acts.append(FreezePartitions(frozenset(self.owned)))
        acts.append(SendLeaveHeartbeat(self._attempt))
        return acts

    def leave_request(self, attempt: int) -> ConsumerGroupHeartbeatRequest | None:
        """The leave heartbeat for ``attempt`` (None: abandoned, or nothing to leave)."""
        if attempt != self._attempt or self.state is not ConsumerMemberState.PREPARE_LEAVING:
            return None
        self.state = ConsumerMemberState.LEAVING
        epoch = self.leave_epoch
        self.epoch = epoch
        self._incarnation += 1
        self._hb_inflight = None
        return ConsumerGroupHeartbeatRequest(
            group_id=self.settings.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.settings.group_instance_id,
        )

    def left(self, attempt: int) -> None:
        """The leave heartbeat was answered, failed, or could not be sent: out either way."""
        if attempt != self._attempt or self.state not in (
            ConsumerMemberState.LEAVING,
            ConsumerMemberState.PREPARE_LEAVING,
        ):
            return
        self.state = self._after_leave
        self.epoch = self.leave_epoch if self.state is ConsumerMemberState.STALE else JOIN_EPOCH
        self.target = None
        self._sent = None

    def close(self, now: float) -> list[ConsumerAction]:
        """Commit (auto-commit), revoke (or lose) everything, and leave."""
        if self.state is ConsumerMemberState.CLOSED:
            return []
        if self.state is ConsumerMemberState.FAILED:
            acts: list[ConsumerAction] = self._give_up(self.owned, lost=True) if self.owned else []
            self.state = ConsumerMemberState.CLOSED
            self._attempt += 1
            return acts
        acts = self._leave(then=ConsumerMemberState.CLOSED)
        if self.state is not ConsumerMemberState.PREPARE_LEAVING:
            self.state = ConsumerMemberState.CLOSED
        return acts

    # ------------------------------------------------------------------ heartbeats
    def _heartbeats_allowed(self) -> bool:
        return self.coordinator is not None and self.state in _HEARTBEATING and self._hb_inflight is None

    def time_to_heartbeat(self, now: float) -> float | None:
        """Milliseconds until the next heartbeat is due (None: none in this state)."""
        if not self._heartbeats_allowed():
            return None
        return max(0.0, self._next_heartbeat - now)

    def heartbeat_request(self, now: float) -> ConsumerGroupHeartbeatRequest | None:
        """The heartbeat to send now, if one is due (it is then in flight)."""
        if not self._heartbeats_allowed() or now < self._next_heartbeat:
            return None
        joining = self.state is ConsumerMemberState.JOINING
        sent = self._sent if (self._sent is not None and not joining) else _Sent()
        full = self._sent is None or joining
        carried = _Sent(sent.topics, sent.regex, sent.assignor, sent.owned)
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.settings.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.settings.group_instance_id,
        )
        if full:
            req.rebalance_timeout_ms = self.settings.effective_rebalance_timeout_ms
            req.rack_id = self.settings.rack
        if self.regex is not None:
            if full or sent.regex != self.regex:
                req.subscribed_topic_regex = self.regex
                carried.regex = self.regex
            if full or sent.topics != ():
                req.subscribed_topic_names = []
                carried.topics = ()
        else:
            if full or sent.topics != self.topics:
                req.subscribed_topic_names = list(self.topics)
                carried.topics = self.topics
            if not full and sent.regex:
                req.subscribed_topic_regex = ""  # no longer a regex subscription
                carried.regex = None
        assignor = self.settings.remote_assignor
        if assignor is not None and (full or sent.assignor != assignor):
            req.server_assignor = assignor
            carried.assignor = assignor
        owned = frozenset() if joining else self._owned_ids
        if full or sent.owned != owned:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for tid, p in sorted(owned):
                by_topic.setdefault(tid, []).append(p)
            req.topic_partitions = [
                ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=ps)
                for t, ps in by_topic.items()
            ]
            carried.owned = owned
        self._hb_inflight = (self._incarnation, carried)
        self._next_heartbeat = now + (self.heartbeat_interval_ms or self.settings.retry_backoff_ms)
        return req

    def heartbeat_response(self, resp: ConsumerGroupHeartbeatResponse, now: float) -> bool:
        """Apply the coordinator's answer. True when the main loop has work (a new
        assignment, fencing, a fatal error)."""
        inflight, self._hb_inflight = self._hb_inflight, None
        if inflight is None or inflight[0] != self._incarnation or self.state not in _HEARTBEATING:
            return False  # answer to a heartbeat of an abandoned membership
        code = resp.error_code
        if code == NONE:
            return self._accepted(resp, inflight[1], now)
        self._sent = None
        err = error_for(
            code, resp.error_message or f"ConsumerGroupHeartbeat for group {self.settings.group_id!r}"
        )
        if code in _FENCED:
            return self._fenced(err)
        if code in _COORDINATOR_MOVED:
            self._coordinator_lost()
            self._next_heartbeat = now
            return True
        if code == COORDINATOR_LOAD_IN_PROGRESS:
            self._next_heartbeat = now + self._backoff_ms
            return False
        if code == TOPIC_AUTHORIZATION_FAILED:
            # Java reports it to the application and stays in the group.
            self.reported = err
            self._next_heartbeat = now + (self.heartbeat_interval_ms or self.settings.retry_backoff_ms)
            return True
        if code == UNSUPPORTED_VERSION:
            return self._fail(_unsupported(err))
        if err.retriable:
            self._next_heartbeat = now + self._backoff_ms
            self._grow_backoff()
            return False
        # UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
        # UNSUPPORTED_ASSIGNOR, INVALID_REQUEST, INVALID_REGULAR_EXPRESSION, authorization:
        # fatal, as in the Java client.
        return self._fail(err)

    def heartbeat_failed(self, exc: KafkaError, now: float) -> bool:
        """No answer (connection lost, timeout): retry after a backoff, every field again,
        at a coordinator looked up again. True when the failure is fatal."""
        inflight, self._hb_inflight = self._hb_inflight, None
        if inflight is None or inflight[0] != self._incarnation:
            return False
        if isinstance(exc, UnsupportedVersionError):
            self._fail(_unsupported(exc))
            return True
        if isinstance(exc, VersionError) and self.regex is not None:
            err = ConfigError(
                "pattern subscriptions with group_protocol='consumer' need ConsumerGroupHeartbeat v1 "
                "(SubscribedTopicRegex, Apache Kafka 4.0+); this broker only has v0"
            )
            err.__cause__ = exc
            self._fail(err)
            return True
        if not exc.retriable and not _is_transport(exc):
            self._fail(exc)
            return True
        log.info(
            "group %s: heartbeat failed (%r); rediscovering the coordinator", self.settings.group_id, exc
        )
        self._sent = None
        self._coordinator_lost()
        self._next_heartbeat = now + self._backoff_ms
        self._grow_backoff()
        return True

    def _accepted(self, resp: ConsumerGroupHeartbeatResponse, carried: _Sent, now: float) -> bool:
        self._reset_backoff()
        if self._session.alive(now):  # the coordinator kept the session: hand records out again
            log.info("group %s: the coordinator kept this member's session", self.settings.group_id)
        if resp.member_id:
            self.member_id = resp.member_id
        self.epoch = resp.member_epoch
        if resp.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = resp.heartbeat_interval_ms
        self._sent = carried
        self._next_heartbeat = now + (self.heartbeat_interval_ms or self.settings.retry_backoff_ms)
        st = self.state
        if st is ConsumerMemberState.PREPARE_LEAVING:
            return False  # the leave heartbeat follows; a new assignment no longer matters
        if resp.assignment is not None:
            self.target = frozenset(
                (t.topic_id, p) for t in resp.assignment.topic_partitions for p in t.partitions
            )
            self.target_epoch = resp.member_epoch
        elif st is ConsumerMemberState.JOINING and self.target is None:
            self.target = frozenset()
            self.target_epoch = resp.member_epoch
        work = False
        if self.target is not None and (self.target != self._owned_ids or self._first_reconciliation):
            if st is not ConsumerMemberState.RECONCILING:
                self.state = ConsumerMemberState.RECONCILING
                if self.rebalance_started is None:
                    self.rebalance_started = now
            work = True
        elif st in (ConsumerMemberState.JOINING, ConsumerMemberState.ACKNOWLEDGING):
            if carried.owned == self._owned_ids or st is ConsumerMemberState.JOINING:
                self.state = ConsumerMemberState.STABLE
                started = self.rebalance_started
                if started is not None:
                    self.rebalance_started = None
                    self.rebalances += 1
                    self.last_rebalance_ms = max(now - started, 0.0)
                    self.rebalance_ms_total += self.last_rebalance_ms
        if self.state in _MEMBER and self._sent.owned != self._owned_ids:
            # A reconciliation completed while this heartbeat was in flight: acknowledge now.
            self._next_heartbeat = now
        if self._sent.topics is not None and self.regex is None and self._sent.topics != self.topics:
            self._next_heartbeat = now  # the subscription changed while this one was in flight
        return work

    def _fenced(self, err: KafkaError) -> bool:
        if self.state is ConsumerMemberState.PREPARE_LEAVING:
            return False  # leaving anyway; the leave heartbeat will find out
        log.info(
            "group %s: member %s fenced at epoch %d (%s); its partitions are lost, rejoining",
            self.settings.group_id,
            self.member_id,
            self.epoch,
            err.name if hasattr(err, "name") else err,
        )
        self.state = ConsumerMemberState.FENCED
        self.epoch = JOIN_EPOCH
        self._session.lost()  # answered: the partitions are lost
        self._attempt += 1
        self._incarnation += 1
        self._sent = None
        return True

    # ------------------------------------------------------------------ coordinator
    def coordinator_found(self, node_id: int, now: float) -> None:
        self._finding = False
        self.coordinator = node_id
        self._reset_backoff()
        self._next_heartbeat = now

    def coordinator_failed(self, exc: BaseException, now: float) -> None:
        self._finding = False
        if isinstance(exc, KafkaError) and not exc.retriable and not _is_transport(exc):
            self._fail(exc)
            return
        log.info("group %s: coordinator lookup failed (%r); retrying", self.settings.group_id, exc)
        self._coordinator_stale = True
        self._backoff(now)

    def coordinator_lost(self, now: float) -> None:
        self._coordinator_lost()

    def _coordinator_lost(self) -> None:
        if self.coordinator is not None:
            log.info("group %s: coordinator %s lost", self.settings.group_id, self.coordinator)
        self.coordinator = None
        self._coordinator_stale = True
        self._hb_inflight = None
        self._sent = None

    # ------------------------------------------------------------------ commits
    def commit_failed(self, epoch: int, error_code: int, now: float) -> KafkaError:
        """An OffsetCommit made with ``epoch`` was rejected: the error for the caller.

        STALE_MEMBER_EPOCH means the coordinator bumped the epoch in an answer we have not
        read yet: heartbeat at once to learn it (the driver retries with it).
        UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH fail the commit; the heartbeat finds out
        whether the member is fenced, as in the Java client."""
        if error_code == STALE_MEMBER_EPOCH:
            if epoch == self.epoch:
                self._next_heartbeat = now
            return error_for(error_code, "offset commit with a stale member epoch")
        if error_code in (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS):
            self._next_heartbeat = now
            return CommitFailedError(
                f"offset commit rejected ({error_for(error_code).name}): this member (epoch {epoch}) is no "
                "longer part of the group; its partitions may have been reassigned"
            )
        if error_code == FENCED_INSTANCE_ID:
            err = error_for(error_code, "another consumer uses this group_instance_id")
            self._fail(err)
            return err
        if error_code in _COORDINATOR_MOVED:
            self._coordinator_lost()
        return error_for(error_code)

    # ------------------------------------------------------------------ helpers
    def fail(self, err: KafkaError) -> None:
        self._fail(err)

    def _fail(self, err: KafkaError) -> bool:
        log.error("group %s: fatal error: %s", self.settings.group_id, err)
        self.fatal = err
        self.state = ConsumerMemberState.FAILED
        self._attempt += 1
        self._incarnation += 1
        return True

    @property
    def _backoff_ms(self) -> float:
        """The wait after the next failure."""
        return self._retry_backoff.delay_ms(self._failures)

    def _backoff(self, now: float) -> None:
        self._backoff_until = now + self._backoff_ms
        self._grow_backoff()

    def _grow_backoff(self) -> None:
        self._failures += 1

    def _reset_backoff(self) -> None:
        self._failures = 0
        self._backoff_until = 0.0


def _unsupported(exc: KafkaError) -> KafkaError:
    err = UnsupportedVersionError(
        "the broker does not support the consumer group protocol (ConsumerGroupHeartbeat, KIP-848, "
        "Apache Kafka 4.0+ or 3.7+ with it enabled); use group_protocol='classic'"
    )
    err.__cause__ = exc
    return err


def _is_transport(exc: KafkaError) -> bool:
    return isinstance(exc, KafkaConnectionError | KafkaTimeoutError | ClosedError)
