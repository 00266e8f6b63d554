"""Group operations of the admin client that every group type shares: list, describe
(classic DescribeGroups) and delete groups, list and alter a group's committed offsets.
ListGroups goes to every broker; the others to each group's coordinator."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aiokafka_lite.admin.requests import AdminRequests, Outcome, error_of, results
from aiokafka_lite.admin.types import (
    GroupDescription,
    GroupListing,
    GroupOffset,
    ListGroupsResult,
    MemberDescription,
    Result,
    Results,
)
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.client import Client
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    ConsumerProtocolAssignment,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["alter_group_offsets", "delete_groups", "describe_groups", "list_group_offsets", "list_groups"]


async def list_groups(
    rq: AdminRequests,
    *,
    states: Iterable[str] | None = None,
    types: Iterable[str] | None = None,
    timeout_ms: float | None = None,
) -> ListGroupsResult:
    """Groups known to every broker (each is the coordinator of some); filters are
    applied by the broker when it supports them, else here."""
    deadline = rq.deadline(timeout_ms)
    states_f = sorted(set(states)) if states else []
    types_f = sorted(set(types)) if types else []
    await rq.refresh((), deadline)
    nodes = sorted(rq.client.cluster.brokers)

    async def attempt(batch: list[int]) -> dict[int, Outcome]:
        async def one(node: int) -> list[GroupListing] | E.KafkaError:
            def make(version: int) -> Request:
                return ListGroupsRequest(
                    states_filter=states_f if version >= 4 else [],
                    types_filter=types_f if version >= 5 else [],
                )

            try:
                resp = await rq.request(make, node, deadline)
            except E.KafkaError as exc:
                return exc
            assert isinstance(resp, ListGroupsResponse)
            if resp.error_code:
                return E.error_for(resp.error_code, f"ListGroups on broker {node}")
            return [
                GroupListing(g.group_id, g.protocol_type, g.group_state, g.group_type, node)
                for g in resp.groups
            ]

        replies = await _backend.gather(*(one(n) for n in batch))
        return {
            n: r if isinstance(r, E.KafkaError) else _Listing(r) for n, r in zip(batch, replies, strict=True)
        }

    outcomes = await rq.per_item(nodes, attempt, deadline)
    groups: list[GroupListing] = []
    errors: dict[int, E.KafkaError] = {}
    for node, o in outcomes.items():
        if isinstance(o, E.KafkaError):
            errors[node] = o
        else:
            groups.extend(
                g
                for g in o.groups
                if (not states_f or g.state in states_f or not g.state)
                and (not types_f or g.type in types_f or not g.type)
            )
    return ListGroupsResult(sorted(groups, key=lambda g: g.group_id), errors)


async def describe_groups(
    rq: AdminRequests,
    group_ids: Iterable[str],
    *,
    include_authorized_operations: bool = False,
    timeout_ms: float | None = None,
) -> Results[str, GroupDescription]:
    items = list(dict.fromkeys(group_ids))
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        def make(version: int) -> Request:
            return DescribeGroupsRequest(
                groups=batch, include_authorized_operations=include_authorized_operations and version >= 3
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, DescribeGroupsResponse)
        out: dict[str, Outcome] = {}
        for g in resp.groups:
            err = error_of(g.error_code, g.error_message)
            if err is not None:
                out[g.group_id] = err
                continue
            out[g.group_id] = GroupDescription(
                group_id=g.group_id,
                state=g.group_state,
                protocol_type=g.protocol_type,
                protocol=g.protocol_data,
                members=[_member(m, g.protocol_type) for m in g.members],
                coordinator=node,
                authorized_operations=None
                if g.authorized_operations == -(2**31)
                else g.authorized_operations,
            )
        return out

    outcomes = await rq.by_coordinator(items, send, deadline)
    return results(items, outcomes, lambda g, e: GroupDescription(group_id=g, error=e))


async def delete_groups(
    rq: AdminRequests, group_ids: Iterable[str], *, timeout_ms: float | None = None
) -> Results[str, Result]:
    """Delete empty groups (and their committed offsets); busy groups fail per item."""
    items = list(dict.fromkeys(group_ids))
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        resp = await rq.request(lambda v: DeleteGroupsRequest(groups_names=batch), node, deadline)
        assert isinstance(resp, DeleteGroupsResponse)
        return {r.group_id: error_of(r.error_code) or Result() for r in resp.results}

    outcomes = await rq.by_coordinator(items, send, deadline)
    return results(items, outcomes, lambda g, e: Result(e))


async def list_group_offsets(
    rq: AdminRequests,
    group_id: str,
    partitions: Iterable[TopicPartition] | None = None,
    *,
    require_stable: bool = False,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, GroupOffset]:
    """Committed offsets of a group (all its partitions when ``partitions`` is None).

    Group-level failures (authorization, unknown coordinator after retries) raise.
    """
    deadline = rq.deadline(timeout_ms)
    wanted = None if partitions is None else sorted(set(partitions))
    if (
        wanted is not None
        and wanted
        and await rq.negotiated_at_least(OffsetFetchRequest.API_KEY, 10, deadline)
    ):
        await rq.refresh({tp.topic for tp in wanted}, deadline)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        def make(version: int) -> Request:
            return _offset_fetch_request(group_id, wanted, require_stable, version, rq.client)

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, OffsetFetchResponse)
        try:
            return {group_id: await _parse_offset_fetch(rq, resp, group_id, deadline)}
        except E.KafkaError as exc:
            return {group_id: exc}

    outcomes = await rq.by_coordinator([group_id], send, deadline)
    outcome = outcomes[group_id]
    if isinstance(outcome, E.KafkaError):
        raise outcome
    assert isinstance(outcome, Results)
    return outcome


async def _parse_offset_fetch(
    rq: AdminRequests, resp: OffsetFetchResponse, group_id: str, deadline: float
) -> Results[TopicPartition, GroupOffset]:
    out: Results[TopicPartition, GroupOffset] = Results()
    if resp.groups:
        group = next((g for g in resp.groups if g.group_id == group_id), None)
        if group is None:
            raise E.UnknownServerError(f"OffsetFetch response has no entry for group {group_id!r}")
        if group.error_code:
            raise E.error_for(group.error_code, f"group {group_id!r}")
        names = await rq.topic_names((t.topic_id for t in group.topics if not t.name), deadline)
        for t in group.topics:
            name = t.name or names.get(t.topic_id, str(t.topic_id))
            for p in t.partitions:
                out[TopicPartition(name, p.partition_index)] = GroupOffset(
                    p.committed_offset, p.committed_leader_epoch, p.metadata, error_of(p.error_code)
                )
        return out
    if resp.error_code:
        raise E.error_for(resp.error_code, f"group {group_id!r}")
    for old in resp.topics:
        for q in old.partitions:
            out[TopicPartition(old.name, q.partition_index)] = GroupOffset(
                q.committed_offset, q.committed_leader_epoch, q.metadata, error_of(q.error_code)
            )
    return out


async def alter_group_offsets(
    rq: AdminRequests,
    group_id: str,
    offsets: Mapping[TopicPartition, int | GroupOffset],
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, Result]:
    """Commit offsets for a group that has no active members (e.g. to rewind it)."""
    deadline = rq.deadline(timeout_ms)
    norm = {tp: o if isinstance(o, GroupOffset) else GroupOffset(int(o)) for tp, o in offsets.items()}
    if await rq.negotiated_at_least(OffsetCommitRequest.API_KEY, 10, deadline):
        await rq.refresh({tp.topic for tp in norm}, deadline)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        cluster = rq.client.cluster
        by_topic: dict[str, list[tuple[int, GroupOffset]]] = {}
        for tp, o in sorted(norm.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, o))

        def make(version: int) -> Request:
            return OffsetCommitRequest(
                group_id=group_id,
                topics=[
                    OffsetCommitRequest.OffsetCommitRequestTopic(
                        name=topic,
                        topic_id=(cluster.topic_id(topic) or ZERO_UUID) if version >= 10 else ZERO_UUID,
                        partitions=[
                            OffsetCommitRequest.OffsetCommitRequestPartition(
                                partition_index=p,
                                committed_offset=o.offset,
                                committed_leader_epoch=o.leader_epoch,
                                committed_metadata=o.metadata,
                            )
                            for p, o in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, OffsetCommitResponse)
        names = await rq.topic_names((t.topic_id for t in resp.topics if not t.name), deadline)
        res: Results[TopicPartition, Result] = Results()
        group_error: E.KafkaError | None = None
        for t in resp.topics:
            name = t.name or names.get(t.topic_id, str(t.topic_id))
            for p in t.partitions:
                err = error_of(p.error_code)
                if err is not None and getattr(err, "coordinator_error", False):
                    group_error = err
                res[TopicPartition(name, p.partition_index)] = Result(err)
        if group_error is not None:
            return {group_id: group_error}
        return {group_id: res}

    outcomes = await rq.by_coordinator([group_id], send, deadline)
    outcome = outcomes[group_id]
    if isinstance(outcome, E.KafkaError):
        return results(norm, dict.fromkeys(norm, outcome), lambda tp, e: Result(e))
    assert isinstance(outcome, Results)
    return outcome


class _Listing:
    """Wrapper so a broker's group list can travel through ``AdminRequests.per_item`` as one outcome."""

    __slots__ = ("groups",)

    def __init__(self, groups: list[GroupListing]) -> None:
        self.groups = groups


