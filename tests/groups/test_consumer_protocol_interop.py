"""Mixed consumer-protocol groups (KIP-848): our Consumer with confluent-kafka (librdkafka)
consumers using ``group.protocol=consumer``, in one group, on the embedded cluster or on
Apache Kafka (--kafka=apache)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from typing import Any

import pytest
from group_testlib import eventually

from aiokafka_lite import Consumer
from aiokafka_lite.consume.groups.consumer_membership import ConsumerMemberState
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.produce.producer import Producer

pytestmark = pytest.mark.interop

PARTITIONS = 8
PER_PARTITION = 50
FAST_CONSUMER_GROUPS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


TOPIC = "mixed"


@pytest.fixture
def bootstrap(kafka_threaded_cluster_factory: Any) -> str:
    """A cluster serving from its own thread (librdkafka blocks), with fast consumer-group
    heartbeats: embedded, or a fresh Apache Kafka node (--kafka=apache)."""
    cluster = kafka_threaded_cluster_factory(
        brokers=1, configs=FAST_CONSUMER_GROUPS, topics={TOPIC: PARTITIONS}
    )
    return str(cluster.bootstrap)


class Librdkafka:
    """A librdkafka consumer of the consumer protocol, polling in its own thread."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer as CKConsumer

        self.lock = threading.Lock()
        self.owned: set[TP] = set()
        self.read: set[tuple[int, int]] = set()
        self.stopping = threading.Event()
        self.consumer = CKConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
            }
        )

        def on_assign(c: Any, parts: list[Any]) -> None:
            with self.lock:
                self.owned |= {TP(p.topic, p.partition) for p in parts}
            c.incremental_assign(parts)

        def on_revoke(c: Any, parts: list[Any]) -> None:
            with self.lock:
                self.owned -= {TP(p.topic, p.partition) for p in parts}
            c.incremental_unassign(parts)

        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def assignment(self) -> set[TP]:
        with self.lock:
            return set(self.owned)

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                msg = self.consumer.poll(0.05)
                if msg is not None and msg.error() is None:
                    with self.lock:
                        self.read.add((msg.partition(), msg.offset()))
        finally:
            self.consumer.close()

    def start(self) -> Librdkafka:
        self.thread.start()
        return self

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.to_thread(self.thread.join, 30)


class Ours:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = Consumer(
            bootstrap,
            topics=[topic],
            group_id=group,
            group_protocol="consumer",
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
        return self.consumer.assignment()

    def stable(self) -> bool:
        gc = self.consumer.coordinator
        return gc is not None and gc.state is ConsumerMemberState.STABLE

    async def stop(self) -> None:
        await self.consumer.close()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self.task, 10)


async def test_our_consumers_and_librdkafka_share_a_consumer_protocol_group(bootstrap: str) -> None:
    topic, group = TOPIC, f"g-{uuid.uuid4().hex[:8]}"
    every = {TP(topic, p) for p in range(PARTITIONS)}
    async with Producer(bootstrap_servers=bootstrap, linger_ms=2) as p:
        for part in range(PARTITIONS):
            await p.send_batch(topic, [b"%d" % i for i in range(PER_PARTITION)], partition=part)
    ours = await Ours(bootstrap, topic, group).start()
    theirs: list[Librdkafka] = []
    try:
        await eventually(lambda: ours.assignment() == every and ours.stable(), limit=30, what="ours alone")
        theirs = [Librdkafka(bootstrap, topic, group).start() for _ in range(2)]

        def shared() -> bool:
            owned = [ours.assignment()] + [t.assignment() for t in theirs]
            return (
                all(owned)
                and sum(len(o) for o in owned) == PARTITIONS
                and set().union(*owned) == every
                and ours.stable()
            )

        await eventually(shared, limit=60, what="the partitions shared by all three members")
        everything = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}

        def all_read() -> set[tuple[int, int]]:
            out = set(ours.read)
            for t in theirs:
                with t.lock:
                    out |= t.read
            return out

        await eventually(lambda: all_read() == everything, limit=60, what="every record read")
        # librdkafka members leave: ours takes everything back.
        for t in theirs:
            await t.stop()
        await eventually(
            lambda: ours.assignment() == every and ours.stable(), limit=60, what="ours alone again"
        )
    finally:
        for t in theirs:
            await t.stop()
        await ours.stop()
