"""Request handlers of the group APIs: decode, check the coordinator, call the state machine."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from aiokafka_lite.broker.committed_offsets import CommittedOffset
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.groups.assignors import Assignment
from aiokafka_lite.broker.groups.base import _wall_ms
from aiokafka_lite.broker.groups.classic_group import GroupState, JoinResult
from aiokafka_lite.broker.groups.codes import (
    _GROUP_OPERATIONS,
    CONSUMER_GROUP_OPERATIONS,
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    GROUP_KEY,
    ILLEGAL_GENERATION,
    INVALID_GROUP_ID,
    INVALID_REQUEST,
    NONE,
    TXN_KEY,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_VERSION,
)
from aiokafka_lite.broker.groups.consumer_group import ConsumerGroup
from aiokafka_lite.broker.groups.consumer_protocol import HeartbeatRequestData
from aiokafka_lite.broker.groups.offset_commits import OffsetCoordinator
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
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

log = logging.getLogger("aiokafka_lite.broker.groups")

_T = TypeVar("_T")


class GroupRequestHandlers(OffsetCoordinator):
    """The group APIs' request handlers."""

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
        # v5: Transactions V2 (the group joins the transaction here); v6 (topic ids) is not served.
        registry.register(TxnOffsetCommitRequest.API_KEY, self.handle_txn_offset_commit, 0, 5)
        registry.register(ConsumerGroupHeartbeatRequest.API_KEY, self.handle_consumer_group_heartbeat, 0, 1)
        registry.register(ConsumerGroupDescribeRequest.API_KEY, self.handle_consumer_group_describe, 0, 1)

    def rebalance_protocols(self) -> set[str]:
        """``group.coordinator.rebalance.protocols``: without ``consumer``, Kafka answers
        ConsumerGroupHeartbeat with UNSUPPORTED_VERSION."""
        raw = str(
            self.cluster.config.extra.get("group.coordinator.rebalance.protocols", "classic,consumer,streams")
        )
        return {p.strip().lower() for p in raw.split(",") if p.strip()}

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

    def _classic_group_error(self, group_id: str, broker_id: int) -> int:
        """JoinGroup, SyncGroup, Heartbeat and LeaveGroup: an empty group id is invalid,
        then the coordinator check."""
        return self.coordinator_error(group_id, broker_id) if group_id else INVALID_GROUP_ID

    async def handle_join_group(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, JoinGroupRequest)
        v = ctx.api_version
        err = self._classic_group_error(req.group_id, ctx.broker_id)
        if not err:
            err = self.classic_join_into_consumer_group(req.group_id, req.protocol_type)
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
        err = self._classic_group_error(req.group_id, ctx.broker_id)
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
        err = self._classic_group_error(req.group_id, ctx.broker_id)
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
        err = self._classic_group_error(req.group_id, ctx.broker_id)
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
        offsets = _requested_offsets(req.topics, with_leader_epoch=v >= 6)
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
                api_version=v,
            )
        return OffsetCommitResponse(
            topics=_partition_errors(
                req.topics,
                result,
                OffsetCommitResponse.OffsetCommitResponseTopic,
                OffsetCommitResponse.OffsetCommitResponsePartition,
            )
        )

    async def handle_txn_offset_commit(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, TxnOffsetCommitRequest)
        v = ctx.api_version
        offsets = _requested_offsets(req.topics, with_leader_epoch=v >= 2)
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
                version=v,
            )
        return TxnOffsetCommitResponse(
            topics=_partition_errors(
                req.topics,
                result,
                TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic,
                TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition,
            )
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
                if v >= 9:
                    err = self.validate_offset_fetch(g.group_id, g.member_id, g.member_epoch)
                    if err:
                        groups.append(
                            OffsetFetchResponse.OffsetFetchResponseGroup(group_id=g.group_id, error_code=err)
                        )
                        continue
                fetched = self.fetch_offsets(g.group_id, tps, require_stable)
                by_topic: dict[str, list[OffsetFetchResponse.OffsetFetchResponsePartitions]] = {}
                for tp, (c, e) in fetched.items():
                    by_topic.setdefault(tp.topic, []).append(
                        _fetched_partition(OffsetFetchResponse.OffsetFetchResponsePartitions, tp, c, e)
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
                _fetched_partition(OffsetFetchResponse.OffsetFetchResponsePartition, tp, c, e)
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
            elif group_id in self.consumer_groups:
                d.group_state = GroupState.DEAD.value
                if v >= 6:
                    d.error_code = GROUP_ID_NOT_FOUND
                    d.error_message = f"Group {group_id} is not a classic group."
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
        if not types or "consumer" in types:
            for cgroup in self.consumer_groups.values():
                state = cgroup.state().value
                if self.coordinator_error(cgroup.group_id, ctx.broker_id):
                    continue
                if states and state.lower() not in states:
                    continue
                listed.append(
                    ListGroupsResponse.ListedGroup(
                        group_id=cgroup.group_id,
                        protocol_type="consumer",
                        group_state=state,
                        group_type="consumer",
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
            topics=_partition_errors(
                req.topics,
                per,
                OffsetDeleteResponse.OffsetDeleteResponseTopic,
                OffsetDeleteResponse.OffsetDeleteResponsePartition,
            )
        )

    # -- consumer groups (KIP-848) ---------------------------------------------------------
    async def handle_consumer_group_heartbeat(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ConsumerGroupHeartbeatRequest)
        if "consumer" not in self.rebalance_protocols():
            return ConsumerGroupHeartbeatResponse(
                error_code=UNSUPPORTED_VERSION, error_message="The consumer group protocol is disabled."
            )
        err = self.coordinator_error(req.group_id, ctx.broker_id) if req.group_id else NONE
        if err:
            return ConsumerGroupHeartbeatResponse(error_code=err)
        result = self.consumer_heartbeat(
            HeartbeatRequestData(
                group_id=req.group_id,
                member_id=req.member_id,
                member_epoch=req.member_epoch,
                instance_id=req.instance_id,
                rack_id=req.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms,
                subscribed_topic_names=req.subscribed_topic_names,
                subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
                server_assignor=req.server_assignor,
                owned=(
                    None
                    if req.topic_partitions is None
                    else [(tp.topic_id, list(tp.partitions)) for tp in req.topic_partitions]
                ),
                client_id=ctx.client_id or "",
                client_host="/" + ctx.client_host,
                api_version=ctx.api_version,
            )
        )
        resp = ConsumerGroupHeartbeatResponse(
            error_code=result.error,
            error_message=result.message,
            member_id=result.member_id,
            member_epoch=result.member_epoch,
            heartbeat_interval_ms=result.heartbeat_interval_ms,
        )
        if result.assignment is not None:
            resp.assignment = ConsumerGroupHeartbeatResponse.Assignment(
                topic_partitions=[
                    ConsumerGroupHeartbeatResponse.TopicPartitions(topic_id=t, partitions=sorted(ps))
                    for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
                ]
            )
        return resp

    def _described_assignment(self, a: Assignment) -> ConsumerGroupDescribeResponse.Assignment:
        parts = []
        for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])):
            topic = self.cluster.topics_by_id.get(t)
            if topic is not None and ps:
                parts.append(
                    ConsumerGroupDescribeResponse.TopicPartitions(
                        topic_id=t, topic_name=topic.name, partitions=sorted(ps)
                    )
                )
        return ConsumerGroupDescribeResponse.Assignment(topic_partitions=parts)

    def _describe_consumer_group(
        self, group: ConsumerGroup, v: int
    ) -> ConsumerGroupDescribeResponse.DescribedGroup:
        return ConsumerGroupDescribeResponse.DescribedGroup(
            group_id=group.group_id,
            group_state=group.state().value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.preferred_assignor(self.assignor_names()[0]),
            members=[
                ConsumerGroupDescribeResponse.Member(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex or "",
                    assignment=self._described_assignment(m.owned()),
                    target_assignment=self._described_assignment(group.target.get(m.member_id, {})),
                    member_type=(0 if m.classic is not None else 1) if v >= 1 else -1,
                )
                for m in group.members.values()
            ],
        )

    async def handle_consumer_group_describe(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ConsumerGroupDescribeRequest)
        v = ctx.api_version
        out: list[ConsumerGroupDescribeResponse.DescribedGroup] = []
        for group_id in req.group_ids:
            if not group_id:
                d = ConsumerGroupDescribeResponse.DescribedGroup(
                    group_id=group_id, error_code=INVALID_GROUP_ID
                )
            elif err := self.coordinator_error(group_id, ctx.broker_id):
                d = ConsumerGroupDescribeResponse.DescribedGroup(group_id=group_id, error_code=err)
            elif (cgroup := self.consumer_groups.get(group_id)) is not None:
                d = self._describe_consumer_group(cgroup, v)
            else:
                classic = self.groups.get(group_id)
                exists = (
                    classic is not None and classic.state is not GroupState.DEAD
                ) or self.is_share_group(group_id)
                d = ConsumerGroupDescribeResponse.DescribedGroup(
                    group_id=group_id,
                    error_code=GROUP_ID_NOT_FOUND,
                    error_message=(
                        f"Group {group_id} is not a consumer group."
                        if exists
                        else f"Group {group_id} not found."
                    ),
                )
            if req.include_authorized_operations and d.error_code == NONE:
                d.authorized_operations = CONSUMER_GROUP_OPERATIONS
            out.append(d)
        return ConsumerGroupDescribeResponse(groups=out)


