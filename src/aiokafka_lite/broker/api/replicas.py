"""Replica placement and housekeeping APIs of the embedded broker: AlterPartitionReassignments,
ListPartitionReassignments, ElectLeaders, DescribeLogDirs, AlterReplicaLogDirs,
UnregisterBroker and ListConfigResources, answered as Kafka 4.4's KRaft controller and
brokers answer them (their error codes and messages).

What the embedded cluster is, and what follows from it:

* **one copy of the data**: every partition log exists once, shared by the brokers;
  replicas and ISR are metadata (broker/state.py). A replica on a live broker is therefore
  always caught up: its offset lag is 0.
* **reassignments** (``reassignments.py`` next to this module keeps them): the target
  replicas are added, and once every adding replica is caught up the leaving replicas are
  dropped, as Kafka does. A live broker catches up at once, so a reassignment onto live
  brokers completes within the request and ``ListPartitionReassignments`` reports none;
  one onto a stopped broker stays in flight (replicas = target + leaving, adding and
  removing listed, the ISR without the adding replica) until that broker starts again.
  If the leader leaves the replica set, the first target replica in the ISR takes over
  with a new leader epoch. Cancelling restores the original replicas.
* **elections**: preferred puts the first replica in the lead if it is alive and in the
  ISR (``ELECTION_NOT_NEEDED`` if it already leads, ``PREFERRED_LEADER_NOT_AVAILABLE``
  otherwise); unclean elects only a partition without a leader. The embedded cluster
  moves leadership off a stopped broker at once (to a live broker, a replica if one is
  alive), so an unclean election always finds a leader: ``ELECTION_NOT_NEEDED``. With no
  partitions named, every partition is elected; the answer lists every topic, each with
  only the partitions that needed an election, as Kafka's controller does.
* **log dirs**: each broker has one log dir. Its path is ``<data_dir>/broker-<id>`` for a
  cluster with a ``data_dir`` (total and usable bytes are that file system's) and the
  virtual ``/embedded/broker-<id>`` for an in-memory one (bytes unknown: -1, which Java
  reads as absent). A dir lists the replicas the broker holds, with the partition log's
  size. AlterReplicaLogDirs to the broker's own dir is accepted (nothing moves); any
  other path is ``LOG_DIR_NOT_FOUND``, a partition the broker does not hold
  ``REPLICA_NOT_AVAILABLE`` and an unknown topic ``UNKNOWN_TOPIC_OR_PARTITION``, as Kafka.
* **UnregisterBroker** (a deviation): Kafka removes the registration, and the broker
  leaves the metadata (a running Kafka broker too: it is not listed until it registers
  again). The embedded cluster's brokers are fixed when it is built, so the request
  checks the id as Kafka does (``BROKER_ID_NOT_REGISTERED`` for an id the cluster never
  had) and changes nothing else: the broker stays listed.
* **ListConfigResources** lists topics, brokers (as BROKER and BROKER_LOGGER), groups
  (those the coordinators know and those with configs) and client metrics subscriptions;
  an unknown resource type is ``UNSUPPORTED_VERSION``, as in Kafka. Version 0
  (ListClientMetricsResources) lists client metrics subscriptions only.
"""

from __future__ import annotations

import shutil
from typing import Final

from aiokafka_lite.broker.api.reassignments import Reassignments, reassignments_of
from aiokafka_lite.broker.api.telemetry import subscription_names
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.state import ClusterState, Partition
from aiokafka_lite.core.errors import (
    BrokerIdNotRegisteredError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    LogDirNotFoundError,
    NoReassignmentInProgressError,
    PreferredLeaderNotAvailableError,
    ReplicaNotAvailableError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
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
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)

__all__ = ["log_dir_of", "register"]

