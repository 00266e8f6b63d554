"""A consumer group whose members process records with N concurrent workers each.

    python examples/group_workers.py                       # embedded broker, in this process
    python examples/group_workers.py --bootstrap HOST:PORT # any Kafka cluster

Two group members share a 6-partition topic. Each runs ``OrderedWorkers``: up to 4
records in flight at once, but never two of the same partition, so records of one key
(one partition) are handled in order. Offsets are committed only once a record *and
every record before it* is processed, so a crash re-delivers unfinished work instead of
skipping it. The handler here simulates I/O with a short random sleep.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable

from aiokafka_lite import Admin, Consumer, NewTopic, Producer, Record, TopicPartition
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.processing import OrderedWorkers

RECORDS = 600
ACCOUNTS = 12
PARTITIONS = 6


async def main(bootstrap: str | None) -> None:
    external = bootstrap is not None
    async with contextlib.AsyncExitStack() as stack:
        if bootstrap is None:  # no cluster given: run an embedded broker in this process
            bootstrap = (await stack.enter_async_context(EmbeddedCluster())).bootstrap
        topic = f"payments-{uuid.uuid4().hex[:6]}"
        group = f"{topic}-processors"
        admin = await stack.enter_async_context(Admin(bootstrap))
        (await admin.create_topics([NewTopic(topic, partitions=PARTITIONS)])).raise_errors()

        # Keyed records: every record of an account lands in the same partition, in order.
        async with Producer(bootstrap) as producer:
            await producer.send_batch(
                topic,
                [b"%d" % seq for seq in range(RECORDS)],
                keys=[b"account-%d" % (seq % ACCOUNTS) for seq in range(RECORDS)],
            )
        print(f"produced {RECORDS} payments for {ACCOUNTS} accounts into {topic} ({PARTITIONS} partitions)")

        last_seq: dict[bytes, int] = {}
        handled: Counter[tuple[int, int]] = Counter()  # (partition, offset) -> times handled
        by_member: Counter[str] = Counter()
        out_of_order = 0
        all_done = asyncio.Event()

        def handler_for(member: str) -> Callable[[Record], Awaitable[None]]:
            async def handle(record: Record) -> None:
                nonlocal out_of_order
                await asyncio.sleep(random.uniform(0, 0.004))  # "call a payment service"
                seq = int(record.value)
                # At least once: after a rebalance a record can come again (if its commit was
                # lost). Order is checked on first deliveries: no record before an older one.
                if (record.partition, record.offset) not in handled:
                    if last_seq.get(record.key, -1) > seq:
                        out_of_order += 1
                    last_seq[record.key] = seq
                handled[record.partition, record.offset] += 1
                by_member[member] += 1
                if len(handled) == RECORDS:
                    all_done.set()

            return handle

        async def member(name: str) -> None:
            # OrderedWorkers decides what to commit: the consumer must not auto-commit.
            consumer = Consumer(
                bootstrap,
                topics=topic,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                client_id=name,
            )
            async with consumer:
                workers = OrderedWorkers(consumer, handler_for(name), concurrency=4, commit_interval_ms=200)
                run = asyncio.create_task(workers.run())
                await all_done.wait()
                workers.stop()  # finish in-flight records, commit, return
                await run
                print(
                    f"{name}: processed {workers.stats.processed} records, {workers.stats.commits} commits, "
                    f"owned partitions {sorted(tp.partition for tp in consumer.assignment())}"
                )

        async with asyncio.timeout(120):
            await asyncio.gather(member("member-a"), member("member-b"))

        duplicates = sum(n - 1 for n in handled.values())
        print(
            f"handled {len(handled)} distinct records, {duplicates} twice, {out_of_order} out of order per account"
        )
        print("records per member: " + ", ".join(f"{m}={n}" for m, n in sorted(by_member.items())))

        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = await admin.list_group_offsets(group, tps)
        ends = await admin.list_offsets(dict.fromkeys(tps, "latest"))
        # -1: nothing committed (a partition no account hashed to stays empty)
        lag = sum(ends[tp].offset - max(committed[tp].offset, 0) for tp in tps)
        print(f"committed offsets: {[committed[tp].offset for tp in tps]}, lag {lag}")
        if external:  # leave a real cluster as we found it
            await admin.delete_groups([group])
            await admin.delete_topics([topic])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP") or None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP, else an embedded broker)",
    )
    asyncio.run(main(parser.parse_args().bootstrap))
