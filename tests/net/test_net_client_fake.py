"""Client routing, metadata, coordinators, reconnection and lifecycle on the fake cluster."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from netfakes import FakeBroker, FakeCluster, _find_coordinator, eventually

from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client, ClientConfig, CoordinatorType, parse_bootstrap
from aiokafka_lite.wire.framing import RequestFrame
from aiokafka_lite.wire.message import Response
from aiokafka_lite.wire.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

FAST = {
    "reconnect_backoff_ms": 5,
    "reconnect_backoff_max_ms": 20,
    "retry_backoff_ms": 5,
    "retry_backoff_max_ms": 20,
}


def _client(cluster: FakeCluster, bootstrap: str | None = None, **options: Any) -> Client:
    return Client(bootstrap or cluster.bootstrap, opener=cluster.opener, **{**FAST, **options})


def _echo(broker: FakeBroker, req: RequestFrame) -> Response:
    """FindCoordinator v0-3 echoes the key back as host; v4+ (real lookups) works normally."""
    if req.api_version >= 4:
        return _find_coordinator(broker, req)
    body: Any = req.body
    return FindCoordinatorResponse(host=body.key, node_id=broker.node_id)


def _library_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("aiokafka_lite.")}


# ---------------------------------------------------------------------------- config


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2,,") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9093", "host"]) == [("::1", 9093), ("host", 9092)]
    for bad in ("", "a:x", "a:0", ":9092"):
        with pytest.raises(E.ConfigError):
            parse_bootstrap(bad)


@pytest.mark.parametrize(
    "options",
    [
        {"request_timeout_ms": 0},
        {"max_in_flight_requests_per_connection": 0},
        {"security_protocol": "TLS"},
        {"sasl_mechanism": "NTLM"},
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "GSSAPI",
            "sasl_kerberos_keytab": "k.keytab",
        },
        {"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": "u"},
        {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"},
        {"client_software_name": "has space"},
        {"reconnect_backoff_ms": 500, "reconnect_backoff_max_ms": 100},
        {"request_timeout_msec": 5},
    ],
)
def test_invalid_config(options: dict[str, Any]) -> None:
    with pytest.raises(E.ConfigError):
        Client("h:1", **options)


def test_config_secret_not_in_repr() -> None:
    cfg = ClientConfig(
        security_protocol="SASL_PLAINTEXT", sasl_plain_username="u", sasl_plain_password="s3cr3t!"
    )
    assert "s3cr3t!" not in repr(cfg)
    assert "s3cr3t!" not in repr(Client("h:1", config=cfg))
    assert {row.name for row in ClientConfig.describe()} >= {"request_timeout_ms", "max_response_size"}


# ---------------------------------------------------------------------------- bootstrap & metadata


async def test_discovers_cluster_from_one_seed_and_adopts_the_bootstrap_connection() -> None:
    cluster = FakeCluster(3)
    cluster.add_topic("t", 6)
    async with _client(cluster, "broker1:9092") as client:
        assert sorted(client.cluster.brokers) == [0, 1, 2]
        assert client.cluster.cluster_id == "fake-cluster"
        await client.refresh_metadata(["t"])
        assert client.cluster.partitions_for("t") == list(range(6))
        assert await client.leader_for(TopicPartition("t", 4)) == (1, 0)
        assert client.is_connected(1)
    assert cluster.connects == {1: 1}  # the bootstrap connection became node 1's


async def test_no_brokers_available_fails_fast() -> None:
    cluster = FakeCluster(2)
    for b in cluster.brokers.values():
        b.up = False
    client = _client(cluster, request_timeout_ms=60_000)
    with pytest.raises(E.NoBrokersAvailableError):
        await asyncio.wait_for(client.start(), 5)
    await client.close()


async def test_second_seed_used_when_first_is_down() -> None:
    cluster = FakeCluster(2)
    cluster.brokers[0].up = False
    async with _client(cluster) as client:
        assert sorted(client.cluster.brokers) == [0, 1]


async def test_concurrent_refreshes_coalesce() -> None:
    cluster = FakeCluster(1)
    cluster.add_topic("t", 1)
    async with _client(cluster) as client:
        before = cluster.total(3)
        cluster.brokers[0].hold = True
        tasks = [asyncio.create_task(client.refresh_metadata()) for _ in range(10)]
        await asyncio.sleep(0.01)
        cluster.brokers[0].release()
        snaps = await asyncio.gather(*tasks)
        assert cluster.total(3) - before == 1
        assert all(s is snaps[0] for s in snaps)


async def test_refresh_for_new_topic_is_not_swallowed_by_running_one() -> None:
    cluster = FakeCluster(1)
    cluster.add_topic("a", 1)
    cluster.add_topic("b", 1)
    async with _client(cluster) as client:
        cluster.brokers[0].hold = True
        first = asyncio.create_task(client.refresh_metadata(["a"]))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(client.refresh_metadata(["b"]))
        await asyncio.sleep(0.01)
        cluster.brokers[0].release()
        await asyncio.sleep(0.01)
        cluster.brokers[0].release()
        await first
        md = await second
        assert "b" in md.topics and "a" in md.topics
        assert client.tracked_topics == {"a", "b"}


async def test_wait_for_topic() -> None:
    cluster = FakeCluster(1)
    async with _client(cluster) as client:
        with pytest.raises(E.UnknownTopicOrPartitionError):
            await client.wait_for_topic("late", 50)
        asyncio.get_running_loop().call_later(0.05, cluster.add_topic, "late", 3)
        info = await client.wait_for_topic("late", 5000)
        assert sorted(info.partitions) == [0, 1, 2]
        cluster.topics["late"].error_code = 0
        cluster.add_topic("denied", 1).error_code = 29
        cluster.topics["denied"].partitions.clear()
        with pytest.raises(E.TopicAuthorizationFailedError):
            await client.wait_for_topic("denied", 5000)


async def test_periodic_metadata_refresh() -> None:
    cluster = FakeCluster(1)
    async with _client(cluster, metadata_max_age_ms=20) as client:
        before = cluster.total(3)
        await eventually(lambda: cluster.total(3) - before >= 3)  # no caller asked: background refresh
        assert client.metrics()["metadata_age_s"] is not None


async def test_leader_move_followed_after_one_not_leader_error() -> None:
    cluster = FakeCluster(3)
    topic = cluster.add_topic("t", 1, leader=lambda p: 0)
    tp = TopicPartition("t", 0)
    served: list[tuple[int, int]] = []

    def list_offsets(broker: FakeBroker, req: RequestFrame) -> Response:
        leader = topic.partitions[0].leader
        code = 0 if broker.node_id == leader else 6  # NOT_LEADER_OR_FOLLOWER
        served.append((broker.node_id, code))
        return ListOffsetsResponse(
            topics=[
                ListOffsetsResponse.ListOffsetsTopicResponse(
                    name="t",
                    partitions=[
                        ListOffsetsResponse.ListOffsetsPartitionResponse(
                            partition_index=0, error_code=code, offset=42
                        )
                    ],
                )
            ]
        )

    cluster.handlers[2] = list_offsets
    async with _client(cluster) as client:
        await client.refresh_metadata(["t"])
        topic.partitions[0].leader = 2
        topic.partitions[0].epoch = 1

        async def op() -> int:
            leader, _epoch = await client.leader_for(tp)
            req = ListOffsetsRequest(
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name="t",
                        partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)],
                    )
                ]
            )
            resp: Any = await client.send(req, node_id=leader)
            part = resp.topics[0].partitions[0]
            E.raise_for_code(part.error_code)
            return int(part.offset)

        assert await client.retry(op) == 42
        assert served == [(0, 6), (2, 0)]
        assert client.cluster.leader_epoch(tp) == 1


async def test_stale_metadata_from_lagging_broker_is_ignored() -> None:
    cluster = FakeCluster(2)
    topic = cluster.add_topic("t", 1, leader=lambda p: 1)
    topic.partitions[0].epoch = 5
    async with _client(cluster) as client:
        await client.refresh_metadata(["t"])
        topic.partitions[0].leader = 0
        topic.partitions[0].epoch = 4  # an older view
        await client.refresh_metadata(["t"])
        assert await client.leader_for(TopicPartition("t", 0)) == (1, 5)


# ---------------------------------------------------------------------------- connections


async def test_dropped_connection_fails_in_flight_and_next_request_reconnects() -> None:
    cluster = FakeCluster(2)
    cluster.handlers[10] = _echo
    async with _client(cluster) as client:
        await client.send(FindCoordinatorRequest(key="warm"), node_id=1, version=3)
        cluster.brokers[1].hold = True
        pending = asyncio.create_task(client.send(FindCoordinatorRequest(key="lost"), node_id=1, version=3))
        await asyncio.sleep(0.01)
        refreshes = cluster.total(3)
        cluster.brokers[1].drop_connections()
        with pytest.raises(E.KafkaConnectionError) as ei:
            await pending
        assert ei.value.retriable
        cluster.brokers[1].hold = False
        resp: Any = await client.send(FindCoordinatorRequest(key="again"), node_id=1, version=3)
        assert resp.host == "again"
        assert cluster.connects[1] == 2
        # the disconnect triggered a metadata refresh (a background task: wait for it)
        await eventually(lambda: cluster.total(3) > refreshes)
        m = client.metrics()["brokers"][1]
        assert m["disconnects"] == 1 and m["errors"] == 1 and m["connects"] == 2


async def test_broker_stopped_and_restarted() -> None:
    cluster = FakeCluster(2)
    cluster.handlers[10] = _echo
    async with _client(cluster) as client:
        await client.send(FindCoordinatorRequest(key="x"), node_id=1, version=3)
        cluster.brokers[1].up = False
        cluster.brokers[1].drop_connections()
        await asyncio.sleep(0.01)
        with pytest.raises(E.KafkaConnectionError):
            await client.send(FindCoordinatorRequest(key="x"), node_id=1, version=3)
        # Requests that can go anywhere avoid the dead broker.
        resp: Any = await client.send(FindCoordinatorRequest(key="any"), version=3)
        assert resp.node_id == 0
        cluster.brokers[1].up = True
        resp = await client.retry(
            lambda: client.send(FindCoordinatorRequest(key="back"), node_id=1, version=3), timeout_ms=2000
        )
        assert resp.host == "back"


async def test_reconnect_backoff_grows_exponentially() -> None:
    cluster = FakeCluster(2)
    async with _client(cluster, reconnect_backoff_ms=40, reconnect_backoff_max_ms=1000) as client:
        cluster.brokers[1].up = False
        loop = asyncio.get_running_loop()
        for _ in range(3):
            with pytest.raises(E.KafkaConnectionError):
                await client.connection(1, timeout_ms=5000)
        node = client._nodes[1]
        assert node.failures == 3
        remaining = node.backoff_until - loop.time()
        assert remaining <= 0.192  # at most 40 ms * 2**2 * 1.2 after the third failure
        with pytest.raises(E.KafkaConnectionError, match="backoff"):
            await client.connection(1, timeout_ms=10)
        cluster.brokers[1].up = True
        conn = await client.connection(1, timeout_ms=5000)
        assert conn.ready and node.failures == 0


async def test_idle_connections_are_closed() -> None:
    cluster = FakeCluster(2)
    cluster.handlers[10] = _echo
    async with _client(cluster, connections_max_idle_ms=30) as client:
        await client.send(FindCoordinatorRequest(key="x"), node_id=1, version=3)
        assert client.is_connected(1)
        await eventually(lambda: not client.is_connected(1))
        assert client.metrics()["brokers"][1]["disconnects"] == 1
        await client.send(FindCoordinatorRequest(key="y"), node_id=1, version=3)  # reconnects on demand


async def test_thousand_concurrent_requests_through_client() -> None:
    cluster = FakeCluster(1)
    cluster.handlers[10] = _echo
    async with _client(cluster) as client:
        resps: list[Any] = await asyncio.gather(
            *(client.send(FindCoordinatorRequest(key=f"k{i}"), node_id=0, version=3) for i in range(1000))
        )
        assert [r.host for r in resps] == [f"k{i}" for i in range(1000)]
        assert cluster.connects[0] == 1


async def test_least_loaded_prefers_idle_connections() -> None:
    cluster = FakeCluster(2)
    cluster.handlers[10] = _echo
    async with _client(cluster) as client:
        await client.connection(0)
        await client.connection(1)
        cluster.brokers[0].hold = True
        busy = [
            asyncio.create_task(client.send(FindCoordinatorRequest(key="b"), node_id=0, version=3))
            for _ in range(3)
        ]
        await asyncio.sleep(0.01)
        resp: Any = await client.send(FindCoordinatorRequest(key="free"), version=3)
        assert resp.node_id == 1
        cluster.brokers[0].release()
        await asyncio.gather(*busy)


# ---------------------------------------------------------------------------- coordinators


async def test_find_coordinator_batched_and_cached() -> None:
    cluster = FakeCluster(3)
    cluster.coordinator_for = lambda key: int(key[-1]) % 3 if key[-1].isdigit() else 2
    async with _client(cluster) as client:
        nodes = await asyncio.gather(*(client.find_coordinator(f"g{i}") for i in range(5)))
        assert nodes == [0, 1, 2, 0, 1]
        assert cluster.total(10) == 1  # one batched FindCoordinator v4+
        assert await client.find_coordinator("g4") == 1
        assert cluster.total(10) == 1
        client.invalidate_coordinator("g4")
        assert await client.find_coordinator("g4") == 1
        assert cluster.total(10) == 2
        assert await client.find_coordinator("tx", CoordinatorType.TRANSACTION) == cluster.coordinator_for(
            "tx"
        )


async def test_find_coordinator_old_broker_one_per_key() -> None:
    cluster = FakeCluster(2)
    for b in cluster.brokers.values():
        b.api_versions[10] = (0, 3)
    cluster.coordinator_for = lambda key: 1
    async with _client(cluster) as client:
        assert await asyncio.gather(client.find_coordinator("a"), client.find_coordinator("b")) == [1, 1]
        assert cluster.total(10) == 2


async def test_find_coordinator_retries_while_not_available() -> None:
    cluster = FakeCluster(1)
    attempts: list[int] = []

    def flaky(broker: FakeBroker, req: RequestFrame) -> Response:
        attempts.append(1)
        body: Any = req.body
        code = 15 if len(attempts) < 3 else 0
        return FindCoordinatorResponse(
            coordinators=[
                FindCoordinatorResponse.Coordinator(
                    key=k, error_code=code, node_id=0, host="broker0", port=9092
                )
                for k in body.coordinator_keys
            ]
        )

    cluster.handlers[10] = flaky
    async with _client(cluster) as client:
        assert await client.find_coordinator("g") == 0
        assert len(attempts) == 3

    def denied(broker: FakeBroker, req: RequestFrame) -> Response:
        body: Any = req.body
        return FindCoordinatorResponse(
            coordinators=[
                FindCoordinatorResponse.Coordinator(key=k, error_code=30, error_message="no")
                for k in body.coordinator_keys
            ]
        )

    cluster.handlers[10] = denied
    async with _client(cluster) as client:
        with pytest.raises(E.GroupAuthorizationFailedError):
            await client.find_coordinator("g")


# ---------------------------------------------------------------------------- lifecycle


async def test_close_fails_in_flight_and_leaves_no_tasks() -> None:
    cluster = FakeCluster(3)
    cluster.handlers[10] = _echo
    clients = [_client(cluster, metadata_max_age_ms=10) for _ in range(3)]
    for c in clients:
        await c.start()
        await c.find_coordinator("g")
    cluster.brokers[0].hold = True
    pending = asyncio.create_task(clients[0].send(FindCoordinatorRequest(key="x"), node_id=0, version=3))
    coordinator = asyncio.create_task(clients[1].find_coordinator("other"))
    await asyncio.sleep(0.01)
    assert _library_tasks()
    for c in clients:
        await c.close()
        await c.close()  # idempotent
    with pytest.raises(E.ClosedError):
        await pending
    with pytest.raises(E.ClosedError):
        await coordinator
    await asyncio.sleep(0)
    assert _library_tasks() == set()
    with pytest.raises(E.ClosedError):
        await clients[0].send(FindCoordinatorRequest(key="late"), version=3)


async def test_metrics_snapshot() -> None:
    cluster = FakeCluster(1)
    cluster.handlers[10] = _echo
    async with _client(cluster) as client:
        for i in range(10):
            await client.send(FindCoordinatorRequest(key=str(i)), node_id=0, version=3)
        m = client.metrics()["brokers"][0]
        assert m["requests"] >= 12 and m["bytes_sent"] > 0 and m["bytes_received"] > 0
        assert m["in_flight"] == 0 and m["connected"]
        lat = m["latency_ms"]
        assert lat["samples"] >= 12 and 0 <= lat["p50"] <= lat["p99"] <= lat["max"]


async def test_api_version_lookup() -> None:
    cluster = FakeCluster(1)
    cluster.brokers[0].api_versions[3] = (0, 9)
    async with _client(cluster, max_versions={10: 2}) as client:
        assert client.api_version(0, 3) == 9
        assert client.api_version(0, 10) == 2  # capped by max_versions
        assert await client.negotiated_version(0, 3) == 9
        with pytest.raises(KeyError):
            client.api_version(5, 3)


# ---------------------------------------------------------------------------- real sockets


async def test_dns_name_with_several_addresses_tried_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host resolving to a dead address first and a live one second still connects."""
    from netfakes import _api_versions

    from aiokafka_lite.wire.framing import FrameReader, decode_request, encode_response

    fake = FakeCluster(1)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader()
        while data := await reader.read(65536):
            for frame in frames.feed(data):
                req = decode_request(frame)
                resp = (
                    _api_versions(fake.brokers[0], req) if req.api_key == 18 else _echo(fake.brokers[0], req)
                )
                writer.write(encode_response(resp, req.api_version, req.correlation_id))
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo

    async def fake_getaddrinfo(host: str, p: int, **kw: Any) -> Any:
        if host == "kafka.test":
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", dead_port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
            ]
        return await real(host, p, **kw)

    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    from aiokafka_lite.net.connection import BrokerConnection

    conn = BrokerConnection(0, "kafka.test", 9092, ClientConfig())
    await conn.connect()
    resp: Any = await conn.send(FindCoordinatorRequest(key="via-second-address"), 3)
    assert resp.host == "via-second-address"
    conn.close()
    server.close()
    await server.wait_closed()


async def test_close_during_start_raises_closed_error() -> None:
    cluster = FakeCluster(1)
    cluster.brokers[0].hold = True  # metadata never answers
    client = _client(cluster)
    starting = asyncio.create_task(client.start())
    await asyncio.sleep(0.01)
    await client.close()
    with pytest.raises(E.ClosedError):
        await starting
    assert _library_tasks() == set()
