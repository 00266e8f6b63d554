"""Differential cases beyond produce: fetch, list offsets, groups, admin, metadata, versions."""

from __future__ import annotations

import asyncio
import struct
import time
import uuid

from _diffkit import (
    RETRIABLE_COORDINATOR_ERRORS,
    Observation,
    Target,
    batch,
    case,
    fetch,
    find_coordinator,
    metadata,
    produce,
)

from aiokafka_lite.core.errors import KafkaConnectionError
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

# -- fetch ----------------------------------------------------------------------------


async def _topic_with_records(
    t: Target, prefix: str, batches: int = 2, **kw: object
) -> tuple[str, RawClient]:
    topic = await t.create_topic(prefix, **kw)  # type: ignore[arg-type]
    c = await t.client()
    for _ in range(batches):
        r = await produce(c, topic, batch(3))
        assert r.error == 0, r
    return topic, c


@case("fetch")
async def case_offset_in_the_middle_of_a_batch(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "mid")
    return (await fetch(c, topic, offset=4)).observe()


@case("fetch")
async def case_offset_at_log_end(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "end")
    return (await fetch(c, topic, offset=6)).observe()


@case("fetch")
async def case_offset_past_log_end(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "past")
    return (await fetch(c, topic, offset=7)).observe()


@case("fetch")
async def case_negative_offset(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "neg")
    return (await fetch(c, topic, offset=-1)).observe()


@case("fetch")
async def case_unknown_topic(t: Target) -> Observation:
    c = await t.client()
    return (await fetch(c, t.unique("nosuch"))).observe()


@case("fetch")
async def case_unknown_partition(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "nopart", batches=0)
    return (await fetch(c, topic, partition=5)).observe()


async def _fetch_raw(c: RawClient, req: FetchRequest, version: int) -> FetchResponse:
    resp = await c.request(req, version)
    assert isinstance(resp, FetchResponse)
    return resp


def _fetch_req(
    topic: str,
    *,
    epoch: int = -1,
    offset: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
    topic_id: uuid.UUID | None = None,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                topic_id=topic_id or uuid.UUID(int=0),
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=0,
                        current_leader_epoch=epoch,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
    )


def _fetch_codes(resp: FetchResponse) -> Observation:
    return {
        "top_error": resp.error_code,
        "partitions": [
            (p.error_code, p.high_watermark, len(p.records or b"") > 0)
            for r in resp.responses
            for p in r.partitions
        ],
    }


@case("fetch")
async def case_leader_epoch_from_the_future(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "epochfut", batches=1)
    return _fetch_codes(await _fetch_raw(c, _fetch_req(topic, epoch=5), 12))


@case("fetch")
async def case_current_leader_epoch(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "epochnow", batches=1)
    return _fetch_codes(await _fetch_raw(c, _fetch_req(topic, epoch=0), 12))


@case("fetch")
async def case_unknown_session_id(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "sess", batches=1)
    return _fetch_codes(await _fetch_raw(c, _fetch_req(topic, session_id=123456, session_epoch=1), 12))


@case("fetch")
async def case_session_epoch_without_session(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "sessep", batches=1)
    return _fetch_codes(await _fetch_raw(c, _fetch_req(topic, session_id=0, session_epoch=3), 12))


@case("fetch")
async def case_unknown_topic_id(t: Target) -> Observation:
    c = await t.client()
    resp = await _fetch_raw(c, _fetch_req("", topic_id=uuid.uuid4()), 13)
    return _fetch_codes(resp)


@case("fetch")
async def case_zero_max_bytes(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "zero", batches=2)
    return _fetch_codes(await _fetch_raw(c, _fetch_req(topic, max_bytes=0, partition_max_bytes=0), 12))


# -- list offsets / leader epochs / delete records ------------------------------------


async def _list_offsets(c: RawClient, topic: str, timestamp: int, partition: int = 0) -> Observation:
    resp = await c.request(
        ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=partition, timestamp=timestamp
                        )
                    ],
                )
            ],
        ),
        8,
    )
    assert isinstance(resp, ListOffsetsResponse)
    p = resp.topics[0].partitions[0]
    return {"error": p.error_code, "offset": p.offset, "leader_epoch": p.leader_epoch}


@case("offsets")
async def case_list_offsets_specials(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "lo", batches=2)
    return {
        "earliest": await _list_offsets(c, topic, -2),
        "latest": await _list_offsets(c, topic, -1),
        "max_timestamp": {k: v for k, v in (await _list_offsets(c, topic, -3)).items() if k != "offset"},
        "future": await _list_offsets(c, topic, 2**62),
        "unknown_partition": await _list_offsets(c, topic, -1, partition=9),
    }


