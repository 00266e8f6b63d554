"""Spark read throughput of the ``aiokafka_lite`` data source, in records/s.

An embedded broker runs in its own process (``python -m aiokafka_lite.broker``) with a
6-partition topic filled once (raw produce requests, ``--value-size`` byte values).
Then, for each master (``local[1]``, ``local[2]``), a fresh Python process starts a
SparkSession and runs a batch query over the whole topic that touches every record
(``count(*)`` and ``sum(length(value))``): one warm-up run (JVM, Python workers),
then ``--runs`` timed runs; the best is reported. The time covers planning (metadata,
ListOffsets), the Spark tasks reading their ranges with our consumer, Arrow transfer to
the JVM and the aggregation.

Run: /work/venv/bin/python bench/spark_read.py [--records 1000000] [--runs 2]
     [--masters local[1],local[2]] [--max-records-per-partition N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

TOPIC = "spark-bench"
PARTITIONS = 6


def start_broker() -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0", "--topic", f"{TOPIC}:{PARTITIONS}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


async def produce(bootstrap: str, records: int, value_size: int, per_batch: int = 2000) -> None:
    """Fill the topic evenly with raw ProduceRequests (fast, independent of the producer)."""
    from aiokafka_lite.net import Client
    from aiokafka_lite.wire.messages import ProduceRequest
    from aiokafka_lite.wire.primitives import ZERO_UUID
    from aiokafka_lite.wire.records import encode_batch

    value = b"v" * value_size
    async with Client(bootstrap, request_timeout_ms=120000) as client:
        await client.wait_for_topic(TOPIC, 30000)
        topic_id = client.cluster.topic_id(TOPIC) or ZERO_UUID
        now = int(time.time() * 1000)
        sem = asyncio.Semaphore(8)

        async def send(partition: int, n: int) -> None:
            batch = encode_batch([(now, b"key", value, ()) for _ in range(n)])
            req = ProduceRequest(
                acks=1,
                timeout_ms=60000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=TOPIC,
                        topic_id=topic_id,
                        partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)],
                    )
                ],
            )
            async with sem:
                resp: Any = await client.send(req, node_id=1)
            assert resp.responses[0].partition_responses[0].error_code == 0

        jobs = []
        remaining = records
        i = 0
        while remaining > 0:
            n = min(per_batch, remaining)
            jobs.append(send(i % PARTITIONS, n))
            remaining -= n
            i += 1
        await asyncio.gather(*jobs)


def child(args: argparse.Namespace) -> None:
    """One master: warm up, then time ``--runs`` full reads; prints a JSON line."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import register

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    def query() -> tuple[int, int, int]:
        r = (
            spark.read.format("aiokafka_lite")
            .option("bootstrap.servers", args.bootstrap)
            .option("subscribe", TOPIC)
        )
        if args.max_records_per_partition:
            r = r.option("maxRecordsPerPartition", str(args.max_records_per_partition))
        df = r.load()
        row = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]
        return int(row.n), int(row.bytes), df.rdd.getNumPartitions()

    query()  # warm-up: JVM JIT, Python worker start, imports
    times = []
    parts = 0
    for _ in range(args.runs):
        start = time.perf_counter()
        n, size, parts = query()
        times.append(time.perf_counter() - start)
        assert n == args.records, (n, args.records)
        assert size == args.records * args.value_size
    spark.stop()
    print(
        json.dumps({"master": args.master, "best_s": min(times), "times": times, "spark_partitions": parts})
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--masters", default="local[1],local[2]")
    p.add_argument("--max-records-per-partition", type=int, default=0)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--master", default="local[2]", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    proc, bootstrap = start_broker()
    try:
        start = time.perf_counter()
        asyncio.run(produce(bootstrap, args.records, args.value_size))
        print(
            f"produced {args.records} records of {args.value_size} B in {time.perf_counter() - start:.1f} s"
        )
        print(f"{'master':<10} {'partitions':>10} {'best s':>8} {'records/s':>12}")
        for master in args.masters.split(","):
            cmd = [
                sys.executable,
                __file__,
                "--child",
                "--master",
                master,
                "--bootstrap",
                bootstrap,
                "--records",
                str(args.records),
                "--value-size",
                str(args.value_size),
                "--runs",
                str(args.runs),
                "--max-records-per-partition",
                str(args.max_records_per_partition),
            ]
            out = subprocess.run(cmd, capture_output=True, text=True, check=False)
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if out.returncode != 0 or not lines:
                print(out.stdout[-2000:], out.stderr[-4000:], file=sys.stderr)
                raise SystemExit(f"{master}: child failed")
            res = json.loads(lines[-1])
            rate = args.records / res["best_s"]
            print(f"{master:<10} {res['spark_partitions']:>10} {res['best_s']:>8.2f} {rate:>12,.0f}")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
