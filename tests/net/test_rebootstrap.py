"""Rebootstrap (KIP-899, KIP-1102) on embedded clusters.

The bootstrap address is a ``BlackholeProxy``: one stable host:port whose destination
the test re-points, as a load balancer or a Kubernetes service name does when a cluster
is moved behind it. The brokers advertise their own addresses, so after the first
metadata the clients talk to the brokers directly and only a rebootstrap brings them
back to the stable address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.core.errors import ConfigError, KafkaError
from aiokafka_lite.net.client import Client
from aiokafka_lite.net.connection import BrokerConnection
from aiokafka_lite.net.rebootstrap import REBOOTSTRAP_REQUIRED
from aiokafka_lite.testing.proxy import BlackholeProxy
from aiokafka_lite.testing.threaded import ThreadedCluster
from aiokafka_lite.wire.messages import MetadataResponse

TOPIC = "moving"
SCENARIO_TIMEOUT_S = 120.0


@contextlib.contextmanager
def _cluster() -> Iterator[ThreadedCluster]:
    tc = ThreadedCluster(brokers=3)
    tc.start()
    try:
        tc.call(lambda c: c.create_topic(TOPIC, 3))
        yield tc
    finally:
        tc.close()


def _first_broker(tc: ThreadedCluster) -> tuple[str, int]:
    return tc.call(lambda c: (c.brokers[0].host, c.brokers[0].port))


def _ports(tc: ThreadedCluster) -> set[int]:
    return set(tc.call(lambda c: [b.port for b in c.brokers]))


class _Traffic:
    """A producer sending numbered records and a consumer counting them, both running."""

    def __init__(self, producer: Producer, consumer: Consumer) -> None:
        self.producer = producer
        self.consumer = consumer
        self.acked: dict[str, int] = {}
        self.consumed: dict[str, int] = {}
        self.phase = "old"
        self.errors: list[BaseException] = []
        self.changed = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def produce(self) -> None:
        n = 0
        while True:
            phase = self.phase
            try:
                await self.producer.send(TOPIC, f"{phase}-{n}".encode())
            except KafkaError as exc:  # a record may fail while the cluster is gone
                self.errors.append(exc)
                await asyncio.sleep(0.05)
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

    async def stop(self) -> None:
        """Stop the traffic and close both clients (idempotent)."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.consumer.close()
        await self.producer.close()

    async def until(self, phase: str, count: int) -> None:
        while self.acked.get(phase, 0) < count or self.consumed.get(phase, 0) < count:
            self.changed.clear()
            await self.changed.wait()


@contextlib.asynccontextmanager
async def _running(bootstrap: str, **options: object) -> AsyncIterator[_Traffic]:
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=5, **options)  # type: ignore[arg-type]
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        group_id="rebootstrap-group",
        auto_offset_reset="earliest",
        **options,  # type: ignore[arg-type]
    )
    await producer.start()
    await consumer.start()
    consumer.subscribe([TOPIC])
    traffic = _Traffic(producer, consumer)
    traffic.tasks = [asyncio.create_task(traffic.produce()), asyncio.create_task(traffic.consume())]
    try:
        yield traffic
    finally:
        await traffic.stop()


async def test_clients_follow_a_cluster_replaced_behind_the_bootstrap_address() -> None:
    with _cluster() as old, BlackholeProxy(*_first_broker(old)) as proxy:
        async with _running(proxy.address) as traffic:
            await asyncio.wait_for(traffic.until("old", 50), SCENARIO_TIMEOUT_S)
            with _cluster() as new:
                assert not _ports(new) & _ports(old)  # new nodes on new ports
                proxy.retarget(*_first_broker(new))
                traffic.phase = "new"
                await asyncio.to_thread(old.close)  # every broker the clients know is gone
                await asyncio.wait_for(traffic.until("new", 50), SCENARIO_TIMEOUT_S)
                for client in (traffic.producer._client, traffic.consumer._client):
                    assert client.rebootstrap_policy.count >= 1
                    assert {b.port for b in client.cluster.brokers.values()} == _ports(new)
                await traffic.stop()  # while the new cluster is up: close() commits and leaves


