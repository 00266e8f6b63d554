"""``aiokafka-lite`` as real processes: the console script, the broker command, pipes, signals.
The client commands run against the session's Kafka (Apache Kafka with --kafka=apache)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "aiokafka_lite.cli"]


def run(
    *args: str, input: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], input=input, capture_output=True, timeout=60, check=False, env=env)


@pytest.fixture
def pre_topic(kafka_bootstrap: str) -> dict[str, str]:
    """The environment of a command using the session's Kafka (embedded, or Apache Kafka with
    --kafka=apache), whose topic ``pre`` has 2 partitions."""
    env = {**os.environ, "KAFKA_BOOTSTRAP": kafka_bootstrap}
    created = run("topics", "create", "pre", "--partitions", "2", env=env)
    assert created.returncode == 0, created.stderr
    return env


@pytest.fixture
def broker_process() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``aiokafka-lite broker`` on a free port, with a topic created at start."""
    proc = subprocess.Popen(
        [*CLI, "broker", "--bootstrap", "127.0.0.1:0", "--topic", "pre:2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert line.startswith("listening on "), line
        yield proc, line.split()[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("aiokafka-lite")
    assert script.exists(), "pip install -e . should create the aiokafka-lite console script"
    result = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0
    assert result.stdout.startswith("aiokafka-lite ")


def test_broker_command_serves_produce_and_consume_then_stops_on_sigterm(
    broker_process: tuple[subprocess.Popen[bytes], str],
) -> None:
    proc, bootstrap = broker_process
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap}
    listed = json.loads(run("topics", "list", "--json", env=env).stdout)
    assert [(t["topic"], t["partitions"]) for t in listed] == [("pre", 2)]

    # A shell pipeline, the way the README shows it.
    pipeline = subprocess.run(
        f"seq 1 500 | {' '.join(CLI)} produce pre -q && {' '.join(CLI)} consume pre --from-beginning -c 500 -q",
        shell=True,
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert pipeline.returncode == 0, pipeline.stderr
    assert sorted(map(int, pipeline.stdout.split())) == list(range(1, 501))

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None
    assert b"stopped" in proc.stderr.read()


def test_a_second_broker_on_a_used_port_fails_clearly(
    broker_process: tuple[subprocess.Popen[bytes], str],
) -> None:
    _, bootstrap = broker_process
    result = run("broker", "--bootstrap", bootstrap)
    assert result.returncode == 1
    assert b"cannot listen" in result.stderr


def test_sigterm_stops_a_group_consumer_cleanly(pre_topic: dict[str, str]) -> None:
    env = pre_topic
    assert run("produce", "pre", "-q", input=b"a\nb\nc\n", env=env).returncode == 0
    consumer = subprocess.Popen(
        [*CLI, "consume", "pre", "--group", "sig", "--from-beginning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert consumer.stdout is not None
        got = [consumer.stdout.readline() for _ in range(3)]
        assert sorted(got) == [b"a\n", b"b\n", b"c\n"]
        consumer.send_signal(signal.SIGTERM)
        assert consumer.wait(timeout=30) == 143
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(timeout=10)
    # It left the group (no member) after committing what it printed.
    desc = json.loads(run("groups", "describe", "sig", "--json", env=env).stdout)[0]
    assert desc["members"] == []
    assert desc["total_lag"] == 0


def test_consume_into_a_closed_pipe_exits_quietly(pre_topic: dict[str, str]) -> None:
    env = pre_topic
    lines = b"".join(b"%d\n" % i for i in range(20_000))
    assert run("produce", "pre", "-p", "0", "-q", input=lines, env=env).returncode == 0
    result = subprocess.run(
        f"{' '.join(CLI)} consume pre -p 0 --from-beginning -e -q | head -n 1",
        shell=True,
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
        executable="/bin/bash",
    )
    assert result.stdout == b"0\n"
    assert b"Traceback" not in result.stderr, result.stderr


def test_produce_shows_a_progress_bar_with_rate_on_a_terminal(kafka_bootstrap: str, tmp_path: Path) -> None:
    import pty

    env = {**os.environ, "KAFKA_BOOTSTRAP": kafka_bootstrap, "COLUMNS": "160", "TERM": "xterm"}
    path = tmp_path / "big.txt"
    path.write_bytes(b"".join(b"%07d\n" % i for i in range(600_000)))  # 4.8 MB: a "long input"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, "produce", "big", "--file", str(path)], stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    screen = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert b"records/s" in screen and b"MB/s" in screen  # the live bar
    assert b"produced 600,000 records to big" in screen
    # ... and without a terminal, no bar, only the summary line
    quiet = run("produce", "big", "--file", str(path), env=env)
    assert quiet.returncode == 0
    assert b"MB/s" not in quiet.stderr and b"produced 600,000 records" in quiet.stderr
