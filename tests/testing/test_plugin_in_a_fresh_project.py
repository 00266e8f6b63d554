"""The pytest plugin as a new project meets it: installed, no pytest configuration at all
(so pytest-asyncio is in its default strict mode), tests marked ``@pytest.mark.asyncio``
or ``@pytest.mark.anyio``. Each run is a pytest of its own in a temporary folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ASYNCIO_STRICT_TESTS = """
import pytest

from aiokafka_lite import Producer


@pytest.mark.asyncio
async def test_cluster_and_bootstrap(kafka_cluster, kafka_bootstrap):
    assert kafka_bootstrap == kafka_cluster.bootstrap
    kafka_cluster.create_topic("orders", 2)
    async with Producer(kafka_bootstrap) as producer:
        await producer.send("orders", b"placed", partition=1)
    assert kafka_cluster.high_watermark("orders", 1) == 1


@pytest.mark.asyncio
async def test_factory(kafka_cluster_factory):
    cluster = await kafka_cluster_factory(brokers=2, topics={"audit": 3})
    assert len(cluster.bootstrap.split(",")) == 2
    async with Producer(cluster.bootstrap) as producer:
        await producer.send("audit", b"seen", partition=2)
    assert cluster.high_watermark("audit", 2) == 1


@pytest.mark.asyncio
async def test_bootstrap_alone(kafka_bootstrap):
    async with Producer(kafka_bootstrap) as producer:
        metadata = await producer.send("created-on-use", b"x")
    assert metadata.offset == 0
"""

ANYIO_TESTS = """
import pytest

from aiokafka_lite import Producer

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


async def test_bootstrap(kafka_bootstrap):
    async with Producer(kafka_bootstrap) as producer:
        metadata = await producer.send("created-on-use", b"x")
    assert metadata.offset == 0


async def test_cluster(kafka_cluster, kafka_bootstrap):
    kafka_cluster.create_topic("orders", 2)
    async with Producer(kafka_bootstrap) as producer:
        await producer.send("orders", b"placed", partition=1)
    assert kafka_cluster.high_watermark("orders", 1) == 1
"""

TRIO_MESSAGE = "kafka_cluster: the embedded Kafka broker runs on asyncio only, and this test runs on trio"


def _run_pytest(project: Path, *args: str, **env_vars: str) -> tuple[dict[str, str], str]:
    """Run pytest in ``project``; each test's outcome by node id, and the whole output
    (which ends with the exit code)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | env_vars
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = f"{proc.stdout}{proc.stderr}\nexit code {proc.returncode}"
    if proc.returncode == pytest.ExitCode.USAGE_ERROR:
        return {}, output
    assert f"rootdir: {project}" in output and "configfile:" not in output, output
    outcomes = {
        node: outcome for outcome, node in re.findall(r"^(PASSED|FAILED|ERROR) (\S+)", proc.stdout, re.M)
    }
    return outcomes, output


def _project(tmp_path: Path) -> Path:
    (tmp_path / "test_on_pytest_asyncio.py").write_text(textwrap.dedent(ASYNCIO_STRICT_TESTS))
    (tmp_path / "test_on_anyio.py").write_text(textwrap.dedent(ANYIO_TESTS))
    return tmp_path


def test_pytest_asyncio_strict_mode_and_anyio_without_configuration(tmp_path: Path) -> None:
    project = _project(tmp_path)
    outcomes, output = _run_pytest(project)
    assert outcomes == {
        "test_on_pytest_asyncio.py::test_cluster_and_bootstrap": "PASSED",
        "test_on_pytest_asyncio.py::test_factory": "PASSED",
        "test_on_pytest_asyncio.py::test_bootstrap_alone": "PASSED",
        "test_on_anyio.py::test_bootstrap[asyncio]": "PASSED",
        "test_on_anyio.py::test_bootstrap[trio]": "PASSED",
        "test_on_anyio.py::test_cluster[asyncio]": "PASSED",
        # The embedded broker is asyncio-only: on trio the fixture says so.
        "test_on_anyio.py::test_cluster[trio]": "ERROR",
    }, output
    assert TRIO_MESSAGE in output


def test_anyio_alone_without_pytest_asyncio(tmp_path: Path) -> None:
    project = _project(tmp_path)
    outcomes, output = _run_pytest(project, "-p", "no:asyncio", "test_on_anyio.py")
    assert outcomes == {
        "test_on_anyio.py::test_bootstrap[asyncio]": "PASSED",
        "test_on_anyio.py::test_bootstrap[trio]": "PASSED",
        "test_on_anyio.py::test_cluster[asyncio]": "PASSED",
        "test_on_anyio.py::test_cluster[trio]": "ERROR",
    }, output
    assert TRIO_MESSAGE in output


def test_async_fixture_in_a_sync_test_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "test_sync.py").write_text("def test_sync(kafka_cluster):\n    pass\n")
    outcomes, output = _run_pytest(tmp_path)
    assert outcomes == {"test_sync.py::test_sync": "ERROR"}, output
    assert "kafka_cluster is an async fixture: request it from an async test" in output


def test_container_mode_without_docker_is_a_usage_error_naming_the_cause(tmp_path: Path) -> None:
    (tmp_path / "test_kafka.py").write_text("def test_needs_kafka(kafka_bootstrap):\n    pass\n")
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    dead_socket = f"unix://{tmp_path}/no-docker.sock"
    outcomes, output = _run_pytest(tmp_path, "--kafka=container", DOCKER_HOST=dead_socket)
    assert outcomes == {} and output.endswith(f"exit code {int(pytest.ExitCode.USAGE_ERROR)}"), output
    assert f"ERROR: --kafka=container: no Docker daemon reachable (DOCKER_HOST={dead_socket}: " in output
    assert "start Docker, or use --kafka=embedded / --kafka=apache" in output
    assert "Traceback" not in output and "DockerException" not in output
    # A session with no test that needs Kafka does not need Docker either.
    outcomes, output = _run_pytest(tmp_path, "--kafka=container", "test_plain.py", DOCKER_HOST=dead_socket)
    assert outcomes == {"test_plain.py::test_plain": "PASSED"}, output
