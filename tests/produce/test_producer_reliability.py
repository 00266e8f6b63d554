"""Reliability under faults: 100,000 keyed records while leadership moves twice, a
connection drops mid-request (executed, response lost) and NOT_ENOUGH_REPLICAS is
injected three times. With idempotence (the default) a consumer then finds every record
exactly once, in send order per partition. With idempotence off the same faults leave
duplicates: the records of the request whose response was lost are written twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest
from producer_testlib import read_topic

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.produce import Producer, key_partition
from aiokafka_lite.wire.messages import ProduceRequest

# Faults (moved leaders, lost responses, injected errors) need the embedded broker.
pytestmark = pytest.mark.kafka_embedded

TOPIC = "reliable"
PARTITIONS = 6
RECORDS = 100_000
KEYS = 1000


async def _produce_with_faults(cluster: EmbeddedCluster, **options: object) -> tuple[list[bytes], Producer]:
    """Enqueue RECORDS keyed records, injecting the faults along the way; returns the
    values in send order."""
    faults: dict[int, Callable[[], object]] = {
        15_000: lambda: [cluster.move_leader(TOPIC, p) for p in range(PARTITIONS)],
        35_000: lambda: cluster.drop_connection(ProduceRequest, count=1, when="after"),
        50_000: lambda: cluster.inject_error(ProduceRequest, E.NotEnoughReplicasError.code, count=3),
        70_000: lambda: [cluster.move_leader(TOPIC, p) for p in range(PARTITIONS)],
    }
    sent: list[bytes] = []
    producer = Producer(
        cluster.bootstrap, linger_ms=2, buffer_memory=512 * 1024, retry_backoff_ms=20, **options
    )
    await producer.start()
    futures = []
    for i in range(RECORDS):
        if i in faults:
            faults[i]()
        value = b"%06d" % i
        sent.append(value)
        futures.append(await producer.enqueue(TOPIC, value, key=b"key-%d" % (i % KEYS)))
        if i % 500 == 0:
            await asyncio.sleep(0)  # let responses (and faults) interleave with sending
    await producer.flush()
    failed = [f.exception() for f in futures if f.exception() is not None]
    assert failed == [], failed[:3]
    return sent, producer


def _expected_per_partition(sent: list[bytes]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i, value in enumerate(sent):
        out[key_partition(b"key-%d" % (i % KEYS), PARTITIONS)].append(value)
    return out


async def _cluster(factory: Callable[..., Awaitable[EmbeddedCluster]]) -> EmbeddedCluster:
    cluster = await factory(brokers=3)
    cluster.create_topic(TOPIC, PARTITIONS, replication_factor=3)
    return cluster


async def test_idempotent_producer_loses_nothing_duplicates_nothing_keeps_order(
    kafka_cluster_factory: Callable[..., Awaitable[EmbeddedCluster]],
) -> None:
    cluster = await _cluster(kafka_cluster_factory)
    with cluster.record_requests(ProduceRequest) as rec:
        sent, producer = await _produce_with_faults(cluster)
        metrics = producer.metrics()
        await producer.close()
        produce_requests = len(rec.requests)
    assert metrics["producer_id"] >= 0 and metrics["batches_retried"] > 0
    assert not cluster.faults.active  # every injected error and drop was used up
    assert produce_requests > 50
    got = await read_topic(cluster.bootstrap, TOPIC, PARTITIONS)
    expected = _expected_per_partition(sent)
    for p in range(PARTITIONS):
        values = [r.value for r in got[p]]
        assert len(values) == len(expected[p]), f"partition {p}: {len(values)} read, {len(expected[p])} sent"
        assert values == expected[p], f"partition {p}: order or content differs"
        assert [r.offset for r in got[p]] == list(range(len(values)))
    assert sum(len(v) for v in got.values()) == RECORDS


async def test_without_idempotence_the_same_faults_duplicate_records(
    kafka_cluster_factory: Callable[..., Awaitable[EmbeddedCluster]],
) -> None:
    """What the default protects against: the request whose response was lost is
    retried and written a second time (and nothing is lost)."""
    cluster = await _cluster(kafka_cluster_factory)
    sent, producer = await _produce_with_faults(cluster, enable_idempotence=False)
    assert producer.metrics()["producer_id"] == -1
    await producer.close()
    assert not cluster.faults.active
    got = await read_topic(cluster.bootstrap, TOPIC, PARTITIONS)
    counts = Counter(r.value for records in got.values() for r in records)
    assert set(counts) == set(sent)  # nothing lost
    duplicated = sorted(v for v, c in counts.items() if c > 1)
    assert duplicated, "expected the retried, already-written request to be duplicated"
    assert max(counts.values()) == 2
    # The duplicates are whole batches: runs of consecutive records of one partition.
    per_partition_dups = {p: [r.value for r in records if counts[r.value] > 1] for p, records in got.items()}
    assert sum(len(v) for v in per_partition_dups.values()) == 2 * len(duplicated)
    total = sum(counts.values())
    assert total == RECORDS + len(duplicated)
    print(f"idempotence off: {len(duplicated)} of {RECORDS} records written twice")
