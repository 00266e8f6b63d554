"""Helpers for the transaction tests: clusters for either broker (``--kafka``), reading
topics back at an isolation level."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import pytest

from aiokafka_lite import Admin, Record, TopicPartition
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.broker.state import BrokerConfig
from aiokafka_lite.core.errors import UnstableOffsetCommitError
from aiokafka_lite.testing.apache import ThreadedApache

ClusterFactory = Callable[..., Awaitable[EmbeddedCluster]]

# Apache Kafka's group.min.session.timeout.ms (default 6 s): a shorter session is refused
# with INVALID_SESSION_TIMEOUT. The embedded clusters of these tests lower it (see
# broker_config), so that a dead member expires within 1.5 s there.
APACHE_MIN_SESSION_MS = 6000
EMBEDDED_SESSION_MS = 1500

# Broker settings of the multi-broker Apache Kafka clusters: every partition on every
# broker, so that one broker can be stopped or killed without losing a partition.
APACHE_REPLICATED = {"default.replication.factor": "3", "min.insync.replicas": "2"}


def broker_config(**extra: str) -> BrokerConfig:
    # Small group timers so that dead members expire within a test.
    return BrokerConfig(extra={"group.min.session.timeout.ms": "100", **extra})


def short_session_ms(cluster: object) -> int:
    """The shortest consumer session timeout the tests use on this cluster."""
    return EMBEDDED_SESSION_MS if isinstance(cluster, EmbeddedCluster) else APACHE_MIN_SESSION_MS


async def txn_cluster(
    request: pytest.FixtureRequest, brokers: int = 1, *, replicated: bool = False
) -> EmbeddedCluster:
    """The cluster of a transaction test (for a test or fixture that uses ``kafka_mode``
    and ``kafka_cluster_factory``).

    Embedded: a fresh cluster of ``brokers`` brokers accepting short group sessions.
    Apache Kafka (``--kafka=apache``): the session's node, unless the test takes a broker
    down (``replicated``): then a fresh three-node cluster (~10 s) whose partitions are
    replicated on every node.
    """
    factory: ClusterFactory = request.getfixturevalue("kafka_cluster_factory")
    if request.getfixturevalue("kafka_mode") != "apache":
        cluster: EmbeddedCluster = await factory(brokers=3 if replicated else brokers, config=broker_config())
        return cluster
    if replicated:
        fresh: EmbeddedCluster = await factory(brokers=3, configs=APACHE_REPLICATED)
        return fresh
    # (kafka_cluster is the same Kafka here, but an async fixture cannot be fetched from a
    # running event loop.)
    shared: EmbeddedCluster = request.getfixturevalue("apache_kafka")
    return shared


def threaded_cluster(request: pytest.FixtureRequest, topics: dict[str, int], *, brokers: int = 1) -> Any:
    """A cluster for tests with blocking clients (``.bootstrap``, ``.call(fn)``), for a test
    that uses ``kafka_mode`` and ``kafka_threaded_cluster_factory``: embedded, a fresh
    ThreadedCluster of ``brokers`` brokers; Apache Kafka, the session's node."""
    if request.getfixturevalue("kafka_mode") == "apache":
        apache = request.getfixturevalue("apache_kafka")
        for name, partitions in topics.items():
            apache.create_topic(name, partitions)
        return ThreadedApache(apache)
    return request.getfixturevalue("kafka_threaded_cluster_factory")(brokers=brokers, topics=topics)


async def crash_broker(cluster: EmbeddedCluster, node_id: int) -> None:
    """Takes a broker down without a controlled shutdown: SIGKILL on Apache Kafka (its
    partitions and coordinators move once the controller notices); the embedded broker's
    ``stop_broker`` already drops its connections like a crash."""
    if isinstance(cluster, EmbeddedCluster):
        await cluster.stop_broker(node_id)
    else:
        await cluster.kill_broker(node_id)  # type: ignore[attr-defined]


async def stable_group_offsets(
    admin: Admin, group_id: str, *, limit_s: float = 15.0, present: Collection[TopicPartition] = ()
) -> dict[TopicPartition, int]:
    """A group's committed offsets once no transaction committing offsets for it is pending
    (OffsetFetch with require_stable, KIP-447). Kafka writes a transaction's markers after
    it has answered EndTxn, and answers UNSTABLE_OFFSET_COMMIT for such a partition until
    then: a transaction's offsets are not readable the moment its commit returns.

    ``present``: partitions a committed transaction wrote offsets for. Until its markers
    are written, Kafka answers a group that has no other offsets with an empty list (not
    UNSTABLE_OFFSET_COMMIT), so an answer without them is waited past."""
    async with asyncio.timeout(limit_s):
        while True:
            try:
                res = await admin.list_group_offsets(group_id, require_stable=True)
            except UnstableOffsetCommitError:  # (for the whole group)
                pass
            else:
                if not any(isinstance(o.error, UnstableOffsetCommitError) for o in res.values()) and all(
                    tp in res for tp in present
                ):
                    res.raise_errors()
                    return {tp: o.offset for tp, o in res.items()}
            await asyncio.sleep(0.05)


def values(records: list[Record]) -> list[bytes]:
    return sorted(r.value for r in records)
