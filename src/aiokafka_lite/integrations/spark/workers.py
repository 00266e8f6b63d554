"""Which Python interpreter Spark's workers run, and a check that it can run this data source.

Spark starts its Python workers (executors' tasks, and the driver-side planner of a
Python data source) with ``SparkContext.pythonExec``: the ``PYSPARK_PYTHON`` environment
variable as the driver saw it when the SparkContext started, else ``python3`` from PATH.
That is often not the interpreter that runs the driver script (a virtualenv used without
activating it), and the failure then shows up deep inside a query as a Java stack trace
around ``ModuleNotFoundError``. :func:`configure_worker_python` picks a better default
where Spark allows it, and :func:`check_workers` turns a broken set-up into one
:class:`SparkWorkerSetupError` that names the interpreter and the fixes.

Needs pyspark (imported lazily: :mod:`aiokafka_lite.integrations.spark` imports without it).
"""

from __future__ import annotations

import builtins
import os
import re
import shutil
import sys
from typing import Any

from aiokafka_lite.core.errors import ConfigError

__all__ = [
    "SparkWorkerSetupError",
    "check_workers",
    "configure_worker_python",
    "share_py_files_with_driver_runners",
    "worker_python",
]

#: Spark's own default when neither PYSPARK_PYTHON nor spark.pyspark.python is set.
SPARK_DEFAULT_PYTHON = "python3"


class SparkWorkerSetupError(ConfigError):
    """Spark's Python workers cannot import aiokafka_lite (or pyarrow/pyspark)."""


def _conf(sc: Any, key: str) -> str | None:
    value = sc.getConf().get(key)
    return str(value) if value else None


def worker_python(sc: Any) -> tuple[str, str]:
    """``(interpreter, where it came from)`` for the workers of SparkContext ``sc``."""
    exec_ = str(sc.pythonExec)
    if os.environ.get("PYSPARK_PYTHON") == exec_:
        return exec_, "PYSPARK_PYTHON"
    if _conf(sc, "spark.pyspark.python") == exec_:
        return exec_, "spark.pyspark.python"
    if exec_ == sys.executable:
        return exec_, "the driver's interpreter (the aiokafka_lite default in local mode)"
    if exec_ == SPARK_DEFAULT_PYTHON:
        return exec_, "Spark's default: `python3` from the workers' PATH (nothing configured)"
    return exec_, "SparkContext.pythonExec"


def configure_worker_python(sc: Any) -> str | None:
    """Point the workers at a better interpreter when the user configured none; return it.

    With ``PYSPARK_PYTHON`` set, nothing changes (Spark already uses it). Otherwise
    ``spark.pyspark.python`` wins: spark-submit honours it, but a SparkSession built from
    a plain ``python script.py`` only reads the environment variable, so the setting
    would be silently ignored. With neither set and a ``local`` master, the workers run
    on this machine, so the driver's own interpreter is the one that surely has
    aiokafka_lite. On a cluster nothing is guessed (the executors' machines decide).
    ``SparkContext.pythonExec`` is read when a Python function or data source is
    registered, so this must run before :meth:`spark.dataSource.register`.
    """
    if os.environ.get("PYSPARK_PYTHON"):
        return None
    conf_python = _conf(sc, "spark.pyspark.python")
    if conf_python:
        target = conf_python
    elif str(sc.master).startswith("local") and sc.pythonExec == SPARK_DEFAULT_PYTHON:
        target = sys.executable
    else:
        return None
    if sc.pythonExec == target:
        return None
    sc.pythonExec = target
    return target


def share_py_files_with_driver_runners(sc: Any) -> list[str]:
    """Put the job's ``--py-files`` on ``PYTHONPATH`` for the Python processes Spark starts
    on the driver; return the paths added.

    Spark starts a Python process on the driver to plan a Python data source's streaming
    query (``python_streaming_source_runner``), and, unlike executors' tasks and the batch
    planner, that process does not get the files shipped with ``--py-files`` /
    ``addPyFile`` (pyspark 4.0 - 4.3): a streaming query whose workers' interpreter lacks
    aiokafka_lite fails there with ``ModuleNotFoundError`` although the package was
    shipped. Every Python worker inherits ``SparkContext.environment``, so the driver's
    local copies go there (on executors, paths that do not exist are skipped by Python).
    Like ``pythonExec``, the environment is read when the data source is registered.
    """
    from pyspark import SparkFiles

    includes = [str(name) for name in getattr(sc, "_python_includes", None) or []]
    if not includes:
        return []
    root = SparkFiles.getRootDirectory()
    paths = [os.path.join(root, name) for name in includes if os.path.exists(os.path.join(root, name))]
    current = [p for p in str(sc.environment.get("PYTHONPATH", "")).split(os.pathsep) if p]
    added = [p for p in paths if p not in current]
    if added:
        sc.environment["PYTHONPATH"] = os.pathsep.join(current + added)
    return added


