"""Spark data pipelines on aiokafka_lite: a PySpark Python Data Source named ``aiokafka_lite``.

Needs the ``spark`` extra: ``pyspark>=4.0`` with pyarrow (Python data sources exchange
Arrow batches with the JVM; ``pip install 'pyspark[sql]'`` brings it), and Java 17.
Spark's Python workers must run an interpreter with aiokafka_lite installed: in local
mode :func:`register` defaults them to the driver's interpreter; elsewhere set
``PYSPARK_PYTHON`` or ``spark.pyspark.python``, or ship the package with ``--py-files``
(:func:`register` checks, and says which interpreter failed and how to fix it)::

    from aiokafka_lite.integrations.spark import register
    register(spark)
    df = (spark.read.format("aiokafka_lite")
          .option("bootstrap.servers", bootstrap).option("subscribe", "events")
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    (df.select("key", "value").write.format("aiokafka_lite")
       .option("bootstrap.servers", bootstrap).option("topic", "out").mode("append").save())

``spark.readStream`` / ``writeStream`` work the same way (with a ``checkpointLocation``).

Schema (as Spark's built-in Kafka source; ``headers`` is always present, NULL for a
record without headers)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int, headers array<struct<key string, value binary>>

Reading options (names are case-insensitive, as everywhere in Spark):

=====================================  ======================================================
``bootstrap.servers``                  required (``kafka.bootstrap.servers`` works too)
``subscribe``                          comma-separated topics
``subscribePattern``                   regex over topic names (internal topics excluded)
``assign``                             ``{"topic": [0, 1]}``; exactly one of the three
``startingOffsets``                    ``earliest`` (batch default), ``latest`` (streaming
                                       default) or ``{"topic": {"0": 23, "1": -2}}`` with
                                       -2 = earliest, -1 = latest; unnamed partitions use the
                                       default
``endingOffsets``                      batch only: ``latest`` (default) or JSON (-1 = latest)
``startingTimestamp`` /                first offset with a timestamp >= this (ms), for all
``endingTimestamp``                    partitions; wins over the JSON options
``startingOffsetsByTimestamp`` /       the same per partition, ``{"topic": {"0": ms}}``
``endingOffsetsByTimestamp``
``startingOffsetsByTimestampStrategy`` ``error`` (default: fail when no record is that new)
                                       or ``latest``
``maxRecordsPerPartition``             split a partition's range into Spark partitions of at
                                       most this many offsets (parallelism)
``minPartitions``                      split big ranges until there are at least this many
``maxOffsetsPerTrigger``               streaming: offsets per micro-batch (pyspark >= 4.2),
                                       prorated over the partitions by backlog exactly
                                       as the built-in source does
``minOffsetsPerTrigger`` /             streaming: skip a trigger while fewer new offsets
``maxTriggerDelay``                    are available, unless the delay (default ``15m``)
                                       passed since the last batch (as the built-in)
``isolation.level``                    ``read_uncommitted`` (default) or ``read_committed``
``failOnDataLoss``                     ``true`` (default): fail when offsets to read were
                                       deleted; ``false``: skip them
``kafkaConsumer.pollTimeoutMs``        fail a task that makes no progress this long (120000)
``kafka.*``                            client settings, see below
=====================================  ======================================================

``kafka.``-prefixed options are client settings named as in the Java client, mapped to
ours by replacing dots with underscores (``kafka.client.id``, ``kafka.request.timeout.ms``,
``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.fetch.max.bytes``,
``kafka.max.partition.fetch.bytes`` ... and, for writing, producer settings such as
``kafka.acks``, ``kafka.linger.ms``, ``kafka.compression.type``). Credentials come from
``kafka.sasl.jaas.config`` (``... required username="u" password="p";``) or
``kafka.sasl.plain.username``/``password``; TLS from PEM files:
``kafka.ssl.truststore.location`` (or ``kafka.ssl.ca.location``),
``kafka.ssl.keystore.location``/``kafka.ssl.certificate.location``,
``kafka.ssl.key.location``, ``kafka.ssl.key.password``, and
``kafka.ssl.endpoint.identification.algorithm=`` (empty) to skip the hostname check.
Unknown names, JKS stores and settings the source owns (``kafka.group.id``,
``kafka.auto.offset.reset``, (de)serializers) are a ``ConfigError``.

Guarantees:

* batch reads are exact: offset ranges are resolved once on the driver (metadata +
  ListOffsets); each Spark task reads one range ``[start, end)`` of one partition with a
  consumer on manual assignment (no group, no commits) and stops at its end; re-running
  a task reads the same records;
* streaming reads use per-partition offsets (``{"topic": {"0": 42}}``) as the stream
  offset, kept in Spark's checkpoint only (nothing is committed to Kafka); a restarted
  query resumes from the checkpoint without losing or repeating records in the read;
  partitions that appear later (new topics matching the pattern, added partitions) are
  read from their earliest offset. ``Trigger.AvailableNow`` is supported (pyspark >= 4.2);
* writing is **at-least-once**, in batch and streaming: each task produces its rows with
  one idempotent producer and flushes before it reports success (a failed delivery
  fails the task with the Kafka error), but a retried task or micro-batch writes its
  rows again, and records of successful tasks stay when a job aborts. Rows need
  ``value`` (binary or string); ``key`` (binary/string), ``topic`` (string; overrides
  the ``topic`` option), ``partition`` (int) and ``headers`` (as in the read schema)
  are optional, other columns are ignored. Spark hands the sink Arrow record batches
  (DataSourceArrowWriter). Each task's commit message carries its delivered-record
  counts per partition (logged by the driver).

The guide (docs/guide/spark.md) covers the workers' interpreter, shipping the package to
a cluster, and every difference from Spark's built-in Kafka connector.

Only :func:`register` and :class:`KafkaDataSource` need pyspark; option parsing and
offset planning (:mod:`.options`, :mod:`.offsets`) and the Kafka I/O
(:mod:`.kafka_io`) import without it.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

__all__ = ["KafkaDataSource", "register"]

if TYPE_CHECKING:
    from aiokafka_lite.integrations.spark.datasource import KafkaDataSource


def _datasource() -> Any:
    try:
        # Spark exchanges Python data source batches as Arrow: fail here, not in a task.
        if importlib.util.find_spec("pyarrow") is None:
            raise ImportError("No module named 'pyarrow'")
        from aiokafka_lite.integrations.spark import datasource
    except ImportError as exc:
        raise ImportError(
            "aiokafka_lite.integrations.spark needs pyspark>=4.0 with pyarrow: "
            f"pip install 'aiokafka_lite[spark]' or 'pyspark[sql]' ({exc})"
        ) from exc
    return datasource


def register(spark: Any, check_workers: bool = True) -> None:
    """Register the ``aiokafka_lite`` format with a SparkSession.

    Also sets the Python workers' interpreter when nothing is configured and Spark allows
    it (local mode: the driver's interpreter) and, with ``check_workers``, checks that
    the workers can import aiokafka_lite: a broken set-up raises
    :class:`~aiokafka_lite.integrations.spark.workers.SparkWorkerSetupError` naming the interpreter
    and the fixes (``PYSPARK_PYTHON``, ``spark.pyspark.python``, ``--py-files``/``--archives``).
    """
    _datasource().register(spark, check_workers=check_workers)


def __getattr__(name: str) -> Any:
    if name == "KafkaDataSource":
        return _datasource().KafkaDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