@case("offsets")
async def case_list_offsets_unknown_topic(t: Target) -> Observation:
    c = await t.client()
    return await _list_offsets(c, t.unique("nosuch"), -1)


@case("offsets")
async def case_offset_for_leader_epoch(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "ofle", batches=1)
    out = {}
    for name, epoch in (("current", 0), ("future", 3), ("none", -1)):
        resp = await c.request(
            OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                        topic=topic,
                        partitions=[
                            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                                partition=0, current_leader_epoch=-1, leader_epoch=epoch
                            )
                        ],
                    )
                ],
            ),
            4,
        )
        assert isinstance(resp, OffsetForLeaderEpochResponse)
        p = resp.topics[0].partitions[0]
        out[name] = (p.error_code, p.leader_epoch, p.end_offset)
    return out


async def _delete_records(c: RawClient, topic: str, offset: int) -> tuple[int, int]:
    resp = await c.request(
        DeleteRecordsRequest(
            topics=[
                DeleteRecordsRequest.DeleteRecordsTopic(
                    name=topic,
                    partitions=[
                        DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=offset)
                    ],
                )
            ],
            timeout_ms=30000,
        ),
        2,
    )
    assert isinstance(resp, DeleteRecordsResponse)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.low_watermark


@case("offsets")
async def case_delete_records(t: Target) -> Observation:
    topic, c = await _topic_with_records(t, "delrec", batches=2)
    return {
        "beyond_hw": await _delete_records(c, topic, 7),
        "middle": await _delete_records(c, topic, 4),
        "backwards": await _delete_records(c, topic, 2),
        "to_hw": await _delete_records(c, topic, -1),
        "fetch_before_start": (await fetch(c, topic, offset=0)).observe(),
        "earliest": await _list_offsets(c, topic, -2),
    }


# -- groups ---------------------------------------------------------------------------

_RANGE = b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"  # consumer protocol v1 subscription, no topics


async def _group_client(t: Target, group: str) -> RawClient:
    c = await t.client()
    assert await find_coordinator(c, group, 0) == 0
    return c


async def _join(
    c: RawClient,
    group: str,
    member: str = "",
    *,
    session: int = 10000,
    protocol_type: str = "consumer",
    protocols: list[str] | None = None,
    version: int = 5,
) -> JoinGroupResponse:
    resp = await c.request(
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=session,
            rebalance_timeout_ms=10000,
            member_id=member,
            protocol_type=protocol_type,
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name=p, metadata=_RANGE)
                for p in (protocols or ["range"])
            ],
        ),
        version,
    )
    assert isinstance(resp, JoinGroupResponse)
    return resp


async def _joined(t: Target, prefix: str) -> tuple[RawClient, str, str, int]:
    """A group with one member that joined and synced: (client, group, member id, generation)."""
    group = t.unique(prefix)
    c = await _group_client(t, group)
    first = await _join(c, group)
    assert first.error_code == 79, first  # MEMBER_ID_REQUIRED
    joined = await _join(c, group, first.member_id)
    assert joined.error_code == 0, joined
    sync = await c.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"")
            ],
        ),
        5,
    )
    assert isinstance(sync, SyncGroupResponse) and sync.error_code == 0, sync
    return c, group, joined.member_id, joined.generation_id


@case("groups")
async def case_join_requires_member_id(t: Target) -> Observation:
    group = t.unique("join")
    c = await _group_client(t, group)
    first = await _join(c, group)
    second = await _join(c, group, first.member_id)
    return {
        "first": first.error_code,
        "member_id_given": bool(first.member_id),
        "second": second.error_code,
        "generation": second.generation_id,
        "leader_is_self": second.leader == second.member_id,
        "protocol": second.protocol_name,
    }


@case("groups")
async def case_join_session_timeout_too_small(t: Target) -> Observation:
    group = t.unique("sto")
    c = await _group_client(t, group)
    return {"error": (await _join(c, group, session=1000)).error_code}


@case("groups")
async def case_join_session_timeout_too_large(t: Target) -> Observation:
    group = t.unique("stl")
    c = await _group_client(t, group)
    return {"error": (await _join(c, group, session=3_600_001)).error_code}


@case("groups")
async def case_join_empty_group_id(t: Target) -> Observation:
    c = await t.client()
    return {"error": (await _join(c, "")).error_code}


