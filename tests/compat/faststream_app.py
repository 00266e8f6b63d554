"""A FastStream application on the compat layer (run by test_faststream_app.py in a
subprocess, so ``install()`` runs before anything imports aiokafka)."""

from __future__ import annotations

import asyncio
import sys
import uuid

import aiokafka_lite.compat

aiokafka_lite.compat.install()

from faststream import AckPolicy  # noqa: E402
from faststream.kafka import KafkaBroker, KafkaMessage  # noqa: E402

from aiokafka_lite import Consumer, TopicPartition  # noqa: E402


async def main(bootstrap: str) -> None:
    import aiokafka

    assert aiokafka.AIOKafkaConsumer.__module__.startswith("aiokafka_lite.compat"), aiokafka
    topic_batch = f"fs-batch-{uuid.uuid4().hex[:6]}"
    topic_ack = f"fs-ack-{uuid.uuid4().hex[:6]}"
    group = f"fs-{uuid.uuid4().hex[:6]}"
    broker = KafkaBroker(bootstrap)
    batches: list[list[str]] = []
    acked: list[str] = []
    done = asyncio.Event()
    ack_done = asyncio.Event()

    @broker.subscriber(topic_batch, batch=True, auto_offset_reset="earliest")
    async def on_batch(body: list[str]) -> None:
        batches.append(body)
        if sum(map(len, batches)) >= 5:
            done.set()

    @broker.subscriber(topic_ack, group_id=group, ack_policy=AckPolicy.MANUAL, auto_offset_reset="earliest")
    async def on_ack(body: str, msg: KafkaMessage) -> None:
        if body == "ack-me":
            await msg.ack()
            acked.append(body)
            ack_done.set()

    publisher = broker.publisher(topic_batch)
    async with broker:
        await broker.start()
        for i in range(5):
            await publisher.publish(f"m{i}")
        await broker.publish("ack-me", topic_ack)
        await asyncio.wait_for(done.wait(), 30)
        await asyncio.wait_for(ack_done.wait(), 30)
    assert [m for b in batches for m in b] == [f"m{i}" for i in range(5)]
    async with Consumer(bootstrap, group_id=group) as consumer:
        assert await consumer.committed(TopicPartition(topic_ack, 0)) == 1
    print("OK", len(batches))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
