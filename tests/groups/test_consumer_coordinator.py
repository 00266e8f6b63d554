"""ConsumerGroupCoordinator (the consumer-protocol driver) behind a real Consumer, on the
embedded cluster or on Apache Kafka (--kafka=apache): faults, fencing, poll timeouts,
fatal errors. The fault-injection cases need the embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest
from group_testlib import eventually, group_cluster

from aiokafka_lite import Consumer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume.groups.consumer_coordinator import ConsumerGroupCoordinator
from aiokafka_lite.consume.groups.consumer_membership import ConsumerMemberState
from aiokafka_lite.core.errors import (
    CommitFailedError,
    GroupMaxSizeReachedError,
    KafkaError,
    UnreleasedInstanceIdError,
)
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.wire.messages import ConsumerGroupHeartbeatRequest, OffsetCommitRequest

PARTITIONS = 4
FAST_CONSUMER_GROUPS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}


@pytest.fixture
async def cluster(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> EmbeddedCluster:
    return await group_cluster(request, {}, broker_settings=FAST_CONSUMER_GROUPS)


class Events:
    def __init__(self) -> None:
        self.log: list[tuple[str, frozenset[TP]]] = []

    async def on_partitions_assigned(self, tps: set[TP]) -> None:
        self.log.append(("assigned", frozenset(tps)))

    async def on_partitions_revoked(self, tps: set[TP]) -> None:
        self.log.append(("revoked", frozenset(tps)))

    async def on_partitions_lost(self, tps: set[TP]) -> None:
        self.log.append(("lost", frozenset(tps)))

    def of(self, kind: str) -> list[frozenset[TP]]:
        return [tps for k, tps in self.log if k == kind]


class Member:
    """A consumer-protocol Consumer polling in a task (unless told not to)."""

    def __init__(
        self, cluster: EmbeddedCluster, topic: str, group: str, group_protocol: str = "consumer", **opts: Any
    ) -> None:
        self.events = Events()
        self.consumer = Consumer(
            cluster.bootstrap,
            topics=[topic],
            group_id=group,
            group_protocol=group_protocol,
            auto_offset_reset="earliest",
            listener=self.events,
            **opts,
        )
        self.task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None
        self.polling = asyncio.Event()

    @property
    def gc(self) -> ConsumerGroupCoordinator:
        gc = self.consumer.coordinator
        assert isinstance(gc, ConsumerGroupCoordinator)
        return gc

    async def start(self, poll: bool = True) -> Member:
        await self.consumer.start()
        if poll:
            self.polling.set()
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        try:
            while True:
                await self.polling.wait()
                await self.consumer.getmany(timeout_ms=50)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.error = exc

    def stable_with(self, tps: set[TP]) -> bool:
        return self.gc.state is ConsumerMemberState.STABLE and self.consumer.assignment() == tps

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.consumer.close()


def names() -> tuple[str, str]:
    return f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"


@pytest.mark.kafka_embedded  # expire_group_member
async def test_member_fenced_while_a_commit_is_in_flight(cluster: EmbeddedCluster) -> None:
    """The broker drops the member (as if its session expired) while the application
    commits: the commit fails with CommitFailedError, the member's partitions are lost
    (no revoke, no commit) and it rejoins with epoch 0 and the same member id."""
    topic, group = names()
    cluster.create_topic(topic, PARTITIONS)
    every = {TP(topic, p) for p in range(PARTITIONS)}
    a = await Member(cluster, topic, group, enable_auto_commit=False).start(poll=False)
    try:
        await a.gc.poll()
        await eventually(lambda: a.stable_with(every), limit=30)
        member_id, epoch = a.gc.membership.member_id, a.gc.member_epoch
        assert cluster.expire_group_member(group, member_id)
        with pytest.raises(CommitFailedError):
            await a.consumer.commit({TP(topic, 0): 1})
        a.polling.set()
        await eventually(lambda: a.events.of("lost") == [frozenset(every)], what="partitions lost")
        await eventually(lambda: a.stable_with(every), limit=30, what="rejoined")
        assert a.gc.membership.member_id == member_id  # KIP-1082: the client keeps its id
        assert a.gc.member_epoch > epoch
        assert not a.events.of("revoked")
        await a.consumer.commit({TP(topic, 0): 1})  # the new epoch commits
    finally:
        await a.close()


@pytest.mark.kafka_embedded  # inject_error, drop_connection
async def test_heartbeat_and_commit_faults_are_survived(cluster: EmbeddedCluster) -> None:
    topic, group = names()
    cluster.create_topic(topic, PARTITIONS)
    every = {TP(topic, p) for p in range(PARTITIONS)}
    a = await Member(cluster, topic, group, enable_auto_commit=False).start()
    try:
        await eventually(lambda: a.stable_with(every), limit=30)
        epoch = a.gc.member_epoch
        cluster.inject_error(OffsetCommitRequest, 113, count=2)  # STALE_MEMBER_EPOCH: retried
        await a.consumer.commit({TP(topic, 0): 2})
        assert await a.consumer.committed(TP(topic, 0)) == 2
        cluster.inject_error(ConsumerGroupHeartbeatRequest, 16, count=2)  # NOT_COORDINATOR
        cluster.drop_connection(ConsumerGroupHeartbeatRequest, count=1)
        cluster.inject_error(ConsumerGroupHeartbeatRequest, 14, count=1)  # COORDINATOR_LOAD_IN_PROGRESS
        await asyncio.sleep(2)
        await eventually(lambda: a.stable_with(every), limit=30)
        assert a.gc.member_epoch == epoch and not a.events.of("lost")  # no rebalance for any of it
        cluster.inject_error(ConsumerGroupHeartbeatRequest, 110, count=1)  # FENCED_MEMBER_EPOCH
        await eventually(lambda: a.events.of("lost") == [frozenset(every)], limit=30, what="fenced")
        await eventually(lambda: a.stable_with(every), limit=30, what="rejoined")
    finally:
        await a.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_bug_in_heartbeat_handling_is_raised_from_getmany(
    cluster: EmbeddedCluster, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected exception in the heartbeat loop (a bug, not a Kafka error) is the
    coordinator's crash, as one in its main loop is: getmany raises it, on every call,
    instead of the member silently losing its heartbeats (and a session later its
    partitions) while the application keeps polling. Closing still works."""
    topic, group = names()
    cluster.create_topic(topic, PARTITIONS)
    every = {TP(topic, p) for p in range(PARTITIONS)}
    opts = {"heartbeat_interval_ms": 200} if protocol == "classic" else {}
    a = Member(cluster, topic, group, group_protocol=protocol, enable_auto_commit=False, **opts)
    await a.start()
    try:
        await eventually(lambda: a.consumer.assignment() == every, limit=30, what="assignment")
        gc = a.consumer.coordinator
        assert gc is not None and a.error is None

        def bug(request: object, response: object) -> None:
            raise RuntimeError("bug in heartbeat handling")

        monkeypatch.setattr(gc, "_heartbeat_answered", bug)
        await eventually(lambda: a.error is not None, limit=30, what="getmany raising the crash")
        assert isinstance(a.error, KafkaError), a.error
        assert "group coordinator crashed: RuntimeError('bug in heartbeat handling')" in str(a.error)
        assert gc._hb_task is not None and gc._hb_task.done()
        with pytest.raises(KafkaError, match="bug in heartbeat handling"):
            await a.consumer.getmany(timeout_ms=50)  # fatal: not raised once only
    finally:
        await a.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_bug_in_the_main_loop_is_raised_from_getmany(
    cluster: EmbeddedCluster, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The main loop (one loop for both protocols) records an unexpected exception as the
    coordinator's crash: getmany raises it on every call, and closing still works."""
    topic, group = names()
    cluster.create_topic(topic, PARTITIONS)
    every = {TP(topic, p) for p in range(PARTITIONS)}
    a = Member(cluster, topic, group, group_protocol=protocol, enable_auto_commit=False)
    await a.start()
    try:
        await eventually(lambda: a.consumer.assignment() == every, limit=30, what="assignment")
        gc = a.consumer.coordinator
        assert gc is not None and a.error is None

        def bug(now: float) -> float | None:
            raise RuntimeError("bug in the membership's deadline")

        monkeypatch.setattr(gc._m, "next_deadline", bug)
        gc._kick()
        await eventually(lambda: a.error is not None, limit=30, what="getmany raising the crash")
        assert isinstance(a.error, KafkaError), a.error
        assert 'group coordinator crashed: RuntimeError("bug in the membership\'s deadline")' in str(a.error)
        assert gc._main_task is not None and gc._main_task.done()
        with pytest.raises(KafkaError, match="bug in the membership's deadline"):
            await a.consumer.getmany(timeout_ms=50)
    finally:
        await a.close()


async def test_poll_timeout_leaves_the_group_and_rejoins_when_polling_resumes(
    cluster: EmbeddedCluster,
) -> None:
    topic, group = names()
    cluster.create_topic(topic, PARTITIONS)
    every = {TP(topic, p) for p in range(PARTITIONS)}
    a = await Member(cluster, topic, group, max_poll_interval_ms=3000).start()
    b = await Member(cluster, topic, group).start()
    try:
        await eventually(
            lambda: (
                a.consumer.assignment()
                and b.consumer.assignment()
                and a.gc.state is ConsumerMemberState.STABLE
            ),
            limit=30,
        )
        owned = frozenset(a.consumer.assignment())
        a.polling.clear()  # the application stops polling
        await eventually(lambda: b.stable_with(every), limit=30, what="b takes over after a left")
        assert a.gc.state is ConsumerMemberState.STALE
        assert all(a.consumer.subscription_state.state(tp).paused for tp in owned)  # nothing handed out
        a.polling.set()
        await eventually(lambda: a.events.of("lost") == [owned], limit=30, what="lost when back")
        await eventually(
            lambda: bool(a.consumer.assignment()) and a.gc.state is ConsumerMemberState.STABLE,
            limit=30,
            what="a rejoined",
        )
    finally:
        await a.close()
        await b.close()


async def test_a_second_member_with_a_static_id_in_use_fails(cluster: EmbeddedCluster) -> None:
    topic, group = names()
    cluster.create_topic(topic, PARTITIONS)
    every = {TP(topic, p) for p in range(PARTITIONS)}
    a = await Member(cluster, topic, group, group_instance_id="same").start()
    b = Member(cluster, topic, group, group_instance_id="same")
    try:
        await eventually(lambda: a.stable_with(every), limit=30)
        await b.start()
        await eventually(lambda: b.error is not None, limit=30, what="b refused")
        assert isinstance(b.error, UnreleasedInstanceIdError)
        await eventually(lambda: a.stable_with(every), limit=30)
    finally:
        await a.close()
        await b.close()


async def test_group_max_size_is_fatal_for_the_extra_member(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> None:
    cl = await group_cluster(
        request, {}, broker_settings={**FAST_CONSUMER_GROUPS, "group.consumer.max.size": "1"}
    )
    topic, group = names()
    cl.create_topic(topic, PARTITIONS)
    every = {TP(topic, p) for p in range(PARTITIONS)}
    a = await Member(cl, topic, group).start()
    b = Member(cl, topic, group)
    try:
        await eventually(lambda: a.stable_with(every), limit=30)
        await b.start()
        await eventually(lambda: b.error is not None, limit=30, what="b refused")
        assert isinstance(b.error, GroupMaxSizeReachedError)
        await eventually(lambda: a.stable_with(every), limit=30)
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize(
    ("options", "match"),
    [({"pattern": "t-(?!x).*"}, "RE2/J"), ({"pattern": "t-.*", "exclude": "t-x"}, "exclude=")],
)
async def test_patterns_the_broker_cannot_run_fail_from_the_first_poll(
    cluster: EmbeddedCluster, options: dict[str, str], match: str
) -> None:
    from aiokafka_lite.core.errors import ConfigError

    consumer = Consumer(cluster.bootstrap, group_id=names()[1], group_protocol="consumer", **options)  # type: ignore[arg-type]
    async with consumer:
        with pytest.raises(ConfigError, match=match):
            await consumer.getmany(timeout_ms=100)
