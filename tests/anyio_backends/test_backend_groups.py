"""A classic consumer group on asyncio and on trio: join, split the partitions, commit,
leave on close; a later member resumes from the committed offsets."""

from __future__ import annotations

import contextlib

import anyio
import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.errors import CommitFailedError
from aiokafka_lite.structs import TopicPartition as TP
from aiokafka_lite.testing.threaded import ThreadedCluster

from .conftest import FAST, UnretrievedErrors, client_tasks_running
from .testlib import assert_late_member_finds_nothing_left, fill_topic

pytestmark = pytest.mark.anyio

GROUP = {
    "group_protocol": "classic",
    "auto_offset_reset": "earliest",
    "heartbeat_interval_ms": 100,
    "session_timeout_ms": 6000,
    "enable_auto_commit": False,
}


async def test_two_members_share_the_partitions(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"grp-{anyio_backend}"
    sent = await fill_topic(bootstrap, topic, 4, 400)
    group = f"g-{anyio_backend}"
    seen: list[bytes] = []
    owned: dict[str, set[TP]] = {}
    final: dict[str, set[TP]] = {}
    unretrieved = UnretrievedErrors()

    async def member(name: str, stop: anyio.Event) -> None:
        async with Consumer(bootstrap, group_id=group, topics=topic, **GROUP, **FAST) as consumer:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                for recs in batch.values():
                    seen.extend(r.value for r in recs)
                if batch:
                    with contextlib.suppress(CommitFailedError):  # refused while rebalancing
                        await consumer.commit()
                owned[name] = set(consumer.assignment())
                if len(seen) >= len(sent) and all(len(v) == 2 for v in owned.values()) and len(owned) == 2:
                    final.update((k, set(v)) for k, v in owned.items())  # before anyone leaves
                    stop.set()
            # The other member may be leaving (a rebalance): poll until the commit is taken.
            for _ in range(100):
                try:
                    await consumer.commit()
                    break
                except CommitFailedError:
                    batch = await consumer.getmany(timeout_ms=100)
                    seen.extend(r.value for recs in batch.values() for r in recs)

    stop = anyio.Event()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(member, "a", stop)
            tg.start_soon(member, "b", stop)
    assert set(seen) == sent  # every record (at least once: commits are refused mid-rebalance)
    assert final["a"] | final["b"] == {TP(topic, p) for p in range(4)}
    assert not final["a"] & final["b"]
    assert client_tasks_running() == []
    assert unretrieved.check() == []

    await assert_late_member_finds_nothing_left(bootstrap, group, topic, **GROUP)
