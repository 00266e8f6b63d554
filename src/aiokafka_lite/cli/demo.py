"""The README's first command: a tour of a producer and a consumer group, end to end.

    python -m aiokafka_lite.cli.demo                       # starts an embedded broker in-process
    python -m aiokafka_lite.cli.demo --bootstrap HOST:PORT # or uses any Kafka cluster
    python -m aiokafka_lite.cli.demo --apache [VERSION]    # or starts Apache Kafka (Java, Maven)

Creates a topic, produces keyed records with ``Producer``, consumes them in a consumer
group with ``async for``, commits, reads the committed offsets back with ``Admin``
and checks that every record arrived exactly once and in order per key. Prints what
happened and the throughput at each step; exits 0 on success, 1 on a failed check or
a Kafka error.

Against a real cluster a fresh ``demo-<random>`` topic is used and deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Sequence

from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce import Producer

__all__ = ["main", "run"]

KEYS = 50  # distinct keys: records of one key go to one partition, in order


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f} records/s" if seconds > 0 else "n/a"


def _say(text: str) -> None:
    print(text, flush=True)


async def run(
    bootstrap: str | None = None,
    *,
    records: int = 100_000,
    partitions: int = 3,
    compression: str = "lz4",
    apache: str | None = None,
) -> bool:
    """Run the demo; returns True when every check passed. ``apache`` (a version or
    ``"latest"``) runs it on a fresh Apache Kafka node instead of the embedded broker."""
    external = bootstrap is not None
    async with contextlib.AsyncExitStack() as stack:
        if apache is not None and bootstrap is None:
            from aiokafka_lite.testing.apache import ApacheCluster

            t0 = time.perf_counter()
            kafka = await stack.enter_async_context(ApacheCluster(1, version=apache))
            bootstrap = kafka.bootstrap
            topic = "demo"
            _say(
                f"started Apache Kafka {kafka.version} on {bootstrap} "
                f"(a local KRaft node, in {time.perf_counter() - t0:.1f} s)"
            )
        elif bootstrap is None:
            cluster = await stack.enter_async_context(EmbeddedCluster())
            bootstrap = cluster.bootstrap
            topic = "demo"
            _say(f"started an embedded Kafka broker on {bootstrap} (in this process)")
        else:
            topic = f"demo-{uuid.uuid4().hex[:8]}"
            _say(f"using the Kafka cluster at {bootstrap}")

        admin = await stack.enter_async_context(Admin(bootstrap))
        (await admin.create_topics([NewTopic(topic, partitions=partitions)])).raise_errors()
        _say(f"created topic {topic!r} with {partitions} partitions")
        try:
            return await _produce_and_consume(bootstrap, admin, topic, records, partitions, compression)
        finally:
            if external:  # leave a real cluster as we found it
                await admin.delete_groups([f"{topic}-group"])
                await admin.delete_topics([topic])
                _say(f"deleted topic {topic!r} and its consumer group")


async def _produce_and_consume(
    bootstrap: str, admin: Admin, topic: str, records: int, partitions: int, compression: str
) -> bool:
    # -- produce ----------------------------------------------------------------------------
    # Value i is "i"; key "user-<i % KEYS>": so the consumer can check order per key.
    keys = [b"user-%d" % (i % KEYS) for i in range(records)]
    values = [b"%d" % i for i in range(records)]
    async with Producer(bootstrap, compression=compression, linger_ms=5) as producer:
        first = await producer.send(topic, b"hello", key=b"greeting")
        _say(f"sent one record and awaited it: partition {first.partition}, offset {first.offset}")
        start = time.perf_counter()
        # One call buffers them all; awaiting the result waits for every acknowledgement.
        result = await producer.send_batch(topic, values, keys=keys)
        elapsed = time.perf_counter() - start
    idem = "idempotent" if producer.config.idempotent else "not idempotent"
    _say(
        f"produced {len(result):,} keyed records ({compression}, acks={producer.config.acks}, {idem}) "
        f"in {elapsed:.2f} s: {_rate(len(result), elapsed)}"
    )
    total = records + 1

    # -- consume in a group ---------------------------------------------------------------------
    group = f"{topic}-group"
    last_seen: dict[bytes, int] = {}
    seen = 0
    out_of_order = 0
    per_partition = dict.fromkeys(range(partitions), 0)
    join_start = time.perf_counter()
    consumer = Consumer(
        bootstrap, topics=topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    )
    async with consumer:
        started = 0.0
        async for record in consumer:
            if not seen:
                started = time.perf_counter()
                assigned = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(consumer.assignment()))
                _say(f"joined consumer group {group!r} in {started - join_start:.2f} s; assigned {assigned}")
            seen += 1
            per_partition[record.partition] += 1
            if record.key != b"greeting":
                n = int(record.value)
                if last_seen.get(record.key, -1) >= n:
                    out_of_order += 1
                last_seen[record.key] = n
            if seen == total:
                break
        elapsed = time.perf_counter() - started
        _say(f"consumed {seen:,} records with `async for` in {elapsed:.2f} s: {_rate(seen, elapsed)}")
        await consumer.commit()  # the position of every partition: the next offset to read
    counts = ", ".join(f"p{p}: {n:,}" for p, n in per_partition.items())
    _say(f"records per partition: {counts}")

    # -- check what the group committed ----------------------------------------------------------
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    committed = await admin.list_group_offsets(group, tps)
    ends = await admin.list_offsets(dict.fromkeys(tps, "latest"))
    lag = sum(ends[tp].offset - committed[tp].offset for tp in tps)
    shown = ", ".join(f"p{tp.partition}={committed[tp].offset}" for tp in tps)
    _say(f"committed offsets of {group!r}: {shown}; lag {lag}")

    ok = True
    if seen != total or sum(per_partition.values()) != total:
        _say(f"FAILED: expected {total} records, consumed {seen}")
        ok = False
    if len(last_seen) != min(records, KEYS) or out_of_order:
        _say(f"FAILED: {out_of_order} records out of order for their key")
        ok = False
    if lag:
        _say(f"FAILED: lag should be 0 after the commit, is {lag}")
        ok = False
    if ok:
        _say("ok: every record consumed exactly once, in order per key, and committed")
    return ok


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m aiokafka_lite.cli.demo", description=(__doc__ or "").split("\n\n")[0]
    )
    p.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP") or None,
        help="a Kafka cluster to use instead of the embedded broker (default: $KAFKA_BOOTSTRAP, else embedded)",
    )
    p.add_argument(
        "--apache",
        nargs="?",
        const="latest",
        default=None,
        metavar="VERSION",
        help="run on a fresh Apache Kafka node (latest, 4.0 or a version; needs Java 17+ and Maven)",
    )
    p.add_argument("--records", type=int, default=100_000, help="records to produce (default 100000)")
    p.add_argument("--partitions", type=int, default=3, help="partitions of the demo topic (default 3)")
    p.add_argument(
        "--compression",
        default="lz4",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        help="producer compression (default lz4)",
    )
    args = p.parse_args(argv)
    if args.records < 1 or args.partitions < 1:
        p.error("--records and --partitions must be at least 1")
    if args.apache is not None and args.bootstrap is not None:
        p.error("--apache and --bootstrap exclude each other")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        ok = asyncio.run(
            run(
                args.bootstrap,
                records=args.records,
                partitions=args.partitions,
                compression=args.compression,
                apache=args.apache,
            )
        )
    except KafkaError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
