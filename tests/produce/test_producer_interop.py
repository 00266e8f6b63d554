"""Cross-checks with other clients: what this producer writes (every codec) is read
correctly by kafka-python and confluent-kafka consumers, and keyed records land on the
partitions those clients' Java-compatible partitioners pick."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite.produce import Producer, key_partition
from aiokafka_lite.testing.threaded import ThreadedCluster

pytestmark = pytest.mark.interop

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 300


def _records(codec: str) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [
        (
            f"key-{i}".encode(),
            f"{codec} value {i} ".encode() * 5,
            [("i", str(i).encode()), ("c", codec.encode())],
        )
        for i in range(N)
    ]


async def _produce(bootstrap: str, topic: str, codec: str) -> dict[int, list[int]]:
    """Produce the records; returns partition -> record indexes in offset order."""
    by_partition: dict[int, list[int]] = {}
    async with Producer(bootstrap, compression=codec, linger_ms=20, batch_size=4096) as producer:
        futs = [
            await producer.enqueue(topic, value, key=key, headers=headers)
            for key, value, headers in _records(codec)
        ]
        await producer.flush()
        for i, fut in enumerate(futs):
            md = fut.result()
            by_partition.setdefault(md.partition, []).append(i)
            assert md.partition == key_partition(f"key-{i}".encode(), 3)
    return by_partition


def _read_kafka_python(bootstrap: str, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: dict[int, list[tuple[Any, ...]]] = {p: [] for p in range(3)}
        total = 0
        for msg in consumer:
            out[msg.partition].append((msg.offset, msg.key, msg.value, [(k, v) for k, v in msg.headers]))
            total += 1
            if total == N:
                break
        return out
    finally:
        consumer.close()


def _read_confluent(bootstrap: str, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "interop-check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
        out: dict[int, list[tuple[Any, ...]]] = {p: [] for p in range(3)}
        total = 0
        for _ in range(200):
            for msg in consumer.consume(num_messages=N, timeout=0.5):
                if msg.error():
                    raise AssertionError(str(msg.error()))
                out[msg.partition()].append((msg.offset(), msg.key(), msg.value(), msg.headers() or []))
                total += 1
            if total >= N:
                break
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("reader", [_read_kafka_python, _read_confluent], ids=["kafka-python", "confluent"])
@pytest.mark.parametrize("codec", CODECS)
async def test_other_clients_read_what_we_write(
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster],
    codec: str,
    reader: Callable[[str, str], dict[int, list[tuple[Any, ...]]]],
) -> None:
    tc = kafka_threaded_cluster_factory(brokers=1, topics={"interop": 3})
    by_partition = await _produce(tc.bootstrap, "interop", codec)
    got = await asyncio.to_thread(reader, tc.bootstrap, "interop")
    records = _records(codec)
    for p in range(3):
        expected = [(off, *records[i][:2], records[i][2]) for off, i in enumerate(by_partition.get(p, []))]
        assert got[p] == expected, f"partition {p} differs ({codec})"


def _confluent_partitions(bootstrap: str, topic: str, keys: list[bytes]) -> list[int]:
    from confluent_kafka import Producer as CProducer

    # Delivery reports arrive per partition, not in send order: map them by key.
    by_key: dict[bytes, int] = {}
    producer = CProducer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for key in keys:
        producer.produce(
            topic, b"v", key=key, on_delivery=lambda err, msg: by_key.__setitem__(msg.key(), msg.partition())
        )
    producer.flush(30)
    return [by_key[k] for k in keys]


async def test_keyed_partitioning_matches_librdkafka_murmur2(
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster],
) -> None:
    tc = kafka_threaded_cluster_factory(brokers=1, topics={"keys7": 7})
    keys = [f"customer-{i}".encode() for i in range(200)] + [bytes([i, 255 - i, 7]) for i in range(50)]
    theirs = await asyncio.to_thread(_confluent_partitions, tc.bootstrap, "keys7", keys)
    async with Producer(tc.bootstrap) as producer:
        ours = [(await producer.send("keys7", b"v", key=k)).partition for k in keys]
    assert ours == theirs
