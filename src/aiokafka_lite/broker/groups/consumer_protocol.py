"""Kafka's consumer group protocol (KIP-848): ConsumerGroupHeartbeat and its coordinator.

Members heartbeat on their own; the coordinator bumps the group epoch when membership or
subscriptions change, computes the target assignment with the server-side assignor
(``uniform`` by default, or ``range``) at most once per ``consumer.assignment.interval.ms``
(Kafka 4.4, KIP-1263: a group's first member is assigned at once), and reconciles each
member towards its target (``consumer_group.reconcile``) so no partition has two owners.
Sessions (``consumer.session.timeout.ms``) and rebalance timeouts (a member that does not
revoke in time) remove members. Static members (instance id) may leave with epoch -2 and
come back under a new member id with their assignment.

State lives in ``consumer_group.ConsumerGroup``; this layer validates requests as Kafka
does, runs the timers and persists the groups (``groups/consumer_groups.json`` under the
data directory) so they survive a restart as committed offsets do.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka_lite.broker.group_configs import group_config_value
from aiokafka_lite.broker.groups.assignors import ASSIGNORS, Assignment, AssignmentSpec, MemberSpec
from aiokafka_lite.broker.groups.classic_group import Group, GroupState
from aiokafka_lite.broker.groups.classic_protocol import ClassicGroupCoordinator
from aiokafka_lite.broker.groups.clock import Cancellable
from aiokafka_lite.broker.groups.codes import (
    FENCED_INSTANCE_ID,
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_REGULAR_EXPRESSION,
    INVALID_REQUEST,
    NON_EMPTY_GROUP,
    NONE,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
)
from aiokafka_lite.broker.groups.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
    copy_assignment,
    is_subset,
    reconcile,
)
from aiokafka_lite.broker.groups.coordinator_config import config_int
from aiokafka_lite.broker.groups.topic_regex import RegexError, compile_topic_regex

__all__ = ["ConsumerGroupCoordinator", "HeartbeatRequestData", "HeartbeatResult"]

log = logging.getLogger("aiokafka_lite.broker.groups")

DEFAULT_ASSIGNORS = "uniform,range"


@dataclass(slots=True)
class HeartbeatRequestData:
    """A ConsumerGroupHeartbeat request's fields, decoded (topic ids as UUIDs)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list[tuple[uuid.UUID, list[int]]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0


