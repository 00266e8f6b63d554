"""The PySpark Python Data Source ``aiokafka_lite`` (needs ``pyspark>=4.0`` with pyarrow).

Spark runs the driver-side parts (schema, planning offset ranges, streaming offsets) in
a Python process next to the JVM, and ``read``/``write`` in Python worker processes.
Every object handed to Spark is picklable plain data (options, offset ranges); each
read or write task starts its own event loop and closes its client before returning.
The Kafka logic itself lives in :mod:`aiokafka_lite.integrations.spark.kafka_io`.
"""

from __future__ import annotations

import datetime as _dt
import logging
import operator
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from aiokafka_lite.consume import Record
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.integrations.spark import kafka_io, workers
from aiokafka_lite.integrations.spark.datasource_options import (
    SinkOptions,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from aiokafka_lite.integrations.spark.offset_ranges import (
    OffsetRange,
    delay_batch,
    from_offset_dict,
    limit_end_offsets,
    plan_ranges,
    split_ranges,
    to_offset_dict,
)

try:  # pyspark >= 4.0 (stream: 4.1?): writers that receive Arrow record batches, not Rows
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter

    _HAVE_ARROW_WRITERS = True
except ImportError:  # pragma: no cover - older Spark
    _HAVE_ARROW_WRITERS = False

try:  # Spark >= 4.2: admission control (maxOffsetsPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    _HAVE_READ_LIMITS = True
except ImportError:  # pragma: no cover - older Spark
    _HAVE_READ_LIMITS = False

__all__ = ["KafkaCommitMessage", "KafkaDataSource", "register"]

log = logging.getLogger("aiokafka_lite.integrations.spark")

_UTC = _dt.UTC
_OFFSET, _KEY, _VALUE, _HEADERS, _TIMESTAMP, _TIMESTAMP_TYPE = (operator.itemgetter(i) for i in range(2, 8))
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)


def register(spark: Any, check_workers: bool = True) -> None:
    """Make ``spark.read/readStream.format("aiokafka_lite")`` and the writers available.

    First picks the workers' interpreter where the user configured none
    (:func:`~aiokafka_lite.integrations.spark.workers.configure_worker_python`: ``spark.pyspark.python``,
    else the driver's own interpreter in local mode), then, with ``check_workers``, runs
    a one-task-per-core probe job so that a worker interpreter without aiokafka_lite is
    one clear :class:`~aiokafka_lite.integrations.spark.workers.SparkWorkerSetupError` here rather
    than a Java stack trace in the first query.
    """
    sc = _spark_context(spark)
    if sc is not None:
        chosen = workers.configure_worker_python(sc)
        if chosen is not None:
            log.info("aiokafka_lite: Spark's Python workers will run %s", chosen)
        workers.share_py_files_with_driver_runners(sc)
    spark.dataSource.register(KafkaDataSource)
    if check_workers and sc is not None:
        workers.check_workers(spark)


def _spark_context(spark: Any) -> Any:
    """The SparkContext behind ``spark`` (None for a Spark Connect session, which has none)."""
    try:
        return spark.sparkContext
    except Exception:
        return None


# --------------------------------------------------------------------------------------
# Records -> Spark rows


