"""The ``aiokafka_lite`` PySpark data source in Spark local mode: batch reads of exact and
chunked ranges, batch writes read back, a streaming query restarted from its
checkpoint, and the example pipeline end to end.

One SparkSession (``local[2]``) serves the whole module; each test gets its Kafka from
``kafka_bootstrap`` (the embedded broker in a thread, which Spark's Python workers reach
over TCP, or Apache Kafka with --kafka=apache); topics are unique per test. pyspark and
pyarrow are required (the spark extra): without them these tests error out rather than
skip.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest
from spark_testlib import create_topic, produce, read_all, run_to_end, spark, unique, values

from aiokafka_lite.admin import Admin
from aiokafka_lite.core.structs import TopicPartition as TP

pytestmark = pytest.mark.spark

_ = spark  # a session fixture

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"
# Record timestamps: the start of the previous hour. Not a fixed date: a broker's time-based
# retention (7 days by default) deletes records whose timestamps are older, and Apache
# Kafka does so at its first retention check after start-up, under a running test.
BASE_MS = (int(time.time()) // 3600 - 1) * 3600 * 1000


def reader(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("aiokafka_lite").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def as_tuples(rows: list[Any]) -> list[tuple[Any, ...]]:
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
                if r.headers is not None
                else None,
            )
            for r in rows
        ),
        key=lambda t: (t[2], t[3], t[4]),
    )


def test_batch_read_exact_ranges(spark: Any, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, unique("read"), 3)
    rows = []
    for part in range(3):
        for i in range(10):
            hdrs = [("i", str(i).encode()), ("nil", None)] if i % 4 == 0 else None
            key = f"k{i}".encode() if i % 3 else None
            rows.append((part, key, f"v{part}-{i}".encode(), hdrs, BASE_MS + 1000 * i))
    produce(kafka_bootstrap, topic, rows)

    df = reader(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 2, "1": -2, "2": 9}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 5, "1": -1}}}}',
    )
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    got = as_tuples(df.collect())

    def expected(part: int, i: int) -> tuple[Any, ...]:
        ts = dt.datetime.fromtimestamp((BASE_MS + 1000 * i) / 1000)  # PySpark returns local naive times
        hdrs = [("i", str(i).encode()), ("nil", None)] if i % 4 == 0 else None
        key = f"k{i}".encode() if i % 3 else None
        return (key, f"v{part}-{i}".encode(), topic, part, i, ts, 0, hdrs)

    want = [expected(0, i) for i in range(2, 5)] + [expected(1, i) for i in range(10)] + [expected(2, 9)]
    assert got == want
    # SQL over the source works too, and nothing was consumed "for good": same result again.
    df.createOrReplaceTempView("kafka_exact")
    by_part = spark.sql(
        "SELECT partition, count(*) AS n FROM kafka_exact GROUP BY partition ORDER BY partition"
    )
    assert [(r.partition, r.n) for r in by_part.collect()] == [(0, 3), (1, 10), (2, 1)]


def test_batch_read_chunked_ranges(spark: Any, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, unique("chunks"), 2)
    produce(kafka_bootstrap, topic, values({0: 20, 1: 9}))
    df = reader(spark, kafka_bootstrap, subscribe=topic, maxRecordsPerPartition="7")
    assert df.rdd.getNumPartitions() == 3 + 2
    got = sorted(
        (r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect()
    )
    want = sorted(
        [(0, i, f"v-0-{i}".encode()) for i in range(20)] + [(1, i, f"v-1-{i}".encode()) for i in range(9)]
    )
    assert got == want  # every record exactly once across the chunks
    # Each Spark partition holds one contiguous piece of one Kafka partition.
    pieces = (
        df.select("partition", "offset")
        .rdd.mapPartitions(lambda it: [sorted((r.partition, r.offset) for r in it)])
        .collect()
    )
    assert sorted(len(p) for p in pieces) == [4, 5, 6, 7, 7]
    for piece in pieces:
        assert len({p for p, _ in piece}) == 1
        offsets = [o for _, o in piece]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_batch_write_then_read_back(spark: Any, kafka_bootstrap: str) -> None:
    out = create_topic(kafka_bootstrap, unique("out"), 2)
    side = create_topic(kafka_bootstrap, unique("side"), 1)
    data = [
        (
            f"k{i}" if i % 2 else None,
            f"value {i}",
            side if i % 5 == 0 else None,
            (i % 2) if i % 5 else None,
            [(f"h{i}", f"x{i}".encode())] if i % 3 == 0 else [],
        )
        for i in range(60)
    ]
    df = spark.createDataFrame(
        data,
        "key string, value string, topic string, partition int, headers array<struct<key: string, value: binary>>",
    ).repartition(2)
    df.write.format("aiokafka_lite").option("bootstrap.servers", kafka_bootstrap).option("topic", out).mode(
        "append"
    ).save()
    back = reader(spark, kafka_bootstrap, subscribe=f"{out},{side}").collect()
    assert len(back) == 60
    by_value = {bytes(r.value).decode(): r for r in back}
    for key, value, topic, partition, headers in data:
        r = by_value[value]
        assert r.topic == (topic or out)
        if partition is not None:
            assert r.partition == partition
        assert (bytes(r.key).decode() if r.key is not None else None) == key
        assert [(h.key, bytes(h.value)) for h in (r.headers or [])] == headers
    # Records read back independently of Spark agree.
    plain = read_all(kafka_bootstrap, [TP(out, 0), TP(out, 1), TP(side, 0)], 60)
    assert sorted(r.value for r in plain) == sorted(v.encode() for _, v, _, _, _ in data)


def test_write_errors(spark: Any, kafka_bootstrap: str) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    topic = create_topic(kafka_bootstrap, unique("one"), 1)
    ok = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="append-only"):
        ok.write.format("aiokafka_lite").option("bootstrap.servers", kafka_bootstrap).option(
            "topic", topic
        ).mode("overwrite").save()
    no_value = spark.createDataFrame([("a",)], "payload string")
    with pytest.raises(Exception, match="needs a 'value' column"):
        no_value.write.format("aiokafka_lite").option("bootstrap.servers", kafka_bootstrap).option(
            "topic", topic
        ).mode("append").save()
    # A failing task carries the Kafka error: partition 7 does not exist.
    bad = spark.createDataFrame([("a", 0), ("b", 7)], "value string, partition int").coalesce(1)
    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        bad.write.format("aiokafka_lite").option("bootstrap.servers", kafka_bootstrap).option(
            "topic", topic
        ).option("kafka.max.block.ms", "500").mode("append").save()
    assert "UnknownTopicOrPartitionError" in str(info.value)
    assert "partition 7" in str(info.value)


def test_streaming_restart_from_checkpoint(spark: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    tag = unique("st")
    first = create_topic(kafka_bootstrap, f"{tag}-a", 2)
    produce(kafka_bootstrap, first, values({0: 14, 1: 11}))
    seen: list[tuple[int, list[tuple[str, int, int]]]] = []

    def collect(batch: Any, batch_id: int) -> None:
        rows = batch.select("topic", "partition", "offset").collect()
        seen.append((batch_id, sorted((r.topic, r.partition, r.offset) for r in rows)))

    def run() -> None:
        query = run_to_end(
            lambda: (
                spark.readStream.format("aiokafka_lite")
                .option("bootstrap.servers", kafka_bootstrap)
                .option("subscribePattern", f"{tag}-.*")
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "10")
                .load()
                .writeStream.foreachBatch(collect)
                .option("checkpointLocation", str(tmp_path / "read-ck"))
                .trigger(availableNow=True)
                .start()
            ),
            120,
        )
        progress.extend(query.recentProgress)

    progress: list[Any] = []
    run()
    # 25 records (14 + 11), at most 10 per micro-batch, prorated as Spark's built-in source
    # does (each partition's share rounded down): 5 + 4, 5 + 4, then the last 4 + 3.
    assert [len(rows) for _, rows in seen] == [9, 9, 7]
    # The progress shows how far the topic goes (latestOffset) beside what each batch read.
    first_batch = next(p for p in progress if p["numInputRows"] > 0)["sources"][0]
    as_dict = [
        json.loads(o) if isinstance(o, str) else o
        for o in (first_batch["latestOffset"], first_batch["endOffset"])
    ]
    assert as_dict == [{first: {"0": 14, "1": 11}}, {first: {"0": 5, "1": 4}}]
    # More data and a new matching topic while the query is down; the restart resumes
    # from the checkpoint: only the new records, none twice, none lost.
    produce(kafka_bootstrap, first, values({1: 6}, prefix="later"))
    second = create_topic(kafka_bootstrap, f"{tag}-b", 1)
    produce(kafka_bootstrap, second, values({0: 3}))
    before = len(seen)
    run()
    later = [row for _, rows in seen[before:] for row in rows]
    assert sorted(later) == sorted(
        [(first, 1, o) for o in range(11, 17)] + [(second, 0, o) for o in range(3)]
    )
    everything = [row for _, rows in seen for row in rows]
    assert len(everything) == len(set(everything)) == 25 + 9
    assert [b for b, _ in seen] == list(range(len(seen)))  # batch ids continue across the restart

    # Streaming write: copy the stream to another topic (at-least-once; exact in a clean run).
    sink = create_topic(kafka_bootstrap, f"{tag}-copy-out", 1)
    query = run_to_end(
        lambda: (
            spark.readStream.format("aiokafka_lite")
            .option("bootstrap.servers", kafka_bootstrap)
            .option("subscribe", first)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value", "headers")
            .writeStream.format("aiokafka_lite")
            .option("bootstrap.servers", kafka_bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", str(tmp_path / "write-ck"))
            .trigger(availableNow=True)
            .start()
        ),
        120,
    )
    assert sum(p["sink"]["numOutputRows"] for p in query.recentProgress) == 31
    copied = read_all(kafka_bootstrap, [TP(sink, 0)], 31)
    source_values = [r.value for r in read_all(kafka_bootstrap, [TP(first, 0), TP(first, 1)], 31)]
    assert sorted(r.value for r in copied) == sorted(source_values)


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("spark_pipeline_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_example_pipeline_end_to_end(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example()
    result = example.main(["--events", "400"], spark=spark)  # starts its own broker process
    check_example_result(example, result, capsys.readouterr().out)


def test_example_pipeline_against_a_given_cluster(
    spark: Any, kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example()
    result = example.main(["--events", "400", "--bootstrap", kafka_bootstrap], spark=spark)
    check_example_result(example, result, capsys.readouterr().out)

    async def topics() -> list[str]:
        async with Admin(kafka_bootstrap) as admin:
            return await admin.list_topics()

    assert not set(asyncio.run(topics())) & set(result["topics"])  # its own topics, deleted at the end


def check_example_result(example: Any, result: dict[str, Any], out: str) -> None:
    want = example.expected_stats(result["events"])
    got = {
        (r["user"], int(r["minute"].timestamp() * 1000)): (r["events"], r["total"]) for r in result["stats"]
    }
    assert got == want
    assert sum(n for n, _ in got.values()) == 400
    written = {(w["user"], w["minute"]): (w["events"], w["total"]) for w in result["written"]}
    assert len(result["written"]) == len(want)
    assert sorted(written.values()) == sorted(want.values())
    assert "produced 400 events" in out and f"wrote {len(want)} result records" in out


def test_arrow_and_tuple_conversions_agree() -> None:
    from aiokafka_lite.consume import Record
    from aiokafka_lite.integrations.spark import datasource as ds
    from aiokafka_lite.wire.records import TimestampType

    recs = [
        Record("t", 3, 10, None, b"a", (), -1, TimestampType.NO_TIMESTAMP, None),
        Record("t", 3, 11, b"k", b"", (("h", b"1"), ("n", None)), BASE_MS, TimestampType.LOG_APPEND_TIME, 2),
        Record("t", 3, 12, b"k2", None, (), BASE_MS + 1, TimestampType.CREATE_TIME, 2),
    ]
    pa_schema = ds._arrow_schema(ds._schema_struct())
    batch = ds._to_arrow(recs, pa_schema)
    assert batch.schema.equals(pa_schema)
    utc = dt.UTC
    from_arrow = [
        (
            r["key"],
            r["value"],
            r["topic"],
            r["partition"],
            r["offset"],
            r["timestamp"].astimezone(utc),
            r["timestampType"],
            [(h["key"], h["value"]) for h in r["headers"]] if r["headers"] is not None else None,
        )
        for r in batch.to_pylist()
    ]
    assert from_arrow == list(ds._to_tuples(recs))
    assert from_arrow[1] == (
        b"k",
        b"",
        "t",
        3,
        11,
        dt.datetime.fromtimestamp(BASE_MS / 1000, utc),
        1,
        [("h", b"1"), ("n", None)],
    )
    assert from_arrow[0][5] == dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=utc)
    # Only headerless chunks: the column is all NULL.
    assert ds._to_arrow(recs[2:], pa_schema).column(7).null_count == 1


def test_sink_arrow_and_row_paths_agree() -> None:
    """The Arrow writer (what Spark uses) and the Row writer turn the same data into the
    same producer tuples: string/binary keys and values, topic and partition columns,
    headers with string values, nulls."""
    import pyarrow as pa
    from pyspark.sql import Row
    from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

    from aiokafka_lite.integrations.spark import datasource as ds

    header = StructType([StructField("key", StringType()), StructField("value", StringType())])
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", StringType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    data = [
        ("k1", "v1", None, 2, [("h", "x"), ("n", None)]),
        (None, "v2", "other", None, None),
        ("k3", None, None, 0, []),
    ]
    plan = ds._row_plan(schema, "default")
    batch = pa.RecordBatch.from_pylist(
        [dict(zip(schema.fieldNames(), row, strict=True)) for row in data],
        schema=pa.schema(
            [
                ("key", pa.string()),
                ("value", pa.string()),
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))),
            ]
        ),
    )
    rows = [Row(*r) for r in data]
    via_rows = list(ds._rows(iter(rows), plan, "default"))
    via_arrow = list(ds._arrow_rows(iter([batch, batch.slice(0, 0)]), plan, "default"))
    assert via_arrow == via_rows
    assert via_arrow[0] == ("default", b"v1", b"k1", 2, [("h", b"x"), ("n", None)])
    assert via_arrow[1] == ("other", b"v2", None, None, None)
    assert via_arrow[2] == ("default", None, b"k3", 0, None)
    # With topic, partition or headers columns, chunks are runs of one topic and partition.
    chunks = list(ds._arrow_chunks(iter([batch]), plan, "default"))
    assert [(c[0], c[1], c[2], c[3]) for c in chunks] == [
        ("default", 2, [b"v1"], [b"k1"]),
        ("other", None, [b"v2"], [None]),
        ("default", 0, [None], [b"k3"]),
    ]


def test_sink_arrow_chunks_are_whole_columns_for_key_and_value() -> None:
    """The usual write (key and value to the ``topic`` option) hands each Arrow batch's
    columns to the producer whole, strings cast to bytes, nulls kept."""
    import pyarrow as pa
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from aiokafka_lite.integrations.spark import datasource as ds

    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    plan = ds._row_plan(schema, "t")
    batch = pa.record_batch(
        [pa.array(["k1", None, "ké"]), pa.array([b"v1", b"v2", None], pa.binary())], names=["key", "value"]
    )
    chunks = list(ds._arrow_chunks(iter([batch, batch.slice(0, 0), batch.slice(1, 1)]), plan, "t"))
    assert chunks == [
        ("t", None, [b"v1", b"v2", None], [b"k1", None, "ké".encode()], None),
        ("t", None, [b"v2"], [None], None),
    ]
    value_only = ds._row_plan(StructType([StructField("value", StringType())]), "t")
    text = pa.record_batch([pa.array(["a", "b"])], names=["value"])
    assert list(ds._arrow_chunks(iter([text]), value_only, "t")) == [("t", None, [b"a", b"b"], None, None)]
