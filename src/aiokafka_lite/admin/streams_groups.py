"""Streams-group (KIP-1071) administration: the ``Admin`` methods and their typed results.

A streams group is the group of a Kafka Streams application running with
``group.protocol=streams``: the broker's group coordinator owns its topology and assigns
tasks (active, standby, warm-up) to its members. Kafka 4.2+ serves it when the cluster's
``streams.version`` feature is at least 1.

What Java's ``Admin`` does, and so what these do:

* ``describe_streams_groups``: StreamsGroupDescribe at each group's coordinator (batched
  per coordinator, retried when it moves). A group that does not exist, or is of another
  type, fails with ``GroupIdNotFoundError`` (the broker's answer, as Java reports it).
  A broker without the API (no ``streams.version``, or Kafka < 4.1) fails every group
  with ``UnsupportedVersionError``.
* ``list_streams_group_offsets``, ``alter_streams_group_offsets``,
  ``delete_streams_group_offsets``, ``delete_streams_groups``: a streams group commits
  its offsets as a consumer group does, so Java's ``KafkaAdminClient`` runs them as the
  consumer-group calls (OffsetFetch, OffsetCommit, OffsetDelete, DeleteGroups), and
  these delegate to the same operations here (``groups.py`` and
  ``replicas.delete_consumer_group_offsets``). Java's ``Admin`` checks neither the
  group's type nor that it is empty first: the coordinator does (an offset commit or a
  deletion of a group with members fails with ``NonEmptyGroupError`` /
  ``UnknownMemberIdError``); Kafka's ``kafka-streams-groups`` tool adds its own "is it
  empty" check before resetting or deleting offsets. Deleting a streams group leaves its
  internal (repartition and changelog) topics, as in Java (the tool deletes them itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from aiokafka_lite.admin import groups, replicas
from aiokafka_lite.admin._group_requests import authorized_operations, describe_at_coordinators, group_ids_of
from aiokafka_lite.admin.requests import AdminRequests, results
from aiokafka_lite.admin.types import GroupOffset, ListGroupsResult, Result, Results
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse

__all__ = [
    "StreamsGroupDescription",
    "StreamsGroupMemberAssignment",
    "StreamsGroupMemberDescription",
    "StreamsGroupSubtopology",
    "StreamsTaskIds",
    "alter_streams_group_offsets",
    "delete_streams_group_offsets",
    "delete_streams_groups",
    "describe_streams_groups",
    "list_streams_group_offsets",
    "list_streams_groups",
]

_R = StreamsGroupDescribeResponse


@dataclass(frozen=True, slots=True)
class StreamsTaskIds:
    """Tasks of one subtopology: a task is (subtopology, partition)."""

    subtopology_id: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberAssignment:
    """A member's tasks: the active ones it processes, the standby replicas of their
    state stores it keeps, and the warm-up tasks it is catching up on."""

    active_tasks: tuple[StreamsTaskIds, ...] = ()
    standby_tasks: tuple[StreamsTaskIds, ...] = ()
    warmup_tasks: tuple[StreamsTaskIds, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberDescription:
    member_id: str
    member_epoch: int
    #: The Kafka Streams instance (process) the member (a stream thread) belongs to.
    process_id: str
    client_id: str
    client_host: str
    topology_epoch: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    #: ``application.server`` of the instance ("host:port"), None when not set.
    user_endpoint: str | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    assignment: StreamsGroupMemberAssignment = field(default_factory=StreamsGroupMemberAssignment)
    target_assignment: StreamsGroupMemberAssignment = field(default_factory=StreamsGroupMemberAssignment)
    #: True for a member that joined with the classic protocol (Kafka reports it; always False today).
    is_classic: bool = False


@dataclass(frozen=True, slots=True)
class StreamsGroupSubtopology:
    """One subtopology of the group's topology, with the topics it reads and writes."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    #: Internal topics: name -> partition count (0: as the source topics).
    repartition_source_topics: dict[str, int] = field(default_factory=dict)
    state_changelog_topics: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamsGroupDescription:
    group_id: str
    #: "Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead" as Kafka reports them.
    state: str = ""
    group_epoch: int = -1
    target_assignment_epoch: int = -1
    topology_epoch: int = -1
    subtopologies: list[StreamsGroupSubtopology] = field(default_factory=list)
    members: list[StreamsGroupMemberDescription] = field(default_factory=list)
    coordinator: int = -1
    authorized_operations: int | None = None
    error: E.KafkaError | None = None


async def list_streams_groups(
    rq: AdminRequests, *, states: Iterable[str] | None = None, timeout_ms: float | None = None
) -> ListGroupsResult:
    """Streams groups of the cluster (ListGroups filtered by type ``streams``, as Java's
    ``ListGroupsOptions.forStreamsGroups()``), optionally only those in ``states``."""
    return await groups.list_groups(rq, states=states, types=["streams"], timeout_ms=timeout_ms)


