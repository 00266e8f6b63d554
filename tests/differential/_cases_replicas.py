"""Differential cases: reassignments, leader elections, log dirs, broker unregistration,
config resource listing, feature updates (validate only) and OffsetDelete, with their
error answers (unknown topic/partition/dir/broker/group, bad replica lists, elections
not needed). One broker on both sides: every valid reassignment or election is to the
broker that already holds the partition. Log dir paths differ by nature (a real path vs
the embedded broker's virtual one): observed as "the broker's own dir" or not."""

from __future__ import annotations

import asyncio
import time

from _diffkit import Observation, Target, batch, case, find_coordinator, metadata, produce

from aiokafka_lite.testing.rawclient import RawClient
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
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)

_TOPIC, _BROKER, _UNKNOWN_TYPE = 2, 4, 0


async def _broker(c: RawClient) -> int:
    md = await metadata(c, None)
    (b,) = md.brokers
    return int(b.node_id)


async def _reassign(c: RawClient, topic: str, parts: dict[int, list[int] | None]) -> Observation:
    resp = await c.request(
        AlterPartitionReassignmentsRequest(
            timeout_ms=30000,
            topics=[
                AlterPartitionReassignmentsRequest.ReassignableTopic(
                    name=topic,
                    partitions=[
                        AlterPartitionReassignmentsRequest.ReassignablePartition(
                            partition_index=p, replicas=r
                        )
                        for p, r in parts.items()
                    ],
                )
            ],
        ),
        0,
    )
    assert isinstance(resp, AlterPartitionReassignmentsResponse)
    return {
        "error": resp.error_code,
        "partitions": {
            f"{t.name == topic}-{p.partition_index}": p.error_code
            for t in resp.responses
            for p in t.partitions
        },
    }


@case("replicas")
async def case_reassignment_errors(t: Target) -> Observation:
    topic = await t.create_topic("reassign", partitions=2)
    c = await t.client()
    b = await _broker(c)
    ok = await _reassign(c, topic, {0: [b]})
    bad = await _reassign(c, topic, {1: [], 5: [b]})
    dup = await _reassign(c, topic, {1: [b, b]})
    unregistered = await _reassign(c, topic, {1: [b + 1000]})
    cancel_none = await _reassign(c, topic, {1: None})
    unknown_topic = await _reassign(c, t.unique("nosuch"), {0: [b]})
    listed = await c.request(
        ListPartitionReassignmentsRequest(
            timeout_ms=30000,
            topics=[
                ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
                    name=topic, partition_indexes=[1]
                )
            ],
        ),
        0,
    )
    assert isinstance(listed, ListPartitionReassignmentsResponse)
    return {
        "to_current": ok,
        "empty_and_unknown_partition": bad,
        "duplicate": dup,
        "unregistered": unregistered,
        "cancel_none": cancel_none,
        "unknown_topic": unknown_topic,
        "list": (listed.error_code, [t.name for t in listed.topics]),
    }


async def _elect(
    c: RawClient, election_type: int, parts: dict[str, list[int]] | None
) -> ElectLeadersResponse:
    resp = await c.request(
        ElectLeadersRequest(
            election_type=election_type,
            topic_partitions=None
            if parts is None
            else [ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps) for t, ps in parts.items()],
            timeout_ms=30000,
        ),
        2,
    )
    assert isinstance(resp, ElectLeadersResponse)
    return resp


@case("replicas")
async def case_elect_leaders(t: Target) -> Observation:
    topic = await t.create_topic("elect", partitions=2)
    missing = t.unique("nosuch")
    c = await t.client()
    out: Observation = {}
    for name, kind in (("preferred", 0), ("unclean", 1)):
        resp = await _elect(c, kind, {topic: [0, 1, 7], missing: [0]})
        out[name] = (
            resp.error_code,
            sorted(
                (r.topic == topic, p.partition_id, p.error_code)
                for r in resp.replica_election_results
                for p in r.partition_result
            ),
        )
    everything = await _elect(c, 0, None)
    # Kafka lists every topic, each with only the partitions that needed an election.
    mine = [r for r in everything.replica_election_results if r.topic == topic]
    out["all"] = (everything.error_code, [[p.partition_id for p in r.partition_result] for r in mine])
    return out


async def _log_dirs(c: RawClient, topic: str) -> DescribeLogDirsResponse:
    resp = await c.request(
        DescribeLogDirsRequest(
            topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=[0, 1])]
        ),
        4,
    )
    assert isinstance(resp, DescribeLogDirsResponse)
    return resp


