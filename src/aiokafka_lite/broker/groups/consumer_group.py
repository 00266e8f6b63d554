"""The state of one consumer group (KIP-848 protocol) and member reconciliation.

Pure: no timers, no I/O. A group has a *group epoch* (bumped when its members or their
subscriptions change), a *target assignment* computed by the server-side assignor at an
*assignment epoch*, and members that each move towards their target at their own pace.
``reconcile`` is Kafka's ``CurrentAssignmentBuilder``: a member first revokes what is no
longer its own (staying at its epoch, UNREVOKED_PARTITIONS), then advances to the
assignment epoch and gets the partitions of its target that no other member still owns
(UNRELEASED_PARTITIONS while some are held back, STABLE once it has them all).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aiokafka_lite.broker.groups.assignors import Assignment

__all__ = [
    "ClassicMemberInfo",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "MemberState",
    "copy_assignment",
    "reconcile",
]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerGroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(StrEnum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


def copy_assignment(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


def _without(a: Assignment, b: Assignment) -> Assignment:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _overlaps(a: Assignment, b: Assignment) -> bool:
    return any(ps & b.get(t, set()) for t, ps in a.items())


def _is_subset(a: Assignment, b: Assignment) -> bool:
    return all(ps <= b.get(t, set()) for t, ps in a.items())


@dataclass(slots=True)
class ClassicMemberInfo:
    """What a member using the classic protocol (JoinGroup/SyncGroup) in a consumer group
    told us: its session timeout and its protocols (name, subscription metadata)."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    #: The protocol the member got in its JoinGroup answer (the first it listed).
    protocol_name: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "session_timeout_ms": self.session_timeout_ms,
            "protocols": [[n, base64.b64encode(m).decode()] for n, m in self.protocols],
            "protocol_name": self.protocol_name,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ClassicMemberInfo:
        return cls(
            d["session_timeout_ms"],
            [(n, base64.b64decode(m)) for n, m in d.get("protocols", [])],
            d.get("protocol_name", ""),
        )


@dataclass(slots=True, eq=False)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: Set for members that use the classic protocol (a mixed group).
    classic: ClassicMemberInfo | None = None

    def owned(self) -> Assignment:
        """Partitions the member may still be fetching: assigned plus pending revocation."""
        out = copy_assignment(self.assigned)
        for t, ps in self.pending_revocation.items():
            out.setdefault(t, set()).update(ps)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "subscribed_topic_names": self.subscribed_topic_names,
            "subscribed_topic_regex": self.subscribed_topic_regex,
            "server_assignor": self.server_assignor,
            "member_epoch": self.member_epoch,
            "previous_member_epoch": self.previous_member_epoch,
            "state": self.state.value,
            "assigned": _assignment_json(self.assigned),
            "pending_revocation": _assignment_json(self.pending_revocation),
            "classic": self.classic.to_json() if self.classic is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ConsumerGroupMember:
        return cls(
            member_id=d["member_id"],
            instance_id=d.get("instance_id"),
            rack_id=d.get("rack_id"),
            client_id=d.get("client_id", ""),
            client_host=d.get("client_host", ""),
            rebalance_timeout_ms=d.get("rebalance_timeout_ms", -1),
            subscribed_topic_names=list(d.get("subscribed_topic_names", [])),
            subscribed_topic_regex=d.get("subscribed_topic_regex"),
            server_assignor=d.get("server_assignor"),
            member_epoch=d.get("member_epoch", 0),
            previous_member_epoch=d.get("previous_member_epoch", -1),
            state=MemberState(d.get("state", MemberState.STABLE.value)),
            assigned=_assignment_from_json(d.get("assigned", {})),
            pending_revocation=_assignment_from_json(d.get("pending_revocation", {})),
            classic=ClassicMemberInfo.from_json(d["classic"]) if d.get("classic") else None,
        )


def _assignment_json(a: Assignment) -> dict[str, list[int]]:
    return {str(t): sorted(ps) for t, ps in a.items() if ps}


def _assignment_from_json(d: dict[str, list[int]]) -> Assignment:
    return {uuid.UUID(t): set(ps) for t, ps in d.items() if ps}


