"""A Spark pipeline on Kafka through aiokafka_lite: produce events, aggregate them with
Spark, write the results to another topic.

1. start an embedded broker as a separate process (``python -m aiokafka_lite.broker``,
   so Spark's Python workers can reach it over TCP), or use ``--bootstrap``;
2. produce sample purchase events to ``events`` (key: user, value: JSON with an
   amount, record timestamps spread over a few minutes);
3. read them with Spark (``format("aiokafka_lite")``, a batch query from earliest to
   latest), count and sum the amounts per user per one-minute window;
4. write the result rows to ``event-stats`` (key: user, value: JSON) and read that
   topic back to show what landed there.

On a cluster given with ``--bootstrap`` the topics get a unique suffix
(``events-1a2b3c``), so that earlier runs do not count, and are deleted at the end.

Run (needs ``pip install 'aiokafka_lite[spark]'`` and Java 17)::

    python examples/spark_pipeline.py [--events 2000] [--bootstrap HOST:PORT] [--master local[2]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.produce import Producer

EVENTS_TOPIC = "events"
STATS_TOPIC = "event-stats"
USERS = ["alice", "bob", "carol", "dave", "erin"]
#: Events are stamped inside [BASE_MS, BASE_MS + MINUTES minutes): a fixed, minute-aligned start.
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTES = 4


def sample_events(n: int, seed: int = 7) -> list[tuple[str, int, int]]:
    """``n`` deterministic events: (user, amount, timestamp ms)."""
    rnd = random.Random(seed)
    return [
        (rnd.choice(USERS), rnd.randint(1, 100), BASE_MS + rnd.randrange(MINUTES * 60_000)) for _ in range(n)
    ]


def expected_stats(events: Sequence[tuple[str, int, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """What Spark should compute: (user, window start ms) -> (count, sum of amounts)."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for user, amount, ts in events:
        key = (user, ts - ts % 60_000)
        count, total = out.get(key, (0, 0))
        out[key] = (count + 1, total + amount)
    return out


async def _produce(bootstrap: str, topic: str, events: Sequence[tuple[str, int, int]]) -> None:
    async with Producer(bootstrap, linger_ms=5) as producer:
        for user, amount, ts in events:
            value = json.dumps({"user": user, "amount": amount}).encode()
            await producer.enqueue(topic, value, user.encode(), timestamp_ms=ts)
        await producer.flush()


async def _create_topics(bootstrap: str, events_topic: str, stats_topic: str) -> None:
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(events_topic, 3), NewTopic(stats_topic, 1)])).raise_errors()


async def _delete_topics(bootstrap: str, *topics: str) -> None:
    async with Admin(bootstrap) as admin:
        await admin.delete_topics(topics)


class Broker:
    """The embedded broker in a child process; ``bootstrap`` is where it listens."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aiokafka_lite.broker",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--topic",
                f"{EVENTS_TOPIC}:3",
                "--topic",
                f"{STATS_TOPIC}:1",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.close()
            raise RuntimeError(f"the broker did not start: {line!r}")
        self.bootstrap = line.removeprefix("listening on ")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def make_spark(master: str) -> Any:
    # Spark's Python workers must run this interpreter (the one with aiokafka_lite installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("aiokafka_lite-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_pipeline(
    spark: Any, bootstrap: str, events_topic: str = EVENTS_TOPIC, stats_topic: str = STATS_TOPIC
) -> list[dict[str, Any]]:
    """Read ``events``, aggregate per user per minute, write to ``event-stats``; returns the result rows."""
    from pyspark.sql import functions as F

    from aiokafka_lite.integrations.spark import register

    register(spark)
    events = (
        spark.read.format("aiokafka_lite")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", events_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    parsed = events.select(
        F.col("key").cast("string").alias("user"),
        F.get_json_object(F.col("value").cast("string"), "$.amount").cast("long").alias("amount"),
        "timestamp",
    )
    stats = (
        parsed.groupBy("user", F.window("timestamp", "1 minute").alias("window"))
        .agg(F.count("*").alias("events"), F.sum("amount").alias("total"))
        .select("user", F.col("window.start").alias("minute"), "events", "total")
        .orderBy("minute", "user")
    ).cache()
    (
        stats.select(
            F.col("user").alias("key"),
            F.to_json(
                F.struct(
                    "user",
                    F.date_format("minute", "yyyy-MM-dd'T'HH:mm'Z'").alias("minute"),
                    "events",
                    "total",
                )
            ).alias("value"),
        )
        .write.format("aiokafka_lite")
        .option("bootstrap.servers", bootstrap)
        .option("topic", stats_topic)
        .mode("append")
        .save()
    )
    stats.show(50, truncate=False)
    rows = [r.asDict() for r in stats.collect()]
    stats.unpersist()
    return rows


def read_stats(spark: Any, bootstrap: str, stats_topic: str = STATS_TOPIC) -> list[dict[str, Any]]:
    """The result records as they landed in ``event-stats``."""
    df = (
        spark.read.format("aiokafka_lite")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", stats_topic)
        .load()
    )
    return [json.loads(r.value) for r in df.orderBy("offset").collect()]


def main(argv: Sequence[str] | None = None, spark: Any = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=2000, help="events to produce (default 2000)")
    p.add_argument("--bootstrap", default=None, help="use this Kafka cluster instead of an embedded broker")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = p.parse_args(argv)

    broker = Broker() if args.bootstrap is None else None
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    events_topic, stats_topic = EVENTS_TOPIC, STATS_TOPIC
    if broker is None:  # a real cluster: fresh topics of our own, deleted at the end
        suffix = uuid.uuid4().hex[:6]
        events_topic, stats_topic = f"{EVENTS_TOPIC}-{suffix}", f"{STATS_TOPIC}-{suffix}"
        asyncio.run(_create_topics(bootstrap, events_topic, stats_topic))
    own_spark = spark is None
    try:
        print(f"broker: {bootstrap}{' (embedded, child process)' if broker else ''}")
        events = sample_events(args.events)
        asyncio.run(_produce(bootstrap, events_topic, events))
        print(f"produced {len(events)} events to {events_topic!r}")
        if own_spark:
            spark = make_spark(args.master)
        rows = run_pipeline(spark, bootstrap, events_topic, stats_topic)
        written = read_stats(spark, bootstrap, stats_topic)
        print(
            f"wrote {len(written)} result records to {stats_topic!r}; first: {written[0] if written else None}"
        )
        return {
            "bootstrap": bootstrap,
            "topics": [events_topic, stats_topic],
            "events": events,
            "stats": rows,
            "written": written,
        }
    finally:
        if own_spark and spark is not None:
            spark.stop()
        if broker is not None:
            broker.close()
        else:
            asyncio.run(_delete_topics(bootstrap, events_topic, stats_topic))


if __name__ == "__main__":
    main()