_PREFERRED, _UNCLEAN = 0, 1
_TOPIC, _BROKER, _BROKER_LOGGER, _CLIENT_METRICS, _GROUP = 2, 4, 8, 16, 32
_LISTED_TYPES: Final = (_BROKER_LOGGER, _BROKER, _TOPIC, _CLIENT_METRICS, _GROUP)
# Kafka's default messages of these errors (what its controller puts in error_message).
_ELECTION_NOT_NEEDED: Final = "Leader election not needed for topic partition."
_PREFERRED_NOT_AVAILABLE: Final = "The preferred leader was not available."
_ELIGIBLE_NOT_AVAILABLE: Final = "Eligible topic partition leaders are not available."
_NO_REASSIGNMENT: Final = "No partition reassignment is in progress."


def register(registry: HandlerRegistry, state: ClusterState) -> None:
    reassignments_of(state)  # follows broker starts from now on
    registry.register(AlterPartitionReassignmentsRequest.API_KEY, alter_partition_reassignments, 0, 1)
    registry.register(ListPartitionReassignmentsRequest.API_KEY, list_partition_reassignments, 0, 0)
    registry.register(ElectLeadersRequest.API_KEY, elect_leaders, 0, 2)
    registry.register(DescribeLogDirsRequest.API_KEY, describe_log_dirs, 1, 4)
    registry.register(AlterReplicaLogDirsRequest.API_KEY, alter_replica_log_dirs, 1, 2)
    registry.register(UnregisterBrokerRequest.API_KEY, unregister_broker, 0, 0)
    registry.register(ListConfigResourcesRequest.API_KEY, list_config_resources, 0, 1)


# ---------------------------------------------------------------------------- reassignments


def _find(state: ClusterState, topic: str, index: int) -> tuple[Partition | None, int, str | None]:
    """The partition, or the error Kafka's controller answers for it (code, message)."""
    t = state.get_topic(topic)
    if t is None:
        return None, UnknownTopicOrPartitionError.code, f"Unable to find a topic named {topic}."
    if not 0 <= index < len(t.partitions):
        return None, UnknownTopicOrPartitionError.code, f"Unable to find partition {topic}:{index}."
    return t.partitions[index], 0, None


def _check_target(state: ClusterState, replicas: list[int]) -> str | None:
    """Kafka's ``validateManualPartitionAssignment`` (the problem, or None)."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for r in replicas:
        if r in seen:
            return f"The manual partition assignment includes the broker {r} more than once."
        seen.add(r)
        if r not in state.brokers:
            return f"The manual partition assignment includes broker {r}, but no such broker is registered."
    return None


async def alter_partition_reassignments(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, AlterPartitionReassignmentsRequest)
    state = ctx.cluster
    moves = reassignments_of(state)
    allow_rf_change = req.allow_replication_factor_change if ctx.api_version >= 1 else True
    topics = []
    started = False
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, message = _alter_one(state, moves, t.name, p.partition_index, p.replicas, allow_rf_change)
            started |= code == 0
            parts.append(
                AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message
                )
            )
        topics.append(
            AlterPartitionReassignmentsResponse.ReassignableTopicResponse(name=t.name, partitions=parts)
        )
    if started:
        state.changed()  # listeners see the new replicas; a live target completes the move now
    return AlterPartitionReassignmentsResponse(
        allow_replication_factor_change=allow_rf_change, error_code=0, error_message=None, responses=topics
    )


def _alter_one(
    state: ClusterState,
    moves: Reassignments,
    topic: str,
    index: int,
    replicas: list[int] | None,
    allow_rf_change: bool,
) -> tuple[int, str | None]:
    p, code, message = _find(state, topic, index)
    if p is None:
        return code, message
    if replicas is None:
        if not moves.cancel(p):
            return NoReassignmentInProgressError.code, _NO_REASSIGNMENT
        return 0, None
    problem = _check_target(state, replicas)
    if problem is not None:
        return InvalidReplicaAssignmentError.code, problem
    current = len(moves.original(p))
    if not allow_rf_change and len(replicas) != current:
        return (
            InvalidReplicationFactorError.code,
            f"The replication factor is changed from {current} to {len(replicas)} "
            "but allowReplicationFactorChange is false.",
        )
    moves.start(p, list(replicas))
    return 0, None


async def list_partition_reassignments(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, ListPartitionReassignmentsRequest)
    state = ctx.cluster
    moves = reassignments_of(state)
    ongoing = moves.ongoing()
    if req.topics is not None:
        asked = {(t.name, i) for t in req.topics for i in t.partition_indexes}
        ongoing = [m for m in ongoing if (m.partition.topic, m.partition.index) in asked]
    by_topic: dict[str, list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = {}
    for m in ongoing:
        by_topic.setdefault(m.partition.topic, []).append(
            ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                partition_index=m.partition.index,
                replicas=list(m.partition.replicas),
                adding_replicas=m.adding(),
                removing_replicas=m.removing(),
            )
        )
    return ListPartitionReassignmentsResponse(
        error_code=0,
        error_message=None,
        topics=[
            ListPartitionReassignmentsResponse.OngoingTopicReassignment(name=name, partitions=parts)
            for name, parts in by_topic.items()
        ],
    )


# ---------------------------------------------------------------------------- elections


def _elect(state: ClusterState, p: Partition, election_type: int) -> tuple[int, str | None]:
    """Kafka's controller ``electLeader`` for one existing partition: (code, message)."""
    if election_type == _PREFERRED:
        preferred = p.replicas[0] if p.replicas else -1
        if state.is_alive(p.leader_id) and p.leader_id == preferred:
            return ElectionNotNeededError.code, _ELECTION_NOT_NEEDED
        if not state.is_alive(preferred) or preferred not in p.isr:
            return PreferredLeaderNotAvailableError.code, _PREFERRED_NOT_AVAILABLE
        state.set_leader(p, preferred)
        return 0, None
    if state.is_alive(p.leader_id):
        return ElectionNotNeededError.code, _ELECTION_NOT_NEEDED
    candidates = [r for r in p.isr if state.is_alive(r)] or [r for r in p.replicas if state.is_alive(r)]
    if not candidates:
        return EligibleLeadersNotAvailableError.code, _ELIGIBLE_NOT_AVAILABLE
    state.set_leader(p, candidates[0])
    return 0, None


