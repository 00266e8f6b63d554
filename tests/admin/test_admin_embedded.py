"""The whole Admin API, on the embedded 3-broker cluster or on Apache Kafka (--kafka=apache:
the session's node, or a fresh three-node cluster for the tests about several brokers)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiokafka_lite import Admin, NewTopic
from aiokafka_lite.admin import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigSource,
    GroupOffset,
    OffsetSpec,
)
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.net import Client, CoordinatorType
from aiokafka_lite.wire.messages import (
    ConsumerProtocolAssignment,
    JoinGroupRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from aiokafka_lite.wire.records import BatchBuilder

FAST = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}


@pytest.fixture
async def cluster(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: Any
) -> EmbeddedCluster:
    """Embedded: three brokers. Apache Kafka: the session's node (an async fixture such as
    kafka_cluster cannot be fetched from a running event loop, so its sync twin)."""
    if kafka_mode == "apache":
        shared: EmbeddedCluster = request.getfixturevalue("apache_kafka")
        return shared
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3)
    return kc


@pytest.fixture
async def cluster3(kafka_mode: str, kafka_cluster_factory: Any) -> EmbeddedCluster:
    """Three brokers on either Kafka; on Apache Kafka new topics are replicated on all
    three, so that one broker can stop without taking a partition with it."""
    if kafka_mode == "apache":
        replicated = {"default.replication.factor": "3", "min.insync.replicas": "2"}
        apache: EmbeddedCluster = await kafka_cluster_factory(brokers=3, configs=replicated)
        return apache
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=3)
    return kc


def cluster_id(cluster: object) -> str:
    """The id the cluster was started with (each kind keeps it in its own place)."""
    if isinstance(cluster, EmbeddedCluster):
        return str(cluster.state.cluster_id)
    return str(cluster.cluster_id)  # type: ignore[attr-defined]  # ApacheCluster


async def _produce(client: Client, tp: TP, n: int, timestamp0: int = 1_000) -> None:
    """One batch of ``n`` records, retried like a producer retries: a topic just created
    may not be served yet (NOT_LEADER_OR_FOLLOWER from Kafka for a moment)."""
    builder = BatchBuilder(max_batch_size=1 << 20)
    for i in range(n):
        assert builder.append(timestamp0 + i, None, f"v{i}".encode())
    batch = builder.build()
    async with asyncio.timeout(15):
        while True:
            leader, _ = await client.leader_for(tp)
            req = ProduceRequest(
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=tp.topic,
                        topic_id=client.cluster.topic_id(tp.topic)
                        or ProduceRequest.TopicProduceData().topic_id,
                        partition_data=[
                            ProduceRequest.PartitionProduceData(index=tp.partition, records=batch)
                        ],
                    )
                ],
            )
            resp: Any = await client.send(req, node_id=leader)
            code = resp.responses[0].partition_responses[0].error_code
            if code == 0:
                return
            assert E.error_for(code).retriable, E.error_for(code)
            await client.refresh_metadata([tp.topic])
            await asyncio.sleep(0.05)


async def until(check: Callable[[], Awaitable[bool]], what: str, limit_s: float = 15.0) -> None:
    """Kafka acknowledges a topic change once its controller has it; the brokers' metadata
    follows shortly after. Wait (bounded) until ``check`` sees the change."""
    try:
        async with asyncio.timeout(limit_s):
            while not await check():  # noqa: ASYNC110 - a remote condition, polled
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"not within {limit_s} s: {what}") from None


async def test_topics_lifecycle(cluster: EmbeddedCluster) -> None:
    async with Admin(cluster.bootstrap, **FAST) as admin:
        created = await admin.create_topics(
            [NewTopic("alpha", 3, 1, {"retention.ms": "12345"}), NewTopic("beta", 2)]
        )
        assert created.ok
        assert created["alpha"].partitions == 3 and created["alpha"].topic_id is not None
        assert created["alpha"].configs["retention.ms"] == "12345"

        again = await admin.create_topics([NewTopic("alpha", 3), NewTopic("gamma", 1)])
        assert isinstance(again["alpha"].error, E.TopicAlreadyExistsError)
        assert again["gamma"].error is None
        with pytest.raises(E.TopicAlreadyExistsError):
            again.raise_errors()

        async def all_listed() -> bool:
            return set(await admin.list_topics()) == {"alpha", "beta", "gamma"}

        await until(all_listed, "alpha, beta and gamma listed (and nothing else)")
        listed = await admin.list_topics()
        assert listed["alpha"].topic_id == created["alpha"].topic_id

        described = await admin.describe_topics(["alpha", "missing"])
        assert [p.partition for p in described["alpha"].partitions] == [0, 1, 2]
        assert {p.leader for p in described["alpha"].partitions} <= {1, 2, 3}
        assert isinstance(described["missing"].error, E.UnknownTopicOrPartitionError)

        grown = await admin.create_partitions({"beta": 5, "missing": 2})
        assert grown["beta"].error is None
        assert isinstance(grown["missing"].error, E.UnknownTopicOrPartitionError)

        async def grown_to_5() -> bool:
            return len((await admin.describe_topics(["beta"]))["beta"].partitions) == 5

        await until(grown_to_5, "beta described with 5 partitions")

        validated = await admin.create_topics([NewTopic("delta", 1)], validate_only=True)
        assert validated.ok and "delta" not in await admin.list_topics()

        deleted = await admin.delete_topics(["gamma", "missing"])
        assert deleted["gamma"].error is None
        assert isinstance(deleted["missing"].error, E.UnknownTopicOrPartitionError)

        async def gamma_gone() -> bool:
            return "gamma" not in await admin.list_topics()

        await until(gamma_gone, "gamma no longer listed")


async def test_invalid_create_topics_input(cluster: EmbeddedCluster) -> None:
    async with Admin(cluster.bootstrap) as admin:
        with pytest.raises(E.ConfigError):
            await admin.create_topics([NewTopic("x", 1), NewTopic("x", 2)])
        bad = await admin.create_topics([NewTopic("bad name!", 1), NewTopic("neg", 0)])
        assert isinstance(bad["bad name!"].error, E.InvalidTopicError)
        assert isinstance(bad["neg"].error, E.InvalidPartitionsError)


async def test_configs(cluster: EmbeddedCluster) -> None:
    async with Admin(cluster.bootstrap) as admin:
        (await admin.create_topics([NewTopic("cfg", 1, configs={"retention.ms": "1000"})])).raise_errors()
        await admin.client.wait_for_topic("cfg", 10_000)  # served (see until)
        topic = ConfigResource.topic("cfg")
        broker = ConfigResource.broker((await admin.describe_cluster()).brokers[-1].id)
        desc = await admin.describe_configs([topic, broker, ConfigResource.topic("nope")])
        entry = desc[topic].entries["retention.ms"]
        assert entry.value == "1000" and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert desc[topic].entries["cleanup.policy"].is_default
        assert desc[broker].error is None and desc[broker].entries
        assert isinstance(desc[ConfigResource.topic("nope")].error, E.UnknownTopicOrPartitionError)

        altered = await admin.incremental_alter_configs(
            {
                topic: [
                    AlterConfigOp("retention.ms", "5000"),
                    AlterConfigOp("cleanup.policy", "compact", AlterConfigOpType.SET),
                ],
                ConfigResource.topic("nope"): {"retention.ms": "1"},
            }
        )
        assert altered[topic].error is None
        assert isinstance(altered[ConfigResource.topic("nope")].error, E.UnknownTopicOrPartitionError)

        async def described(check: Callable[[Any], bool]) -> bool:
            return check((await admin.describe_configs([topic]))[topic])

        await until(
            lambda: described(
                lambda c: c.value("retention.ms") == "5000" and c.value("cleanup.policy") == "compact"
            ),
            "the altered configs described",
        )

        deleted = await admin.incremental_alter_configs({topic: {"retention.ms": None}})  # DELETE: default
        assert deleted.ok
        await until(lambda: described(lambda c: c.entries["retention.ms"].is_default), "retention.ms default")

        validated = await admin.incremental_alter_configs({topic: {"retention.ms": "7"}}, validate_only=True)
        assert validated.ok
        # A later real change is described once it is applied, and changes apply in order:
        # by then a validated-only one would show too.
        assert (await admin.incremental_alter_configs({topic: {"cleanup.policy": "delete"}})).ok
        await until(
            lambda: described(lambda c: c.value("cleanup.policy") == "delete"), "cleanup.policy delete"
        )
        assert (await admin.describe_configs([topic]))[topic].entries["retention.ms"].is_default


async def test_list_offsets_and_delete_records(cluster: EmbeddedCluster) -> None:
    async with Admin(cluster.bootstrap, **FAST) as admin:
        await admin.create_topics([NewTopic("data", 3, 1)])
        client = admin.client
        for p in range(3):
            await _produce(client, TP("data", p), 5 * (p + 1), timestamp0=10_000)
        specs: dict[TP, Any] = {TP("data", p): "latest" for p in range(3)}
        specs[TP("nope", 0)] = OffsetSpec.LATEST
        specs[TP("data", 7)] = OffsetSpec.LATEST
        latest = await admin.list_offsets(specs)
        assert [latest[TP("data", p)].offset for p in range(3)] == [5, 10, 15]
        assert isinstance(latest[TP("nope", 0)].error, E.UnknownTopicOrPartitionError)
        assert isinstance(latest[TP("data", 7)].error, E.UnknownTopicOrPartitionError)
        by_ts = await admin.list_offsets({TP("data", 1): 10_003, TP("data", 2): OffsetSpec.MAX_TIMESTAMP})
        assert by_ts[TP("data", 1)].offset == 3
        assert by_ts[TP("data", 2)].offset == 14 and by_ts[TP("data", 2)].timestamp == 10_014

        deleted = await admin.delete_records({TP("data", 1): 4, TP("data", 2): -1, TP("nope", 0): 1})
        assert deleted[TP("data", 1)].low_watermark == 4
        assert deleted[TP("data", 2)].low_watermark == 15
        assert isinstance(deleted[TP("nope", 0)].error, E.UnknownTopicOrPartitionError)
        earliest = await admin.list_offsets({TP("data", p): "earliest" for p in range(3)})
        assert [earliest[TP("data", p)].offset for p in range(3)] == [0, 4, 15]


@pytest.mark.kafka_embedded  # move_leader; on Kafka: test_three_brokers_and_one_stops
async def test_list_offsets_follows_moved_leader(cluster: EmbeddedCluster) -> None:
    async with Admin(cluster.bootstrap, **FAST) as admin:
        await admin.create_topics([NewTopic("moving", 1, 1)])
        await _produce(admin.client, TP("moving", 0), 3)
        await admin.list_offsets({TP("moving", 0): "latest"})  # caches the leader
        cluster.move_leader("moving", 0)
        res = await admin.list_offsets({TP("moving", 0): "latest"})
        assert res[TP("moving", 0)].offset == 3


async def test_three_brokers_and_one_stops(cluster3: EmbeddedCluster) -> None:
    """describe_cluster names every broker; when the leader of a partition stops,
    list_offsets follows the new leader, and the stopped broker leaves the cluster's
    description. (One test: a three-node Apache Kafka takes seconds to start.)"""
    async with Admin(cluster3.bootstrap_servers[2], **FAST) as admin:
        desc = await admin.describe_cluster()
        assert [b.id for b in desc.brokers] == [1, 2, 3]
        addresses = {b.id: f"{b.host}:{b.port}" for b in desc.brokers}
        assert set(addresses.values()) == set(cluster3.bootstrap_servers)
        assert desc.controller_id in (1, 2, 3)
        assert desc.cluster_id == cluster_id(cluster3)

        (await admin.create_topics([NewTopic("moving", 1, 3)])).raise_errors()
        await admin.client.wait_for_topic("moving", 10_000)
        await _produce(admin.client, TP("moving", 0), 3)
        await admin.list_offsets({TP("moving", 0): "latest"})  # caches the leader
        (old,) = [p.leader for p in (await admin.describe_topics(["moving"]))["moving"].partitions]
        await cluster3.stop_broker(old)
        res = await admin.list_offsets({TP("moving", 0): "latest"})
        assert res[TP("moving", 0)].offset == 3
        (new,) = [p.leader for p in (await admin.describe_topics(["moving"]))["moving"].partitions]
        assert new not in (old, -1)
        # Kafka drops a stopped broker from the cluster's description once its controller
        # has fenced it, a moment after the stop: wait for it (a deadline, no fixed sleep).
        want = {i: a for i, a in addresses.items() if i != old}
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            after = await admin.describe_cluster()
            seen = {b.id: f"{b.host}:{b.port}" for b in after.brokers}
            if seen == want or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        assert seen == want


async def _join_consumer_group(client: Client, group: str, assignment: dict[str, list[int]]) -> str:
    join = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=30_000,
        rebalance_timeout_ms=30_000,
        protocol_type="consumer",
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"
            )
        ],
    )
    # Retried like a consumer retries: the group's coordinator may still be starting (a
    # Kafka that has just created its offsets topic answers NOT_COORDINATOR for a moment).
    async with asyncio.timeout(15):
        while True:
            node = await client.find_coordinator(group, CoordinatorType.GROUP)
            resp: Any = await client.send(join, node_id=node)
            if resp.error_code == E.MemberIdRequiredError.code:
                join.member_id = resp.member_id
                continue
            if resp.error_code in (E.NotCoordinatorError.code, E.CoordinatorNotAvailableError.code):
                client.invalidate_coordinator(group)
            elif resp.error_code != E.CoordinatorLoadInProgressError.code:
                break
            await asyncio.sleep(0.05)
    assert resp.error_code == 0, resp
    member = resp.member_id
    data = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in assignment.items()
        ]
    )
    raw = b"\x00\x00" + data.encode(0)
    sync = SyncGroupRequest(
        group_id=group,
        generation_id=resp.generation_id,
        member_id=member,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=raw)],
    )
    sresp: Any = await client.send(sync, node_id=node)
    assert sresp.error_code == 0, sresp
    return str(member)


async def test_groups_and_group_offsets(cluster: EmbeddedCluster) -> None:
    async with Admin(cluster.bootstrap, **FAST) as admin:
        await admin.create_topics([NewTopic("events", 2, 1)])
        member = await _join_consumer_group(admin.client, "active", {"events": [0, 1]})

        committed = await admin.alter_group_offsets(
            "idle", {TP("events", 0): 7, TP("events", 1): GroupOffset(9, metadata="m")}
        )
        assert committed.ok
        offsets = await admin.list_group_offsets("idle")
        assert offsets[TP("events", 0)].offset == 7
        assert offsets[TP("events", 1)].offset == 9 and offsets[TP("events", 1)].metadata == "m"
        some = await admin.list_group_offsets("idle", [TP("events", 1)])
        assert list(some) == [TP("events", 1)]

        busy = await admin.alter_group_offsets("active", {TP("events", 0): 1})
        assert isinstance(
            busy[TP("events", 0)].error,
            E.UnknownMemberIdError | E.RebalanceInProgressError | E.IllegalGenerationError,
        )

        listed = await admin.list_groups()
        assert not listed.errors
        by_id = {g.group_id: g for g in listed.groups}
        assert {"active", "idle"} <= set(by_id)
        assert by_id["active"].protocol_type == "consumer" and by_id["active"].state == "Stable"
        empty = {g.group_id for g in (await admin.list_groups(states=["Empty"])).groups}
        assert empty & {"active", "idle"} == {"idle"}  # (a shared Kafka may hold other groups)

        described = await admin.describe_groups(["active", "idle"])
        active = described["active"]
        assert active.error is None and active.state == "Stable" and active.protocol == "range"
        assert [m.member_id for m in active.members] == [member]
        assert active.members[0].assignment == (TP("events", 0), TP("events", 1))
        assert active.coordinator == await admin.client.find_coordinator("active")
        assert described["idle"].state == "Empty" and described["idle"].members == []

        deleted = await admin.delete_groups(["idle", "active", "never-existed"])
        assert deleted["idle"].error is None
        assert isinstance(deleted["active"].error, E.NonEmptyGroupError)
        assert isinstance(deleted["never-existed"].error, E.GroupIdNotFoundError)
        assert "idle" not in {g.group_id for g in (await admin.list_groups()).groups}


@pytest.mark.kafka_embedded  # inject_error, record_requests
async def test_admin_rediscovers_coordinator(cluster: EmbeddedCluster) -> None:
    from aiokafka_lite.wire.messages import FindCoordinatorRequest, OffsetFetchRequest

    async with Admin(cluster.bootstrap, **FAST) as admin:
        await admin.create_topics([NewTopic("t", 1)])
        assert (await admin.alter_group_offsets("g", {TP("t", 0): 3})).ok
        lookups = cluster.record_requests(FindCoordinatorRequest.API_KEY)
        cluster.inject_error(FindCoordinatorRequest.API_KEY, E.CoordinatorNotAvailableError.code, count=1)
        cluster.inject_error(OffsetFetchRequest.API_KEY, E.NotCoordinatorError.code, count=2)
        admin.client.invalidate_coordinator("g")
        offsets = await admin.list_group_offsets("g")
        assert offsets[TP("t", 0)].offset == 3
        # Initial lookup (failed once) plus one rediscovery per NOT_COORDINATOR.
        assert len(lookups.requests) >= 4
        lookups.close()


async def test_shared_client_is_not_closed_by_admin(cluster: EmbeddedCluster) -> None:
    async with Client(cluster.bootstrap) as client:
        async with Admin(client=client) as admin:
            await admin.create_topics([NewTopic("shared", 1)])
        assert not client.closed
        await client.wait_for_topic("shared", 5000)
    with pytest.raises(E.ConfigError):
        Admin()
    with pytest.raises(E.ConfigError):
        Admin(cluster.bootstrap, client=client)


@pytest.mark.kafka_embedded  # inject_error
async def test_admin_timeout_reports_per_item(cluster: EmbeddedCluster) -> None:
    from aiokafka_lite.wire.messages import CreateTopicsRequest

    async with Admin(cluster.bootstrap, **FAST) as admin:
        cluster.inject_error(CreateTopicsRequest.API_KEY, E.NotControllerError.code, count=None)
        loop = asyncio.get_running_loop()
        start = loop.time()
        res = await admin.create_topics([NewTopic("never", 1)], timeout_ms=300)
        assert isinstance(res["never"].error, E.NotControllerError)
        assert loop.time() - start < 5
        cluster.clear_faults()
        assert (await admin.create_topics([NewTopic("never", 1)])).ok
