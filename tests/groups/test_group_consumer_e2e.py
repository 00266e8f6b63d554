"""Consumer groups end to end: real Consumers and Producer, on the embedded 3-broker cluster
or on Apache Kafka (--kafka=apache)."""

from __future__ import annotations

import asyncio
import contextlib
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
    short_session_ms,
)

from aiokafka_lite import Consumer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume.groups import MemberState
from aiokafka_lite.core.structs import TopicPartition as TP

PARTITIONS = 12
ALL = {TP("t", p) for p in range(PARTITIONS)}


@pytest.fixture
async def cluster(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> EmbeddedCluster:
    return await group_cluster(request, {"t": PARTITIONS})


@pytest.fixture
async def cluster3(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: object
) -> EmbeddedCluster:
    """Three brokers on either Kafka (the test takes one down)."""
    return await group_cluster(request, {"t": PARTITIONS}, several_brokers=True)


class Worker(RecordingConsumer):
    """A classic-protocol member of group ``g`` reading topic ``t``."""

    def __init__(
        self, cluster: EmbeddedCluster, name: str, seen: dict[tuple[int, int], list[str]], **opts: Any
    ):
        options = {
            "group_id": "g",
            "auto_offset_reset": "earliest",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 200,
            "auto_commit_interval_ms": 500,
            **opts,
        }
        super().__init__(Consumer(cluster.bootstrap, topics=["t"], **options), name, seen)

    def assignment(self) -> set[TP]:
        return self.consumer.subscription_state.assignment()

    def stable(self) -> bool:
        gc = self.consumer.coordinator
        return gc is not None and gc.state is MemberState.STABLE and not gc.membership.rejoin_needed


def balanced(workers: list[Worker]) -> bool:
    owned = [w.assignment() for w in workers]
    if sum(len(o) for o in owned) != PARTITIONS or set().union(*owned) != ALL:
        return False
    sizes = [len(o) for o in owned]
    return max(sizes) - min(sizes) <= 1 and all(w.stable() for w in workers)


async def produce_until(
    cluster: EmbeddedCluster, stop: asyncio.Event, interval: float = 0.02, per_partition: int = 1
) -> int:
    return await produce_numbered_until(
        cluster.bootstrap, "t", PARTITIONS, stop, interval=interval, per_partition=per_partition
    )


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
async def test_members_join_and_leave_one_by_one_every_record_once(
    cluster: EmbeddedCluster, strategy: str
) -> None:
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    opts = {"partition_assignment_strategy": [strategy]}
    workers = [Worker(cluster, f"w{i}", seen, **opts) for i in range(3)]
    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, stop, interval=0.03, per_partition=20))
    try:
        a, b, c = workers
        await a.start()
        await eventually(lambda: a.count > 0 and balanced([a]), what="a consuming")
        await b.start()
        await eventually(lambda: b.count > 0 and balanced([a, b]), what="a+b")
        await c.start()
        await eventually(lambda: c.count > 0 and balanced([a, b, c]), what="a+b+c")
        await a.stop()
        await eventually(lambda: balanced([b, c]), what="b+c")
        await b.stop()
        await eventually(lambda: balanced([c]), what="c alone")
        stop.set()
        total = await producer
        ends = end_offsets(cluster, "t", PARTITIONS)
        assert sum(ends.values()) == total
        await eventually(lambda: len(seen) == total, limit=60, what="everything consumed")
        await c.stop()
    finally:
        stop.set()
        producer.cancel()
        for w in workers:
            await w.cleanup()
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, f"{len(twice)} records processed more than once, e.g. {sorted(twice.items())[:5]}"
    assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}
    assert all(w.count > 0 for w in workers)


async def test_member_crash_moves_partitions_after_session_timeout_nothing_lost(
    cluster: EmbeddedCluster,
) -> None:
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    opts = {
        "session_timeout_ms": short_session_ms(cluster),
        "partition_assignment_strategy": ["cooperative-sticky"],
    }
    a = await Worker(cluster, "a", seen, **opts).start()
    b = await Worker(cluster, "b", seen, **opts).start()
    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, stop))
    try:
        await eventually(lambda: balanced([a, b]) and a.count > 0 and b.count > 0)
        await b.crash()  # no LeaveGroup, no final commit
        await eventually(lambda: balanced([a]), what="a takes over after b's session expired")
        await asyncio.sleep(0.3)
        stop.set()
        total = await producer
        await eventually(lambda: len(seen) == total, limit=60, what="everything consumed")
    finally:
        stop.set()
        await a.cleanup()
        await b.cleanup()
    ends = end_offsets(cluster, "t", PARTITIONS)
    # at-least-once: every record was processed; the crashed member's uncommitted tail twice
    assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}