@case("groups")
async def case_join_empty_protocol_type(t: Target) -> Observation:
    group = t.unique("ept")
    c = await _group_client(t, group)
    return {"error": (await _join(c, group, protocol_type="")).error_code}


@case("groups")
async def case_join_no_protocols(t: Target) -> Observation:
    group = t.unique("nop")
    c = await _group_client(t, group)
    resp = await c.request(
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[],
        ),
        5,
    )
    assert isinstance(resp, JoinGroupResponse)
    return {"error": resp.error_code}


@case("groups")
async def case_join_inconsistent_protocol(t: Target) -> Observation:
    c, group, _member, _gen = await _joined(t, "incons")
    other = await _join(c, group, protocol_type="connect", protocols=["other"])
    return {"error": other.error_code}


@case("groups")
async def case_join_unknown_member_id(t: Target) -> Observation:
    c, group, _member, _gen = await _joined(t, "unkmem")
    return {"error": (await _join(c, group, "no-such-member")).error_code}


async def _heartbeat(c: RawClient, group: str, generation: int, member: str) -> int:
    resp = await c.request(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member), 4)
    assert isinstance(resp, HeartbeatResponse)
    return resp.error_code


@case("groups")
async def case_heartbeat(t: Target) -> Observation:
    c, group, member, gen = await _joined(t, "hb")
    return {
        "ok": await _heartbeat(c, group, gen, member),
        "wrong_generation": await _heartbeat(c, group, gen + 1, member),
        "unknown_member": await _heartbeat(c, group, gen, "nobody"),
        "unknown_group": await _heartbeat(c, t.unique("nogroup"), 1, "nobody"),
    }


@case("groups")
async def case_sync_errors(t: Target) -> Observation:
    c, group, member, gen = await _joined(t, "sync")
    out = {}
    for name, g, m, ptype in (
        ("wrong_generation", gen + 1, member, "consumer"),
        ("unknown_member", gen, "nobody", "consumer"),
        ("wrong_protocol_type", gen, member, "connect"),
    ):
        resp = await c.request(
            SyncGroupRequest(
                group_id=group,
                generation_id=g,
                member_id=m,
                protocol_type=ptype,
                protocol_name="range",
                assignments=[],
            ),
            5,
        )
        assert isinstance(resp, SyncGroupResponse)
        out[name] = resp.error_code
    return out


@case("groups")
async def case_leave(t: Target) -> Observation:
    c, group, member, _gen = await _joined(t, "leave")
    resp = await c.request(
        LeaveGroupRequest(
            group_id=group,
            members=[
                LeaveGroupRequest.MemberIdentity(member_id="nobody"),
                LeaveGroupRequest.MemberIdentity(member_id=member),
            ],
        ),
        5,
    )
    assert isinstance(resp, LeaveGroupResponse)
    return {"error": resp.error_code, "members": [m.error_code for m in resp.members]}


async def _commit(
    c: RawClient,
    group: str,
    topic: str,
    offset: int,
    *,
    generation: int = -1,
    member: str = "",
    metadata_str: str | None = "",
    partition: int = 0,
) -> int:
    # A client retries coordinator errors: Kafka 4.x may name itself coordinator before
    # the group's shard has loaded, and then answer the commit NOT_COORDINATOR (16) or
    # COORDINATOR_LOAD_IN_PROGRESS (14) for a moment.
    deadline = time.monotonic() + 30
    while True:
        code = await _commit_once(c, group, topic, offset, generation, member, metadata_str, partition)
        if code not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
            return code
        await asyncio.sleep(0.05)
        await find_coordinator(c, group, 0)


async def _commit_once(
    c: RawClient,
    group: str,
    topic: str,
    offset: int,
    generation: int,
    member: str,
    metadata_str: str | None,
    partition: int,
) -> int:
    resp = await c.request(
        OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=partition,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata=metadata_str,
                        )
                    ],
                )
            ],
        ),
        8,
    )
    assert isinstance(resp, OffsetCommitResponse)
    return resp.topics[0].partitions[0].error_code


