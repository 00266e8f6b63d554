"""Integration tests against Kafka with aiokafka_lite's pytest plugin.

    pytest examples/test_with_kafka.py                          # embedded broker: no Docker, no JVM
    pytest examples/test_with_kafka.py --kafka=apache           # Apache Kafka from Maven Central (Java 17+)
    pytest examples/test_with_kafka.py --kafka=container        # a real Kafka in Docker (testcontainers)
    pytest examples/test_with_kafka.py --kafka-bootstrap=HOST:PORT  # a cluster you already run

Installing aiokafka_lite registers the plugin (a ``pytest11`` entry point): nothing to
add to ``conftest.py``. Fixtures:

* ``kafka_bootstrap``: bootstrap servers of a cluster for the test; works in every mode,
  so the same test runs against the embedded broker in CI and against real Kafka.
* ``kafka_cluster``: the cluster with a control API. Embedded: the ``EmbeddedCluster``
  itself, with fault injection (errors, latency, dropped connections, leader moves).
  ``--kafka=apache``: a real cluster with the part of that API Kafka can honour (topics,
  broker stop/kill/restart).
* ``kafka_cluster_factory``: ``await kafka_cluster_factory(brokers=3, ...)`` for other shapes.

Mark the tests that need the embedded broker's fault injection
``@pytest.mark.kafka_embedded``: they are left out against Apache Kafka and skipped
against a container or an external cluster.

The async tests need pytest-asyncio (``asyncio_mode = "auto"``, or the marker below).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiokafka_lite import Consumer, Producer, TopicPartition
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import NotLeaderOrFollowerError
from aiokafka_lite.wire.messages import ProduceRequest

pytestmark = pytest.mark.asyncio


# --- the application code under test -----------------------------------------------------------


async def publish_order(producer: Producer, topic: str, order: dict[str, object]) -> int:
    """Publishes an order event keyed by customer; returns the partition it went to."""
    md = await producer.send(
        topic, json.dumps(order).encode(), key=str(order["customer"]).encode(), headers=[("type", b"order")]
    )
    return md.partition


def unique(name: str) -> str:
    """Unique topic names keep tests independent when they share a cluster (container mode)."""
    return f"{name}-{uuid.uuid4().hex[:6]}"


# --- tests that run against any Kafka -----------------------------------------------------------


async def test_published_orders_can_be_read_back(kafka_bootstrap: str) -> None:
    topic = unique("orders")
    async with Producer(kafka_bootstrap) as producer:
        partitions = {await publish_order(producer, topic, {"id": i, "customer": "c-7"}) for i in range(5)}
    assert len(partitions) == 1  # one customer, one partition: the events stay in order

    async with Consumer(kafka_bootstrap, topics=topic, auto_offset_reset="earliest") as consumer:
        events = [json.loads((await consumer.getone()).value) for _ in range(5)]
    assert [e["id"] for e in events] == [0, 1, 2, 3, 4]


async def test_a_consumer_group_resumes_after_its_commit(kafka_bootstrap: str) -> None:
    topic = unique("jobs")
    group = f"{topic}-workers"
    async with Producer(kafka_bootstrap) as producer:
        await producer.send_batch(topic, [b"job-%d" % i for i in range(10)], partition=0)

    options: dict[str, Any] = {
        "topics": topic,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
    }
    async with Consumer(kafka_bootstrap, **options) as first:
        done = [await first.getone() for _ in range(4)]
        await first.commit()
    async with Consumer(kafka_bootstrap, **options) as second:
        nxt = await second.getone()
    assert [r.value for r in done] == [b"job-0", b"job-1", b"job-2", b"job-3"]
    assert nxt.value == b"job-4"


# --- tests that need the embedded broker's fault injection ---------------------------------------


@pytest.mark.kafka_embedded
async def test_producer_retries_through_leader_errors(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("payments", partitions=1)
    # The next two produce requests fail as if leadership had just moved.
    kafka_cluster.inject_error(ProduceRequest, NotLeaderOrFollowerError.code, count=2)
    async with Producer(kafka_cluster.bootstrap) as producer:
        md = await producer.send("payments", b"42.00")
    assert md.offset == 0  # delivered once, no duplicate from the retries
    assert kafka_cluster.high_watermark("payments", 0) == 1


@pytest.mark.kafka_embedded
async def test_consumer_follows_a_leader_move(
    kafka_cluster_factory: Callable[..., Awaitable[EmbeddedCluster]],
) -> None:
    cluster = await kafka_cluster_factory(brokers=3, topics={"events": 1})
    tp = TopicPartition("events", 0)
    async with (
        Producer(cluster.bootstrap) as producer,
        Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer,
    ):
        consumer.assign([tp])
        await producer.send("events", b"before")
        assert (await consumer.getone()).value == b"before"
        cluster.move_leader("events", 0)  # another broker leads now, with a new epoch
        await producer.send("events", b"after")
        assert (await consumer.getone()).value == b"after"