class ConsumerGroup:
    """Members, epochs and target assignment of one consumer group."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}
        #: (topic id, partition) -> the member that owns it (assigned or pending revocation)
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        self.last_assignment_ms: float | None = None
        #: What the subscribed topics looked like at the last epoch bump (names, ids, sizes).
        self.subscription_fingerprint: tuple[tuple[str, str, int], ...] = ()
        self.coordinator_id = -1

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, {self.state()}, epoch={self.group_epoch}, "
            f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})"
        )

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (Kafka's choice), else the default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return max(sorted(votes), key=lambda a: votes[a])

    # -- membership ----------------------------------------------------------------------
    def put(self, member: ConsumerGroupMember) -> None:
        """Adds or replaces a member (same id), keeping the ownership index right."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._claim(member)

    def remove(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def update_assignment(
        self, member: ConsumerGroupMember, assigned: Assignment, pending: Assignment
    ) -> None:
        self._release(member)
        member.assigned = copy_assignment(assigned)
        member.pending_revocation = copy_assignment(pending)
        self._claim(member)

    def _claim(self, member: ConsumerGroupMember) -> None:
        for t, ps in member.owned().items():
            for p in ps:
                self.owners[(t, p)] = member.member_id

    def _release(self, member: ConsumerGroupMember) -> None:
        for t, ps in member.owned().items():
            for p in ps:
                if self.owners.get((t, p)) == member.member_id:
                    del self.owners[(t, p)]

    def owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def bump_epoch(self, by: int = 1) -> None:
        self.group_epoch += by
        if not self.members:
            # Nothing to assign: the (empty) target is at the new epoch at once.
            self.target.clear()
            self.assignment_epoch = self.group_epoch

    # -- persistence ----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "members": [m.to_json() for m in self.members.values()],
            "target": {m: _assignment_json(a) for m, a in self.target.items()},
            "fingerprint": [list(f) for f in self.subscription_fingerprint],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ConsumerGroup:
        g = cls(d["group_id"])
        g.group_epoch = d.get("group_epoch", 0)
        g.assignment_epoch = d.get("assignment_epoch", 0)
        for md in d.get("members", []):
            g.put(ConsumerGroupMember.from_json(md))
        g.target = {m: _assignment_from_json(a) for m, a in d.get("target", {}).items()}
        g.subscription_fingerprint = tuple((str(n), str(i), int(c)) for n, i, c in d.get("fingerprint", []))
        return g


def reconcile(
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    owned: Assignment | None,
) -> None:
    """Moves ``member`` towards its target (Kafka's ``CurrentAssignmentBuilder``).

    ``owned`` is what the member reported owning in this heartbeat (None: not reported).
    """
    target_epoch = group.assignment_epoch

    def still_owns(revoking: Assignment) -> bool:
        # Without a report, assume the member still has them.
        return owned is None or _overlaps(owned, revoking)

    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return
        _next_assignment(group, member, member.member_epoch, still_owns)
    elif member.state is MemberState.UNREVOKED_PARTITIONS:
        if still_owns(member.pending_revocation):
            return
        _next_assignment(group, member, member.member_epoch, still_owns)
    else:
        _next_assignment(group, member, member.member_epoch, still_owns)


def _next_assignment(group: ConsumerGroup, member: ConsumerGroupMember, epoch: int, still_owns: Any) -> None:
    target = group.target.get(member.member_id, {})
    current = member.assigned
    assigned: Assignment = {}
    revoking: Assignment = {}
    unreleased = False
    for t in set(target) | set(current):
        tgt = target.get(t, set())
        cur = current.get(t, set())
        keep = cur & tgt
        revoke = cur - keep
        add = tgt - keep
        held = {
            p
            for p in add
            if group.owner(t, p) not in (None, member.member_id)
            and p not in member.pending_revocation.get(t, set())
        }
        if held:
            unreleased = True
            add -= held
        if keep | add:
            assigned[t] = keep | add
        if revoke:
            revoking[t] = revoke
    if revoking and still_owns(revoking):
        # Revoke first: the member stays at its epoch until it confirms.
        keep_only = {t: ps - revoking.get(t, set()) for t, ps in assigned.items()}
        keep_only = {t: ps & current.get(t, set()) for t, ps in keep_only.items()}
        _set(group, member, epoch, MemberState.UNREVOKED_PARTITIONS, keep_only, revoking)
        return
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    _set(group, member, group.assignment_epoch, state, assigned, {})


def _set(
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    epoch: int,
    state: MemberState,
    assigned: Assignment,
    pending: Assignment,
) -> None:
    if epoch != member.member_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch
    member.state = state
    group.update_assignment(member, assigned, pending)


def assignment_of(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    out: Assignment = {}
    for t, ps in pairs:
        s = set(ps)
        if s:
            out.setdefault(t, set()).update(s)
    return out


def is_subset(a: Assignment, b: Assignment) -> bool:
    return _is_subset(a, b)


def without(a: Assignment, b: Assignment) -> Assignment:
    return _without(a, b)
