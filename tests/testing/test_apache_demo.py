"""The README's main job on Apache Kafka itself: ``python -m aiokafka_lite.cli.demo --apache``.

With its defaults (lz4, acks=all, idempotence), the path that Kafka once refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aiokafka_lite.testing.apache import resolve_version


@pytest.mark.parametrize("version", ["latest", "4.0"])
def test_demo_runs_on_a_fresh_apache_kafka(version: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "aiokafka_lite.cli.demo", "--apache", version, "--records", "20000"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"started Apache Kafka {resolve_version(version)}" in proc.stdout
    assert "produced 20,000 keyed records (lz4, acks=all, idempotent)" in proc.stdout
    assert "consumed 20,001 records with `async for`" in proc.stdout
    assert "ok: every record consumed exactly once" in proc.stdout


def test_demo_refuses_apache_with_bootstrap() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "aiokafka_lite.cli.demo", "--apache", "--bootstrap", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--apache and --bootstrap exclude each other" in proc.stderr
