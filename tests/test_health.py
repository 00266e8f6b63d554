"""health(): the readiness summary of each client, on a live broker and one that goes away."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from aiokafka_lite import Admin, Consumer, Producer, TopicPartition
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume.share import ShareConsumer
from aiokafka_lite.core.health import BrokerHealth, judge
from aiokafka_lite.integrations.prometheus import render_prometheus

Factory = Callable[..., Awaitable[EmbeddedCluster]]


async def wait_for(predicate: Callable[[], bool], limit_s: float = 60) -> None:
    async with asyncio.timeout(limit_s):
        while not predicate():  # noqa: ASYNC110 - polling client state, no event to wait on
            await asyncio.sleep(0.05)


def test_the_judgement_rules() -> None:
    up = BrokerHealth(1, "h", 1, connected=False, connect_failures=0)  # idle, last connect fine
    down = BrokerHealth(2, "h", 2, connected=False, connect_failures=3)
    assert judge(started=False, closed=False, brokers=(up,)) == ("new", ("not started",))
    assert judge(started=True, closed=True, brokers=(up,)) == ("closed", ("closed",))
    assert judge(started=True, closed=False, brokers=(up, down)) == ("running", ())
    assert judge(started=True, closed=False, brokers=(down,)) == ("running", ("no broker reachable",))
    _, reasons = judge(started=True, closed=False, brokers=(up,), group_state="joining", fatal="Fenced")
    assert reasons == ("fatal error: Fenced", "group member is joining, not stable")


async def test_clients_are_ready_once_started_and_report_their_group(kafka_cluster: EmbeddedCluster) -> None:
    topic = f"health-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, 2)
    producer = Producer(kafka_cluster.bootstrap, client_id="health-p")
    assert producer.health().state == "new" and not producer.health().ready
    async with producer, Admin(kafka_cluster.bootstrap) as admin:
        for i in range(10):
            await producer.send(topic, b"v", partition=i % 2)
        h = producer.health()
        assert h.ready and h.reasons == () and h.client == "producer" and h.client_id == "health-p"
        assert h.brokers_connected >= 1 and all(b.node_id >= 0 for b in h.brokers)
        assert admin.health().ready
        async with Consumer(
            kafka_cluster.bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest"
        ) as consumer:
            n = 0
            async for _ in consumer:
                n += 1
                if n == 4:
                    break
            ch = consumer.health()
            assert ch.ready and ch.group_state == "stable" and ch.group_id == f"g-{topic}"
            assert ch.assigned_partitions == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
            assert ch.lag == sum(consumer.partition_lag().values()) == 6
            d = ch.as_dict()
            assert d["ready"] is True and d["brokers_connected"] >= 1
            assert {"topic": topic, "partition": 0} in d["assigned_partitions"]
        assert consumer.health().state == "closed" and not consumer.health().ready
        # A group_id only for commits, partitions assigned by hand: no membership to wait for.
        async with Consumer(kafka_cluster.bootstrap, group_id=f"g2-{topic}") as manual:
            manual.assign([TopicPartition(topic, 0)])
            await manual.seek_to_beginning()
            assert (await manual.getone()).offset == 0
            mh = manual.health()
            assert mh.ready and mh.group_state == "unjoined" and mh.lag == 4
    assert producer.health().reasons == ("closed",)


async def test_not_ready_while_the_broker_is_away_then_ready_again(kafka_cluster_factory: Factory) -> None:
    cluster = await kafka_cluster_factory(brokers=1)
    topic = f"health-away-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1)
    async with Producer(
        cluster.bootstrap, reconnect_backoff_ms=50, reconnect_backoff_max_ms=500, delivery_timeout_ms=120_000
    ) as producer:
        await producer.send(topic, b"before")
        assert producer.health().ready
        (broker,) = producer.health().brokers
        await cluster.stop_broker(broker.node_id)
        pending = await producer.enqueue(topic, b"during")  # gives the producer a reason to reconnect
        await wait_for(lambda: not producer.health().ready)
        h = producer.health()
        assert h.reasons == ("no broker reachable",) and h.brokers_connected == 0
        assert h.last_error is not None and h.last_error.age_s < 120
        await cluster.start_broker(broker.node_id)
        await wait_for(lambda: producer.health().ready)
        md = await asyncio.wait_for(asyncio.shield(pending), 120)
        assert md.topic == topic
        assert producer.health().brokers_connected == 1


async def test_share_consumer_health_and_metrics(kafka_cluster: EmbeddedCluster) -> None:
    # Share groups: the embedded broker and Apache Kafka 4.4 (they are off in Kafka 4.0).
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"health-share-{suffix}", f"health-share-g-{suffix}"
    kafka_cluster.create_topic(topic, 1)
    async with Admin(kafka_cluster.bootstrap) as admin:
        results = await admin.incremental_alter_configs(
            {ConfigResource.group(group): {"share.auto.offset.reset": "earliest"}}
        )
        assert all(r.error is None for r in results.values())
    async with Producer(kafka_cluster.bootstrap) as producer:
        for i in range(12):
            await producer.send(topic, b"job-%d" % i)
    consumer = ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=topic, client_id="health-s")
    assert consumer.health().reasons == ("not started",)
    async with consumer:
        got = 0
        async with asyncio.timeout(60):
            while got < 12:
                got += len(await consumer.poll(timeout_ms=500))
        await consumer.commit()  # implicit mode: the delivered records are accepted
        h = consumer.health()
        assert h.ready and h.group_state == "stable" and h.group_id == group
        assert h.assigned_partitions == {TopicPartition(topic, 0)}
        m = consumer.metrics()
        assert m["records_consumed"] == 12 and m["consumed_by_topic"] == {topic: 12}
        assert m["acknowledged"] == 12 and m["acknowledge_failed"] == 0 and m["bytes_fetched"] > 0
        text = render_prometheus(consumer)
        assert f'messaging_destination_name="{topic}"' in text
        assert "aiokafka_lite_share_acknowledged_total{" in text
    assert consumer.health().state == "closed"


async def test_consumer_protocol_member_is_ready_when_stable_and_its_rebalance_counted(
    kafka_cluster: EmbeddedCluster,
) -> None:
    topic = f"health-848-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, 2)
    async with Producer(kafka_cluster.bootstrap) as producer:
        for i in range(6):
            await producer.send(topic, b"v", partition=i % 2)
    async with Consumer(
        kafka_cluster.bootstrap,
        topics=topic,
        group_id=f"g-{topic}",
        group_protocol="consumer",
        auto_offset_reset="earliest",
    ) as consumer:
        got = 0
        async for _ in consumer:
            got += 1
            if got == 6:
                break
        await wait_for(lambda: consumer.health().ready)  # acknowledged: stable
        h = consumer.health()
        assert h.group_state == "stable" and h.assigned_partitions == {
            TopicPartition(topic, 0),
            TopicPartition(topic, 1),
        }
        group = consumer.metrics()["group"]
        assert group["protocol"] == "consumer" and group["rebalances"] == 1 and not group["rebalancing"]
        assert group["rebalance_seconds_total"] == group["last_rebalance_seconds"] > 0
