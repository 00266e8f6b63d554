"""Rebootstrap (KIP-899, KIP-1102) on Apache Kafka: a 3-node cluster is replaced by a
new 3-node cluster on new ports behind the same bootstrap address.

The stable bootstrap address is a ``BlackholeProxy`` the test re-points, as a load
balancer or a Kubernetes service does when a cluster moves behind it. The brokers
advertise their own ports, so once the clients have metadata they talk to the brokers
directly; only a rebootstrap brings them back to the stable address. A running
producer and a running consumer must find the new cluster by themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.testing.apache import ApacheCluster
from aiokafka_lite.testing.proxy import BlackholeProxy

TOPIC = "moving"
WAIT_S = 180.0


class _Traffic:
    """A producer sending records tagged with the cluster phase and a consumer counting them."""

    def __init__(self, producer: Producer, consumer: Consumer) -> None:
        self.producer = producer
        self.consumer = consumer
        self.acked: dict[str, int] = {}
        self.consumed: dict[str, int] = {}
        self.phase = "old"
        self.changed = asyncio.Event()

    async def produce(self) -> None:
        n = 0
        while True:
            phase = self.phase
            try:
                await self.producer.send(TOPIC, f"{phase}-{n}".encode())
            except KafkaError:  # a record may fail (delivery timeout) while no cluster is there
                await asyncio.sleep(0.1)
                continue
            self.acked[phase] = self.acked.get(phase, 0) + 1
            self.changed.set()
            n += 1

    async def consume(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=500)
            for records in batches.values():
                for rec in records:
                    phase = bytes(rec.value).split(b"-", 1)[0].decode()
                    self.consumed[phase] = self.consumed.get(phase, 0) + 1
            self.changed.set()

    async def until(self, phase: str, count: int) -> None:
        while self.acked.get(phase, 0) < count or self.consumed.get(phase, 0) < count:
            self.changed.clear()
            await self.changed.wait()


@contextlib.asynccontextmanager
async def _running(bootstrap: str) -> AsyncIterator[_Traffic]:
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=5)
    consumer = Consumer(
        bootstrap_servers=bootstrap, group_id="rebootstrap-group", auto_offset_reset="earliest"
    )
    await producer.start()
    await consumer.start()
    consumer.subscribe([TOPIC])
    traffic = _Traffic(producer, consumer)
    tasks = [asyncio.create_task(traffic.produce()), asyncio.create_task(traffic.consume())]
    try:
        yield traffic
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await consumer.close()
        await producer.close()


def _start(version: str | None) -> ApacheCluster:
    cluster = ApacheCluster(3, version=version)
    cluster.start()
    try:
        cluster.create_topic(TOPIC, 3, replication_factor=3)
    except BaseException:
        cluster.close()
        raise
    return cluster


async def test_producer_and_consumer_find_a_replaced_cluster(pytestconfig: pytest.Config) -> None:
    raw = pytestconfig.getoption("--kafka-version", None)
    version = str(raw) if raw else None
    old = await asyncio.to_thread(_start, version)
    new: ApacheCluster | None = None
    try:
        old_ports = {n.port for n in old.nodes}
        with BlackholeProxy(old.nodes[0].host, old.nodes[0].port) as proxy:
            async with _running(proxy.address) as traffic:
                await asyncio.wait_for(traffic.until("old", 100), WAIT_S)
                # Records sent while the old cluster shuts down may still land on it: only
                # those sent once it is gone and the new one is behind the proxy count as new.
                traffic.phase = "between"
                await asyncio.to_thread(old.close)  # every node the clients know is gone
                new = await asyncio.to_thread(_start, version)
                new_ports = {n.port for n in new.nodes}
                assert not new_ports & old_ports  # new nodes on new ports
                proxy.retarget(new.nodes[0].host, new.nodes[0].port)
                traffic.phase = "new"
                await asyncio.wait_for(traffic.until("new", 100), WAIT_S)
                for client in (traffic.producer._client, traffic.consumer._client):
                    assert client.rebootstrap_policy.count >= 1
                    assert {b.port for b in client.cluster.brokers.values()} == new_ports
    finally:
        old.close()
        if new is not None:
            new.close()
