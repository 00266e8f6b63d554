"""Helpers for the group tests: clusters for either broker (``--kafka``), members driven
by a bare GroupCoordinator (no Consumer needed), waiting for conditions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.broker.state import BrokerConfig
from aiokafka_lite.fetch.config import ConsumerConfig
from aiokafka_lite.fetch.subscription import SubscriptionState
from aiokafka_lite.groups import GroupCoordinator
from aiokafka_lite.net import Client
from aiokafka_lite.structs import TopicPartition

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
    from aiokafka_lite.groups import MemberState

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