async def elect_leaders(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, ElectLeadersRequest)
    state = ctx.cluster
    v = ctx.api_version
    election_type = req.election_type if v >= 1 else _PREFERRED
    if election_type not in (_PREFERRED, _UNCLEAN):
        return ElectLeadersResponse(
            error_code=InvalidRequestError.code,
            replica_election_results=[],
        )
    results: dict[str, list[ElectLeadersResponse.PartitionResult]] = {}
    changed = False
    if req.topic_partitions is None:
        for p in list(state.iter_partitions()):
            code, message = _elect(state, p, election_type)
            changed |= code == 0
            parts = results.setdefault(p.topic, [])  # every topic is listed, as Kafka does
            if code != ElectionNotNeededError.code:
                parts.append(
                    ElectLeadersResponse.PartitionResult(
                        partition_id=p.index, error_code=code, error_message=message
                    )
                )
    else:
        for tp in req.topic_partitions:
            for index in tp.partitions:
                t = state.get_topic(tp.topic)
                if t is None:
                    code, message = UnknownTopicOrPartitionError.code, f"No such topic as {tp.topic}"
                elif not 0 <= index < len(t.partitions):
                    code, message = (
                        UnknownTopicOrPartitionError.code,
                        f"No such partition as {tp.topic}-{index}",
                    )
                else:
                    code, message = _elect(state, t.partitions[index], election_type)
                    changed |= code == 0
                results.setdefault(tp.topic, []).append(
                    ElectLeadersResponse.PartitionResult(
                        partition_id=index, error_code=code, error_message=message
                    )
                )
    if changed:
        state.changed()
    return ElectLeadersResponse(
        error_code=0,
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=parts)
            for topic, parts in results.items()
        ],
    )


# ---------------------------------------------------------------------------- log dirs


def log_dir_of(state: ClusterState, broker_id: int) -> str:
    """The one log dir of a broker (see the module docstring)."""
    if state.storage is not None:
        return str(state.storage.dir / f"broker-{broker_id}")
    return f"/embedded/broker-{broker_id}"