@pytest.mark.kafka_embedded  # move_group_coordinator; on Kafka: test_coordinator_killed_while_consuming
async def test_coordinator_moved_while_consuming(cluster: EmbeddedCluster) -> None:
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    opts = {"partition_assignment_strategy": ["cooperative-sticky"]}
    a = await Worker(cluster, "a", seen, **opts).start()
    b = await Worker(cluster, "b", seen, **opts).start()
    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, stop))
    try:
        await eventually(lambda: balanced([a, b]) and a.count > 0 and b.count > 0)
        gc = a.consumer.coordinator
        assert gc is not None
        old = gc.membership.coordinator
        new = next(n for n in (1, 2, 3) if n != old)
        cluster.move_group_coordinator("g", new)
        await eventually(lambda: gc.membership.coordinator == new, what="coordinator rediscovered")
        await asyncio.sleep(1.0)  # auto-commits go to the new coordinator
        assert balanced([a, b])
        await a.stop()  # commit on revoke through the new coordinator
        await eventually(lambda: balanced([b]))
        stop.set()
        total = await producer
        await eventually(lambda: len(seen) == total, limit=60, what="everything consumed")
    finally:
        stop.set()
        await a.cleanup()
        await b.cleanup()
    assert not {k: v for k, v in seen.items() if len(v) > 1}


async def test_coordinator_killed_while_consuming(cluster3: EmbeddedCluster) -> None:
    """The group coordinator's broker dies while two members consume (and the records keep
    coming): the members find the new coordinator without a rebalance, and after one of
    them leaves, every record has been processed exactly once (commits resumed)."""
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    opts = {"partition_assignment_strategy": ["cooperative-sticky"]}
    a = await Worker(cluster3, "a", seen, **opts).start()
    b = await Worker(cluster3, "b", seen, **opts).start()
    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster3, stop))
    try:
        await eventually(lambda: balanced([a, b]) and a.count > 0 and b.count > 0)
        gca, gcb = a.consumer.coordinator, b.consumer.coordinator
        assert gca is not None and gcb is not None
        generation = gca.membership.generation
        old = gca.membership.coordinator
        assert old is not None
        await crash_broker(cluster3, old)
        await eventually(
            lambda: all(gc.membership.coordinator not in (None, old) for gc in (gca, gcb)),
            limit=60,
            what="coordinator rediscovered",
        )
        counts = (a.count, b.count)
        await eventually(lambda: a.count > counts[0] and b.count > counts[1], limit=60, what="consuming")
        assert balanced([a, b]) and gca.membership.generation == generation  # no rebalance
        await a.stop()  # commits through the new coordinator, then leaves
        await eventually(lambda: balanced([b]), limit=30)
        stop.set()
        total = await producer
        await eventually(lambda: len(seen) == total, limit=60, what="everything consumed")
    finally:
        stop.set()
        await a.cleanup()
        await b.cleanup()
    assert not {k: v for k, v in seen.items() if len(v) > 1}
    ends = end_offsets(cluster3, "t", PARTITIONS)
    assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}


