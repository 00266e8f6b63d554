"""The hanging-transaction scenario of issue #30, shared by tests/operators (the pass's
broker: embedded or ``--kafka=apache``) and tests/kafka4 (an Apache Kafka 4.4 of its own,
cross-checked with Kafka's ``kafka-transactions`` tool).

A transactional producer in another process (``hanging_producer.py``) commits ``before``,
sends ``open-1``/``open-2`` in a transaction with a 10-minute timeout and is SIGKILLed:
the partition's last stable offset stays at the open transaction's first offset, so a
read_committed consumer cannot pass it, until ``transactions abort`` ends it.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite import Consumer, Producer, TopicPartition
from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.cli.app import app

PRODUCER_SCRIPT = Path(__file__).with_name("hanging_producer.py")
_runner = CliRunner()


def cli(bootstrap: str, *args: str) -> Result:
    return _runner.invoke(app, list(args), env={"KAFKA_BOOTSTRAP": bootstrap})


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def cli_json(bootstrap: str, *args: str) -> Any:
    return json.loads(ok(cli(bootstrap, *args, "--json")).stdout)


def start_hanging_producer(
    bootstrap: str, topic: str, transactional_id: str, limit_s: float = 90
) -> subprocess.Popen[str]:
    """The producer process, once it has flushed its open transaction (``ready``)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, str(PRODUCER_SCRIPT), bootstrap, topic, transactional_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + limit_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise AssertionError(f"the producer did not get ready within {limit_s} s")
            line = proc.stdout.readline()
            if line.strip() == "ready":
                return proc
            if not line:  # exited
                proc.wait(10)
                raise AssertionError(
                    f"the producer exited ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}"
                )
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    finally:
        sel.close()


def sigkill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


async def create_topic(bootstrap: str, topic: str) -> None:
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 1, 1)])).raise_errors()


async def produce_plain(bootstrap: str, topic: str, value: bytes) -> int:
    async with Producer(bootstrap) as p:
        return (await p.send(topic, value, partition=0)).offset


async def committed_end(bootstrap: str, topic: str) -> int:
    """The partition's last stable offset (ListOffsets latest, read_committed)."""
    tp = TopicPartition(topic, 0)
    async with Admin(bootstrap) as admin:
        res = (await admin.list_offsets({tp: "latest"}, isolation_level="read_committed")).raise_errors()
    return res[tp].offset


async def read_committed(bootstrap: str, topic: str, want: int, limit_s: float = 30) -> list[bytes]:
    """The first ``want`` values a read_committed consumer gets from the start of partition 0."""
    tp = TopicPartition(topic, 0)
    out: list[bytes] = []
    async with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as c:
        c.assign([tp])
        async with asyncio.timeout(limit_s):
            while len(out) < want:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    out.extend(bytes(r.value) for r in recs if r.value is not None)
    return out