def _arrow_schema(schema: StructType) -> Any:
    """The Arrow schema Spark expects for ``schema`` (None when it cannot be computed here)."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(schema, timezone="UTC")
    except Exception:  # pragma: no cover - pyarrow or the function missing/changed: use tuples
        return None


def _to_arrow(recs: list[Record], pa_schema: Any) -> Any:
    """One Arrow record batch from a chunk of records of one partition.

    Column by column (``map(itemgetter)`` is several times cheaper than ``zip(*recs)``
    over thousands of rows); topic and partition are constant within a chunk.
    """
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]

    t = pa_schema.types
    n = len(recs)
    first = recs[0]
    headers = list(map(_HEADERS, recs))
    arrays = [
        pa.array(list(map(_KEY, recs)), t[0]),
        pa.array(list(map(_VALUE, recs)), t[1]),
        pa.repeat(pa.scalar(first.topic, t[2]), n),
        pa.repeat(pa.scalar(first.partition, t[3]), n),
        pa.array(list(map(_OFFSET, recs)), t[4]),
        pa.array(list(map(_TIMESTAMP, recs)), pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(t[5]),
        pa.array(list(map(_TIMESTAMP_TYPE, recs)), t[6]),
        pa.array([h or None for h in headers], t[7]) if any(headers) else pa.nulls(n, t[7]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=pa_schema)


def _to_tuples(recs: list[Record]) -> Iterator[tuple[Any, ...]]:
    delta = _dt.timedelta
    for r in recs:
        yield (
            r.key,
            r.value,
            r.topic,
            r.partition,
            r.offset,
            _EPOCH + delta(milliseconds=r.timestamp_ms),
            int(r.timestamp_type),
            [(k, v) for k, v in r.headers] if r.headers else None,
        )


def _read(opts: SourceOptions, partition: InputPartition, schema: StructType) -> Iterator[Any]:
    r = partition.value
    if r is None:
        # partitions() planned no range (nothing to read): Spark still runs one task with
        # an empty InputPartition.
        return
    if not isinstance(r, OffsetRange):
        raise ConfigError(f"unexpected input partition {partition!r}")
    pa_schema = _arrow_schema(schema)
    for recs in kafka_io.read_range(opts, r):
        if pa_schema is not None:
            yield _to_arrow(recs, pa_schema)
        else:
            yield from _to_tuples(recs)


def _partitions(ranges: Sequence[OffsetRange]) -> list[InputPartition]:
    return [InputPartition(r) for r in ranges]


def _schema_struct() -> StructType:
    """``SCHEMA_DDL`` as a StructType (built by hand: parsing DDL needs a live SparkContext)."""
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    return StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
            StructField("headers", ArrayType(header)),
        ]
    )


def _check_read_schema(schema: StructType) -> None:
    expected = _schema_struct()
    if [f.name for f in schema.fields] != expected.fieldNames() or any(
        a.dataType != b.dataType for a, b in zip(schema.fields, expected.fields, strict=True)
    ):
        raise ConfigError(
            f"the aiokafka_lite source has a fixed schema ({kafka_io.SCHEMA_DDL}); do not set one"
        )


# --------------------------------------------------------------------------------------
# Readers


class KafkaBatchReader(DataSourceReader):  # type: ignore[misc,unused-ignore]
    """Batch read: offset ranges resolved once, on the driver, when Spark plans the query."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        ranges = kafka_io.plan_batch(self.opts)
        log.info(
            "aiokafka_lite batch read: %d range(s), %d offsets", len(ranges), sum(r.size for r in ranges)
        )
        return _partitions(ranges)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, partition, self.schema)


