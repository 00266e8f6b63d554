"""Replica placement and cluster housekeeping operations of the admin client, as
Java's ``Admin``:

* ``alter_partition_reassignments`` / ``list_partition_reassignments``
  (AlterPartitionReassignments / ListPartitionReassignments, KIP-455): to the controller
  (any broker in KRaft, which forwards), as Java does with ``bootstrap.servers``;
* ``elect_leaders`` (ElectLeaders, KIP-460): preferred or unclean elections, to the
  controller; a partition that needs no election reports ``ElectionNotNeededError`` as
  its item's error, as Java's result does;
* ``describe_log_dirs`` (DescribeLogDirs, to each broker asked),
  ``alter_replica_log_dirs`` (AlterReplicaLogDirs, to the broker holding each replica)
  and ``describe_replica_log_dirs``, which Java derives from DescribeLogDirs (here too);
* ``unregister_broker`` (UnregisterBroker, KIP-500): the controller forgets a broker
  that was shut down for good;
* ``list_config_resources`` (ListConfigResources, KIP-1142, Kafka 4.1+; version 0 was
  ListClientMetricsResources, KIP-714, which lists client metrics subscriptions only);
* ``delete_consumer_group_offsets`` (OffsetDelete at the group's coordinator): a
  partition the group is still subscribed to fails with ``GroupSubscribedToTopicError``.

Errors as Java: a request-level error fails every item of that request (or is raised
where Java fails the whole future); partition errors are per item. Retriable errors are
retried until the call's deadline, ``NOT_CONTROLLER`` included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from aiokafka_lite.admin.requests import AdminRequests, Outcome, error_of, results
from aiokafka_lite.admin.types import ConfigResource, ConfigResourceType, Result, Results
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)

__all__ = [
    "BrokerLogDirs",
    "ElectionType",
    "LogDirDescription",
    "PartitionReassignment",
    "ReplicaInfo",
    "ReplicaLogDirInfo",
    "TopicPartitionReplica",
    "alter_partition_reassignments",
    "alter_replica_log_dirs",
    "delete_consumer_group_offsets",
    "describe_log_dirs",
    "describe_replica_log_dirs",
    "elect_leaders",
    "list_config_resources",
    "list_partition_reassignments",
    "unregister_broker",
]

_REQUEST_TIMEOUT_CAP_MS: Final = 2**31 - 1


class ElectionType(IntEnum):
    """Java's ``ElectionType``: the preferred replica, or any live replica when the ISR
    has none (unclean; the topic may lose committed records)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True, order=True)