def _member(m: DescribeGroupsResponse.DescribedGroupMember, protocol_type: str) -> MemberDescription:
    assignment: tuple[TopicPartition, ...] = ()
    raw = bytes(m.member_assignment)
    if protocol_type == "consumer" and len(raw) >= 2:
        version = int.from_bytes(raw[:2], "big", signed=True)
        try:
            decoded = ConsumerProtocolAssignment.decode(
                raw[2:], min(max(version, 0), ConsumerProtocolAssignment.MAX_VERSION), strict=False
            )
            assignment = tuple(
                TopicPartition(tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions
            )
        except E.KafkaError:
            assignment = ()
    return MemberDescription(
        member_id=m.member_id,
        group_instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        assignment=assignment,
        metadata=bytes(m.member_metadata),
        raw_assignment=raw,
    )


def _offset_fetch_request(
    group_id: str, wanted: list[TopicPartition] | None, require_stable: bool, version: int, client: Client
) -> OffsetFetchRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in wanted or []:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    stable = require_stable and version >= 7
    if version >= 8:
        cluster = client.cluster
        topics = (
            None
            if wanted is None
            else [
                OffsetFetchRequest.OffsetFetchRequestTopics(
                    name=t,
                    topic_id=(cluster.topic_id(t) or ZERO_UUID) if version >= 10 else ZERO_UUID,
                    partition_indexes=ps,
                )
                for t, ps in by_topic.items()
            ]
        )
        return OffsetFetchRequest(
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=topics)],
            require_stable=stable,
        )
    old_topics = (
        None
        if wanted is None
        else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in by_topic.items()
        ]
    )
    return OffsetFetchRequest(group_id=group_id, topics=old_topics, require_stable=stable)
