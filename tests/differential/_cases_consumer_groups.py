"""Differential cases of the consumer group protocol (KIP-848): ConsumerGroupHeartbeat,
ConsumerGroupDescribe, offsets tied to member epochs, and how the classic APIs see such
groups. Topic ids differ between brokers, so assignments are observed by topic name.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from _diffkit import (
    Observation,
    Target,
    case,
    consumer_heartbeat,
    consumer_join_request,
    find_coordinator,
    metadata,
)

from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

HB_VERSION = 0
Partitions = dict[str, list[int]]


def alias(topic: str) -> str:
    """A topic's name without the run's unique suffix (``diff-cg-two-<run>-<n>`` -> ``diff-cg-two``)."""
    return topic.rsplit("-", 2)[0]


class Member:
    """One consumer-protocol member driven by hand: its id, epoch and owned partitions."""

    def __init__(self, c: RawClient, group: str, topics: list[str] | None = None, **join: Any) -> None:
        self.c = c
        self.group = group
        self.topics = topics
        self.join = join
        self.member_id = ""
        self.epoch = 0
        self.owned: Partitions = {}
        self.ids: dict[uuid.UUID, str] = {}
        self.last: ConsumerGroupHeartbeatResponse | None = None

    async def resolve(self) -> None:
        md = await metadata(self.c, None)
        self.ids = {t.topic_id: t.name for t in md.topics if t.name}

    async def heartbeat(self, *, version: int = HB_VERSION, **fields: Any) -> ConsumerGroupHeartbeatResponse:
        overrides = {**self.join, **fields}
        if self.epoch == 0:
            req = consumer_join_request(
                self.group,
                **{"member_id": self.member_id, "subscribed_topic_names": self.topics, **overrides},
            )
        else:
            req = ConsumerGroupHeartbeatRequest(
                **{
                    "group_id": self.group,
                    "member_id": self.member_id,
                    "member_epoch": self.epoch,
                    **overrides,
                }
            )
        resp = await consumer_heartbeat(self.c, req, version)
        self.last = resp
        if resp.error_code == 0:
            if resp.member_id:
                self.member_id = resp.member_id
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                if any(tp.topic_id not in self.ids for tp in resp.assignment.topic_partitions):
                    await self.resolve()
                self.owned = {
                    self.ids[tp.topic_id]: sorted(tp.partitions) for tp in resp.assignment.topic_partitions
                }
        return resp

    def owned_request(self) -> list[ConsumerGroupHeartbeatRequest.TopicPartitions]:
        by_name = {n: i for i, n in self.ids.items()}
        return [
            ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=by_name[t], partitions=ps)
            for t, ps in sorted(self.owned.items())
        ]

    async def ack(self) -> ConsumerGroupHeartbeatResponse:
        """A full heartbeat reporting what the member owns now."""
        return await self.heartbeat(topic_partitions=self.owned_request())


def hb(resp: ConsumerGroupHeartbeatResponse, ids: dict[uuid.UUID, str] | None = None) -> Observation:
    """What a client observes in a heartbeat response (ids resolved to names)."""
    out: Observation = {
        "error": resp.error_code,
        "epoch": resp.member_epoch,
        "interval": resp.heartbeat_interval_ms,
        "has_member_id": bool(resp.member_id),
        "_message": resp.error_message,
    }
    if resp.assignment is None:
        out["assignment"] = None
    else:
        out["assignment"] = {
            alias((ids or {}).get(tp.topic_id, "?")): sorted(tp.partitions)
            for tp in resp.assignment.topic_partitions
        }
    return out


async def _client(t: Target, group: str) -> RawClient:
    c = await t.client()
    assert await find_coordinator(c, group, 0) == 0
    return c


async def _topic(t: Target, c: RawClient, prefix: str, partitions: int) -> str:
    topic = await t.create_topic(prefix, partitions)
    return topic


async def _describe(
    c: RawClient, group: str, version: int = 0
) -> ConsumerGroupDescribeResponse.DescribedGroup:
    resp = await c.request(ConsumerGroupDescribeRequest(group_ids=[group]), version)
    assert isinstance(resp, ConsumerGroupDescribeResponse)
    return resp.groups[0]


def _assignment(a: ConsumerGroupDescribeResponse.Assignment) -> Partitions:
    return {alias(tp.topic_name): sorted(tp.partitions) for tp in a.topic_partitions}


def described(d: ConsumerGroupDescribeResponse.DescribedGroup, names: dict[str, str]) -> Observation:
    """A described group, members named by ``names`` (member id -> role in the case)."""
    return {
        "error": d.error_code,
        "state": d.group_state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor": d.assignor_name,
        "members": sorted(
            (
                {
                    "member": names.get(m.member_id, "?"),
                    "instance": m.instance_id,
                    "rack": m.rack_id,
                    "epoch": m.member_epoch,
                    "topics": sorted(alias(n) for n in m.subscribed_topic_names),
                    "regex": m.subscribed_topic_regex,
                    "assignment": _assignment(m.assignment),
                    "target": _assignment(m.target_assignment),
                    "member_type": m.member_type,
                    "client_id": m.client_id,
                    "host_set": bool(m.client_host),
                }
                for m in d.members
            ),
            key=lambda m: str(m["member"]),
        ),
        "_message": d.error_message,
    }


# -- joining, leaving, fencing -----------------------------------------------------------


@case("consumer_groups")
async def case_hb_join_gets_everything(t: Target) -> Observation:
    group = t.unique("cg-join")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-join", 3)
    m = Member(c, group, [topic])
    await m.resolve()
    first = hb(await m.heartbeat(), m.ids)
    again = hb(await m.heartbeat(), m.ids)
    return {"first": first, "again": again, "owned": m.owned == {topic: [0, 1, 2]}}


@case("consumer_groups")
async def case_hb_v1_member_id_from_client(t: Target) -> Observation:
    group = t.unique("cg-v1")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-v1", 1)
    m = Member(c, group, [topic])
    await m.resolve()
    empty = hb(await m.heartbeat(version=1))
    mine = str(uuid.uuid4())
    m.member_id = mine
    joined = hb(await m.heartbeat(version=1), m.ids)
    return {"empty_member_id": empty, "joined": joined, "kept_id": m.member_id == mine}


@case("consumer_groups")
async def case_hb_invalid_requests(t: Target) -> Observation:
    group = t.unique("cg-inv")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-inv", 1)
    out: Observation = {}

    async def probe(name: str, **fields: Any) -> None:
        version = fields.pop("version", HB_VERSION)
        req = consumer_join_request(group, **{"subscribed_topic_names": [topic], **fields})
        resp = await consumer_heartbeat(c, req, version)
        out[name] = {"error": resp.error_code, "_message": resp.error_message}

    await probe("empty_group", group_id="")
    await probe("empty_instance", instance_id="")
    await probe("empty_rack", rack_id="")
    await probe("no_rebalance_timeout", rebalance_timeout_ms=-1)
    await probe("no_subscription", subscribed_topic_names=None)
    await probe("empty_subscription", subscribed_topic_names=[])
    await probe("owned_on_join_null", topic_partitions=None)
    await probe(
        "owned_on_join",
        topic_partitions=[
            ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=uuid.uuid4(), partitions=[0])
        ],
    )
    await probe("epoch_minus_3", member_epoch=-3)
    await probe("leave_no_member_id", member_epoch=-1)
    await probe("static_leave_no_instance", member_epoch=-2, member_id="x")
    await probe("positive_epoch_no_member", member_epoch=3)
    await probe(
        "bad_regex",
        subscribed_topic_names=None,
        subscribed_topic_regex="(unclosed",
        version=1,
        member_id=str(uuid.uuid4()),
    )
    await probe(
        "empty_regex",
        subscribed_topic_names=None,
        subscribed_topic_regex="",
        version=1,
        member_id=str(uuid.uuid4()),
    )
    await probe("unknown_assignor", server_assignor="sticky")
    await probe("v1_empty_member", version=1)
    await probe("v1_long_member_id", version=1, member_id="m" * 200)
    await probe("names_and_regex", version=1, member_id=str(uuid.uuid4()), subscribed_topic_regex="cg-inv.*")
    await probe("negative_rebalance_timeout", rebalance_timeout_ms=-5)
    await probe("zero_rebalance_timeout", rebalance_timeout_ms=0)
    return out


@case("consumer_groups")
async def case_hb_fencing(t: Target) -> Observation:
    group = t.unique("cg-fence")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-fence", 2)
    m = Member(c, group, [topic])
    await m.resolve()
    await m.heartbeat()
    joined_epoch = m.epoch
    unknown = Member(c, group, [topic])
    unknown.member_id, unknown.epoch = "no-such-member", 1
    wrong_epoch = await m.heartbeat(member_epoch=m.epoch + 5)
    older = await m.heartbeat(member_epoch=m.epoch - 1)
    return {
        "joined_epoch": joined_epoch,
        "unknown_member": hb(await unknown.heartbeat()),
        "epoch_ahead": hb(wrong_epoch),
        "epoch_behind": hb(older),
        "still_member": hb(await m.heartbeat(member_epoch=joined_epoch), m.ids),
    }


@case("consumer_groups")
async def case_hb_leave_and_rejoin(t: Target) -> Observation:
    group = t.unique("cg-leave")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-leave", 2)
    m = Member(c, group, [topic])
    await m.resolve()
    await m.heartbeat()
    member_id, epoch = m.member_id, m.epoch
    left = await m.heartbeat(member_epoch=-1)
    after = await consumer_heartbeat(
        c, ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch), HB_VERSION
    )
    leave_again = await consumer_heartbeat(
        c, ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=-1), HB_VERSION
    )
    d = described(await _describe(c, group), {})
    rejoin = Member(c, group, [topic])
    await rejoin.resolve()
    r = hb(await rejoin.heartbeat(), rejoin.ids)
    return {
        "left": {
            "error": left.error_code,
            "epoch": left.member_epoch,
            "same_id": left.member_id == member_id,
        },
        "heartbeat_after_leaving": hb(after),
        "leave_again": hb(leave_again),
        "described_after": d,
        "rejoined": r,
        "new_id": rejoin.member_id != member_id,
    }


@case("consumer_groups")
async def case_hb_two_members_reconcile(t: Target) -> Observation:
    group = t.unique("cg-two")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-two", 4)
    a = Member(c, group, [topic])
    await a.resolve()
    steps: Observation = {"a_join": hb(await a.heartbeat(), a.ids)}
    b = Member(c, group, [topic])
    await b.resolve()
    steps["b_join"] = hb(await b.heartbeat(), b.ids)
    steps["a_revoke"] = hb(await a.heartbeat(), a.ids)
    steps["b_still_waiting"] = hb(await b.heartbeat(), b.ids)
    steps["describe_mid"] = described(await _describe(c, group), {a.member_id: "a", b.member_id: "b"})
    steps["a_ack"] = hb(await a.ack(), a.ids)
    steps["b_gets"] = hb(await b.heartbeat(), b.ids)
    steps["b_ack"] = hb(await b.ack(), b.ids)
    steps["describe_end"] = described(await _describe(c, group), {a.member_id: "a", b.member_id: "b"})
    steps["disjoint"] = not set(a.owned.get(topic, [])) & set(b.owned.get(topic, []))
    return steps


@case("consumer_groups")
async def case_hb_range_assignor_two_topics(t: Target) -> Observation:
    group = t.unique("cg-range")
    c = await _client(t, group)
    t1 = await _topic(t, c, "cg-range-a", 3)
    t2 = await _topic(t, c, "cg-range-b", 3)
    a = Member(c, group, [t1, t2], server_assignor="range")
    await a.resolve()
    await a.heartbeat()
    b = Member(c, group, [t1, t2], server_assignor="range")
    await b.resolve()
    await b.heartbeat()
    # Kafka 4.4 computes a new target at most once per consumer.assignment.interval.ms (1 s).
    await asyncio.sleep(1.2)
    await a.heartbeat()
    await a.ack()
    await b.heartbeat()
    await b.ack()
    names = {a.member_id: "a", b.member_id: "b"}
    d = await _describe(c, group)
    targets = sorted([sorted(len(p) for p in _assignment(m.target_assignment).values()) for m in d.members])
    return {
        "assignor": d.assignor_name,
        "target_sizes": targets,
        "epochs": sorted(m.member_epoch for m in d.members),
        "_names": str(names),
    }


@case("consumer_groups")
async def case_hb_static_member(t: Target) -> Observation:
    group = t.unique("cg-static")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-static", 2)
    a = Member(c, group, [topic], instance_id="inst-a")
    await a.resolve()
    await a.heartbeat()
    first_id, first_epoch, owned = a.member_id, a.epoch, dict(a.owned)
    # Another process with the same instance id while the first is still there.
    dup = Member(c, group, [topic], instance_id="inst-a")
    dup_join = hb(await dup.heartbeat())
    temp_leave = await a.heartbeat(member_epoch=-2)
    describe_after_leave = described(await _describe(c, group), {first_id: "a"})
    back = Member(c, group, [topic], instance_id="inst-a")
    await back.resolve()
    rejoined = hb(await back.heartbeat(), back.ids)
    old_id_hb = hb(await a.heartbeat(member_epoch=first_epoch))
    return {
        "dup_join": dup_join,
        "temp_leave": {"error": temp_leave.error_code, "epoch": temp_leave.member_epoch},
        "described_after_leave": describe_after_leave,
        "rejoined": rejoined,
        "same_assignment": back.owned == owned,
        "kept_epoch": back.epoch == first_epoch,
        "old_id": old_id_hb,
    }


@case("consumer_groups")
async def case_hb_static_leave_for_good(t: Target) -> Observation:
    group = t.unique("cg-static-leave")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-sl", 1)
    a = Member(c, group, [topic], instance_id="inst-x")
    await a.resolve()
    await a.heartbeat()
    left = await a.heartbeat(member_epoch=-1)
    d = await _describe(c, group)
    return {"left": hb(left), "members": len(d.members), "state": d.group_state, "group_epoch": d.group_epoch}


# -- describe, list -----------------------------------------------------------------------


@case("consumer_groups")
async def case_describe_unknown_and_classic(t: Target) -> Observation:
    group = t.unique("cg-desc")
    c = await _client(t, group)
    classic = t.unique("cg-classic")
    c2 = await _client(t, classic)
    first = await c2.request(
        JoinGroupRequest(
            group_id=classic,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(
                    name="range", metadata=b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"
                )
            ],
        ),
        5,
    )
    assert isinstance(first, JoinGroupResponse)
    joined = await c2.request(
        JoinGroupRequest(
            group_id=classic,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id=first.member_id,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(
                    name="range", metadata=b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"
                )
            ],
        ),
        5,
    )
    assert isinstance(joined, JoinGroupResponse) and joined.error_code == 0, joined
    unknown = await _describe(c, group)
    cls = await _describe(c2, classic)
    resp = await c.request(
        ConsumerGroupDescribeRequest(group_ids=[""], include_authorized_operations=True), 0
    )
    assert isinstance(resp, ConsumerGroupDescribeResponse)
    # A consumer-protocol member may not join a classic group that has members.
    topic = await _topic(t, c, "cg-desc", 1)
    m = Member(c2, classic, [topic])
    joining_classic = hb(await m.heartbeat())
    return {
        "unknown": {"error": unknown.error_code, "state": unknown.group_state, "_m": unknown.error_message},
        "classic": {"error": cls.error_code, "state": cls.group_state, "_m": cls.error_message},
        "empty_id": {"error": resp.groups[0].error_code, "_m": resp.groups[0].error_message},
        "consumer_member_joins_classic": joining_classic,
    }


@case("consumer_groups")
async def case_describe_and_list_consumer_group(t: Target) -> Observation:
    group = t.unique("cg-list")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-list", 2)
    m = Member(c, group, [topic], rack_id="rack-1")
    await m.resolve()
    await m.heartbeat()
    d1 = described(await _describe(c, group, 1), {m.member_id: "m"})
    listed = await c.request(ListGroupsRequest(types_filter=["consumer"]), 5)
    assert isinstance(listed, ListGroupsResponse)
    mine = [
        {"protocol_type": g.protocol_type, "state": g.group_state, "type": g.group_type}
        for g in listed.groups
        if g.group_id == group
    ]
    listed_classic = await c.request(ListGroupsRequest(types_filter=["classic"]), 5)
    assert isinstance(listed_classic, ListGroupsResponse)
    listed_v4 = await c.request(ListGroupsRequest(states_filter=["stable"]), 4)
    assert isinstance(listed_v4, ListGroupsResponse)
    dg = await c.request(DescribeGroupsRequest(groups=[group]), 5)
    dg6 = await c.request(DescribeGroupsRequest(groups=[group]), 6)
    assert isinstance(dg, DescribeGroupsResponse) and isinstance(dg6, DescribeGroupsResponse)
    await m.heartbeat(member_epoch=-1)
    d2 = described(await _describe(c, group), {})
    return {
        "described": d1,
        "listed_consumer": mine,
        "in_classic_list": any(g.group_id == group for g in listed_classic.groups),
        "listed_v4_stable": [
            (g.protocol_type, g.group_state) for g in listed_v4.groups if g.group_id == group
        ],
        "describe_groups_v5": [
            {
                "error": g.error_code,
                "state": g.group_state,
                "protocol_type": g.protocol_type,
                "members": len(g.members),
            }
            for g in dg.groups
        ],
        "describe_groups_v6": [
            {
                "error": g.error_code,
                "state": g.group_state,
                "protocol_type": g.protocol_type,
                "_m": g.error_message,
            }
            for g in dg6.groups
        ],
        "after_leave": d2,
    }


# -- offsets -----------------------------------------------------------------------------


async def _commit(c: RawClient, group: str, topic: str, member: str, epoch: int, version: int = 9) -> int:
    resp = await c.request(
        OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=epoch,
            member_id=member,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=5
                        )
                    ],
                )
            ],
        ),
        version,
    )
    assert isinstance(resp, OffsetCommitResponse)
    return resp.topics[0].partitions[0].error_code


async def _fetch_offsets(c: RawClient, group: str, topic: str, member: str | None, epoch: int) -> Observation:
    resp = await c.request(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group,
                    member_id=member,
                    member_epoch=epoch,
                    topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])],
                )
            ]
        ),
        9,
    )
    assert isinstance(resp, OffsetFetchResponse)
    g = resp.groups[0]
    return {
        "error": g.error_code,
        "offsets": [
            (p.partition_index, p.committed_offset, p.error_code) for tp in g.topics for p in tp.partitions
        ],
    }


@case("consumer_groups")
async def case_offsets_with_member_epoch(t: Target) -> Observation:
    group = t.unique("cg-off")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-off", 1)
    m = Member(c, group, [topic])
    await m.resolve()
    await m.heartbeat()
    return {
        "ok": await _commit(c, group, topic, m.member_id, m.epoch),
        "stale": await _commit(c, group, topic, m.member_id, m.epoch - 1),
        "ahead": await _commit(c, group, topic, m.member_id, m.epoch + 1),
        "unknown_member": await _commit(c, group, topic, "nobody", m.epoch),
        "no_member_simple": await _commit(c, group, topic, "", -1),
        "v8_generation": await _commit(c, group, topic, m.member_id, m.epoch, version=8),
        "fetch_ok": await _fetch_offsets(c, group, topic, m.member_id, m.epoch),
        "fetch_stale": await _fetch_offsets(c, group, topic, m.member_id, m.epoch - 1),
        "fetch_unknown": await _fetch_offsets(c, group, topic, "nobody", m.epoch),
        "fetch_no_member": await _fetch_offsets(c, group, topic, None, -1),
    }


@case("consumer_groups")
async def case_offsets_commit_unknown_group_with_epoch(t: Target) -> Observation:
    group = t.unique("cg-off-ug")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-off-ug", 1)
    return {
        "v9_member": await _commit(c, group, topic, "someone", 3),
        "v8_member": await _commit(c, group, topic, "someone", 3, version=8),
        "fetch": await _fetch_offsets(c, group, topic, "someone", 3),
    }


@case("consumer_groups")
async def case_regex_subscription(t: Target) -> Observation:
    group = t.unique("cg-regex")
    c = await _client(t, group)
    prefix = t.unique("cgre")
    t1 = await t.create_topic(prefix + "-one", 1)  # type: ignore[arg-type]
    m = Member(c, group, None, subscribed_topic_regex=f".*{prefix}-.*", subscribed_topic_names=None)
    m.topics = None
    await m.resolve()
    first = await m.heartbeat(version=1, member_id=str(uuid.uuid4()))
    m.join = {}
    seen: list[Partitions] = [dict(m.owned)]
    for _ in range(40):
        if m.owned:
            break
        await asyncio.sleep(0.25)
        await m.heartbeat()
        seen.append(dict(m.owned))
    got_first = sorted(m.owned.values())
    t2 = await t.create_topic(prefix + "-two", 2)  # type: ignore[arg-type]
    for _ in range(80):
        if len(m.owned) == 2:
            break
        await asyncio.sleep(0.25)
        await m.heartbeat()
        if m.last is not None and m.last.assignment is not None:
            await m.ack()
    got_both = sorted(m.owned.values())
    d = await _describe(c, group)
    return {
        "first": first.error_code,
        "got_first": got_first,
        "got_both": got_both,
        "regex": d.members[0].subscribed_topic_regex == f".*{prefix}-.*",
        "names": len(d.members[0].subscribed_topic_names),
        "_t": [t1, t2],
    }


@case("consumer_groups")
async def case_hb_unknown_group(t: Target) -> Observation:
    group = t.unique("cg-nogroup")
    c = await _client(t, group)
    m = Member(c, group, [])
    m.member_id, m.epoch = "someone", 3
    beat = hb(await m.heartbeat())
    m.epoch = -1
    leave = hb(await m.heartbeat())
    return {"heartbeat": beat, "leave": leave}


@case("consumer_groups")
async def case_classic_join_into_consumer_group(t: Target) -> Observation:
    group = t.unique("cg-mixed")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-mixed", 1)
    m = Member(c, group, [topic])
    await m.resolve()
    await m.heartbeat()
    out: Observation = {}
    for protocol_type in ("connect", "consumer"):
        resp = await c.request(
            JoinGroupRequest(
                group_id=group,
                session_timeout_ms=10000,
                rebalance_timeout_ms=10000,
                member_id="",
                protocol_type=protocol_type,
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
            ),
            5,
        )
        assert isinstance(resp, JoinGroupResponse)
        out[protocol_type] = resp.error_code
    out["mixed"] = await _classic_member_in_consumer_group(c, group, topic, m)
    await m.heartbeat(member_epoch=-1)
    # An empty consumer group becomes a classic one for a classic member.
    first = await c.request(
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=_SUBSCRIPTION)],
        ),
        5,
    )
    assert isinstance(first, JoinGroupResponse)
    out["after_empty"] = first.error_code
    return out


_SUBSCRIPTION = (
    b"\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"  # consumer protocol v0, no topics, no user data
)


def _subscription(topic: str) -> bytes:
    from aiokafka_lite.wire.messages import ConsumerProtocolSubscription

    return b"\x00\x01" + ConsumerProtocolSubscription(topics=[topic], owned_partitions=[]).encode(1)


async def _classic_member_in_consumer_group(c: RawClient, group: str, topic: str, m: Member) -> Observation:
    """A classic member joins a consumer group that has a consumer-protocol member."""
    from aiokafka_lite.wire.messages import (
        ConsumerProtocolAssignment,
        HeartbeatRequest,
        HeartbeatResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )

    def join(member_id: str, metadata: bytes) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id=member_id,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata),
                JoinGroupRequest.JoinGroupRequestProtocol(name="roundrobin", metadata=metadata),
            ],
        )

    first = await c.request(join("", _subscription(topic)), 5)
    assert isinstance(first, JoinGroupResponse)
    bad = await c.request(join(first.member_id, b"\x00"), 5)
    assert isinstance(bad, JoinGroupResponse)
    joined = await c.request(join(first.member_id, _subscription(topic)), 5)
    assert isinstance(joined, JoinGroupResponse)
    d = await _describe(c, group, 1)
    sync = await c.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name=joined.protocol_name,
            assignments=[],
        ),
        5,
    )
    assert isinstance(sync, SyncGroupResponse)
    version = int.from_bytes(sync.assignment[:2], "big") if len(sync.assignment) >= 2 else -1
    assigned = (
        ConsumerProtocolAssignment.decode(memoryview(sync.assignment)[2:], min(version, 3))
        if version >= 0
        else None
    )
    beat = await c.request(
        HeartbeatRequest(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id), 4
    )
    assert isinstance(beat, HeartbeatResponse)
    wrong_gen = await c.request(
        HeartbeatRequest(group_id=group, generation_id=joined.generation_id + 7, member_id=joined.member_id),
        4,
    )
    assert isinstance(wrong_gen, HeartbeatResponse)
    left = await c.request(
        LeaveGroupRequest(
            group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=joined.member_id)]
        ),
        4,
    )
    assert isinstance(left, LeaveGroupResponse)
    return {
        "bad_metadata": bad.error_code,
        "join": joined.error_code,
        "generation_is_group_epoch_or_less": 0 < joined.generation_id <= d.group_epoch,
        "leader": "self" if joined.leader == joined.member_id else joined.leader,
        "protocol": (joined.protocol_type, joined.protocol_name),
        "members_in_response": len(joined.members),
        "skip_assignment": joined.skip_assignment,
        "member_types": sorted(x.member_type for x in d.members),
        "sync": sync.error_code,
        "sync_protocol": (sync.protocol_type, sync.protocol_name),
        "assignment_version": version,
        "assigned": []
        if assigned is None
        else sorted(p for tp in assigned.assigned_partitions for p in tp.partitions),
        "heartbeat": beat.error_code,
        "heartbeat_wrong_generation": wrong_gen.error_code,
        "leave": (left.error_code, [x.error_code for x in left.members]),
    }


@case("consumer_groups")
async def case_txn_offset_commit_with_member_epoch(t: Target) -> Observation:
    from _cases import _add_offsets, _end, _txn

    from aiokafka_lite.wire.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse

    topic, c, txn, pid, epoch = await _txn(t, "cg-txn")
    group = t.unique("cg-txn")
    assert await _add_offsets(c, txn, pid, epoch, group) == 0
    gc = await _client(t, group)
    m = Member(gc, group, [topic])
    await m.resolve()
    await m.heartbeat()

    async def commit(member: str, member_epoch: int, version: int = 3) -> int:
        resp = await c.request(  # type: ignore[attr-defined]
            TxnOffsetCommitRequest(
                transactional_id=txn,
                group_id=group,
                producer_id=pid,
                producer_epoch=epoch,
                generation_id_or_member_epoch=member_epoch,
                member_id=member,
                topics=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                        name=topic,
                        partitions=[
                            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=7, committed_metadata=""
                            )
                        ],
                    )
                ],
            ),
            version,
        )
        assert isinstance(resp, TxnOffsetCommitResponse)
        return resp.topics[0].partitions[0].error_code

    out = {
        "stale": await commit(m.member_id, m.epoch - 1),
        "unknown_member": await commit("nobody", m.epoch),
        "no_member": await commit("", -1),
        "v2_no_member": await commit("", -1, version=2),
        "ok": await commit(m.member_id, m.epoch),
    }
    out["end"] = await _end(c, txn, pid, epoch, commit=True)  # type: ignore[arg-type]
    return out


@case("consumer_groups")
async def case_hb_rejoin_with_epoch_zero(t: Target) -> Observation:
    group = t.unique("cg-rejoin0")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-rejoin0", 2)
    m = Member(c, group, [topic])
    await m.resolve()
    m.member_id = str(uuid.uuid4())
    first = hb(await m.heartbeat(version=1), m.ids)
    member_id, epoch = m.member_id, m.epoch
    m.epoch = 0  # as a client does after being fenced
    again = hb(await m.heartbeat(version=1), m.ids)
    d = await _describe(c, group)
    return {
        "first": first,
        "again": again,
        "same_id": m.member_id == member_id,
        "epoch_kept": m.epoch == epoch,
        "group_epoch": d.group_epoch,
        "members": len(d.members),
    }


@case("consumer_groups")
async def case_hb_regex_dialect(t: Target) -> Observation:
    group = t.unique("cg-re2")
    c = await _client(t, group)
    out: Observation = {}
    for name, pattern in [
        ("lookahead", "a(?=b)"),
        ("backreference", r"(a)\1"),
        ("possessive", "a++"),
        ("atomic", "(?>a)"),
        ("named_group", "(?P<x>a)b"),
        ("class", "[a-z0-9._-]+"),
        ("non_greedy", "a.*?b"),
        ("case_flag", "(?i)abc"),
        ("unicode_class", r"\pL+"),
        ("quote", r"\Qa.b\E"),
        ("end_z", r"abc\z"),
    ]:
        join = consumer_join_request(group, member_id=str(uuid.uuid4()), subscribed_topic_regex=pattern)
        resp = await consumer_heartbeat(c, join, 1)
        out[name] = resp.error_code
        if resp.error_code == 0:
            await consumer_heartbeat(
                c,
                ConsumerGroupHeartbeatRequest(
                    group_id=group, member_id=resp.member_id or "", member_epoch=-1
                ),
                1,
            )
    return out


@case("consumer_groups")
async def case_describe_authorized_operations(t: Target) -> Observation:
    group = t.unique("cg-ops")
    c = await _client(t, group)
    m = Member(c, group, [])
    await m.heartbeat()
    resp = await c.request(
        ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=True), 0
    )
    assert isinstance(resp, ConsumerGroupDescribeResponse)
    plain = await c.request(ConsumerGroupDescribeRequest(group_ids=[group]), 0)
    assert isinstance(plain, ConsumerGroupDescribeResponse)
    return {"asked": resp.groups[0].authorized_operations, "not_asked": plain.groups[0].authorized_operations}


@case("consumer_groups")
async def case_online_upgrade_and_downgrade(t: Target) -> Observation:
    """A live classic group becomes a consumer group when a consumer-protocol member joins,
    and a classic one again when that member leaves."""
    from aiokafka_lite.wire.messages import (
        ConsumerProtocolAssignment,
        HeartbeatRequest,
        HeartbeatResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )

    group = t.unique("cg-upgrade")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-upgrade", 2)

    def join(member_id: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=group,
            session_timeout_ms=30000,
            rebalance_timeout_ms=10000,
            member_id=member_id,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=_subscription(topic))
            ],
        )

    first = await c.request(join(""), 5)
    assert isinstance(first, JoinGroupResponse)
    joined = await c.request(join(first.member_id), 5)
    assert isinstance(joined, JoinGroupResponse) and joined.error_code == 0, joined
    everything = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=[0, 1])]
    )
    synced = await c.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=joined.member_id, assignment=b"\x00\x01" + everything.encode(1)
                )
            ],
        ),
        5,
    )
    assert isinstance(synced, SyncGroupResponse) and synced.error_code == 0, synced
    m = Member(c, group, [topic])
    await m.resolve()
    upgraded = hb(await m.heartbeat(), m.ids)
    d = await _describe(c, group, 1)
    classic_view = {
        "type": sorted(x.member_type for x in d.members),
        "classic_epoch_is_generation": any(x.member_epoch == joined.generation_id for x in d.members),
        "classic_assignment": sorted(
            p
            for x in d.members
            if x.member_type == 0
            for tp in x.assignment.topic_partitions
            for p in tp.partitions
        ),
    }
    await asyncio.sleep(1.1)  # past the assignment interval
    beat = await c.request(
        HeartbeatRequest(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id), 4
    )
    assert isinstance(beat, HeartbeatResponse)
    listed = await c.request(ListGroupsRequest(), 5)
    assert isinstance(listed, ListGroupsResponse)
    as_upgraded = [(g.group_type, g.protocol_type) for g in listed.groups if g.group_id == group]
    left = hb(await m.heartbeat(member_epoch=-1))
    listed = await c.request(ListGroupsRequest(), 5)
    assert isinstance(listed, ListGroupsResponse)
    as_downgraded = [
        (g.group_type, g.protocol_type, g.group_state) for g in listed.groups if g.group_id == group
    ]
    after = await c.request(
        HeartbeatRequest(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id), 4
    )
    assert isinstance(after, HeartbeatResponse)
    described = await _describe(c, group)
    return {
        "upgraded": upgraded["error"],
        "new_member_partitions": upgraded["assignment"],
        "described": {"state": d.group_state, "epoch_above_generation": d.group_epoch > joined.generation_id},
        "classic_view": classic_view,
        "classic_heartbeat_after_upgrade": beat.error_code,
        "listed_upgraded": as_upgraded,
        "left": left["error"],
        "listed_downgraded": as_downgraded,
        "classic_heartbeat_after_downgrade": after.error_code,
        "consumer_describe_after": described.error_code,
    }


@case("consumer_groups")
async def case_hb_static_member_errors(t: Target) -> Observation:
    group = t.unique("cg-static-err")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-static-err", 1)
    a = Member(c, group, [topic], instance_id="inst-1")
    await a.resolve()
    await a.heartbeat()
    out: Observation = {
        "unknown_instance": hb(await a.heartbeat(instance_id="inst-9")),
        "no_instance": hb(await a.heartbeat(instance_id=None)),
        "other_member_id": hb(
            await consumer_heartbeat(
                c,
                ConsumerGroupHeartbeatRequest(
                    group_id=group, member_id="someone-else", member_epoch=a.epoch, instance_id="inst-1"
                ),
                0,
            )
        ),
    }
    out["leave_for_now"] = hb(await a.heartbeat(member_epoch=-2, instance_id="inst-1"))
    out["leave_for_now_again"] = hb(
        await consumer_heartbeat(
            c,
            ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=a.member_id, member_epoch=-2, instance_id="inst-1"
            ),
            0,
        )
    )
    out["heartbeat_while_away"] = hb(
        await consumer_heartbeat(
            c,
            ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=a.member_id, member_epoch=2, instance_id="inst-1"
            ),
            0,
        )
    )
    return out


@case("consumer_groups")
async def case_delete_and_offset_delete_consumer_group(t: Target) -> Observation:
    from aiokafka_lite.wire.messages import (
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
    )

    group = t.unique("cg-del")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-del", 1)
    other = await _topic(t, c, "cg-del-other", 1)
    m = Member(c, group, [topic])
    await m.resolve()
    await m.heartbeat()
    committed = [await _commit(c, group, n, m.member_id, m.epoch) for n in (topic, other)]

    async def offset_delete() -> Observation:
        resp = await c.request(
            OffsetDeleteRequest(
                group_id=group,
                topics=[
                    OffsetDeleteRequest.OffsetDeleteRequestTopic(
                        name=n,
                        partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)],
                    )
                    for n in (topic, other)
                ],
            ),
            0,
        )
        assert isinstance(resp, OffsetDeleteResponse)
        return {"error": resp.error_code, "partitions": [tp.partitions[0].error_code for tp in resp.topics]}

    async def delete() -> int:
        resp = await c.request(DeleteGroupsRequest(groups_names=[group]), 2)
        assert isinstance(resp, DeleteGroupsResponse)
        return resp.results[0].error_code

    busy_offsets = await offset_delete()
    busy = await delete()
    await m.heartbeat(member_epoch=-1)
    empty_offsets = await offset_delete()
    deleted = await delete()
    d = await _describe(c, group)
    return {
        "committed": committed,
        "offset_delete_active": busy_offsets,
        "delete_active": busy,
        "offset_delete_empty": empty_offsets,
        "delete_empty": deleted,
        "describe_after": d.error_code,
    }


@case("consumer_groups")
async def case_share_group_id_for_consumer_apis(t: Target) -> Observation:
    """Group ids are one space: a share group's id is not a consumer or classic group."""
    from aiokafka_lite.wire.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

    group = t.unique("cg-share")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-share", 1)
    share = await c.request(
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, subscribed_topic_names=[topic]
        ),
        1,
    )
    assert isinstance(share, ShareGroupHeartbeatResponse) and share.error_code == 0, share
    m = Member(c, group, [topic])
    beat = hb(await m.heartbeat())
    d = await _describe(c, group)
    join = await c.request(
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=_subscription(topic))
            ],
        ),
        5,
    )
    assert isinstance(join, JoinGroupResponse)
    return {
        "consumer_heartbeat": beat,
        "consumer_describe": {"error": d.error_code, "_m": d.error_message},
        "classic_join": join.error_code,
    }