def _metadata_answers(monkeypatch: pytest.MonkeyPatch, rebootstrap_required: int) -> list[tuple[int, int]]:
    """Record (node id, error code) of every Metadata answer; the first
    ``rebootstrap_required`` answers from a broker (not a bootstrap server) get the
    top-level error REBOOTSTRAP_REQUIRED, a fault the embedded broker cannot be told
    to produce."""
    answers: list[tuple[int, int]] = []
    send = BrokerConnection.send

    async def patched(self: BrokerConnection, request: Any, *args: Any, **kw: Any) -> Any:
        resp = await send(self, request, *args, **kw)
        if isinstance(resp, MetadataResponse):
            flagged = sum(1 for _, code in answers if code == REBOOTSTRAP_REQUIRED)
            if self.node_id >= 0 and flagged < rebootstrap_required:
                resp.error_code = REBOOTSTRAP_REQUIRED
            answers.append((self.node_id, resp.error_code))
        return resp

    monkeypatch.setattr(BrokerConnection, "send", patched)
    return answers


async def test_rebootstrap_required_sends_the_client_back_to_the_bootstrap_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _cluster() as tc:
        async with Client(tc.bootstrap, metadata_recovery_rebootstrap_trigger_ms=3_600_000) as client:
            known = set(client.cluster.brokers)
            answers = _metadata_answers(monkeypatch, rebootstrap_required=1)
            await client.refresh_metadata(timeout_ms=60000)
            assert answers[0][0] >= 0 and answers[0][1] == REBOOTSTRAP_REQUIRED
            # the next answer came from a bootstrap server (negative id), fetched anew
            assert answers[1][0] < 0 and answers[1][1] == 0
            assert client.rebootstrap_policy.count == 1
            assert set(client.cluster.brokers) == known


async def test_canonical_bootstrap_names_are_resolved_at_rebootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """client_dns_lookup='resolve_canonical_bootstrap_servers_only': a rebootstrap replaces
    the bootstrap address by the canonical name of what it resolves to, and goes on there."""
    with _cluster() as tc:
        host, port = _first_broker(tc)
        try:
            expected = socket.gethostbyaddr(host)[0]
        except OSError:
            expected = host  # no reverse name: Java's getCanonicalHostName gives the address
        opts = {"client_dns_lookup": "resolve_canonical_bootstrap_servers_only"}
        async with Client(f"{host}:{port}", **opts) as client:
            answers = _metadata_answers(monkeypatch, rebootstrap_required=1)
            await client.refresh_metadata(timeout_ms=60000)
            assert client.rebootstrap_policy.count == 1
            assert client.broker_address(-1) == (expected, port)
            assert answers[-1][0] == -1 and answers[-1][1] == 0


async def test_with_strategy_none_rebootstrap_required_keeps_the_known_brokers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """'none' (Java's pre-4.0 behaviour): the answer counts as a failed attempt and the
    refresh goes on with another known broker, never back to the bootstrap servers."""
    with _cluster() as tc:
        async with Client(tc.bootstrap, metadata_recovery_strategy="none") as client:
            known = set(client.cluster.brokers)
            answers = _metadata_answers(monkeypatch, rebootstrap_required=1)
            await client.refresh_metadata(timeout_ms=60000)
            assert answers[0][1] == REBOOTSTRAP_REQUIRED
            assert answers[1][0] in known and answers[1][0] != answers[0][0] and answers[1][1] == 0
            assert client.rebootstrap_policy.count == 0
            assert set(client.cluster.brokers) == known


async def test_with_strategy_none_all_brokers_gone_never_rebootstraps() -> None:
    with _cluster() as old, BlackholeProxy(*_first_broker(old)) as proxy:
        async with Client(proxy.address, metadata_recovery_strategy="none") as client:
            old_ports = _ports(old)
            with _cluster() as new:
                proxy.retarget(*_first_broker(new))
                await asyncio.to_thread(old.close)
                with pytest.raises(KafkaError):
                    await client.refresh_metadata(timeout_ms=3000)
                assert client.rebootstrap_policy.count == 0
                assert {b.port for b in client.cluster.brokers.values()} == old_ports


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"metadata_recovery_strategy": "sometimes"}, "metadata_recovery_strategy"),
        ({"metadata_recovery_rebootstrap_trigger_ms": -1}, "metadata_recovery_rebootstrap_trigger_ms"),
        ({"client_dns_lookup": "default"}, "client_dns_lookup"),
    ],
)
@pytest.mark.parametrize("cls", [Producer, Consumer, Client])
def test_bad_recovery_options_are_config_errors(cls: Any, options: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        cls(bootstrap_servers="localhost:9092", **options)
