"""The consumer group protocol (KIP-848, ``group_protocol="consumer"``) end to end: real
Consumers, OrderedWorkers and TransactSessions on the embedded cluster or on Apache Kafka
(--kafka=apache, 4.4 and 4.0).

The broker computes the assignment and every member reconciles on its own; these tests
check what the application sees: rebalance listeners (a partition is never assigned to
a member before its previous owner's revoke listener ran), every record processed once
while members join and leave, auto-commit, ordered workers and transactions carrying the
member epoch, fencing of a killed member, static members, regex subscriptions, errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict
from typing import Any

import pytest
from group_testlib import (
    RecordingConsumer,
    crash_broker,
    end_offsets,
    eventually,
    group_cluster,
    produce_numbered_until,
)

from aiokafka_lite import Consumer
from aiokafka_lite.admin import Admin
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume import Record
from aiokafka_lite.consume.groups.consumer_coordinator import ConsumerGroupCoordinator
from aiokafka_lite.consume.groups.consumer_membership import ConsumerMemberState
from aiokafka_lite.core.errors import GroupIdNotFoundError, UnsupportedAssignorError
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.processing import OrderedWorkers
from aiokafka_lite.processing.transact import TransactSession
from aiokafka_lite.produce.producer import Producer

PARTITIONS = 8

# Broker timers short enough for members to meet within a test (Kafka's defaults: 5 s
# heartbeats, 45 s sessions, and minimums of the same size).
FAST_CONSUMER_GROUPS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def cluster(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> EmbeddedCluster:
    return await group_cluster(request, {}, broker_settings=FAST_CONSUMER_GROUPS)


class Ownership:
    """Rebalance listener bookkeeping across members: who owns what, by the callbacks."""

    def __init__(self) -> None:
        self.owner: dict[TP, str] = {}
        self.violations: list[str] = []
        self.events: dict[str, list[tuple[str, frozenset[TP]]]] = defaultdict(list)

    def listener(self, name: str) -> Any:
        book = self

        class Listener:
            async def on_partitions_assigned(self, tps: set[TP]) -> None:
                book.events[name].append(("assigned", frozenset(tps)))
                for tp in tps:
                    if tp in book.owner:
                        book.violations.append(f"{tp} assigned to {name} while {book.owner[tp]} owns it")
                    book.owner[tp] = name

            async def on_partitions_revoked(self, tps: set[TP]) -> None:
                book.events[name].append(("revoked", frozenset(tps)))
                for tp in tps:
                    if book.owner.get(tp) == name:
                        del book.owner[tp]

            async def on_partitions_lost(self, tps: set[TP]) -> None:
                book.events[name].append(("lost", frozenset(tps)))
                for tp in tps:
                    if book.owner.get(tp) == name:
                        del book.owner[tp]

        return Listener()


class Worker(RecordingConsumer):
    """A consumer-protocol member of ``group`` reading ``topic``."""

    def __init__(
        self,
        cluster: EmbeddedCluster,
        name: str,
        topic: str,
        group: str,
        seen: dict[tuple[int, int], list[str]],
        book: Ownership | None = None,
        **opts: Any,
    ) -> None:
        options = {
            "group_id": group,
            "group_protocol": "consumer",
            "auto_offset_reset": "earliest",
            "auto_commit_interval_ms": 500,
            **opts,
        }
        listener = book.listener(name) if book is not None else None
        super().__init__(
            Consumer(cluster.bootstrap, topics=[topic], listener=listener, **options), name, seen
        )

    def assignment(self) -> set[TP]:
        return self.consumer.assignment()

    def stable(self) -> bool:
        gc = self.consumer.coordinator
        return gc is not None and gc.state is ConsumerMemberState.STABLE


def balanced(workers: list[Worker], topic: str) -> bool:
    every = {TP(topic, p) for p in range(PARTITIONS)}
    owned = [w.assignment() for w in workers]
    if sum(len(o) for o in owned) != PARTITIONS or set().union(*owned) != every:
        return False
    sizes = [len(o) for o in owned]
    return max(sizes) - min(sizes) <= 1 and all(w.stable() for w in workers)


async def produce_until(
    cluster: EmbeddedCluster, topic: str, stop: asyncio.Event, interval: float = 0.03, per_partition: int = 10
) -> int:
    return await produce_numbered_until(
        cluster.bootstrap, topic, PARTITIONS, stop, interval=interval, per_partition=per_partition
    )


# ----------------------------------------------------------------------------- consumers


@pytest.mark.parametrize("assignor", ["uniform", "range"])
async def test_members_join_and_leave_while_records_flow_every_record_once(
    cluster: EmbeddedCluster, assignor: str
) -> None:
    topic, group = unique("kip848"), unique("g")
    cluster.create_topic(topic, PARTITIONS)
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    book = Ownership()
    workers = [
        Worker(cluster, f"w{i}", topic, group, seen, book, group_remote_assignor=assignor) for i in range(3)
    ]
    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, topic, stop))
    try:
        a, b, c = workers
        await a.start()
        await eventually(lambda: a.count > 0 and balanced([a], topic), what="a consuming")
        await b.start()
        await eventually(lambda: b.count > 0 and balanced([a, b], topic), what="a+b")
        await c.start()
        await eventually(lambda: c.count > 0 and balanced([a, b, c], topic), what="a+b+c")
        epochs = {w.name: w.consumer.coordinator.member_epoch for w in workers}  # type: ignore[union-attr]
        assert all(e > 0 for e in epochs.values()), epochs
        await a.stop()
        await eventually(lambda: balanced([b, c], topic), what="b+c")
        await b.stop()
        await eventually(lambda: balanced([c], topic), what="c alone")
        stop.set()
        total = await producer
        ends = end_offsets(cluster, topic, PARTITIONS)
        assert sum(ends.values()) == total
        await eventually(lambda: len(seen) == total, limit=60, what="everything consumed")
        await c.stop()
    finally:
        stop.set()
        producer.cancel()
        for w in workers:
            await w.cleanup()
    assert not book.violations, book.violations[:5]
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, f"{len(twice)} records processed more than once, e.g. {sorted(twice.items())[:5]}"
    assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}
    # Incremental: a member that stays is only ever told about what it gains or gives up,
    # and c, which stayed to the end, never lost anything.
    assert all(kind != "lost" for kind, _ in book.events["w2"])


async def test_killed_member_is_fenced_by_the_broker_and_its_partitions_move(
    cluster: EmbeddedCluster,
) -> None:
    topic, group = unique("kip848"), unique("g")
    cluster.create_topic(topic, PARTITIONS)
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    a = await Worker(cluster, "a", topic, group, seen).start()
    b = await Worker(cluster, "b", topic, group, seen).start()
    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, topic, stop))
    try:
        await eventually(lambda: balanced([a, b], topic) and a.count > 0 and b.count > 0, limit=30)
        await b.crash()  # no leave heartbeat, no final commit
        await eventually(
            lambda: balanced([a], topic), limit=30, what="a takes over after b's session expired"
        )
        stop.set()
        total = await producer
        await eventually(lambda: len(seen) == total, limit=60, what="everything consumed")
    finally:
        stop.set()
        await a.cleanup()
        await b.cleanup()
    ends = end_offsets(cluster, topic, PARTITIONS)
    # at-least-once: every record was processed; the killed member's uncommitted tail twice
    assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}


async def test_coordinator_killed_while_consuming_members_keep_their_epochs(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> None:
    """The group coordinator's broker dies while two members consume: they find the new
    coordinator and go on with the same epochs and partitions (no rebalance); after one
    leaves through the new coordinator, every record has been processed exactly once."""
    cluster = await group_cluster(request, {}, several_brokers=True, broker_settings=FAST_CONSUMER_GROUPS)
    topic, group = unique("kip848"), unique("g")
    cluster.create_topic(topic, PARTITIONS)
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    a = await Worker(cluster, "a", topic, group, seen).start()
    b = await Worker(cluster, "b", topic, group, seen).start()
    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, topic, stop))
    try:
        await eventually(lambda: balanced([a, b], topic) and a.count > 0 and b.count > 0, limit=30)
        gca, gcb = a.consumer.coordinator, b.consumer.coordinator
        assert gca is not None and gcb is not None
        epochs = (gca.member_epoch, gcb.member_epoch)  # type: ignore[attr-defined]
        owned = (a.assignment(), b.assignment())
        old = gca.membership.coordinator
        assert old is not None
        await crash_broker(cluster, old)
        await eventually(
            lambda: all(gc.membership.coordinator not in (None, old) for gc in (gca, gcb)),
            limit=60,
            what="coordinator rediscovered",
        )
        counts = (a.count, b.count)
        await eventually(lambda: a.count > counts[0] and b.count > counts[1], limit=60, what="consuming")
        assert (gca.member_epoch, gcb.member_epoch) == epochs  # type: ignore[attr-defined]
        assert (a.assignment(), b.assignment()) == owned
        await a.stop()  # commits through the new coordinator, then leaves
        await eventually(lambda: balanced([b], topic), limit=30)
        stop.set()
        total = await producer
        ends = end_offsets(cluster, topic, PARTITIONS)
        in_log = {(p, o) for p, end in ends.items() for o in range(end)}

        def behind() -> dict[int, tuple[int, int]]:
            """Partitions not read to their end: (records in the log, records read)."""
            read = {p: sum(1 for pp, _ in seen if pp == p) for p in ends}
            return {p: (end, read[p]) for p, end in ends.items() if read[p] < end}

        await eventually(
            lambda: in_log <= set(seen), limit=60, what="every record in the log consumed", detail=behind
        )
        assert sum(ends.values()) == total  # nothing produced was lost by the broker's death
    finally:
        stop.set()
        await a.cleanup()
        await b.cleanup()
    assert not {k: v for k, v in seen.items() if len(v) > 1}
    ends = end_offsets(cluster, topic, PARTITIONS)
    assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}


async def test_static_member_restarting_within_the_session_gets_its_partitions_back(
    cluster: EmbeddedCluster,
) -> None:
    topic, group = unique("kip848"), unique("g")
    cluster.create_topic(topic, PARTITIONS)
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    book = Ownership()
    a = await Worker(cluster, "a", topic, group, seen, book, group_instance_id="static-a").start()
    b = await Worker(cluster, "b", topic, group, seen, book, group_instance_id="static-b").start()
    try:
        await eventually(lambda: balanced([a, b], topic), limit=30)
        before_a, before_b = a.assignment(), b.assignment()
        b_events = len(book.events["b"])
        await a.stop()  # epoch -2: the broker keeps a's assignment for the session timeout
        a2 = await Worker(cluster, "a", topic, group, seen, book, group_instance_id="static-a").start()
        try:
            await eventually(lambda: balanced([a2, b], topic), limit=30, what="a back")
            assert a2.assignment() == before_a
            assert b.assignment() == before_b
            assert len(book.events["b"]) == b_events  # b saw no rebalance at all
        finally:
            await a2.cleanup()
    finally:
        await a.cleanup()
        await b.cleanup()
    assert not book.violations


async def test_regex_subscription_is_matched_by_the_broker_and_picks_up_new_topics(
    cluster: EmbeddedCluster,
) -> None:
    prefix = unique("rx")
    first, second, other = f"{prefix}-a", f"{prefix}-b", unique("other")
    cluster.create_topic(first, 2)
    cluster.create_topic(other, 2)
    consumer = Consumer(
        cluster.bootstrap,
        pattern=f"{prefix}-.*",
        group_id=unique("g"),
        group_protocol="consumer",
        auto_offset_reset="earliest",
        metadata_max_age_ms=1000,
    )
    async with consumer:

        async def poll_until(cond: Any, what: str) -> None:
            async with asyncio.timeout(40):
                while not cond():
                    await consumer.getmany(timeout_ms=100)
            assert cond(), what

        def stable() -> bool:
            gc = consumer.coordinator
            return gc is not None and gc.state is ConsumerMemberState.STABLE

        await poll_until(
            lambda: stable() and consumer.assignment() == {TP(first, 0), TP(first, 1)}, "first topic"
        )
        cluster.create_topic(second, 1)
        await poll_until(
            lambda: stable() and consumer.assignment() == {TP(first, 0), TP(first, 1), TP(second, 0)},
            "new topic",
        )
        # The broker matched the pattern: the member subscribed with it, not with names.
        async with Admin(cluster.bootstrap) as admin:
            gc = consumer.coordinator
            assert gc is not None
            (member,) = (await admin.describe_consumer_groups([gc.group_id]))[gc.group_id].members
        assert member.subscribed_topic_regex == f"{prefix}-.*" and member.subscribed_topics == ()


async def test_unknown_server_assignor_is_fatal(cluster: EmbeddedCluster) -> None:
    topic = unique("kip848")
    cluster.create_topic(topic, 1)
    consumer = Consumer(
        cluster.bootstrap,
        topics=[topic],
        group_id=unique("g"),
        group_protocol="consumer",
        group_remote_assignor="no-such-assignor",
    )
    async with consumer:
        with pytest.raises(UnsupportedAssignorError):
            async with asyncio.timeout(30):
                while True:
                    await consumer.getmany(timeout_ms=100)


# ----------------------------------------------------------------------------- workers, transactions


async def test_ordered_workers_process_every_record_once_in_order_across_rebalances(
    cluster: EmbeddedCluster,
) -> None:
    topic, group = unique("kip848"), unique("g")
    cluster.create_topic(topic, PARTITIONS)
    n = 4000
    async with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=2) as p:
        for part in range(PARTITIONS):
            await p.send_batch(topic, [b"%d" % i for i in range(n // PARTITIONS)], partition=part)
    done: dict[tuple[int, int], int] = defaultdict(int)
    last: dict[int, int] = {}
    order_errors: list[str] = []

    async def handle(record: Record) -> None:
        prev = last.get(record.partition, -1)
        if record.offset <= prev:
            order_errors.append(f"{record.partition}@{record.offset} after {prev}")
        last[record.partition] = record.offset
        done[(record.partition, record.offset)] += 1
        await asyncio.sleep(0.002)

    members: list[tuple[Consumer, OrderedWorkers, asyncio.Task[None]]] = []

    async def join() -> tuple[Consumer, OrderedWorkers, asyncio.Task[None]]:
        c = Consumer(
            cluster.bootstrap,
            topics=[topic],
            group_id=group,
            group_protocol="consumer",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await c.start()
        pool = OrderedWorkers(c, handle, concurrency=4, commit_interval_ms=200)
        member = (c, pool, asyncio.create_task(pool.run()))
        members.append(member)
        return member

    async def leave(member: tuple[Consumer, OrderedWorkers, asyncio.Task[None]]) -> None:
        c, pool, task = member
        pool.stop()
        await task
        await c.close()
        members.remove(member)

    try:
        first = await join()
        await eventually(lambda: len(done) > n // 10, limit=30, what="first progress")
        second = await join()
        await eventually(lambda: len(done) > n // 3 and bool(second[0].assignment()), limit=30)
        await leave(first)
        await eventually(lambda: len(done) == n, limit=60, what="everything processed")
        await leave(second)
    finally:
        for c, pool, task in list(members):
            pool.stop()
            with contextlib.suppress(Exception):
                await task
            await c.close()
    twice = {k: v for k, v in done.items() if v > 1}
    assert not twice, sorted(twice.items())[:5]
    # Order holds within each owner; a partition that moves restarts after the last
    # committed offset, so the offsets a member handles only ever increase.
    assert not order_errors, order_errors[:5]


async def test_transact_session_exactly_once_with_member_epochs(cluster: EmbeddedCluster) -> None:
    src, out, group = unique("eos-in"), unique("eos-out"), unique("eos")
    cluster.create_topic(src, 4)
    cluster.create_topic(out, 2)
    n = 3000
    async with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=2) as p:
        for part in range(4):
            await p.send_batch(src, [b"%d" % i for i in range(part, n, 4)], partition=part)

    async def handler(batch: dict[TP, list[Record]], producer: Producer) -> None:
        for recs in batch.values():
            await producer.enqueue_batch(out, [b"out-" + r.value for r in recs], keys=[r.value for r in recs])
        await asyncio.sleep(0.01)

    sessions: dict[str, tuple[TransactSession, asyncio.Task[None]]] = {}

    async def start(tid: str) -> None:
        session = TransactSession(
            cluster.bootstrap,
            group_id=group,
            transactional_id=tid,
            topics=[src],
            consumer_options={
                "group_protocol": "consumer",
                "auto_offset_reset": "earliest",
                "max_poll_records": 100,
            },
            producer_options={"linger_ms": 2},
        )
        await session.start()

        async def run() -> None:
            while True:
                await session.process(handler, timeout_ms=100)

        sessions[tid] = (session, asyncio.create_task(run()))

    async def stop(tid: str) -> None:
        session, task = sessions.pop(tid)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await session.close()

    async def committed() -> int:
        async with Admin(cluster.bootstrap) as admin:
            offsets = await admin.list_group_offsets(group)
        return sum(max(o.offset, 0) for tp, o in offsets.items() if tp.topic == src)

    async def wait_committed(at_least: int) -> None:
        async with asyncio.timeout(90):
            while await committed() < at_least:  # noqa: ASYNC110 - a remote condition, polled
                await asyncio.sleep(0.1)

    try:
        await start("848-a")
        await wait_committed(300)
        await start("848-b")  # rebalance under load
        group_meta = sessions["848-a"][0].consumer.group_metadata()
        assert group_meta.generation_id > 0  # the member epoch stands for the generation
        await wait_committed(1500)
        await stop("848-a")
        await wait_committed(n)
    finally:
        for tid in list(sessions):
            with contextlib.suppress(Exception):
                await stop(tid)
    rc: list[bytes] = []
    consumer = Consumer(cluster.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest")
    async with consumer:
        consumer.assign([TP(out, 0), TP(out, 1)])
        async with asyncio.timeout(30):
            while len(rc) < n:
                batch = await consumer.getmany(timeout_ms=500)
                rc += [r.value for recs in batch.values() for r in recs]
    assert sorted(rc) == sorted(b"out-%d" % i for i in range(n))


# ----------------------------------------------------------------------------- admin


async def test_admin_describes_and_lists_groups_of_both_protocols(cluster: EmbeddedCluster) -> None:
    topic, group, classic_group, nobody = unique("kip848"), unique("g"), unique("classic"), unique("nobody")
    cluster.create_topic(topic, PARTITIONS)
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    a = await Worker(cluster, "a", topic, group, seen, group_remote_assignor="uniform").start()
    b = await Worker(cluster, "b", topic, group, seen, group_remote_assignor="uniform").start()
    classic = Consumer(
        cluster.bootstrap,
        topics=[topic],
        group_id=classic_group,
        group_protocol="classic",
        heartbeat_interval_ms=200,
    )
    try:
        await eventually(lambda: balanced([a, b], topic), limit=30)
        await classic.start()
        async with asyncio.timeout(30):
            while not classic.assignment():
                await classic.getmany(timeout_ms=100)
        async with Admin(cluster.bootstrap) as admin:
            described = await admin.describe_consumer_groups([group, classic_group, nobody])
            d = described[group]
            assert d.error is None and d.type == "consumer"
            assert d.state == "Stable" and d.assignor == "uniform"
            assert d.group_epoch is not None and d.group_epoch > 0
            assert d.target_assignment_epoch == d.group_epoch
            by_id = {m.member_id: m for m in d.members}
            for w in (a, b):
                gc = w.consumer.coordinator
                assert gc is not None
                m = by_id[gc.membership.member_id]
                assert m.member_epoch == gc.member_epoch  # type: ignore[attr-defined]
                assert set(m.assignment) == w.assignment()
                assert m.target_assignment == m.assignment  # reconciled
                assert m.subscribed_topics == (topic,)
                assert m.member_type in ("consumer", "")  # "" before ConsumerGroupDescribe v1
            c = described[classic_group]
            assert c.error is None and c.type == "classic" and c.state == "Stable"
            assert c.group_epoch is None and [set(m.assignment) for m in c.members] == [classic.assignment()]
            assert isinstance(described[nobody].error, GroupIdNotFoundError)
            listed = await admin.list_consumer_groups(types=["consumer"])
            ids = {g.group_id for g in listed.groups}
            assert group in ids and classic_group not in ids
            listed = await admin.list_consumer_groups()
            ids = {g.group_id for g in listed.groups}
            assert {group, classic_group} <= ids
    finally:
        await classic.close()
        await a.cleanup()
        await b.cleanup()


# ----------------------------------------------------------------------------- upgrade


async def test_rolling_upgrade_of_a_live_classic_group_and_back_every_record_once(
    cluster: EmbeddedCluster,
) -> None:
    """Members of a classic group are restarted one by one with the consumer protocol (the
    broker converts the group when the first one joins and serves the classic members
    meanwhile), then rolled back the same way; records flow throughout and each is
    processed exactly once (graceful restarts commit before giving partitions up)."""
    topic, group = unique("upgrade"), unique("g")
    cluster.create_topic(topic, PARTITIONS)
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    classic = {"group_protocol": "classic", "heartbeat_interval_ms": 200}
    workers: list[Worker] = []

    async def start(name: str, **opts: Any) -> Worker:
        w = await Worker(cluster, name, topic, group, seen, **opts).start()
        workers.append(w)
        return w

    def all_consuming(ws: list[Worker]) -> bool:
        every = {TP(topic, p) for p in range(PARTITIONS)}
        owned = [w.assignment() for w in ws]
        return sum(len(o) for o in owned) == PARTITIONS and set().union(*owned) == every

    async def replace(old: Worker, name: str, **opts: Any) -> Worker:
        await old.stop()
        workers.remove(old)
        return await start(name, **opts)

    async def group_type() -> str:
        async with Admin(cluster.bootstrap) as admin:
            return (await admin.describe_consumer_groups([group]))[group].type

    async def settled(ws: list[Worker]) -> None:
        """Wait until the coordinator's epoch for each member is the member's own and each
        has its target assignment, as a rolling restart waits before taking the next
        member down. A classic member of a consumer group whose epoch the coordinator has
        moved on learns it only when it rejoins; until then Kafka 4.0 refuses its commits
        with ILLEGAL_GENERATION, and stopping it then redelivers what it processed since
        its last commit, whatever the client."""

        def own_epoch(w: Worker) -> tuple[str, int]:
            gc: Any = w.consumer.coordinator
            if isinstance(gc, ConsumerGroupCoordinator):
                return gc.membership.member_id, gc.member_epoch
            return gc.membership.member_id, gc.membership.generation

        deadline = asyncio.get_running_loop().time() + 30
        async with Admin(cluster.bootstrap) as admin:
            while True:
                d = (await admin.describe_consumer_groups([group]))[group]
                if d.type != "consumer":
                    return  # a classic group: JoinGroup/SyncGroup is its barrier
                members = {m.member_id: m for m in d.members}
                mine = dict(own_epoch(w) for w in ws)
                if (
                    d.state == "Stable"
                    and mine.keys() == members.keys()
                    and all(
                        members[mid].member_epoch == epoch
                        and members[mid].assignment == members[mid].target_assignment
                        for mid, epoch in mine.items()
                    )
                ):
                    return
                assert asyncio.get_running_loop().time() < deadline, (
                    f"group not settled: {d}, members say {mine}"
                )
                await asyncio.sleep(0.05)

    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, topic, stop))
    try:
        a = await start("a-classic", **classic)
        b = await start("b-classic", **classic)
        await eventually(lambda: all_consuming([a, b]) and a.count > 0 and b.count > 0, limit=30)
        assert await group_type() == "classic"
        a = await replace(a, "a-consumer")  # the group becomes a consumer group, b stays classic
        await eventually(lambda: all_consuming([a, b]) and a.count > 0, limit=30, what="mixed group")
        assert await group_type() == "consumer"
        await settled([a, b])
        b = await replace(b, "b-consumer")
        await eventually(lambda: all_consuming([a, b]) and b.count > 0, limit=30, what="upgraded")
        await settled([a, b])
        # Roll back: the group returns to the classic protocol when its last
        # consumer-protocol member leaves.
        a = await replace(a, "a-classic-again", **classic)
        await eventually(lambda: all_consuming([a, b]) and a.count > 0, limit=30, what="mixed again")
        await settled([a, b])
        b = await replace(b, "b-classic-again", **classic)
        await eventually(lambda: all_consuming([a, b]) and b.count > 0, limit=30, what="downgraded")
        assert await group_type() == "classic"
        stop.set()
        total = await producer
        await eventually(lambda: len(seen) == total, limit=60, what="everything consumed")
        for w in list(workers):
            await w.stop()
    finally:
        stop.set()
        producer.cancel()
        for w in workers:
            await w.cleanup()
    ends = end_offsets(cluster, topic, PARTITIONS)
    assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, f"{len(twice)} records processed more than once, e.g. {sorted(twice.items())[:5]}"