async def describe_streams_groups(
    rq: AdminRequests,
    group_ids: Iterable[str],
    *,
    include_authorized_operations: bool = False,
    timeout_ms: float | None = None,
) -> Results[str, StreamsGroupDescription]:
    """State, epochs, topology and members (with their tasks) of streams groups. A group
    that does not exist, or is not a streams group, fails with ``GroupIdNotFoundError``."""
    items = group_ids_of(group_ids, "streams")

    def request(batch: list[str]) -> Request:
        return StreamsGroupDescribeRequest(
            group_ids=batch, include_authorized_operations=include_authorized_operations
        )

    outcomes = await describe_at_coordinators(
        rq, items, rq.deadline(timeout_ms), request, StreamsGroupDescribeResponse, _description
    )
    return results(items, outcomes, lambda g, e: StreamsGroupDescription(group_id=g, error=e))


async def list_streams_group_offsets(
    rq: AdminRequests,
    group_id: str,
    partitions: Iterable[TopicPartition] | None = None,
    *,
    require_stable: bool = False,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, GroupOffset]:
    """Committed offsets of a streams group (OffsetFetch, as for a consumer group): all
    its partitions when ``partitions`` is None. Group-level failures raise."""
    group_ids_of([group_id], "streams")
    return await groups.list_group_offsets(
        rq, group_id, partitions, require_stable=require_stable, timeout_ms=timeout_ms
    )


async def alter_streams_group_offsets(
    rq: AdminRequests,
    group_id: str,
    offsets: Mapping[TopicPartition, int | GroupOffset],
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, Result]:
    """Commit offsets for a streams group with no members (OffsetCommit); while the
    application runs, the coordinator refuses them per partition."""
    group_ids_of([group_id], "streams")
    return await groups.alter_group_offsets(rq, group_id, offsets, timeout_ms=timeout_ms)


async def delete_streams_group_offsets(
    rq: AdminRequests,
    group_id: str,
    partitions: Iterable[TopicPartition],
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, Result]:
    """Delete a streams group's committed offsets of ``partitions`` (OffsetDelete); a
    group-level error fails every partition."""
    group_ids_of([group_id], "streams")
    return await replicas.delete_consumer_group_offsets(rq, group_id, partitions, timeout_ms=timeout_ms)


async def delete_streams_groups(
    rq: AdminRequests, group_ids: Iterable[str], *, timeout_ms: float | None = None
) -> Results[str, Result]:
    """Delete empty streams groups with their offsets (DeleteGroups); a group with
    members fails with ``NonEmptyGroupError``. Internal topics stay."""
    return await groups.delete_groups(rq, group_ids_of(group_ids, "streams"), timeout_ms=timeout_ms)


# ---------------------------------------------------------------------------- parsing


def _tasks(tasks: Iterable[_R.TaskIds]) -> tuple[StreamsTaskIds, ...]:
    return tuple(
        sorted(
            (StreamsTaskIds(t.subtopology_id, tuple(sorted(t.partitions))) for t in tasks),
            key=lambda t: t.subtopology_id,
        )
    )


def _assignment(a: _R.Assignment) -> StreamsGroupMemberAssignment:
    return StreamsGroupMemberAssignment(
        active_tasks=_tasks(a.active_tasks),
        standby_tasks=_tasks(a.standby_tasks),
        warmup_tasks=_tasks(a.warmup_tasks),
    )


def _member(m: _R.Member) -> StreamsGroupMemberDescription:
    endpoint = None if m.user_endpoint is None else f"{m.user_endpoint.host}:{m.user_endpoint.port}"
    return StreamsGroupMemberDescription(
        member_id=m.member_id,
        member_epoch=m.member_epoch,
        process_id=m.process_id,
        client_id=m.client_id,
        client_host=m.client_host,
        topology_epoch=m.topology_epoch,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        user_endpoint=endpoint,
        client_tags={kv.key: kv.value for kv in m.client_tags},
        assignment=_assignment(m.assignment),
        target_assignment=_assignment(m.target_assignment),
        is_classic=m.is_classic,
    )


def _subtopology(s: _R.Subtopology) -> StreamsGroupSubtopology:
    return StreamsGroupSubtopology(
        subtopology_id=s.subtopology_id,
        source_topics=tuple(s.source_topics),
        repartition_sink_topics=tuple(s.repartition_sink_topics),
        repartition_source_topics={t.name: t.partitions for t in s.repartition_source_topics},
        state_changelog_topics={t.name: t.partitions for t in s.state_changelog_topics},
    )


def _description(g: _R.DescribedGroup, coordinator: int) -> StreamsGroupDescription:
    topology = g.topology
    return StreamsGroupDescription(
        group_id=g.group_id,
        state=g.group_state,
        group_epoch=g.group_epoch,
        target_assignment_epoch=g.assignment_epoch,
        topology_epoch=-1 if topology is None else topology.epoch,
        subtopologies=[]
        if topology is None or topology.subtopologies is None
        else sorted((_subtopology(s) for s in topology.subtopologies), key=lambda s: s.subtopology_id),
        members=sorted((_member(m) for m in g.members), key=lambda m: m.member_id),
        coordinator=coordinator,
        authorized_operations=authorized_operations(g.authorized_operations),
    )
