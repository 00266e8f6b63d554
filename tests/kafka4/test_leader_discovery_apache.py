"""Leader discovery (KIP-951) against a 3-node Apache Kafka cluster.

The partition's leadership is moved while every node stays up (a preferred-leader
election after the preferred replica came back), so the client's cached leader is
alive, knows it is no longer the leader, and says who is: NOT_LEADER_OR_FOLLOWER with
``CurrentLeader`` and ``NodeEndpoints``. From the election on, the producer's and the
consumer's metadata refreshes are held back (they wait until the test releases them),
so only the responses' hints can send the batch and the fetches to the new leader; the
client's request hooks show that no metadata answer was read before the batch went
there, and the fetcher counts the partitions a hint moved. A SIGKILLed leader answers nothing, so
the kill scenario is measured by bench/leader_failover.py instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiokafka_lite.admin import Admin
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.produce import Producer
from aiokafka_lite.testing.apache import ApacheCluster
from aiokafka_lite.wire.messages import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    MetadataRequest,
    MetadataResponse,
)

_PRODUCE = 0
_METADATA = 3
TOPIC = "kip951"
TP = TopicPartition(TOPIC, 0)


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    version = pytestconfig.getoption("--kafka-version", None)
    configs = {"auto.leader.rebalance.enable": "false", "min.insync.replicas": "2"}
    with ApacheCluster(3, version=str(version) if version else None, configs=configs) as c:
        yield c


@dataclass
class _Log:
    events: list[tuple[str, int, int]] = field(default_factory=list)

    def on_request_written(self, node_id: int, api_key: int, v: int, n: int, error: object) -> None:
        if error is None:
            self.events.append(("sent", node_id, api_key))

    def on_response_read(self, node_id: int, api_key: int, v: int, n: int, s: float, error: object) -> None:
        self.events.append(("read", node_id, api_key))


async def _partition(admin: Admin) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    (p,) = (await admin.describe_topics([TOPIC])).raise_errors()[TOPIC].partitions
    return p.leader, p.leader_epoch, p.replicas, p.isr


async def _wait_for(admin: Admin, ok: object, what: str, limit_s: float = 120) -> None:
    async with asyncio.timeout(limit_s):
        while True:
            leader, _, replicas, isr = await _partition(admin)
            if ok(leader, replicas, isr):  # type: ignore[operator]
                return
            await asyncio.sleep(0.2)


async def _elect_preferred(bootstrap: str) -> None:
    async with Client(bootstrap) as client:
        req = ElectLeadersRequest(
            election_type=0,  # PREFERRED
            topic_partitions=[ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0])],
            timeout_ms=30_000,
        )
        resp = await client.send(req)
        assert isinstance(resp, ElectLeadersResponse)
        assert resp.error_code == 0, resp
        for t in resp.replica_election_results:
            for p in t.partition_result:
                assert p.error_code == 0, p


async def _every_broker_names(bootstrap: str, leader: int, limit_s: float = 60) -> None:
    """Wait until each broker's own metadata names ``leader`` for the partition.

    The controller's answer (what ``Admin.describe_topics`` reads) comes first; the stand-in
    learns it was demoted a moment later. Until it has, it would take the batch as leader
    and wait for a follower that no longer fetches from it (seen on a loaded CI machine)."""
    async with Client(bootstrap) as client, asyncio.timeout(limit_s):
        for node in sorted(client.cluster.brokers):
            while True:
                req = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                    allow_auto_topic_creation=False,
                )
                resp = await client.send(req, node_id=node)
                assert isinstance(resp, MetadataResponse)
                (t,) = resp.topics
                if not t.error_code and [p.leader_id for p in t.partitions] == [leader]:
                    break
                await asyncio.sleep(0.1)


def _hold_metadata(client: Client, release: asyncio.Event) -> None:
    """Metadata refreshes of ``client`` (background and on demand) wait for ``release``."""
    refresh = client._refresh

    async def held(*args: Any, **kwargs: Any) -> Any:
        await release.wait()
        return await refresh(*args, **kwargs)

    client._refresh = held  # type: ignore[method-assign]


async def test_batches_and_fetches_follow_the_leader_named_in_the_response(cluster: ApacheCluster) -> None:
    cluster.create_topic(TOPIC, 1, replication_factor=3)
    async with Admin(cluster.bootstrap) as admin:
        preferred, _, replicas, _ = await _partition(admin)
        assert preferred == replicas[0]
        # Move leadership off the preferred replica and bring it back as a follower.
        await cluster.stop_broker(preferred)
        await _wait_for(admin, lambda leader, r, isr: leader not in (preferred, -1), "new leader")
        await cluster.start_broker(preferred)
        await _wait_for(admin, lambda leader, r, isr: preferred in isr and len(isr) == 3, "ISR")
        stand_in, _, _, _ = await _partition(admin)
        async with (
            Producer(cluster.bootstrap, acks="all", metadata_max_age_ms=600_000) as producer,
            Consumer(
                cluster.bootstrap,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=100,
                metadata_max_age_ms=600_000,
            ) as consumer,
        ):
            consumer.assign([TP])
            first = await producer.send(TOPIC, b"before")
            assert producer.client.cluster.leader_for(TP) == stand_in
            async with asyncio.timeout(60):
                batch = await consumer.getmany(timeout_ms=30_000)
                while not batch:
                    batch = await consumer.getmany(timeout_ms=1_000)
            assert [r.value for rs in batch.values() for r in rs] == [b"before"]
            old_epoch = producer.client.cluster.leader_epoch(TP)
            release = asyncio.Event()
            _hold_metadata(producer.client, release)
            _hold_metadata(consumer.client, release)
            # Every node stays up: the stand-in leader will answer, naming the new one.
            await _elect_preferred(cluster.bootstrap)
            await _wait_for(admin, lambda leader, r, isr: leader == preferred, "preferred leader")
            await _every_broker_names(cluster.bootstrap, preferred)
            log = _Log()
            producer.client.add_hooks(log)
            try:
                async with asyncio.timeout(60):
                    second = await producer.send(TOPIC, b"after")
                    got: list[bytes | None] = []
                    while not got:
                        batch = await consumer.getmany(timeout_ms=1_000)
                        got = [r.value for rs in batch.values() for r in rs]
            finally:
                release.set()
            assert got == [b"after"]
            assert (first.offset, second.offset) == (0, 1)
            assert producer._sender.batches_moved_by_leader_hint == 1
            assert producer.client.cluster.leader_for(TP) == preferred
            assert producer.client.cluster.leader_epoch(TP) > old_epoch
            refused = max(i for i, e in enumerate(log.events) if e == ("read", stand_in, _PRODUCE))
            after = log.events[refused + 1 :]
            to_new = after.index(("sent", preferred, _PRODUCE))
            assert not any(kind == "read" and key == _METADATA for kind, _, key in after[:to_new]), log.events
            fetcher = consumer.fetcher
            assert fetcher is not None and fetcher.partitions_moved_by_leader_hint == 1
            assert consumer.client.cluster.leader_for(TP) == preferred
