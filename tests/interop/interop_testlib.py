"""The clusters of the interop tests: embedded clusters by default, Apache Kafka with
--kafka=apache.

The tests drive blocking third-party clients, so they take a cluster with
``ThreadedCluster``'s surface (``bootstrap``, ``call(fn)``, ``run(fn)``). Embedded: a
fresh ``ThreadedCluster`` per test. Apache Kafka: one-broker shapes use the session's
node, three-broker shapes one three-node cluster kept for the session; the test's topics
and groups are deleted after each test. (Starting three Kafka processes per test would
cost more than the tests themselves; none of these tests stops a broker there.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from aiokafka_lite.net import Client
from aiokafka_lite.testing.apache import ThreadedApache
from aiokafka_lite.wire.messages import MetadataRequest, MetadataResponse

if TYPE_CHECKING:
    from aiokafka_lite.testing.apache import ApacheCluster

ClusterFactory = Callable[..., Any]


@pytest.fixture(scope="session")
def apache_three_nodes(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    """A three-node Apache Kafka for the session, started on first use."""
    from aiokafka_lite.testing.apache import ApacheCluster

    cluster = ApacheCluster(3, version=str(pytestconfig.getoption("--kafka-version")))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def interop_cluster(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_threaded_cluster_factory: ClusterFactory
) -> ClusterFactory:
    """``interop_cluster(brokers=1, topics={...})``: a started cluster of that shape."""

    def make(brokers: int = 1, topics: dict[str, int] | None = None) -> Any:
        if kafka_mode != "apache":
            return kafka_threaded_cluster_factory(brokers=brokers, topics=topics or {})
        if brokers == 1:
            apache: ApacheCluster = request.getfixturevalue("apache_kafka")  # reset after the test
        elif brokers == 3:
            apache = request.getfixturevalue("apache_three_nodes")
            request.addfinalizer(apache.reset)
        else:
            raise ValueError(f"no shared Apache Kafka cluster of {brokers} brokers")
        for name, partitions in (topics or {}).items():
            apache.create_topic(name, partitions)  # returns once every broker serves it
        return ThreadedApache(apache)

    return make


def wait_until_every_broker_serves(bootstrap: str, topic: str, partitions: int, within_s: float = 30) -> None:
    """Waits until each broker's metadata has ``topic`` with a leader for every partition.

    A client's create-topic call returns once the controller has the topic; the brokers
    of a real Kafka cluster learn of it a moment later, and a client asking a broker that
    has not yet would see no such topic (the embedded brokers share one state)."""

    async def wait() -> None:
        async with Client(bootstrap) as client, asyncio.timeout(within_s):
            for node in sorted(client.cluster.brokers):
                while True:
                    req = MetadataRequest(
                        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                        allow_auto_topic_creation=False,
                    )
                    resp = await client.send(req, node_id=node)
                    assert isinstance(resp, MetadataResponse)
                    (t,) = resp.topics
                    if (
                        not t.error_code
                        and len(t.partitions) == partitions
                        and all(p.leader_id >= 0 for p in t.partitions)
                    ):
                        break
                    await asyncio.sleep(0.05)

    asyncio.run(wait())
