"""Kafka's own command-line tools (``kafka-configs``, ``kafka-delegation-tokens``, ...)
run as ``java -cp <jars> <main class>`` against an ``ApacheCluster``, for cross-checks.
Kafka 4.x keeps most tools in the ``kafka-tools`` jar, which the launcher's broker
classpath lacks: it is copied from Maven once per version next to the launcher's cache.
"""

from __future__ import annotations

import subprocess

from aiokafka_lite.testing.apache import _cache_root, _java, _mvn, kafka_classpath


def tools_classpath(version: str) -> str:
    """The launcher's Kafka jars of ``version`` plus ``kafka-tools`` of the same release."""
    folder = _cache_root() / f"kafka-tools-{version}"
    jar = folder / f"kafka-tools-{version}.jar"
    if not jar.exists():
        folder.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [
                _mvn(),
                "-B",
                "-q",
                "dependency:copy",
                f"-Dartifact=org.apache.kafka:kafka-tools:{version}",
                f"-DoutputDirectory={folder}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=folder,
        )
        assert proc.returncode == 0 and jar.exists(), proc.stdout + proc.stderr
    return f"{kafka_classpath(version)}/*:{folder}/*"


def run_tool(classpath: str, main_class: str, *args: str, timeout_s: float = 180.0) -> str:
    """Run a tool to completion; its stdout (a non-zero exit fails the test with its output)."""
    cmd = [_java(), "-Xmx256m", "-cp", classpath, main_class, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, f"{main_class} {args}: {proc.stdout}{proc.stderr[-3000:]}"
    return proc.stdout
