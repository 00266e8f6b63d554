"""Group coordinator of the embedded broker, driven through its handlers (no sockets).

Time is a ManualClock, so session/rebalance/initial-delay timers fire exactly when the
test advances it. Every response is round-tripped through encode/decode at the request
version, which also checks the handler never sets a field the version cannot carry.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite.broker.committed_offsets import CommittedOffset, OffsetStore
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.groups import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    ManualClock,
    java_string_hash,
    register_group_handlers,
)
from aiokafka_lite.broker.state import BrokerConfig, BrokerInfo, ClusterState
from aiokafka_lite.core import errors
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    ConsumerProtocolSubscription,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

NONE = 0
E = errors


def sub(*topics: str) -> bytes:
    """Consumer protocol subscription metadata (version 0)."""
    return b"\x00\x00" + ConsumerProtocolSubscription(topics=list(topics)).encode(0)


class Env:
    def __init__(self, brokers: int = 1, config: GroupConfig | None = None, store: OffsetStore | None = None):
        self.cluster = ClusterState(BrokerConfig())
        for i in range(1, brokers + 1):
            self.cluster.brokers[i] = BrokerInfo(i, "127.0.0.1", 9000 + i, alive=True)
        self.cluster.create_topic("t", 3)
        self.cluster.create_topic("u", 2)
        self.clock = ManualClock()
        self.gc = GroupCoordinator(
            self.cluster,
            config=config or GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100),
            clock=self.clock,
            store=store,
        )
        self.cluster.services["groups"] = self.gc
        self.registry = HandlerRegistry()
        register_group_handlers(self.registry, self.cluster)

    def coordinator(self, group: str = "g") -> int:
        return self.gc.placement.coordinator_id(group)

    async def call(
        self, req: Request, version: int, *, broker: int | None = None, client: str = "cli"
    ) -> Any:
        entry = self.registry.get(req.API_KEY)
        assert entry is not None and entry.min_version <= version <= entry.max_version
        # The request as the broker would decode it at this version.
        req = type(req).decode(req.encode(version), version)
        key = getattr(req, "group_id", "") or "g"
        ctx = RequestContext(
            broker if broker is not None else self.coordinator(key),
            self.cluster,
            req.API_KEY,
            version,
            1,
            client,
            None,
            "c1",
            "127.0.0.1",
        )
        resp = await entry.handler(ctx, req)
        assert isinstance(resp, Response)
        return type(resp).decode(resp.encode(version), version)

    def start(self, req: Request, version: int, **kw: Any) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.call(req, version, **kw))

    async def advance(self, ms: float) -> None:
        await settle()
        self.clock.advance(ms)
        await settle()

    def group(self, group_id: str = "g") -> Any:
        return self.gc.groups[group_id]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def join_req(
    member_id: str = "",
    *,
    group: str = "g",
    protocols: Any = None,
    session: int = 1000,
    rebalance: int = 2000,
    instance: str | None = None,
) -> JoinGroupRequest:
    protocols = protocols if protocols is not None else [("range", sub("t"))]
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
    )


async def join_new(env: Env, version: int = 9, **kw: Any) -> str:
    """KIP-394 first round trip: returns the member id the coordinator assigned."""
    resp = await env.call(join_req(**kw), version)
    assert resp.error_code == E.MemberIdRequiredError.code
    assert resp.member_id.startswith("cli-")
    return str(resp.member_id)


async def form_group(env: Env, n: int, version: int = 9) -> tuple[list[str], int]:
    """n members join concurrently and sync (leader assigns b'a<i>'); returns ids, generation."""
    ids = [await join_new(env, version) for _ in range(n)]
    tasks = [env.start(join_req(mid), version) for mid in ids]
    await env.advance(0)
    resps = [await t for t in tasks]
    assert all(r.error_code == NONE for r in resps)
    gen = resps[0].generation_id
    leader = resps[0].leader
    assert all(r.generation_id == gen and r.leader == leader for r in resps)
    leader_resp = next(r for r in resps if r.member_id == leader)
    assert sorted(m.member_id for m in leader_resp.members) == sorted(ids)
    followers = [
        env.start(SyncGroupRequest(group_id="g", generation_id=gen, member_id=m), 5)
        for m in ids
        if m != leader
    ]
    await settle()
    assignments = [
        SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=f"a{i}".encode())
        for i, m in enumerate(ids)
    ]
    lr = await env.call(
        SyncGroupRequest(group_id="g", generation_id=gen, member_id=leader, assignments=assignments), 5
    )
    assert lr.error_code == NONE
    for f in followers:
        assert (await f).error_code == NONE
    assert env.group().state is GroupState.STABLE
    return ids, gen


async def hb(env: Env, member: str, gen: int, version: int = 4, instance: str | None = None) -> int:
    r = await env.call(
        HeartbeatRequest(group_id="g", generation_id=gen, member_id=member, group_instance_id=instance),
        version,
    )
    return int(r.error_code)


# -- coordinator lookup ------------------------------------------------------------------
def test_java_string_hash_matches_java() -> None:
    def reference(text: str) -> int:
        h = 0
        for unit in [
            int.from_bytes(text.encode("utf-16-be")[i : i + 2], "big")
            for i in range(0, 2 * len(text.encode("utf-16-be")) // 2, 2)
        ]:
            h = (h * 31 + unit) % 2**32
        return h - 2**32 if h >= 2**31 else h

    assert java_string_hash("") == 0
    assert java_string_hash("foo") == 101574  # "foo".hashCode() in Java
    assert java_string_hash("hello world") == 1794106052
    for text in ("consumer-group-with-a-long-name", "grüße", "\U0001f600x"):
        assert java_string_hash(text) == reference(text)
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair, like Java


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_find_coordinator_single_key(version: int) -> None:
    env = Env(brokers=3)
    r = await env.call(FindCoordinatorRequest(key="g"), version, broker=1)
    assert r.error_code == NONE
    assert r.node_id == env.coordinator("g")
    assert (r.host, r.port) == ("127.0.0.1", 9000 + r.node_id)


async def test_find_coordinator_batched_and_key_types() -> None:
    env = Env(brokers=3)
    keys = [f"group-{i}" for i in range(12)]
    r = await env.call(FindCoordinatorRequest(key_type=0, coordinator_keys=keys), 4, broker=2)
    assert [c.key for c in r.coordinators] == keys
    assert all(c.error_code == NONE for c in r.coordinators)
    # Deterministic and spread over the brokers.
    assert [c.node_id for c in r.coordinators] == [env.coordinator(k) for k in keys]
    assert len({c.node_id for c in r.coordinators}) > 1
    r = await env.call(FindCoordinatorRequest(key_type=1, coordinator_keys=["txn-a"]), 6, broker=1)
    assert r.coordinators[0].error_code == NONE
    r = await env.call(FindCoordinatorRequest(key_type=2, coordinator_keys=["share"]), 6, broker=1)
    assert r.coordinators[0].error_code == E.InvalidRequestError.code
    r = await env.call(FindCoordinatorRequest(key="x", key_type=1), 3, broker=1)
    assert r.error_code == NONE


async def test_coordinator_follows_live_brokers_and_moves() -> None:
    env = Env(brokers=3)
    before = env.coordinator("g")
    env.cluster.set_broker_alive(before, False)
    after = env.coordinator("g")
    assert after != before and env.cluster.is_alive(after)
    target = next(b for b in (1, 2, 3) if b not in (before, after))
    env.gc.move_coordinator("g", target)
    r = await env.call(FindCoordinatorRequest(key="g"), 3, broker=target)
    assert r.node_id == target
    # The old coordinator refuses the group.
    r = await env.call(join_req(), 9, broker=after)
    assert r.error_code == E.NotCoordinatorError.code
    for b in (1, 2, 3):
        env.cluster.set_broker_alive(b, False)
    r = await env.call(FindCoordinatorRequest(key="g"), 3, broker=1)
    assert r.error_code == E.CoordinatorNotAvailableError.code


# -- join / sync ----------------------------------------------------------------------------
async def test_kip394_member_id_required_then_single_member_group() -> None:
    env = Env()
    mid = await join_new(env)
    assert env.group().state is GroupState.EMPTY
    assert mid in env.group().pending_members
    t = env.start(join_req(mid), 9)
    await env.advance(0)  # initial rebalance delay 0
    r = await t
    assert (r.error_code, r.generation_id, r.leader, r.member_id) == (NONE, 1, mid, mid)
    assert r.protocol_type == "consumer" and r.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in r.members] == [(mid, sub("t"))]
    assert env.group().state is GroupState.COMPLETING_REBALANCE
    s = await env.call(
        SyncGroupRequest(
            group_id="g",
            generation_id=1,
            member_id=mid,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=b"A")],
        ),
        5,
    )
    assert (s.error_code, s.assignment, s.protocol_name) == (NONE, b"A", "range")
    assert env.group().state is GroupState.STABLE
    assert await hb(env, mid, 1) == NONE


async def test_pending_member_expires_after_session_timeout() -> None:
    env = Env()
    mid = await join_new(env, session=500)
    await env.advance(499)
    assert mid in env.group().pending_members
    await env.advance(2)
    assert mid not in env.group().pending_members
    r = await env.call(join_req(mid), 9)
    assert r.error_code == E.UnknownMemberIdError.code


@pytest.mark.parametrize("version", [0, 1, 3])
async def test_old_versions_join_without_member_id_round_trip(version: int) -> None:
    env = Env()
    t = env.start(join_req(), version)
    await env.advance(0)
    r = await t
    assert r.error_code == NONE and r.member_id.startswith("cli-") and r.leader == r.member_id
    s = await env.call(
        SyncGroupRequest(
            group_id="g",
            generation_id=r.generation_id,
            member_id=r.member_id,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=r.member_id, assignment=b"x")],
        ),
        min(version, 3),
    )
    assert (s.error_code, s.assignment) == (NONE, b"x")


async def test_initial_rebalance_delay_collects_members() -> None:
    env = Env(config=GroupConfig(initial_rebalance_delay_ms=300, min_session_timeout_ms=100))
    a, b = await join_new(env), await join_new(env)
    ta = env.start(join_req(a, rebalance=1000), 9)
    await env.advance(200)
    assert not ta.done()
    tb = env.start(join_req(b, rebalance=1000), 9)  # extends the delay once more
    await env.advance(150)
    assert not ta.done() and not tb.done()
    await env.advance(300)
    ra, rb = await ta, await tb
    assert ra.generation_id == rb.generation_id == 1
    assert {ra.leader} == {rb.leader} == {a}
    assert len(ra.members) == 2 and rb.members == []


async def test_initial_delay_bounded_by_rebalance_timeout() -> None:
    env = Env(config=GroupConfig(initial_rebalance_delay_ms=300, min_session_timeout_ms=100))
    a, b, c = await join_new(env), await join_new(env), await join_new(env)
    ta = env.start(join_req(a, rebalance=500), 9)
    await env.advance(250)
    tb = env.start(join_req(b, rebalance=500), 9)
    await env.advance(200)  # t=450: extended past the first 300 ms delay
    tc = env.start(join_req(c, rebalance=500), 9)
    await env.advance(49)
    assert not ta.done()
    # Delay 300, then at most rebalance timeout - delay (200) more: done at t=500.
    await env.advance(1)
    results = [await t for t in (ta, tb, tc)]
    assert {r.generation_id for r in results} == {1}
    assert len(results[0].members) == 3


async def test_second_member_triggers_rebalance_and_barrier() -> None:
    env = Env()
    [a], gen = await form_group(env, 1)
    b = await join_new(env)
    tb = env.start(join_req(b), 9)
    await settle()
    assert env.group().state is GroupState.PREPARING_REBALANCE
    assert await hb(env, a, gen) == E.RebalanceInProgressError.code
    assert not tb.done()  # waits for a to rejoin
    ta = env.start(join_req(a), 9)
    ra, rb = await ta, await tb
    assert ra.generation_id == rb.generation_id == gen + 1
    assert ra.leader == a and len(ra.members) == 2 and rb.members == []
    # Followers' SyncGroup waits for the leader.
    sb = env.start(SyncGroupRequest(group_id="g", generation_id=gen + 1, member_id=b), 5)
    await settle()
    assert not sb.done()
    assert await hb(env, b, gen + 1) == NONE  # heartbeats are fine while completing
    await env.call(
        SyncGroupRequest(
            group_id="g",
            generation_id=gen + 1,
            member_id=a,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=a, assignment=b"A"),
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=b, assignment=b"B"),
                SyncGroupRequest.SyncGroupRequestAssignment(member_id="ghost", assignment=b"G"),
            ],
        ),
        5,
    )
    assert (await sb).assignment == b"B"
    # A stable SyncGroup repeat returns the stored assignment.
    again = await env.call(SyncGroupRequest(group_id="g", generation_id=gen + 1, member_id=b), 5)
    assert again.assignment == b"B"
    assert await hb(env, a, gen) == E.IllegalGenerationError.code


async def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    env = Env()
    (a, b), gen = await form_group(env, 2)
    leader = env.group().leader_id
    other = b if leader == a else a
    # The follower rejoins with new metadata, the leader never does.
    t = env.start(join_req(other, protocols=[("range", sub("t", "u"))], rebalance=2000), 9)
    # The leader keeps heartbeating (its session stays alive) but never rejoins.
    for _ in range(3):
        await env.advance(500)
        assert await hb(env, leader, gen) == E.RebalanceInProgressError.code
    await env.advance(499)
    assert not t.done()
    await env.advance(2)
    r = await t
    assert r.error_code == NONE and r.generation_id == gen + 1
    assert r.leader == other and [m.member_id for m in r.members] == [other]
    assert leader not in env.group().members
    assert await hb(env, leader, gen) == E.UnknownMemberIdError.code


async def test_session_timeout_expires_member_and_rebalances() -> None:
    env = Env()
    (a, b), gen = await form_group(env, 2)
    await env.advance(600)
    assert await hb(env, a, gen) == NONE
    assert b in env.group().members
    await env.advance(399)
    assert b in env.group().members
    await env.advance(2)
    # b never heartbeated: expired after its 1000 ms session; a is still alive.
    assert a in env.group().members
    assert b not in env.group().members
    assert env.group().state is GroupState.PREPARING_REBALANCE
    assert await hb(env, a, gen) == E.RebalanceInProgressError.code
    t = env.start(join_req(a), 9)
    r = await t
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [a]


async def test_sync_timeout_removes_members_that_never_sync() -> None:
    env = Env()
    a, b = await join_new(env), await join_new(env)
    ta, tb = env.start(join_req(a, rebalance=1500), 9), env.start(join_req(b, rebalance=1500), 9)
    await env.advance(0)
    ra, _ = await ta, await tb
    # Leader syncs; b heartbeats but never sends SyncGroup.
    await env.call(SyncGroupRequest(group_id="g", generation_id=ra.generation_id, member_id=a), 5)
    for _ in range(3):
        await env.advance(400)
        assert await hb(env, a, ra.generation_id) == NONE
        await hb(env, b, ra.generation_id)
    await env.advance(400)
    assert b not in env.group().members
    assert env.group().state is GroupState.PREPARING_REBALANCE


async def test_join_errors() -> None:
    env = Env()
    assert (await env.call(join_req(group=""), 9, broker=1)).error_code == E.InvalidGroupIdError.code
    assert (await env.call(join_req(session=50), 9)).error_code == E.InvalidSessionTimeoutError.code
    assert (await env.call(join_req("nobody"), 9)).error_code == E.UnknownMemberIdError.code
    r = await env.call(join_req(protocols=[]), 9)
    assert r.error_code == E.InconsistentGroupProtocolError.code
    [a], gen = await form_group(env, 1)
    r = await env.call(join_req(protocols=[("roundrobin", sub("t"))]), 3)
    assert r.error_code == E.InconsistentGroupProtocolError.code
    bad = join_req()
    bad.protocol_type = "connect"
    assert (await env.call(bad, 3)).error_code == E.InconsistentGroupProtocolError.code
    assert (await env.call(join_req("stranger"), 9)).error_code == E.UnknownMemberIdError.code
    # Known follower rejoining a stable group with the same metadata: current generation.
    r = await env.call(join_req(a), 9)  # a is the leader: forces a rebalance instead
    assert r.error_code == NONE and r.generation_id == gen + 1


async def test_protocol_selection_by_votes() -> None:
    env = Env()
    ids = [await join_new(env) for _ in range(3)]
    prefs = [
        [("range", sub("t")), ("roundrobin", sub("t")), ("sticky", sub("t"))],
        [("roundrobin", sub("t")), ("range", sub("t"))],
        [("roundrobin", sub("t")), ("range", sub("t")), ("cooperative-sticky", sub("t"))],
    ]
    tasks = [env.start(join_req(m, protocols=p), 9) for m, p in zip(ids, prefs, strict=True)]
    await env.advance(0)
    resps = [await t for t in tasks]
    assert {r.protocol_name for r in resps} == {"roundrobin"}
    leader = next(r for r in resps if r.members)
    assert all(m.metadata == sub("t") for m in leader.members)


async def test_follower_rejoin_in_stable_and_completing_returns_current_generation() -> None:
    env = Env()
    (a, b), gen = await form_group(env, 2)
    follower = b if env.group().leader_id == a else a
    r = await env.call(join_req(follower), 9)
    assert (r.error_code, r.generation_id, r.members) == (NONE, gen, [])
    assert env.group().state is GroupState.STABLE


async def test_group_max_size() -> None:
    env = Env(config=GroupConfig(max_size=2, min_session_timeout_ms=100))
    (a, b), gen = await form_group(env, 2)
    r = await env.call(join_req(), 9)  # a full stable group refuses newcomers outright
    assert r.error_code == E.GroupMaxSizeReachedError.code
    assert not env.group().pending_members
    assert env.group().state is GroupState.STABLE
    # While rebalancing, the limit counts members that have rejoined: the last to
    # rejoin is the one kicked out.
    leader = env.group().leader_id
    follower = b if leader == a else a
    ta = env.start(join_req(leader), 9)
    await settle()
    c = await join_new(env)
    tc = env.start(join_req(c), 9)
    await settle()
    r = await env.call(join_req(follower), 9)
    assert r.error_code == E.GroupMaxSizeReachedError.code
    ra, rc = await ta, await tc
    assert ra.generation_id == rc.generation_id == gen + 1
    assert sorted(m.member_id for m in ra.members) == sorted([leader, c])


async def test_leave_group_versions() -> None:
    env = Env()
    (a, b, c), _gen = await form_group(env, 3)
    r = await env.call(LeaveGroupRequest(group_id="g", member_id="nope"), 2)
    assert r.error_code == E.UnknownMemberIdError.code
    r = await env.call(LeaveGroupRequest(group_id="g", member_id=a), 0)
    assert r.error_code == NONE
    assert a not in env.group().members
    assert env.group().state is GroupState.PREPARING_REBALANCE
    r = await env.call(
        LeaveGroupRequest(
            group_id="g",
            members=[
                LeaveGroupRequest.MemberIdentity(member_id=b),
                LeaveGroupRequest.MemberIdentity(member_id="ghost"),
            ],
        ),
        5,
    )
    assert r.error_code == NONE
    assert [(m.member_id, m.error_code) for m in r.members] == [
        (b, NONE),
        ("ghost", E.UnknownMemberIdError.code),
    ]
    # The only remaining member rejoins alone.
    t = env.start(join_req(c), 9)
    assert (await t).members[0].member_id == c
    r = await env.call(LeaveGroupRequest(group_id="other", member_id="x"), 1)
    assert r.error_code == E.UnknownMemberIdError.code


async def test_leave_then_empty_group_generation() -> None:
    env = Env()
    [a], gen = await form_group(env, 1)
    r = await env.call(
        LeaveGroupRequest(group_id="g", members=[LeaveGroupRequest.MemberIdentity(member_id=a)]), 4
    )
    assert r.members[0].error_code == NONE
    assert env.group().state is GroupState.EMPTY
    assert env.group().generation_id == gen + 1
    assert env.group().leader_id is None


# -- static membership -------------------------------------------------------------------
async def test_static_member_rejoin_replaces_without_rebalance() -> None:
    env = Env()
    t1 = env.start(join_req(instance="i1"), 9)
    await env.advance(0)
    r1 = await t1  # static members skip MEMBER_ID_REQUIRED
    assert r1.error_code == NONE and r1.member_id.startswith("i1-")
    old = r1.member_id
    await env.call(
        SyncGroupRequest(
            group_id="g",
            generation_id=1,
            member_id=old,
            group_instance_id="i1",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=old, assignment=b"P")],
        ),
        5,
    )
    # Restart: same instance id, unknown member id.
    r2 = await env.call(join_req(instance="i1"), 9)
    assert r2.error_code == NONE and r2.member_id != old
    assert r2.generation_id == 1 and env.group().state is GroupState.STABLE
    assert r2.leader == r2.member_id and r2.skip_assignment  # KIP-814: the leader keeps its assignment
    assert [m.member_id for m in r2.members] == [r2.member_id]
    s = await env.call(
        SyncGroupRequest(group_id="g", generation_id=1, member_id=r2.member_id, group_instance_id="i1"), 5
    )
    assert s.assignment == b"P"
    # The old incarnation is fenced.
    assert await hb(env, old, 1, instance="i1") == E.FencedInstanceIdError.code
    r = await env.call(
        OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id=old,
            group_instance_id="i1",
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name="t",
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=5
                        )
                    ],
                )
            ],
        ),
        8,
    )
    assert r.topics[0].partitions[0].error_code == E.FencedInstanceIdError.code
    # Pre-v9 clients are not told they lead (they would otherwise reassign).
    r3 = await env.call(join_req(instance="i1"), 5)
    assert r3.error_code == NONE and r3.members == [] and r3.leader == r2.member_id


async def test_static_member_with_new_protocol_triggers_rebalance() -> None:
    env = Env()
    t1 = env.start(join_req(instance="i1"), 9)
    await env.advance(0)
    r1 = await t1
    await env.call(SyncGroupRequest(group_id="g", generation_id=1, member_id=r1.member_id), 5)
    # Now prefers roundrobin (still supports range, so the group accepts it): the
    # group's protocol would change, so the static rejoin rebalances.
    t2 = env.start(join_req(instance="i1", protocols=[("roundrobin", sub("t")), ("range", sub("t"))]), 9)
    r2 = await t2
    assert r2.generation_id == 2 and r2.protocol_name == "roundrobin"


async def test_static_member_not_removed_by_rebalance_timeout_but_by_session() -> None:
    env = Env()
    ta = env.start(join_req(instance="s", session=3000, rebalance=1000), 9)
    await env.advance(0)
    ra = await ta
    await env.call(SyncGroupRequest(group_id="g", generation_id=1, member_id=ra.member_id), 5)
    b = await join_new(env)
    tb = env.start(join_req(b, session=3000, rebalance=1000), 9)
    await env.advance(1001)
    rb = await tb  # static "s" kept, though it did not rejoin
    assert rb.generation_id == 2 and rb.leader == b  # leadership moved to a member that rejoined
    assert sorted(m.member_id for m in rb.members) == sorted([ra.member_id, b])
    assert ra.member_id in env.group().members
    await env.advance(3100)
    assert ra.member_id not in env.group().members


async def test_static_leave_by_instance_id() -> None:
    env = Env()
    t = env.start(join_req(instance="i9"), 9)
    await env.advance(0)
    r = await t
    resp = await env.call(
        LeaveGroupRequest(
            group_id="g",
            members=[
                LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="i9"),
                LeaveGroupRequest.MemberIdentity(member_id="wrong", group_instance_id="i9"),
            ],
        ),
        3,
    )
    assert [m.error_code for m in resp.members] == [NONE, E.UnknownMemberIdError.code]
    assert r.member_id not in env.group().members


# -- offsets -------------------------------------------------------------------------------
def commit_req(
    group: str = "g",
    gen: int = -1,
    member: str = "",
    offsets: dict[tuple[str, int], int] | None = None,
    metadata: str = "m",
) -> OffsetCommitRequest:
    by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for (topic, p), off in (offsets or {("t", 0): 10}).items():
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_leader_epoch=3, committed_metadata=metadata
            )
        )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=gen,
        member_id=member,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()
        ],
    )


def errs(resp: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


async def fetch(
    env: Env,
    version: int,
    group: str = "g",
    topics: dict[str, list[int]] | None = None,
    require_stable: bool = False,
) -> dict[tuple[str, int], tuple[int, int, str | None, int]]:
    if version >= 8:
        req = OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=None
                    if topics is None
                    else [
                        OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                        for t, ps in topics.items()
                    ],
                )
            ],
            require_stable=require_stable,
        )
        r = await env.call(req, version)
        assert r.groups[0].error_code == NONE
        return {
            (t.name, p.partition_index): (
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata,
                p.error_code,
            )
            for t in r.groups[0].topics
            for p in t.partitions
        }
    req = OffsetFetchRequest(
        group_id=group,
        require_stable=require_stable,
        topics=None
        if topics is None
        else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in topics.items()
        ],
    )
    r = await env.call(req, version)
    if version >= 2:
        assert r.error_code == NONE
    return {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in r.topics
        for p in t.partitions
    }


@pytest.mark.parametrize("version", [2, 5, 7, 8, 9])
async def test_simple_commit_and_fetch(version: int) -> None:
    env = Env()
    r = await env.call(commit_req(offsets={("t", 0): 10, ("t", 2): 20, ("nope", 0): 1, ("u", 9): 1}), version)
    assert errs(r) == {
        ("t", 0): NONE,
        ("t", 2): NONE,
        ("nope", 0): E.UnknownTopicOrPartitionError.code,
        ("u", 9): E.UnknownTopicOrPartitionError.code,
    }
    assert env.group().state is GroupState.EMPTY
    for fv in (1, 3, 5, 7, 8, 9):
        got = await fetch(env, fv, topics={"t": [0, 1, 2]})
        epoch = 3 if fv >= 5 and version >= 6 else -1
        assert got[("t", 0)] == (10, epoch, "m", NONE)
        assert got[("t", 1)] == (-1, -1, "", NONE)
        assert got[("t", 2)][0] == 20
    got = await fetch(env, 8, topics=None)
    assert set(got) == {("t", 0), ("t", 2)}
    got = await fetch(env, 4, topics=None)
    assert set(got) == {("t", 0), ("t", 2)}
    assert await fetch(env, 8, group="unknown", topics={"t": [0]}) == {("t", 0): (-1, -1, "", NONE)}


async def test_commit_generation_and_member_checks() -> None:
    env = Env()
    r = await env.call(commit_req(gen=5, member="m"), 8)
    assert errs(r)[("t", 0)] == E.IllegalGenerationError.code  # unknown group with a generation
    r = await env.call(commit_req(gen=5, member="m"), 9)
    assert errs(r)[("t", 0)] == E.GroupIdNotFoundError.code
    (a, b), gen = await form_group(env, 2)
    assert (
        errs(await env.call(commit_req(), 8))[("t", 0)] == E.UnknownMemberIdError.code
    )  # simple commit, active group
    assert errs(await env.call(commit_req(gen=gen, member="x"), 8))[("t", 0)] == E.UnknownMemberIdError.code
    assert (
        errs(await env.call(commit_req(gen=gen + 7, member=a), 8))[("t", 0)] == E.IllegalGenerationError.code
    )
    assert errs(await env.call(commit_req(gen=gen, member=a), 8))[("t", 0)] == NONE
    r = await env.call(commit_req(gen=gen, member=a, metadata="x" * 5000), 8)
    assert errs(r)[("t", 0)] == E.OffsetMetadataTooLargeError.code
    # PreparingRebalance: commits of the current generation still go through.
    c = await join_new(env)
    tc = env.start(join_req(c), 9)
    await settle()
    assert env.group().state is GroupState.PREPARING_REBALANCE
    assert errs(await env.call(commit_req(gen=gen, member=a, offsets={("t", 1): 7}), 8))[("t", 1)] == NONE
    ta, tb = env.start(join_req(a), 9), env.start(join_req(b), 9)
    await asyncio.gather(ta, tb, tc)
    assert env.group().state is GroupState.COMPLETING_REBALANCE
    r = await env.call(commit_req(gen=gen + 1, member=a), 8)
    assert errs(r)[("t", 0)] == E.RebalanceInProgressError.code
    got = await fetch(env, 6, topics={"t": [0, 1]})
    assert got[("t", 0)][0] == 10 and got[("t", 1)][0] == 7


async def test_not_coordinator_errors_for_group_apis() -> None:
    env = Env(brokers=3)
    wrong = next(b for b in (1, 2, 3) if b != env.coordinator("g"))
    nc = E.NotCoordinatorError.code
    assert (await env.call(join_req(), 9, broker=wrong)).error_code == nc
    assert (await env.call(SyncGroupRequest(group_id="g", member_id="m"), 5, broker=wrong)).error_code == nc
    assert (await env.call(HeartbeatRequest(group_id="g", member_id="m"), 4, broker=wrong)).error_code == nc
    assert (await env.call(LeaveGroupRequest(group_id="g", member_id="m"), 1, broker=wrong)).error_code == nc
    assert errs(await env.call(commit_req(), 8, broker=wrong))[("t", 0)] == nc
    r = await env.call(
        OffsetFetchRequest(
            group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
        ),
        1,
        broker=wrong,
    )
    assert r.topics[0].partitions[0].error_code == nc
    r = await env.call(OffsetFetchRequest(group_id="g", topics=None), 7, broker=wrong)
    assert r.error_code == nc
    r = await env.call(
        OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", topics=None)]),
        9,
        broker=wrong,
    )
    assert r.groups[0].error_code == nc
    r = await env.call(DescribeGroupsRequest(groups=["g"]), 5, broker=wrong)
    assert r.groups[0].error_code == nc
    r = await env.call(DeleteGroupsRequest(groups_names=["g"]), 2, broker=wrong)
    assert r.results[0].error_code == nc


async def test_coordinator_move_fails_pending_join() -> None:
    env = Env(brokers=2)
    a = await join_new(env)
    b = await join_new(env)
    ta = env.start(join_req(a), 9)
    await env.advance(0)
    ra = await ta
    await env.call(SyncGroupRequest(group_id="g", generation_id=ra.generation_id, member_id=a), 5)
    tb = env.start(join_req(b), 9)
    await settle()
    assert not tb.done()
    old = env.coordinator("g")
    new = 2 if old == 1 else 1
    env.gc.move_coordinator("g", new)
    rb = await tb
    assert rb.error_code == E.NotCoordinatorError.code
    assert await hb(env, a, ra.generation_id) == E.RebalanceInProgressError.code  # served by the new one
    r = await env.call(HeartbeatRequest(group_id="g", generation_id=1, member_id=a), 4, broker=old)
    assert r.error_code == E.NotCoordinatorError.code


async def test_expire_member_fault_injection() -> None:
    env = Env()
    (a, b), gen = await form_group(env, 2)
    assert env.gc.expire_member("g", b)
    assert not env.gc.expire_member("g", b)
    assert not env.gc.expire_member("nope", a)
    assert b not in env.group().members
    assert await hb(env, a, gen) == E.RebalanceInProgressError.code


# -- describe / list / delete ----------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 3, 4, 5, 6])
async def test_describe_groups(version: int) -> None:
    env = Env()
    (a, b), _gen = await form_group(env, 2)
    r = await env.call(
        DescribeGroupsRequest(groups=["g", "missing"], include_authorized_operations=version >= 3), version
    )
    g, missing = r.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert sorted((m.member_id, m.member_assignment) for m in g.members) == sorted([(a, b"a0"), (b, b"a1")])
    assert all(
        m.member_metadata == sub("t") and m.client_id == "cli" and m.client_host == "/127.0.0.1"
        for m in g.members
    )
    if version >= 3:
        assert g.authorized_operations > 0
    assert missing.group_state == "Dead" and missing.members == []
    assert missing.error_code == (E.GroupIdNotFoundError.code if version >= 6 else NONE)


async def test_list_groups_with_filters() -> None:
    env = Env()
    await form_group(env, 1)
    await env.call(commit_req(group="simple"), 8)
    r = await env.call(ListGroupsRequest(), 3)
    assert sorted((g.group_id, g.protocol_type) for g in r.groups) == [("g", "consumer"), ("simple", "")]
    r = await env.call(ListGroupsRequest(states_filter=["stable"]), 4)
    assert [(g.group_id, g.group_state) for g in r.groups] == [("g", "Stable")]
    r = await env.call(ListGroupsRequest(states_filter=["Empty"], types_filter=["classic"]), 5)
    assert [(g.group_id, g.group_type) for g in r.groups] == [("simple", "classic")]
    r = await env.call(ListGroupsRequest(types_filter=["consumer"]), 5)
    assert r.groups == []


async def test_list_groups_only_coordinated_by_this_broker() -> None:
    env = Env(brokers=3)
    names = [f"grp{i}" for i in range(10)]
    for n in names:
        await env.call(commit_req(group=n), 8)
    seen: list[str] = []
    for b in (1, 2, 3):
        r = await env.call(ListGroupsRequest(), 4, broker=b)
        seen += [g.group_id for g in r.groups]
        assert all(env.coordinator(g.group_id) == b for g in r.groups)
    assert sorted(seen) == sorted(names)


async def test_delete_groups() -> None:
    env = Env()
    await form_group(env, 1)
    await env.call(commit_req(group="simple"), 8)
    r = await env.call(DeleteGroupsRequest(groups_names=["g", "simple", "missing"]), 2)
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("g", E.NonEmptyGroupError.code),
        ("simple", NONE),
        ("missing", E.GroupIdNotFoundError.code),
    ]
    assert await fetch(env, 8, group="simple", topics=None) == {}
    assert "simple" not in env.gc.groups


async def test_offset_delete() -> None:
    env = Env()
    await env.call(commit_req(group="g", offsets={("t", 0): 1, ("u", 0): 2}), 8)
    [_a], _gen = await form_group(env, 1)  # subscribed to "t" only
    r = await env.call(
        OffsetDeleteRequest(
            group_id="g",
            topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name="t", partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]
                ),
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name="u", partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]
                ),
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name="zz",
                    partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)],
                ),
            ],
        ),
        0,
    )
    assert r.error_code == NONE
    assert errs(r) == {
        ("t", 0): E.GroupSubscribedToTopicError.code,
        ("u", 0): NONE,
        ("zz", 0): E.UnknownTopicOrPartitionError.code,
    }
    got = await fetch(env, 8, topics=None)
    assert set(got) == {("t", 0)}
    r = await env.call(OffsetDeleteRequest(group_id="missing"), 0)
    assert r.error_code == E.GroupIdNotFoundError.code


async def test_deleted_topic_loses_offsets() -> None:
    env = Env()
    await env.gc.start()
    try:
        await env.call(commit_req(offsets={("t", 0): 1, ("u", 1): 2}), 8)
        env.cluster.delete_topic("u")
        assert set(await fetch(env, 8, topics=None)) == {("t", 0)}
    finally:
        await env.gc.stop()


# -- persistence and lifecycle ----------------------------------------------------------------
async def test_offsets_persist_in_append_only_file(tmp_path: Any) -> None:
    path = tmp_path / "offsets.jsonl"
    store = OffsetStore(path)
    store.open()
    tp = TopicPartition("t", 0)
    store.commit("g", {tp: CommittedOffset(5, 1, "meta", 123)})
    store.commit("g", {tp: CommittedOffset(6)})
    store.commit("h", {TopicPartition("t", 1): CommittedOffset(9)})
    store.delete_group("h")
    store.add_pending("g", 77, {TopicPartition("t", 2): CommittedOffset(3)})
    store.close()
    again = OffsetStore(path)
    again.open()
    try:
        assert again.all("g") == {tp: CommittedOffset(6)}
        assert again.all("h") == {}
        assert not again.is_pending("g", TopicPartition("t", 2))  # pending offsets are never written
    finally:
        again.close()


async def test_stop_cancels_timers_and_answers_waiters() -> None:
    env = Env()
    await env.gc.start()
    (_a, _b), _gen = await form_group(env, 2)
    c = await join_new(env)
    tc = env.start(join_req(c), 9)
    await settle()
    assert len(env.gc.timers) > 0
    await env.gc.stop()
    assert len(env.gc.timers) == 0 and env.clock.pending() == 0
    assert (await tc).error_code == E.NotCoordinatorError.code


def test_group_coordinator_registers_every_api() -> None:
    env = Env()
    ranges = {k: (lo, hi) for k, lo, hi in env.registry.version_ranges()}
    assert ranges[JoinGroupRequest.API_KEY] == (0, 9)
    assert ranges[OffsetCommitRequest.API_KEY] == (2, 9)
    assert ranges[OffsetFetchRequest.API_KEY] == (1, 9)
    assert ranges[FindCoordinatorRequest.API_KEY] == (0, 6)
    # Registering again (one registry per broker) reuses the cluster's coordinator.
    again = register_group_handlers(HandlerRegistry(), env.cluster)
    assert again is env.gc
