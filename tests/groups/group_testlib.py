"""Helpers for the group tests: clusters for either broker (``--kafka``), members driven
by a bare GroupCoordinator (no Consumer needed), Consumers that record what they are
handed, producers that keep records flowing, waiting for conditions."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.broker.state import BrokerConfig
from aiokafka_lite.consume.consumer_config import ConsumerConfig
from aiokafka_lite.consume.groups import GroupCoordinator
from aiokafka_lite.consume.subscription import SubscriptionState
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.produce.producer import Producer

ClusterFactory = Callable[..., Awaitable[EmbeddedCluster]]

# Small timers so that rebalances and session expiry happen within a test.
FAST = {
    "heartbeat_interval_ms": 100,
}

# Apache Kafka's group.min.session.timeout.ms (default 6 s): a shorter session is refused
# with INVALID_SESSION_TIMEOUT. The embedded clusters of these tests lower it to 100 ms
# (broker_config), so that a dead member expires within 1.5 s there.
APACHE_MIN_SESSION_MS = 6000
EMBEDDED_SESSION_MS = 1500

# Broker settings of the multi-broker Apache Kafka clusters: every partition on every
# broker, so that one broker can be stopped or killed without losing a partition.
APACHE_REPLICATED = {"default.replication.factor": "3", "min.insync.replicas": "2"}


def broker_config(**extra: str) -> BrokerConfig:
    return BrokerConfig(extra={"group.min.session.timeout.ms": "100", **extra})


def short_session_ms(cluster: object) -> int:
    """The shortest session timeout the tests use on this cluster (see FAST)."""
    return EMBEDDED_SESSION_MS if isinstance(cluster, EmbeddedCluster) else APACHE_MIN_SESSION_MS


async def group_cluster(
    request: pytest.FixtureRequest,
    topics: dict[str, int],
    *,
    several_brokers: bool = False,
    broker_settings: dict[str, str] | None = None,
) -> EmbeddedCluster:
    """The cluster of a group test, with ``topics`` created (for a fixture or test that
    uses ``kafka_mode`` and ``kafka_cluster_factory``).

    Embedded: a fresh three-broker cluster accepting short sessions. Apache Kafka
    (``--kafka=apache``): the session's one node, unless the test needs
    ``several_brokers`` (it stops one; a fresh three-node cluster costs ~10 s, and its
    partitions are replicated on every node) or ``broker_settings`` (a fresh cluster).
    """
    factory: ClusterFactory = request.getfixturevalue("kafka_cluster_factory")
    settings = dict(broker_settings or {})
    if request.getfixturevalue("kafka_mode") != "apache":
        cluster: EmbeddedCluster = await factory(brokers=3, topics=topics, config=broker_config(**settings))
        return cluster
    if several_brokers or settings:
        brokers = 3 if several_brokers else 1
        configs = {**(APACHE_REPLICATED if several_brokers else {}), **settings}
        fresh: EmbeddedCluster = await factory(brokers=brokers, topics=topics, configs=configs)
        return fresh
    # (kafka_cluster is the same Kafka here, but an async fixture cannot be fetched from a
    # running event loop.)
    shared: EmbeddedCluster = request.getfixturevalue("apache_kafka")
    for name, partitions in topics.items():
        shared.create_topic(name, partitions)
    return shared


class Recorder:
    """Rebalance listener that records every callback (and can run a hook)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.hook: Callable[[str, set[TopicPartition]], Any] | None = None

    async def _record(self, kind: str, tps: set[TopicPartition]) -> None:
        self.events.append((kind, frozenset(tps)))
        if self.hook is not None:
            result = self.hook(kind, tps)
            if asyncio.iscoroutine(result):
                await result

    async def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        await self._record("assigned", tps)

    async def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        await self._record("revoked", tps)

    async def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
        await self._record("lost", tps)

    def of(self, kind: str) -> list[frozenset[TopicPartition]]:
        return [tps for k, tps in self.events if k == kind]


