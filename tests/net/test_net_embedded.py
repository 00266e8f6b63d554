"""Client against a real cluster: discovery, leader moves, disconnects, broker restarts,
pipelining, SASL and TLS, and clean shutdown. Discovery, broker stop/start, pipelining and
large frames also run against Apache Kafka (--kafka=apache); the rest needs the embedded
broker's fault injection or its SASL/TLS listeners."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client, create_ssl_context
from aiokafka_lite.net.metadata import ClusterMetadata
from aiokafka_lite.wire.messages import DescribeGroupsRequest, ListOffsetsRequest, ListOffsetsResponse

FAST = {
    "reconnect_backoff_ms": 5,
    "reconnect_backoff_max_ms": 50,
    "retry_backoff_ms": 5,
    "retry_backoff_max_ms": 50,
}


def _library_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("aiokafka_lite.client")}


def _list_offsets(tp: TopicPartition) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=tp.topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=tp.partition, timestamp=-1)
                ],
            )
        ],
    )


async def _metadata_until(client: Client, cond: Callable[[ClusterMetadata], bool]) -> ClusterMetadata:
    """Metadata refreshed until ``cond`` holds: a real cluster's brokers learn of a stopped
    or started broker a little after the fact."""
    async with asyncio.timeout(30):
        while True:
            md = await client.refresh_metadata()
            if cond(md):
                return md
            await asyncio.sleep(0.1)


async def test_metadata_discovery_from_one_seed(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3, topics={"t": 6})
    async with Client(kc.bootstrap_servers[1], **FAST) as client:
        assert sorted(client.cluster.brokers) == [1, 2, 3]
        assert client.cluster.cluster_id
        info = await client.wait_for_topic("t", 5000)
        assert sorted(info.partitions) == list(range(6))
        assert client.cluster.topic_id("t") is not None
        leaders = {client.cluster.leader_for(TopicPartition("t", p)) for p in range(6)}
        assert leaders == {1, 2, 3}


@pytest.mark.kafka_embedded  # moves a leader on request
async def test_leader_move_followed_after_one_not_leader_error(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3, topics={"t": 1})
    tp = TopicPartition("t", 0)
    async with Client(kc.bootstrap, **FAST) as client:
        old_leader, old_epoch = await client.leader_for(tp)
        new_leader, new_epoch = kc.move_leader("t", 0)
        assert new_leader != old_leader and new_epoch > old_epoch
        errors: list[int] = []
        targets: list[int] = []

        async def op() -> int:
            leader, _ = await client.leader_for(tp)
            targets.append(leader)
            resp = await client.send(_list_offsets(tp), node_id=leader)
            assert isinstance(resp, ListOffsetsResponse)
            part = resp.topics[0].partitions[0]
            if part.error_code:
                errors.append(part.error_code)
            E.raise_for_code(part.error_code)
            return int(part.offset)

        assert await client.retry(op) == 0
        assert errors == [E.NotLeaderOrFollowerError.code]
        assert targets == [old_leader, new_leader]
        assert client.cluster.leader_epoch(tp) == new_epoch


@pytest.mark.kafka_embedded  # holds a request at the broker, then drops it
async def test_dropped_connection_fails_in_flight_retriably_then_reconnects(
    kafka_cluster_factory: Any,
) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3, topics={"t": 1})
    tp = TopicPartition("t", 0)
    async with Client(kc.bootstrap, **FAST) as client:
        leader, _ = await client.leader_for(tp)
        await client.send(_list_offsets(tp), node_id=leader)
        kc.add_latency(ListOffsetsRequest.API_KEY, 0.5, count=1, broker_id=leader)
        in_flight = asyncio.create_task(client.send(_list_offsets(tp), node_id=leader))
        await asyncio.sleep(0.05)
        kc.close_connections(leader)
        with pytest.raises(E.KafkaConnectionError) as ei:
            await in_flight
        assert ei.value.retriable
        resp = await client.send(_list_offsets(tp), node_id=leader)
        assert isinstance(resp, ListOffsetsResponse) and resp.topics[0].partitions[0].error_code == 0
        stats = client.metrics()["brokers"][leader]
        assert stats["connects"] >= 2 and stats["disconnects"] >= 1


@pytest.mark.kafka_embedded  # the broker drops a connection on request
async def test_broker_drops_connection_mid_request(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=1, topics={"t": 1})
    tp = TopicPartition("t", 0)
    async with Client(kc.bootstrap, **FAST) as client:
        kc.drop_connection(ListOffsetsRequest.API_KEY, count=1, when="after")
        with pytest.raises(E.KafkaConnectionError):
            await client.send(_list_offsets(tp), node_id=1)
        resp = await client.retry(lambda: client.send(_list_offsets(tp), node_id=1))
        assert isinstance(resp, ListOffsetsResponse)


async def test_broker_stopped_and_restarted(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3)
    kc.create_topic("t", 3, replication_factor=3)  # leadership can move to the other replicas
    async with Client(kc.bootstrap, **FAST) as client:
        await client.refresh_metadata(["t"])
        await client.connection(2)
        await kc.stop_broker(2)
        with pytest.raises(E.KafkaConnectionError):
            await client.send(_list_offsets(TopicPartition("t", 0)), node_id=2, timeout_ms=2000)
        md = await _metadata_until(client, lambda md: 2 not in md.brokers)
        assert all(md.leader_for(TopicPartition("t", p)) in {1, 3} for p in range(3))
        await kc.start_broker(2)
        md = await _metadata_until(client, lambda md: 2 in md.brokers)
        conn = await client.retry(lambda: client.connection(2), timeout_ms=5000)
        assert conn.ready


async def test_thousand_concurrent_requests_on_one_connection(kafka_cluster: EmbeddedCluster) -> None:
    async with Client(kafka_cluster.bootstrap, max_in_flight_requests_per_connection=100, **FAST) as client:
        reqs = [DescribeGroupsRequest(groups=[f"group-{i}"]) for i in range(1000)]
        resps: list[Any] = await asyncio.gather(*(client.send(r, node_id=1) for r in reqs))
        assert [r.groups[0].group_id for r in resps] == [f"group-{i}" for i in range(1000)]
        assert client.metrics()["brokers"][1]["connects"] == 1


@pytest.mark.kafka_embedded  # a SASL listener with these users
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_against_embedded_broker(kafka_cluster_factory: Any, mechanism: str) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=1, sasl_users={"alice": "alice-secret"})
    opts = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism, **FAST}
    async with Client(
        kc.bootstrap, sasl_plain_username="alice", sasl_plain_password="alice-secret", **opts
    ) as client:
        assert sorted(client.cluster.brokers) == [1]
        resp: Any = await client.send(DescribeGroupsRequest(groups=["g"]))
        assert resp.groups[0].group_id == "g"
    bad = Client(kc.bootstrap, sasl_plain_username="alice", sasl_plain_password="wrong-password", **opts)
    with pytest.raises(E.AuthenticationError) as ei:
        await asyncio.wait_for(bad.start(), 10)
    assert "wrong-password" not in str(ei.value) and "wrong-password" not in repr(bad)
    await bad.close()


@pytest.mark.kafka_embedded  # a SASL listener with these mechanisms
async def test_sasl_mechanism_not_enabled(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(
        brokers=1, sasl_users={"u": "p"}, sasl_mechanisms=("SCRAM-SHA-512",)
    )
    client = Client(
        kc.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_plain_username="u", sasl_plain_password="p"
    )
    with pytest.raises(E.UnsupportedSaslMechanismError, match="SCRAM-SHA-512"):
        await asyncio.wait_for(client.start(), 10)
    await client.close()


@pytest.mark.kafka_embedded  # a TLS listener with this certificate
async def test_tls_against_embedded_broker(kafka_cluster_factory: Any, tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=2, ssl_context=server_ctx)
    ctx = create_ssl_context(cafile=str(cert))
    async with Client(kc.bootstrap, security_protocol="SSL", ssl_context=ctx, **FAST) as client:
        assert sorted(client.cluster.brokers) == [1, 2]
        resp: Any = await client.send(DescribeGroupsRequest(groups=["g"]), node_id=2)
        assert resp.groups[0].group_id == "g"
    # A client that does not trust the certificate cannot connect.
    untrusting = Client(kc.bootstrap, security_protocol="SSL", ssl_context=create_ssl_context(), **FAST)
    with pytest.raises(E.NoBrokersAvailableError, match=r"TLS|certificate"):
        await asyncio.wait_for(untrusting.start(), 10)
    await untrusting.close()


async def _roundtrip_big_batch(client: Client, topic: str) -> None:
    """Produce ~900 KB in one batch and fetch it back byte for byte (large frames take the
    in-place read path of the connection)."""
    from aiokafka_lite.wire.messages import FetchRequest, ProduceRequest
    from aiokafka_lite.wire.records import BatchBuilder

    info = await client.wait_for_topic(topic, 5000)
    leader = info.partitions[0].leader
    builder = BatchBuilder(max_batch_size=4 << 20)
    payload = bytes(range(256)) * 1200  # 300 KiB per record, under max.message.bytes in total
    for i in range(3):
        assert builder.append(1000 + i, None, payload)
    batch = builder.build()
    produce = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                topic_id=info.topic_id,
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
            )
        ],
    )

    async def append() -> None:
        presp: Any = await client.send(produce, node_id=leader)
        # A new topic's leader may refuse it for a moment (NOT_LEADER_OR_FOLLOWER, retriable).
        E.raise_for_code(presp.responses[0].partition_responses[0].error_code)

    await client.retry(append)
    fetch = FetchRequest(
        max_wait_ms=0,
        max_bytes=8 << 20,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                topic_id=info.topic_id,
                partitions=[
                    FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=8 << 20)
                ],
            )
        ],
    )
    fresp: Any = await client.send(fetch, node_id=leader)
    part = fresp.responses[0].partitions[0]
    assert part.error_code == 0
    got = bytes(part.records)
    # Identical apart from base offset and partition leader epoch (set by the broker).
    assert len(got) == len(batch) and got[8:12] == batch[8:12] and got[16:] == batch[16:]


async def test_large_responses_plaintext(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("big", 1)
    async with Client(kafka_cluster.bootstrap, **FAST) as client:
        await _roundtrip_big_batch(client, "big")


@pytest.mark.kafka_embedded  # a TLS listener with this certificate
async def test_large_responses_over_tls(kafka_cluster_factory: Any, tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=1, ssl_context=server_ctx, topics={"big": 1})
    ctx = create_ssl_context(cafile=str(cert))
    async with Client(kc.bootstrap, security_protocol="SSL", ssl_context=ctx, **FAST) as client:
        await _roundtrip_big_batch(client, "big")


@pytest.mark.kafka_embedded  # holds a request at the broker (added latency)
async def test_no_task_outlives_close(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3, topics={"t": 3})
    clients = [Client(kc.bootstrap, metadata_max_age_ms=20, **FAST) for _ in range(3)]
    for c in clients:
        await c.start()
        await c.refresh_metadata(["t"])
        await c.find_coordinator("g")
        for node in (1, 2, 3):
            await c.connection(node)
    # Only DescribeGroups is held: with every API, a metadata refresh (every 20 ms here)
    # could take the one delayed slot first, and the request then completed before close.
    kc.add_latency(DescribeGroupsRequest, 3.0, count=1, broker_id=1)
    pending = asyncio.create_task(clients[0].send(DescribeGroupsRequest(groups=["x"]), node_id=1))
    await asyncio.sleep(0.05)
    assert _library_tasks()
    for c in clients:
        await c.close()
    with pytest.raises(E.ClosedError):
        await pending
    await asyncio.sleep(0)
    assert _library_tasks() == set()