@case("consumer_groups")
async def case_classic_members_need_a_common_protocol(t: Target) -> Observation:
    group = t.unique("cg-proto")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-proto", 2)
    m = Member(c, group, [topic])
    await m.resolve()
    await m.heartbeat()

    async def join(names: list[str]) -> int:
        member = ""
        for _ in range(2):
            resp = await c.request(
                JoinGroupRequest(
                    group_id=group,
                    session_timeout_ms=10000,
                    rebalance_timeout_ms=10000,
                    member_id=member,
                    protocol_type="consumer",
                    protocols=[
                        JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=_subscription(topic))
                        for n in names
                    ],
                ),
                5,
            )
            assert isinstance(resp, JoinGroupResponse)
            if resp.error_code != 79:
                return resp.error_code
            member = resp.member_id
        return -1

    return {
        "first": await join(["range", "roundrobin"]),
        "sharing_one": await join(["roundrobin", "sticky"]),
        "sharing_none": await join(["cooperative-sticky"]),
    }


@case("consumer_groups")
async def case_member_that_does_not_revoke_in_time(t: Target) -> Observation:
    group = t.unique("cg-rbto")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-rbto", 2)
    a = Member(c, group, [topic], rebalance_timeout_ms=1500)
    await a.resolve()
    await a.heartbeat()
    b = Member(c, group, [topic])
    await b.resolve()
    await b.heartbeat()
    await asyncio.sleep(1.2)  # past the assignment interval
    told = hb(await a.heartbeat(), a.ids)
    for _ in range(6):  # B keeps heartbeating, A never acknowledges
        await asyncio.sleep(0.5)
        await b.heartbeat()
    d = await _describe(c, group)
    after = hb(await a.heartbeat())
    await b.heartbeat()
    return {
        "told_to_revoke": {
            "error": told["error"],
            "partitions": sum(len(p) for p in (told["assignment"] or {}).values()),
        },
        "members_after": len(d.members),
        "a_after": after,
        "b_owns": sorted(p for ps in b.owned.values() for p in ps),
    }


