"""Spark's Python workers and aiokafka_lite: the interpreter ``register(spark)`` picks, and
the one clear error when the workers' interpreter cannot import the package.

Each case runs a driver script in a fresh process (a SparkContext's worker interpreter
is fixed when it starts) with PATH's ``python3`` replaced by an interpreter that has
pyspark and pyarrow but not aiokafka_lite: the situation of a user who runs a pipeline
with a virtualenv's python without activating the venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from spark_testlib import create_topic, produce, python_without_aiokafka_lite, unique, values

from aiokafka_lite.integrations.spark.workers import (
    SPARK_DEFAULT_PYTHON,
    SparkWorkerSetupError,
    configure_worker_python,
    worker_python,
)

pytestmark = pytest.mark.spark

SRC = str(Path(__file__).resolve().parents[2] / "src")


DRIVER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {src!r})
    from pyspark.sql import SparkSession
    from aiokafka_lite.integrations.spark import register
    from aiokafka_lite.integrations.spark.workers import SparkWorkerSetupError
    builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for k, v in {conf!r}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    try:
        register(spark)
    except SparkWorkerSetupError as exc:
        print("SETUP-ERROR<<" + str(exc) + ">>")
        raise SystemExit(3)
    print("WORKER-PYTHON", spark.sparkContext.pythonExec)
    if {bootstrap!r}:
        df = (spark.read.format("aiokafka_lite").option("bootstrap.servers", {bootstrap!r})
              .option("subscribe", {topic!r}).load())
        print("VALUES", sorted(bytes(r.value).decode() for r in df.select("value").collect()))
    spark.stop()
    """
)


def run_driver(
    tmp_path: Path,
    wrapper: Path,
    env: dict[str, str],
    conf: dict[str, str],
    bootstrap: str = "",
    topic: str = "",
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(src=SRC, conf=conf, bootstrap=bootstrap, topic=topic))
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")
    }
    base["PATH"] = f"{wrapper.parent}{os.pathsep}{base.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, env={**base, **env}
    )


def setup_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 3, out.stdout + out.stderr[-3000:]
    return out.stdout.split("SETUP-ERROR<<", 1)[1].split(">>", 1)[0]


def test_local_mode_defaults_workers_to_the_driver_interpreter(tmp_path: Path, kafka_bootstrap: str) -> None:
    wrapper = python_without_aiokafka_lite(tmp_path)
    topic = create_topic(kafka_bootstrap, unique("workers-default"), 1)
    produce(kafka_bootstrap, topic, values({0: 3}))
    out = run_driver(tmp_path, wrapper, {}, {}, kafka_bootstrap, topic)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert f"WORKER-PYTHON {sys.executable}\n" in out.stdout
    assert "VALUES ['v-0-0', 'v-0-1', 'v-0-2']" in out.stdout


def test_pyspark_python_without_the_package_is_one_clear_error(tmp_path: Path) -> None:
    wrapper = python_without_aiokafka_lite(tmp_path)
    out = run_driver(tmp_path, wrapper, {"PYSPARK_PYTHON": "python3"}, {})
    message = setup_error(out)
    assert f"Spark's Python workers run 'python3' ({wrapper}), which runs as {sys.executable}," in message
    assert "chosen by PYSPARK_PYTHON" in message
    assert "No module named 'aiokafka_lite'" in message
    for fix in ("PYSPARK_PYTHON=", "spark.pyspark.python", "--py-files", "--archives"):
        assert fix in message
    assert f"The driver runs {sys.executable}" in message
    assert "Traceback" not in message and "at org.apache" not in message


def test_spark_pyspark_python_setting_is_honoured_and_checked(tmp_path: Path) -> None:
    wrapper = python_without_aiokafka_lite(tmp_path)
    out = run_driver(tmp_path, wrapper, {}, {"spark.pyspark.python": str(wrapper)})
    message = setup_error(out)
    assert f"Spark's Python workers run {str(wrapper)!r}, which runs as {sys.executable}," in message
    assert "chosen by spark.pyspark.python" in message
    assert "No module named 'aiokafka_lite'" in message


class FakeConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        return self.values.get(key)


class FakeContext:
    def __init__(self, master: str, conf: dict[str, str], python_exec: str = SPARK_DEFAULT_PYTHON) -> None:
        self.master = master
        self.conf = FakeConf(conf)
        self.pythonExec = python_exec

    def getConf(self) -> FakeConf:
        return self.conf


def test_configure_worker_python_rules(monkeypatch: Any) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    local = FakeContext("local[2]", {})
    assert configure_worker_python(local) == sys.executable
    assert worker_python(local) == (sys.executable, worker_python(local)[1])
    assert "driver's interpreter" in worker_python(local)[1]

    cluster = FakeContext("spark://127.0.0.1:7077", {})
    assert configure_worker_python(cluster) is None  # nothing guessed for other machines
    assert cluster.pythonExec == SPARK_DEFAULT_PYTHON
    assert "nothing configured" in worker_python(cluster)[1]

    configured = FakeContext("spark://127.0.0.1:7077", {"spark.pyspark.python": "/opt/venv/bin/python"})
    assert configure_worker_python(configured) == "/opt/venv/bin/python"
    assert worker_python(configured) == ("/opt/venv/bin/python", "spark.pyspark.python")

    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3.11")
    env_set = FakeContext("local[2]", {"spark.pyspark.python": "/x"}, python_exec="/usr/bin/python3.11")
    assert configure_worker_python(env_set) is None  # Spark already uses the variable
    assert worker_python(env_set) == ("/usr/bin/python3.11", "PYSPARK_PYTHON")
    assert issubclass(SparkWorkerSetupError, ValueError)
