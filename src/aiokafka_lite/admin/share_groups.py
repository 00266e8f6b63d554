"""Share-group (KIP-932) administration: the ``Admin`` methods and their typed results.

Operations over ``AdminRequests`` (``Admin`` has them as methods). Every request goes
to the group's coordinator (found with FindCoordinator, retried when it moves), as
Kafka's Java admin does. Group configs (``share.auto.offset.reset``, ``share.record.lock.duration.ms``,
``share.isolation.level``, ``share.delivery.count.limit``...) are read and changed with
``describe_configs``/``incremental_alter_configs`` on ``ConfigResource.group(group_id)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from aiokafka_lite.admin import groups
from aiokafka_lite.admin._group_requests import (
    assigned_partitions,
    authorized_operations,
    describe_at_coordinators,
    group_ids_of,
)
from aiokafka_lite.admin.requests import AdminRequests, Outcome, error_of, results
from aiokafka_lite.admin.types import ListGroupsResult, Result, Results
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

__all__ = [
    "ShareGroupDescription",
    "ShareGroupOffset",
    "ShareMemberDescription",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "delete_share_groups",
    "describe_share_groups",
    "list_share_group_offsets",
    "list_share_groups",
]


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None = None
    subscribed_topics: tuple[str, ...] = ()
    #: The partitions the member may consume (every member of a share group may share them).
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    #: "Empty", "Stable" (or "Dead"/"Unknown" as Kafka reports them).
    state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: list[ShareMemberDescription] = field(default_factory=list)
    coordinator: int = -1
    authorized_operations: int | None = None
    error: E.KafkaError | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """Where a share group stands on a partition.

    ``start_offset`` is the share-partition start offset: records before it are done
    (acknowledged or archived); -1 when the group has not initialized the partition (the
    next consumer starts at ``share.auto.offset.reset``). ``lag`` counts the records at or
    after it not yet done; None when the broker does not report it (Kafka 4.0's v0, or -1).
    """

    start_offset: int
    leader_epoch: int = -1
    lag: int | None = None
    error: E.KafkaError | None = None


async def list_share_groups(
    rq: AdminRequests, *, states: Iterable[str] | None = None, timeout_ms: float | None = None
) -> ListGroupsResult:
    """Share groups of the cluster (ListGroups filtered by type ``share``), optionally
    only those in ``states`` ("Empty", "Stable")."""
    return await groups.list_groups(rq, states=states, types=["share"], timeout_ms=timeout_ms)


async def describe_share_groups(
    rq: AdminRequests,
    group_ids: Iterable[str],
    *,
    include_authorized_operations: bool = False,
    timeout_ms: float | None = None,
) -> Results[str, ShareGroupDescription]:
    """Members, assignments, epochs and state of share groups. A group that does not
    exist, or is not a share group, fails with ``GroupIdNotFoundError``."""
    items = group_ids_of(group_ids, "share")

    def request(batch: list[str]) -> Request:
        return ShareGroupDescribeRequest(
            group_ids=batch, include_authorized_operations=include_authorized_operations
        )

    outcomes = await describe_at_coordinators(
        rq, items, rq.deadline(timeout_ms), request, ShareGroupDescribeResponse, _description
    )
    return results(items, outcomes, lambda g, e: ShareGroupDescription(group_id=g, error=e))


async def delete_share_groups(
    rq: AdminRequests, group_ids: Iterable[str], *, timeout_ms: float | None = None
) -> Results[str, Result]:
    """Deletes empty share groups with their share-partition state (DeleteGroups); a
    group with members fails with ``NonEmptyGroupError``. Group configs stay, as in Kafka."""
    return await groups.delete_groups(rq, group_ids, timeout_ms=timeout_ms)


async def list_share_group_offsets(
    rq: AdminRequests,
    group_id: str,
    partitions: Iterable[TopicPartition] | None = None,
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, ShareGroupOffset]:
    """Start offset (and lag) of each share-partition of a group: all those it has
    initialized when ``partitions`` is None. An unknown group has none. Group-level
    failures raise."""
    deadline = rq.deadline(timeout_ms)
    by_topic: dict[str, list[int]] | None = None
    if partitions is not None:
        by_topic = {}
        for tp in sorted(set(partitions)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        def make(version: int) -> Request:
            R = DescribeShareGroupOffsetsRequest
            return R(
                groups=[
                    R.DescribeShareGroupOffsetsRequestGroup(
                        group_id=group_id,
                        topics=None
                        if by_topic is None
                        else [
                            R.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                            for t, ps in by_topic.items()
                        ],
                    )
                ]
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, DescribeShareGroupOffsetsResponse)
        group = next((g for g in resp.groups if g.group_id == group_id), None)
        if group is None:
            return {group_id: E.UnknownServerError(f"no entry for group {group_id!r} in the response")}
        err = error_of(group.error_code, group.error_message)
        if err is not None:
            return {group_id: err}
        # v0 has no lag: it decodes as the default -1, which means "unknown" as well.
        out: Results[TopicPartition, ShareGroupOffset] = Results()
        for t in group.topics:
            for p in t.partitions:
                out[TopicPartition(t.topic_name, p.partition_index)] = ShareGroupOffset(
                    start_offset=p.start_offset,
                    leader_epoch=p.leader_epoch,
                    lag=None if p.lag == -1 or p.start_offset == -1 else p.lag,
                    error=error_of(p.error_code, p.error_message),
                )
        return {group_id: out}

    outcome = (await rq.by_coordinator(group_ids_of([group_id], "share"), send, deadline))[group_id]
    if isinstance(outcome, E.KafkaError):
        raise outcome
    assert isinstance(outcome, Results)
    return outcome


async def alter_share_group_offsets(
    rq: AdminRequests,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, Result]:
    """Sets the start offset of share-partitions (records before it count as done; -1
    resets to ``share.auto.offset.reset``). Kafka allows it only while the group has no
    members: otherwise every partition fails with ``NonEmptyGroupError``. Creates the
    group when it does not exist yet."""
    norm = {tp: int(o) for tp, o in offsets.items()}
    deadline = rq.deadline(timeout_ms)
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for tp, o in sorted(norm.items()):
        by_topic.setdefault(tp.topic, []).append((tp.partition, o))

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        R = AlterShareGroupOffsetsRequest

        def make(version: int) -> Request:
            return R(
                group_id=group_id,
                topics=[
                    R.AlterShareGroupOffsetsRequestTopic(
                        topic_name=t,
                        partitions=[
                            R.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                            for p, o in parts
                        ],
                    )
                    for t, parts in by_topic.items()
                ],
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, AlterShareGroupOffsetsResponse)
        err = error_of(resp.error_code, resp.error_message)
        if err is not None:
            return {group_id: err}
        res: Results[TopicPartition, Result] = Results()
        for t in resp.responses:
            for p in t.partitions:
                res[TopicPartition(t.topic_name, p.partition_index)] = Result(
                    error_of(p.error_code, p.error_message)
                )
        return {group_id: res}

    outcome = (await rq.by_coordinator(group_ids_of([group_id], "share"), send, deadline))[group_id]
    if isinstance(outcome, E.KafkaError):
        return results(norm, dict.fromkeys(norm, outcome), lambda tp, e: Result(e))
    assert isinstance(outcome, Results)
    return results(
        norm,
        {tp: outcome.get(tp, E.UnknownServerError(f"no result for {tp}")) for tp in norm},
        lambda tp, e: Result(e),
    )


async def delete_share_group_offsets(
    rq: AdminRequests, group_id: str, topics: Iterable[str], *, timeout_ms: float | None = None
) -> Results[str, Result]:
    """Forgets a share group's state for whole topics (the next consumer starts at
    ``share.auto.offset.reset``). Only while the group has no members; an unknown
    group fails with ``GroupIdNotFoundError``, an unknown topic per item."""
    names = list(dict.fromkeys(topics))
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        R = DeleteShareGroupOffsetsRequest

        def make(version: int) -> Request:
            return R(
                group_id=group_id,
                topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in names],
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, DeleteShareGroupOffsetsResponse)
        err = error_of(resp.error_code, resp.error_message)
        if err is not None:
            return {group_id: err}
        res: Results[str, Result] = Results()
        for t in resp.responses:
            res[t.topic_name] = Result(error_of(t.error_code, t.error_message))
        return {group_id: res}

    outcome = (await rq.by_coordinator(group_ids_of([group_id], "share"), send, deadline))[group_id]
    if isinstance(outcome, E.KafkaError):
        return results(names, dict.fromkeys(names, outcome), lambda t, e: Result(e))
    assert isinstance(outcome, Results)
    return results(
        names,
        {t: outcome.get(t, E.UnknownServerError(f"no result for topic {t}")) for t in names},
        lambda t, e: Result(e),
    )


def _description(g: ShareGroupDescribeResponse.DescribedGroup, node: int) -> ShareGroupDescription:
    return ShareGroupDescription(
        group_id=g.group_id,
        state=g.group_state,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor=g.assignor_name,
        members=[
            ShareMemberDescription(
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                rack_id=m.rack_id,
                subscribed_topics=tuple(m.subscribed_topic_names),
                assignment=assigned_partitions(m.assignment),
            )
            for m in g.members
        ],
        coordinator=node,
        authorized_operations=authorized_operations(g.authorized_operations),
    )
