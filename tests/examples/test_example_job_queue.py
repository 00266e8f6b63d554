"""examples/job_queue.py: N share-group workers, retries of flaky jobs, poison jobs in the
dead-letter topic, on the embedded broker (default) and on the broker under test."""

from __future__ import annotations

import re

from examples_testlib import load_example, run_example

from aiokafka_lite.admin import Admin
from aiokafka_lite.core.errors import UnsupportedVersionError


def check_output(out: str, jobs: int, workers: int) -> None:
    job_kinds = load_example("job_queue").make_jobs(jobs)
    poison = sorted(j["id"] for j in job_kinds if j["kind"] == "poison")
    flaky = sum(1 for j in job_kinds if j["kind"] == "flaky")
    assert poison and flaky, "the example's job mix lost its failing jobs"
    assert f"{flaky} flaky, {len(poison)} poison" in out, out
    stats = re.findall(r"worker-\d: accepted (\d+), released (\d+), rejected (\d+), dead-lettered (\d+)", out)
    assert len(stats) == workers, out
    accepted, released, rejected, dead = (sum(int(s[i]) for s in stats) for i in range(4))
    # Every good job accepted once; flaky ones released once; poison ones released until
    # their last attempt (3), then dead-lettered and rejected.
    assert accepted == jobs - len(poison), out
    assert released == flaky + 2 * len(poison), out
    assert rejected == dead == len(poison), out
    assert f"completed {jobs - len(poison)} distinct jobs, 0 more than once" in out, out
    assert f"flaky jobs completed on delivery: {{2: {flaky}}}" in out, out
    letters = re.findall(r"job (\d+): JobFailed: cannot decode thumbnail \1\.png \(after 3 deliveries", out)
    assert sorted(int(n) for n in letters) == poison, out
    assert f"{len(poison)} jobs" in out.split("dead-letter topic", 1)[1].splitlines()[0], out


def test_job_queue_example() -> None:
    proc = run_example("job_queue")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_output(proc.stdout, jobs=200, workers=3)


async def test_job_queue_example_against_a_given_cluster(kafka_bootstrap: str) -> None:
    async with Admin(kafka_bootstrap) as admin:
        probe = (await admin.describe_share_groups(["job-queue-probe"]))["job-queue-probe"].error
        if isinstance(probe, UnsupportedVersionError):  # Kafka 4.0: the example says why it cannot run
            proc = run_example("job_queue", "--bootstrap", kafka_bootstrap)
            assert proc.returncode != 0
            assert "has no share groups" in proc.stderr and "4.2" in proc.stderr, proc.stderr
            assert "Traceback" not in proc.stderr, proc.stderr
            return
    proc = run_example("job_queue", "--bootstrap", kafka_bootstrap, "--workers", "4", "--jobs", "150")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_output(proc.stdout, jobs=150, workers=4)
    async with Admin(kafka_bootstrap) as admin:
        assert not [t for t in await admin.list_topics() if t.startswith("jobs-")]  # cleaned up
