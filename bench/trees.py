"""Two source trees of aiokafka_lite side by side: the same patterns, interleaved rounds.

For a change that must not cost speed (issue 25's restructuring: "no pattern may lose more
than 3%"), the question is the ratio between two versions of the client on the same
machine at the same time, not an absolute number. Each round runs every pattern once per
tree and backend, alternating trees, each in a fresh worker process whose ``sys.path``
starts with that tree's ``src``; the broker is one embedded broker (its own process, from
this checkout) shared by both, so only the client differs.

Patterns (settings as bench/produce.py and bench/consume.py: 100-byte values, acks=all,
linger 5 ms, idempotence on, 6 partitions, no compression):

* produce ``enqueue+wait_all``, ``send x1000 tasks`` (an anyio task group on both
  backends), ``send_batch`` (one call for all records);
* consume ``async for`` and ``getmany(timeout_ms=1000, max_records=500)`` over a topic
  filled beforehand, manual assignment from the beginning.

Reported: records per second (best round) and CPU seconds per million records (the worker's
user+system time over the timed part, best round), for each tree, and after/before.

Run:  .venv/bin/python bench/trees.py --before /tmp/before --after . [--records 200000] [--rounds 3]

``--instructions`` counts instructions instead of timing (valgrind's cachegrind, no cache
simulation): each worker runs twice, with N and 2N records, and the difference over N is
the instructions per record, free of start-up and import; each cell is the median of
``--repeats`` such measurements. Timing on a shared 2-core machine moved by 30% between
repeats of one pattern; these counts do not depend on what else runs. They count the
client's own work only (not waiting, not the kernel's share), which is what a
restructuring of the client changes. The workers run with the garbage collector off:
with it on, the count steps with each full collection (one more or fewer in the 2N run
moves a cell by 10%), and how often the collector runs depends on the objects a pattern
keeps alive, which ``--gc-stats`` style counts compare better than instructions do.
Patterns whose work depends on timing (1,000 tasks waking in varying groups, fetches
that come back with more or fewer records) still vary by a few percent between repeats:
the table shows every repeat.

Run:  .venv/bin/python bench/trees.py --before /tmp/before --after . --instructions [--records 50000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import uuid

PARTITIONS = 6
VALUE = b"v" * 100
LITE = {"acks": "all", "linger_ms": 5, "enable_idempotence": True}
TASKS = 1000
PATTERNS = (
    "produce enqueue+wait_all",
    "produce send x1000 tasks",
    "produce send_batch",
    "consume async for",
    "consume getmany",
)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _make_topic(bootstrap: str, topic: str) -> None:
    from aiokafka_lite import Admin, NewTopic

    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, partitions=PARTITIONS)])).raise_errors()


async def _produce(bootstrap: str, n: int, pattern: str) -> tuple[float, float]:
    import anyio

    from aiokafka_lite import Producer

    topic = f"t-{uuid.uuid4().hex[:8]}"
    await _make_topic(bootstrap, topic)
    async with Producer(bootstrap, **LITE) as p:
        await p.send(topic, b"warm-up")
        c0, t0 = _cpu(), time.perf_counter()
        if pattern == "enqueue+wait_all":
            enqueue = p.enqueue
            futs = [await enqueue(topic, VALUE) for _ in range(n)]
            await p.wait_all(futs)
        elif pattern == "send_batch":
            await p.send_batch(topic, [VALUE] * n)
        else:

            async def worker(count: int) -> None:
                for _ in range(count):
                    await p.send(topic, VALUE)

            share, extra = divmod(n, TASKS)
            async with anyio.create_task_group() as tg:
                for i in range(TASKS):
                    tg.start_soon(worker, share + (1 if i < extra else 0))
        return time.perf_counter() - t0, _cpu() - c0


async def _consume(bootstrap: str, n: int, pattern: str, topic: str) -> tuple[float, float]:
    from aiokafka_lite import Consumer, TopicPartition

    async with Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        seen = 0
        c0, t0 = _cpu(), time.perf_counter()
        if pattern == "async for":
            async for record in c:
                _ = record.value
                seen += 1
                if seen >= n:
                    break
        else:
            while seen < n:
                batch = await c.getmany(timeout_ms=1000, max_records=500)
                for recs in batch.values():
                    for record in recs:
                        _ = record.value
                    seen += len(recs)
        return time.perf_counter() - t0, _cpu() - c0


async def _fill(bootstrap: str, topic: str, n: int) -> None:
    from aiokafka_lite import Producer

    await _make_topic(bootstrap, topic)
    async with Producer(bootstrap, linger_ms=20, batch_size=256 * 1024) as p:
        await p.wait_all([await p.enqueue(topic, VALUE) for _ in range(n)])


def _worker(backend: str, pattern: str, bootstrap: str, n: int, topic: str) -> tuple[float, float]:
    async def run() -> tuple[float, float]:
        kind, _, name = pattern.partition(" ")
        if kind == "fill":
            await _fill(bootstrap, topic, n)
            return 0.0, 0.0
        if kind == "produce":
            return await _produce(bootstrap, n, name)
        return await _consume(bootstrap, n, name, topic)

    if backend == "trio":
        import trio

        return trio.run(run)  # type: ignore[no-any-return]
    import asyncio

    return asyncio.run(run())


def _worker_cmd(src: str, backend: str, pattern: str, bootstrap: str, n: int, topic: str) -> list[str]:
    """The command line of one worker run of ``pattern`` over ``n`` records with ``src``'s client."""
    return [
        *(sys.executable, os.path.abspath(__file__), "--worker", backend, "--pattern", pattern),
        *("--bootstrap", bootstrap, "--records", str(n), "--topic", topic, "--src", src),
    ]


