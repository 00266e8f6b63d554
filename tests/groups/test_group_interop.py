"""Mixed consumer groups: our Consumer with confluent-kafka (librdkafka) consumers using
cooperative-sticky, and with kafka-python consumers using range, in one group."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from group_testlib import broker_config, eventually

from aiokafka_lite import Consumer
from aiokafka_lite.consume.groups import MemberState
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.produce.producer import Producer

pytestmark = pytest.mark.interop

PARTITIONS = 12
PER_PARTITION = 50
ALL = {TP("t", p) for p in range(PARTITIONS)}
# Generous: on a loaded machine kafka-python's heartbeats can stall for seconds.
SESSION_MS = 20000


@pytest.fixture
def bootstrap(request: pytest.FixtureRequest, kafka_mode: str, kafka_threaded_cluster_factory: Any) -> str:
    """A cluster serving from its own thread (the third-party clients block): embedded, three
    brokers; on Apache Kafka (--kafka=apache) the session's node."""
    if kafka_mode == "apache":
        apache = request.getfixturevalue("apache_kafka")
        apache.create_topic("t", PARTITIONS)
        return str(apache.bootstrap)
    tc = kafka_threaded_cluster_factory(brokers=3, topics={"t": PARTITIONS}, config=broker_config())
    return str(tc.bootstrap)


