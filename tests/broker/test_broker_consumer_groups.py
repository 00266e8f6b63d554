"""The embedded consumer-group coordinator (KIP-848) driven with raw requests.

A fake clock drives sessions, rebalance timeouts and the assignment interval; the
differential suite (tests/differential/_cases_consumer_groups.py) checks the same
answers against Apache Kafka. Here: what needs time, configuration or a restart.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.groups import GroupConfig, GroupCoordinator, ManualClock, register_group_handlers
from aiokafka_lite.broker.groups.assignors import AssignmentSpec, MemberSpec, range_assign, uniform_assign
from aiokafka_lite.broker.groups.topic_regex import RegexError, compile_topic_regex
from aiokafka_lite.broker.state import BrokerConfig, BrokerInfo, ClusterState
from aiokafka_lite.core import errors
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    DeleteGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

E = errors
SESSION_MS = 45000
INTERVAL_MS = 1000

Owned = dict[str, list[int]]


class Env:
    def __init__(self, extra: dict[str, str] | None = None) -> None:
        self.cluster = ClusterState(BrokerConfig(extra=dict(extra or {})))
        self.cluster.brokers[1] = BrokerInfo(1, "127.0.0.1", 9001, alive=True)
        self.cluster.create_topic("t", 4)
        self.cluster.create_topic("u", 3)
        self.clock = ManualClock()
        self.gc = GroupCoordinator(self.cluster, config=GroupConfig(), clock=self.clock)
        self.cluster.services["groups"] = self.gc
        self.registry = HandlerRegistry()
        register_group_handlers(self.registry, self.cluster)

    def topic_id(self, name: str) -> uuid.UUID:
        topic = self.cluster.get_topic(name)
        assert topic is not None
        return topic.topic_id

    def names(self, assignment: Any) -> Owned:
        return {
            self.cluster.topics_by_id[tp.topic_id].name: sorted(tp.partitions)
            for tp in assignment.topic_partitions
        }

    async def call(self, req: Request, version: int, client: str = "cli", broker: int | None = None) -> Any:
        entry = self.registry.get(req.API_KEY)
        assert entry is not None and entry.min_version <= version <= entry.max_version
        req = type(req).decode(req.encode(version), version)
        node = (
            broker
            if broker is not None
            else self.gc.placement.coordinator_id(getattr(req, "group_id", "g") or "g")
        )
        ctx = RequestContext(node, self.cluster, req.API_KEY, version, 1, client, None, "c1", "127.0.0.1")
        resp = await entry.handler(ctx, req)
        assert isinstance(resp, Response)
        return type(resp).decode(resp.encode(version), version)

    async def describe(self, group: str = "g") -> ConsumerGroupDescribeResponse.DescribedGroup:
        return await self.describe_on(self.gc.placement.coordinator_id(group), group)

    async def describe_on(
        self, broker: int, group: str = "g"
    ) -> ConsumerGroupDescribeResponse.DescribedGroup:
        resp = await self.call(ConsumerGroupDescribeRequest(group_ids=[group]), 1, broker=broker)
        assert isinstance(resp, ConsumerGroupDescribeResponse)
        return resp.groups[0]


class Member:
    """One member driven by hand; ``owned`` is what it has after following the answers."""

    def __init__(self, env: Env, topics: list[str] | None = None, group: str = "g", **join: Any) -> None:
        self.env = env
        self.group = group
        self.topics = topics if topics is not None else ["t"]
        self.join = join
        self.member_id = ""
        self.epoch = 0
        self.owned: Owned = {}

    async def heartbeat(
        self, *, ack: bool = False, version: int = 0, **fields: Any
    ) -> ConsumerGroupHeartbeatResponse:
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch
        )
        if self.epoch == 0:
            req.rebalance_timeout_ms = 30000
            req.subscribed_topic_names = self.topics
            req.topic_partitions = []
            for k, v in self.join.items():
                setattr(req, k, v)
        # A static member names its instance in every request.
        req.instance_id = self.join.get("instance_id")
        if ack:
            req.topic_partitions = [
                ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=self.env.topic_id(t), partitions=ps)
                for t, ps in self.owned.items()
            ]
        for k, v in fields.items():
            setattr(req, k, v)
        resp = await self.env.call(req, version)
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        if resp.error_code == 0 and resp.member_epoch >= 0:
            self.member_id = resp.member_id or self.member_id
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = self.env.names(resp.assignment)
        return resp

    async def leave(self, epoch: int = -1) -> ConsumerGroupHeartbeatResponse:
        return await self.heartbeat(member_epoch=epoch)


def partitions(*members: Member) -> list[tuple[str, int]]:
    return sorted((t, p) for m in members for t, ps in m.owned.items() for p in ps)


# -- joining and reconciling ----------------------------------------------------------


async def test_first_member_gets_every_partition_at_once() -> None:
    env = Env()
    a = Member(env)
    resp = await a.heartbeat()
    assert (resp.error_code, resp.member_epoch, resp.heartbeat_interval_ms) == (0, 2, 5000)
    assert a.owned == {"t": [0, 1, 2, 3]}
    d = await env.describe()
    assert (d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == ("Stable", 2, 2, "uniform")
    assert d.members[0].client_id == "cli" and d.members[0].client_host == "/127.0.0.1"


async def test_a_partition_moves_only_after_its_owner_released_it() -> None:
    env = Env()
    a, b = Member(env), Member(env)
    await a.heartbeat()
    await b.heartbeat()
    assert b.owned == {} and (await env.describe()).group_state == "Assigning"
    # Within the assignment interval nothing moves.
    await a.heartbeat()
    assert a.owned == {"t": [0, 1, 2, 3]}
    env.clock.advance(INTERVAL_MS)
    revoke = await a.heartbeat()
    assert revoke.member_epoch == 2 and len(a.owned["t"]) == 2  # told to revoke, same epoch
    kept = set(a.owned["t"])
    # B moves to the new epoch but gets nothing while A still owns its partitions.
    waiting = await b.heartbeat()
    assert waiting.member_epoch == 3 and b.owned == {}
    d = await env.describe()
    member_a = next(m for m in d.members if m.member_id == a.member_id)
    assert env.names(member_a.assignment) == {"t": [0, 1, 2, 3]}  # still owned until acked
    acked = await a.heartbeat(ack=True)
    assert acked.member_epoch == 3 and acked.assignment is None
    await b.heartbeat()
    assert set(b.owned["t"]) == {0, 1, 2, 3} - kept
    await b.heartbeat(ack=True)
    assert (await env.describe()).group_state == "Stable"
    assert partitions(a, b) == [("t", p) for p in range(4)]


async def test_a_member_that_acks_with_its_previous_epoch_is_accepted() -> None:
    env = Env()
    a, b = Member(env), Member(env)
    await a.heartbeat()
    await b.heartbeat()
    env.clock.advance(INTERVAL_MS)
    await a.heartbeat()
    await a.heartbeat(ack=True)  # now at epoch 3
    assert a.epoch == 3
    # The response was lost: the member comes back with epoch 2, owning a subset.
    late = await a.heartbeat(member_epoch=2, ack=True)
    assert late.error_code == 0 and late.member_epoch == 3
    # Claiming partitions it no longer has, with the old epoch, fences it.
    a.owned = {"t": [0, 1, 2, 3]}
    fenced = await a.heartbeat(member_epoch=2, ack=True)
    assert fenced.error_code == E.FencedMemberEpochError.code


async def test_subscription_change_bumps_the_group_epoch() -> None:
    env = Env()
    a = Member(env)
    await a.heartbeat()
    same = await a.heartbeat(subscribed_topic_names=["t"])
    assert (await env.describe()).group_epoch == 2 and same.assignment is None
    await a.heartbeat(subscribed_topic_names=["t", "u"])
    env.clock.advance(INTERVAL_MS)
    await a.heartbeat()
    assert a.owned == {"t": [0, 1, 2, 3], "u": [0, 1, 2]}
    assert (await env.describe()).group_epoch == 3


async def test_partitions_added_to_a_topic_are_assigned() -> None:
    env = Env()
    a = Member(env)
    await a.heartbeat()
    env.cluster.add_partitions("t", 6)
    env.clock.advance(INTERVAL_MS)
    await a.heartbeat()
    assert a.owned == {"t": [0, 1, 2, 3, 4, 5]}


# -- sessions and timeouts -------------------------------------------------------------


async def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    env = Env()
    a, b = Member(env), Member(env)
    await a.heartbeat()
    await b.heartbeat()
    env.clock.advance(INTERVAL_MS)
    await a.heartbeat()
    await a.heartbeat(ack=True)
    await b.heartbeat()
    for _ in range(10):  # A heartbeats every 5 s, B stops
        env.clock.advance(5000)
        await a.heartbeat(ack=True)
    assert len((await env.describe()).members) == 1
    assert a.owned == {"t": [0, 1, 2, 3]}
    gone = await b.heartbeat()
    assert gone.error_code == E.UnknownMemberIdError.code


async def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed() -> None:
    env = Env()
    a = Member(env, rebalance_timeout_ms=3000)
    b = Member(env)
    await a.heartbeat()
    await b.heartbeat()
    env.clock.advance(INTERVAL_MS)
    await a.heartbeat()  # asked to revoke, never acks
    env.clock.advance(2000)
    await b.heartbeat()
    assert b.owned == {}
    env.clock.advance(1500)
    d = await env.describe()
    assert [m.member_id for m in d.members] == [b.member_id]
    env.clock.advance(INTERVAL_MS)
    await b.heartbeat()
    assert b.owned == {"t": [0, 1, 2, 3]}
    assert (await a.heartbeat()).error_code == E.UnknownMemberIdError.code


async def test_session_timeout_and_heartbeat_interval_follow_the_group_configs() -> None:
    env = Env()
    env.cluster.group_configs["g"] = {
        "consumer.heartbeat.interval.ms": "7000",
        "consumer.session.timeout.ms": "50000",
    }
    a = Member(env)
    assert (await a.heartbeat()).heartbeat_interval_ms == 7000
    env.clock.advance(49000)
    assert (await a.heartbeat()).error_code == 0
    env.clock.advance(50001)
    assert (await a.heartbeat()).error_code == E.UnknownMemberIdError.code


# -- static members ----------------------------------------------------------------------


async def test_static_member_leaves_for_now_and_returns_with_its_partitions() -> None:
    env = Env()
    a = Member(env, instance_id="i-1")
    other = Member(env)
    await a.heartbeat()
    await other.heartbeat()
    env.clock.advance(INTERVAL_MS)
    await a.heartbeat()
    await a.heartbeat(ack=True)
    await other.heartbeat()
    kept, epoch = a.owned, a.epoch
    left = await a.leave(-2)
    assert (left.error_code, left.member_epoch) == (0, -2)
    group_epoch = (await env.describe()).group_epoch
    back = Member(env, instance_id="i-1")
    resp = await back.heartbeat()
    assert resp.error_code == 0 and back.member_id != a.member_id
    assert (back.owned, back.epoch) == (kept, epoch)
    assert (await env.describe()).group_epoch == group_epoch  # no rebalance
    assert (await a.heartbeat()).error_code == E.FencedInstanceIdError.code


async def test_static_member_gone_for_longer_than_its_session_is_removed() -> None:
    env = Env()
    a = Member(env, instance_id="i-1")
    await a.heartbeat()
    await a.leave(-2)
    env.clock.advance(SESSION_MS + 1)
    d = await env.describe()
    assert (d.group_state, d.members) == ("Empty", [])


async def test_second_process_with_a_live_instance_id_is_refused() -> None:
    env = Env()
    await Member(env, instance_id="i-1").heartbeat()
    resp = await Member(env, instance_id="i-1").heartbeat()
    assert resp.error_code == E.UnreleasedInstanceIdError.code


# -- validation and configuration -------------------------------------------------------


async def test_group_max_size() -> None:
    env = Env({"group.consumer.max.size": "1"})
    a = Member(env)
    await a.heartbeat()
    resp = await Member(env).heartbeat()
    assert resp.error_code == E.GroupMaxSizeReachedError.code
    # A known member rejoining with epoch 0 is not a new member.
    again = await a.heartbeat(
        version=0,
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["t"],
        topic_partitions=[],
    )
    assert again.error_code == 0 and again.member_id == a.member_id


async def test_assignors_the_broker_offers() -> None:
    env = Env({"group.consumer.assignors": "range"})
    refused = await Member(env, server_assignor="uniform").heartbeat()
    assert refused.error_code == E.UnsupportedAssignorError.code
    await Member(env).heartbeat()
    assert (await env.describe()).assignor_name == "range"


@pytest.mark.parametrize("pattern", ["t(?=x)", "(?<!a)t", r"(t)\1", "(?>t)", "t++", "(?P<n>t)(?P=n)"])
async def test_regexes_re2j_refuses_are_refused(pattern: str) -> None:
    env = Env()
    m = Member(env, subscribed_topic_names=None, subscribed_topic_regex=pattern)
    m.member_id = str(uuid.uuid4())
    resp = await m.heartbeat(version=1)
    assert resp.error_code == E.InvalidRegularExpressionError.code
    with pytest.raises(RegexError):
        compile_topic_regex(pattern)


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        (r"\Qa.b\E-\d+", "a.b-12", "axb-12"),
        (r"\pL+-\pN", "événement-7", "ev3nt-7"),
        (r"\p{L}+\P{N}", "abc_", "abc1"),
        (r"orders\z", "orders", "orders-x"),
        (r"[]a-]+", "]a-", "b"),
    ],
)
def test_re2j_spellings_python_lacks_are_translated(pattern: str, matches: str, misses: str) -> None:
    rx = compile_topic_regex(pattern)
    assert rx.fullmatch(matches) and not rx.fullmatch(misses)


@pytest.mark.parametrize("pattern", [r"\p{Greek}", r"[\pL]", r"\p{L"])
def test_unicode_classes_re_cannot_express_are_refused(pattern: str) -> None:
    with pytest.raises(RegexError):
        compile_topic_regex(pattern)


async def test_regex_subscription_picks_up_topics_created_later() -> None:
    env = Env()
    m = Member(env, subscribed_topic_names=None, subscribed_topic_regex="ev-.*")
    m.member_id = str(uuid.uuid4())
    await m.heartbeat(version=1)
    assert m.owned == {}
    env.cluster.create_topic("ev-a", 2)
    env.cluster.create_topic("xev-b", 2)  # the pattern matches whole names only
    env.clock.advance(INTERVAL_MS)
    await m.heartbeat(version=1)
    assert m.owned == {"ev-a": [0, 1]}
    d = await env.describe()
    assert d.members[0].subscribed_topic_regex == "ev-.*" and d.members[0].subscribed_topic_names == []


async def test_a_moved_coordinator_gives_members_a_new_session() -> None:
    env = Env()
    env.cluster.brokers[2] = BrokerInfo(2, "127.0.0.1", 9002, alive=True)
    a = Member(env)
    await a.heartbeat()
    env.clock.advance(40000)
    env.gc.move_coordinator("g", 2 if env.gc.placement.coordinator_id("g") == 1 else 1)
    env.clock.advance(40000)  # 80 s since the last heartbeat, 40 s since the move
    assert [m.member_id for m in (await env.describe_on(env.gc.placement.coordinator_id("g"))).members] == [
        a.member_id
    ]
    env.clock.advance(SESSION_MS)
    assert (await env.describe_on(env.gc.placement.coordinator_id("g"))).members == []


# -- assignors ------------------------------------------------------------------------------


def _spec(
    members: dict[str, set[uuid.UUID]], topics: dict[uuid.UUID, int], previous: Any = None
) -> AssignmentSpec:
    return AssignmentSpec({m: MemberSpec(s) for m, s in members.items()}, topics, previous or {})


def test_uniform_is_balanced_and_sticky() -> None:
    t = uuid.uuid4()
    first = uniform_assign(_spec({"a": {t}, "b": {t}, "c": {t}}, {t: 120}))
    assert sorted(len(a[t]) for a in first.values()) == [40, 40, 40]
    second = uniform_assign(_spec({"a": {t}, "b": {t}, "c": {t}, "d": {t}}, {t: 120}, first))
    assert sorted(len(a[t]) for a in second.values()) == [30, 30, 30, 30]
    for m in "abc":
        assert second[m][t] <= first[m][t]  # nothing moves between the members that stayed
    every = sorted(p for a in second.values() for p in a[t])
    assert every == list(range(120))


def test_uniform_with_different_subscriptions() -> None:
    t, u = uuid.uuid4(), uuid.uuid4()
    out = uniform_assign(_spec({"a": {t}, "b": {t, u}}, {t: 4, u: 4}))
    assert u not in out["a"]
    assert out["b"][u] == {0, 1, 2, 3}
    assert sorted(p for a in out.values() for p in a.get(t, set())) == [0, 1, 2, 3]


def test_range_co_partitions() -> None:
    t, u = uuid.uuid4(), uuid.uuid4()
    out = range_assign(_spec({"b": {t, u}, "a": {t, u}}, {t: 3, u: 3}))
    assert out == {"a": {t: {0, 1}, u: {0, 1}}, "b": {t: {2}, u: {2}}}


# -- offsets, listing, deleting -----------------------------------------------------------


def _commit(group: str, member: str, epoch: int, topic: str = "t") -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=9)
                ],
            )
        ],
    )


async def test_offset_commits_carry_the_member_epoch() -> None:
    env = Env()
    a = Member(env)
    await a.heartbeat()

    async def commit(member: str, epoch: int, version: int = 9) -> int:
        resp = await env.call(_commit("g", member, epoch), version)
        return int(resp.topics[0].partitions[0].error_code)

    assert await commit(a.member_id, a.epoch) == 0
    assert await commit(a.member_id, a.epoch + 1) == E.StaleMemberEpochError.code
    assert await commit("nobody", a.epoch) == E.UnknownMemberIdError.code
    assert await commit(a.member_id, a.epoch, version=8) == E.UnsupportedVersionError.code
    fetched = await env.call(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id="g", member_id=a.member_id, member_epoch=a.epoch - 1, topics=None
                )
            ]
        ),
        9,
    )
    assert fetched.groups[0].error_code == E.StaleMemberEpochError.code
    await a.leave()
    assert await commit("", -1) == 0  # an empty group takes commits from anyone


async def test_list_delete_and_offset_delete() -> None:
    env = Env()
    a = Member(env)
    await a.heartbeat()
    await env.call(_commit("g", a.member_id, a.epoch), 9)
    await env.call(_commit("g", a.member_id, a.epoch, topic="u"), 9)
    listed = await env.call(ListGroupsRequest(types_filter=["consumer"], states_filter=["stable"]), 5)
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
        ("g", "consumer", "consumer")
    ]
    classic = await env.call(ListGroupsRequest(types_filter=["classic"]), 5)
    assert classic.groups == []
    deleted = await env.call(
        OffsetDeleteRequest(
            group_id="g",
            topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=n, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]
                )
                for n in ("t", "u")
            ],
        ),
        0,
    )
    errs = {t.name: t.partitions[0].error_code for t in deleted.topics}
    assert errs == {"t": E.GroupSubscribedToTopicError.code, "u": 0}
    busy = await env.call(DeleteGroupsRequest(groups_names=["g"]), 2)
    assert busy.results[0].error_code == E.NonEmptyGroupError.code
    await a.leave()
    done = await env.call(DeleteGroupsRequest(groups_names=["g"]), 2)
    assert done.results[0].error_code == 0
    assert (await env.describe()).error_code == E.GroupIdNotFoundError.code


async def test_an_empty_classic_group_becomes_a_consumer_group_keeping_its_offsets() -> None:
    env = Env()
    assert (await env.call(_commit("g", "", -1), 9)).topics[0].partitions[0].error_code == 0
    a = Member(env)
    assert (await a.heartbeat()).error_code == 0
    fetched = await env.call(
        OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", topics=None)]), 8
    )
    assert [(t.name, p.committed_offset) for t in fetched.groups[0].topics for p in t.partitions] == [
        ("t", 9)
    ]
    assert "g" not in env.gc.groups


# -- persistence -----------------------------------------------------------------------------


async def _coordinator_client(cluster: EmbeddedCluster, group: str) -> RawClient:
    c = await RawClient.connect(cluster.bootstrap)
    found = await c.request(FindCoordinatorRequest(key=group, key_type=0), 3)
    await c.close()
    return await RawClient.connect(f"{found.host}:{found.port}")


async def test_consumer_groups_survive_a_restart(tmp_path: Path) -> None:
    async with EmbeddedCluster(brokers=1, data_dir=tmp_path, topics={"t": 2}) as cluster:
        c = await _coordinator_client(cluster, "g")
        joined = await c.request(
            ConsumerGroupHeartbeatRequest(
                group_id="g",
                member_id="",
                member_epoch=0,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=["t"],
                topic_partitions=[],
                instance_id="i-1",
            ),
            0,
        )
        assert joined.error_code == 0
        await c.close()
    async with EmbeddedCluster(brokers=1, data_dir=tmp_path) as cluster:
        c = await _coordinator_client(cluster, "g")
        d = (await c.request(ConsumerGroupDescribeRequest(group_ids=["g"]), 1)).groups[0]
        assert (d.group_epoch, d.assignment_epoch) == (2, 2)
        assert [(m.member_id, m.instance_id, m.member_epoch) for m in d.members] == [
            (joined.member_id, "i-1", joined.member_epoch)
        ]
        assert [sorted(tp.partitions) for tp in d.members[0].assignment.topic_partitions] == [[0, 1]]
        again = await c.request(
            ConsumerGroupHeartbeatRequest(
                group_id="g", member_id=joined.member_id, member_epoch=joined.member_epoch, instance_id="i-1"
            ),
            0,
        )
        assert (again.error_code, again.member_epoch) == (0, joined.member_epoch)
        await c.close()


async def test_only_the_coordinator_answers_heartbeats() -> None:
    join = ConsumerGroupHeartbeatRequest(
        group_id="g-raw",
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["t"],
        topic_partitions=[],
    )
    async with EmbeddedCluster(brokers=3, topics={"t": 3}) as cluster:
        c = await RawClient.connect(cluster.bootstrap)
        found = await c.request(FindCoordinatorRequest(key="g-raw", key_type=0), 3)
        md = await c.request(MetadataRequest(topics=[]), 9)
        await c.close()
        other = next(b for b in md.brokers if b.node_id != found.node_id)
        c = await RawClient.connect(f"{other.host}:{other.port}")
        refused = await c.request(join, 0)
        await c.close()
        assert refused.error_code == E.NotCoordinatorError.code
        c = await RawClient.connect(f"{found.host}:{found.port}")
        resp = await c.request(join, 0)
        await c.close()
        assert resp.error_code == 0 and resp.assignment is not None
        assert sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions) == [0, 1, 2]


# -- mixed groups and migration ------------------------------------------------------------


def _classic_subscription(*topics: str, owned: Owned | None = None) -> bytes:
    return b"\x00\x01" + ConsumerProtocolSubscription(
        topics=list(topics),
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
            for t, ps in (owned or {}).items()
        ],
    ).encode(1)


class ClassicMember:
    """A classic-protocol member (JoinGroup/SyncGroup/Heartbeat) driven by hand."""

    def __init__(self, env: Env, group: str = "g", topics: tuple[str, ...] = ("t",)) -> None:
        self.env = env
        self.group = group
        self.topics = topics
        self.member_id = ""
        self.generation = -1
        self.owned: Owned = {}

    async def join(self, *, cooperative: bool = False) -> Any:
        metadata = _classic_subscription(*self.topics, owned=self.owned if cooperative else None)
        while True:
            resp = await self.env.call(
                JoinGroupRequest(
                    group_id=self.group,
                    session_timeout_ms=10000,
                    rebalance_timeout_ms=10000,
                    member_id=self.member_id,
                    protocol_type="consumer",
                    protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)],
                ),
                9,
            )
            if resp.error_code == E.MemberIdRequiredError.code:
                self.member_id = resp.member_id
                continue
            break
        assert resp.error_code == 0, resp
        self.generation = resp.generation_id
        sync = await self.env.call(
            SyncGroupRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                protocol_type="consumer",
                protocol_name=resp.protocol_name,
                assignments=[],
            ),
            5,
        )
        assert sync.error_code == 0, sync
        a = ConsumerProtocolAssignment.decode(memoryview(sync.assignment)[2:], 1)
        self.owned = {tp.topic: sorted(tp.partitions) for tp in a.assigned_partitions}
        return resp

    async def heartbeat(self) -> int:
        resp = await self.env.call(
            HeartbeatRequest(group_id=self.group, generation_id=self.generation, member_id=self.member_id), 4
        )
        return int(resp.error_code)


async def test_classic_member_in_a_consumer_group_rejoins_until_it_has_its_target() -> None:
    env = Env()
    a = Member(env)
    await a.heartbeat()
    b = ClassicMember(env)
    joined = await b.join()
    assert joined.leader == "" and joined.members == [] and b.owned == {}  # a follower, nothing free yet
    env.clock.advance(INTERVAL_MS)
    assert await b.heartbeat() == E.RebalanceInProgressError.code  # a target to reconcile towards
    await a.heartbeat()
    await a.heartbeat(ack=True)  # A releases half
    await b.join()
    assert partitions(a) + sorted((t, p) for t, ps in b.owned.items() for p in ps) == [
        ("t", p) for p in range(4)
    ]
    assert await b.heartbeat() == 0
    d = await env.describe()
    assert d.group_state == "Stable" and sorted(m.member_type for m in d.members) == [0, 1]
    # A cooperative classic member reports what it owns; partitions it still reports stay its own.
    b.owned = {"t": b.owned["t"]}
    await b.join(cooperative=True)
    assert await b.heartbeat() == 0


async def test_live_classic_group_upgrades_and_downgrades() -> None:
    env = Env()
    old = ClassicMember(env)
    first = await env.call(
        JoinGroupRequest(
            group_id="g",
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=_classic_subscription("t"))
            ],
        ),
        9,
    )
    old.member_id = first.member_id
    pending = asyncio.ensure_future(
        env.call(
            JoinGroupRequest(
                group_id="g",
                session_timeout_ms=10000,
                rebalance_timeout_ms=10000,
                member_id=old.member_id,
                protocol_type="consumer",
                protocols=[
                    JoinGroupRequest.JoinGroupRequestProtocol(
                        name="range", metadata=_classic_subscription("t")
                    )
                ],
            ),
            9,
        )
    )
    for _ in range(5):
        await asyncio.sleep(0)
    env.clock.advance(1)  # the join barrier of an empty classic group ends on a timer
    joined = await asyncio.wait_for(pending, 5)
    old.generation = joined.generation_id
    everything = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[0, 1, 2, 3])]
    )
    await env.call(
        SyncGroupRequest(
            group_id="g",
            generation_id=old.generation,
            member_id=old.member_id,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=old.member_id, assignment=b"\x00\x01" + everything.encode(1)
                )
            ],
        ),
        5,
    )
    new = Member(env)
    assert (await new.heartbeat()).error_code == 0
    assert "g" in env.gc.consumer_groups and "g" not in env.gc.groups
    assert new.owned == {}  # the classic member still has every partition
    assert await old.heartbeat() == E.RebalanceInProgressError.code
    await old.join()
    await new.heartbeat()
    assert len(old.owned["t"]) == 2 and len(new.owned["t"]) == 2
    # The session of the last consumer-protocol member ends: back to classic, rebalancing.
    for _ in range(6):
        env.clock.advance(9000)
        await old.heartbeat()
    group = env.gc.groups["g"]
    assert "g" not in env.gc.consumer_groups
    assert group.state.value == "PreparingRebalance" and list(group.members) == [old.member_id]


async def test_a_member_asked_to_revoke_before_a_restart_still_has_its_rebalance_timeout(
    tmp_path: Path,
) -> None:
    def join(rebalance_timeout_ms: int) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group_id="g",
            member_id="",
            member_epoch=0,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=["t"],
            topic_partitions=[],
        )

    async with EmbeddedCluster(brokers=1, data_dir=tmp_path, topics={"t": 2}) as cluster:
        c = await _coordinator_client(cluster, "g")
        a = await c.request(join(1500), 0)
        await c.request(join(30000), 0)
        revoke = a
        for _ in range(50):  # the second member's target comes after the assignment interval
            await asyncio.sleep(0.1)
            revoke = await c.request(
                ConsumerGroupHeartbeatRequest(
                    group_id="g", member_id=a.member_id, member_epoch=a.member_epoch
                ),
                0,
            )
            if revoke.assignment is not None:
                break
        assert revoke.assignment is not None and len(revoke.assignment.topic_partitions[0].partitions) == 1
        await c.close()
    async with EmbeddedCluster(brokers=1, data_dir=tmp_path) as cluster:
        c = await _coordinator_client(cluster, "g")
        members = [a.member_id]
        for _ in range(100):
            d = (await c.request(ConsumerGroupDescribeRequest(group_ids=["g"]), 1)).groups[0]
            members = [m.member_id for m in d.members]
            if a.member_id not in members:
                break
            await asyncio.sleep(0.1)
        await c.close()
        assert a.member_id not in members and len(members) == 1


async def test_classic_member_that_never_rejoins_is_removed_after_its_rebalance_timeout() -> None:
    env = Env()
    a = Member(env)
    await a.heartbeat()
    b = ClassicMember(env)
    await b.join()
    env.clock.advance(INTERVAL_MS)
    await a.heartbeat()
    assert await b.heartbeat() == E.RebalanceInProgressError.code  # told to rejoin...
    for _ in range(3):  # ...it keeps heartbeating but never rejoins
        env.clock.advance(3000)
        await b.heartbeat()
    env.clock.advance(2000)  # 11 s > its 10 s rebalance timeout
    d = await env.describe()
    assert [m.member_id for m in d.members] == [a.member_id]
    assert await b.heartbeat() == E.UnknownMemberIdError.code


async def test_without_the_consumer_protocol_heartbeats_are_refused() -> None:
    config = BrokerConfig(extra={"group.coordinator.rebalance.protocols": "classic"})
    async with EmbeddedCluster(brokers=1, config=config, topics={"t": 1}) as cluster:
        c = await _coordinator_client(cluster, "g")
        resp = await c.request(
            ConsumerGroupHeartbeatRequest(
                group_id="g",
                member_id="",
                member_epoch=0,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=["t"],
                topic_partitions=[],
            ),
            0,
        )
        await c.close()
    assert resp.error_code == E.UnsupportedVersionError.code