def _spawn(src: str, backend: str, pattern: str, bootstrap: str, n: int, topic: str) -> tuple[float, float]:
    cmd = _worker_cmd(src, backend, pattern, bootstrap, n, topic)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{src}: {backend} {pattern} failed:\n{out.stderr[-3000:]}")
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    return float(answer["seconds"]), float(answer["cpu"])


def _instructions(src: str, backend: str, pattern: str, bootstrap: str, n: int, topic: str) -> int:
    """Instructions the worker executed, under cachegrind (no cache simulation), with the
    garbage collector off (see the module docstring)."""
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    cmd += [*_worker_cmd(src, backend, pattern, bootstrap, n, topic), "--gc-off"]
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiling the package each run would dwarf the rest
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False, env=env)
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if out.returncode != 0 or not found:
        raise SystemExit(f"{src}: {backend} {pattern} failed under valgrind:\n{out.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))


def _per_record(job: tuple[str, str, str, str, int, str]) -> float:
    src, backend, pattern, bootstrap, n, topic = job
    small = _instructions(src, backend, pattern, bootstrap, n, topic)
    large = _instructions(src, backend, pattern, bootstrap, 2 * n, topic)
    return (large - small) / n


def _instruction_table(
    trees: dict[str, str],
    backends: list[str],
    patterns: list[str],
    bootstrap: str,
    n: int,
    repeats: int,
    jobs: int,
) -> None:
    """Instructions per record for each tree: (I(2N) - I(N)) / N, the median of
    ``repeats`` measurements, trees side by side."""
    from concurrent.futures import ThreadPoolExecutor

    topic = "trees-src"
    for src in trees.values():  # a first run writes each tree's bytecode, outside the counts
        _spawn(src, "asyncio", "produce send_batch", bootstrap, 10, topic)
    keys = [(p, b, t) for p in patterns for b in backends for t in trees for _ in range(repeats)]
    with ThreadPoolExecutor(jobs) as pool:
        counts = list(pool.map(_per_record, [(trees[t], b, p, bootstrap, n, topic) for p, b, t in keys]))
    found: dict[tuple[str, str, str], list[float]] = {}
    for key, value in zip(keys, counts, strict=True):
        found.setdefault(key, []).append(value)
    print(f"\ninstructions per record, GC off: (I(2N) - I(N)) / N, N = {n:,} records of 100 bytes;")
    print(f"median of {repeats} (all of them in brackets)\n")
    print("| pattern | backend | before | after | after/before |")
    print("|---|---|---:|---:|---:|")
    for pattern in patterns:
        for backend in backends:
            cells = []
            for tree in ("before", "after"):
                values = sorted(found[(pattern, backend, tree)])
                cells.append((statistics.median(values), ", ".join(f"{v:,.0f}" for v in values)))
            (b, b_all), (a, a_all) = cells
            print(f"| {pattern} | {backend} | {b:,.0f} ({b_all}) | {a:,.0f} ({a_all}) | {a / b:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="/tmp/before", help="checkout of the old version")
    ap.add_argument("--after", default=".", help="checkout of the new version")
    ap.add_argument("--records", type=int, default=None, help="200,000 (timing) or 50,000 (--instructions)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="asyncio,trio")
    ap.add_argument("--patterns", default=",".join(PATTERNS))
    ap.add_argument("--instructions", action="store_true", help="count instructions per record (valgrind)")
    ap.add_argument("--repeats", type=int, default=3, help="with --instructions: measurements per cell")
    ap.add_argument("--jobs", type=int, default=2, help="with --instructions: valgrind runs at once")
    ap.add_argument("--gc-off", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--pattern", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", default="", help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.records is None:
        args.records = 50_000 if args.instructions else 200_000
    if args.worker:
        if args.gc_off:
            gc.disable()
        sys.path.insert(0, args.src)
        secs, cpu = _worker(args.worker, args.pattern, args.bootstrap, args.records, args.topic)
        print(json.dumps({"seconds": secs, "cpu": cpu}))
        return
    trees = {"before": os.path.join(args.before, "src"), "after": os.path.join(args.after, "src")}
    backends = args.backends.split(",")
    patterns = [p for p in args.patterns.split(",") if p]
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
        topic = "trees-src"
        if args.instructions:
            # The consume patterns read 2N records in their larger run.
            _spawn(trees["after"], "asyncio", "fill", bootstrap, 2 * args.records, topic)
            _instruction_table(trees, backends, patterns, bootstrap, args.records, args.repeats, args.jobs)
            return
        _spawn(trees["after"], "asyncio", "fill", bootstrap, args.records, topic)
        best: dict[tuple[str, str, str], tuple[float, float]] = {}
        for rnd in range(args.rounds):
            order = list(trees) if rnd % 2 == 0 else list(reversed(trees))
            for pattern in patterns:
                for backend in backends:
                    for tree in order:
                        secs, cpu = _spawn(trees[tree], backend, pattern, bootstrap, args.records, topic)
                        key = (pattern, backend, tree)
                        old = best.get(key)
                        best[key] = (min(old[0], secs), min(old[1], cpu)) if old else (secs, cpu)
            print(f"round {rnd + 1}/{args.rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"\n{args.records:,} records of 100 bytes; best of {args.rounds} interleaved rounds\n")
        print(
            "| pattern | backend | before rec/s | after rec/s | after/before | CPU s/M before | CPU s/M after |"
        )
        print("|---|---|---:|---:|---:|---:|---:|")
        per_m = 1_000_000 / args.records
        for pattern in patterns:
            for backend in backends:
                b_s, b_cpu = best[(pattern, backend, "before")]
                a_s, a_cpu = best[(pattern, backend, "after")]
                print(
                    f"| {pattern} | {backend} | {args.records / b_s:,.0f} | {args.records / a_s:,.0f} "
                    f"| {b_s / a_s:.3f} | {b_cpu * per_m:.2f} | {a_cpu * per_m:.2f} |"
                )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