class TopicPartitionReplica:
    """One replica of a partition: on broker ``broker_id`` (Java's ``TopicPartitionReplica``)."""

    topic: str
    partition: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """An in-flight reassignment: the replica set now (target and leaving replicas), the
    replicas being added (catching up) and those being removed once they have."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    error: E.KafkaError | None = None


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """A replica in a log dir: its size in bytes, how far it is behind the high watermark
    (``offset_lag``; the leader's own replica 0) and whether it is a future replica (being
    moved into this dir by ``alter_replica_log_dirs``)."""

    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """A broker's log directory (Java's ``LogDirDescription``): its replicas, and its
    total and usable bytes (None when the broker does not report them: before v4)."""

    path: str
    replicas: dict[TopicPartition, ReplicaInfo] = field(default_factory=dict)
    total_bytes: int | None = None
    usable_bytes: int | None = None
    error: E.KafkaError | None = None


@dataclass(frozen=True, slots=True)
class BrokerLogDirs:
    """The log dirs of one broker, by path (Java's ``Map<String, LogDirDescription>``
    of that broker), or the error that broker answered with."""

    dirs: dict[str, LogDirDescription] = field(default_factory=dict)
    error: E.KafkaError | None = None


@dataclass(frozen=True, slots=True)
class ReplicaLogDirInfo:
    """Where a replica lives (Java's ``ReplicaLogDirInfo``): its current dir and lag, and
    the dir it is being moved to (the future replica) with that copy's lag. None where
    there is none (a broker that does not hold the replica has no current dir)."""

    current_log_dir: str | None = None
    current_offset_lag: int | None = None
    future_log_dir: str | None = None
    future_offset_lag: int | None = None
    error: E.KafkaError | None = None


# ---------------------------------------------------------------------------- helpers


def _check_tp(tp: object) -> TopicPartition:
    if not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str) or not isinstance(tp[1], int):
        raise E.ConfigError(f"expected a TopicPartition(topic, partition), got {tp!r}")
    return TopicPartition(tp[0], tp[1])


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(set(tps)):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


async def _controller_request(
    rq: AdminRequests,
    make: Callable[[int], Request],
    deadline: float,
    top_error: Callable[[Response], E.KafkaError | None],
) -> Response:
    """One request to the controller (a broker forwards it), sent again while its
    request-level error is retriable (``NOT_CONTROLLER`` after a controller change...)."""
    retry = rq.retry_schedule(deadline)
    while True:
        resp = await rq.request(make, "controller", deadline)
        err = top_error(resp)
        if err is None or not err.retriable:
            return resp
        delay = retry.next_delay()
        if delay is None:
            return resp
        await _backend.sleep(delay)
        await rq.refresh((), deadline)


def _final(err: E.KafkaError) -> bool:
    """An item's error is its outcome, as Java reports these calls' partition and broker
    errors (REPLICA_NOT_AVAILABLE, say, is retriable for a producer but final here);
    a failed request is retried by ``AdminRequests.request`` itself."""
    return False


def _timeout_field(rq: AdminRequests, deadline: float) -> int:
    return int(min(rq.remaining_ms(deadline), _REQUEST_TIMEOUT_CAP_MS))


# ---------------------------------------------------------------------------- reassignments


async def alter_partition_reassignments(
    rq: AdminRequests,
    reassignments: Mapping[TopicPartition, Iterable[int] | None],
    *,
    allow_replication_factor_change: bool = True,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, Result]:
    """Start (a replica list, the new replica set in preference order) or cancel
    (``None``) the reassignment of each partition."""
    targets: dict[TopicPartition, list[int] | None] = {}
    for tp, replicas in reassignments.items():
        key = _check_tp(tp)
        if replicas is None:
            targets[key] = None
            continue
        ids = list(replicas)
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ids):
            raise E.ConfigError(f"replicas of {key} must be broker ids (ints), got {ids!r}")
        targets[key] = ids
    items = list(targets)
    if not items:
        return Results()
    deadline = rq.deadline(timeout_ms)

    async def attempt(batch: list[TopicPartition]) -> dict[TopicPartition, Outcome]:
        by_topic = _by_topic(batch)

        def make(version: int) -> Request:
            if 0 <= version < 1 and not allow_replication_factor_change:
                raise E.UnsupportedVersionError(
                    "allow_replication_factor_change=False needs AlterPartitionReassignments v1 (Kafka 4.1+)"
                )
            return AlterPartitionReassignmentsRequest(
                timeout_ms=_timeout_field(rq, deadline),
                allow_replication_factor_change=allow_replication_factor_change,
                topics=[
                    AlterPartitionReassignmentsRequest.ReassignableTopic(
                        name=topic,
                        partitions=[
                            AlterPartitionReassignmentsRequest.ReassignablePartition(
                                partition_index=p, replicas=targets[TopicPartition(topic, p)]
                            )
                            for p in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
            )

        def top(resp: Response) -> E.KafkaError | None:
            assert isinstance(resp, AlterPartitionReassignmentsResponse)
            return error_of(resp.error_code, resp.error_message)

        resp = await _controller_request(rq, make, deadline, top)
        assert isinstance(resp, AlterPartitionReassignmentsResponse)
        err = top(resp)
        if err is not None:
            return dict.fromkeys(batch, err)
        out: dict[TopicPartition, Outcome] = {}
        for t in resp.responses:
            for p in t.partitions:
                out[TopicPartition(t.name, p.partition_index)] = (
                    error_of(p.error_code, p.error_message) or Result()
                )
        return out

    outcomes = await rq.per_item(items, attempt, deadline, retry_if=_final)
    return results(items, outcomes, lambda tp, e: Result(e))


async def list_partition_reassignments(
    rq: AdminRequests,
    partitions: Iterable[TopicPartition] | None = None,
    *,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, PartitionReassignment]:
    """The reassignments in flight (of ``partitions``, or all); a partition without one is
    absent from the answer, as in Java. A request-level error is raised."""
    asked = None if partitions is None else _by_topic(_check_tp(tp) for tp in partitions)
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return ListPartitionReassignmentsRequest(
            timeout_ms=_timeout_field(rq, deadline),
            topics=None
            if asked is None
            else [
                ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
                    name=topic, partition_indexes=parts
                )
                for topic, parts in asked.items()
            ],
        )

    def top(resp: Response) -> E.KafkaError | None:
        assert isinstance(resp, ListPartitionReassignmentsResponse)
        return error_of(resp.error_code, resp.error_message)

    resp = await _controller_request(rq, make, deadline, top)
    assert isinstance(resp, ListPartitionReassignmentsResponse)
    err = top(resp)
    if err is not None:
        raise err
    return {
        TopicPartition(t.name, p.partition_index): PartitionReassignment(
            tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
        )
        for t in resp.topics
        for p in t.partitions
    }


# ---------------------------------------------------------------------------- leader election


async def elect_leaders(
    rq: AdminRequests,
    election_type: ElectionType | int,
    partitions: Iterable[TopicPartition] | None = None,
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, Result]:
    """Elect leaders of ``partitions`` (None: every partition; then, as in Kafka, the
    answer lists only partitions where an election ran or failed)."""
    try:
        etype = ElectionType(election_type)
    except ValueError:
        raise E.ConfigError(
            f"election_type must be ElectionType.PREFERRED or ElectionType.UNCLEAN, got {election_type!r}"
        ) from None
    asked = None if partitions is None else sorted({_check_tp(tp) for tp in partitions})
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        if 0 <= version < 1 and etype is not ElectionType.PREFERRED:
            raise E.UnsupportedVersionError("unclean leader election needs ElectLeaders v1 (Kafka 2.4+)")
        return ElectLeadersRequest(
            election_type=int(etype),
            topic_partitions=None
            if asked is None
            else [
                ElectLeadersRequest.TopicPartitions(topic=topic, partitions=parts)
                for topic, parts in _by_topic(asked).items()
            ],
            timeout_ms=_timeout_field(rq, deadline),
        )

    def top(resp: Response) -> E.KafkaError | None:
        assert isinstance(resp, ElectLeadersResponse)
        return error_of(resp.error_code)

    resp = await _controller_request(rq, make, deadline, top)
    assert isinstance(resp, ElectLeadersResponse)
    err = top(resp)
    if err is not None:
        if asked is None:
            raise err
        return results(asked, dict.fromkeys(asked, err), lambda tp, e: Result(e))
    out: Results[TopicPartition, Result] = Results()
    for t in resp.replica_election_results:
        for p in t.partition_result:
            out[TopicPartition(t.topic, p.partition_id)] = Result(error_of(p.error_code, p.error_message))
    if asked is not None:
        missing = [tp for tp in asked if tp not in out]
        for tp in missing:
            out[tp] = Result(E.UnknownServerError(f"no election result for {tp} in the response"))
    return out


# ---------------------------------------------------------------------------- log dirs


def _log_dirs_of(resp: DescribeLogDirsResponse, version: int) -> dict[str, LogDirDescription]:
    out: dict[str, LogDirDescription] = {}
    for d in resp.results:
        out[d.log_dir] = LogDirDescription(
            path=d.log_dir,
            replicas={
                TopicPartition(t.name, p.partition_index): ReplicaInfo(
                    p.partition_size, p.offset_lag, p.is_future_key
                )
                for t in d.topics
                for p in t.partitions
            },
            total_bytes=d.total_bytes if version >= 4 and d.total_bytes >= 0 else None,
            usable_bytes=d.usable_bytes if version >= 4 and d.usable_bytes >= 0 else None,
            error=error_of(d.error_code),
        )
    return out


async def _describe_dirs(
    rq: AdminRequests,
    broker: int,
    topics: Mapping[str, list[int]] | None,
    deadline: float,
) -> dict[str, LogDirDescription]:
    used = -1

    def make(version: int) -> Request:
        nonlocal used
        used = version
        return DescribeLogDirsRequest(
            topics=None
            if topics is None
            else [
                DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=ps)
                for t, ps in topics.items()
            ]
        )

    resp = await rq.request(make, broker, deadline)
    assert isinstance(resp, DescribeLogDirsResponse)
    err = error_of(resp.error_code) if used >= 3 else None
    if err is not None:
        raise err
    return _log_dirs_of(resp, used)


def _check_broker_id(broker_id: object) -> int:
    if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id < 0:
        raise E.ConfigError(f"a broker id is an int >= 0, got {broker_id!r}")
    return broker_id


async def _known_brokers(rq: AdminRequests, brokers: list[int], deadline: float) -> None:
    if any(b not in rq.client.cluster.brokers for b in brokers):
        await rq.refresh((), deadline)


async def describe_log_dirs(
    rq: AdminRequests, broker_ids: Iterable[int], *, timeout_ms: float | None = None
) -> Results[int, BrokerLogDirs]:
    """Every log dir of each broker asked, with its replicas."""
    brokers = list(dict.fromkeys(_check_broker_id(b) for b in broker_ids))
    deadline = rq.deadline(timeout_ms)
    await _known_brokers(rq, brokers, deadline)

    async def attempt(batch: list[int]) -> dict[int, Outcome]:
        async def one(b: int) -> Outcome:
            if b not in rq.client.cluster.brokers:
                return E.BrokerNotAvailableError(f"broker {b} is not in the cluster's metadata")
            try:
                return BrokerLogDirs(await _describe_dirs(rq, b, None, deadline))
            except E.KafkaError as exc:
                return exc

        got = await _backend.gather(*(one(b) for b in batch))
        return dict(zip(batch, got, strict=True))

    outcomes = await rq.per_item(brokers, attempt, deadline, retry_if=_final)

    return results(brokers, outcomes, lambda b, e: BrokerLogDirs(error=e))


def _check_replica(r: object) -> TopicPartitionReplica:
    if not isinstance(r, TopicPartitionReplica):
        raise E.ConfigError(f"expected a TopicPartitionReplica(topic, partition, broker_id), got {r!r}")
    _check_broker_id(r.broker_id)
    return r


async def alter_replica_log_dirs(
    rq: AdminRequests,
    assignments: Mapping[TopicPartitionReplica, str],
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartitionReplica, Result]:
    """Move each replica to a log dir of its broker (an absolute path the broker has)."""
    targets = {_check_replica(r): path for r, path in assignments.items()}
    for r, path in targets.items():
        if not isinstance(path, str) or not path:
            raise E.ConfigError(f"the log dir of {r} must be a path, got {path!r}")
    items = list(targets)
    if not items:
        return Results()
    deadline = rq.deadline(timeout_ms)
    await _known_brokers(rq, [r.broker_id for r in items], deadline)

    async def send(broker: int, batch: list[TopicPartitionReplica]) -> dict[TopicPartitionReplica, Outcome]:
        if broker not in rq.client.cluster.brokers:
            raise E.BrokerNotAvailableError(f"broker {broker} is not in the cluster's metadata")
        by_dir: dict[str, dict[str, list[int]]] = {}
        for r in sorted(batch):
            by_dir.setdefault(targets[r], {}).setdefault(r.topic, []).append(r.partition)

        def make(version: int) -> Request:
            return AlterReplicaLogDirsRequest(
                dirs=[
                    AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                        path=path,
                        topics=[
                            AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=t, partitions=ps)
                            for t, ps in topics.items()
                        ],
                    )
                    for path, topics in by_dir.items()
                ]
            )

        resp = await rq.request(make, broker, deadline)
        assert isinstance(resp, AlterReplicaLogDirsResponse)
        out: dict[TopicPartitionReplica, Outcome] = {}
        for t in resp.results:
            for p in t.partitions:
                out[TopicPartitionReplica(t.topic_name, p.partition_index, broker)] = (
                    error_of(p.error_code) or Result()
                )
        return out

    async def attempt(batch: list[TopicPartitionReplica]) -> dict[TopicPartitionReplica, Outcome]:
        return await rq.split(batch, lambda r: r.broker_id, send)

    outcomes = await rq.per_item(items, attempt, deadline, retry_if=_final)
    return results(items, outcomes, lambda r, e: Result(e))


async def describe_replica_log_dirs(
    rq: AdminRequests,
    replicas: Iterable[TopicPartitionReplica],
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartitionReplica, ReplicaLogDirInfo]:
    """Where each replica lives: DescribeLogDirs of the replicas' partitions at each
    broker, read as Java's ``describeReplicaLogDirs`` reads it."""
    items = list(dict.fromkeys(_check_replica(r) for r in replicas))
    if not items:
        return Results()
    deadline = rq.deadline(timeout_ms)
    await _known_brokers(rq, [r.broker_id for r in items], deadline)

    async def send(broker: int, batch: list[TopicPartitionReplica]) -> dict[TopicPartitionReplica, Outcome]:
        if broker not in rq.client.cluster.brokers:
            raise E.BrokerNotAvailableError(f"broker {broker} is not in the cluster's metadata")
        dirs = await _describe_dirs(
            rq, broker, _by_topic(TopicPartition(r.topic, r.partition) for r in batch), deadline
        )
        out: dict[TopicPartitionReplica, Outcome] = {}
        for r in batch:
            tp = TopicPartition(r.topic, r.partition)
            current: tuple[str, int] | None = None
            future: tuple[str, int] | None = None
            for path, d in dirs.items():
                info = d.replicas.get(tp)
                if info is None:
                    continue
                if info.is_future:
                    future = (path, info.offset_lag)
                else:
                    current = (path, info.offset_lag)
            out[r] = ReplicaLogDirInfo(
                current_log_dir=current[0] if current else None,
                current_offset_lag=current[1] if current else None,
                future_log_dir=future[0] if future else None,
                future_offset_lag=future[1] if future else None,
            )
        return out

    async def attempt(batch: list[TopicPartitionReplica]) -> dict[TopicPartitionReplica, Outcome]:
        return await rq.split(batch, lambda r: r.broker_id, send)

    outcomes = await rq.per_item(items, attempt, deadline, retry_if=_final)
    return results(items, outcomes, lambda r, e: ReplicaLogDirInfo(error=e))


# ---------------------------------------------------------------------------- brokers, resources


async def unregister_broker(rq: AdminRequests, broker_id: int, *, timeout_ms: float | None = None) -> None:
    """Remove a broker's registration (Java's ``unregisterBroker``): for a broker shut down
    for good. ``BrokerIdNotRegisteredError`` for an id with no registration."""
    _check_broker_id(broker_id)
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return UnregisterBrokerRequest(broker_id=broker_id)

    def top(resp: Response) -> E.KafkaError | None:
        assert isinstance(resp, UnregisterBrokerResponse)
        return error_of(resp.error_code, resp.error_message)

    try:
        resp = await _controller_request(rq, make, deadline, top)
    except E.UnsupportedVersionError as exc:
        raise E.UnsupportedVersionError(f"{exc}; unregistering a broker needs a KRaft cluster") from exc
    err = top(resp)
    if err is not None:
        raise err


async def list_config_resources(
    rq: AdminRequests,
    types: Iterable[ConfigResourceType | int] | None = None,
    *,
    timeout_ms: float | None = None,
) -> list[ConfigResource]:
    """The resources that have configs, of ``types`` (None or empty: every type the broker
    lists). A broker before Kafka 4.1 speaks only version 0 (ListClientMetricsResources):
    it lists client metrics subscriptions, so other types raise ``UnsupportedVersionError``
    there, as in Java."""
    wanted = sorted({ConfigResourceType(t) for t in types or ()})
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        if 0 <= version < 1 and any(t is not ConfigResourceType.CLIENT_METRICS for t in wanted):
            raise E.UnsupportedVersionError(
                "listing config resources other than client metrics needs ListConfigResources v1 (Kafka 4.1+)"
            )
        return ListConfigResourcesRequest(resource_types=[int(t) for t in wanted])

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, ListConfigResourcesResponse)
    err = error_of(resp.error_code)
    if err is not None:
        raise err
    out = []
    for r in resp.config_resources:
        rtype = r.resource_type if r.resource_type >= 0 else ConfigResourceType.CLIENT_METRICS
        try:
            kind = ConfigResourceType(rtype)
        except ValueError:
            kind = ConfigResourceType.UNKNOWN
        out.append(ConfigResource(kind, r.resource_name))
    return out


