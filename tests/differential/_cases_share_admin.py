"""Differential cases: share-group administration (KIP-932) and group configs.

ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets, share groups in ListGroups/DeleteGroups, and GROUP resources in
DescribeConfigs/IncrementalAlterConfigs, with their error answers (unknown group, group
with members, group of another type, invalid config values).

Epochs are observed as relations (Kafka's group epoch counts its own metadata refreshes),
and start offsets only where Kafka's share-state persister has written them (after an
alter): Kafka reports the persisted state, which trails an acknowledgement by one write
(docs/guide/embedded-broker-differences.md).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid

from _diffkit import (
    Observation,
    Target,
    batch,
    case,
    consumer_heartbeat,
    consumer_join_request,
    metadata,
    produce,
)

from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

GROUP = 32
_UNIQUE = re.compile(r"^diff-(.+)-[0-9a-f]{8}-\d+$")


def _label(name: str) -> str:
    """A unique topic/group name without its run-specific part (``diff-sga-1a2b3c4d-7`` -> ``sga``)."""
    m = _UNIQUE.match(name)
    return m.group(1) if m else name


#: Coordinator loading / not available / not coordinator: a fresh Kafka answers these first.
_LOADING = (14, 15, 16)


async def _alter_group_config(
    c: RawClient, group: str, name: str, value: str | None, op: int = 0, validate_only: bool = False
) -> int:
    resp = await c.request(
        IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=GROUP,
                    resource_name=group,
                    configs=[
                        IncrementalAlterConfigsRequest.AlterableConfig(
                            name=name, config_operation=op, value=value
                        )
                    ],
                )
            ],
            validate_only=validate_only,
        ),
        1,
    )
    assert isinstance(resp, IncrementalAlterConfigsResponse)
    return resp.responses[0].error_code


async def _heartbeat(
    c: RawClient, group: str, member: str, epoch: int, topics: list[str] | None
) -> ShareGroupHeartbeatResponse:
    resp = await c.request(
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics
        ),
        1,
    )
    assert isinstance(resp, ShareGroupHeartbeatResponse)
    return resp


async def _join(c: RawClient, group: str, member: str, topic: str) -> ShareGroupHeartbeatResponse:
    """Joins and heartbeats until the member is assigned the topic's partitions (Kafka may
    answer the first heartbeats before its assignor sees the topic)."""
    deadline = time.monotonic() + 30
    epoch = 0
    while True:
        resp = await _heartbeat(c, group, member, epoch, [topic])
        if resp.error_code == 0:
            epoch = resp.member_epoch
            if resp.assignment is not None and resp.assignment.topic_partitions:
                return resp
        elif resp.error_code not in _LOADING:
            return resp
        if time.monotonic() > deadline:
            return resp
        await asyncio.sleep(0.2)


async def _describe(c: RawClient, groups: list[str], ops: bool = False) -> dict[str, Observation]:
    resp = await c.request(ShareGroupDescribeRequest(group_ids=groups, include_authorized_operations=ops), 1)
    assert isinstance(resp, ShareGroupDescribeResponse)
    out: dict[str, Observation] = {}
    for g in resp.groups:
        out[g.group_id] = {
            "error": g.error_code,
            "state": g.group_state,
            "assignor": g.assignor_name,
            "epochs_agree": g.group_epoch == g.assignment_epoch,
            "operations": g.authorized_operations,
            "members": [
                {
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rack": m.rack_id,
                    "subscribed": sorted(_label(n) for n in m.subscribed_topic_names),
                    "assignment": sorted(
                        (_label(tp.topic_name), sorted(tp.partitions)) for tp in m.assignment.topic_partitions
                    ),
                    "ids_known": all(tp.topic_id.int for tp in m.assignment.topic_partitions),
                    "epoch_is_group_epoch": m.member_epoch == g.group_epoch,
                }
                for m in g.members
            ],
            "_epoch": g.group_epoch,
            "_message": g.error_message,
        }
    return out


async def _offsets(
    c: RawClient, group: str, topics: dict[str, list[int]] | None = None, version: int = 1
) -> Observation:
    R = DescribeShareGroupOffsetsRequest
    resp = await c.request(
        R(
            groups=[
                R.DescribeShareGroupOffsetsRequestGroup(
                    group_id=group,
                    topics=None
                    if topics is None
                    else [
                        R.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                        for t, ps in topics.items()
                    ],
                )
            ]
        ),
        version,
        30,
    )
    assert isinstance(resp, DescribeShareGroupOffsetsResponse)
    g = resp.groups[0]
    return {
        "error": g.error_code,
        "topics": sorted(
            (
                _label(t.topic_name),
                bool(t.topic_id.int),
                sorted((p.partition_index, p.start_offset, p.lag, p.error_code) for p in t.partitions),
            )
            for t in g.topics
        ),
    }


async def _alter_offsets(c: RawClient, group: str, offsets: dict[str, dict[int, int]]) -> Observation:
    R = AlterShareGroupOffsetsRequest
    resp = await c.request(
        R(
            group_id=group,
            topics=[
                R.AlterShareGroupOffsetsRequestTopic(
                    topic_name=t,
                    partitions=[
                        R.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                        for p, o in ps.items()
                    ],
                )
                for t, ps in offsets.items()
            ],
        ),
        0,
        30,
    )
    assert isinstance(resp, AlterShareGroupOffsetsResponse)
    return {
        "error": resp.error_code,
        "topics": sorted(
            (
                _label(t.topic_name),
                bool(t.topic_id.int),
                sorted((p.partition_index, p.error_code) for p in t.partitions),
            )
            for t in resp.responses
        ),
    }


async def _delete_offsets(c: RawClient, group: str, topics: list[str]) -> Observation:
    R = DeleteShareGroupOffsetsRequest
    resp = await c.request(
        R(group_id=group, topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]), 0, 30
    )
    assert isinstance(resp, DeleteShareGroupOffsetsResponse)
    return {
        "error": resp.error_code,
        "topics": sorted((_label(t.topic_name), bool(t.topic_id.int), t.error_code) for t in resp.responses),
    }


async def _delete_groups(c: RawClient, groups: list[str]) -> list[tuple[str, int]]:
    resp = await c.request(DeleteGroupsRequest(groups_names=groups), 2)
    assert isinstance(resp, DeleteGroupsResponse)
    return sorted((_label(r.group_id), r.error_code) for r in resp.results)


async def _listed(
    c: RawClient, group: str, states: list[str], types: list[str], version: int = 5
) -> list[tuple[str, str, str]]:
    resp = await c.request(ListGroupsRequest(states_filter=states, types_filter=types), version)
    assert isinstance(resp, ListGroupsResponse)
    assert resp.error_code == 0
    return [(g.protocol_type, g.group_state, g.group_type) for g in resp.groups if g.group_id == group]


async def _until_offsets_listed(c: RawClient, group: str) -> Observation:
    # Kafka initializes the assigned share-partitions in its persister shortly after the assignment.
    deadline = time.monotonic() + 10
    while True:
        obs = await _offsets(c, group)
        if obs["topics"] or time.monotonic() > deadline:
            return obs
        await asyncio.sleep(0.2)


@case("share_admin")
async def case_share_group_admin_lifecycle(t: Target) -> Observation:
    """Describe, list, offsets while a member holds the group, then alter, delete offsets
    and delete the group once it is empty."""
    c = await t.client()
    topic = await t.create_topic("sga", 2)
    group, unknown = t.unique("sga"), t.unique("nosuch")
    out: Observation = {"config": await _alter_group_config(c, group, "share.auto.offset.reset", "earliest")}
    await produce(c, topic, batch(3))
    tid = (await metadata(c, [topic])).topics[0].topic_id

    out["describe_unknown_and_empty_id"] = {
        _label(k): v for k, v in (await _describe(c, [unknown, ""])).items()
    }
    out["offsets_unknown"] = await _offsets(c, unknown)
    out["delete_offsets_unknown"] = await _delete_offsets(c, unknown, [topic])
    out["delete_unknown"] = await _delete_groups(c, [unknown])

    member = str(uuid.uuid4())
    joined = await _join(c, group, member, topic)
    out["joined"] = joined.error_code
    described = await _describe(c, [group], ops=True)
    out["describe"] = described[group]
    out["describe_without_operations"] = (await _describe(c, [group]))[group]["operations"]
    out["list_no_filter"] = await _listed(c, group, [], [])
    out["list_share"] = await _listed(c, group, [], ["share"])
    out["list_share_capitalized"] = await _listed(c, group, [], ["Share"])
    out["list_classic"] = await _listed(c, group, [], ["classic"])
    out["list_stable"] = await _listed(c, group, ["stable"], ["share"])
    out["list_empty"] = await _listed(c, group, ["Empty"], [])
    out["list_v4"] = await _listed(c, group, [], [], version=4)
    out["offsets_assigned_never_written"] = await _until_offsets_listed(c, group)
    out["offsets_v0"] = await _offsets(c, group, version=0)
    out["offsets_named_missing_topic"] = await _offsets(c, group, {t.unique("missing"): [0]})

    out["alter_with_member"] = await _alter_offsets(c, group, {topic: {0: 1}})
    out["delete_offsets_with_member"] = await _delete_offsets(c, group, [topic])
    out["delete_with_member"] = await _delete_groups(c, [group])

    left = await _heartbeat(c, group, member, -1, None)
    out["leave"] = left.error_code
    after_leave = (await _describe(c, [group]))[group]
    out["describe_empty"] = after_leave
    out["epoch_grew_on_leave"] = after_leave["_epoch"] > described[group]["_epoch"]
    out["list_empty_after_leave"] = await _listed(c, group, ["empty"], ["share"])

    out["alter_empty"] = await _alter_offsets(
        c, group, {topic: {0: 1, 1: -1, 9: 0}, t.unique("missing"): {0: 0}}
    )
    out["offsets_after_alter"] = await _offsets(c, group)
    out["offsets_after_alter_v0"] = await _offsets(c, group, version=0)

    # The next member starts at the altered start offset.
    member2 = str(uuid.uuid4())
    out["rejoined"] = (await _join(c, group, member2, topic)).error_code
    acquired: list[tuple[int, int, int]] = []
    for epoch in range(60):
        resp = await c.request(
            ShareFetchRequest(
                group_id=group,
                member_id=member2,
                share_session_epoch=epoch,
                max_wait_ms=200,
                min_bytes=1,
                max_bytes=1 << 20,
                max_records=10,
                batch_size=10,
                topics=[
                    ShareFetchRequest.FetchTopic(
                        topic_id=tid, partitions=[ShareFetchRequest.FetchPartition(partition_index=0)]
                    )
                ],
            ),
            2,
        )
        assert isinstance(resp, ShareFetchResponse)
        acquired = [
            (a.first_offset, a.last_offset, a.delivery_count)
            for tr in resp.responses
            for p in tr.partitions
            for a in p.acquired_records
        ]
        if resp.error_code or acquired:
            break
        await asyncio.sleep(0.2)
    out["acquired_after_alter"] = acquired
    out["leave_again"] = (await _heartbeat(c, group, member2, -1, None)).error_code

    out["delete_offsets"] = await _delete_offsets(c, group, [topic, t.unique("missing")])
    out["offsets_after_delete"] = await _offsets(c, group)
    out["delete"] = await _delete_groups(c, [group, unknown])
    out["describe_deleted"] = (await _describe(c, [group]))[group]
    out["list_deleted"] = await _listed(c, group, [], [])
    out["offsets_deleted"] = await _offsets(c, group)
    # Group configs outlive the group.
    resp = await c.request(
        DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=GROUP, resource_name=group, configuration_keys=["share.auto.offset.reset"]
                )
            ]
        ),
        4,
    )
    assert isinstance(resp, DescribeConfigsResponse)
    out["config_after_delete"] = [(e.name, e.value, e.config_source) for e in resp.results[0].configs]
    return out


@case("share_admin")
async def case_share_admin_other_groups(t: Target) -> Observation:
    """A classic group's id, empty ids, and alters that create (or do not create) a group."""
    c = await t.client()
    topic = await t.create_topic("sga-other", 1)
    classic = t.unique("classic")
    out: Observation = {}
    member = ""
    for _ in range(2):  # the first JoinGroup hands out the member id (MEMBER_ID_REQUIRED)
        for _ in range(150):
            joined = await c.request(
                JoinGroupRequest(
                    group_id=classic,
                    session_timeout_ms=30000,
                    rebalance_timeout_ms=30000,
                    member_id=member,
                    protocol_type="consumer",
                    protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
                ),
                9,
                40,
            )
            assert isinstance(joined, JoinGroupResponse)
            if joined.error_code not in _LOADING:
                break
            await asyncio.sleep(0.2)
        member = joined.member_id
    out["classic_joined"] = joined.error_code
    out["describe_classic"] = (await _describe(c, [classic]))[classic]
    out["offsets_classic"] = await _offsets(c, classic)
    out["alter_classic"] = await _alter_offsets(c, classic, {topic: {0: 0}})
    out["delete_offsets_classic"] = await _delete_offsets(c, classic, [topic])
    out["list_share_has_no_classic"] = await _listed(c, classic, [], ["share"])
    out["list_classic"] = await _listed(c, classic, [], ["classic"])

    # A consumer-protocol (KIP-848) group's id.
    consumer = t.unique("consumer")
    for _ in range(150):
        join = consumer_join_request(consumer, member_id=str(uuid.uuid4()), subscribed_topic_names=[topic])
        hb = await consumer_heartbeat(c, join, 1)
        if hb.error_code not in _LOADING:
            break
        await asyncio.sleep(0.2)
    out["consumer_joined"] = hb.error_code
    out["describe_consumer"] = (await _describe(c, [consumer]))[consumer]
    out["alter_consumer"] = await _alter_offsets(c, consumer, {topic: {0: 0}})
    out["delete_offsets_consumer"] = await _delete_offsets(c, consumer, [topic])
    out["offsets_consumer"] = await _offsets(c, consumer)
    out["list_share_has_no_consumer"] = await _listed(c, consumer, [], ["share"])

    out["alter_empty_id"] = await _alter_offsets(c, "", {topic: {0: 0}})
    out["delete_offsets_empty_id"] = await _delete_offsets(c, "", [topic])
    out["offsets_empty_id"] = await _offsets(c, "")

    only_missing = t.unique("sg")
    out["alter_only_missing_topic"] = await _alter_offsets(c, only_missing, {t.unique("missing"): {0: 0}})
    out["not_created"] = (await _describe(c, [only_missing]))[only_missing]["error"]
    created = t.unique("sg")
    out["alter_creates"] = await _alter_offsets(c, created, {topic: {0: 100}})
    out["created"] = (await _describe(c, [created]))[created]
    out["offsets_past_the_end"] = await _offsets(c, created)
    out["list_created"] = await _listed(c, created, [], ["share"])
    out["delete_created"] = await _delete_groups(c, [created])
    return out


