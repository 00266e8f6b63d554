"""Helpers for group coordinator tests against the embedded cluster (no Consumer needed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.broker.state import BrokerConfig
from aiokafka_lite.fetch.config import ConsumerConfig
from aiokafka_lite.fetch.subscription import SubscriptionState
from aiokafka_lite.groups import GroupCoordinator
from aiokafka_lite.net import Client
from aiokafka_lite.structs import TopicPartition

# Small timers so that rebalances and session expiry happen within a test.
FAST = {
    "session_timeout_ms": 1500,
    "heartbeat_interval_ms": 100,
}


def broker_config(**extra: str) -> BrokerConfig:
    return BrokerConfig(extra={"group.min.session.timeout.ms": "100", **extra})


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
        config = ConsumerConfig(group_id=group_id, **{**FAST, **options})
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
