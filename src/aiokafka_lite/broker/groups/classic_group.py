"""The state of one classic group: members, protocols, generation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from aiokafka_lite.broker.groups.clock import Cancellable
from aiokafka_lite.broker.groups.codes import FENCED_INSTANCE_ID, NONE, UNKNOWN_MEMBER_ID
from aiokafka_lite.core import errors
from aiokafka_lite.wire.messages import (
    ConsumerProtocolSubscription,
)

log = logging.getLogger("aiokafka_lite.broker.groups")


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


def decode_subscription(data: bytes) -> tuple[int, ConsumerProtocolSubscription] | None:
    """A consumer protocol subscription (version prefix, then the struct), or None."""
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
    return version, sub


def _parse_subscription(data: bytes) -> list[str] | None:
    decoded = decode_subscription(data)
    return None if decoded is None else list(decoded[1].topics)