#: Every group config Kafka 4.4 describes, except share.heartbeat.interval.ms, whose
#: default the test launcher overrides on Apache Kafka (a static broker config).
_DESCRIBED = (
    "consumer.assignment.interval.ms",
    "consumer.heartbeat.interval.ms",
    "consumer.session.timeout.ms",
    "errors.deadletterqueue.copy.record.enable",
    "errors.deadletterqueue.topic.name",
    "share.assignment.interval.ms",
    "share.auto.offset.reset",
    "share.delivery.count.limit",
    "share.isolation.level",
    "share.partition.max.record.locks",
    "share.record.lock.duration.ms",
    "share.renew.acknowledge.enable",
    "share.session.timeout.ms",
    "streams.assignment.interval.ms",
    "streams.assignor.name",
    "streams.heartbeat.interval.ms",
    "streams.initial.rebalance.delay.ms",
    "streams.num.standby.replicas",
    "streams.rack.aware.assignment.tags",
    "streams.session.timeout.ms",
)


@case("share_admin")
async def case_group_configs_described(t: Target) -> Observation:
    """DescribeConfigs on a GROUP resource: every config, values, sources, types, synonyms."""
    c = await t.client()
    group = t.unique("gcd")
    out: Observation = {
        "set": [
            await _alter_group_config(c, group, name, value)
            for name, value in (
                ("share.isolation.level", "read_committed"),
                ("share.delivery.count.limit", "3"),
                ("share.record.lock.duration.ms", "20000"),
            )
        ]
    }
    out["delete"] = await _alter_group_config(c, group, "share.delivery.count.limit", None, op=1)
    # Kafka applies group configs from its metadata log, a moment after answering the alter.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        resp = await c.request(
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=GROUP,
                        resource_name=group,
                        configuration_keys=["share.record.lock.duration.ms", "share.delivery.count.limit"],
                    )
                ]
            ),
            4,
        )
        assert isinstance(resp, DescribeConfigsResponse)
        if {(e.name, e.config_source) for e in resp.results[0].configs} == {
            ("share.record.lock.duration.ms", 8),
            ("share.delivery.count.limit", 5),
        }:
            break
        await asyncio.sleep(0.1)
    for synonyms in (False, True):
        resp = await c.request(
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=GROUP, resource_name=group, configuration_keys=None
                    )
                ],
                include_synonyms=synonyms,
                include_documentation=False,
            ),
            4,
        )
        assert isinstance(resp, DescribeConfigsResponse)
        r = resp.results[0]
        entries = {e.name: e for e in r.configs}
        out[f"synonyms_{synonyms}"] = {
            "error": r.error_code,
            "names": sorted(entries),
            "entries": [
                (
                    n,
                    entries[n].value,
                    entries[n].config_source,
                    entries[n].config_type,
                    entries[n].read_only,
                    entries[n].is_sensitive,
                    [(s.name, s.value, s.source) for s in entries[n].synonyms],
                )
                for n in _DESCRIBED
                if n in entries
            ],
        }
    resp = await c.request(
        DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=GROUP,
                    resource_name=group,
                    configuration_keys=["share.isolation.level", "no.such"],
                ),
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=GROUP, resource_name="", configuration_keys=None
                ),
            ],
            include_documentation=True,
        ),
        4,
    )
    assert isinstance(resp, DescribeConfigsResponse)
    out["keys_and_empty_name"] = [
        (r.error_code, [(e.name, e.value, bool(e.documentation)) for e in r.configs]) for r in resp.results
    ]
    return out


