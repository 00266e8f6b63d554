"""Share-group administration on the embedded broker, as Kafka 4.4 answers it:
ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets, and share groups in ListGroups and DeleteGroups.

The share coordinator (``share_groups``) keeps membership and share-partition state; this
module adds what Kafka's group coordinator and share-state persister know besides:

* which share-partitions the group has *initialized* (Kafka initializes every partition
  it assigns, and those an AlterShareGroupOffsets names), reported with start offset -1
  until state is written for them;
* which share-partitions have *written* state (an acknowledgement or an alter): their
  start offset and lag are reported;
* each member's client id, host and rack for ShareGroupDescribe.

ListGroups and DeleteGroups are served by the group coordinator for the other group
types; this module wraps its handlers and answers for the share groups.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.broker.context import Handler, HandlerRegistry, RequestContext
from aiokafka_lite.broker.share.groups import ShareGroups, get_share_groups
from aiokafka_lite.broker.share.state import RecordState, SharePartitionState
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["ShareGroupAdmin", "register_share_admin_handlers"]

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_GROUP_ID = 0, 3, 24
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 68, 69
#: Kafka's "no authorized operations were asked for".
_NO_OPERATIONS = -(2**31)
#: READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS and ALTER_CONFIGS: all a group allows (no authorizer).
_GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))
_UNSET = -1

PartitionKey = tuple[uuid.UUID, int]


@dataclass
class _MemberInfo:
    client_id: str
    client_host: str
    rack_id: str | None


@dataclass
class _GroupRecord:
    #: Share-partitions the group initialized (assigned once, or named by an alter).
    initialized: set[PartitionKey] = field(default_factory=set)
    #: Share-partitions whose state was written (acknowledged, released at close, altered).
    written: set[PartitionKey] = field(default_factory=set)
    members: dict[str, _MemberInfo] = field(default_factory=dict)


class ShareGroupAdmin:
    """The share groups' administrative view; pure over the coordinator's state."""

    def __init__(self, state: ClusterState, groups: ShareGroups) -> None:
        self.state = state
        self.share = groups
        self.records: dict[str, _GroupRecord] = {}

    # -- queries ---------------------------------------------------------------------
    def exists(self, group_id: str) -> bool:
        """A share group exists once a member joined or an alter created it, until deleted;
        one restored from a snapshot has share-partition state. (A ShareFetch alone makes
        an empty placeholder in the coordinator, not a group.)"""
        g = self.share.groups.get(group_id)
        return g is not None and (g.epoch > 0 or bool(g.members) or bool(g.partitions))

    def group_state(self, group_id: str) -> str:
        return "Stable" if self.share.groups[group_id].members else "Empty"

    def other_group_type(self, group_id: str) -> bool:
        """A group of another type (classic, consumer) holds the id."""
        coordinator: Any = self.state.services.get("groups")
        if group_id in getattr(coordinator, "consumer_groups", {}):
            return True
        group = getattr(coordinator, "groups", {}).get(group_id)
        return group is not None and str(getattr(group, "state", "")) != "Dead"

    def coordinator_error(self, group_id: str, broker_id: int) -> int:
        coordinator: Any = self.state.services.get("groups")
        if coordinator is None or not hasattr(coordinator, "coordinator_error"):
            return NONE
        return int(coordinator.coordinator_error(group_id, broker_id))

    def _record(self, group_id: str) -> _GroupRecord:
        rec = self.records.get(group_id)
        if rec is None:
            rec = self.records[group_id] = _GroupRecord()
        return rec

    def _not_share(self, group_id: str) -> tuple[int, str]:
        if self.other_group_type(group_id):
            return GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        return GROUP_ID_NOT_FOUND, f"Group {group_id} not found."

    # -- observations from the share coordinator's requests ------------------------------
    def member_heartbeat(self, ctx: RequestContext, req: ShareGroupHeartbeatRequest) -> None:
        rec = self._record(req.group_id)
        if req.member_epoch == -1:
            rec.members.pop(req.member_id, None)
            return
        g = self.share.groups.get(req.group_id)
        m = g.members.get(req.member_id) if g is not None else None
        if m is None:
            return
        rec.members[req.member_id] = _MemberInfo(
            ctx.client_id or "", "/" + ctx.client_host, req.rack_id or None
        )
        for tid, parts in m.assignment.items():
            rec.initialized.update((tid, p) for p in parts)

    def state_written(self, group_id: str, keys: set[PartitionKey]) -> None:
        if keys:
            self._record(group_id).written.update(keys)

    # -- ShareGroupDescribe ------------------------------------------------------------
    def describe(
        self, group_id: str, broker_id: int, include_operations: bool
    ) -> ShareGroupDescribeResponse.DescribedGroup:
        d = ShareGroupDescribeResponse.DescribedGroup(group_id=group_id, authorized_operations=_NO_OPERATIONS)
        if not group_id:
            d.error_code = INVALID_GROUP_ID
            return d
        err = self.coordinator_error(group_id, broker_id)
        if err:
            d.error_code = err
            return d
        if not self.exists(group_id):
            d.error_code, d.error_message = self._not_share(group_id)
            return d
        g = self.share.groups[group_id]
        rec = self._record(group_id)
        d.group_state = self.group_state(group_id)
        d.group_epoch = d.assignment_epoch = g.epoch
        d.assignor_name = "simple"
        if include_operations:
            d.authorized_operations = _GROUP_OPERATIONS
        for m in g.members.values():
            info = rec.members.get(m.member_id) or _MemberInfo("", "", None)
            d.members.append(
                ShareGroupDescribeResponse.Member(
                    member_id=m.member_id,
                    rack_id=info.rack_id,
                    member_epoch=m.epoch,
                    client_id=info.client_id,
                    client_host=info.client_host,
                    subscribed_topic_names=sorted(m.topics),
                    assignment=ShareGroupDescribeResponse.Assignment(
                        topic_partitions=[
                            ShareGroupDescribeResponse.TopicPartitions(
                                topic_id=tid, topic_name=self._topic_name(tid), partitions=sorted(ps)
                            )
                            for tid, ps in sorted(
                                m.assignment.items(), key=lambda kv: self._topic_name(kv[0])
                            )
                        ]
                    ),
                )
            )
        return d

    def _topic_name(self, tid: uuid.UUID) -> str:
        topic = self.state.topics_by_id.get(tid)
        return topic.name if topic is not None else ""

    # -- DescribeShareGroupOffsets -------------------------------------------------------
    def describe_offsets(
        self, req: DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup, broker_id: int
    ) -> DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup:
        R = DescribeShareGroupOffsetsResponse
        out = R.DescribeShareGroupOffsetsResponseGroup(group_id=req.group_id)
        if not req.group_id:
            return out  # Kafka answers an empty id with no topics and no error
        err = self.coordinator_error(req.group_id, broker_id)
        if err:
            out.error_code = err
            return out
        if not self.exists(req.group_id):
            return out  # unknown groups and groups of other types: no topics, no error
        if req.topics is None:
            by_name: dict[str, list[int]] = {}
            for tid, index in self._initialized(req.group_id):
                name = self._topic_name(tid)
                if name:
                    by_name.setdefault(name, []).append(index)
            wanted = sorted((name, sorted(ps)) for name, ps in by_name.items())
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in req.topics]
        for name, partitions in wanted:
            topic = self.state.get_topic(name)
            rt = R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic.topic_id if topic is not None else ZERO_UUID
            )
            for index in partitions:
                rp = R.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index, start_offset=_UNSET, leader_epoch=0, lag=_UNSET
                )
                if topic is not None:
                    if not 0 <= index < len(topic.partitions):
                        rp.error_code = UNKNOWN_TOPIC_OR_PARTITION
                        rp.error_message = "This server does not host this topic-partition."
                    else:
                        rp.leader_epoch = topic.partitions[index].leader_epoch
                        view = self._written_state(req.group_id, (topic.topic_id, index))
                        if view is not None:
                            hwm = topic.partitions[index].log.high_watermark
                            rp.start_offset = view.start_offset
                            rp.lag = hwm - view.start_offset - _delivery_complete(view)
                rt.partitions.append(rp)
            out.topics.append(rt)
        return out

    def _initialized(self, group_id: str) -> set[PartitionKey]:
        g = self.share.groups[group_id]
        return self._record(group_id).initialized | set(g.partitions)

    def _written_state(self, group_id: str, key: PartitionKey) -> SharePartitionState | None:
        """The share-partition's state when Kafka's persister would have it; None: -1."""
        sp = self.share.groups[group_id].partitions.get(key)
        if sp is None:
            return None
        rec = self._record(group_id)
        # State the coordinator holds for a partition never seen here was loaded from a
        # snapshot at start, which is written state.
        if key in rec.written or key not in rec.initialized:
            return sp
        return None

    # -- AlterShareGroupOffsets ----------------------------------------------------------
    def alter_offsets(
        self, req: AlterShareGroupOffsetsRequest, broker_id: int
    ) -> AlterShareGroupOffsetsResponse:
        R = AlterShareGroupOffsetsResponse
        group_id = req.group_id
        if not group_id:
            return R(error_code=INVALID_GROUP_ID, error_message="The group id is invalid.")
        err = self.coordinator_error(group_id, broker_id)
        if err:
            return R(error_code=err)
        if self.other_group_type(group_id):
            code, msg = self._not_share(group_id)
            return R(error_code=code, error_message=msg)
        if self.exists(group_id) and self.share.groups[group_id].members:
            return R(error_code=NON_EMPTY_GROUP, error_message="The group is not empty.")
        changes: list[tuple[PartitionKey, int]] = []
        topics = []
        for t in req.topics:
            topic = self.state.get_topic(t.topic_name)
            rt = R.AlterShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else ZERO_UUID
            )
            for p in t.partitions:
                rp = R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index)
                if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                    rp.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    rp.error_message = "This server does not host this topic-partition."
                else:
                    changes.append(((topic.topic_id, p.partition_index), p.start_offset))
                rt.partitions.append(rp)
            topics.append(rt)
        if changes:
            # Kafka creates the (empty) share group when an alter names a partition of it.
            g = self.share._group(group_id)
            g.epoch = max(g.epoch, 1)
            rec = self._record(group_id)
            for key, start in changes:
                rec.initialized.add(key)
                if start < 0:
                    # -1: uninitialized; the next consumer starts at share.auto.offset.reset.
                    g.partitions.pop(key, None)
                    rec.written.discard(key)
                else:
                    g.partitions[key] = SharePartitionState(start)
                    rec.written.add(key)
        self.share.persist(group_id)  # journaled (a data dir): kept if the broker is killed
        return R(responses=topics)

    # -- DeleteShareGroupOffsets ---------------------------------------------------------
    def delete_offsets(
        self, req: DeleteShareGroupOffsetsRequest, broker_id: int
    ) -> DeleteShareGroupOffsetsResponse:
        R = DeleteShareGroupOffsetsResponse
        group_id = req.group_id
        if not group_id:
            return R(error_code=INVALID_GROUP_ID, error_message="The group id is invalid.")
        err = self.coordinator_error(group_id, broker_id)
        if err:
            return R(error_code=err)
        if not self.exists(group_id):
            code, msg = self._not_share(group_id)
            return R(error_code=code, error_message=msg)
        g = self.share.groups[group_id]
        if g.members:
            return R(error_code=NON_EMPTY_GROUP, error_message="The group is not empty.")
        rec = self._record(group_id)
        out = []
        for t in req.topics:
            topic = self.state.get_topic(t.topic_name)
            if topic is None:
                out.append(
                    R.DeleteShareGroupOffsetsResponseTopic(
                        topic_name=t.topic_name,
                        topic_id=ZERO_UUID,
                        error_code=UNKNOWN_TOPIC_OR_PARTITION,
                        error_message="This server does not host this topic-partition.",
                    )
                )
                continue
            for index in range(len(topic.partitions)):
                key = (topic.topic_id, index)
                g.partitions.pop(key, None)
                rec.initialized.discard(key)
                rec.written.discard(key)
            out.append(
                R.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=topic.topic_id)
            )
        self.share.persist(group_id)
        return R(responses=out)

    # -- DeleteGroups / ListGroups (share groups only) -------------------------------------
    def delete_group(self, group_id: str, broker_id: int) -> int:
        err = self.coordinator_error(group_id, broker_id)
        if err:
            return err
        g = self.share.groups[group_id]
        if g.members:
            return NON_EMPTY_GROUP
        del self.share.groups[group_id]
        for key in [k for k in self.share.sessions if k[0] == group_id]:
            del self.share.sessions[key]
        self.records.pop(group_id, None)
        self.share.persist(group_id)  # its share-partitions dropped from the journal too
        return NONE

    def listed(
        self, broker_id: int, states: set[str], types: set[str]
    ) -> list[ListGroupsResponse.ListedGroup]:
        if types and "share" not in types:
            return []
        out = []
        for group_id in sorted(self.share.groups):
            if not self.exists(group_id) or self.coordinator_error(group_id, broker_id):
                continue
            state = self.group_state(group_id)
            if states and state.lower() not in states:
                continue
            out.append(
                ListGroupsResponse.ListedGroup(
                    group_id=group_id, protocol_type="share", group_state=state, group_type="share"
                )
            )
        return out


def _delivery_complete(sp: SharePartitionState) -> int:
    """Records at or after the start offset that are done (acknowledged or archived)."""
    return sum(
        1 for r in sp.in_flight.values() if r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
    )


def _ack_keys(req: ShareFetchRequest | ShareAcknowledgeRequest) -> set[PartitionKey]:
    # A request closing the share session releases what the member holds: Kafka writes
    # the state of every partition it names.
    closing = req.share_session_epoch == -1
    return {
        (t.topic_id, p.partition_index)
        for t in req.topics
        for p in t.partitions
        if p.acknowledgement_batches or closing
    }


def _wrap(registry: HandlerRegistry, api_key: int, make: Any) -> None:
    """Replaces the handler of ``api_key`` with ``make(inner)``, keeping its versions."""
    entry = registry.get(api_key)
    if entry is None:
        return
    registry.register(api_key, make(entry.handler), entry.min_version, entry.max_version)


def register_share_admin_handlers(registry: HandlerRegistry, state: ClusterState) -> None:
    admin = state.extensions.get("share_admin")
    if not isinstance(admin, ShareGroupAdmin):
        admin = state.extensions["share_admin"] = ShareGroupAdmin(state, get_share_groups(state))

    async def describe(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ShareGroupDescribeRequest)
        return ShareGroupDescribeResponse(
            groups=[
                admin.describe(g, ctx.broker_id, req.include_authorized_operations) for g in req.group_ids
            ]
        )

    async def describe_offsets(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, DescribeShareGroupOffsetsRequest)
        return DescribeShareGroupOffsetsResponse(
            groups=[admin.describe_offsets(g, ctx.broker_id) for g in req.groups]
        )

    async def alter_offsets(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, AlterShareGroupOffsetsRequest)
        return admin.alter_offsets(req, ctx.broker_id)

    async def delete_offsets(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, DeleteShareGroupOffsetsRequest)
        return admin.delete_offsets(req, ctx.broker_id)

    registry.register(ShareGroupDescribeRequest.API_KEY, describe, 1, 1)
    registry.register(DescribeShareGroupOffsetsRequest.API_KEY, describe_offsets, 0, 1)
    registry.register(AlterShareGroupOffsetsRequest.API_KEY, alter_offsets, 0, 0)
    registry.register(DeleteShareGroupOffsetsRequest.API_KEY, delete_offsets, 0, 0)

    def heartbeat(inner: Handler) -> Handler:
        async def handle(ctx: RequestContext, req: Request) -> Any:
            resp = await inner(ctx, req)
            assert isinstance(req, ShareGroupHeartbeatRequest)
            if isinstance(resp, ShareGroupHeartbeatResponse) and resp.error_code == NONE:
                admin.member_heartbeat(ctx, req)
            return resp

        return handle

    def acknowledging(inner: Handler) -> Handler:
        async def handle(ctx: RequestContext, req: Request) -> Any:
            assert isinstance(req, ShareFetchRequest | ShareAcknowledgeRequest)
            resp = await inner(ctx, req)
            if req.group_id:
                admin.state_written(req.group_id, _ack_keys(req))
            return resp

        return handle

    def list_groups(inner: Handler) -> Handler:
        async def handle(ctx: RequestContext, req: Request) -> Any:
            assert isinstance(req, ListGroupsRequest)
            resp = await inner(ctx, req)
            v = ctx.api_version
            if isinstance(resp, ListGroupsResponse) and resp.error_code == NONE:
                states = {s.lower() for s in req.states_filter} if v >= 4 else set()
                types = {t.lower() for t in req.types_filter} if v >= 5 else set()
                resp.groups.extend(admin.listed(ctx.broker_id, states, types))
            return resp

        return handle

    def delete_groups(inner: Handler) -> Handler:
        async def handle(ctx: RequestContext, req: Request) -> Any:
            assert isinstance(req, DeleteGroupsRequest)
            share = {g for g in req.groups_names if admin.exists(g)}
            results: dict[str, DeleteGroupsResponse.DeletableGroupResult] = {}
            others = [g for g in req.groups_names if g not in share]
            if others:
                resp = await inner(ctx, DeleteGroupsRequest(groups_names=others))
                assert isinstance(resp, DeleteGroupsResponse)
                results.update((r.group_id, r) for r in resp.results)
            for g in share:
                results[g] = DeleteGroupsResponse.DeletableGroupResult(
                    group_id=g, error_code=admin.delete_group(g, ctx.broker_id)
                )
            return DeleteGroupsResponse(
                results=[results[g] for g in dict.fromkeys(req.groups_names) if g in results]
            )

        return handle

    _wrap(registry, ShareGroupHeartbeatRequest.API_KEY, heartbeat)
    _wrap(registry, ShareFetchRequest.API_KEY, acknowledging)
    _wrap(registry, ShareAcknowledgeRequest.API_KEY, acknowledging)
    _wrap(registry, ListGroupsRequest.API_KEY, list_groups)
    _wrap(registry, DeleteGroupsRequest.API_KEY, delete_groups)