async def test_cooperative_rebalance_keeps_consuming_kept_partitions(cluster: EmbeddedCluster) -> None:
    """While b and c join, a keeps receiving records of the partitions it keeps: records
    arrive while a's own membership is mid-rebalance (JoinGroup/SyncGroup in flight).
    How long the longest pause is, is a timing: bench/groups_rebalance_gap.py measures it."""
    heartbeat_ms = 1000
    opts = {
        "partition_assignment_strategy": ["cooperative-sticky"],
        "heartbeat_interval_ms": heartbeat_ms,
        "session_timeout_ms": 10000,
    }
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    a = Worker(cluster, "a", seen, **opts)
    b = Worker(cluster, "b", seen, **opts)
    c = Worker(cluster, "c", seen, **opts)
    loop = asyncio.get_running_loop()
    log: list[tuple[float, int, MemberState]] = []
    gc = None

    async def run_a() -> None:
        async for rec in a.consumer:
            assert gc is not None
            log.append((loop.time(), rec.partition, gc.state))

    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, stop))
    await a.consumer.start()
    gc = a.consumer.coordinator
    a.task = asyncio.create_task(run_a())
    try:
        await eventually(lambda: balanced([a]) and len(log) > 0)
        window_start = loop.time()
        await b.start()
        await eventually(lambda: balanced([a, b]), what="a+b")
        await c.start()
        await eventually(lambda: balanced([a, b, c]), what="a+b+c")
        window_end = loop.time()
        kept = {tp.partition for tp in a.assignment()}
    finally:
        stop.set()
        await producer
        for w in (a, b, c):
            await w.cleanup()
    assert a.consumer.coordinator is not None
    in_window = [(t, p, st) for t, p, st in log if window_start <= t <= window_end and p in kept]
    during_rebalance = [x for x in in_window if x[2] in (MemberState.JOINING, MemberState.SYNCING)]
    assert during_rebalance, "a stopped consuming its kept partitions during the rebalance"


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
async def test_ordered_workers_across_rebalances(cluster: EmbeddedCluster, strategy: str) -> None:
    """Two members process with OrderedWorkers while the second joins and leaves: per
    partition, offsets are handled in order, each exactly once (drain + commit on revoke)."""
    from aiokafka_lite.processing.ordered_workers import OrderedWorkers

    history: dict[int, list[int]] = defaultdict(list)
    active: set[int] = set()

    async def handle(rec: Any) -> None:
        assert rec.partition not in active, "two records of one partition at once"
        active.add(rec.partition)
        await asyncio.sleep(0.0005 if rec.offset % 7 else 0.005)
        history[rec.partition].append(rec.offset)
        active.discard(rec.partition)

    def member() -> Consumer:
        return Consumer(
            cluster.bootstrap,
            topics=["t"],
            group_id="g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=200,
            partition_assignment_strategy=[strategy],
        )

    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(cluster, stop, per_partition=2))
    c1, c2 = member(), member()
    await c1.start()
    p1 = OrderedWorkers(c1, handle, concurrency=6, commit_interval_ms=200)
    t1 = asyncio.create_task(p1.run())
    p2 = OrderedWorkers(c2, handle, concurrency=6, commit_interval_ms=200)
    t2: asyncio.Task[None] | None = None
    try:
        await eventually(lambda: p1.stats.processed > 500, what="first member working")
        await c2.start()
        t2 = asyncio.create_task(p2.run())
        await eventually(lambda: p2.stats.processed > 300, what="second member working")

        def generations() -> set[int]:
            return {c.coordinator.membership.generation for c in (c1, c2) if c.coordinator is not None}

        def settled() -> bool:
            return (
                all(
                    c.coordinator is not None
                    and c.coordinator.state is MemberState.STABLE
                    and not c.coordinator.membership.rejoin_needed
                    for c in (c1, c2)
                )
                and len(generations()) == 1
            )

        await eventually(settled, what="both members stable in one generation")
        (generation,) = settled_at = generations()
        # c1 alone, c2 joins, (cooperative) the follow-up round; one spare. Commits racing a
        # rejoin once made every rebalance start the next one (dozens of generations).
        assert generation <= (4 if strategy == "cooperative-sticky" else 3), f"generation {generation}"
        await asyncio.sleep(1.0)  # five commit rounds of both pools: no rebalance may follow
        assert settled() and generations() == settled_at, "commits set off another rebalance"
        p2.stop()
        await t2
        await c2.close()  # revokes after the pool committed; nothing left in flight
        stop.set()
        total = await producer
        await eventually(lambda: sum(len(v) for v in history.values()) >= total, limit=60)
        p1.stop()
        await t1
    finally:
        stop.set()
        producer.cancel()
        p1.stop()
        p2.stop()
        await c1.close()
        await c2.close()
    ends = end_offsets(cluster, "t", PARTITIONS)
    for part, offsets in history.items():
        assert offsets == list(range(ends[part])), f"partition {part}: out of order or duplicated"
    assert sum(ends.values()) == total


async def test_pattern_subscription_rejoins_when_a_matching_topic_appears(cluster: EmbeddedCluster) -> None:
    cluster.create_topic("p-1", 2)
    consumer = Consumer(
        cluster.bootstrap,
        pattern=r"p-.*",
        group_id="gp",
        metadata_max_age_ms=200,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
        partition_assignment_strategy=["cooperative-sticky"],
    )
    async with consumer:
        poller = asyncio.create_task(consumer.getmany(timeout_ms=30_000))
        try:
            await eventually(lambda: consumer.assignment() == {TP("p-1", 0), TP("p-1", 1)})
            cluster.create_topic("p-2", 1)
            await eventually(lambda: TP("p-2", 0) in consumer.assignment(), what="new topic assigned")
        finally:
            poller.cancel()
            with contextlib.suppress(BaseException):
                await poller