class Member:
    """One group member: its own Client, SubscriptionState and GroupCoordinator."""

    def __init__(
        self,
        cluster: EmbeddedCluster,
        name: str,
        topics: Sequence[str] = ("t",),
        *,
        group_id: str = "g",
        **options: Any,
    ) -> None:
        self.name = name
        self.client = Client(cluster.bootstrap, client_id=name, retry_backoff_ms=20)
        self.sub = SubscriptionState()
        self.listener = Recorder(name)
        self.sub.subscribe(list(topics), listener=self.listener)
        timers = {**FAST, "session_timeout_ms": short_session_ms(cluster)}
        config = ConsumerConfig(group_id=group_id, **{**timers, **options})
        self.gc = GroupCoordinator(self.client, self.sub, config)
        self._poller: asyncio.Task[None] | None = None

    async def start(self, *, poll: bool = True) -> Member:
        await self.client.start()
        await self.gc.start()
        if poll:
            self._poller = asyncio.create_task(self._poll_forever())
        return self

    async def _poll_forever(self) -> None:
        while True:
            await self.gc.poll()
            await asyncio.sleep(0.02)

    async def start_polling_again(self) -> None:
        if self._poller is None:
            self._poller = asyncio.create_task(self._poll_forever())

    async def stop_polling(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            try:
                await self._poller
            except asyncio.CancelledError:
                pass
            self._poller = None

    def assignment(self) -> set[TopicPartition]:
        return self.sub.assignment()

    async def close(self) -> None:
        await self.stop_polling()
        await self.gc.close()
        await self.client.close()

    async def kill(self) -> None:
        """Die without leaving: stop the tasks and drop the connections."""
        await self.stop_polling()
        for task in (self.gc._main_task, self.gc._hb_task):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        await self.client.close()


async def eventually(
    cond: Callable[[], bool],
    limit: float = 15.0,
    what: str = "condition",
    detail: Callable[[], object] | None = None,
) -> None:
    """Wait until ``cond()`` holds (polling); fail after ``limit`` seconds (with ``detail()``)."""
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            extra = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out waiting for {what}{extra}")
        await asyncio.sleep(0.02)


def balanced(members: Sequence[Member], partitions: set[TopicPartition]) -> bool:
    """Every partition owned by exactly one member, counts differ by at most one, all stable."""
    from aiokafka_lite.consume.groups import MemberState

    owned = [m.assignment() for m in members]
    union: set[TopicPartition] = set().union(*owned) if owned else set()
    if union != partitions or sum(len(o) for o in owned) != len(partitions):
        return False
    sizes = [len(o) for o in owned]
    return max(sizes) - min(sizes) <= 1 and all(
        m.gc.state is MemberState.STABLE and not m.gc.membership.rejoin_needed for m in members
    )


async def crash_broker(cluster: EmbeddedCluster, node_id: int) -> None:
    """Takes a broker down without a controlled shutdown: SIGKILL on Apache Kafka (its
    partitions and coordinators move once the controller notices); the embedded broker's
    ``stop_broker`` already drops its connections like a crash."""
    if isinstance(cluster, EmbeddedCluster):
        await cluster.stop_broker(node_id)
    else:
        await cluster.kill_broker(node_id)  # type: ignore[attr-defined]


class RecordingConsumer:
    """A Consumer iterating in its own task, recording every record it is handed:
    ``seen[(partition, offset)]`` lists the names of the members that got it."""

    def __init__(self, consumer: Consumer, name: str, seen: dict[tuple[int, int], list[str]]) -> None:
        self.consumer = consumer
        self.name = name
        self.seen = seen
        self.task: asyncio.Task[None] | None = None
        self.count = 0

    async def start(self) -> Self:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        async for rec in self.consumer:
            self.seen[(rec.partition, rec.offset)].append(self.name)
            self.count += 1

    async def stop(self) -> None:
        """Graceful: close (commit, leave the group); the iteration ends by itself."""
        await self.consumer.close()
        if self.task is not None:
            await asyncio.wait_for(self.task, 10)

    async def crash(self) -> None:
        """Die without leaving the group or committing: stop everything, drop connections."""
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        gc = self.consumer.coordinator
        assert gc is not None
        for t in (gc._main_task, gc._hb_task):
            if t is not None:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await t
        await self.consumer.client.close()

    async def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            await self.consumer.close()
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task


async def produce_numbered_until(
    bootstrap: str, topic: str, partitions: int, stop: asyncio.Event, *, interval: float, per_partition: int
) -> int:
    """``per_partition`` records (numbered values) into every partition each ``interval``
    seconds until ``stop`` is set: whichever partitions a member gets, new records keep
    arriving there for as long as the scenario runs (a fixed budget could be consumed, or
    land on other members' partitions, before a late member is assigned anything).
    Returns how many were sent."""
    n = 0
    async with Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        while not stop.is_set():
            for part in range(partitions):
                if per_partition == 1:
                    await p.enqueue(topic, b"%d" % n, partition=part)
                else:
                    await p.enqueue_batch(
                        topic, [b"%d" % (n + i) for i in range(per_partition)], partition=part
                    )
                n += per_partition
            await asyncio.sleep(interval)
        await p.flush()
    return n


def end_offsets(cluster: EmbeddedCluster, topic: str, partitions: int) -> dict[int, int]:
    return {p: cluster.high_watermark(topic, p) for p in range(partitions)}