@case("share_admin")
async def case_group_config_validation(t: Target) -> Observation:
    """IncrementalAlterConfigs on GROUP resources: Kafka 4.4's checks of each config
    (values whose answer does not depend on broker bounds the test launcher lowers)."""
    c = await t.client()
    out: Observation = {}
    for name, values in (
        (
            "share.auto.offset.reset",
            [
                "latest",
                "EARLIEST",
                "by_duration:PT1H",
                "by_duration:P1D",
                "by_duration:PT0S",
                "by_duration:",
                "by_duration:-PT1H",
                "by_duration:bogus",
                "",
            ],
        ),
        ("share.isolation.level", ["read_committed", "READ_COMMITTED", "bogus"]),
        (
            "share.record.lock.duration.ms",
            ["15000", "60000", "60001", "999", "-1", " 20000", "20000.0", "abc"],
        ),
        ("share.delivery.count.limit", ["2", "10", "1", "11", "x"]),
        ("share.heartbeat.interval.ms", ["5000", "15000", "15001"]),
        ("share.session.timeout.ms", ["45000", "44999", "60000", "60001"]),
        ("share.partition.max.record.locks", ["100", "99", "4000", "4001"]),
        ("share.renew.acknowledge.enable", ["true", "FALSE", "yes"]),
        ("share.assignment.interval.ms", ["0", "15000", "15001", "-1"]),
        ("consumer.assignment.interval.ms", ["0", "15001", "-1"]),
        ("consumer.heartbeat.interval.ms", ["5000", "4999", "15001"]),
        ("consumer.session.timeout.ms", ["60000", "100"]),
        ("streams.num.standby.replicas", ["2", "3", "-1"]),
        ("streams.assignor.name", ["sticky", "bogus"]),
        ("streams.initial.rebalance.delay.ms", ["0", "-1"]),
        ("streams.rack.aware.assignment.tags", ["a,b"]),
        ("errors.deadletterqueue.topic.name", ["dlq", "__dlq"]),
        ("errors.deadletterqueue.copy.record.enable", ["true", "x"]),
        ("no.such.group.config", ["1"]),
    ):
        out[name] = [
            await _alter_group_config(c, t.unique("gcv"), name, v, validate_only=True) for v in values
        ]
    group = t.unique("gcv")
    out["delete_unknown_name"] = await _alter_group_config(c, group, "no.such.group.config", None, op=1)
    out["append_to_int"] = await _alter_group_config(c, group, "share.delivery.count.limit", "3", op=2)
    out["empty_group_name"] = await _alter_group_config(c, "", "share.delivery.count.limit", "3")
    out["validate_only_not_applied"] = await _alter_group_config(
        c, group, "share.delivery.count.limit", "4", validate_only=True
    )
    resp = await c.request(
        DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=GROUP,
                    resource_name=group,
                    configuration_keys=["share.delivery.count.limit"],
                )
            ]
        ),
        4,
    )
    assert isinstance(resp, DescribeConfigsResponse)
    out["after_validate_only"] = [(e.value, e.config_source) for e in resp.results[0].configs]
    return out
