"""A consumer-protocol group (KIP-848) on asyncio and on trio: two members join, split the
partitions (the broker assigns, each reconciles), commit and leave with the leave
heartbeat on close; a later member resumes from the committed offsets."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running
from anyio_backends.testlib import assert_late_member_finds_nothing_left, fill_topic

pytestmark = pytest.mark.anyio

GROUP = {"group_protocol": "consumer", "auto_offset_reset": "earliest", "enable_auto_commit": False}


@pytest.fixture
def fast_groups_cluster(kafka_threaded_cluster_factory: Callable[..., ThreadedCluster]) -> ThreadedCluster:
    """One embedded broker whose consumer groups heartbeat every 200 ms."""
    return kafka_threaded_cluster_factory(
        brokers=1,
        default_partitions=3,
        configs={
            "group.consumer.heartbeat.interval.ms": "200",
            "group.consumer.min.heartbeat.interval.ms": "100",
        },
    )


async def test_two_consumer_protocol_members_share_the_partitions(
    anyio_backend: str, fast_groups_cluster: ThreadedCluster
) -> None:
    bootstrap = fast_groups_cluster.bootstrap
    topic = f"kip848-{anyio_backend}"
    sent = await fill_topic(bootstrap, topic, 4, 400)
    group = f"g848-{anyio_backend}"
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
                    await consumer.commit()
                owned[name] = set(consumer.assignment())
                if len(seen) >= len(sent) and all(len(v) == 2 for v in owned.values()) and len(owned) == 2:
                    final.update((k, set(v)) for k, v in owned.items())  # before anyone leaves
                    stop.set()
            await consumer.commit()

    stop = anyio.Event()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(member, "a", stop)
            tg.start_soon(member, "b", stop)
    assert sorted(seen) == sorted(sent)  # every record once across the two members
    assert final["a"] | final["b"] == {TP(topic, p) for p in range(4)}
    assert not final["a"] & final["b"]
    assert client_tasks_running() == []
    assert unretrieved.check() == []

    await assert_late_member_finds_nothing_left(bootstrap, group, topic, **GROUP)