class KafkaStreamReader(DataSourceStreamReader):  # type: ignore[misc,unused-ignore]
    """Micro-batch read; the stream offset is ``{topic: {partition: next offset}}``.

    Partitions that appear later (new topics matching the subscription, added
    partitions) are read from their earliest offset. Progress lives in Spark's
    checkpoint only: ``commit`` commits nothing to Kafka.
    """

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._target: dict[Any, int] | None = None  # Trigger.AvailableNow cap
        self._last_trigger_ms = 0  # minOffsetsPerTrigger: when a batch last ran
        self._latest_seen: dict[Any, int] | None = None  # for reportLatestOffset

    def initialOffset(self) -> dict[str, Any]:
        return to_offset_dict(kafka_io.initial_offsets(self.opts))

    def _max_rows(self, limit: Any) -> int | None:
        if not _HAVE_READ_LIMITS:
            return None
        if isinstance(limit, ReadMaxRows):
            return int(limit.max_rows)
        return None  # ReadAllAvailable (or a limit kind a Kafka source has no use for)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        latest = kafka_io.latest_offsets(self.opts)
        self._latest_seen = latest
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items() if tp in self._target}
        if start is None:
            return to_offset_dict(latest)
        begin = from_offset_dict(start)
        min_rows = self.opts.min_offsets_per_trigger
        if min_rows is not None and self._target is None:  # Trigger.AvailableNow ignores it
            new_records = sum(max(off - begin.get(tp, 0), 0) for tp, off in latest.items())
            delay, self._last_trigger_ms = delay_batch(
                new_records,
                min_rows,
                int(time.time() * 1000),
                self._last_trigger_ms,
                self.opts.max_trigger_delay_ms,
            )
            if delay:
                return dict(start)  # no new offsets: Spark runs no batch this trigger
        max_rows = self._max_rows(limit)
        if max_rows is not None:
            new = [tp for tp in latest if tp not in begin]
            base = dict(begin)
            if new:
                base.update(kafka_io.earliest_offsets(self.opts, new))
            end = limit_end_offsets(base, latest, max_rows)
        else:
            end = dict(latest)
        for tp, off in begin.items():
            end.setdefault(tp, off)  # a partition missing from metadata now is not restarted later
        return to_offset_dict(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The end offsets seen when planning the last micro-batch, whatever the read
        limits took of them: the query progress shows them as ``latestOffset``, next to
        ``endOffset``, as it does for the built-in source (no extra round trip)."""
        return None if self._latest_seen is None else to_offset_dict(self._latest_seen)

    def getDefaultReadLimit(self) -> Any:
        if _HAVE_READ_LIMITS and self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if _HAVE_READ_LIMITS:
            return ReadAllAvailable()
        return super().getDefaultReadLimit()  # pragma: no cover

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = kafka_io.latest_offsets(self.opts)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = from_offset_dict(start)
        stop = from_offset_dict(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            found = kafka_io.earliest_offsets(self.opts, new)
            for tp in new:
                begin[tp] = found.get(tp, 0)
        ranges = plan_ranges(begin, stop, on_reversed="error" if self.opts.fail_on_data_loss else "skip")
        return _partitions(split_ranges(ranges, max_records=self.opts.max_records_per_partition))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        log.debug("aiokafka_lite stream: batch up to %s processed", end)


if _HAVE_READ_LIMITS:
    # Advertise Trigger.AvailableNow support only where Spark knows the mixin.
    class _AvailableNowStreamReader(KafkaStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc,unused-ignore]
        pass

    _StreamReaderClass: type[KafkaStreamReader] = _AvailableNowStreamReader
else:  # pragma: no cover
    _StreamReaderClass = KafkaStreamReader


# --------------------------------------------------------------------------------------
# Writers


@dataclass
class KafkaCommitMessage(WriterCommitMessage):  # type: ignore[misc,unused-ignore]
    """Sent by each write task to the driver: records delivered per (topic, partition)."""

    counts: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class _RowPlan:
    """Where the writer finds each field in a row (column indexes), and how to convert it."""

    value: int
    value_is_str: bool
    key: int | None = None
    key_is_str: bool = False
    topic: int | None = None
    partition: int | None = None
    headers: int | None = None
    header_value_is_str: bool = False


def _bin_or_str(name: str, dt: DataType) -> bool:
    if isinstance(dt, BinaryType):
        return False
    if isinstance(dt, StringType):
        return True
    raise ConfigError(f"column {name!r} must be binary or string, not {dt.simpleString()}")


def _row_plan(schema: StructType, default_topic: str | None) -> _RowPlan:
    idx = {f.name.lower(): i for i, f in enumerate(schema.fields)}
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in idx:
        raise ConfigError(
            f"the data to write needs a 'value' column (binary or string); columns: {schema.fieldNames()}"
        )
    value_is_str = _bin_or_str("value", types["value"])
    key = idx.get("key")
    key_is_str = _bin_or_str("key", types["key"]) if key is not None else False
    topic = idx.get("topic")
    if topic is not None and not isinstance(types["topic"], StringType):
        raise ConfigError(f"column 'topic' must be a string, not {types['topic'].simpleString()}")
    if topic is None and default_topic is None:
        raise ConfigError("no topic: set option 'topic' or provide a 'topic' column")
    partition = idx.get("partition")
    if partition is not None and not isinstance(types["partition"], IntegerType | LongType | ShortType):
        raise ConfigError(f"column 'partition' must be an integer, not {types['partition'].simpleString()}")
    headers = idx.get("headers")
    header_value_is_str = False
    if headers is not None:
        ht = types["headers"]
        ok = (
            isinstance(ht, ArrayType)
            and isinstance(ht.elementType, StructType)
            and [f.name.lower() for f in ht.elementType.fields] == ["key", "value"]
            and isinstance(ht.elementType.fields[0].dataType, StringType)
        )
        if not ok:
            raise ConfigError(
                f"column 'headers' must be array<struct<key: string, value: binary>>, not {ht.simpleString()}"
            )
        assert isinstance(ht, ArrayType) and isinstance(ht.elementType, StructType)
        header_value_is_str = _bin_or_str("headers.value", ht.elementType.fields[1].dataType)
    return _RowPlan(
        idx["value"], value_is_str, key, key_is_str, topic, partition, headers, header_value_is_str
    )


def _rows(rows: Iterator[Any], plan: _RowPlan, default_topic: str | None) -> Iterator[kafka_io.OutRow]:
    """Spark rows -> (topic, value, key, partition, headers) tuples for the producer."""
    vi, ki, ti, pi, hi = plan.value, plan.key, plan.topic, plan.partition, plan.headers
    vs, ks, hs = plan.value_is_str, plan.key_is_str, plan.header_value_is_str
    for row in rows:
        value = row[vi]
        if vs and value is not None:
            value = value.encode()
        key = None
        if ki is not None:
            key = row[ki]
            if ks and key is not None:
                key = key.encode()
        topic = default_topic
        if ti is not None and row[ti] is not None:
            topic = row[ti]
        if topic is None:
            raise ConfigError("a row has a null 'topic' and no 'topic' option is set")
        partition = row[pi] if pi is not None else None
        headers = None
        if hi is not None:
            hv = row[hi]
            if hv:
                headers = [(h[0], h[1].encode() if hs and h[1] is not None else h[1]) for h in hv]
        yield topic, value, key, partition, headers


def _arrow_rows(
    batches: Iterator[Any], plan: _RowPlan, default_topic: str | None
) -> Iterator[kafka_io.OutRow]:
    """Arrow record batches -> (topic, value, key, partition, headers) tuples, column by
    column (``to_pylist`` per column is far cheaper than Spark building a Row per record)."""
    hs = plan.header_value_is_str
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        values = batch.column(plan.value).to_pylist()
        if plan.value_is_str:
            values = [v.encode() if v is not None else None for v in values]
        keys: list[Any] = [None] * n
        if plan.key is not None:
            keys = batch.column(plan.key).to_pylist()
            if plan.key_is_str:
                keys = [k.encode() if k is not None else None for k in keys]
        topics: list[Any] = [None] * n
        if plan.topic is not None:
            topics = batch.column(plan.topic).to_pylist()
        parts: list[Any] = [None] * n
        if plan.partition is not None:
            parts = batch.column(plan.partition).to_pylist()
        headers: list[Any] = [None] * n
        if plan.headers is not None:
            headers = batch.column(plan.headers).to_pylist()
        for value, key, topic, part, hv in zip(values, keys, topics, parts, headers, strict=True):
            if topic is None:
                topic = default_topic
                if topic is None:
                    raise ConfigError("a row has a null 'topic' and no 'topic' option is set")
            out_headers = None
            if hv:
                out_headers = [
                    (h["key"], h["value"].encode() if hs and h["value"] is not None else h["value"])
                    for h in hv
                ]
            yield topic, value, key, part, out_headers


def _arrow_chunks(
    batches: Iterator[Any], plan: _RowPlan, default_topic: str | None
) -> Iterator[kafka_io.OutChunk]:
    """Arrow record batches -> producer chunks. Without topic, partition and headers
    columns (the usual write: key and value to the ``topic`` option) each batch's columns
    go to the producer whole, where keyed records are grouped by partition in one pass;
    otherwise row by row, in runs of one topic and partition."""
    if plan.topic is not None or plan.partition is not None or plan.headers is not None:
        yield from kafka_io.chunks_of(_arrow_rows(batches, plan, default_topic))
        return
    assert default_topic is not None  # _row_plan refuses a schema with neither
    for batch in batches:
        if batch.num_rows == 0:
            continue
        # A string column is UTF-8 already: cast to binary in Arrow (no copy), not .encode() per row.
        value_column = batch.column(plan.value)
        values = (value_column.cast("binary") if plan.value_is_str else value_column).to_pylist()
        keys = None
        if plan.key is not None:
            key_column = batch.column(plan.key)
            keys = (key_column.cast("binary") if plan.key_is_str else key_column).to_pylist()
        yield default_topic, None, values, keys, None


def _write_arrow(sink: SinkOptions, plan: _RowPlan, batches: Iterator[Any]) -> KafkaCommitMessage:
    result = kafka_io.write_chunks(sink, _arrow_chunks(batches, plan, sink.topic))
    return KafkaCommitMessage(result.counts)


def _write(sink: SinkOptions, plan: _RowPlan, iterator: Iterator[Any]) -> KafkaCommitMessage:
    result = kafka_io.write_rows(sink, _rows(iterator, plan, sink.topic))
    return KafkaCommitMessage(result.counts)


def _total(messages: Sequence[Any]) -> int:
    return sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))


class KafkaBatchWriter(DataSourceWriter):  # type: ignore[misc,unused-ignore]
    """Each task: one idempotent producer, flushed before the task reports success."""

    def __init__(self, sink: SinkOptions, plan: _RowPlan) -> None:
        self.sink = sink
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return _write(self.sink, self.plan, iterator)

    def commit(self, messages: list[Any]) -> None:
        log.info("aiokafka_lite write: %d record(s) delivered by %d task(s)", _total(messages), len(messages))

    def abort(self, messages: list[Any]) -> None:
        # Kafka has no rollback: records of successful tasks stay (at-least-once).
        log.warning("aiokafka_lite write aborted; %d record(s) were already delivered", _total(messages))


class KafkaStreamWriter(DataSourceStreamWriter):  # type: ignore[misc,unused-ignore]
    """Micro-batch write, at-least-once: a retried batch may write its records again."""

    def __init__(self, sink: SinkOptions, plan: _RowPlan) -> None:
        self.sink = sink
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return _write(self.sink, self.plan, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        log.info("aiokafka_lite stream write: batch %d delivered %d record(s)", batchId, _total(messages))

    def abort(self, messages: list[Any], batchId: int) -> None:
        log.warning(
            "aiokafka_lite stream write: batch %d aborted after %d record(s)", batchId, _total(messages)
        )


if _HAVE_ARROW_WRITERS:
    # Spark hands these writers Arrow record batches instead of one Row object per record.

    class KafkaBatchArrowWriter(KafkaBatchWriter, DataSourceArrowWriter):  # type: ignore[misc,unused-ignore]
        def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
            return _write_arrow(self.sink, self.plan, iterator)

    class KafkaStreamArrowWriter(KafkaStreamWriter, DataSourceStreamArrowWriter):  # type: ignore[misc,unused-ignore]
        def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
            return _write_arrow(self.sink, self.plan, iterator)

    _BatchWriterClass: type[KafkaBatchWriter] = KafkaBatchArrowWriter
    _StreamWriterClass: type[KafkaStreamWriter] = KafkaStreamArrowWriter
else:  # pragma: no cover
    _BatchWriterClass = KafkaBatchWriter
    _StreamWriterClass = KafkaStreamWriter


# --------------------------------------------------------------------------------------
# The data source


class KafkaDataSource(DataSource):  # type: ignore[misc,unused-ignore]
    """``format("aiokafka_lite")``: Kafka topics as a Spark source and sink, on aiokafka_lite."""

    @classmethod
    def name(cls) -> str:
        return "aiokafka_lite"

    def schema(self) -> str:
        return kafka_io.SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_read_schema(schema)
        return KafkaBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_read_schema(schema)
        return _StreamReaderClass(parse_source_options(self.options, streaming=True), schema)

    def _sink(self, schema: StructType, overwrite: bool) -> tuple[SinkOptions, _RowPlan]:
        if overwrite:
            raise ConfigError("Kafka topics are append-only: use mode('append')")
        sink = parse_sink_options(self.options)
        return sink, _row_plan(schema, sink.topic)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _BatchWriterClass(*self._sink(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return _StreamWriterClass(*self._sink(schema, overwrite))