@case("replicas")
async def case_log_dirs(t: Target) -> Observation:
    topic = await t.create_topic("logdirs", partitions=2)
    c = await t.client()
    r = await produce(c, topic, batch(5))
    assert r.error == 0, r
    resp = await _log_dirs(c, topic)
    (d,) = resp.results
    described = {
        (tp.name == topic, p.partition_index): (p.partition_size > 0, p.offset_lag, p.is_future_key)
        for tp in d.topics
        for p in tp.partitions
    }
    alter = await c.request(
        AlterReplicaLogDirsRequest(
            dirs=[
                AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                    path=d.log_dir,
                    topics=[
                        AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=topic, partitions=[0]),
                        AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(
                            name=t.unique("nosuch"), partitions=[0]
                        ),
                    ],
                ),
                AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                    path=d.log_dir + "-nowhere",
                    topics=[AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=topic, partitions=[1])],
                ),
            ]
        ),
        2,
    )
    assert isinstance(alter, AlterReplicaLogDirsResponse)
    return {
        "error": (resp.error_code, d.error_code, len(resp.results)),
        "replicas": sorted(described.items()),
        "alter": sorted(
            (r.topic_name == topic, p.partition_index, p.error_code)
            for r in alter.results
            for p in r.partitions
        ),
    }


@case("replicas")
async def case_unregister_unknown_broker(t: Target) -> Observation:
    c = await t.client()
    b = await _broker(c)
    resp = await c.request(UnregisterBrokerRequest(broker_id=b + 1000), 0)
    assert isinstance(resp, UnregisterBrokerResponse)
    return {"error": resp.error_code}


@case("replicas")
async def case_list_config_resources(t: Target) -> Observation:
    topic = await t.create_topic("resources")
    c = await t.client()
    b = await _broker(c)
    out: Observation = {}
    for name, types in (("topics", [_TOPIC]), ("brokers", [_BROKER]), ("unknown_type", [_UNKNOWN_TYPE])):
        resp = await c.request(ListConfigResourcesRequest(resource_types=types), 1)
        assert isinstance(resp, ListConfigResourcesResponse)
        names = {(r.resource_type, r.resource_name) for r in resp.config_resources}
        out[name] = (
            resp.error_code,
            (_TOPIC, topic) in names,
            (_BROKER, str(b)) in names,
            {r.resource_type for r in resp.config_resources},
        )
    return out


@case("replicas")
async def case_update_features_validate_only(t: Target) -> Observation:
    c = await t.client()
    out: Observation = {}
    for name, feature, level, upgrade_type in (
        ("same_level", "transaction.version", 2, 1),
        ("downgrade_as_upgrade", "transaction.version", 1, 1),
        ("safe_downgrade", "transaction.version", 1, 2),
        ("unknown_feature", "no.such.version", 1, 1),
        ("above_supported", "transaction.version", 9, 1),
    ):
        resp = await c.request(
            UpdateFeaturesRequest(
                timeout_ms=30000,
                feature_updates=[
                    UpdateFeaturesRequest.FeatureUpdateKey(
                        feature=feature, max_version_level=level, upgrade_type=upgrade_type
                    )
                ],
                validate_only=True,
            ),
            1,
        )
        assert isinstance(resp, UpdateFeaturesResponse)
        out[name] = (resp.error_code, [(r.feature, r.error_code) for r in resp.results])
    return out


@case("replicas")
async def case_offset_delete_unknown_group(t: Target) -> Observation:
    topic = await t.create_topic("odel")
    c = await t.client()
    group = t.unique("nogroup")
    assert await find_coordinator(c, group, 0) == 0  # one broker: it is the coordinator
    # A coordinator shard just created answers NOT_COORDINATOR/loading until it has loaded.
    deadline = time.monotonic() + 30
    while True:
        resp = await c.request(
            OffsetDeleteRequest(
                group_id=group,
                topics=[
                    OffsetDeleteRequest.OffsetDeleteRequestTopic(
                        name=topic,
                        partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)],
                    )
                ],
            ),
            0,
        )
        assert isinstance(resp, OffsetDeleteResponse)
        if resp.error_code not in (14, 15, 16) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    return {
        "error": resp.error_code,
        "partitions": [p.error_code for tt in resp.topics for p in tt.partitions],
    }
