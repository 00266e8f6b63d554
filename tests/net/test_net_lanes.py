"""Connection lanes: a coordinator lane per broker, so group traffic never queues behind a
long-polling Fetch (brokers answer a connection's requests one at a time, in order).
Against the embedded broker or, with --kafka=apache, Apache Kafka (except the tests that
need the embedded broker to drop or hold requests)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client, Lane
from aiokafka_lite.wire.messages import (
    DescribeGroupsRequest,
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitRequest,
)

FAST: dict[str, Any] = {
    "reconnect_backoff_ms": 5,
    "reconnect_backoff_max_ms": 50,
    "retry_backoff_ms": 5,
    "retry_backoff_max_ms": 50,
}


def _library_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("aiokafka_lite.client")}


async def eventually(cond: Callable[[], bool], limit: float = 10.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _long_poll(client: Client, topic: str, max_wait_ms: int) -> FetchRequest:
    """A Fetch of an empty partition that the broker parks for ``max_wait_ms``."""
    info = await client.wait_for_topic(topic, 5000)
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                topic_id=info.topic_id,
                partitions=[
                    FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )


def _heartbeat() -> HeartbeatRequest:
    return HeartbeatRequest(group_id="g", generation_id=1, member_id="nobody")


async def test_coordinator_lane_is_not_blocked_by_a_long_poll(kafka_cluster: EmbeddedCluster) -> None:
    kc = kafka_cluster
    kc.create_topic("t", 1)
    async with Client(kc.bootstrap, **FAST) as client:
        fetch = await _long_poll(client, "t", 2000)
        await client.connection(1, lane=Lane.COORDINATOR)
        order: list[str] = []

        async def run(name: str, req: Any, lane: Lane) -> Any:
            resp = await client.send(req, node_id=1, lane=lane)
            order.append(name)
            return resp

        def in_flight() -> int:
            n: int = client.metrics()["brokers"][1]["in_flight"]
            return n

        fetching = asyncio.create_task(run("fetch", fetch, Lane.DEFAULT))
        await eventually(lambda: in_flight() == 1, what="fetch in flight")
        # Queued behind the Fetch on the same connection: answered only after it.
        behind = asyncio.create_task(run("heartbeat-default", _heartbeat(), Lane.DEFAULT))
        await eventually(lambda: in_flight() == 2, what="heartbeat behind the fetch")
        hb = await run("heartbeat-coordinator", _heartbeat(), Lane.COORDINATOR)
        assert isinstance(hb, HeartbeatResponse)
        assert not fetching.done(), "the Fetch should still be parked at the broker"
        fresp, _ = await asyncio.gather(fetching, behind)
        assert isinstance(fresp, FetchResponse)
        part = fresp.responses[0].partitions[0]
        assert part.error_code == 0 and not part.records
        assert order == ["heartbeat-coordinator", "fetch", "heartbeat-default"]
        lanes = client.metrics()["brokers"][1]["lanes"]
        assert lanes == {"default": True, "coordinator": True}


async def test_metadata_refresh_avoids_a_connection_busy_with_a_long_poll(
    kafka_cluster: EmbeddedCluster,
) -> None:
    kc = kafka_cluster
    kc.create_topic("t", 1)
    async with Client(kc.bootstrap, **FAST) as client:
        fetch = await _long_poll(client, "t", 2000)
        await client.connection(1, lane=Lane.COORDINATOR)
        fetching = asyncio.create_task(client.send(fetch, node_id=1))
        await eventually(lambda: client.metrics()["brokers"][1]["in_flight"] == 1, what="fetch in flight")
        await client.refresh_metadata(["t"])
        coordinator = await client.find_coordinator("some-group")
        assert coordinator == 1
        assert not fetching.done()
        await fetching


@pytest.mark.kafka_embedded  # the broker drops one lane's connection on request
async def test_each_lane_reconnects_on_its_own(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=1)
    async with Client(kc.bootstrap, **FAST) as client:
        default = await client.connection(1)
        coord = await client.connection(1, lane=Lane.COORDINATOR)
        assert default is not coord
        connects = client.metrics()["brokers"][1]["connects"]
        # The broker drops the connection that carries the next Heartbeat.
        kc.drop_connection(HeartbeatRequest.API_KEY, count=1)
        with pytest.raises(E.KafkaConnectionError):
            await client.send(_heartbeat(), node_id=1, lane=Lane.COORDINATOR)
        assert not client.is_connected(1, Lane.COORDINATOR)
        assert client.is_connected(1) and default.ready
        resp = await client.retry(lambda: client.send(_heartbeat(), node_id=1, lane=Lane.COORDINATOR))
        assert isinstance(resp, HeartbeatResponse)
        again = await client.connection(1, lane=Lane.COORDINATOR)
        assert again is not coord and again.ready
        assert await client.connection(1) is default  # untouched by the other lane's trouble
        stats = client.metrics()["brokers"][1]
        assert stats["connects"] == connects + 1 and stats["disconnects"] >= 1


async def test_idle_lane_is_closed_while_the_other_is_busy(kafka_cluster: EmbeddedCluster) -> None:
    async with Client(kafka_cluster.bootstrap, connections_max_idle_ms=200, **FAST) as client:
        await client.send(_heartbeat(), node_id=1, lane=Lane.COORDINATOR)
        default = await client.connection(1)
        for _ in range(500):
            if not client.is_connected(1, Lane.COORDINATOR):
                break
            await client.send(DescribeGroupsRequest(groups=["g"]), node_id=1)  # keeps the default lane in use
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the idle coordinator lane was never closed")
        assert client.is_connected(1) and await client.connection(1) is default
        assert client.metrics()["brokers"][1]["lanes"] == {"default": True, "coordinator": False}
        resp = await client.send(_heartbeat(), node_id=1, lane=Lane.COORDINATOR)  # reopens on demand
        assert isinstance(resp, HeartbeatResponse)


@pytest.mark.kafka_embedded  # holds requests at the broker (added latency)
async def test_close_closes_every_lane_and_leaves_no_task(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3, topics={"t": 3})
    client = Client(kc.bootstrap, **FAST)
    await client.start()
    conns = []
    for node in (1, 2, 3):
        for lane in Lane:
            conns.append(await client.connection(node, lane=lane))
    kc.add_latency(None, 1.0, count=2, broker_id=2)
    pending = [
        asyncio.create_task(client.send(DescribeGroupsRequest(groups=["x"]), node_id=2, lane=lane))
        for lane in Lane
    ]
    await eventually(lambda: client.metrics()["brokers"][2]["in_flight"] == 2, what="both lanes busy")
    assert _library_tasks()
    await client.close()
    for task in pending:
        with pytest.raises(E.ClosedError):
            await task
    assert all(c.closed for c in conns)
    assert not any(b["connected"] for b in client.metrics()["brokers"].values())
    await asyncio.sleep(0)
    assert _library_tasks() == set()


async def test_versions_are_shared_by_the_lanes(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3)
    async with Client(kc.bootstrap_servers[0], **FAST) as client:
        node = next(n for n in (1, 2, 3) if not client.is_connected(n))
        key = OffsetCommitRequest.API_KEY
        with pytest.raises(KeyError):
            client.api_version(node, key)
        version = await client.negotiated_version(node, key, lane=Lane.COORDINATOR)
        # Asking on the coordinator lane connects that lane only.
        assert client.is_connected(node, Lane.COORDINATOR) and not client.is_connected(node)
        assert client.api_version(node, key) == version
        # The default lane answers from the coordinator lane's versions without connecting.
        assert await client.negotiated_version(node, key) == version
        assert not client.is_connected(node)


async def test_unknown_lane_is_a_config_error(kafka_cluster: EmbeddedCluster) -> None:
    async with Client(kafka_cluster.bootstrap, **FAST) as client:
        with pytest.raises(E.ConfigError, match="lane"):
            await client.send(_heartbeat(), node_id=1, lane="bulk")  # type: ignore[arg-type]
        assert await client.send(_heartbeat(), node_id=1, lane="coordinator") is not None  # type: ignore[arg-type]
        assert client.is_connected(1, Lane.COORDINATOR)


async def test_group_consumer_heartbeats_while_its_fetch_is_parked(kafka_cluster: EmbeddedCluster) -> None:
    """The consumer's group coordinator rides the shared client's coordinator lane: heartbeats
    are answered while the fetcher's long poll to the same broker is still parked."""
    from aiokafka_lite.consume import Consumer

    kafka_cluster.create_topic("idle", 1)
    events: list[tuple[str, int]] = []

    class Recorder:
        def on_request_written(self, node_id: int, api_key: int, *_: object) -> None:
            events.append(("sent", api_key))

        def on_response_read(self, node_id: int, api_key: int, *_: object) -> None:
            events.append(("read", api_key))

    client = Client(kafka_cluster.bootstrap, **FAST)
    client.add_hooks(Recorder())
    async with (
        client,
        Consumer(
            client=client,
            topics=["idle"],
            group_id="lanes",
            fetch_max_wait_ms=1500,
            heartbeat_interval_ms=50,
            session_timeout_ms=6000,
        ) as consumer,
    ):
        await eventually(lambda: consumer.assignment() == {TopicPartition("idle", 0)}, what="assignment")
        fetch_key, hb_key = FetchRequest.API_KEY, HeartbeatRequest.API_KEY

        def heartbeats_during_a_fetch() -> bool:
            # Heartbeat responses read after a Fetch was written and before its response.
            parked = False
            seen = 0
            for kind, key in events:
                if key == fetch_key:
                    parked = kind == "sent"
                    seen = 0
                elif parked and kind == "read" and key == hb_key:
                    seen += 1
                    if seen >= 2:
                        return True
            return False

        await eventually(heartbeats_during_a_fetch, what="heartbeats answered during a parked Fetch")
        assert consumer.coordinator is not None and consumer.coordinator._client is client
        assert client.metrics()["brokers"][1]["lanes"]["coordinator"]