@dataclass(slots=True)
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class _Refused(Exception):
    def __init__(self, error: int, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def new_member_id() -> str:
    """A member id as Kafka's clients make them: a base64url UUID without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerGroupCoordinator(ClassicGroupCoordinator):
    """Consumer groups (KIP-848) beside the classic ones; one group id space for both."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self._session_timers: dict[tuple[str, str], Cancellable] = {}
        self._rebalance_timers: dict[tuple[str, str], tuple[int, Cancellable]] = {}

    # -- settings ----------------------------------------------------------------------------
    def _group_int(self, group_id: str, name: str) -> int:
        value, _ = group_config_value(
            name, self.cluster.group_configs.get(group_id, {}), self.cluster.config.extra
        )
        try:
            return int(value)
        except ValueError:
            return int(group_config_value(name, {}, {})[0])

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "consumer.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "consumer.heartbeat.interval.ms")

    def assignment_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "consumer.assignment.interval.ms")

    def consumer_max_size(self) -> int:
        return config_int(self.cluster, "group.consumer.max.size", 2**31 - 1)

    def assignor_names(self) -> list[str]:
        raw = str(self.cluster.config.extra.get("group.consumer.assignors", DEFAULT_ASSIGNORS))
        names = [n.strip() for n in raw.split(",") if n.strip()]
        return [n for n in names if n in ASSIGNORS] or ["uniform"]

    # -- persistence ------------------------------------------------------------------------
    def _consumer_groups_path(self) -> Path | None:
        storage = self.cluster.storage
        return storage.dir / "groups" / "consumer_groups.json" if storage is not None else None

    def _save_consumer_groups(self) -> None:
        path = self._consumer_groups_path()
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump([g.to_json() for g in self.consumer_groups.values()], f)
        os.replace(tmp, path)

    def _load_consumer_groups(self) -> None:
        path = self._consumer_groups_path()
        if path is None or not path.exists():
            return
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.exception("ignoring unreadable %s", path)
            return
        for d in saved:
            g = ConsumerGroup.from_json(d)
            g.coordinator_id = self.placement.coordinator_id(g.group_id)
            self.consumer_groups[g.group_id] = g
            classic = self.groups.get(g.group_id)
            if classic is not None and not classic.members:
                del self.groups[g.group_id]
            for m in g.members.values():
                self._touch_session(g, m)
                self._schedule_rebalance_timeout(g, m, was_unrevoked=False)

    async def start(self) -> None:
        started = self._started
        await super().start()
        if not started:
            self._load_consumer_groups()

    async def stop(self) -> None:
        if self._started:
            self._save_consumer_groups()
        await super().stop()
        self._session_timers.clear()
        self._rebalance_timers.clear()

    close = stop

    # -- validation -------------------------------------------------------------------------
    def _validate(self, r: HeartbeatRequestData) -> None:
        """Kafka's request checks, in Kafka's order (INVALID_REQUEST and friends)."""

        def refuse(msg: str) -> _Refused:
            return _Refused(INVALID_REQUEST, msg)

        if not r.group_id:
            raise refuse("GroupId can't be empty.")
        if r.instance_id == "":
            raise refuse("InstanceId can't be empty.")
        if r.rack_id == "":
            raise refuse("RackId can't be empty.")
        if r.api_version >= 1 and not r.member_id:
            raise refuse("MemberId can't be empty.")
        if r.member_epoch > 0 or r.member_epoch == LEAVE_EPOCH:
            if not r.member_id:
                raise refuse("MemberId can't be empty.")
        elif r.member_epoch == 0:
            if r.rebalance_timeout_ms == -1:
                raise refuse("RebalanceTimeoutMs must be provided in first request.")
            if r.owned is None or r.owned:
                raise refuse("TopicPartitions must be empty when (re-)joining.")
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                raise refuse(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif r.member_epoch == STATIC_LEAVE_EPOCH:
            if not r.member_id:
                raise refuse("MemberId can't be empty.")
            if r.instance_id is None:
                raise refuse("InstanceId can't be null.")
        else:
            raise refuse("MemberEpoch is invalid.")
        if r.subscribed_topic_regex:
            try:
                compile_topic_regex(r.subscribed_topic_regex)
            except RegexError as e:
                raise _Refused(
                    INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{r.subscribed_topic_regex}` is not a valid regular expression: {e}.",
                ) from None
        if r.server_assignor is not None and r.server_assignor not in self.assignor_names():
            raise _Refused(
                UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {r.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.assignor_names())}.",
            )

    # -- the heartbeat ------------------------------------------------------------------------
    def consumer_heartbeat(self, r: HeartbeatRequestData) -> HeartbeatResult:
        """ConsumerGroupHeartbeat after the coordinator check."""
        persist = self._consumer_groups_path() is not None
        before = self._group_snapshot(r.group_id) if persist else None
        try:
            self._validate(r)
            if r.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result = self._leave(r)
            else:
                result = self._heartbeat_member(r)
        except _Refused as e:
            return HeartbeatResult(e.error, e.message)
        if persist and self._group_snapshot(r.group_id) != before:
            self._save_consumer_groups()
        return result

    def _group_snapshot(self, group_id: str) -> str | None:
        group = self.consumer_groups.get(group_id)
        return None if group is None else json.dumps(group.to_json(), sort_keys=True)

    def is_share_group(self, group_id: str) -> bool:
        """A share group (KIP-932) holds the id: group ids are one space for every type."""
        share = self.cluster.services.get("share_groups")
        return group_id in getattr(share, "groups", {})

    def _group_for_heartbeat(self, r: HeartbeatRequestData) -> tuple[ConsumerGroup, bool]:
        group = self.consumer_groups.get(r.group_id)
        if group is not None:
            return group, False
        if self.is_share_group(r.group_id):
            raise _Refused(GROUP_ID_NOT_FOUND, f"Group {r.group_id} is not a consumer group.")
        classic = self.groups.get(r.group_id)
        if classic is not None and classic.state not in (GroupState.EMPTY, GroupState.DEAD):
            if r.member_epoch != 0:
                raise _Refused(GROUP_ID_NOT_FOUND, f"Group {r.group_id} is not a consumer group.")
            why = self._upgrade_refusal(classic)
            if why is not None:
                raise _Refused(
                    GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade classic group {r.group_id} to consumer group because {why}.",
                )
            return self._upgrade(classic), False
        if r.member_epoch != 0:
            raise _Refused(GROUP_ID_NOT_FOUND, f"Consumer group {r.group_id} not found.")
        if classic is not None:
            # An empty classic group (offsets only) becomes a consumer group; offsets stay.
            self.timers.cancel(classic.join_timer)
            self.timers.cancel(classic.sync_timer)
            del self.groups[r.group_id]
        group = ConsumerGroup(r.group_id)
        group.coordinator_id = self.placement.coordinator_id(r.group_id)
        self.consumer_groups[r.group_id] = group
        return group, True

    def _heartbeat_member(self, r: HeartbeatRequestData) -> HeartbeatResult:
        group, created = self._group_for_heartbeat(r)
        owned = assignment_of(r.owned) if r.owned is not None else None
        member, is_new = self._member_for_heartbeat(group, r, owned)
        old_names = list(member.subscribed_topic_names)
        old_regex = member.subscribed_topic_regex
        old_assigned = copy_assignment(member.assigned)
        # Update what the member told us.
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        if r.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = r.rebalance_timeout_ms
        if r.subscribed_topic_names is not None:
            member.subscribed_topic_names = sorted(set(r.subscribed_topic_names))
        if r.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = r.subscribed_topic_regex or None
        if r.server_assignor is not None:
            member.server_assignor = r.server_assignor
        member.client_id, member.client_host = r.client_id, r.client_host
        if is_new:
            group.put(member)
        bump = 0
        if is_new or member.subscribed_topic_names != old_names or member.subscribed_topic_regex != old_regex:
            bump = 1
            if created and member.subscribed_topic_names:
                bump = 2  # Kafka 4.4 starts a group subscribing by name one epoch further
        fingerprint = self._fingerprint(group)
        if fingerprint != group.subscription_fingerprint:
            group.subscription_fingerprint = fingerprint
            bump = max(bump, 1)
        if bump:
            group.bump_epoch(bump)
        self._maybe_assign(group, first=created or (is_new and len(group.members) == 1))
        was_unrevoked = member.state is MemberState.UNREVOKED_PARTITIONS
        reconcile(group, member, owned)
        self._touch_session(group, member)
        self._schedule_rebalance_timeout(group, member, was_unrevoked)
        full = r.member_epoch == 0 or (
            r.rebalance_timeout_ms != -1
            and (r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None)
            and r.owned is not None
        )
        changed = member.assigned != old_assigned
        return HeartbeatResult(
            NONE,
            None,
            member.member_id,
            member.member_epoch,
            self.heartbeat_interval_ms(group.group_id),
            copy_assignment(member.assigned) if full or changed else None,
        )

    def _member_for_heartbeat(
        self, group: ConsumerGroup, r: HeartbeatRequestData, owned: Assignment | None
    ) -> tuple[ConsumerGroupMember, bool]:
        """The member this heartbeat is from (new, replaced static, or existing, epoch checked)."""
        if r.member_epoch == 0:
            if r.instance_id is not None:
                current_id = group.static_members.get(r.instance_id)
                if current_id is not None:
                    current = group.members[current_id]
                    if current.member_epoch != STATIC_LEAVE_EPOCH and current_id != r.member_id:
                        new_id = r.member_id or new_member_id()
                        raise _Refused(
                            UNRELEASED_INSTANCE_ID,
                            f"Static member {new_id} with instance id {r.instance_id} cannot join the group "
                            f"because the instance id is owned by {current_id} member.",
                        )
                    if current_id != r.member_id:
                        return self._replace_static_member(
                            group, current, r.member_id or new_member_id()
                        ), False
                    return current, False
            existing = group.members.get(r.member_id) if r.member_id else None
            if existing is not None:
                return existing, False
            if len(group.members) >= self.consumer_max_size():
                raise _Refused(
                    GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of {self.consumer_max_size()} members.",
                )
            member = ConsumerGroupMember(member_id=r.member_id or new_member_id(), instance_id=r.instance_id)
            return member, True
        found = group.members.get(r.member_id)
        if r.instance_id is not None:
            current_id = group.static_members.get(r.instance_id)
            if current_id is None:
                raise _Refused(UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
            if current_id != r.member_id:
                raise _Refused(
                    FENCED_INSTANCE_ID,
                    f"Static member {r.member_id} with instance id {r.instance_id} was fenced by member "
                    f"{current_id}.",
                )
        if found is None:
            raise _Refused(
                UNKNOWN_MEMBER_ID, f"Member {r.member_id} is not a member of group {group.group_id}."
            )
        self._check_epoch(found, r.member_epoch, owned)
        return found, False

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: Assignment | None) -> None:
        if epoch > member.member_epoch:
            raise _Refused(
                FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch:
            # The member may have missed the response that bumped its epoch: the previous
            # epoch is fine while it owns no more than its current assignment.
            if (
                epoch != member.previous_member_epoch
                or owned is None
                or not is_subset(owned, member.assigned)
            ):
                raise _Refused(
                    FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the "
                    f"group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                    "and rejoin.",
                )

    def _replace_static_member(
        self, group: ConsumerGroup, old: ConsumerGroupMember, new_id: str
    ) -> ConsumerGroupMember:
        """A static member back under a new member id: it takes over the old one's place."""
        self._cancel_member_timers(group, old.member_id)
        target = group.target.pop(old.member_id, None)
        group.remove(old.member_id)
        member = ConsumerGroupMember(
            member_id=new_id,
            instance_id=old.instance_id,
            rack_id=old.rack_id,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            subscribed_topic_names=list(old.subscribed_topic_names),
            subscribed_topic_regex=old.subscribed_topic_regex,
            server_assignor=old.server_assignor,
            member_epoch=old.previous_member_epoch
            if old.member_epoch == STATIC_LEAVE_EPOCH
            else old.member_epoch,
            previous_member_epoch=old.previous_member_epoch,
            state=old.state,
            assigned=copy_assignment(old.assigned),
            pending_revocation=copy_assignment(old.pending_revocation),
        )
        group.put(member)
        if target is not None:
            group.target[new_id] = target
        return member

    # -- leaving ------------------------------------------------------------------------------
    def _leave(self, r: HeartbeatRequestData) -> HeartbeatResult:
        group = self.consumer_groups.get(r.group_id)
        if group is None:
            raise _Refused(GROUP_ID_NOT_FOUND, f"Group {r.group_id} not found.")
        if r.instance_id is not None:
            current_id = group.static_members.get(r.instance_id)
            if current_id is None:
                raise _Refused(UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
            if current_id != r.member_id:
                raise _Refused(
                    FENCED_INSTANCE_ID,
                    f"Static member {r.member_id} with instance id {r.instance_id} was fenced by member "
                    f"{current_id}.",
                )
        member = group.members.get(r.member_id)
        if member is None:
            raise _Refused(
                UNKNOWN_MEMBER_ID, f"Member {r.member_id} is not a member of group {group.group_id}."
            )
        if r.member_epoch == STATIC_LEAVE_EPOCH:
            # A static member leaving for now: it keeps its place (and partitions) until its
            # session expires or its instance comes back.
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = STATIC_LEAVE_EPOCH
            self._cancel_rebalance_timer(group, member.member_id)
            self._touch_session(group, member)
            return HeartbeatResult(NONE, None, member.member_id, STATIC_LEAVE_EPOCH, 0, None)
        self._remove_member(group, member)
        return HeartbeatResult(NONE, None, member.member_id, LEAVE_EPOCH, 0, None)

    # -- migration hooks (``mixed`` implements them) ---------------------------------------
    def _upgrade_refusal(self, classic: Group) -> str | None:
        """Why a live classic group cannot become a consumer group, or None if it can."""
        return "the online upgrade is not supported"

    def _upgrade(self, classic: Group) -> ConsumerGroup:
        raise NotImplementedError

    def _remove_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self._cancel_member_timers(group, member.member_id)
        group.remove(member.member_id)
        group.subscription_fingerprint = self._fingerprint(group)
        group.bump_epoch()
        log.debug(
            "consumer group %s: member %s removed, epoch %d",
            group.group_id,
            member.member_id,
            group.group_epoch,
        )

    # -- assignment ---------------------------------------------------------------------------
    def _subscribed_topics(self, group: ConsumerGroup, member: ConsumerGroupMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= self._regex_matches(member.subscribed_topic_regex)
        return names

    def _regex_matches(self, pattern: str) -> set[str]:
        try:
            rx = compile_topic_regex(pattern)
        except RegexError:
            return set()
        # Internal topics match too, as on Kafka (a regex can subscribe to __consumer_offsets).
        return {name for name in self.cluster.topics if rx.fullmatch(name)}

    def _fingerprint(self, group: ConsumerGroup) -> tuple[tuple[str, str, int], ...]:
        """What the group's subscribed topics look like: a change means a new assignment."""
        names: set[str] = set()
        for m in group.members.values():
            names |= self._subscribed_topics(group, m)
        out = []
        for name in sorted(names):
            topic = self.cluster.get_topic(name)
            if topic is not None:
                out.append((name, str(topic.topic_id), len(topic.partitions)))
        return tuple(out)

    def _maybe_assign(self, group: ConsumerGroup, *, first: bool) -> None:
        """Computes the target assignment if the group epoch moved and the interval allows."""
        if group.group_epoch <= group.assignment_epoch:
            return
        now = self.now()
        interval = self.assignment_interval_ms(group.group_id)
        if not first and group.last_assignment_ms is not None and now < group.last_assignment_ms + interval:
            return
        self.compute_target(group)
        group.last_assignment_ms = now

    def compute_target(self, group: ConsumerGroup) -> None:
        topics: dict[uuid.UUID, int] = {}
        members: dict[str, MemberSpec] = {}
        for m in group.members.values():
            ids: set[uuid.UUID] = set()
            for name in self._subscribed_topics(group, m):
                topic = self.cluster.get_topic(name)
                if topic is not None and topic.partitions:
                    ids.add(topic.topic_id)
                    topics[topic.topic_id] = len(topic.partitions)
            members[m.member_id] = MemberSpec(ids, m.rack_id)
        assignor = ASSIGNORS[group.preferred_assignor(self.assignor_names()[0])]
        group.target = assignor(AssignmentSpec(members, topics, group.target))
        group.assignment_epoch = group.group_epoch

    # -- timers -------------------------------------------------------------------------------
    def _touch_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        key = (group.group_id, member.member_id)
        self.timers.cancel(self._session_timers.pop(key, None))
        timeout = (
            member.classic.session_timeout_ms
            if member.classic is not None
            else self.session_timeout_ms(group.group_id)
        )
        self._session_timers[key] = self.timers.schedule(
            timeout, lambda: self._on_session_expired(group, member)
        )

    def _on_session_expired(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        key = (group.group_id, member.member_id)
        self._session_timers.pop(key, None)
        if (
            self.consumer_groups.get(group.group_id) is not group
            or group.members.get(member.member_id) is not member
        ):
            return
        log.info("consumer group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member(group, member)
        self._save_consumer_groups()

    def _schedule_rebalance_timeout(
        self, group: ConsumerGroup, member: ConsumerGroupMember, was_unrevoked: bool
    ) -> None:
        """A member asked to revoke must do so within its rebalance timeout, or it is removed."""
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._cancel_rebalance_timer(group, member.member_id)
            return
        key = (group.group_id, member.member_id)
        pending = self._rebalance_timers.get(key)
        if was_unrevoked and pending is not None and pending[0] == member.member_epoch:
            return
        self._cancel_rebalance_timer(group, member.member_id)
        epoch = member.member_epoch
        handle = self.timers.schedule(
            max(member.rebalance_timeout_ms, 0), lambda: self._on_rebalance_timeout(group, member, epoch)
        )
        self._rebalance_timers[key] = (epoch, handle)

    def _on_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember, epoch: int) -> None:
        self._rebalance_timers.pop((group.group_id, member.member_id), None)
        if (
            self.consumer_groups.get(group.group_id) is not group
            or group.members.get(member.member_id) is not member
        ):
            return
        if member.state is not MemberState.UNREVOKED_PARTITIONS or member.member_epoch != epoch:
            return
        log.info("consumer group %s: member %s did not revoke in time", group.group_id, member.member_id)
        self._remove_member(group, member)
        self._save_consumer_groups()

    def _cancel_rebalance_timer(self, group: ConsumerGroup, member_id: str) -> None:
        pending = self._rebalance_timers.pop((group.group_id, member_id), None)
        if pending is not None:
            self.timers.cancel(pending[1])

    def _cancel_member_timers(self, group: ConsumerGroup, member_id: str) -> None:
        self.timers.cancel(self._session_timers.pop((group.group_id, member_id), None))
        self._cancel_rebalance_timer(group, member_id)

    # -- classic members ----------------------------------------------------------------------
    def classic_join_into_consumer_group(self, group_id: str, protocol_type: str) -> int:
        """JoinGroup for a consumer group's id: NONE once the classic protocol may proceed.

        An empty consumer group turns back into a classic one (its offsets stay), as in
        Kafka. A non-empty one takes no classic members here: Kafka would run a mixed group
        for protocol type ``consumer``; the embedded broker answers
        INCONSISTENT_GROUP_PROTOCOL, as Kafka does for any other protocol type.
        """
        group = self.consumer_groups.get(group_id)
        if group is None:
            return NONE
        if group.members:
            return INCONSISTENT_GROUP_PROTOCOL
        self.delete_consumer_group(group, keep_offsets=True)
        return NONE

    # -- coordinator moves --------------------------------------------------------------------
    def _on_metadata_change(self) -> None:
        super()._on_metadata_change()
        for group in self.consumer_groups.values():
            self._check_consumer_group_moved(group)

    def move_coordinator(self, group_id: str, broker_id: int) -> None:
        super().move_coordinator(group_id, broker_id)
        group = self.consumer_groups.get(group_id)
        if group is not None:
            self._check_consumer_group_moved(group)

    def _check_consumer_group_moved(self, group: ConsumerGroup) -> None:
        # A new coordinator loads the group as it was and gives every member a full session
        # to find it (Kafka schedules the session timeouts again when it loads a group).
        now_id = self.placement.coordinator_id(group.group_id)
        if group.coordinator_id != now_id:
            old, group.coordinator_id = group.coordinator_id, now_id
            if old != -1:
                for m in group.members.values():
                    self._touch_session(group, m)

    # -- fault injection and deletion ------------------------------------------------------
    def expire_member(self, group_id: str, member_id: str) -> bool:
        group = self.consumer_groups.get(group_id)
        if group is None:
            return super().expire_member(group_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            return False
        self._remove_member(group, member)
        self._save_consumer_groups()
        return True

    def delete_consumer_group(self, group: ConsumerGroup, *, keep_offsets: bool = False) -> None:
        for member_id in list(group.members):
            self._cancel_member_timers(group, member_id)
        self.consumer_groups.pop(group.group_id, None)
        if not keep_offsets:
            self.offsets.delete_group(group.group_id)
        self._save_consumer_groups()

    def delete_groups(self, group_ids: Sequence[str], broker_id: int) -> dict[str, int]:
        out: dict[str, int] = {}
        classic_ids: list[str] = []
        for group_id in group_ids:
            group = self.consumer_groups.get(group_id)
            if group is None or self.coordinator_error(group_id, broker_id):
                classic_ids.append(group_id)
                continue
            if group.members:
                out[group_id] = NON_EMPTY_GROUP
            else:
                self.delete_consumer_group(group)
                out[group_id] = NONE
        out.update(super().delete_groups(classic_ids, broker_id))
        return out