# The probe runs in a worker. It is compiled into a module that does not exist there, so
# that cloudpickle ships it by value: pickled by reference, unpickling it would itself
# need aiokafka_lite, and the interesting error would become an unreadable one.
_PROBE_SOURCE = """
def probe(_rows):
    import sys
    missing = None
    for name in ("pyarrow", "aiokafka_lite", "aiokafka_lite.integrations.spark.kafka_io"):
        try:
            __import__(name)
        except Exception as exc:
            missing = "%s: %s" % (type(exc).__name__, exc)
            break
    version = None
    if missing is None:
        import aiokafka_lite
        version = aiokafka_lite.__version__
    yield (sys.executable, "%d.%d.%d" % sys.version_info[:3], missing, version)
"""


def _probe_function() -> Any:
    namespace: dict[str, Any] = {"__name__": "aiokafka_lite_worker_probe", "__builtins__": builtins}
    exec(compile(_PROBE_SOURCE, "<aiokafka_lite worker probe>", "exec"), namespace)
    return namespace["probe"]


_NO_MODULE = re.compile(r"(ModuleNotFoundError|ImportError): ([^\n\\]+)")


def _fixes(exec_: str) -> str:
    return (
        "Fix one of:\n"
        f"  * run the workers with an interpreter that has aiokafka_lite: set PYSPARK_PYTHON (e.g. "
        f"PYSPARK_PYTHON={sys.executable}) in the environment before the SparkSession starts, or "
        f"the Spark setting spark.pyspark.python (spark-submit --conf spark.pyspark.python=..., or "
        ".config('spark.pyspark.python', ...) before register());\n"
        "  * or ship the package with the job: spark-submit --py-files aiokafka_lite.zip (a zip of "
        "the aiokafka_lite package folder; pyarrow must already be installed for the workers' "
        "interpreter), or a packed virtualenv: --archives venv.tar.gz#environment with "
        "spark.pyspark.python=./environment/bin/python.\n"
        f"The driver runs {sys.executable}; the workers were started as {exec_!r}."
    )


def _describe(exec_: str, source: str, detail: str, reported: str | None = None) -> str:
    resolved = shutil.which(exec_) or exec_
    where = f"{exec_!r}" + (f" ({resolved})" if resolved != exec_ else "")
    if reported and reported not in (exec_, resolved):
        where += f", which runs as {reported},"
    return (
        f"Spark's Python workers run {where}, chosen by {source}, and that interpreter cannot "
        f"run the aiokafka_lite data source: {detail}.\n{_fixes(exec_)}"
    )


def check_workers(spark: Any, partitions: int | None = None) -> list[tuple[str, str]]:
    """Run a tiny job whose tasks import aiokafka_lite and pyarrow on the workers.

    Returns ``(interpreter, aiokafka_lite version)`` per probe task. Raises
    :class:`SparkWorkerSetupError` naming the interpreter and the fixes when a worker
    cannot import them (or cannot start at all), or runs another aiokafka_lite version
    than the driver (pickled plans would not match).
    """
    import aiokafka_lite

    sc = spark.sparkContext
    exec_, source = worker_python(sc)
    n = partitions or max(1, min(int(sc.defaultParallelism), 8))
    try:
        found = sc.parallelize(range(n), n).mapPartitions(_probe_function()).collect()
    except Exception as exc:  # py4j's Py4JJavaError, or a Spark exception from Connect
        text = str(exc)
        match = _NO_MODULE.search(text)
        detail = match.group(0).strip() if match else "the Python worker failed to start"
        if not match:
            tail = text.strip().splitlines()[:3]
            detail += " (" + " / ".join(line.strip() for line in tail)[:400] + ")"
        raise SparkWorkerSetupError(_describe(exec_, source, detail)) from None
    out: list[tuple[str, str]] = []
    for worker_exec, version, missing, lib_version in found:
        if missing is not None:
            raise SparkWorkerSetupError(
                _describe(exec_, source, f"{missing} (Python {version})", worker_exec)
            )
        if lib_version != aiokafka_lite.__version__:
            raise SparkWorkerSetupError(
                f"Spark's Python workers ({worker_exec}) import aiokafka_lite {lib_version}, the driver "
                f"{aiokafka_lite.__version__}: install the same version for both (or ship the driver's "
                f"with --py-files).\n{_fixes(exec_)}"
            )
        out.append((str(worker_exec), str(lib_version)))
    return out