async def _fetch_offsets(c: RawClient, group: str, topic: str, partitions: list[int]) -> Observation:
    resp = await c.request(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=partitions)
                    ],
                )
            ],
            require_stable=True,
        ),
        8,
    )
    assert isinstance(resp, OffsetFetchResponse)
    g = resp.groups[0]
    return {
        "group_error": g.error_code,
        "partitions": [
            (p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for tp in g.topics
            for p in tp.partitions
        ],
    }


@case("groups")
async def case_simple_commit_and_fetch(t: Target) -> Observation:
    topic, _ = await _topic_with_records(t, "commit", batches=1)
    group = t.unique("simple")
    c = await _group_client(t, group)
    return {
        "commit": await _commit(c, group, topic, 2, metadata_str="m"),
        "commit_unknown_partition": await _commit(c, group, topic, 1, partition=7),
        "commit_unknown_topic": await _commit(c, group, t.unique("nosuch"), 1),
        "fetched": await _fetch_offsets(c, group, topic, [0, 1]),
        "unknown_group": await _fetch_offsets(c, t.unique("nogroup"), topic, [0]),
    }


@case("groups")
async def case_commit_metadata_too_large(t: Target) -> Observation:
    topic, _ = await _topic_with_records(t, "meta", batches=0)
    group = t.unique("meta")
    c = await _group_client(t, group)
    return {"error": await _commit(c, group, topic, 1, metadata_str="x" * 4097)}


@case("groups")
async def case_commit_in_active_group(t: Target) -> Observation:
    topic, _ = await _topic_with_records(t, "act", batches=0)
    c, group, member, gen = await _joined(t, "act")
    return {
        "right_generation": await _commit(c, group, topic, 1, generation=gen, member=member),
        "wrong_generation": await _commit(c, group, topic, 1, generation=gen + 1, member=member),
        "unknown_member": await _commit(c, group, topic, 1, generation=gen, member="nobody"),
        "simple_commit": await _commit(c, group, topic, 1),
    }


@case("groups")
async def case_describe_and_delete(t: Target) -> Observation:
    c, group, _member, _gen = await _joined(t, "desc")
    unknown = t.unique("nogroup")
    described = await c.request(DescribeGroupsRequest(groups=[group, unknown]), 5)
    assert isinstance(described, DescribeGroupsResponse)
    deleted = await c.request(DeleteGroupsRequest(groups_names=[group, unknown]), 2)
    assert isinstance(deleted, DeleteGroupsResponse)
    return {
        "described": sorted(
            (
                g.group_id == group,
                g.error_code,
                g.group_state,
                g.protocol_type,
                g.protocol_data,
                len(g.members),
            )
            for g in described.groups
        ),
        "deleted": sorted((r.group_id == group, r.error_code) for r in deleted.results),
    }


@case("groups")
async def case_offset_delete(t: Target) -> Observation:
    topic, _ = await _topic_with_records(t, "odel", batches=0)
    group = t.unique("odel")
    c = await _group_client(t, group)
    await _commit(c, group, topic, 1)

    async def delete(g: str) -> Observation:
        resp = await c.request(
            OffsetDeleteRequest(
                group_id=g,
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
        return {
            "error": resp.error_code,
            "partitions": [p.error_code for tp in resp.topics for p in tp.partitions],
        }

    return {
        "existing": await delete(group),
        "unknown": await delete(t.unique("nogroup")),
        "after": await _fetch_offsets(c, group, topic, [0]),
    }


@case("groups")
async def case_find_coordinator_bad_key_type(t: Target) -> Observation:
    c = await t.client()
    resp = await c.request(FindCoordinatorRequest(key="x", key_type=7), 3)
    assert isinstance(resp, FindCoordinatorResponse)
    return {"error": resp.error_code}


# -- admin ----------------------------------------------------------------------------


async def _create(
    c: RawClient,
    name: str,
    partitions: int = 1,
    rf: int = -1,
    configs: dict[str, str] | None = None,
    validate_only: bool = False,
) -> int:
    resp = await c.request(
        CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=rf,
                    configs=[
                        CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                        for k, v in (configs or {}).items()
                    ],
                )
            ],
            timeout_ms=30000,
            validate_only=validate_only,
        ),
        7,
    )
    assert isinstance(resp, CreateTopicsResponse)
    return resp.topics[0].error_code


@case("admin")
async def case_create_topic_invalid_names(t: Target) -> Observation:
    c = await t.client()
    names = {
        "space": "bad name!",
        "dot": ".",
        "dotdot": "..",
        "empty": "",
        "long": "x" * 250,
        "slash": "a/b",
        "max_length": t.unique("l").ljust(249, "x"),
    }
    return {k: await _create(c, v) for k, v in names.items()}