# ---------------------------------------------------------------------------- group offsets


async def delete_consumer_group_offsets(
    rq: AdminRequests,
    group_id: str,
    partitions: Iterable[TopicPartition],
    *,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, Result]:
    """Delete a consumer group's committed offsets of ``partitions`` (OffsetDelete). A
    group-level error (unknown group, not empty for its topics...) fails every partition."""
    if not isinstance(group_id, str) or not group_id:
        raise E.ConfigError("delete_consumer_group_offsets needs a group id")
    items = list(dict.fromkeys(_check_tp(tp) for tp in partitions))
    if not items:
        return Results()
    deadline = rq.deadline(timeout_ms)
    by_topic = _by_topic(items)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        def make(version: int) -> Request:
            return OffsetDeleteRequest(
                group_id=group_id,
                topics=[
                    OffsetDeleteRequest.OffsetDeleteRequestTopic(
                        name=t,
                        partitions=[
                            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                        ],
                    )
                    for t, ps in by_topic.items()
                ],
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, OffsetDeleteResponse)
        err = error_of(resp.error_code)
        if err is not None:
            return {group_id: err}
        res: Results[TopicPartition, Result] = Results()
        for t in resp.topics:
            for p in t.partitions:
                res[TopicPartition(t.name, p.partition_index)] = Result(error_of(p.error_code))
        return {group_id: res}

    outcome = (await rq.by_coordinator([group_id], send, deadline))[group_id]
    if isinstance(outcome, E.KafkaError):
        return results(items, dict.fromkeys(items, outcome), lambda tp, e: Result(e))
    assert isinstance(outcome, Results)
    out: Results[TopicPartition, Result] = Results()
    for tp in items:
        out[tp] = outcome.get(tp) or Result(E.UnknownServerError(f"no result for {tp} in the response"))
    return out
