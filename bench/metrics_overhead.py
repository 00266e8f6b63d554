"""What the always-on metric counters cost: client CPU time per record, two source trees.

The counters behind ``metrics()`` (records/bytes per topic and batch-size histograms per
acknowledged batch, a latency-histogram bucket per response, records delivered per
chunk) are always on. This compares the client's CPU seconds (``time.process_time`` in
the client process: far less sensitive to a loaded machine than wall-clock throughput)
for the same work run from two source trees, e.g. a checkout from before the counters:

    git worktree add --detach /tmp/before <commit>
    .venv/bin/python bench/metrics_overhead.py --trees /tmp/before/src,src

Work per round, each in a fresh client process against one embedded broker process:
produce N records of 100 B (``enqueue`` + ``flush``, linger 5 ms, acks=1, 6 partitions),
then consume them all with ``async for``, with ``getmany`` and through ``OrderedWorkers``
(6 workers, a no-op async handler; its group join included). Rounds alternate the
trees; the best (lowest) CPU time per tree is shown, in microseconds per record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid


async def worker(bootstrap: str, records: int) -> dict[str, float]:
    from aiokafka_lite import Consumer, Producer, TopicPartition

    topic = f"overhead-{uuid.uuid4().hex[:8]}"
    out: dict[str, float] = {}
    value = b"x" * 100
    async with Producer(bootstrap, linger_ms=5, acks=1) as producer:
        await producer.partitions_for(topic)  # auto-created with the broker's 6 partitions
        start = time.process_time()
        for _ in range(records):
            await producer.enqueue(topic, value)
        await producer.flush()
        out["produce"] = time.process_time() - start
    tps = [TopicPartition(topic, p) for p in range(6)]
    for mode in ("async for", "getmany"):
        async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign(tps)
            n = 0
            start = time.process_time()
            if mode == "async for":
                async for _ in consumer:
                    n += 1
                    if n == records:
                        break
            else:
                while n < records:
                    batch = await consumer.getmany(timeout_ms=1000, max_records=500)
                    n += sum(len(v) for v in batch.values())
            out[mode] = time.process_time() - start
    from aiokafka_lite.processing import OrderedWorkers

    async def handle(_record: object) -> None:
        return None

    async with Consumer(
        bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        workers = OrderedWorkers(consumer, handle, concurrency=6)
        start = time.process_time()
        run = asyncio.create_task(workers.run())
        while workers.stats.processed < records:  # noqa: ASYNC110 - polling the pool's counter
            await asyncio.sleep(0.005)
        workers.stop()
        await run
        out["workers"] = time.process_time() - start
    return out


def run_worker(tree: str, bootstrap: str, records: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    args = [sys.executable, __file__, "--worker", "--bootstrap", bootstrap, "--records", str(records)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True, timeout=1200)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", default="src", help="comma-separated source directories to compare")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(worker(args.bootstrap, args.records))))
        return
    trees = args.trees.split(",")
    broker = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0", "--partitions", "6"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise SystemExit(f"broker did not start: {line!r}")
        bootstrap = line.removeprefix("listening on ")
        best: dict[str, dict[str, float]] = {t: {} for t in trees}
        for r in range(args.rounds):
            for tree in trees if r % 2 == 0 else reversed(trees):
                got = run_worker(tree, bootstrap, args.records)
                for k, v in got.items():
                    best[tree][k] = min(best[tree].get(k, v), v)
                load = os.getloadavg()[0]
                print(
                    f"round {r + 1} {tree}: " + ", ".join(f"{k} {v:.2f} s" for k, v in got.items()),
                    f"(load {load:.1f})",
                )
    finally:
        broker.kill()
        broker.wait()
    print(f"\nclient CPU microseconds per record, best of {args.rounds} ({args.records:,} records):")
    kinds = list(next(iter(best.values())))
    print(f"{'tree':40} " + " ".join(f"{k:>10}" for k in kinds))
    for tree, res in best.items():
        print(f"{tree:40} " + " ".join(f"{res[k] / args.records * 1e6:10.2f}" for k in kinds))


if __name__ == "__main__":
    main()
