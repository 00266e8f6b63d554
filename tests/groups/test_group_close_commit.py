"""Commit-on-revoke during ``close()`` (docs/guide/groups.md): the revoke callbacks run
while the consumer closes and may commit, look up positions and committed offsets, as
the Java client allows in ``onPartitionsRevoked`` during ``close()``. Runs on the
embedded broker and, with ``--kafka=apache``, on Apache Kafka."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from group_testlib import eventually

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume.groups import ConsumerRebalanceListener
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition

TOPIC = "orders"
PARTITIONS = 4
GROUP = "commit-on-revoke"
ALL = {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}


class CommitOnRevoke(ConsumerRebalanceListener):
    """The guide's listener, recording what the consumer answered inside the callback."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.errors: list[BaseException] = []
        self.revoked_commits: list[dict[TopicPartition, int | None]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        try:
            positions = {tp: await self.consumer.position(tp) for tp in revoked}
            await self.consumer.commit()
            committed = {tp: await self.consumer.committed(tp) for tp in revoked}
        except Exception as exc:
            self.errors.append(exc)
            raise
        assert committed == positions
        self.revoked_commits.append(dict(committed))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None


class Member:
    def __init__(self, bootstrap: str, name: str, seen: dict[tuple[int, int], list[str]]) -> None:
        self.name = name
        self.seen = seen
        self.consumer = Consumer(
            bootstrap,
            group_id=GROUP,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10000,
            heartbeat_interval_ms=300,
        )
        self.listener = CommitOnRevoke(self.consumer)
        self.consumer.subscribe(TOPIC, listener=self.listener)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Member:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        async for rec in self.consumer:
            self.seen[(rec.partition, rec.offset)].append(self.name)

    async def close(self) -> None:
        await self.consumer.close()
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)  # the iteration ends with the close


async def _produce(bootstrap: str, start: int, count: int) -> None:
    async with Producer(bootstrap, acks="all", linger_ms=5) as producer:
        for i in range(start, start + count):
            await producer.enqueue(TOPIC, b"order-%d" % i, partition=i % PARTITIONS)
        await producer.flush()


async def test_commit_on_revoke_during_close_hands_over_without_duplicates(
    kafka_cluster: EmbeddedCluster,
) -> None:
    kafka_cluster.create_topic(TOPIC, PARTITIONS)
    bootstrap = kafka_cluster.bootstrap
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)

    a = await Member(bootstrap, "a", seen).start()
    await _produce(bootstrap, 0, 200)
    await eventually(lambda: len(seen) == 200, 30, "a consumes the first 200")

    b = await Member(bootstrap, "b", seen).start()
    await eventually(
        lambda: (
            a.consumer.assignment() | b.consumer.assignment() == ALL
            and len(a.consumer.assignment()) == len(b.consumer.assignment()) == 2
        ),
        30,
        "the two members share the partitions",
    )
    await _produce(bootstrap, 200, 200)
    await eventually(lambda: len(seen) == 400, 30, "both consume the next 200")
    a_partitions = a.consumer.assignment()
    a_positions = {tp: await a.consumer.position(tp) for tp in a_partitions}

    # A leaves: its revoke callback commits what it consumed since the last rebalance.
    await a.close()
    assert a.listener.errors == []
    assert a.listener.revoked_commits[-1] == a_positions
    with pytest.raises(E.ClosedError):
        await a.consumer.commit()
    with pytest.raises(E.ClosedError):
        await a.consumer.position(next(iter(a_partitions)))
    with pytest.raises(E.ClosedError):
        await a.consumer.committed(next(iter(a_partitions)))

    await eventually(lambda: b.consumer.assignment() == ALL, 30, "b takes over every partition")
    await _produce(bootstrap, 400, 100)
    await eventually(lambda: len(seen) == 500, 30, "b consumes the rest")
    end = {p: kafka_cluster.high_watermark(TOPIC, p) for p in range(PARTITIONS)}
    assert sum(end.values()) == 500

    # The last member leaving commits everything it consumed.
    await b.close()
    assert b.listener.errors == []
    # Every record was handed out exactly once: B resumed A's partitions at A's commits.
    duplicates = {key: names for key, names in seen.items() if len(names) > 1}
    assert duplicates == {}
    assert set(seen) == {(p, o) for p in range(PARTITIONS) for o in range(end[p])}
    async with Consumer(bootstrap, group_id=GROUP, enable_auto_commit=False) as reader:
        committed = {p: await reader.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    assert committed == end
