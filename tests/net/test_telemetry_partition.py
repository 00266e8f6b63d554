"""The terminating metrics push keeps the close deadline under a silent partition.

A producer and a consumer with a metrics subscription have pushed at least once; then the
proxy in front of the one broker drops everything without a reset. ``Producer.close(timeout)``
must end within its timeout (the flush and the terminating push share it) and
``Consumer.close()`` within ``default_api_timeout_ms``, not ``request_timeout_ms`` (30 s)
later. The bound is the contract plus ``SLACK_S``, not a performance measurement.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.broker.api.telemetry import received, set_subscription
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.testing.proxy import BlackholeProxy
from aiokafka_lite.testing.threaded import ThreadedCluster

pytestmark = pytest.mark.kafka_embedded  # sets the subscription inside the embedded broker

SLACK_S = 4.0


@pytest.fixture
def proxied() -> Iterator[tuple[ThreadedCluster, BlackholeProxy]]:
    with BlackholeProxy("127.0.0.1", 0) as proxy:
        tc = ThreadedCluster(brokers=1, advertised_ports=[proxy.port])
        tc.start()
        try:
            host, port = tc.call(lambda c: (c.brokers[0].host, c.brokers[0].port))
            proxy.retarget(host, port)
            tc.call(lambda c: c.create_topic("t", 1))
            tc.call(lambda c: set_subscription(c.state, "all", ["org.apache.kafka."], 200))
            yield tc, proxy
        finally:
            proxy.restore()
            tc.close()


async def until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def pushes(tc: ThreadedCluster, reporter: Any) -> int:
    return sum(
        p.client_instance_id == reporter.client_instance_id for p in tc.call(lambda c: received(c.state))
    )


async def test_producer_close_keeps_its_timeout_with_a_record_pending(
    proxied: tuple[ThreadedCluster, BlackholeProxy],
) -> None:
    tc, proxy = proxied
    producer = Producer(bootstrap_servers=proxy.address, linger_ms=0)
    await producer.start()
    await producer.send("t", b"before")
    reporter = producer._telemetry
    assert reporter is not None
    await until(lambda: pushes(tc, reporter) >= 1, "a producer push")
    proxy.blackhole()
    await producer.enqueue("t", b"pending-at-close")
    timeout = 6.0
    started = time.monotonic()
    await producer.close(timeout=timeout)
    took = time.monotonic() - started
    assert took < timeout + SLACK_S, f"close(timeout={timeout}) took {took:.1f} s"


async def test_consumer_close_keeps_default_api_timeout(
    proxied: tuple[ThreadedCluster, BlackholeProxy],
) -> None:
    tc, proxy = proxied
    async with Producer(bootstrap_servers=proxy.address, enable_metrics_push=False) as producer:
        await producer.send("t", b"x")
    api_timeout_s = 4.0
    consumer = Consumer(
        bootstrap_servers=proxy.address,
        auto_offset_reset="earliest",
        default_api_timeout_ms=int(api_timeout_s * 1000),
    )
    await consumer.start()
    consumer.assign([TopicPartition("t", 0)])
    got = await consumer.getmany(timeout_ms=30_000)
    assert sum(len(v) for v in got.values()) == 1
    reporter = consumer._telemetry
    assert reporter is not None
    await until(lambda: pushes(tc, reporter) >= 1, "a consumer push")
    proxy.blackhole()
    started = time.monotonic()
    await consumer.close()
    took = time.monotonic() - started
    assert took < api_timeout_s + SLACK_S, (
        f"close() took {took:.1f} s (default_api_timeout_ms {api_timeout_s} s)"
    )
