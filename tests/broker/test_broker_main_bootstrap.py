"""``python -m aiokafka_lite.broker --bootstrap HOST:PORT``, as docs/guide/testing.md and
``aiokafka-lite broker`` spell it: the same options start the same cluster."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

import pytest

from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import MetadataRequest, MetadataResponse

# Each command, and where it prints "listening on HOST:PORT" (the CLI keeps stdout for data).
ENTRY_POINTS = {
    "python -m aiokafka_lite.broker": ([sys.executable, "-m", "aiokafka_lite.broker"], "stdout"),
    "aiokafka-lite broker": ([sys.executable, "-m", "aiokafka_lite.cli", "broker"], "stderr"),
}


@pytest.mark.parametrize("entry_point", sorted(ENTRY_POINTS))
async def test_bootstrap_option_starts_the_cluster_there(entry_point: str) -> None:
    command, announced_on = ENTRY_POINTS[entry_point]
    proc = await asyncio.create_subprocess_exec(
        *command,
        "--bootstrap",
        "127.0.0.1:0",
        "--topic",
        "orders:6",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        announcements = proc.stdout if announced_on == "stdout" else proc.stderr
        assert announcements is not None
        line = (await asyncio.wait_for(announcements.readline(), 60)).decode().strip()
        assert line.startswith("listening on 127.0.0.1:"), line
        bootstrap = line.removeprefix("listening on ")
        async with await RawClient.connect(bootstrap) as client:
            response = await client.request(MetadataRequest(topics=None), 12)
        assert isinstance(response, MetadataResponse)
        assert [(t.name, len(t.partitions)) for t in response.topics] == [("orders", 6)]
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bootstrap", "localhost"], "argument --bootstrap: expected HOST:PORT, got 'localhost'"),
        (
            ["--bootstrap", "127.0.0.1:0", "--port", "9093"],
            "--bootstrap HOST:PORT replaces --host and --port",
        ),
    ],
)
def test_bootstrap_option_errors_say_what_is_wrong(args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "aiokafka_lite.broker", *args], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2 and message in result.stderr, result.stderr
