"""A Spark standalone cluster on loopback, from pyspark's own distribution (tests, benchmarks).

One master and N workers, each a separate JVM started with pyspark's ``bin/spark-class``
(``org.apache.spark.deploy.master.Master`` / ``org.apache.spark.deploy.worker.Worker``),
the way ``sbin/start-master.sh`` and ``start-worker.sh`` run them, minus the daemon
wrapper so that the processes stay children of this one and die with it. Also
:func:`package_zip`, the aiokafka_lite package as a zip for ``--py-files``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from types import TracebackType

__all__ = ["SparkClusterError", "StandaloneCluster", "package_zip", "spark_home"]


class SparkClusterError(RuntimeError):
    """The standalone cluster did not come up."""


def spark_home() -> Path:
    """pyspark's distribution folder (``bin/spark-class``, ``jars/``), or ``$SPARK_HOME``."""
    env = os.environ.get("SPARK_HOME")
    if env:
        return Path(env)
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def package_zip(dest: Path) -> Path:
    """Zip the imported aiokafka_lite package (Python sources only) into ``dest``.

    The zip is what ``spark-submit --py-files aiokafka_lite.zip`` (or
    ``SparkContext.addPyFile``) ships to the executors: Python imports it from the zip,
    without the optional C extension (the pure-Python record codec takes over).
    """
    import aiokafka_lite

    root = Path(aiokafka_lite.__file__).resolve().parent
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file() or path.suffix in (".so", ".pyd", ".c"):
                continue
            zf.write(path, Path("aiokafka_lite") / path.relative_to(root))
    return dest


class StandaloneCluster:
    """``with StandaloneCluster(workers=2) as c: SparkSession.builder.master(c.master_url)``.

    Each worker offers ``cores`` cores and ``memory`` to executors; daemons get a small
    heap (``SPARK_DAEMON_MEMORY``). Logs are in :attr:`work_dir`.
    """

    def __init__(
        self, workers: int = 2, cores: int = 1, memory: str = "1g", work_dir: Path | None = None
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.work_dir = work_dir
        self.master_port = 0
        self.master_ui_port = 0
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Path] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SPARK_HOME"] = str(spark_home())
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["SPARK_LOCAL_HOSTNAME"] = "localhost"
        env.setdefault("SPARK_DAEMON_MEMORY", "256m")
        env["SPARK_NO_DAEMONIZE"] = "1"
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        assert self.work_dir is not None
        log = self.work_dir / f"{name}.log"
        self._logs.append(log)
        spark_class = str(spark_home() / "bin" / "spark-class")
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [spark_class, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
            )
        self._procs.append(proc)

    def _alive_workers(self) -> int:
        url = f"http://127.0.0.1:{self.master_ui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                state = json.load(resp)
        except (OSError, ValueError):
            return -1
        return int(state.get("aliveworkers", 0))

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        if self.work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="aiokafka-lite-spark-")
            self.work_dir = Path(self._tmp.name)
        atexit.register(self.stop)
        self.master_port, self.master_ui_port = _free_port(), _free_port()
        master = "org.apache.spark.deploy.master.Master"
        self._spawn(
            "master",
            [
                master,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.master_ui_port),
            ],
        )
        for i in range(self.workers):
            work = self.work_dir / f"worker-{i}"
            work.mkdir(exist_ok=True)
            self._spawn(
                f"worker-{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(_free_port()),
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(work),
                    self.master_url,
                ],
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                break
            if self._alive_workers() >= self.workers:
                return self
            time.sleep(0.5)
        tails = "\n".join(f"--- {log.name}\n{self._tail(log)}" for log in self._logs)
        self.stop()
        raise SparkClusterError(f"the Spark standalone cluster did not start within {timeout:.0f}s\n{tails}")

    @staticmethod
    def _tail(log: Path, lines: int = 15) -> str:
        try:
            return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        for proc in reversed(self._procs):  # workers first
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
        self._procs.clear()
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
