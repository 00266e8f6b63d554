"""GroupCoordinator (driver) without a Consumer, on the embedded 3-broker cluster or on
Apache Kafka (--kafka=apache): membership, rebalances, listeners, commits, faults."""

from __future__ import annotations

import asyncio

import pytest
from group_testlib import Member, balanced, crash_broker, eventually, group_cluster

from aiokafka_lite.admin import Admin
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume.groups import ConsumerGroupMetadata, MemberState
from aiokafka_lite.consume.subscription import OffsetAndMetadata
from aiokafka_lite.core.errors import (
    CommitFailedError,
    GroupMaxSizeReachedError,
    IllegalStateError,
)
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.net import Client
from aiokafka_lite.wire.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

ALL = {TP("t", p) for p in range(12)}
COOP = {"partition_assignment_strategy": ["cooperative-sticky"]}
EAGER = {"partition_assignment_strategy": ["range"]}


TOPICS = {"t": 12, "u": 4}


@pytest.fixture
async def cluster(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> EmbeddedCluster:
    return await group_cluster(request, TOPICS)


@pytest.fixture
async def cluster3(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> EmbeddedCluster:
    """Three brokers on either Kafka (the test stops one)."""
    return await group_cluster(request, TOPICS, several_brokers=True)


async def close_all(*members: Member) -> None:
    for m in members:
        await m.close()


async def test_single_member_gets_everything_and_commits(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    try:
        await eventually(lambda: a.assignment() == ALL, what="assignment")
        assert a.listener.of("assigned") == [frozenset(ALL)]
        md = a.gc.group_metadata()
        assert isinstance(md, ConsumerGroupMetadata)
        assert md.group_id == "g" and md.generation_id >= 1 and md.member_id
        # commit explicit offsets (int, tuple with metadata, OffsetAndMetadata) and read them back
        await a.gc.commit({TP("t", 0): 5, TP("t", 1): (7, "meta"), TP("t", 2): OffsetAndMetadata(9, "x", 3)})
        got = await a.gc.fetch_committed([TP("t", 0), TP("t", 1), TP("t", 2), TP("t", 3)])
        assert got[TP("t", 0)] == OffsetAndMetadata(5, "", None)
        assert got[TP("t", 1)] == OffsetAndMetadata(7, "meta", None)
        assert got[TP("t", 2)] == OffsetAndMetadata(9, "x", 3)
        assert got[TP("t", 3)] is None
        # commit() with no argument commits consumed positions
        a.sub.seek(TP("t", 4), 11)
        await a.gc.commit()
        assert (await a.gc.fetch_committed([TP("t", 4)]))[TP("t", 4)] == OffsetAndMetadata(11, "", None)
        with pytest.raises(IllegalStateError):
            await a.gc.commit({TP("t", 0): -1})
    finally:
        await a.close()
    assert a.listener.events[-1] == ("revoked", frozenset(ALL))
    assert a.assignment() == set()


async def test_cooperative_join_and_leave_one_by_one(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL), what="a alone")
    b = await Member(cluster, "b", **COOP).start()
    await eventually(lambda: balanced([a, b], ALL), what="a+b")
    c = await Member(cluster, "c", **COOP).start()
    await eventually(lambda: balanced([a, b, c], ALL), what="a+b+c")
    # KIP-429: "a" only ever revoked partitions it then stopped owning; it never revoked
    # everything, and nothing it kept was revoked and re-assigned.
    kept = a.assignment()
    for revoked in a.listener.of("revoked"):
        assert revoked.isdisjoint(kept)
        assert revoked != frozenset(ALL)
    assert not a.listener.of("lost")
    await b.close()
    await eventually(lambda: balanced([a, c], ALL), what="a+c")
    assert kept <= a.assignment()  # survivors keep what they had
    await c.close()
    await eventually(lambda: balanced([a], ALL), what="a alone again")
    await a.close()


async def test_eager_revokes_everything_on_rebalance(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **EAGER).start()
    await eventually(lambda: balanced([a], ALL))
    b = await Member(cluster, "b", **EAGER).start()
    await eventually(lambda: balanced([a, b], ALL))
    assert a.listener.of("revoked")[0] == frozenset(ALL)
    # range: contiguous halves
    assert {len(a.assignment()), len(b.assignment())} == {6}
    await close_all(a, b)


async def test_revoke_callback_sees_frozen_partitions_and_blocks_poll(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    seen_paused: list[bool] = []
    release = asyncio.Event()
    entered = asyncio.Event()

    async def hook(kind: str, tps: set[TP]) -> None:
        if kind == "revoked":
            seen_paused.append(all(a.sub.state(tp).paused for tp in tps))
            entered.set()
            await release.wait()

    a.listener.hook = hook
    b = await Member(cluster, "b", **COOP).start()
    await asyncio.wait_for(entered.wait(), 15)
    # the application's poll waits while the revocation is in progress
    poll = asyncio.create_task(a.gc.poll())
    await asyncio.sleep(0.2)
    assert not poll.done()
    release.set()
    await asyncio.wait_for(poll, 5)
    assert seen_paused == [True]
    await eventually(lambda: balanced([a, b], ALL))
    await close_all(a, b)


async def test_listener_exception_is_raised_from_poll(cluster: EmbeddedCluster) -> None:
    a = Member(cluster, "a", **COOP)

    def boom(kind: str, tps: set[TP]) -> None:
        if kind == "assigned":
            raise RuntimeError("listener bug")

    a.listener.hook = boom
    await a.start(poll=False)
    await eventually(lambda: a.assignment() == ALL)
    await eventually(lambda: a.gc._app_idle.is_set())
    with pytest.raises(RuntimeError, match="listener bug"):
        await a.gc.poll()
    await a.gc.poll()  # raised once; the member carries on
    await a.close()


async def test_member_killed_without_leaving_loses_partitions_after_session_timeout(
    cluster: EmbeddedCluster,
) -> None:
    a = await Member(cluster, "a", **COOP).start()
    b = await Member(cluster, "b", **COOP).start()
    await eventually(lambda: balanced([a, b], ALL))
    await b.kill()  # no LeaveGroup
    await eventually(lambda: balanced([a], ALL), what="b's partitions moved after its session expired")
    await a.close()


@pytest.mark.kafka_embedded  # move_group_coordinator; on Kafka: the broker-stopped tests
async def test_coordinator_moved_group_survives(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    b = await Member(cluster, "b", **COOP).start()
    await eventually(lambda: balanced([a, b], ALL))
    before = (a.assignment(), b.assignment())
    old = a.gc.membership.coordinator
    assert old is not None
    new = next(n for n in (1, 2, 3) if n != old)
    cluster.move_group_coordinator("g", new)
    await eventually(lambda: a.gc.membership.coordinator == new and b.gc.membership.coordinator == new)
    await eventually(lambda: balanced([a, b], ALL))
    assert (a.assignment(), b.assignment()) == before
    await a.gc.commit({TP("t", 0): 1})
    assert (await b.gc.fetch_committed([TP("t", 0)]))[TP("t", 0)] == OffsetAndMetadata(1, "", None)
    await close_all(a, b)


async def group_coordinated_by(client: Client, node_id: int) -> str:
    """A group id whose coordinator is ``node_id`` (coordinators are spread by hashing)."""
    for i in range(200):
        group_id = f"offsets-only-{i}"
        if await client.find_coordinator(group_id) == node_id:
            return group_id
    raise AssertionError(f"no group id coordinated by broker {node_id} found")


async def test_coordinator_broker_stopped_group_survives(cluster3: EmbeddedCluster) -> None:
    a = await Member(cluster3, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    old = a.gc.membership.coordinator
    assert old is not None
    await cluster3.stop_broker(old)
    await eventually(lambda: a.gc.membership.coordinator not in (None, old), limit=60)
    b = await Member(cluster3, "b", **COOP).start()
    await eventually(lambda: balanced([a, b], ALL), limit=60)
    await close_all(a, b)


async def test_coordinator_broker_killed_commits_survive(cluster3: EmbeddedCluster) -> None:
    """The coordinator's broker dies (no controlled shutdown): the member finds the new
    coordinator, keeps its partitions and generation, and its committed offsets are
    there (the offsets topic is replicated)."""
    a = await Member(cluster3, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    await a.gc.commit({TP("t", 0): 7, TP("t", 5): 11})
    generation = a.gc.membership.generation
    old = a.gc.membership.coordinator
    assert old is not None
    # Also an offsets-only user (manual assignment, never joins) of a group with the same
    # coordinator: its commits find the coordinator through the client's lookup cache,
    # which must not keep answering the dead broker (Kafka names it as the coordinator
    # until it notices the death, ~9 s).
    solo = Member(cluster3, "solo", group_id=await group_coordinated_by(a.client, old))
    solo.sub.unsubscribe()
    solo.sub.assign_manually([TP("t", 0)])
    await solo.start(poll=False)
    await solo.gc.commit({TP("t", 0): 1})
    await crash_broker(cluster3, old)
    await solo.gc.commit({TP("t", 0): 2})
    assert (await solo.gc.fetch_committed([TP("t", 0)]))[TP("t", 0)] == OffsetAndMetadata(2, "", None)
    await solo.close()
    await a.gc.commit({TP("t", 1): 3})  # retried until the new coordinator answers
    assert a.gc.membership.coordinator not in (None, old)
    got = await a.gc.fetch_committed([TP("t", 0), TP("t", 1), TP("t", 5)])
    assert got == {
        TP("t", 0): OffsetAndMetadata(7, "", None),
        TP("t", 1): OffsetAndMetadata(3, "", None),
        TP("t", 5): OffsetAndMetadata(11, "", None),
    }
    assert balanced([a], ALL) and a.gc.membership.generation == generation
    assert not a.listener.of("lost")
    await a.close()


@pytest.mark.kafka_embedded  # expire_group_member
async def test_commit_rejected_after_fencing_raises_commit_failed(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start(poll=False)
    await eventually(lambda: balanced([a], ALL))
    member_id = a.gc.membership.member_id
    cluster.expire_group_member("g", member_id)
    with pytest.raises(CommitFailedError):
        await a.gc.commit({TP("t", 0): 3})
    # the member notices, declares its partitions lost and rejoins with a new id
    await eventually(lambda: a.listener.of("lost") == [frozenset(ALL)])
    await eventually(lambda: balanced([a], ALL))
    assert a.gc.membership.member_id != member_id
    await a.close()


@pytest.mark.kafka_embedded  # inject_error
async def test_commit_and_fetch_retry_on_coordinator_errors(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    cluster.inject_error(OffsetCommitRequest, 16, count=2)  # NOT_COORDINATOR
    await a.gc.commit({TP("t", 0): 4})
    cluster.inject_error(OffsetFetchRequest, 88, count=2)  # UNSTABLE_OFFSET_COMMIT
    cluster.inject_error(OffsetFetchRequest, 14, count=1)  # COORDINATOR_LOAD_IN_PROGRESS
    assert (await a.gc.fetch_committed([TP("t", 0)]))[TP("t", 0)] == OffsetAndMetadata(4, "", None)
    await a.close()


@pytest.mark.kafka_embedded  # inject_error, drop_connection
async def test_heartbeat_errors_are_survived(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    generation = a.gc.membership.generation
    cluster.inject_error(HeartbeatRequest, 27, count=1)  # REBALANCE_IN_PROGRESS (spurious)
    await eventually(
        lambda: a.gc.membership.generation > generation, what="rejoin after REBALANCE_IN_PROGRESS"
    )
    await eventually(lambda: balanced([a], ALL))
    assert not a.listener.of("lost") and not a.listener.of("revoked")
    cluster.drop_connection(HeartbeatRequest, count=1)
    await eventually(lambda: balanced([a], ALL))
    await a.close()


@pytest.mark.kafka_embedded  # inject_error
async def test_join_errors_are_retried(cluster: EmbeddedCluster) -> None:
    cluster.inject_error(JoinGroupRequest, 14, count=2)  # COORDINATOR_LOAD_IN_PROGRESS
    cluster.inject_error(JoinGroupRequest, 15, count=1)  # COORDINATOR_NOT_AVAILABLE
    a = await Member(cluster, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    await a.close()


async def test_group_max_size_is_fatal_for_the_extra_member(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> None:
    cl = await group_cluster(request, {"t": 12}, broker_settings={"group.max.size": "1"})
    a = await Member(cl, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    b = await Member(cl, "b", **COOP).start(poll=False)
    await eventually(lambda: b.gc.state is MemberState.FAILED)
    with pytest.raises(GroupMaxSizeReachedError):
        await b.gc.poll()
    assert balanced([a], ALL)
    await close_all(a, b)


async def test_poll_timeout_leaves_and_rejoins_when_polling_resumes(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", max_poll_interval_ms=1000, **COOP).start(poll=False)
    b = await Member(cluster, "b", **COOP).start()
    await eventually(lambda: balanced([a, b], ALL))
    owned = frozenset(a.assignment())
    # "a" never polls: after max_poll_interval_ms it leaves, "b" takes everything
    await eventually(lambda: b.assignment() == ALL, what="b takes over")
    assert a.gc.membership.poll_timed_out
    assert all(a.sub.state(tp).paused for tp in owned)  # nothing handed out meanwhile
    await a.start_polling_again()
    await eventually(lambda: balanced([a, b], ALL), what="a back")
    assert a.listener.of("lost") == [owned]
    await close_all(a, b)


# Static members stay in the group after closing, until their session expires: their
# tests use a group of their own, so that no later test meets them.
STATIC = {"session_timeout_ms": 6000, **COOP}


async def test_static_member_restart_keeps_assignment_without_rebalance(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", group_id="static-restart", group_instance_id="inst-a", **STATIC).start()
    b = await Member(cluster, "b", group_id="static-restart", group_instance_id="inst-b", **STATIC).start()
    await eventually(lambda: balanced([a, b], ALL))
    a_owned = a.assignment()
    b_events = len(b.listener.events)
    generation = b.gc.membership.generation
    await a.close()  # static: no LeaveGroup
    a2 = await Member(cluster, "a2", group_id="static-restart", group_instance_id="inst-a", **STATIC).start()
    await eventually(lambda: a2.assignment() == a_owned, what="same assignment after restart")
    await asyncio.sleep(0.5)
    assert len(b.listener.events) == b_events  # b saw no rebalance
    assert b.gc.membership.generation == generation
    await close_all(a2, b)


async def test_subscription_change_rejoins(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    a.sub.subscribe(["t", "u"], listener=a.listener)
    u = {TP("u", p) for p in range(4)}
    await eventually(lambda: balanced([a], ALL | u), what="u assigned")
    await a.close()


async def test_close_is_idempotent_and_poll_after_close_fails(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    await a.stop_polling()  # (its next poll would fail too, as asserted below)
    await asyncio.gather(a.gc.close(), a.gc.close())
    from aiokafka_lite.core.errors import ClosedError

    with pytest.raises(ClosedError):
        await a.gc.poll()
    await a.close()


async def test_manual_assignment_uses_the_group_for_offsets_only(cluster: EmbeddedCluster) -> None:
    a = Member(cluster, "a")
    a.sub.unsubscribe()
    a.sub.assign_manually([TP("t", 0), TP("t", 1)])
    await a.start(poll=False)
    await a.gc.poll()
    await a.gc.commit({TP("t", 0): 12})
    assert (await a.gc.fetch_committed([TP("t", 0)]))[TP("t", 0)] == OffsetAndMetadata(12, "", None)
    assert a.gc.membership.member_id == "" and a.gc.state is MemberState.UNJOINED  # never joined
    assert a.listener.events == []
    await a.close()


async def test_leader_rejoins_when_partitions_are_added(cluster: EmbeddedCluster) -> None:
    a = await Member(cluster, "a", **COOP).start()
    await eventually(lambda: balanced([a], ALL))
    assert a.gc.membership.is_leader
    async with Admin(cluster.bootstrap) as admin:
        (await admin.create_partitions({"t": 14})).raise_errors()
    # (periodic in real life; a broker may serve the old count for a moment)
    async with asyncio.timeout(15):
        while len(a.client.cluster.partitions_for("t")) != 14:
            await a.client.refresh_metadata(["t"])
            await asyncio.sleep(0.05)
    more = ALL | {TP("t", 12), TP("t", 13)}
    await eventually(lambda: balanced([a], more), what="new partitions assigned")
    await a.close()


async def test_duplicate_static_instance_fences_the_old_member(cluster: EmbeddedCluster) -> None:
    from aiokafka_lite.core.errors import FencedInstanceIdError

    a = await Member(cluster, "a", group_id="static-fenced", group_instance_id="same", **STATIC).start(
        poll=False
    )
    await eventually(lambda: balanced([a], ALL))
    b = await Member(cluster, "b", group_id="static-fenced", group_instance_id="same", **STATIC).start()
    await eventually(lambda: b.assignment() == ALL, what="the new instance took over")
    await eventually(lambda: a.gc.state is MemberState.FAILED, what="the old instance fenced")
    with pytest.raises(FencedInstanceIdError):
        await a.gc.poll()
    await close_all(a, b)


class EverythingToFirst:
    """A user-defined assignor: all partitions to the smallest member id."""

    name = "everything-to-first"
    rebalance_protocol = "eager"

    def metadata(self, topics: list[str], owned: list[TP], generation: int) -> bytes | None:
        return b"custom"

    def assign(
        self,
        members: dict[str, object],
        partitions_per_topic: dict[str, int],
        partition_racks: dict[TP, set[str]] | None = None,
    ) -> dict[str, list[TP]]:
        first = min(members)
        return {
            m: [TP(t, p) for t, n in sorted(partitions_per_topic.items()) for p in range(n)]
            if m == first
            else []
            for m in members
        }


async def test_user_defined_assignor(cluster: EmbeddedCluster) -> None:
    strategy = {"partition_assignment_strategy": [EverythingToFirst()]}
    a = await Member(cluster, "a", **strategy).start()
    b = await Member(cluster, "b", **strategy).start()
    await eventually(
        lambda: (
            {frozenset(a.assignment()), frozenset(b.assignment())} == {frozenset(ALL), frozenset()}
            and a.gc.state is MemberState.STABLE
            and b.gc.state is MemberState.STABLE
            and not (a.gc.membership.rejoin_needed or b.gc.membership.rejoin_needed)
        )
    )
    winner = a if a.assignment() else b
    assert winner.gc.membership.member_id == min(a.gc.membership.member_id, b.gc.membership.member_id)
    await close_all(a, b)
