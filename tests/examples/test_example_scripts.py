"""Every script in examples/ runs and does what its docstring says (embedded broker by default)."""

from __future__ import annotations

import re
import subprocess
import sys

from examples_testlib import EXAMPLES, run_example

from aiokafka_lite.admin import Admin


def test_async_iterator_example() -> None:
    proc = run_example("async_iterator")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"async for, first 5 records: \['p(\d)-0', 'p\1-1', 'p\1-2', 'p\1-3', 'p\1-4'\]", out), (
        out
    )
    assert "read all 30 records" in out
    assert "paused p0; new records came from: [1, 2]" in out
    assert "resumed p0: ['late-p0']" in out
    assert "seek(p1, 8): ['p1-8', 'p1-9', 'late-p1']" in out
    assert "seek_to_beginning(p2): position 0" in out
    assert "offsets_for_times(p2): offset 10, value late-p2" in out
    assert "end offsets: [11, 11, 11]" in out


async def test_async_iterator_example_against_a_given_cluster(kafka_bootstrap: str) -> None:
    proc = run_example("async_iterator", "--bootstrap", kafka_bootstrap)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "end offsets: [11, 11, 11]" in proc.stdout
    async with Admin(kafka_bootstrap) as admin:
        assert not [t for t in await admin.list_topics() if t.startswith("iter-")]  # cleaned up


def test_group_workers_example() -> None:
    proc = run_example("group_workers")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # Redelivery after a rebalance is allowed (at least once); loss and reordering are not.
    assert re.search(r"handled 600 distinct records, (\d+) twice, 0 out of order per account", out), out
    processed = [int(n) for n in re.findall(r"member-[ab]: processed (\d+) records", out)]
    assert len(processed) == 2 and sum(processed) >= 600, out
    assert out.rstrip().endswith("lag 0"), out


async def test_group_workers_example_against_a_given_cluster(kafka_bootstrap: str) -> None:
    proc = run_example("group_workers", "--bootstrap", kafka_bootstrap)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"handled 600 distinct records, (\d+) twice, 0 out of order per account", out), out
    assert out.rstrip().endswith("lag 0"), out
    async with Admin(kafka_bootstrap) as admin:
        assert not [t for t in await admin.list_topics() if t.startswith("payments-")]  # cleaned up
        assert not [g for g in (await admin.list_groups()).groups if g.group_id.startswith("payments-")]


def test_pytest_plugin_example_passes_on_the_embedded_broker() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(EXAMPLES / "test_with_kafka.py"),
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\b4 passed\b", proc.stdout), proc.stdout


def test_pytest_plugin_example_against_a_given_cluster(kafka_bootstrap: str) -> None:
    """``--kafka-bootstrap``: the tests that run against any Kafka pass there, the ones
    marked kafka_embedded are skipped."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(EXAMPLES / "test_with_kafka.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            f"--kafka-bootstrap={kafka_bootstrap}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\b2 passed, 2 skipped\b", proc.stdout), proc.stdout
