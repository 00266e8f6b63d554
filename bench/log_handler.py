"""KafkaHandler: what a log call costs the application, with Kafka up and with Kafka down.

For ``--records`` INFO lines with one ``extra`` field, logged from a coroutine that
yields every 100 lines:

* ``format only``: ``JsonFormatter.format`` alone (the floor of a log call);
* ``kafka up``: a log call on a logger whose one handler is a KafkaHandler sending to
  ``--bootstrap`` (default: an embedded broker started as a process), then the time for
  everything to be acknowledged (``flush``) and the records/s end to end;
* ``kafka down``: the same against a closed port: the calls fill the buffer, then drop.

Each line shows microseconds per log call and the longest the event loop waited for a
ticker task meanwhile (a blocked loop would show here).

Run: .venv/bin/python bench/log_handler.py [--records N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from aiokafka_lite.integrations.log_handler import JsonFormatter, KafkaHandler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def embedded_broker() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


async def log_lines(logger: logging.Logger, records: int) -> tuple[float, float]:
    """Seconds spent logging, and the longest event-loop stall seen by a ticker."""
    stall = 0.0

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0)
            now = time.perf_counter()
            stall = max(stall, now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = time.perf_counter()
    for i in range(records):
        logger.info("request %d served", i, extra={"status": 200})
        if i % 100 == 99:
            await asyncio.sleep(0)
    elapsed = time.perf_counter() - start
    tick.cancel()
    return elapsed, stall


def fresh_logger(handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"bench-{uuid.uuid4().hex[:6]}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return logger


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()
    n = args.records

    formatter = JsonFormatter()
    record = logging.makeLogRecord(
        {"msg": "request %d served", "args": (1,), "status": 200, "levelname": "INFO"}
    )
    start = time.perf_counter()
    for _ in range(n):
        formatter.format(record)
    print(f"format only   {1e6 * (time.perf_counter() - start) / n:7.1f} us/call")

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(embedded_broker())
        handler = KafkaHandler(bootstrap, f"bench-logs-{uuid.uuid4().hex[:6]}", max_buffered=n, acks=1)
        elapsed, stall = await log_lines(fresh_logger(handler), n)
        flush_start = time.perf_counter()
        await asyncio.to_thread(handler.flush)
        total = elapsed + time.perf_counter() - flush_start
        await asyncio.to_thread(handler.close)
        print(
            f"kafka up      {1e6 * elapsed / n:7.1f} us/call, loop stall max {1e3 * stall:6.1f} ms; "
            f"{handler.sent} acknowledged, {handler.sent / total:,.0f} records/s end to end"
        )

    handler = KafkaHandler(
        f"127.0.0.1:{free_port()}", "bench-logs", max_buffered=10_000, close_timeout_ms=100
    )
    elapsed, stall = await log_lines(fresh_logger(handler), n)
    print(
        f"kafka down    {1e6 * elapsed / n:7.1f} us/call, loop stall max {1e3 * stall:6.1f} ms; "
        f"{handler.buffered} buffered, {handler.dropped} dropped"
    )
    await asyncio.to_thread(handler.close)


if __name__ == "__main__":
    asyncio.run(main())