@case("admin")
async def case_create_topic_bad_arguments(t: Target) -> Observation:
    c = await t.client()
    existing = await t.create_topic("exists")
    return {
        "exists": await _create(c, existing),
        "zero_partitions": await _create(c, t.unique("p0"), partitions=0),
        "negative_partitions": await _create(c, t.unique("pn"), partitions=-5),
        "rf_too_large": await _create(c, t.unique("rf"), rf=3),
        "rf_zero": await _create(c, t.unique("rf0"), rf=0),
        "unknown_config": await _create(c, t.unique("uc"), configs={"no.such.config": "1"}),
        "bad_config_value": await _create(c, t.unique("bc"), configs={"max.message.bytes": "lots"}),
        "bad_cleanup_policy": await _create(c, t.unique("cp"), configs={"cleanup.policy": "shred"}),
        "bad_timestamp_type": await _create(c, t.unique("tt"), configs={"message.timestamp.type": "Now"}),
        "removed_difference_config": await _create(
            c, t.unique("td"), configs={"message.timestamp.difference.max.ms": "1000"}
        ),
        "validate_only": await _create(c, t.unique("vo"), validate_only=True),
    }


@case("admin")
async def case_validate_only_creates_nothing(t: Target) -> Observation:
    c = await t.client()
    name = t.unique("vo")
    code = await _create(c, name, validate_only=True)
    meta = await metadata(c, [name])
    return {"create": code, "metadata": meta.topics[0].error_code}


@case("admin")
async def case_metadata_topic_names(t: Target) -> Observation:
    c = await t.client()
    out = {}
    for key, name, auto in (
        ("invalid_auto", "bad name!", True),
        ("invalid", "bad name!", False),
        ("too_long_auto", "y" * 250, True),
        ("unknown", t.unique("unk"), False),
    ):
        meta = await metadata(c, [name], auto_create=auto)
        out[key] = meta.topics[0].error_code
    return out


@case("admin")
async def case_metadata_topic_id_before_v12(t: Target) -> Observation:
    """v10/v11 have a topic id field but Kafka serves ids only from v12: the request is refused."""
    c = await t.client()
    existing = await t.create_topic("mdid")
    some_id = uuid.uuid4()
    out: Observation = {}
    for key, version, name, topic_id in (
        ("v10_null_name", 10, None, some_id),
        ("v11_null_name_zero_id", 11, None, uuid.UUID(int=0)),
        ("v10_name_and_id", 10, t.unique("nosuch"), some_id),
        ("v11_existing_and_id", 11, existing, some_id),
        ("v12_null_name_unknown_id", 12, None, some_id),
    ):
        req = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name=name)],
            allow_auto_topic_creation=False,
        )
        resp = await c.request(req, version)
        assert isinstance(resp, MetadataResponse)
        out[key] = [
            (
                tp.error_code,
                tp.name == name or (name is None and tp.name in ("", None)),
                tp.topic_id == topic_id,
            )
            for tp in resp.topics
        ]
        out[key + "_null_name_as"] = [tp.name for tp in resp.topics] if name is None else None
    return out


@case("admin")
async def case_metadata_auto_create(t: Target) -> Observation:
    c = await t.client()
    name = t.unique("auto")
    first = await metadata(c, [name], auto_create=True)
    await t.wait_for_topic(name, 1)
    second = await metadata(c, [name], auto_create=True)
    return {
        "first": first.topics[0].error_code,
        "second": second.topics[0].error_code,
        "partitions": len(second.topics[0].partitions),
    }


@case("admin")
async def case_delete_topics(t: Target) -> Observation:
    c = await t.client()
    existing = await t.create_topic("del")
    resp = await c.request(
        DeleteTopicsRequest(topic_names=[existing, t.unique("nosuch")], timeout_ms=30000), 5
    )
    assert isinstance(resp, DeleteTopicsResponse)
    return {"results": sorted((r.name == existing, r.error_code) for r in resp.responses)}


@case("admin")
async def case_create_partitions(t: Target) -> Observation:
    c = await t.client()
    existing = await t.create_topic("cp", partitions=2)
    out = {}
    for key, name, count in (
        ("shrink", existing, 1),
        ("same", existing, 2),
        ("unknown", t.unique("nosuch"), 3),
        ("grow", existing, 3),
    ):
        resp = await c.request(
            CreatePartitionsRequest(
                topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count, assignments=None)
                ],
                timeout_ms=30000,
                validate_only=False,
            ),
            3,
        )
        assert isinstance(resp, CreatePartitionsResponse)
        out[key] = resp.results[0].error_code
    return out


# The topic defaults produce validation depends on (not ones a test node's
# server.properties may change, like segment.bytes).
_CHECKED_DEFAULTS = (
    "cleanup.policy",
    "compression.type",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
)