@case("consumer_groups")
async def case_group_configs_shape_the_heartbeat(t: Target) -> Observation:
    from _cases_share_admin import _alter_group_config

    group = t.unique("cg-conf")
    c = await _client(t, group)
    topic = await _topic(t, c, "cg-conf", 1)
    altered = [
        await _alter_group_config(c, group, "consumer.heartbeat.interval.ms", "7000"),
        await _alter_group_config(c, group, "consumer.session.timeout.ms", "50000"),
    ]
    for _ in range(20):  # Kafka applies group configs from its metadata log after answering
        m = Member(c, group, [topic])
        await m.resolve()
        joined = hb(await m.heartbeat(), m.ids)
        await m.heartbeat(member_epoch=-1)
        if joined["interval"] == 7000:
            break
        await asyncio.sleep(0.2)
    return {"altered": altered, "interval": joined["interval"]}


@case("consumer_groups")
async def case_topic_created_after_subscribing_by_name(t: Target) -> Observation:
    group = t.unique("cg-later")
    c = await _client(t, group)
    name = t.unique("cg-later-topic")
    m = Member(c, group, [name])
    first = hb(await m.heartbeat())
    before = (await _describe(c, group)).group_epoch
    await _create_named(t, c, name, 2)
    await m.resolve()
    for _ in range(60):
        if m.owned:
            break
        await asyncio.sleep(0.25)
        await m.heartbeat()
    d = await _describe(c, group)
    return {
        "first": first,
        "owned": sorted(p for ps in m.owned.values() for p in ps),
        "epoch_moved": d.group_epoch > before,
        "state": d.group_state,
    }


async def _create_named(t: Target, c: RawClient, name: str, partitions: int) -> None:
    from aiokafka_lite.wire.messages import CreateTopicsRequest, CreateTopicsResponse

    resp = await c.request(
        CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=name, num_partitions=partitions, replication_factor=-1
                )
            ],
            timeout_ms=30000,
        ),
        5,
    )
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0, resp
    await t.wait_for_topic(name, partitions)
