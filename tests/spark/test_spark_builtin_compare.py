"""The ``aiokafka_lite`` data source against Spark's built-in Kafka connector, in local mode:
the same schema, the same option names and values giving the same rows from the same
offsets (batch and streaming), the same records written. The connector comes from Maven
Central (:mod:`aiokafka_lite.integrations.spark.connector`); the differences that remain are listed in
docs/guide/spark.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_compare import (
    BASE_MS,
    BUILTIN,
    OURS,
    batch_rows_both,
    fill_topic,
    reader,
    stream_batches_both,
    stream_restart_both,
    write_both,
)
from spark_testlib import spark

pytestmark = pytest.mark.spark

_ = spark  # fixture


def test_same_schema(spark: Any, kafka_bootstrap: str) -> None:
    topic = fill_topic(kafka_bootstrap, "cmp-schema", 1, 1)
    ours = reader(spark, OURS, kafka_bootstrap, subscribe=topic).schema
    builtin = reader(spark, BUILTIN, kafka_bootstrap, subscribe=topic).schema
    assert ours.simpleString() == builtin.simpleString()
    assert [f.name for f in ours.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]


def _json(topic: str, offsets: dict[int, int]) -> str:
    inner = ", ".join(f'"{p}": {o}' for p, o in offsets.items())
    return f'{{"{topic}": {{{inner}}}}}'


@pytest.mark.parametrize(
    "case",
    [
        "default",
        "json-offsets",
        "assign",
        "pattern",
        "timestamps",
        "timestamps-by-partition",
        "max-records-per-partition",
        "nothing-to-read",
    ],
)
def test_batch_read_same_rows(spark: Any, kafka_bootstrap: str, case: str) -> None:
    topic = fill_topic(kafka_bootstrap, f"cmp-{case}", 3, 10)
    options: dict[str, str] = {"subscribe": topic}
    if case == "json-offsets":
        options["startingOffsets"] = _json(topic, {0: 2, 1: -2, 2: 9})
        options["endingOffsets"] = _json(topic, {0: 5, 1: -1, 2: -1})
    elif case == "assign":
        options = {"assign": f'{{"{topic}": [0, 2]}}', "startingOffsets": _json(topic, {0: 3, 2: -2})}
    elif case == "pattern":
        options = {"subscribePattern": topic.replace("cmp-pattern", "cmp-patter.")}
    elif case == "timestamps":
        options["startingTimestamp"] = str(BASE_MS + 3000)
        options["endingTimestamp"] = str(BASE_MS + 7000)
    elif case == "timestamps-by-partition":
        # The built-in connector wants every partition named (ours would use the default
        # for the others: a documented difference).
        start = {0: BASE_MS + 5000, 1: BASE_MS, 2: BASE_MS + 8000}
        options["startingOffsetsByTimestamp"] = _json(topic, start)
    elif case == "max-records-per-partition":
        options["maxRecordsPerPartition"] = "4"
    elif case == "nothing-to-read":
        options["endingOffsets"] = _json(topic, {0: 0, 1: 0, 2: 0})
    ours, builtin = batch_rows_both(spark, kafka_bootstrap, **options)
    assert ours == builtin
    if case == "nothing-to-read":
        assert ours == []
    else:
        assert {r[2] for r in ours} == {topic}


def test_streaming_same_rows_per_trigger_limit(spark: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = fill_topic(kafka_bootstrap, "cmp-stream", 3, 10)
    got = stream_batches_both(spark, kafka_bootstrap, topic, 8, tmp_path)
    ours, builtin = got[OURS], got[BUILTIN]
    flat_ours = sorted((r for b in ours for r in b), key=lambda r: (r[3], r[4]))
    flat_builtin = sorted((r for b in builtin for r in b), key=lambda r: (r[3], r[4]))
    assert flat_ours == flat_builtin
    assert len(flat_ours) == 30
    # The same micro-batches, row for row: 8 per trigger over three partitions is 2 offsets
    # per partition (Spark's proration rounds each share down), so 6, 6, 6, 6, 6.
    assert ours == builtin
    assert [len(b) for b in ours] == [6] * 5


def test_streaming_restart_same_records(spark: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    got = stream_restart_both(spark, kafka_bootstrap, tmp_path)
    assert got[OURS]["records"] == got[BUILTIN]["records"]
    assert len(got[OURS]["records"]) == 30  # 18 before the restart, 12 after, none twice
    assert got[OURS]["batches"] == got[BUILTIN]["batches"]


def test_batch_write_same_records(spark: Any, kafka_bootstrap: str) -> None:
    ours, builtin = write_both(spark, kafka_bootstrap)
    assert ours == builtin
    assert len(ours) == 24