@case("admin")
async def case_describe_topic_config_defaults(t: Target) -> Observation:
    c = await t.client()
    name = await t.create_topic("defaults")
    resp = await c.request(
        DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=2, resource_name=name, configuration_keys=list(_CHECKED_DEFAULTS)
                )
            ]
        ),
        4,
    )
    assert isinstance(resp, DescribeConfigsResponse)
    r = resp.results[0]
    return {"error": r.error_code, "configs": sorted((e.name, e.value) for e in r.configs)}


@case("admin")
async def case_describe_configs_unknown_topic(t: Target) -> Observation:
    c = await t.client()
    resp = await c.request(
        DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=2, resource_name=t.unique("nosuch"), configuration_keys=None
                )
            ]
        ),
        4,
    )
    assert isinstance(resp, DescribeConfigsResponse)
    return {"error": resp.results[0].error_code}


@case("admin")
async def case_alter_configs_errors(t: Target) -> Observation:
    c = await t.client()
    name = await t.create_topic("alter")
    out = {}
    for key, configs in (
        ("unknown_key", {"no.such": "1"}),
        ("bad_value", {"retention.ms": "soon"}),
        ("ok", {"retention.ms": "1000"}),
    ):
        resp = await c.request(
            AlterConfigsRequest(
                resources=[
                    AlterConfigsRequest.AlterConfigsResource(
                        resource_type=2,
                        resource_name=name,
                        configs=[
                            AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in configs.items()
                        ],
                    )
                ]
            ),
            2,
        )
        assert isinstance(resp, AlterConfigsResponse)
        out[key] = resp.responses[0].error_code
    resp = await c.request(
        IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=2,
                    resource_name=name,
                    configs=[
                        IncrementalAlterConfigsRequest.AlterableConfig(
                            name="retention.ms", config_operation=9, value="1"
                        )
                    ],
                )
            ]
        ),
        1,
    )
    assert isinstance(resp, IncrementalAlterConfigsResponse)
    out["incremental_bad_operation"] = resp.responses[0].error_code
    return out


# -- protocol versions ----------------------------------------------------------------


async def _raw_header_only(t: Target, api_key: int, version: int) -> Observation:
    c = await t.client()
    body = struct.pack(">hhih", api_key, version, 1, -1)
    await c.send_raw(struct.pack(">i", len(body)) + body)
    try:
        frame = await c.read_frame(within=5)
    except Exception as e:
        return {"answer": type(e).__name__}
    return {"answer": "frame", "size": len(frame)}


async def _api_versions_v99(t: Target, header_tags: bool) -> Observation:
    c = await t.client()
    body = struct.pack(">hhih", 18, 99, 1, 1) + b"x" + (b"\x00" if header_tags else b"")
    await c.send_raw(struct.pack(">i", len(body)) + body)
    try:
        frame = await c.read_frame(within=5)
    except (TimeoutError, KafkaConnectionError) as e:
        return {"answer": type(e).__name__}
    from aiokafka_lite.wire.framing import decode_response

    _, resp = decode_response(frame, 18, 0)
    assert isinstance(resp, ApiVersionsResponse)
    # Only ApiVersions' own range comes back (its max differs between Kafka versions).
    return {"error": resp.error_code, "keys": [(k.api_key, k.min_version) for k in resp.api_keys]}


@case("versions")
async def case_api_versions_unknown_version(t: Target) -> Observation:
    return await _api_versions_v99(t, header_tags=True)


@case("versions")
async def case_api_versions_unknown_version_without_header_tags(t: Target) -> Observation:
    return await _api_versions_v99(t, header_tags=False)


@case("versions")
async def case_metadata_unknown_version(t: Target) -> Observation:
    return await _raw_header_only(t, 3, 99)


@case("versions")
async def case_produce_v2(t: Target) -> Observation:
    return await _raw_header_only(t, 0, 2)


@case("versions")
async def case_unknown_api_key(t: Target) -> Observation:
    return await _raw_header_only(t, 999, 0)


@case("versions")
async def case_api_versions_v3(t: Target) -> Observation:
    c = await t.client()
    resp = await c.request(ApiVersionsRequest(client_software_name="diff", client_software_version="1"), 3)
    assert isinstance(resp, ApiVersionsResponse)
    return {"error": resp.error_code}


@case("versions")
async def case_api_versions_bad_software_name(t: Target) -> Observation:
    c = await t.client()
    resp = await c.request(
        ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"), 3
    )
    assert isinstance(resp, ApiVersionsResponse)
    return {"error": resp.error_code}


