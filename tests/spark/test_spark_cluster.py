"""The ``aiokafka_lite`` data source on a real Spark standalone cluster: one master and two
workers, separate JVMs on loopback started with pyspark's own ``spark-class``, each worker
running its executor (and that executor's Python workers) in processes of its own.

The package reaches the executors the way a user ships it: the executors' interpreter
(``spark.pyspark.python``) has pyspark and pyarrow but not aiokafka_lite, and the driver
adds a zip of the package with ``addPyFile`` (what ``spark-submit --py-files`` does).
Batch read, batch write and a streaming query restarted from its checkpoint each run
beside Spark's built-in Kafka connector on the same topics, which must give the same
records.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_compare import BUILTIN, OURS, batch_rows_both, fill_topic, stream_restart_both, write_both
from spark_testlib import _check_installed, python_without_aiokafka_lite, session_for

from aiokafka_lite.integrations.spark.standalone import StandaloneCluster, package_zip

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    _check_installed()
    with StandaloneCluster(
        workers=2, cores=1, memory="1g", work_dir=tmp_path_factory.mktemp("spark-cluster")
    ) as c:
        yield c


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("shipped")
    return python_without_aiokafka_lite(tmp), package_zip(tmp / "aiokafka_lite.zip")


@pytest.fixture
def cluster_spark(standalone: StandaloneCluster, shipped: tuple[Path, Path]) -> Any:
    executor_python, zip_path = shipped
    conf = {
        "spark.pyspark.python": str(executor_python),
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    return session_for(standalone.master_url, conf, py_files=[str(zip_path)])


def _where_tasks_run(rows: Iterator[Any]) -> Iterator[tuple[int, str]]:
    import aiokafka_lite

    yield os.getpid(), aiokafka_lite.__file__ or ""


def test_cluster_executors_import_the_shipped_package(cluster_spark: Any) -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # this module is not on the executors
    sc = cluster_spark.sparkContext
    found = sc.parallelize(range(4), 4).mapPartitions(_where_tasks_run).collect()
    assert all(
        path.endswith(os.path.join("aiokafka_lite.zip", "aiokafka_lite", "__init__.py")) for _, path in found
    )
    assert os.getpid() not in {pid for pid, _ in found}  # run in the executors' Python workers
    executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    assert executors == 2


def test_cluster_batch_read_same_as_builtin(cluster_spark: Any, kafka_bootstrap: str) -> None:
    topic = fill_topic(kafka_bootstrap, "cluster-read", 3, 10)
    ours, builtin = batch_rows_both(
        cluster_spark, kafka_bootstrap, subscribe=topic, maxRecordsPerPartition="4"
    )
    assert ours == builtin
    assert len(ours) == 30 and {r[2] for r in ours} == {topic}


def test_cluster_batch_write_same_as_builtin(cluster_spark: Any, kafka_bootstrap: str) -> None:
    ours, builtin = write_both(cluster_spark, kafka_bootstrap)
    assert ours == builtin
    assert len(ours) == 24


def test_cluster_streaming_restart_same_as_builtin(
    cluster_spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    got = stream_restart_both(cluster_spark, kafka_bootstrap, tmp_path)
    assert got[OURS]["records"] == got[BUILTIN]["records"]
    assert len(got[OURS]["records"]) == 30  # 18 before the restart, 12 after, none twice
    assert got[OURS]["batches"] == got[BUILTIN]["batches"] >= 4  # 9 per trigger: 18 -> 2, 12 -> 2
