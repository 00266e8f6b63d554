"""Consuming: ``async for``, ``getmany``, pause/resume and seek.

    python examples/async_iterator.py                       # embedded broker, in this process
    python examples/async_iterator.py --bootstrap HOST:PORT # any Kafka cluster

Produces ten records into each of three partitions, then reads them back in the ways a
consumer can: record by record with ``async for``, in batches with ``getmany``, with a
partition paused and resumed, and after seeking (to an offset, to the start, by time).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
import uuid

import anyio

from aiokafka_lite import Admin, Consumer, NewTopic, Producer, Record, TopicPartition
from aiokafka_lite.broker import EmbeddedCluster


def show(batch: dict[TopicPartition, list[Record]]) -> str:
    """'p0: 0..4, p2: 0..9' for a getmany result."""
    parts = sorted(batch.items())
    return (
        ", ".join(f"p{tp.partition}: {recs[0].offset}..{recs[-1].offset}" for tp, recs in parts) or "nothing"
    )


async def main(bootstrap: str | None) -> None:
    external = bootstrap is not None
    async with contextlib.AsyncExitStack() as stack:
        if bootstrap is None:  # no cluster given: run an embedded broker in this process
            bootstrap = (await stack.enter_async_context(EmbeddedCluster())).bootstrap
        topic = f"iter-{uuid.uuid4().hex[:6]}"
        async with Admin(bootstrap) as admin:
            (await admin.create_topics([NewTopic(topic, partitions=3)])).raise_errors()
        try:
            await tour(bootstrap, topic)
        finally:
            if external:  # leave a real cluster as we found it (once our clients are closed)
                async with Admin(bootstrap) as admin:
                    await admin.delete_topics([topic])


async def tour(bootstrap: str, topic: str) -> None:
    async with contextlib.AsyncExitStack() as stack:
        p0, p1, p2 = (TopicPartition(topic, p) for p in range(3))

        producer = await stack.enter_async_context(Producer(bootstrap))
        for p in range(3):
            await producer.send_batch(topic, [b"p%d-%d" % (p, i) for i in range(10)], partition=p)
        print(f"produced 10 records into each partition of {topic}")

        # No group_id: the consumer reads every partition of the topic itself (no commits).
        consumer = await stack.enter_async_context(
            Consumer(bootstrap, topics=topic, auto_offset_reset="earliest")
        )

        # 1. async for: one record at a time. Breaking out leaves the consumer usable.
        seen = []
        async for record in consumer:
            seen.append(record.value.decode())
            if len(seen) == 5:
                break
        print(f"async for, first 5 records: {seen}")

        # 2. getmany: what is buffered now, by partition (waits up to timeout_ms for data).
        total = len(seen)
        while total < 30:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10)
            total += sum(len(recs) for recs in batch.values())
            print(f"getmany: {show(batch)}")
        print(f"read all {total} records")

        # 3. pause/resume: a paused partition is neither fetched nor returned.
        consumer.pause(p0)
        mark = int(time.time() * 1000) + 1  # every record so far is older than this (ms)
        await anyio.sleep(0.002)  # anyio: the trio variant runs this tour too
        for p in range(3):
            await producer.send(topic, b"late-p%d" % p, partition=p)
        late: dict[TopicPartition, list[Record]] = {}
        while len(late) < 2:
            for tp, recs in (await consumer.getmany(timeout_ms=1000)).items():
                late.setdefault(tp, []).extend(recs)
        print(f"paused p0; new records came from: {sorted(tp.partition for tp in late)}")
        consumer.resume(p0)
        batch = await consumer.getmany(p0, timeout_ms=1000)
        print(f"resumed p0: {[r.value.decode() for r in batch[p0]]}")

        # 4. seek: to an offset, to the beginning, or to the first record at/after a time.
        consumer.seek(p1, 8)
        batch = await consumer.getmany(p1, timeout_ms=1000)
        print(f"seek(p1, 8): {[r.value.decode() for r in batch[p1]]}")

        await consumer.seek_to_beginning(p2)  # await: resolve the position now
        print(f"seek_to_beginning(p2): position {await consumer.position(p2)}")

        found = await consumer.offsets_for_times({p2: mark})
        hit = found[p2]
        assert hit is not None
        consumer.seek(p2, hit.offset)
        record = await consumer.getone()
        print(f"offsets_for_times(p2): offset {hit.offset}, value {record.value.decode()}")

        end = await consumer.end_offsets([p0, p1, p2])
        print(f"end offsets: {[end[tp] for tp in (p0, p1, p2)]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP") or None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP, else an embedded broker)",
    )
    asyncio.run(main(parser.parse_args().bootstrap))