_CONFIG_VALUES = {
    "segment_bytes_small": ("segment.bytes", "1000"),
    "segment_bytes_1mb": ("segment.bytes", "1048576"),
    "retention_ms_minus_2": ("retention.ms", "-2"),
    "retention_ms_minus_1": ("retention.ms", "-1"),
    "retention_bytes_minus_5": ("retention.bytes", "-5"),
    "min_insync_zero": ("min.insync.replicas", "0"),
    "preallocate_maybe": ("preallocate", "maybe"),
    "preallocate_TRUE": ("preallocate", "TRUE"),
    "dirty_ratio_2": ("min.cleanable.dirty.ratio", "2"),
    "flush_messages_zero": ("flush.messages", "0"),
    "cleanup_policy_empty": ("cleanup.policy", ""),
    "cleanup_policy_both": ("cleanup.policy", "compact,delete"),
    "cleanup_policy_spaces": ("cleanup.policy", "compact, delete"),
    "compression_brotli": ("compression.type", "brotli"),
    "compression_uncompressed": ("compression.type", "uncompressed"),
    "max_message_bytes_negative": ("max.message.bytes", "-1"),
    "max_message_bytes_zero": ("max.message.bytes", "0"),
    "timestamp_after_negative": ("message.timestamp.after.max.ms", "-1"),
    "segment_ms_zero": ("segment.ms", "0"),
    "max_compaction_lag_zero": ("max.compaction.lag.ms", "0"),
    "segment_index_bytes_3": ("segment.index.bytes", "3"),
    "unclean_yes": ("unclean.leader.election.enable", "yes"),
    "delete_retention_negative": ("delete.retention.ms", "-1"),
    "retention_ms_float": ("retention.ms", "1.5"),
    "null_value": ("retention.ms", None),
}


@case("admin")
async def case_create_topic_config_values(t: Target) -> Observation:
    c = await t.client()
    out = {}
    for key, (name, value) in _CONFIG_VALUES.items():
        resp = await c.request(
            CreateTopicsRequest(
                topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name=t.unique("cfg"),
                        num_partitions=1,
                        replication_factor=-1,
                        configs=[CreateTopicsRequest.CreatableTopicConfig(name=name, value=value)],
                    )
                ],
                timeout_ms=30000,
                validate_only=True,
            ),
            7,
        )
        assert isinstance(resp, CreateTopicsResponse)
        out[key] = resp.topics[0].error_code
    return out


# -- share groups (KIP-932) -------------------------------------------------------------


async def _share_heartbeat(
    c: RawClient, group: str, member: str, epoch: int, topics: list[str] | None
) -> Observation:
    resp = await c.request(
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics
        ),
        1,
    )
    assert isinstance(resp, ShareGroupHeartbeatResponse)
    parts = None
    if resp.assignment is not None:
        parts = sorted((str(tp.topic_id), sorted(tp.partitions)) for tp in resp.assignment.topic_partitions)
    # The heartbeat interval is a broker setting (the test launcher shortens Kafka's).
    return {"error": resp.error_code, "epoch": resp.member_epoch, "assignment": parts}


def _share_acks(first: int, last: int, types: list[int]) -> list[ShareFetchRequest.AcknowledgementBatch]:
    return [
        ShareFetchRequest.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)
    ]


