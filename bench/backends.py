"""aiokafka_lite on asyncio beside aiokafka_lite on trio: produce and consume throughput.

The same client code runs under ``asyncio.run`` and ``trio.run``, each round in a fresh
worker process, against one embedded broker (``python -m aiokafka_lite.broker``, its own
process). Patterns (settings as bench/produce.py and bench/consume.py):

* produce ``enqueue+wait_all``: N records of 100 bytes, acks=all, linger 5 ms,
  idempotence on, 6 partitions, no compression;
* produce ``send x1000 tasks``: 1,000 tasks (an anyio task group on both backends),
  each awaiting ``send()`` for its share;
* consume ``async for`` and ``getmany(timeout_ms=1000, max_records=500)``: every record
  of a 6-partition topic filled beforehand, manual assignment from the beginning.

Best of ``--rounds`` interleaved rounds (2 shared cores: load matters).

Run:  .venv/bin/python bench/backends.py [--records 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, HERE)
from produce import clock  # noqa: E402  (a wall clock that notes CPU time too)

PARTITIONS = 6
VALUE = b"v" * 100
LITE = {"acks": "all", "linger_ms": 5, "enable_idempotence": True}
TASKS = 1000
PATTERNS = ("produce enqueue+wait_all", "produce send x1000 tasks", "consume async for", "consume getmany")


async def _make_topic(bootstrap: str, topic: str) -> None:
    from aiokafka_lite import Admin, NewTopic

    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, partitions=PARTITIONS)])).raise_errors()


async def produce_wait_all(bootstrap: str, n: int) -> float:
    from aiokafka_lite import Producer

    topic = f"b-{uuid.uuid4().hex[:8]}"
    await _make_topic(bootstrap, topic)
    async with Producer(bootstrap, **LITE) as p:
        await p.send(topic, b"warm-up")
        t0 = clock()
        enqueue = p.enqueue
        futs = [await enqueue(topic, VALUE) for _ in range(n)]
        await p.wait_all(futs)
        return clock() - t0


async def produce_tasks(bootstrap: str, n: int) -> float:
    import anyio

    from aiokafka_lite import Producer

    topic = f"b-{uuid.uuid4().hex[:8]}"
    await _make_topic(bootstrap, topic)
    async with Producer(bootstrap, **LITE) as p:
        await p.send(topic, b"warm-up")

        async def worker(count: int) -> None:
            for _ in range(count):
                await p.send(topic, VALUE)

        share, extra = divmod(n, TASKS)
        t0 = clock()
        async with anyio.create_task_group() as tg:
            for i in range(TASKS):
                tg.start_soon(worker, share + (1 if i < extra else 0))
        return clock() - t0


async def consume(bootstrap: str, n: int, mode: str, topic: str) -> float:
    """The loops of bench/consume.py's ``run_ours``, on whichever backend runs it: the
    clock starts before assignment and the body reads each record's value length, so the
    asyncio and trio columns of bench/issue31.py time the same code."""
    from aiokafka_lite import Consumer, TopicPartition

    async with Consumer(bootstrap, auto_offset_reset="earliest") as c:
        t0 = clock()
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        seen = 0
        size = 0
        if mode == "async for":
            async for record in c:
                seen += 1
                size += len(record.value)
                if seen == n:
                    break
        else:
            while seen < n:
                batch = await c.getmany(timeout_ms=1000, max_records=500)
                for recs in batch.values():
                    for record in recs:
                        seen += 1
                        size += len(record.value)
        elapsed = clock() - t0
    assert size == n * len(VALUE)
    return elapsed


async def fill(bootstrap: str, topic: str, n: int) -> None:
    from aiokafka_lite import Producer

    await _make_topic(bootstrap, topic)
    async with Producer(bootstrap, linger_ms=20, batch_size=256 * 1024) as p:
        futs = [await p.enqueue(topic, VALUE) for _ in range(n)]
        await p.wait_all(futs)


def worker(backend: str, pattern: str, bootstrap: str, n: int, topic: str) -> float:
    async def run() -> float:
        if pattern == "produce enqueue+wait_all":
            return await produce_wait_all(bootstrap, n)
        if pattern == "produce send x1000 tasks":
            return await produce_tasks(bootstrap, n)
        if pattern == "fill":
            await fill(bootstrap, topic, n)
            return 0.0
        return await consume(bootstrap, n, pattern.removeprefix("consume "), topic)

    if backend == "trio":
        import trio

        return float(trio.run(run))
    import asyncio

    return asyncio.run(run())


def spawn(backend: str, pattern: str, bootstrap: str, n: int, topic: str) -> float:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            backend,
            "--pattern",
            pattern,
            "--bootstrap",
            bootstrap,
            "--records",
            str(n),
            "--topic",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{backend} {pattern} failed:\n{out.stderr[-3000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--pattern", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(
            json.dumps(
                {"seconds": worker(args.worker, args.pattern, args.bootstrap, args.records, args.topic)}
            )
        )
        return
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    bootstrap = line.removeprefix("listening on ")
    try:
        topic = "consume-src"
        spawn("asyncio", "fill", bootstrap, args.records, topic)
        best: dict[tuple[str, str], float] = {}
        for rnd in range(args.rounds):
            for pattern in PATTERNS:
                for backend in ("asyncio", "trio"):
                    secs = spawn(backend, pattern, bootstrap, args.records, topic)
                    key = (pattern, backend)
                    best[key] = min(best.get(key, secs), secs)
            print(f"round {rnd + 1}/{args.rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"\n{args.records:,} records of 100 bytes; best of {args.rounds} rounds\n")
        print("| pattern | asyncio rec/s | trio rec/s | trio / asyncio |")
        print("|---|---:|---:|---:|")
        for pattern in PATTERNS:
            a = args.records / best[(pattern, "asyncio")]
            t = args.records / best[(pattern, "trio")]
            print(f"| {pattern} | {a:,.0f} | {t:,.0f} | {t / a:.2f} |")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
