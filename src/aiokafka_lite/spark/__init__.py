"""Spark data pipelines on aiokafka_lite: a PySpark Python Data Source named ``aiokafka_lite``.

Needs the ``spark`` extra (``pyspark>=4.0`` with pyarrow, Java 17)::

    from aiokafka_lite.spark import register
    register(spark)
    df = (spark.read.format("aiokafka_lite")
          .option("bootstrap.servers", bootstrap).option("subscribe", "events")
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    (df.select("key", "value").write.format("aiokafka_lite")
       .option("bootstrap.servers", bootstrap).option("topic", "out").mode("append").save())

The same works with ``spark.readStream`` / ``writeStream``. Schema, options and
guarantees are documented in :mod:`aiokafka_lite.spark.datasource` and the README of
this package (``docs`` in the module docstrings below):

* reading is exact: each Spark task reads one offset range ``[start, end)`` of one
  partition with a consumer on manual assignment (no group); re-running it reads the
  same records;
* writing is at-least-once: each task produces with one idempotent producer and
  flushes before reporting success, but a retried task (or micro-batch) writes its
  rows again.

Only :func:`register` and :class:`KafkaDataSource` need pyspark; the option parsing and
offset planning (:mod:`.options`, :mod:`.offsets`, :mod:`.kafka_io`) import without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["KafkaDataSource", "register"]

if TYPE_CHECKING:
    from .datasource import KafkaDataSource


def _datasource() -> Any:
    try:
        from . import datasource
    except ImportError as exc:
        raise ImportError(
            f"aiokafka_lite.spark needs pyspark>=4.0 with pyarrow: pip install 'aiokafka_lite[spark]' ({exc})"
        ) from exc
    return datasource


def register(spark: Any) -> None:
    """Register the ``aiokafka_lite`` format with a SparkSession."""
    _datasource().register(spark)


def __getattr__(name: str) -> Any:
    if name == "KafkaDataSource":
        return _datasource().KafkaDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
