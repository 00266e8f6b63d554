"""Consumer against the embedded broker: manual assignment, iteration, getmany, seek, pause."""

from __future__ import annotations

import asyncio

from fetch_testlib import produce_values

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.fetch.consumer import Consumer
from aiokafka_lite.net import Client
from aiokafka_lite.structs import TopicPartition


async def test_manual_assignment_async_for(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    async with Client(kafka_cluster.bootstrap) as client:
        await produce_values(client, TopicPartition("t", 0), [b"a%d" % i for i in range(50)], batch=7)
        await produce_values(client, TopicPartition("t", 1), [b"b%d" % i for i in range(30)], batch=11)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
        got: dict[int, list[bytes]] = {0: [], 1: []}
        async with asyncio.timeout(10):
            async for rec in consumer:
                got[rec.partition].append(rec.value)
                if len(got[0]) + len(got[1]) == 80:
                    break
        assert got[0] == [b"a%d" % i for i in range(50)]
        assert got[1] == [b"b%d" % i for i in range(30)]
        assert await consumer.position(TopicPartition("t", 0)) == 50
        assert await consumer.position(TopicPartition("t", 1)) == 30
