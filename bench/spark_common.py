"""Shared parts of the Spark benchmarks (bench/spark_read.py, bench/spark_write.py): the
Kafka to run against, topics, SparkSessions on ``local[N]`` or a standalone cluster with
Spark's built-in Kafka connector on the classpath, and the result table."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

OURS, BUILTIN = "aiokafka_lite", "kafka"


def start_embedded_broker() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    from aiokafka_lite.admin import Admin
    from aiokafka_lite.admin.types import NewTopic

    async def run() -> None:
        async with Admin(bootstrap) as admin:
            await admin.create_topics([NewTopic(name, partitions, 1)])
        from aiokafka_lite.net import Client

        async with Client(bootstrap) as client:
            await client.wait_for_topic(name, 30000)

    asyncio.run(run())
    return name


def delete_topics(bootstrap: str, names: list[str]) -> None:
    from aiokafka_lite.admin import Admin

    async def run() -> None:
        async with Admin(bootstrap) as admin:
            await admin.delete_topics(names)

    asyncio.run(run())


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_size: int) -> float:
    """Produce ``records`` values of ``value_size`` B round-robin over the partitions;
    returns the seconds it took."""
    from aiokafka_lite.produce import Producer

    value = b"v" * value_size

    async def run() -> None:
        async with Producer(bootstrap, linger_ms=20, batch_size=512 * 1024, acks=1) as p:
            pending = []
            for i in range(records):
                pending.append(await p.enqueue(topic, value, b"key", partition=i % partitions))
                if len(pending) >= 50_000:
                    await p.flush()
                    for f in pending:
                        await f
                    pending.clear()
            await p.flush()
            for f in pending:
                await f

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start


_current: Any = None


def session(master: str, conf: dict[str, str] | None = None, py_files: list[str] | None = None) -> Any:
    """A SparkSession on ``master`` with the built-in connector's jars and our format."""
    global _current
    from pyspark.sql import SparkSession

    from aiokafka_lite.integrations.spark import register
    from aiokafka_lite.integrations.spark.connector import connector_jars

    if _current is not None:
        _current.stop()
    builder = (
        SparkSession.builder.master(master)
        .appName("aiokafka_lite-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .config("spark.jars", ",".join(str(j) for j in connector_jars()))
    )
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for path in py_files or []:
        spark.sparkContext.addPyFile(path)
    register(spark)
    _current = spark
    return spark


def cluster_conf() -> dict[str, str]:
    return {
        "spark.pyspark.python": sys.executable,
        "spark.executor.memory": "1g",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


def best(fn: Any, runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), times


def print_table(rows: list[tuple[str, str, float, int]]) -> None:
    """rows: (where, format, best seconds, records) -> a table with ours/built-in ratios."""
    print(f"\n{'where':<12} {'format':<14} {'best s':>8} {'records/s':>12} {'vs built-in':>12}")
    by = {(w, f): (s, n) for w, f, s, n in rows}
    for where, fmt, secs, n in rows:
        ratio = ""
        if fmt == OURS and (where, BUILTIN) in by:
            ratio = f"{by[(where, BUILTIN)][0] / secs:.2f}x"
        print(f"{where:<12} {fmt:<14} {secs:>8.2f} {n / secs:>12,.0f} {ratio:>12}")
