"""Mirror throughput: MB/s copied between clusters, 1 KB records, at-least-once and
exactly-once.

The source is an embedded cluster in this process (or ``--source HOST:PORT``); the
target is a second embedded cluster, or ``--target HOST:PORT`` (e.g. Apache Kafka). The
source topic is filled first; the clock runs from ``Mirror.run()`` until every record is
durable on the target (acknowledged, or committed in a transaction), so it includes the
start (group join, topic creation: a few hundred ms, most of a 30 MB run). MB/s counts key +
value bytes. Everything (brokers, mirror) shares one Python process and event loop
when embedded, so the numbers are a floor for the mirror on its own core.

Run: .venv/bin/python bench/mirror.py [--records N] [--partitions P] [--target HOST:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from aiokafka_lite import Admin, NewTopic, Producer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.integrations.mirror import Mirror

VALUE = b"x" * 1000


async def fill(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, partitions, -1)])).raise_errors()
    async with Producer(bootstrap, linger_ms=5, batch_size=262144) as producer:
        futures = []
        for i in range(records):
            futures.append(await producer.enqueue(topic, VALUE, str(i).encode(), partition=i % partitions))
        await producer.wait_all(futures)


async def one(source: str, target: str, topic: str, records: int, exactly_once: bool) -> tuple[float, float]:
    mirror = Mirror(
        source,
        target,
        include=topic,
        rename="{topic}." + ("eos" if exactly_once else "alo"),
        group_id=f"bench-{uuid.uuid4().hex[:8]}",
        exactly_once=exactly_once,
        instance_id="bench",
        commit_interval_ms=500,
    )
    async with mirror:
        start = time.perf_counter()
        task = asyncio.ensure_future(mirror.run())
        while mirror.stats().records < records:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - start
        nbytes = mirror.stats().bytes
        mirror.stop()
        await task
    return nbytes / elapsed / 1e6, records / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--source", help="source bootstrap (default: an embedded cluster)")
    parser.add_argument("--target", help="target bootstrap (default: an embedded cluster)")
    args = parser.parse_args()
    clusters: list[EmbeddedCluster] = []
    try:
        if args.source is None:
            clusters.append(EmbeddedCluster(brokers=1))
            await clusters[-1].start()
        source = args.source or clusters[-1].bootstrap
        if args.target is None:
            clusters.append(EmbeddedCluster(brokers=1))
            await clusters[-1].start()
        target = args.target or clusters[-1].bootstrap
        topic = f"mirror-bench-{uuid.uuid4().hex[:8]}"
        await fill(source, topic, args.partitions, args.records)
        where = f"{'embedded' if args.source is None else args.source} -> {'embedded' if args.target is None else args.target}"
        for eos in (False, True):
            mbs, rps = await one(source, target, topic, args.records, eos)
            mode = "exactly-once " if eos else "at-least-once"
            print(
                f"{where}  {mode}  {args.records} x 1 KB, {args.partitions} partitions: {mbs:6.1f} MB/s  {rps:8.0f} records/s"
            )
    finally:
        for c in clusters:
            await c.close()


if __name__ == "__main__":
    asyncio.run(main())