def _volume_bytes(state: ClusterState) -> tuple[int, int]:
    if state.storage is None:
        return -1, -1
    try:
        usage = shutil.disk_usage(state.storage.dir)
    except OSError:
        return -1, -1
    return usage.total, usage.free


async def describe_log_dirs(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeLogDirsRequest)
    state = ctx.cluster
    broker = ctx.broker_id
    asked = None if req.topics is None else {(t.topic, i) for t in req.topics for i in t.partitions}
    by_topic: dict[str, list[DescribeLogDirsResponse.DescribeLogDirsPartition]] = {}
    for p in state.iter_partitions():
        if broker not in p.replicas or (asked is not None and (p.topic, p.index) not in asked):
            continue
        by_topic.setdefault(p.topic, []).append(
            DescribeLogDirsResponse.DescribeLogDirsPartition(
                partition_index=p.index, partition_size=p.log.size_bytes, offset_lag=0, is_future_key=False
            )
        )
    total, usable = _volume_bytes(state)
    return DescribeLogDirsResponse(
        error_code=0,
        results=[
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=0,
                log_dir=log_dir_of(state, broker),
                topics=[
                    DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=parts)
                    for name, parts in by_topic.items()
                ],
                total_bytes=total,
                usable_bytes=usable,
            )
        ],
    )


async def alter_replica_log_dirs(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, AlterReplicaLogDirsRequest)
    state = ctx.cluster
    own = log_dir_of(state, ctx.broker_id)
    by_topic: dict[str, list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]] = {}
    for d in req.dirs:
        for t in d.topics:
            for index in t.partitions:
                p = state.get_partition(t.name, index)
                if p is None:
                    code = UnknownTopicOrPartitionError.code
                elif d.path != own:
                    code = LogDirNotFoundError.code
                elif ctx.broker_id not in p.replicas:
                    code = ReplicaNotAvailableError.code
                else:
                    code = 0  # already there: the broker's one dir
                by_topic.setdefault(t.name, []).append(
                    AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
                        partition_index=index, error_code=code
                    )
                )
    return AlterReplicaLogDirsResponse(
        results=[
            AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
            for name, parts in by_topic.items()
        ]
    )


# ---------------------------------------------------------------------------- brokers, resources


async def unregister_broker(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, UnregisterBrokerRequest)
    if req.broker_id not in ctx.cluster.brokers:
        return UnregisterBrokerResponse(
            error_code=BrokerIdNotRegisteredError.code,
            error_message=f"Broker ID {req.broker_id} is not currently registered",
        )
    return UnregisterBrokerResponse(error_code=0, error_message=None)


def _group_ids(state: ClusterState) -> list[str]:
    ids: set[str] = set(state.group_configs)
    for svc in state.services.values():
        groups = getattr(svc, "groups", None)
        if isinstance(groups, dict):
            ids.update(g for g in groups if isinstance(g, str))
    return sorted(ids)


async def list_config_resources(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, ListConfigResourcesRequest)
    state = ctx.cluster
    if ctx.api_version == 0:
        wanted: tuple[int, ...] = (_CLIENT_METRICS,)
    else:
        unknown = [t for t in req.resource_types if t not in _LISTED_TYPES]
        if unknown:
            return ListConfigResourcesResponse(error_code=UnsupportedVersionError.code)
        wanted = tuple(t for t in _LISTED_TYPES if not req.resource_types or t in req.resource_types)
    out: list[ListConfigResourcesResponse.ConfigResource] = []

    def add(kind: int, names: list[str]) -> None:
        out.extend(
            ListConfigResourcesResponse.ConfigResource(resource_name=n, resource_type=kind) for n in names
        )

    brokers = [str(b) for b in sorted(state.brokers)]
    for kind in wanted:
        if kind in (_BROKER, _BROKER_LOGGER):
            add(kind, brokers)
        elif kind == _TOPIC:
            add(kind, sorted(state.topics))
        elif kind == _CLIENT_METRICS:
            add(kind, subscription_names(state))
        elif kind == _GROUP:
            add(kind, _group_ids(state))
    return ListConfigResourcesResponse(error_code=0, config_resources=out)
