"""Spark batch-read throughput: the ``aiokafka_lite`` data source against Spark's built-in
Kafka connector, side by side in one run, on ``local[2]`` and on a standalone cluster
(master + two one-core workers started with pyspark's spark-class).

A topic of ``--partitions`` (12) partitions is filled once with ``--records`` values of
``--value-size`` (100) B. Per master and format: one warm-up query (JIT, Python workers),
then ``--runs`` timed queries that touch every record (``count(*)``, ``sum(length(value))``);
the best is reported, with ours/built-in as a ratio (>= 0.5x is the goal). Then, where
the time goes on our side, measured in this process without Spark over one partition:
fetch + decode (kafka_io.read_range) and the Arrow conversion of the decoded records;
and the fixed cost of an empty query (planning, Python worker start-up).

Run: .venv/bin/python bench/spark_read.py [--records 10000000] [--bootstrap HOST:PORT]
     [--masters local[2],standalone] [--runs 2]
Without --bootstrap an embedded broker runs in a process of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spark_common import (
    BUILTIN,
    OURS,
    best,
    cluster_conf,
    create_topic,
    delete_topics,
    fill,
    print_table,
    session,
    start_embedded_broker,
)


def read_query(spark: Any, fmt: str, bootstrap: str, topic: str, records: int, value_size: int) -> None:
    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]
    assert int(row.n) == records and int(row.bytes) == records * value_size, (fmt, row)


def empty_query(spark: Any, fmt: str, bootstrap: str, topic: str, partitions: int) -> None:
    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")  # the built-in forbids "latest" in batch
        .option("endingOffsets", json.dumps({topic: {str(p): 0 for p in range(partitions)}}))
        .load()
    )
    assert df.count() == 0


def breakdown(bootstrap: str, topic: str, per_partition: int) -> dict[str, float]:
    """Our per-record costs over partition 0, in this process: fetch+decode, Arrow."""
    from aiokafka_lite.integrations.spark import kafka_io
    from aiokafka_lite.integrations.spark.datasource import _arrow_schema, _schema_struct, _to_arrow
    from aiokafka_lite.integrations.spark.datasource_options import parse_source_options
    from aiokafka_lite.integrations.spark.offset_ranges import OffsetRange

    opts = parse_source_options({"bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    rng = OffsetRange(topic, 0, 0, per_partition)
    pa_schema = _arrow_schema(_schema_struct())
    start = time.perf_counter()
    chunks = list(kafka_io.read_range(opts, rng))
    fetch_decode = time.perf_counter() - start
    _to_arrow(chunks[0][:10], pa_schema)  # import pyarrow outside the timing
    start = time.perf_counter()
    for recs in chunks:
        _to_arrow(recs, pa_schema)
    arrow = time.perf_counter() - start
    n = sum(len(c) for c in chunks)
    return {"records": n, "fetch_decode_us": fetch_decode / n * 1e6, "arrow_us": arrow / n * 1e6}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=10_000_000)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=12)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--masters", default="local[2],standalone")
    p.add_argument("--bootstrap", default="")
    args = p.parse_args()
    os.environ.pop("PYSPARK_PYTHON", None)
    broker = None
    bootstrap = args.bootstrap
    if not bootstrap:
        broker, bootstrap = start_embedded_broker()
    topic = create_topic(bootstrap, f"spark-read-bench-{os.getpid()}", args.partitions)
    rows: list[tuple[str, str, float, int]] = []
    fixed: dict[str, float] = {}
    try:
        took = fill(bootstrap, topic, args.partitions, args.records, args.value_size)
        print(f"filled {topic}: {args.records:,} records of {args.value_size} B in {took:.1f} s")
        for master in args.masters.split(","):
            cluster = None
            if master == "standalone":
                from aiokafka_lite.integrations.spark.standalone import StandaloneCluster

                cluster = StandaloneCluster(workers=2, cores=1, memory="1500m").start()
                spark = session(cluster.master_url, cluster_conf())
            else:
                spark = session(master)
            try:
                for fmt in (BUILTIN, OURS):
                    read_query(spark, fmt, bootstrap, topic, args.records, args.value_size)  # warm-up
                    secs, times = best(
                        lambda fmt=fmt, spark=spark: read_query(
                            spark, fmt, bootstrap, topic, args.records, args.value_size
                        ),
                        args.runs,
                    )
                    rows.append((master, fmt, secs, args.records))
                    print(f"  {master} {fmt}: {', '.join(f'{t:.2f}' for t in times)} s", flush=True)
                    fixed[f"{master} {fmt}"], _ = best(
                        lambda fmt=fmt, spark=spark: empty_query(
                            spark, fmt, bootstrap, topic, args.partitions
                        ),
                        2,
                    )
            finally:
                if cluster is not None:
                    session("local[1]").stop()
                    cluster.stop()
        print_table(rows)
        print("\nempty query (planning + task/worker start-up), best of 2:")
        for k, v in fixed.items():
            print(f"  {k:<28} {v:.2f} s")
        b = breakdown(bootstrap, topic, min(args.records // args.partitions, 500_000))
        print(
            f"\nours, per record, one partition in this process ({b['records']:,.0f} records): "
            f"fetch+decode {b['fetch_decode_us']:.2f} us, Arrow conversion {b['arrow_us']:.2f} us"
        )
    finally:
        delete_topics(bootstrap, [topic])
        if broker is not None:
            broker.terminate()
            broker.wait(10)


if __name__ == "__main__":
    main()
