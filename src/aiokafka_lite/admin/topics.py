"""Topic and cluster operations of the admin client: create, delete, grow, list and
describe topics; describe the cluster. Creation, deletion and partition changes go to
the controller; metadata to any broker (see ``admin/requests.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aiokafka_lite.admin.requests import AdminRequests, Outcome, default_retry, error_of, results
from aiokafka_lite.admin.types import (
    ClusterDescription,
    CreateTopicResult,
    NewTopic,
    PartitionDescription,
    Result,
    Results,
    TopicDescription,
    TopicListing,
)
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.acls import operations_from_bits
from aiokafka_lite.net.metadata import BrokerInfo
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = [
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_cluster",
    "describe_topics",
    "list_topics",
]


async def create_topics(
    rq: AdminRequests,
    topics: Sequence[NewTopic],
    *,
    validate_only: bool = False,
    timeout_ms: float | None = None,
) -> Results[str, CreateTopicResult]:
    """Create topics; existing ones fail per item with ``TopicAlreadyExistsError``."""
    by_name: dict[str, NewTopic] = {}
    for t in topics:
        if not isinstance(t, NewTopic):
            raise E.ConfigError(f"create_topics takes NewTopic objects, got {type(t).__name__}")
        if t.name in by_name:
            raise E.ConfigError(f"topic {t.name!r} listed twice")
        by_name[t.name] = t
    deadline = rq.deadline(timeout_ms)

    async def attempt(names: list[str]) -> dict[str, Outcome]:
        def make(version: int) -> Request:
            return CreateTopicsRequest(
                topics=[_creatable(by_name[n]) for n in names],
                timeout_ms=int(rq.remaining_ms(deadline)),
                validate_only=validate_only,
            )

        resp = await rq.request(make, "controller", deadline)
        assert isinstance(resp, CreateTopicsResponse)
        out: dict[str, Outcome] = {}
        for r in resp.topics:
            err = error_of(r.error_code, r.error_message)
            if err is not None:
                out[r.name] = err
                continue
            out[r.name] = CreateTopicResult(
                name=r.name,
                topic_id=None if r.topic_id == ZERO_UUID else r.topic_id,
                partitions=r.num_partitions,
                replication_factor=r.replication_factor,
                configs={c.name: c.value for c in r.configs or []},
            )
        return out

    outcomes = await rq.per_item(list(by_name), attempt, deadline, retry_if=default_retry)
    return results(by_name, outcomes, lambda n, e: CreateTopicResult(name=n, error=e))


async def delete_topics(
    rq: AdminRequests, names: Iterable[str], *, timeout_ms: float | None = None
) -> Results[str, Result]:
    items = list(dict.fromkeys(names))
    deadline = rq.deadline(timeout_ms)

    async def attempt(batch: list[str]) -> dict[str, Outcome]:
        def make(version: int) -> Request:
            if version >= 6:
                return DeleteTopicsRequest(
                    topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in batch],
                    timeout_ms=int(rq.remaining_ms(deadline)),
                )
            return DeleteTopicsRequest(topic_names=batch, timeout_ms=int(rq.remaining_ms(deadline)))

        resp = await rq.request(make, "controller", deadline)
        assert isinstance(resp, DeleteTopicsResponse)
        return {str(r.name): error_of(r.error_code, r.error_message) or Result() for r in resp.responses}

    outcomes = await rq.per_item(items, attempt, deadline, retry_if=default_retry)
    return results(items, outcomes, lambda n, e: Result(e))


async def create_partitions(
    rq: AdminRequests,
    new_totals: Mapping[str, int],
    *,
    validate_only: bool = False,
    timeout_ms: float | None = None,
) -> Results[str, Result]:
    """Grow topics to ``new_totals[topic]`` partitions in total."""
    deadline = rq.deadline(timeout_ms)

    async def attempt(batch: list[str]) -> dict[str, Outcome]:
        def make(version: int) -> Request:
            return CreatePartitionsRequest(
                topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(
                        name=n, count=new_totals[n], assignments=None
                    )
                    for n in batch
                ],
                timeout_ms=int(rq.remaining_ms(deadline)),
                validate_only=validate_only,
            )

        resp = await rq.request(make, "controller", deadline)
        assert isinstance(resp, CreatePartitionsResponse)
        return {r.name: error_of(r.error_code, r.error_message) or Result() for r in resp.results}

    outcomes = await rq.per_item(list(new_totals), attempt, deadline, retry_if=default_retry)
    return results(new_totals, outcomes, lambda n, e: Result(e))


async def _metadata(
    rq: AdminRequests,
    topics: list[str] | None,
    deadline: float,
    *,
    include_authorized_operations: bool = False,
) -> MetadataResponse:
    def make(version: int) -> Request:
        req_topics = (
            None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        )
        return MetadataRequest(
            topics=req_topics,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=include_authorized_operations,
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, MetadataResponse)
    return resp


async def list_topics(
    rq: AdminRequests, *, include_internal: bool = False, timeout_ms: float | None = None
) -> dict[str, TopicListing]:
    resp = await _metadata(rq, None, rq.deadline(timeout_ms))
    out: dict[str, TopicListing] = {}
    for t in resp.topics:
        if t.name is None or (t.is_internal and not include_internal):
            continue
        out[t.name] = TopicListing(t.name, None if t.topic_id == ZERO_UUID else t.topic_id, t.is_internal)
    return dict(sorted(out.items()))


async def describe_topics(
    rq: AdminRequests,
    names: Iterable[str],
    *,
    include_authorized_operations: bool = False,
    timeout_ms: float | None = None,
) -> Results[str, TopicDescription]:
    """Partitions, leaders and replicas per topic; unknown topics fail per item."""
    items = list(dict.fromkeys(names))
    deadline = rq.deadline(timeout_ms)

    async def attempt(batch: list[str]) -> dict[str, Outcome]:
        resp = await _metadata(
            rq, batch, deadline, include_authorized_operations=include_authorized_operations
        )
        out: dict[str, Outcome] = {}
        for t in resp.topics:
            if t.name is None:
                continue
            if t.error_code:
                out[t.name] = E.error_for(t.error_code, f"topic {t.name!r}")
                continue
            out[t.name] = TopicDescription(
                name=t.name,
                topic_id=None if t.topic_id == ZERO_UUID else t.topic_id,
                is_internal=t.is_internal,
                partitions=[
                    PartitionDescription(
                        p.partition_index,
                        p.leader_id,
                        p.leader_epoch,
                        tuple(p.replica_nodes),
                        tuple(p.isr_nodes),
                        tuple(p.offline_replicas),
                    )
                    for p in sorted(t.partitions, key=lambda p: p.partition_index)
                ],
                authorized_operations=operations_from_bits(t.topic_authorized_operations)
                if include_authorized_operations
                else None,
            )
        return out

    # Only a topic that exists but has no leader yet is worth waiting for.
    outcomes = await rq.per_item(
        items, attempt, deadline, retry_if=lambda e: isinstance(e, E.LeaderNotAvailableError)
    )
    return results(items, outcomes, lambda n, e: TopicDescription(name=n, error=e))


async def describe_cluster(
    rq: AdminRequests, *, include_authorized_operations: bool = False, timeout_ms: float | None = None
) -> ClusterDescription:
    deadline = rq.deadline(timeout_ms)
    target = rq.client.least_loaded_node()
    try:
        version = await rq.client.negotiated_version(
            target, DescribeClusterRequest.API_KEY, timeout_ms=rq.remaining_ms(deadline)
        )
    except E.UnsupportedVersionError:
        version = -1
    if version >= 0:
        resp = await rq.request(
            lambda v: DescribeClusterRequest(
                include_cluster_authorized_operations=include_authorized_operations
            ),
            "any",
            deadline,
        )
        assert isinstance(resp, DescribeClusterResponse)
        if resp.error_code:
            raise E.error_for(resp.error_code, resp.error_message)
        brokers = [BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]
        return ClusterDescription(
            sorted(brokers, key=lambda b: b.node_id),
            resp.controller_id,
            resp.cluster_id,
            operations_from_bits(resp.cluster_authorized_operations)
            if include_authorized_operations
            else None,
        )
    if include_authorized_operations:
        raise E.UnsupportedVersionError(
            "authorized operations need DescribeCluster (Kafka 2.8+); this broker lacks it"
        )
    md = await _metadata(rq, [], deadline)
    brokers = [BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in md.brokers]
    return ClusterDescription(sorted(brokers, key=lambda b: b.node_id), md.controller_id, md.cluster_id)


def _creatable(t: NewTopic) -> CreateTopicsRequest.CreatableTopic:
    if t.replica_assignment:
        assignments = [
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
            for p, ids in sorted(t.replica_assignment.items())
        ]
        partitions, rf = -1, -1
    else:
        assignments = []
        partitions, rf = t.partitions, t.replication_factor
    return CreateTopicsRequest.CreatableTopic(
        name=t.name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=assignments,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()],
    )
