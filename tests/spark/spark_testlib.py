"""Helpers for the Spark data source tests: producing test data, reading a topic back,
and one shared SparkSession."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.consume import Consumer, Record
from aiokafka_lite.core.errors import error_for
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.produce import Producer
from aiokafka_lite.wire.messages.create_topics_request import CreateTopicsRequest
from aiokafka_lite.wire.messages.create_topics_response import CreateTopicsResponse
from aiokafka_lite.wire.messages.delete_records_request import DeleteRecordsRequest
from aiokafka_lite.wire.messages.delete_records_response import DeleteRecordsResponse

#: (partition, key, value, headers, timestamp_ms)
Row = tuple[int, bytes | None, bytes, list[tuple[str, bytes | None]] | None, int | None]


async def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    async with Client(bootstrap) as client:
        await client.refresh_metadata()
        req = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
            ],
            timeout_ms=10000,
        )
        resp = await client.send(req, node_id=client.cluster.controller_id)
        assert isinstance(resp, CreateTopicsResponse)
        code = resp.topics[0].error_code
        if code:
            raise error_for(code, f"create topic {name}")
        await client.wait_for_topic(name, 10000)


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    """Create ``name`` with ``partitions`` partitions (the Admin client is not there yet)."""
    asyncio.run(_create_topic(bootstrap, name, partitions))
    return name


async def _delete_records(bootstrap: str, tp: TopicPartition, before: int) -> None:
    async with Client(bootstrap) as client:
        leader, _ = await client.leader_for(tp, 10000)
        req = DeleteRecordsRequest(
            topics=[
                DeleteRecordsRequest.DeleteRecordsTopic(
                    name=tp.topic,
                    partitions=[
                        DeleteRecordsRequest.DeleteRecordsPartition(
                            partition_index=tp.partition, offset=before
                        )
                    ],
                )
            ],
            timeout_ms=10000,
        )
        resp = await client.send(req, node_id=leader)
        assert isinstance(resp, DeleteRecordsResponse)
        code = resp.topics[0].partitions[0].error_code
        if code:
            raise error_for(code, "delete records")


def delete_records(bootstrap: str, tp: TopicPartition, before: int) -> None:
    """Advance the log start offset of ``tp`` to ``before`` (DeleteRecords)."""
    asyncio.run(_delete_records(bootstrap, tp, before))


async def _produce(bootstrap: str, topic: str, rows: Sequence[Row]) -> None:
    async with Producer(bootstrap, linger_ms=2) as p:
        futs = [
            await p.enqueue(topic, value, key, partition=part, headers=headers, timestamp_ms=ts)
            for part, key, value, headers, ts in rows
        ]
        await p.flush()
        for f in futs:
            await f


def produce(bootstrap: str, topic: str, rows: Sequence[Row]) -> None:
    """Produce ``rows`` (in order) and wait for every acknowledgement."""
    asyncio.run(_produce(bootstrap, topic, rows))


def values(topic_partitions: dict[int, int], prefix: str = "v") -> list[Row]:
    """``n`` records per partition, values ``{prefix}-{partition}-{i}``, keys ``k{i % 4}``."""
    out: list[Row] = []
    for part, n in topic_partitions.items():
        out.extend(
            (part, f"k{i % 4}".encode(), f"{prefix}-{part}-{i}".encode(), None, None) for i in range(n)
        )
    return out


async def _read_all(bootstrap: str, tps: Sequence[TopicPartition], expect: int) -> list[Record]:
    out: list[Record] = []
    async with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50) as c:
        c.assign(tps)
        deadline = asyncio.get_running_loop().time() + 30
        while len(out) < expect and asyncio.get_running_loop().time() < deadline:
            for recs in (await c.getmany(timeout_ms=200)).values():
                out.extend(recs)
        # nothing more than expected
        for recs in (await c.getmany(timeout_ms=300)).values():
            out.extend(recs)
    return sorted(out, key=lambda r: (r.topic, r.partition, r.offset))


def read_all(bootstrap: str, tps: Sequence[TopicPartition], expect: int) -> list[Record]:
    """Every record of ``tps`` (waits until ``expect`` arrived, then a little more)."""
    return asyncio.run(_read_all(bootstrap, tps, expect))


#: Spark's message when a Python worker it started did not connect back in time.
_WORKER_DID_NOT_CONNECT = "Python worker failed to connect back"


def run_to_end(start: Callable[[], Any], timeout_s: float = 180) -> Any:
    """Start a streaming query (``start()``; Trigger.AvailableNow) and wait until it ends;
    the ended query, or its error.

    Spark gives the Python process of a Python data source's streaming source 10 seconds
    to start and connect back to the JVM (``PythonWorkerFactory.createSimpleWorker``: a
    constant, no setting), before any of our code runs. On a busy 2-core machine a process
    start can take longer (seen once in CI, at load 10), and the query dies initializing,
    having read nothing. Such a query is started once more, from the same checkpoint;
    any other error, or that one twice, fails the test."""
    from pyspark.errors import StreamingQueryException

    for attempt in (1, 2):
        query = start()
        try:
            ended = query.awaitTermination(timeout_s)
        except StreamingQueryException as exc:
            if attempt == 1 and _WORKER_DID_NOT_CONNECT in str(exc):
                continue
            raise
        assert ended, f"the streaming query did not end within {timeout_s} s"
        assert query.exception() is None, query.exception()
        return query
    raise AssertionError("unreachable")


def _connector_jars() -> str:
    from aiokafka_lite.integrations.spark.connector import connector_jars

    return ",".join(str(j) for j in connector_jars())


def _check_installed() -> None:
    # pyspark is a required test dependency (the spark extra): missing, it is an error, not a skip.
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.fail("pyspark is not installed: pip install -e '.[test,spark]'", pytrace=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pytest.fail(
            "pyspark is installed without pyarrow, which Python data sources need: pip install 'pyspark[sql]'",
            pytrace=False,
        )


_current: tuple[Any, Any] | None = None


def session_for(master: str, conf: dict[str, str] | None = None, py_files: Sequence[str] = ()) -> Any:
    """The SparkSession on ``master`` (the active one when it runs there already).

    One JVM per test process can hold one SparkContext: switching master stops the active
    session first. Every session gets Spark's own Kafka connector (``spark.jars``), the
    yardstick the comparison tests read and write with, so that it is on the classpath
    from the JVM's start.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    from aiokafka_lite.integrations.spark import register

    global _current
    key = (master, sorted((conf or {}).items()), list(py_files))
    if _current is not None:
        current_key, current = _current
        if current_key == key and current.sparkContext._jsc is not None:
            return current
        current.stop()
        _current = None
    shared = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
        "spark.jars": _connector_jars(),
    }
    if SparkContext._gateway is None:
        # The JVM keeps the settings of the context it was launched for as system
        # properties, and every later context starts from them: launched for a cluster
        # session, its spark.pyspark.python (an interpreter without the package) would
        # reach every local session after it. So it is launched with the shared ones only.
        SparkContext._ensure_initialized(conf=SparkConf(loadDefaults=False).setAll(list(shared.items())))
    builder = SparkSession.builder.master(master).appName("aiokafka_lite-tests")
    for k, v in {**shared, **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for path in py_files:
        spark.sparkContext.addPyFile(path)  # what spark-submit --py-files does
    register(spark)
    _current = (key, spark)
    return spark


def spark_session() -> Any:
    """The shared local SparkSession (small and quiet; register() points its Python
    workers at this interpreter)."""
    return session_for("local[2]")


@pytest.fixture
def spark() -> Any:
    _check_installed()
    return spark_session()


@pytest.fixture(scope="session", autouse=True)
def _stop_spark_at_exit() -> Iterator[None]:
    yield
    global _current
    if _current is not None:
        _current[1].stop()
        _current = None


def python_without_aiokafka_lite(tmp_path: Path) -> Path:
    """A ``bin/python3`` that sees this venv's site-packages (pyspark, pyarrow) without
    running its .pth files, so that the editable aiokafka_lite is not importable: an
    executor's interpreter before the package is shipped to it."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    site_packages = sysconfig.get_paths()["purelib"]
    wrapper = bindir / "python3"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site_packages}" exec {sys.executable} -S "$@"\n'
    )
    wrapper.chmod(0o755)
    probe = subprocess.run(
        [str(wrapper), "-c", "import pyspark, pyarrow\nimport aiokafka_lite"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert "No module named 'aiokafka_lite'" in probe.stderr, probe.stderr  # the premise of its users
    return wrapper


_counter = 0


def unique(name: str) -> str:
    """A topic name not used before in this process (tests may share one cluster)."""
    global _counter
    _counter += 1
    return f"{name}-{os.getpid()}-{_counter}-{int(time.time() * 1000) % 100000}"
