"""Mixed consumer groups and the online migration between the protocols (KIP-848).

With Kafka's default ``group.consumer.migration.policy=bidirectional``:

- *Upgrade*: the first ConsumerGroupHeartbeat for a live classic group of protocol type
  ``consumer`` turns it into a consumer group. Its members keep their partitions (decoded
  from their last SyncGroup assignment) at member epoch = the classic generation.
- *Classic members in a consumer group* keep using JoinGroup/SyncGroup/Heartbeat/
  LeaveGroup. The server assignor decides for them too: a JoinGroup is answered at once
  (they are followers, the generation is their member epoch), SyncGroup returns their
  current assignment, and Heartbeat answers REBALANCE_IN_PROGRESS while they have a new
  target to reconcile towards, so they rejoin. Partitions they still own (the owned
  partitions of their subscription; none for eager clients, which revoke before
  rejoining) are released only when a JoinGroup no longer reports them.
- *Downgrade*: when the last consumer-protocol member leaves and only classic members
  remain, the group becomes a classic group again at generation = the group epoch, and a
  rebalance starts so the classic members rejoin.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from aiokafka_lite.broker.groups.classic_group import (
    Group,
    GroupState,
    JoinResult,
    Member,
    Protocols,
    SyncResult,
    decode_subscription,
)
from aiokafka_lite.broker.groups.clock import Cancellable
from aiokafka_lite.broker.groups.codes import (
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from aiokafka_lite.broker.groups.consumer_group import (
    ClassicMemberInfo,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    copy_assignment,
    reconcile,
)
from aiokafka_lite.broker.groups.consumer_protocol import ConsumerGroupCoordinator
from aiokafka_lite.core import errors
from aiokafka_lite.wire.messages import ConsumerProtocolAssignment

__all__ = ["MixedGroupCoordinator", "decode_assignment", "decode_subscription", "encode_assignment"]

log = logging.getLogger("aiokafka_lite.broker.groups")

PROTOCOL_TYPE = "consumer"


def decode_assignment(data: bytes) -> dict[str, set[int]] | None:
    if not data:
        return {}
    if len(data) < 2:
        return None
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        return None
    try:
        a = ConsumerProtocolAssignment.decode(
            memoryview(data)[2:], min(version, ConsumerProtocolAssignment.MAX_VERSION), strict=False
        )
    except errors.KafkaError:
        return None
    out: dict[str, set[int]] = {}
    for tp in a.assigned_partitions:
        out.setdefault(tp.topic, set()).update(tp.partitions)
    return out


def encode_assignment(partitions: dict[str, set[int]], version: int) -> bytes:
    v = max(0, min(version, ConsumerProtocolAssignment.MAX_VERSION))
    a = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(ps))
            for t, ps in sorted(partitions.items())
            if ps
        ]
    )
    return v.to_bytes(2, "big", signed=True) + a.encode(v)


class MixedGroupCoordinator(ConsumerGroupCoordinator):
    """Classic-protocol members in consumer groups, upgrades and downgrades."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: (group id, member id) -> the deadline of a classic member's JoinGroup or SyncGroup
        self._classic_deadlines: dict[tuple[str, str], Cancellable] = {}

    async def stop(self) -> None:
        await super().stop()
        self._classic_deadlines.clear()

    close = stop

    def migration_policy(self) -> str:
        return str(self.cluster.config.extra.get("group.consumer.migration.policy", "bidirectional")).lower()

    # -- names and ids ------------------------------------------------------------------------
    def _names(self, a: dict[uuid.UUID, set[int]]) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for t, ps in a.items():
            topic = self.cluster.topics_by_id.get(t)
            if topic is not None and ps:
                out[topic.name] = set(ps)
        return out

    def _ids(self, a: dict[str, set[int]]) -> dict[uuid.UUID, set[int]]:
        out: dict[uuid.UUID, set[int]] = {}
        for name, ps in a.items():
            topic = self.cluster.get_topic(name)
            if topic is not None and ps:
                out[topic.topic_id] = set(ps)
        return out

    # -- upgrade ----------------------------------------------------------------------------
    def _upgrade_refusal(self, classic: Group) -> str | None:
        if self.migration_policy() not in ("bidirectional", "upgrade"):
            return "the online upgrade is disabled"
        if classic.protocol_type != PROTOCOL_TYPE:
            return f"it is not a {PROTOCOL_TYPE} group"
        if len(classic.members) > self.consumer_max_size():
            return "the group has more members than a consumer group may have"
        for m in classic.members.values():
            meta = m.metadata(classic.protocol_name) if classic.protocol_name else m.protocols[0][1]
            if decode_subscription(meta) is None or decode_assignment(m.assignment) is None:
                return "the embedded consumer protocol is malformed"
        return None

    def _upgrade(self, classic: Group) -> ConsumerGroup:
        """The classic group becomes a consumer group; its members keep their partitions."""
        group = ConsumerGroup(classic.group_id)
        group.coordinator_id = self.placement.coordinator_id(classic.group_id)
        epoch = classic.generation_id
        group.group_epoch = group.assignment_epoch = epoch
        for m in classic.members.values():
            meta = m.metadata(classic.protocol_name) if classic.protocol_name else m.protocols[0][1]
            decoded = decode_subscription(meta)
            assert decoded is not None  # checked by _upgrade_refusal
            _, sub = decoded
            assigned = self._ids(decode_assignment(m.assignment) or {})
            member = ConsumerGroupMember(
                member_id=m.member_id,
                instance_id=m.group_instance_id,
                rack_id=sub.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                subscribed_topic_names=sorted(set(sub.topics)),
                member_epoch=epoch,
                previous_member_epoch=epoch - 1,
                classic=ClassicMemberInfo(
                    m.session_timeout_ms,
                    list(m.protocols),
                    classic.protocol_name or m.protocols[0][0],
                ),
            )
            group.put(member)
            group.update_assignment(member, assigned, {})
            group.target[member.member_id] = copy_assignment(assigned)
        # The classic group is gone: waiting requests rejoin, its timers stop.
        for m in classic.members.values():
            self._answer_join(m, JoinResult(REBALANCE_IN_PROGRESS, m.member_id))
            self._answer_sync(m, SyncResult(REBALANCE_IN_PROGRESS))
            self.timers.cancel(m.session_timer)
            m.session_timer = None
        for h in (classic.join_timer, classic.sync_timer, *classic.pending_members.values()):
            self.timers.cancel(h)
        del self.groups[classic.group_id]
        self.consumer_groups[group.group_id] = group
        group.subscription_fingerprint = self._fingerprint(group)
        for member in group.members.values():
            self._touch_session(group, member)
        log.info("group %s: upgraded from classic to consumer at epoch %d", group.group_id, epoch)
        return group

    # -- downgrade --------------------------------------------------------------------------
    def _remove_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        rest = [m for m in group.members.values() if m.member_id != member.member_id]
        if (
            member.classic is None
            and rest
            and all(m.classic is not None for m in rest)
            and self.migration_policy() in ("bidirectional", "downgrade")
        ):
            self._cancel_member_timers(group, member.member_id)
            group.remove(member.member_id)
            self._downgrade(group)
            return
        super()._remove_member(group, member)

    def _downgrade(self, group: ConsumerGroup) -> None:
        """Only classic members are left: back to a classic group, which rebalances."""
        for member_id in list(group.members):
            self._cancel_member_timers(group, member_id)
        del self.consumer_groups[group.group_id]
        classic = Group(group.group_id, self.now())
        classic.coordinator_id = self.placement.coordinator_id(group.group_id)
        classic.generation_id = group.group_epoch
        self.groups[group.group_id] = classic
        for m in group.members.values():
            info = m.classic
            assert info is not None
            version = 0
            for name, meta in info.protocols:
                if name == info.protocol_name:
                    decoded = decode_subscription(meta)
                    version = decoded[0] if decoded is not None else 0
            cm = Member(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=info.session_timeout_ms,
                protocol_type=PROTOCOL_TYPE,
                protocols=list(info.protocols),
                assignment=encode_assignment(self._names(m.assigned), version),
            )
            classic.add(cm, None)
            self._heartbeat(classic, cm)
        classic.protocol_name = classic.select_protocol()
        classic.transition(GroupState.STABLE, self.now())
        self._save_consumer_groups()
        log.info(
            "group %s: downgraded from consumer to classic at generation %d",
            group.group_id,
            group.group_epoch,
        )
        self._maybe_prepare_rebalance(classic)

    # -- JoinGroup ----------------------------------------------------------------------------
    def classic_join_into_consumer_group(self, group_id: str, protocol_type: str) -> int:
        if self.is_share_group(group_id):
            return INCONSISTENT_GROUP_PROTOCOL
        group = self.consumer_groups.get(group_id)
        if group is not None and group.members and protocol_type != PROTOCOL_TYPE:
            return INCONSISTENT_GROUP_PROTOCOL
        if group is not None and group.members:
            return NONE  # join_group serves it as a classic member of the consumer group
        return super().classic_join_into_consumer_group(group_id, protocol_type)

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
        group = self.consumer_groups.get(group_id)
        if group is None or not group.members:
            return super().join_group(
                group_id=group_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                protocol_type=protocol_type,
                protocols=protocols,
                client_id=client_id,
                client_host=client_host,
                require_known_member_id=require_known_member_id,
                supports_skip_assignment=supports_skip_assignment,
            )
        if protocol_type != PROTOCOL_TYPE or not protocols:
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id)
        # Like a classic group, the classic members must have a protocol in common.
        others = [
            m.classic for m in group.members.values() if m.classic is not None and m.member_id != member_id
        ]
        names = {n for n, _ in protocols}
        for info in others:
            names &= {n for n, _ in info.protocols}
        if not names:
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResult(INVALID_SESSION_TIMEOUT, member_id)
        if not member_id and group_instance_id is None and require_known_member_id:
            return JoinResult(MEMBER_ID_REQUIRED, f"{client_id}-{uuid.uuid4()}")
        decoded = decode_subscription(protocols[0][1])
        if decoded is None:
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id)
        version, sub = decoded
        member: ConsumerGroupMember | None = None
        is_new = False
        if group_instance_id is not None:
            current_id = group.static_members.get(group_instance_id)
            if current_id is not None:
                current = group.members[current_id]
                if member_id and member_id != current_id:
                    return JoinResult(FENCED_INSTANCE_ID, member_id)
                if not member_id:
                    member = self._replace_static_member(group, current, f"{client_id}-{uuid.uuid4()}")
                else:
                    member = current
        if member is None:
            existing = group.members.get(member_id) if member_id else None
            if existing is not None:
                member = existing
            else:
                if len(group.members) >= self.consumer_max_size():
                    return JoinResult(GROUP_MAX_SIZE_REACHED, "")
                member = ConsumerGroupMember(
                    member_id=member_id or f"{client_id}-{uuid.uuid4()}", instance_id=group_instance_id
                )
                is_new = True
        old_names = list(member.subscribed_topic_names)
        member.subscribed_topic_names = sorted(set(sub.topics))
        member.rack_id = sub.rack_id
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        member.classic = ClassicMemberInfo(session_timeout_ms, list(protocols), protocols[0][0])
        if is_new:
            group.put(member)
        if is_new or member.subscribed_topic_names != old_names:
            group.bump_epoch()
        fingerprint = self._fingerprint(group)
        if fingerprint != group.subscription_fingerprint:
            group.subscription_fingerprint = fingerprint
            if not (is_new or member.subscribed_topic_names != old_names):
                group.bump_epoch()
        self._maybe_assign(group, first=False)
        owned = self._ids(
            {tp.topic: set(tp.partitions) for tp in sub.owned_partitions} if version >= 1 else {}
        )
        # An eager client rejoins having revoked everything; a cooperative one reports what
        # it still owns. Either way the JoinGroup is the member's acknowledgement.
        was_unrevoked = member.state is MemberState.UNREVOKED_PARTITIONS
        reconcile(group, member, owned)
        self._touch_session(group, member)
        self._schedule_rebalance_timeout(group, member, was_unrevoked)
        self._classic_deadline(group, member, "SyncGroup")
        self._save_consumer_groups()
        return JoinResult(
            NONE,
            member.member_id,
            member.member_epoch,
            PROTOCOL_TYPE,
            member.classic.protocol_name,
            "",
            [],
        )

    # -- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------
    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[int, ConsumerGroupMember | None]:
        if instance_id is not None:
            current_id = group.static_members.get(instance_id)
            if current_id is None:
                return UNKNOWN_MEMBER_ID, None
            if current_id != member_id:
                return FENCED_INSTANCE_ID, None
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return UNKNOWN_MEMBER_ID, None
        return NONE, member

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
        group = self.consumer_groups.get(group_id)
        if group is None:
            return super().sync_group(
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                assignments=assignments,
            )
        err, member = self._classic_member(group, member_id, group_instance_id)
        if member is None or member.classic is None:
            return SyncResult(err)
        if generation_id != member.member_epoch:
            return SyncResult(ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != member.classic.protocol_name
        ):
            return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
        self._touch_session(group, member)
        self._cancel_classic_deadline(group, member.member_id)
        version = 0
        for name, meta in member.classic.protocols:
            if name == member.classic.protocol_name:
                decoded = decode_subscription(meta)
                version = decoded[0] if decoded is not None else 0
        return SyncResult(
            NONE,
            encode_assignment(self._names(member.assigned), version),
            PROTOCOL_TYPE,
            member.classic.protocol_name,
        )

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        group = self.consumer_groups.get(group_id)
        if group is None:
            return super().heartbeat(group_id, generation_id, member_id, group_instance_id)
        err, member = self._classic_member(group, member_id, group_instance_id)
        if member is None:
            return err
        if generation_id != member.member_epoch:
            return ILLEGAL_GENERATION
        self._touch_session(group, member)
        assignment_epoch = group.assignment_epoch
        self._maybe_assign(group, first=False)
        if group.assignment_epoch != assignment_epoch:
            self._save_consumer_groups()
        if member.state is not MemberState.STABLE or member.member_epoch != group.assignment_epoch:
            if (group.group_id, member.member_id) not in self._classic_deadlines:
                self._classic_deadline(group, member, "JoinGroup")
            return REBALANCE_IN_PROGRESS
        return NONE

    # -- deadlines of classic members ------------------------------------------------------
    def _classic_deadline(self, group: ConsumerGroup, member: ConsumerGroupMember, expected: str) -> None:
        """A classic member told to rejoin (or to sync) must do so within its rebalance
        timeout, or it is removed, as Kafka's join and sync timeouts do."""
        self._cancel_classic_deadline(group, member.member_id)
        epoch = member.member_epoch

        def expire() -> None:
            self._classic_deadlines.pop((group.group_id, member.member_id), None)
            if (
                self.consumer_groups.get(group.group_id) is not group
                or group.members.get(member.member_id) is not member
            ):
                return
            if expected == "JoinGroup" and member.member_epoch != epoch:
                return  # it rejoined
            log.info(
                "consumer group %s: classic member %s sent no %s in time",
                group.group_id,
                member.member_id,
                expected,
            )
            self._remove_member(group, member)
            self._save_consumer_groups()

        self._classic_deadlines[(group.group_id, member.member_id)] = self.timers.schedule(
            max(member.rebalance_timeout_ms, 0), expire
        )

    def _cancel_classic_deadline(self, group: ConsumerGroup, member_id: str) -> None:
        self.timers.cancel(self._classic_deadlines.pop((group.group_id, member_id), None))

    def _cancel_member_timers(self, group: ConsumerGroup, member_id: str) -> None:
        super()._cancel_member_timers(group, member_id)
        self._cancel_classic_deadline(group, member_id)

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> tuple[int, list[int]]:
        group = self.consumer_groups.get(group_id)
        if group is None:
            return super().leave_group(group_id, members)
        out: list[int] = []
        for member_id, instance_id in members:
            if instance_id is not None:
                current_id = group.static_members.get(instance_id)
                if current_id is None:
                    out.append(UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current_id:
                    out.append(FENCED_INSTANCE_ID)
                    continue
                member_id = current_id
            member = group.members.get(member_id)
            if member is None:
                out.append(UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(group, member)
            out.append(NONE)
            if group.group_id not in self.consumer_groups:
                break  # downgraded: the rest are classic members of a classic group now
        if len(out) < len(members):
            _, rest = super().leave_group(group_id, members[len(out) :])
            out.extend(rest)
        self._save_consumer_groups()
        return NONE, out
