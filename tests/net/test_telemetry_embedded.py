"""KIP-714 client metrics push against the embedded broker: a producer and a consumer of
ours push their standard metrics to a subscription, and a terminating push on close."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from otlp_reader import decode_metrics

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.broker.api.telemetry import ReceivedPush, received, set_subscription
from aiokafka_lite.broker.cluster import EmbeddedCluster

pytestmark = pytest.mark.kafka_embedded  # reads the pushes the embedded broker kept


async def wait_for(cond: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await anyio.sleep(0.05)


def pushes_of(kc: EmbeddedCluster, instance: Any) -> list[ReceivedPush]:
    return [p for p in received(kc.state) if p.client_instance_id == instance]


def totals(pushes: list[ReceivedPush], name: str) -> float:
    """The sum of a (delta) counter over pushes."""
    total = 0.0
    for p in pushes:
        metric = decode_metrics(p.metrics)[1].get(name)
        if metric is not None:
            assert metric["kind"] == "sum" and metric["temporality"] == 1  # delta, as the broker asks
            total += sum(pt[1] for pt in metric["points"])
    return total


async def test_producer_and_consumer_push_standard_metrics(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=1, topics={"t": 1})
    set_subscription(kc.state, "all-kafka", ["org.apache.kafka."], 200)
    producer = Producer(bootstrap_servers=kc.bootstrap, client_id="telemetry-p")
    async with producer:
        for i in range(7):
            await producer.send("t", b"v%d" % i)
        reporter = producer._telemetry
        assert reporter is not None
        await wait_for(lambda: len(pushes_of(kc, reporter.client_instance_id)) >= 2, "two producer pushes")
    instance = reporter.client_instance_id
    got = pushes_of(kc, instance)
    assert got[-1].terminating and not any(p.terminating for p in got[:-1])
    assert all(p.client_id == "telemetry-p" for p in got)
    resource = decode_metrics(got[-1].metrics)[0]
    assert resource["client_id"] == "telemetry-p"
    names = set().union(*(decode_metrics(p.metrics)[1] for p in got))
    for name in (
        "org.apache.kafka.producer.record.send.total",
        "org.apache.kafka.producer.connection.creation.total",
        "org.apache.kafka.producer.node.request.latency.avg",
        "org.apache.kafka.producer.node.request.latency.max",
    ):
        assert name in names
    assert totals(got, "org.apache.kafka.producer.record.send.total") == 7

    consumer = Consumer(
        bootstrap_servers=kc.bootstrap, client_id="telemetry-c", group_id="g", auto_offset_reset="earliest"
    )
    async with consumer:
        consumer.subscribe(["t"])
        seen = 0
        while seen < 7:
            batch = await consumer.getmany(timeout_ms=1000)
            seen += sum(len(v) for v in batch.values())
        creporter = consumer._telemetry
        assert creporter is not None
        await wait_for(lambda: len(pushes_of(kc, creporter.client_instance_id)) >= 1, "a consumer push")
    cgot = pushes_of(kc, creporter.client_instance_id)
    assert cgot[-1].terminating
    assert creporter.client_instance_id != instance
    resource = decode_metrics(cgot[-1].metrics)[0]
    assert resource["group_id"] == "g"
    assert totals(cgot, "org.apache.kafka.consumer.fetch.manager.records.consumed.total") == 7


async def test_no_push_without_subscription_or_when_disabled(kafka_cluster_factory: Any) -> None:
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=1, topics={"t": 1})
    async with Producer(bootstrap_servers=kc.bootstrap) as producer:
        await producer.send("t", b"x")
        reporter = producer._telemetry
        assert reporter is not None
        await wait_for(lambda: reporter.client_instance_id.int != 0, "a subscription answer")
        assert reporter.machine.subscription is not None
        assert reporter.machine.subscription.requested_metrics == ()
    assert received(kc.state) == []  # nothing requested: no push, not even a terminating one
    set_subscription(kc.state, "all", ["*"], 200)
    async with Producer(bootstrap_servers=kc.bootstrap, enable_metrics_push=False) as producer:
        await producer.send("t", b"x")
        assert producer._telemetry is None
    assert received(kc.state) == []
