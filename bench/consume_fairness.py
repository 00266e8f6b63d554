"""What the Consumer's fairness yields cost: ``async for`` throughput of two source trees.

The Consumer lets other tasks run while it serves buffered records (a turn every 3 ms,
the clock read at check points). This bench runs the same ``async for`` loop against
two copies of ``src/``: ``--before`` (e.g. a tree exported from the commit before the
change: ``git archive <commit> src | tar -x -C /tmp/before``) and ``--after`` (default:
this checkout's ``src/``), in alternating rounds, each round in a fresh process, against
one embedded broker (its own process) filled once, as bench/consume.py does.

Two loops per tree:

* ``fetch``: bench/consume.py's ``async for`` (assignment, fetches and all; the clock
  starts before assignment);
* ``buffered``: the whole topic is buffered first (large buffer caps), then only the
  ``async for`` over it is timed: the loop the yields are inserted into, nothing else.

Reported per tree and loop: median records/s and median CPU seconds (this process) per
million records, and the median of the per-round after/before ratios.

On a loaded shared machine whole runs vary by far more than the cost measured (rounds
of the same tree differ by 2x), so ``--toggled`` is the finer measurement: one process,
the mechanism switched on and off in alternate segments of 10,000 records.

Run: .venv/bin/python bench/consume_fairness.py --before /tmp/before/src [--records 500000] [--rounds 7]
     .venv/bin/python bench/consume_fairness.py --toggled [--records 3000000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import consume  # noqa: E402  (bench/consume.py: broker, produce, the fetch loop)

TOGGLE_SEGMENT = 10_000
BIG_BUFFER = {
    "max_buffered_bytes": 1 << 30,
    "fetch_max_bytes": 64 << 20,
    "max_partition_fetch_bytes": 16 << 20,
}


async def wait_all_buffered(consumer: Any, tps: list[Any], records: int) -> None:
    fetcher = consumer.fetcher
    assert fetcher is not None
    ends = await consumer.end_offsets(tps)
    assert sum(ends.values()) == records

    def all_buffered() -> bool:
        return all(
            (last := fetcher.buffer.last(tp)) is not None and last.next_fetch_offset >= ends[tp]
            for tp in tps
            if ends[tp]
        )

    while not all_buffered():  # noqa: ASYNC110 - the buffer has no event to wait on
        await asyncio.sleep(0.01)


async def buffered_loop(bootstrap: str, records: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``async for`` over a buffer holding every record."""
    from aiokafka_lite import Consumer, TopicPartition

    tps = [TopicPartition(consume.TOPIC, p) for p in range(consume.PARTITIONS)]
    async with Consumer(bootstrap, auto_offset_reset="earliest", **BIG_BUFFER) as consumer:
        consumer.assign(tps)
        await wait_all_buffered(consumer, tps, records)
        cpu = time.process_time()
        start = time.perf_counter()
        n = 0
        size = 0
        async for rec in consumer:
            n += 1
            size += len(rec.value)
            if n == records:
                break
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    assert size == records * consume.VALUE_SIZE
    return elapsed, cpu


async def toggled_loop(bootstrap: str, records: int, segment: int, buffered: bool) -> dict[str, list[float]]:
    """One consumer, every record buffered; the ``async for`` runs in segments of
    ``segment`` records (``buffered``: once every record is buffered; else while the
    fetcher fetches, default settings), alternately with the fairness mechanism on and off (off: the
    yield interval and the check-point spacing set to infinity, so the clock is read
    only when a new chunk starts and no turn is taken: the loop of the tree before the
    change, give or take one clock read per chunk), each segment timed.
    Both modes run in the same process within milliseconds of each other, so load
    changes on a shared machine hit both alike. Each segment ends with a few turns for
    the other tasks inside its timing: without them the work the fetcher gets from a
    segment without yields would run (and be counted) in the next segment that yields,
    a bias of ~3% against the yields. With fetching going on (``toggled-fetch``) some of
    the fetcher's work may still land in a neighbouring segment: read it as a bound."""
    from aiokafka_lite import Consumer, TopicPartition
    from aiokafka_lite.consume import fairness as fairness_module

    on = {
        name: getattr(fairness_module, name)
        for name in ("YIELD_INTERVAL_S", "CHECK_SPACING_S", "MAX_CHECK_EVERY")
    }
    off = {"YIELD_INTERVAL_S": float("inf"), "CHECK_SPACING_S": 1e9, "MAX_CHECK_EVERY": 1 << 62}
    tps = [TopicPartition(consume.TOPIC, p) for p in range(consume.PARTITIONS)]
    out: dict[str, list[float]] = {"on": [], "off": [], "on_cpu": [], "off_cpu": []}
    settings = BIG_BUFFER if buffered else {}
    async with Consumer(bootstrap, auto_offset_reset="earliest", **settings) as consumer:
        consumer.assign(tps)
        if buffered:
            await wait_all_buffered(consumer, tps, records)
        it = aiter(consumer)
        done = 0
        mode = "on"
        while done + segment <= records:
            for name, value in (on if mode == "on" else off).items():
                setattr(fairness_module, name, value)
            cpu = time.process_time()
            start = time.perf_counter()
            size = 0
            for _ in range(segment):
                size += len((await anext(it)).value)
            # Let the other tasks do the work this segment gave them (the fetcher's), so it
            # is counted in this segment, not in the next one that yields.
            for _ in range(5):
                await asyncio.sleep(0)
            out[mode].append(time.perf_counter() - start)
            out[f"{mode}_cpu"].append(time.process_time() - cpu)
            done += segment
            mode = "off" if mode == "on" else "on"
    for name, value in on.items():
        setattr(fairness_module, name, value)
    return out


