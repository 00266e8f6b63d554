"""A classic consumer group on asyncio and on trio: join, split the partitions, commit,
leave on close; a later member resumes from the committed offsets."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.core.errors import CommitFailedError
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.net import Client
from aiokafka_lite.net.connection import BrokerConnection, _open_stream, _open_tcp
from aiokafka_lite.testing.proxy import BlackholeProxy
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running
from anyio_backends.testlib import assert_late_member_finds_nothing_left, fill_topic

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


LOST_SESSION_GROUP_CONFIGS = {
    "group.consumer.heartbeat.interval.ms": "200",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_member_cut_off_past_its_session_stops_and_resumes_from_the_commits(
    anyio_backend: str, kafka_threaded_cluster_factory: Callable[..., ThreadedCluster], protocol: str
) -> None:
    """Through a proxy that silently drops everything, a member's session runs out: it
    hands out nothing more of its partitions, though it had records of them buffered;
    once the network heals the coordinator says it was expired: the partitions are lost
    (no commit), the member rejoins and reads on from the committed offsets, so exactly the
    records it had not committed come again."""
    cluster = kafka_threaded_cluster_factory(brokers=1, configs=LOST_SESSION_GROUP_CONFIGS)
    bootstrap = cluster.bootstrap
    topic = f"lost-{protocol}-{anyio_backend}"
    sent = await fill_topic(bootstrap, topic, 2, 200)
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    opener = _open_tcp if anyio_backend == "asyncio" else _open_stream

    lost: list[set[TP]] = []
    lost_called = anyio.Event()

    class Listener:
        async def on_partitions_lost(self, tps: set[TP]) -> None:
            lost.append(set(tps))
            lost_called.set()

    options: dict[str, Any] = {"group_protocol": protocol, "auto_offset_reset": "earliest"}
    options["enable_auto_commit"] = False
    if protocol == "classic":
        options.update(session_timeout_ms=6000, heartbeat_interval_ms=200)
    with BlackholeProxy(host, int(port)) as proxy:

        async def via_proxy(conn: BrokerConnection) -> None:
            conn.host, conn.port = proxy.host, proxy.port
            await opener(conn)

        client = Client(bootstrap, opener=via_proxy, **FAST)
        seen: list[tuple[int, int]] = []
        async with (
            client,
            Consumer(
                client=client, group_id=f"g-lost-{protocol}", topics=topic, listener=Listener(), **options
            ) as consumer,
        ):
            with anyio.fail_after(30):
                while len(seen) < 10:
                    batch = await consumer.getmany(timeout_ms=200, max_records=10 - len(seen))
                    seen.extend((r.partition, r.offset) for recs in batch.values() for r in recs)
                await consumer.commit()
                uncommitted: list[tuple[int, int]] = []
                while not uncommitted:
                    batch = await consumer.getmany(timeout_ms=200, max_records=10)
                    uncommitted.extend((r.partition, r.offset) for recs in batch.values() for r in recs)
            seen.extend(uncommitted)
            assert len(seen) < len(sent)  # the rest is buffered or still to be fetched

            proxy.blackhole()
            both = {TP(topic, 0), TP(topic, 1)}
            with anyio.fail_after(30):  # 6 s of session, on the heartbeat loop's own clock
                while consumer.paused() != both:  # noqa: ASYNC110 - the state has no event
                    await anyio.sleep(0.05)
            for _ in range(5):  # nothing of the partitions, buffered or not
                assert await consumer.getmany(timeout_ms=100) == {}
            assert lost == []  # the coordinator has not said yet

            proxy.restore()
            with anyio.fail_after(30):
                await lost_called.wait()
            assert lost == [both]
            again: list[tuple[int, int]] = []
            with anyio.fail_after(60):
                while len(set(seen) | set(again)) < len(sent):
                    batch = await consumer.getmany(timeout_ms=200)
                    again.extend((r.partition, r.offset) for recs in batch.values() for r in recs)
    assert len(again) == len(set(again))
    assert set(seen) & set(again) == set(uncommitted)  # read on from the committed offsets
