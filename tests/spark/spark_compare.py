"""Side-by-side checks of the ``aiokafka_lite`` data source and Spark's built-in ``kafka``
connector (the yardstick) on the same topics and the same Spark session: the same rows
from the same offsets, the same records written. Shared by the local-mode comparison
tests and the standalone-cluster tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from spark_testlib import create_topic, produce, read_all, run_to_end, unique

from aiokafka_lite.core.structs import TopicPartition as TP

# Record timestamps: the start of the previous hour. Not a fixed date: a broker's time-based
# retention (7 days by default) deletes records whose timestamps are older, and Apache
# Kafka does so at its first retention check after start-up, under a running test.
BASE_MS = (int(time.time()) // 3600 - 1) * 3600 * 1000
OURS, BUILTIN = "aiokafka_lite", "kafka"


def reader(spark: Any, fmt: str, bootstrap: str, *, streaming: bool = False, **options: str) -> Any:
    """``spark.read``/``readStream`` of ``fmt`` with the same options for both formats
    (``kafka.bootstrap.servers`` is the name both know; ``includeHeaders`` the built-in
    needs for the ``headers`` column ours always has)."""
    r = (spark.readStream if streaming else spark.read).format(fmt)
    r = r.option("kafka.bootstrap.servers", bootstrap).option("includeHeaders", "true")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def as_tuples(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows as comparable tuples in (topic, partition, offset) order."""
    return sorted(
        (
            (
                bytes(r.key) if r.key is not None else None,
                bytes(r.value),
                r.topic,
                r.partition,
                r.offset,
                r.timestamp,
                r.timestampType,
                [(h.key, bytes(h.value) if h.value is not None else None) for h in r.headers]
                if r.headers
                else [],
            )
            for r in rows
        ),
        key=lambda t: (t[2], t[3], t[4]),
    )


def fill_topic(
    bootstrap: str, name: str, partitions: int = 3, per_partition: int = 10, offset_ms: int = 0
) -> str:
    """A topic with keys (some null), headers (some, one with a null value) and timestamps
    ``BASE_MS + offset_ms + 1000 * i``."""
    topic = create_topic(bootstrap, unique(name), partitions)
    produce(bootstrap, topic, records(partitions, per_partition, offset_ms))
    return topic


def records(partitions: int, per_partition: int, offset_ms: int = 0, tag: str = "v") -> list[Any]:
    rows = []
    for part in range(partitions):
        for i in range(per_partition):
            hdrs = [("i", str(i).encode()), ("nil", None)] if i % 4 == 0 else None
            key = f"k{i}".encode() if i % 3 else None
            rows.append((part, key, f"{tag}{part}-{i}".encode(), hdrs, BASE_MS + offset_ms + 1000 * i))
    return rows


def batch_rows_both(spark: Any, bootstrap: str, **options: str) -> tuple[list[Any], list[Any]]:
    ours = as_tuples(reader(spark, OURS, bootstrap, **options).collect())
    builtin = as_tuples(reader(spark, BUILTIN, bootstrap, **options).collect())
    return ours, builtin


def write_both(spark: Any, bootstrap: str, partitions: int = 3) -> tuple[list[Any], list[Any]]:
    """Write the same DataFrame with each sink to a fresh topic; return what each topic
    holds as (partition, key, value, headers), sorted per partition by offset."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", StringType()),
            StructField("partition", IntegerType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    data = []
    for i in range(24):
        part = i % partitions if i % 2 else None  # half chosen by the key's hash
        headers = [("n", str(i).encode()), ("nil", None)] if i % 5 == 0 else None
        data.append((f"key-{i % 7}", f"value-{i}", part, headers))
    df = spark.createDataFrame(data, schema).repartition(2)
    out = []
    for fmt in (OURS, BUILTIN):
        topic = create_topic(bootstrap, unique(f"write-{fmt}"), partitions)
        (
            df.write.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .mode("append")
            .save()
        )
        got = read_all(bootstrap, [TP(topic, p) for p in range(partitions)], len(data))
        out.append(
            sorted(
                (
                    (r.partition, r.key, r.value, [(k, v) for k, v in r.headers] if r.headers else [])
                    for r in got
                ),
                key=lambda t: (t[0], t[1] or b"", t[2]),
            )
        )
    return out[0], out[1]


def stream_restart_both(spark: Any, bootstrap: str, tmp: Path, partitions: int = 3) -> dict[str, Any]:
    """For each format: a query from a topic to a new topic (readStream -> writeStream, the
    same format on both ends), run with Trigger.AvailableNow and maxOffsetsPerTrigger,
    more records produced, then run again from its checkpoint. Returns per format the
    output topic's records as sorted (key, value) and the number of micro-batches."""
    source = fill_topic(bootstrap, "stream-src", partitions, 6)
    result: dict[str, Any] = {}
    for fmt in (OURS, BUILTIN):
        sink = create_topic(bootstrap, unique(f"stream-out-{fmt}"), partitions)
        checkpoint = tmp / f"checkpoint-{fmt}"
        batches = 0
        for run in range(2):
            if run == 1 and fmt == OURS:
                # produced between the runs, read by both formats' second run
                produce(bootstrap, source, records(partitions, 4, 100_000, tag="w"))
            df = reader(
                spark,
                fmt,
                bootstrap,
                streaming=True,
                subscribe=source,
                startingOffsets="earliest",
                maxOffsetsPerTrigger="9",
            )
            query = run_to_end(
                lambda df=df, fmt=fmt, sink=sink, checkpoint=checkpoint: (
                    df.selectExpr("key", "value", "headers")
                    .writeStream.format(fmt)
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", sink)
                    .option("checkpointLocation", str(checkpoint))
                    .trigger(availableNow=True)
                    .start()
                )
            )
            batches += sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
        got = read_all(bootstrap, [TP(sink, p) for p in range(partitions)], partitions * 10)
        result[fmt] = {
            "records": sorted(((r.key, r.value) for r in got), key=lambda kv: (kv[0] or b"", kv[1])),
            "batches": batches,
        }
    return result


def stream_batches_both(
    spark: Any, bootstrap: str, topic: str, max_offsets: int, tmp: Path
) -> dict[str, Any]:
    """foreachBatch over each format's stream (AvailableNow, maxOffsetsPerTrigger):
    the rows of every micro-batch, in order."""
    result: dict[str, list[list[tuple[Any, ...]]]] = {}
    for fmt in (OURS, BUILTIN):
        batches: list[list[tuple[Any, ...]]] = []

        def collect(batch_df: Any, batch_id: int, into: list[Any] = batches) -> None:
            rows = as_tuples(batch_df.collect())
            if rows:
                into.append(rows)

        df = reader(
            spark,
            fmt,
            bootstrap,
            streaming=True,
            subscribe=topic,
            startingOffsets="earliest",
            maxOffsetsPerTrigger=str(max_offsets),
        )
        checkpoint = str(tmp / f"fb-{fmt}-{time.monotonic_ns()}")
        run_to_end(
            lambda df=df, collect=collect, checkpoint=checkpoint: (
                df.writeStream.foreachBatch(collect)
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
        )
        result[fmt] = batches
    return result