class _RequestedPartition(Protocol):
    @property
    def partition_index(self) -> int: ...


class _RequestedTopic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[_RequestedPartition]: ...


class _RequestedOffset(_RequestedPartition, Protocol):
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class _OffsetsTopic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[_RequestedOffset]: ...


def _requested_offsets(
    topics: Iterable[_OffsetsTopic], *, with_leader_epoch: bool
) -> dict[TopicPartition, CommittedOffset]:
    """The offsets an OffsetCommit or TxnOffsetCommit request commits, stamped now."""
    now_wall = _wall_ms()
    return {
        TopicPartition(t.name, p.partition_index): CommittedOffset(
            p.committed_offset,
            p.committed_leader_epoch if with_leader_epoch else -1,
            p.committed_metadata or "",
            now_wall,
        )
        for t in topics
        for p in t.partitions
    }


def _partition_errors(
    topics: Iterable[_RequestedTopic],
    errors: Mapping[TopicPartition, int],
    topic_cls: Callable[..., _T],
    partition_cls: Callable[..., object],
) -> list[_T]:
    """The answer's topics, in the request's order, each partition with its error code from
    ``errors`` (NONE when it has none)."""
    return [
        topic_cls(
            name=t.name,
            partitions=[
                partition_cls(
                    partition_index=p.partition_index,
                    error_code=errors.get(TopicPartition(t.name, p.partition_index), NONE),
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def _fetched_partition(
    partition_cls: Callable[..., _T], tp: TopicPartition, committed: CommittedOffset | None, error: int
) -> _T:
    """OffsetFetch's answer for one partition: its committed offset, or -1 without one."""
    return partition_cls(
        partition_index=tp.partition,
        committed_offset=committed.offset if committed is not None else -1,
        committed_leader_epoch=committed.leader_epoch if committed is not None else -1,
        metadata=committed.metadata if committed is not None else "",
        error_code=error,
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
