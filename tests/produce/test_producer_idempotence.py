"""Idempotence against the embedded cluster: sequence recovery (KIP-360), dedup of
retries whose response was lost, and gap handling after a failed batch."""

from __future__ import annotations

import asyncio

import pytest
from producer_testlib import read_partition

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client
from aiokafka_lite.produce import Producer
from aiokafka_lite.wire.messages import InitProducerIdRequest, ProduceRequest
from aiokafka_lite.wire.records import decode_batches

# Every test here injects faults or inspects requests (embedded broker).
pytestmark = pytest.mark.kafka_embedded


async def _values(cluster: EmbeddedCluster, topic: str) -> list[bytes | None]:
    async with Client(cluster.bootstrap) as client:
        return [r.value for r in await read_partition(client, topic, 0)]


async def test_out_of_order_on_next_batch_bumps_epoch_and_recovers(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("oos", 1)
    with kafka_cluster.record_requests(ProduceRequest) as rec:
        async with Producer(kafka_cluster.bootstrap, linger_ms=0, retry_backoff_ms=10) as producer:
            for i in range(3):
                await producer.send("oos", b"a%d" % i)
            kafka_cluster.inject_error(ProduceRequest, E.OutOfOrderSequenceNumberError.code, count=1)
            md = await producer.send("oos", b"b")
            assert md.offset == 3
            assert (await producer.send("oos", b"c")).offset == 4
            assert producer.metrics()["epoch_bumps"] == 1 and producer.metrics()["producer_epoch"] == 1
        headers = []
        for obs in rec.requests:
            req = obs.request
            assert isinstance(req, ProduceRequest)
            for td in req.topic_data:
                for pd in td.partition_data:
                    (batch,) = decode_batches(pd.records or b"")
                    headers.append((batch.producer_epoch, batch.base_sequence))
    # epoch 0 sequences 0,1,2,3 (rejected), then the bump renumbers from 0 under epoch 1
    assert headers == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
    assert await _values(kafka_cluster, "oos") == [b"a0", b"a1", b"a2", b"b", b"c"]


async def test_unknown_producer_id_without_log_start_offset_just_retries(
    kafka_cluster: EmbeddedCluster,
) -> None:
    kafka_cluster.create_topic("upi", 1)
    async with Producer(kafka_cluster.bootstrap, retry_backoff_ms=10) as producer:
        await producer.send("upi", b"x")
        kafka_cluster.inject_error(ProduceRequest, E.UnknownProducerIdError.code, count=2)
        assert (await producer.send("upi", b"y")).offset == 1
        assert producer.metrics()["epoch_bumps"] == 0


async def test_lost_response_is_deduplicated(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("dup", 1)
    async with Producer(kafka_cluster.bootstrap, linger_ms=0, retry_backoff_ms=10) as producer:
        await producer.send("dup", b"first")
        kafka_cluster.drop_connection(ProduceRequest, count=1, when="after")  # written, answer lost
        md = await producer.send("dup", b"second")
        assert md.offset == 1  # the retry got the original offset back
        assert producer.metrics()["batches_retried"] == 1
    assert await _values(kafka_cluster, "dup") == [b"first", b"second"]


async def test_failed_batch_in_pipeline_leaves_no_gap(kafka_cluster: EmbeddedCluster) -> None:
    """A non-retriable error on one of several in-flight batches: it fails, the batches
    behind it are renumbered under a new epoch and delivered, in order, once."""
    kafka_cluster.create_topic("gap", 1)
    kafka_cluster.add_latency(ProduceRequest, 0.02)
    async with Producer(
        kafka_cluster.bootstrap, linger_ms=0, batch_size=200, retry_backoff_ms=10
    ) as producer:
        await producer.send("gap", b"warm-up")
        kafka_cluster.inject_error(ProduceRequest, E.InvalidRecordError.code, count=1)
        futs = [await producer.enqueue("gap", b"%03d" % i * 40) for i in range(6)]  # one batch each
        await producer.flush()
        with pytest.raises(E.InvalidRecordError):
            futs[0].result()
        assert [f.result().offset for f in futs[1:]] == [1, 2, 3, 4, 5]
        assert producer.metrics()["epoch_bumps"] == 1
    assert await _values(kafka_cluster, "gap") == [b"warm-up"] + [b"%03d" % i * 40 for i in range(1, 6)]


async def test_init_producer_id_retried_then_fatal_on_authorization(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("pid", 1)
    kafka_cluster.inject_error(InitProducerIdRequest, E.CoordinatorLoadInProgressError.code, count=2)
    async with Producer(kafka_cluster.bootstrap, retry_backoff_ms=10) as producer:
        assert (await producer.send("pid", b"v")).offset == 0
    kafka_cluster.inject_error(InitProducerIdRequest, E.ClusterAuthorizationFailedError.code, count=1)
    async with Producer(kafka_cluster.bootstrap) as producer:
        with pytest.raises(E.ClusterAuthorizationFailedError):
            await asyncio.wait_for(producer.send("pid", b"v"), 10)
        with pytest.raises(E.ClusterAuthorizationFailedError):
            await producer.send("pid", b"w")


async def test_request_timeouts_with_late_execution_stay_exactly_once(kafka_cluster: EmbeddedCluster) -> None:
    """The broker executes requests after the client gave up on them (timeout, connection
    closed); the retries must not duplicate anything."""
    kafka_cluster.create_topic("late", 1)
    async with Producer(
        kafka_cluster.bootstrap, request_timeout_ms=200, retry_backoff_ms=10, linger_ms=0, batch_size=300
    ) as producer:
        await producer.send("late", b"warm-up")
        kafka_cluster.add_latency(ProduceRequest, 0.5, count=3)
        futs = [await producer.enqueue("late", b"%02d" % i * 50) for i in range(12)]
        await producer.flush()
        assert [f.result().offset for f in futs] == list(range(1, 13))
        assert producer.metrics()["batches_retried"] > 0
    assert await _values(kafka_cluster, "late") == [b"warm-up"] + [b"%02d" % i * 50 for i in range(12)]
