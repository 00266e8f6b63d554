"""Kafka's classic group membership protocol."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence

from aiokafka_lite.broker.groups.base import CoordinatorBase, _join_future, _sync_future
from aiokafka_lite.broker.groups.classic_group import (
    Group,
    GroupState,
    JoinResult,
    Member,
    Protocols,
    SyncResult,
)
from aiokafka_lite.broker.groups.codes import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    NON_EMPTY_GROUP,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)

log = logging.getLogger("aiokafka_lite.broker.groups")


class ClassicGroupCoordinator(CoordinatorBase):
    """The classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and group deletion."""

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