def worker(src: str, loop: str, bootstrap: str, records: int) -> None:
    sys.path.insert(0, src)
    import aiokafka_lite

    assert os.path.dirname(os.path.abspath(aiokafka_lite.__file__)).startswith(os.path.abspath(src))
    if loop == "fetch":
        cpu = time.process_time()
        elapsed = asyncio.run(consume.run_ours(bootstrap, records, "async-for"))
        cpu = time.process_time() - cpu
    elif loop.startswith("toggled"):
        buffered = loop == "toggled-buffered"
        print(json.dumps(asyncio.run(toggled_loop(bootstrap, records, TOGGLE_SEGMENT, buffered))))
        return
    else:
        elapsed, cpu = asyncio.run(buffered_loop(bootstrap, records))
    print(json.dumps({"elapsed": elapsed, "cpu": cpu}))


def report_toggled(loop: str, res: dict[str, list[float]]) -> None:
    on, off = res["on"], res["off"]
    print(f"{loop}: {len(on)} + {len(off)} alternating segments of {TOGGLE_SEGMENT:,} records")
    for mode, key in (("fairness on", "on"), ("fairness off", "off")):
        rate = TOGGLE_SEGMENT / statistics.median(res[key])
        cpu = statistics.median(res[f"{key}_cpu"]) / TOGGLE_SEGMENT * 1e6
        print(f"  {mode:12s} median {rate:>12,.0f} records/s  {cpu:6.3f} CPU s per million records")
    pairs = [b / a for a, b in zip(on, off, strict=False)]
    print(f"  on/off throughput (wall), median of adjacent pairs: {statistics.median(pairs):.4f}")
    cpu_pairs = [b / a for a, b in zip(res["on_cpu"], res["off_cpu"], strict=False) if a > 0]
    print(f"  on/off throughput (CPU), median of adjacent pairs: {statistics.median(cpu_pairs):.4f}")


def run_worker(src: str, loop: str, bootstrap: str, records: int) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            loop,
            "--src",
            src,
            "--bootstrap",
            bootstrap,
            "--records",
            str(records),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"worker failed: {out.stderr.strip()[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", help="src/ directory of the tree to compare against")
    ap.add_argument("--after", default=os.path.join(HERE, "..", "src"))
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--loops", default="buffered,fetch")
    ap.add_argument(
        "--toggled",
        action="store_true",
        help="only the --after tree: alternate segments with the fairness on and off in one process",
    )
    ap.add_argument("--worker")
    ap.add_argument("--src")
    ap.add_argument("--bootstrap")
    args = ap.parse_args()
    if args.worker:
        worker(args.src, args.worker, args.bootstrap, args.records)
        return
    if args.toggled:
        broker, bootstrap = consume.start_broker(f"{consume.TOPIC}:{consume.PARTITIONS}")
        try:
            asyncio.run(
                consume.produce(
                    bootstrap, consume.TOPIC, consume.PARTITIONS, args.records, consume.VALUE_SIZE, 2000
                )
            )
            for loop in ("toggled-buffered", "toggled-fetch"):
                report_toggled(loop, run_worker(args.after, loop, bootstrap, args.records))
        finally:
            broker.kill()
            broker.wait()
        return
    if not args.before:
        ap.error("--before is required (or --toggled)")
    trees = {"before": args.before, "after": args.after}
    loops = args.loops.split(",")
    broker, bootstrap = consume.start_broker(f"{consume.TOPIC}:{consume.PARTITIONS}")
    results: dict[tuple[str, str], list[dict[str, float]]] = {(t, lp): [] for t in trees for lp in loops}
    try:
        asyncio.run(
            consume.produce(
                bootstrap, consume.TOPIC, consume.PARTITIONS, args.records, consume.VALUE_SIZE, 2000
            )
        )
        for rnd in range(args.rounds):
            # Alternate which tree goes first, so a drift in load hits both alike.
            order = list(trees) if rnd % 2 == 0 else list(reversed(trees))
            for loop in loops:
                for tree in order:
                    res = run_worker(trees[tree], loop, bootstrap, args.records)
                    results[(tree, loop)].append(res)
                    print(
                        f"round {rnd + 1} {loop:8s} {tree:6s} {args.records / res['elapsed']:>12,.0f} rec/s "
                        f"{res['cpu'] / args.records * 1e6:6.3f} CPU s/M",
                        flush=True,
                    )
    finally:
        broker.kill()
        broker.wait()
    print()
    print(f"{args.records:,} records, {args.rounds} rounds, medians:")
    for loop in loops:
        for tree in trees:
            runs = results[(tree, loop)]
            rate = statistics.median(args.records / r["elapsed"] for r in runs)
            cpu = statistics.median(r["cpu"] / args.records * 1e6 for r in runs)
            print(f"  {loop:8s} {tree:6s} {rate:>12,.0f} records/s  {cpu:6.3f} CPU s per million records")
        ratios = [
            a["elapsed"] / b["elapsed"]
            for a, b in zip(results[("before", loop)], results[("after", loop)], strict=True)
        ]
        print(f"  {loop:8s} after/before throughput, median of rounds: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