class ThreadMember:
    """A third-party consumer polling in its own thread; records what it owns and reads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owned: set[TP] = set()
        self.read: set[tuple[int, int]] = set()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def assignment(self) -> set[TP]:
        with self.lock:
            return set(self.owned)

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> ThreadMember:
        self.thread.start()
        return self

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.to_thread(self.thread.join, 30)


class Librdkafka(ThreadMember):
    def __init__(self, bootstrap: str, strategy: str) -> None:
        super().__init__()
        from confluent_kafka import Consumer as CKConsumer

        self.cooperative = strategy == "cooperative-sticky"
        self.consumer = CKConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "g",
                "partition.assignment.strategy": strategy,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 200,
                "auto.offset.reset": "earliest",
            }
        )

        def on_assign(c: Any, parts: list[Any]) -> None:
            with self.lock:
                self.owned |= {TP(p.topic, p.partition) for p in parts}
            if self.cooperative:
                c.incremental_assign(parts)
            else:
                c.assign(parts)

        def on_revoke(c: Any, parts: list[Any]) -> None:
            with self.lock:
                self.owned -= {TP(p.topic, p.partition) for p in parts}
            if self.cooperative:
                c.incremental_unassign(parts)
            else:
                c.unassign()

        self.consumer.subscribe(["t"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                msg = self.consumer.poll(0.05)
                if msg is not None and msg.error() is None:
                    with self.lock:
                        self.read.add((msg.partition(), msg.offset()))
        finally:
            self.consumer.close()


class KafkaPython(ThreadMember):
    def __init__(self, bootstrap: str) -> None:
        super().__init__()
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        self.consumer = KafkaConsumer(
            "t",
            bootstrap_servers=bootstrap,
            group_id="g",
            partition_assignment_strategy=[RangePartitionAssignor],
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=200,
            auto_offset_reset="earliest",
        )

    def _run(self) -> None:
        try:
            # Learn the topic's partitions before the first poll joins the group.
            # kafka-python joins without waiting for the subscribed topic's metadata;
            # as leader it then assigns nothing and rejoins once the metadata arrives.
            # That rejoin is lost if a poll() times out while its SyncGroup is in
            # flight: _perform_assignment() makes need_rejoin() False, so the next
            # poll() never collects the finished join (no assignment, heartbeats
            # stay disabled, the session expires and it never rejoins).
            self.consumer.partitions_for_topic("t")
            while not self.stopping.is_set():
                batch = self.consumer.poll(timeout_ms=50)
                with self.lock:
                    for records in batch.values():
                        self.read.update((r.partition, r.offset) for r in records)
                    self.owned = {TP(p.topic, p.partition) for p in self.consumer.assignment()}
        finally:
            self.consumer.close()


class Ours:
    def __init__(self, bootstrap: str, strategy: str) -> None:
        self.consumer = Consumer(
            bootstrap,
            topics=["t"],
            group_id="g",
            partition_assignment_strategy=[strategy],
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=200,
            auto_offset_reset="earliest",
        )
        self.read: set[tuple[int, int]] = set()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Ours:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        async for rec in self.consumer:
            self.read.add((rec.partition, rec.offset))

    def assignment(self) -> set[TP]:
        return self.consumer.subscription_state.assignment()

    def stable(self) -> bool:
        gc = self.consumer.coordinator
        return gc is not None and gc.state is MemberState.STABLE and not gc.membership.rejoin_needed

    async def stop(self) -> None:
        await self.consumer.close()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self.task, 10)


def describe(ours: Ours, others: list[ThreadMember]) -> str:
    gc = ours.consumer.coordinator
    m = gc.membership if gc is not None else None
    state = (
        f"state={m.state.name} generation={m.generation} rejoin={m.rejoin_needed} leader={m.is_leader}"
        if m is not None
        else "no coordinator"
    )
    owned = [sorted(tp.partition for tp in x) for x in [ours.assignment()] + [o.assignment() for o in others]]
    return f"ours {state}; owned (ours first) {owned}"


def shared_correctly(ours: Ours, others: list[ThreadMember]) -> bool:
    owned = [ours.assignment()] + [o.assignment() for o in others]
    if sum(len(o) for o in owned) != PARTITIONS or set().union(*owned) != ALL:
        return False
    return all(owned) and ours.stable()


async def produce(bootstrap: str) -> None:
    async with Producer(bootstrap_servers=bootstrap) as p:
        for part in range(PARTITIONS):
            await p.enqueue_batch("t", [b"x"] * PER_PARTITION, partition=part)
        await p.flush()


async def check_group(bootstrap: str, ours: Ours, others: list[ThreadMember]) -> None:
    """All members share the partitions, the group settles, and records produced now are
    read by the group (each partition by its owner)."""
    await eventually(
        lambda: shared_correctly(ours, others),
        limit=30,
        what="partitions shared by all members",
        detail=lambda: describe(ours, others),
    )
    gc = ours.consumer.coordinator
    assert gc is not None
    generation = gc.membership.generation
    await asyncio.sleep(1.0)
    assert shared_correctly(ours, others) and gc.membership.generation == generation  # no rebalance storm
    await produce(bootstrap)
    everything = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}

    def read_all() -> set[tuple[int, int]]:
        out = set(ours.read)
        for o in others:
            with o.lock:
                out |= o.read
        return out

    await eventually(lambda: read_all() == everything, limit=30, what="all records read by the group")
    assert ours.read  # we took part


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-leader", "librdkafka-leader"])
async def test_mixed_group_with_librdkafka_cooperative_sticky(bootstrap: str, ours_first: bool) -> None:
    others: list[ThreadMember] = []
    ours: Ours | None = None
    try:
        if ours_first:
            ours = await Ours(bootstrap, "cooperative-sticky").start()
            await eventually(lambda: ours is not None and ours.assignment() == ALL)
        others = [Librdkafka(bootstrap, "cooperative-sticky").start() for _ in range(2)]
        if not ours_first:
            await eventually(lambda: set().union(*(o.assignment() for o in others)) == ALL, limit=30)
            ours = await Ours(bootstrap, "cooperative-sticky").start()
        assert ours is not None
        await check_group(bootstrap, ours, others)
        gc = ours.consumer.coordinator
        assert gc is not None
        assert gc.membership.is_leader is ours_first
        # one librdkafka member leaves: the rest share its partitions
        await others[0].stop()
        await eventually(lambda: shared_correctly(ours, others[1:]), limit=30, what="after a member left")
    finally:
        for o in others:
            await o.stop()
        if ours is not None:
            await ours.stop()


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-leader", "kafka-python-leader"])
async def test_mixed_group_with_kafka_python_range(bootstrap: str, ours_first: bool) -> None:
    others: list[ThreadMember] = []
    ours: Ours | None = None
    try:
        if ours_first:
            ours = await Ours(bootstrap, "range").start()
            await eventually(lambda: ours is not None and ours.assignment() == ALL)
        others = [KafkaPython(bootstrap).start() for _ in range(2)]
        if not ours_first:
            await eventually(lambda: set().union(*(o.assignment() for o in others)) == ALL, limit=30)
            ours = await Ours(bootstrap, "range").start()
        assert ours is not None
        await check_group(bootstrap, ours, others)
        # range: every member holds a contiguous block of 4
        for owned in [ours.assignment()] + [o.assignment() for o in others]:
            parts = sorted(tp.partition for tp in owned)
            assert len(parts) == 4 and parts == list(range(parts[0], parts[0] + 4))
        gc = ours.consumer.coordinator
        assert gc is not None
        assert gc.membership.is_leader is ours_first
    finally:
        for o in others:
            await o.stop()
        if ours is not None:
            await ours.stop()