@case("share")
async def case_share_group_records_lifecycle(t: Target) -> Observation:
    """Join, acquire, accept/release/reject, redelivery with delivery count 2, session errors."""
    c = await t.client()
    topic = await t.create_topic("share")
    group = t.unique("sg")
    alter = await c.request(
        IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=32,
                    resource_name=group,
                    configs=[
                        IncrementalAlterConfigsRequest.AlterableConfig(
                            name="share.auto.offset.reset", config_operation=0, value="earliest"
                        )
                    ],
                )
            ]
        ),
        1,
    )
    assert isinstance(alter, IncrementalAlterConfigsResponse)
    await produce(c, topic, batch(3))
    meta = await metadata(c, [topic])
    tid = meta.topics[0].topic_id
    out: Observation = {"alter": [r.error_code for r in alter.responses]}
    out["find_coordinator"] = await find_coordinator(c, group, 0)
    member = str(uuid.uuid4())
    out["join_without_topics"] = await _share_heartbeat(c, group, member, 0, None)
    for _ in range(150):  # a fresh Kafka answers NOT_COORDINATOR until its share coordinator is loaded
        joined = await _share_heartbeat(c, group, member, 0, [topic])
        if joined["error"] not in (14, 15, 16):  # loading / not available / not coordinator
            break
        await asyncio.sleep(0.2)
    out["heartbeat_unknown_group"] = await _share_heartbeat(c, t.unique("nosg"), member, 3, None)
    # Kafka may answer the join before its assignor sees the topic (an empty assignment).
    out["join"] = {**joined, "assignment": joined["assignment"] is not None}
    out["stale_epoch"] = await _share_heartbeat(c, group, member, int(joined["epoch"]) + 5, None)  # type: ignore[call-overload]

    epoch = 0

    async def share_fetch(acks: list[ShareFetchRequest.AcknowledgementBatch] | None = None) -> Observation:
        nonlocal epoch
        resp = await c.request(
            ShareFetchRequest(
                group_id=group,
                member_id=member,
                share_session_epoch=epoch,
                max_wait_ms=200,
                min_bytes=1,
                max_bytes=1 << 20,
                max_records=10,
                batch_size=10,
                topics=[
                    ShareFetchRequest.FetchTopic(
                        topic_id=tid,
                        partitions=[
                            ShareFetchRequest.FetchPartition(
                                partition_index=0, acknowledgement_batches=acks or []
                            )
                        ],
                    )
                ],
            ),
            2,
        )
        assert isinstance(resp, ShareFetchResponse)
        if resp.error_code == 0:
            epoch += 1
        return {
            "error": resp.error_code,
            "partitions": [
                (
                    p.error_code,
                    p.acknowledge_error_code,
                    [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records],
                )
                for tr in resp.responses
                for p in tr.partitions
            ],
        }

    first = await share_fetch()
    for _ in range(60):  # Kafka fails (or answers nothing) until the share-partition state is initialized
        if joined["error"] or (first["partitions"] and first["partitions"][0][2]):  # type: ignore[index]
            break
        await asyncio.sleep(0.2)
        first = await share_fetch()
    out["first_fetch"] = first
    out["ack_accept_release_reject"] = await share_fetch(_share_acks(0, 2, [1, 2, 3]))
    out["ack_below_start"] = await share_fetch(_share_acks(0, 0, [1]))
    out["ack_never_delivered"] = await share_fetch(_share_acks(5, 5, [1]))
    saved, epoch = epoch, 42
    out["wrong_session_epoch"] = await share_fetch()
    epoch = saved
    ack = await c.request(
        ShareAcknowledgeRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=-1,
            topics=[
                ShareAcknowledgeRequest.AcknowledgeTopic(
                    topic_id=tid,
                    partitions=[
                        ShareAcknowledgeRequest.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=[
                                ShareAcknowledgeRequest.AcknowledgementBatch(
                                    first_offset=1, last_offset=1, acknowledge_types=[1]
                                )
                            ],
                        )
                    ],
                )
            ],
        ),
        2,
    )
    assert isinstance(ack, ShareAcknowledgeResponse)
    out["close_with_accept"] = (ack.error_code, [p.error_code for tr in ack.responses for p in tr.partitions])
    epoch = 5
    out["fetch_after_close"] = await share_fetch()
    out["leave"] = await _share_heartbeat(c, group, member, -1, None)
    out["leave_again"] = await _share_heartbeat(c, group, member, -1, None)
    return out


@case("share")
async def case_share_group_configs(t: Target) -> Observation:
    """IncrementalAlterConfigs on a GROUP resource: valid, unknown, malformed, out of bounds."""
    c = await t.client()
    out: Observation = {}
    for key, name, value in (
        ("reset_earliest", "share.auto.offset.reset", "earliest"),
        ("reset_bogus", "share.auto.offset.reset", "bogus"),
        ("unknown_name", "share.no.such.config", "1"),
        ("limit_ok", "share.delivery.count.limit", "2"),
        ("limit_too_small", "share.delivery.count.limit", "1"),
        ("limit_too_large", "share.delivery.count.limit", "11"),
        ("limit_not_a_number", "share.delivery.count.limit", "many"),
        ("lock_too_large", "share.record.lock.duration.ms", "3600000"),
    ):
        resp = await c.request(
            IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=32,
                        resource_name=t.unique("gc"),
                        configs=[
                            IncrementalAlterConfigsRequest.AlterableConfig(
                                name=name, config_operation=0, value=value
                            )
                        ],
                    )
                ]
            ),
            1,
        )
        assert isinstance(resp, IncrementalAlterConfigsResponse)
        out[key] = [r.error_code for r in resp.responses]
    return out
