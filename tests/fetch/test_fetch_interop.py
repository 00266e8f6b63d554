"""Consuming what other clients wrote: kafka-python, confluent-kafka (every codec and
transactions, for read_committed) and our own producer.

The blocking clients run in worker threads (``asyncio.to_thread``), so the test's event
loop, and the embedded broker in it, keep serving; with --kafka=apache the session's
Apache Kafka serves them."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from fetch_testlib import take

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer, Record
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce import Producer

pytestmark = pytest.mark.interop

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 200


def expected(tag: str) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"{tag} value {i} ".encode() * 4) for i in range(N)]


async def read_all(bootstrap: str, topic: str, n: int, **options: Any) -> list[Record]:
    async with Consumer(
        bootstrap, topics=[topic], auto_offset_reset="earliest", fetch_max_wait_ms=100, **options
    ) as c:
        recs = await take(c, n, limit_s=30)
    return sorted(recs, key=lambda r: (r.partition, r.offset))


def check(recs: list[Record], tag: str) -> None:
    assert sorted((r.key, r.value) for r in recs) == sorted(expected(tag))
    by_partition: dict[int, list[int]] = {}
    for r in recs:
        by_partition.setdefault(r.partition, []).append(r.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # contiguous, no control records surfaced


def produce_confluent(bootstrap: str, topic: str, codec: str) -> None:
    from confluent_kafka import Producer as CProducer

    p = CProducer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20, "batch.size": 4096}
    )
    for key, value in expected(codec):
        p.produce(topic, value, key, headers=[("codec", codec.encode())])
    assert p.flush(30) == 0


def produce_kafka_python(bootstrap: str, topic: str, codec: str | None) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20, batch_size=4096)
    for key, value in expected(f"kp-{codec}"):
        p.send(topic, value=value, key=key)
    p.flush(30)
    p.close()


@pytest.mark.parametrize("codec", CODECS)
async def test_confluent_kafka_every_codec(kafka_cluster: EmbeddedCluster, codec: str) -> None:
    kafka_cluster.create_topic("c", 3)
    await asyncio.to_thread(produce_confluent, kafka_cluster.bootstrap, "c", codec)
    recs = await read_all(kafka_cluster.bootstrap, "c", N)
    check(recs, codec)
    assert all(r.headers == (("codec", codec.encode()),) for r in recs)


@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd"])
async def test_kafka_python(kafka_cluster: EmbeddedCluster, codec: str | None) -> None:
    kafka_cluster.create_topic("k", 2)
    await asyncio.to_thread(produce_kafka_python, kafka_cluster.bootstrap, "k", codec)
    check(await read_all(kafka_cluster.bootstrap, "k", N), f"kp-{codec}")


async def test_our_producer(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("o", 3)
    async with Producer(kafka_cluster.bootstrap, compression="lz4", linger_ms=5) as producer:
        for key, value in expected("ours"):
            await producer.enqueue("o", value, key=key)
        await producer.flush()
    check(await read_all(kafka_cluster.bootstrap, "o", N), "ours")


def produce_transactions(bootstrap: str, topic: str) -> list[tuple[int, bool, list[bytes]]]:
    """Interleaved transactions from two transactional producers plus plain writes.

    Returns (partition, committed, values) per transaction, in order.
    """
    from confluent_kafka import Producer as CProducer

    run = uuid.uuid4().hex[:6]  # fresh transactional ids: the session's Apache Kafka keeps old ones
    producers = [
        CProducer({"bootstrap.servers": bootstrap, "transactional.id": f"txn-{i}-{run}", "linger.ms": 5})
        for i in range(2)
    ]
    plain = CProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in producers:
        p.init_transactions(30)
    log: list[tuple[int, bool, list[bytes]]] = []
    for round_ in range(6):
        for p in producers:
            p.begin_transaction()
        for i, p in enumerate(producers):
            vals = [f"r{round_}-p{i}-{j}".encode() for j in range(5)]
            for v in vals:
                p.produce(topic, v, partition=0)
            p.flush(30)
            log.append((0, (round_ + i) % 2 == 0, vals))
        plain.produce(topic, f"plain-{round_}".encode(), partition=0)
        plain.flush(30)
        log.append((0, True, [f"plain-{round_}".encode()]))
        for i, p in enumerate(producers):
            if (round_ + i) % 2 == 0:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
    return log


async def test_read_committed_with_confluent_transactions(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("tx", 1)
    bootstrap = kafka_cluster.bootstrap
    log = await asyncio.to_thread(produce_transactions, bootstrap, "tx")
    committed = {v for _, ok, vals in log if ok for v in vals}
    everything = {v for _, _, vals in log for v in vals}
    assert len(everything - committed) == 30  # half of the transactional writes were aborted
    tp = TopicPartition("tx", 0)
    async with Consumer(
        bootstrap, isolation_level="read_committed", auto_offset_reset="earliest", fetch_max_wait_ms=100
    ) as c:
        c.assign([tp])
        recs = await take(c, len(committed), limit_s=30)
        assert {r.value for r in recs} == committed
        for tag in (b"-p0-", b"-p1-", b"plain"):  # each producer's committed writes, in order
            want = [v for _, ok, vals in log if ok for v in vals if tag in v]
            assert [r.value for r in recs if tag in r.value] == want
        # Nothing aborted sneaks in afterwards.
        assert await c.getmany(timeout_ms=300) == {}
        end = (await c.end_offsets([tp]))[tp]
        assert await c.position(tp) == end  # moved past the final commit/abort markers
    async with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([tp])
        recs = await take(c, len(everything), limit_s=30)
        assert {r.value for r in recs} == everything  # read_uncommitted sees aborted data, never markers
        assert all(not r.value.startswith(b"\x00\x00") for r in recs)


async def test_read_committed_stops_at_last_stable_offset(kafka_cluster: EmbeddedCluster) -> None:
    from confluent_kafka import Producer as CProducer

    kafka_cluster.create_topic("lso", 1)
    bootstrap = kafka_cluster.bootstrap
    tp = TopicPartition("lso", 0)
    plain = CProducer({"bootstrap.servers": bootstrap})
    txn = CProducer({"bootstrap.servers": bootstrap, "transactional.id": f"lso-txn-{uuid.uuid4().hex[:6]}"})

    def open_transaction() -> None:
        for i in range(3):
            plain.produce("lso", f"before-{i}".encode())
        plain.flush(30)
        txn.init_transactions(30)
        txn.begin_transaction()
        for i in range(4):
            txn.produce("lso", f"txn-{i}".encode())
        txn.flush(30)
        plain.produce("lso", b"after")  # behind the open transaction
        plain.flush(30)

    await asyncio.to_thread(open_transaction)
    async with Consumer(
        bootstrap, isolation_level="read_committed", auto_offset_reset="earliest", fetch_max_wait_ms=50
    ) as c:
        c.assign([tp])
        got = [r.value for r in await take(c, 3)]
        assert got == [b"before-0", b"before-1", b"before-2"]
        assert await c.getmany(timeout_ms=300) == {}  # nothing past the LSO
        assert await c.position(tp) == 3
        assert (await c.end_offsets([tp]))[tp] == 3  # the last stable offset, not the high watermark
        await asyncio.to_thread(txn.commit_transaction, 30)
        got = [r.value for r in await take(c, 5)]
        assert got == [b"txn-0", b"txn-1", b"txn-2", b"txn-3", b"after"]
