"""The README's main job (``python -m aiokafka_lite.cli.demo``) runs and checks itself."""

from __future__ import annotations

import os
import subprocess
import sys

from aiokafka_lite.admin import Admin


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    return subprocess.run(
        [sys.executable, "-m", "aiokafka_lite.cli.demo", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_demo_default_command_uses_the_embedded_broker_and_succeeds() -> None:
    proc = _demo()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "started an embedded Kafka broker" in out
    assert "produced 100,000 keyed records" in out
    assert "consumed 100,001 records with `async for`" in out
    assert "lag 0" in out
    assert "ok: every record consumed exactly once" in out


async def test_demo_against_a_given_cluster_cleans_up_its_topic(kafka_bootstrap: str) -> None:
    proc = _demo(
        "--bootstrap", kafka_bootstrap, "--records", "500", "--partitions", "2", "--compression", "zstd"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"using the Kafka cluster at {kafka_bootstrap}" in proc.stdout
    assert "consumed 501 records" in proc.stdout
    async with Admin(kafka_bootstrap) as admin:
        topics = await admin.list_topics()
    assert not [t for t in topics if t.startswith("demo-")], topics


async def test_demo_readme_job_against_a_given_cluster(kafka_bootstrap: str) -> None:
    """``python -m aiokafka_lite.cli.demo --bootstrap HOST:PORT`` exactly as the README gives it
    (default records, partitions and compression)."""
    proc = _demo("--bootstrap", kafka_bootstrap)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "produced 100,000 keyed records" in out
    assert "consumed 100,001 records with `async for`" in out
    assert "lag 0" in out
    assert "ok: every record consumed exactly once" in out
    async with Admin(kafka_bootstrap) as admin:
        assert not [t for t in await admin.list_topics() if t.startswith("demo-")]


def test_demo_reports_an_unreachable_cluster_and_exits_non_zero() -> None:
    proc = _demo("--bootstrap", "127.0.0.1:1", "--records", "10")
    assert proc.returncode == 1
    assert "NoBrokersAvailableError" in proc.stderr


def test_demo_rejects_bad_arguments() -> None:
    proc = _demo("--records", "0")
    assert proc.returncode == 2
    assert "--records" in proc.stderr
