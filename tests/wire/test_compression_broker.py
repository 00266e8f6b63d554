"""Every codec through our Producer, a Kafka broker and back: runs on the embedded broker
and, with ``--kafka=apache``, on Apache Kafka (whose LZ4 reader rejected our block-linked
frames with UNKNOWN_SERVER_ERROR)."""

from __future__ import annotations

import os

import pytest

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.produce import Producer
from aiokafka_lite.wire.compression import Compression
from aiokafka_lite.wire.messages import FetchRequest, FetchResponse
from aiokafka_lite.wire.records import RecordBatch, decode_batches


async def _stored_batches(bootstrap: str, tp: TopicPartition) -> list[RecordBatch]:
    """The partition's batches as the broker stores them (codec attributes intact)."""
    async with Client(bootstrap) as client:
        leader, _ = await client.leader_for(tp, timeout_ms=10000)
        req = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=16 << 20,
            isolation_level=0,
            topics=[
                FetchRequest.FetchTopic(
                    topic=tp.topic,
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=tp.partition, fetch_offset=0, partition_max_bytes=16 << 20
                        )
                    ],
                )
            ],
        )
        resp = await client.send(
            req, node_id=leader, version=min(12, await client.negotiated_version(leader, 1))
        )
        assert isinstance(resp, FetchResponse)
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0
        return list(decode_batches(part.records or b""))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_produce_compressed_and_read_back(kafka_cluster: EmbeddedCluster, codec: str) -> None:
    topic = f"compressed-{codec}"
    kafka_cluster.create_topic(topic, 1)
    tp = TopicPartition(topic, 0)
    # ~300 KB per batch: several 64 KiB lz4 blocks, and a random half that a linked
    # encoder would match against earlier blocks.
    chunk = os.urandom(500)
    values = [b"%06d" % i + chunk + b"v" * 100 for i in range(1000)]
    async with Producer(
        kafka_cluster.bootstrap, compression=codec, linger_ms=50, batch_size=1 << 20, acks="all"
    ) as producer:
        metadata = await producer.send_batch(
            topic, values, keys=[b"k%d" % i for i in range(1000)], partition=0
        )
    assert [m.offset for m in metadata] == list(range(1000))
    assert kafka_cluster.high_watermark(topic, 0) == 1000

    batches = await _stored_batches(kafka_cluster.bootstrap, tp)
    assert {b.compression for b in batches} == {Compression[codec.upper()]}

    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        got: list[tuple[int, bytes | None, bytes | None]] = []
        while len(got) < 1000:
            for records in (await consumer.getmany(timeout_ms=5000)).values():
                got.extend((r.offset, r.key, r.value) for r in records)
    assert got == [(i, b"k%d" % i, v) for i, v in enumerate(values)]


async def test_lz4_at_a_high_compression_level(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("lz4-level-17", 1)
    values = [b"record %d " % i * 20 for i in range(2000)]
    async with Producer(
        kafka_cluster.bootstrap, compression="lz4", compression_level=17, linger_ms=20
    ) as producer:
        metadata = await producer.send_batch("lz4-level-17", values, partition=0)
    assert metadata[-1].offset == 1999
    assert kafka_cluster.high_watermark("lz4-level-17", 0) == 2000
