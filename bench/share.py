"""Share groups as a work queue: records/s acknowledged on ONE partition with 1, 4 and 16
share consumers, against a classic consumer group on the same topic, in the same run.

The topic (one partition, ``--records`` records of ``--value-size`` bytes) is filled
once; then every scenario reads all of it back with a fresh group, in its own process
(all of a scenario's consumers are tasks of that one process, as in an asyncio service):

* ``share xN``: N ``ShareConsumer`` members of one share group (implicit
  acknowledgement: the records of a poll are accepted by the next poll, which carries
  the acknowledgements on its ShareFetch). At the end every member calls ``commit()``,
  so every record is acknowledged on the broker when the clock stops.
* ``classic``: one ``Consumer`` in a consumer group (more members would idle: one
  partition), committing its position after every ``getmany`` batch, the classic
  group's counterpart of acknowledging what was processed.

Reported: records / (time from the first record received to the last acknowledgement or
commit answered), best of ``--runs``; joining the group is not counted. Each consumer
touches every record's value.

The embedded broker runs in its own process (``python -m aiokafka_lite.broker``);
``--bootstrap`` targets any Kafka with share groups enabled (Apache Kafka 4.x), where a
fresh topic is created and deleted at the end.

Run: .venv/bin/python bench/share.py [--records 50000] [--consumers 1,4,16] [--runs 2]
     [--bootstrap 127.0.0.1:9092]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.consume.share import ShareConsumer

_STALL_S = 60.0  # no progress for this long: the scenario failed


def start_broker() -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


async def fill(bootstrap: str, topic: str, records: int, value_size: int) -> None:
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 1)])).raise_errors()
    value = b"v" * value_size
    # Kafka's default batch size (16 KiB, ~130 records here): batch-optimized share
    # acquisition hands out whole batches, so the batches set the grain of the sharing.
    async with Producer(bootstrap, linger_ms=5, batch_size=16384) as producer:
        chunk = 5000
        for start in range(0, records, chunk):
            await producer.send_batch(topic, [value] * min(chunk, records - start))


class Progress:
    """Records seen by all consumers of a scenario, and when the first one came."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.seen = 0
        self.first: float | None = None
        self.done = asyncio.Event()
        self.last_progress = time.monotonic()

    def got(self, n: int) -> None:
        if n:
            if self.first is None:
                self.first = time.perf_counter()
            self.seen += n
            self.last_progress = time.monotonic()
            if self.seen >= self.total:
                self.done.set()

    def check_stall(self) -> None:
        if time.monotonic() - self.last_progress > _STALL_S:
            raise SystemExit(f"stalled at {self.seen}/{self.total} records")


async def run_share(bootstrap: str, topic: str, records: int, members: int) -> dict[str, Any]:
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap) as admin:
        changes = {ConfigResource.group(group): {"share.auto.offset.reset": "earliest"}}
        (await admin.incremental_alter_configs(changes)).raise_errors()
    progress = Progress(records)
    per_member: list[int] = []

    async def member(consumer: ShareConsumer) -> None:
        mine = 0
        while not progress.done.is_set():
            progress.check_stall()
            batch = await consumer.poll(timeout_ms=200)
            for r in batch:
                _ = r.value
            mine += len(batch)
            progress.got(len(batch))
        failures = await consumer.commit()  # the last poll's records, acknowledged now
        bad = {tp: e for tp, e in failures.items() if e is not None}
        if bad:
            raise SystemExit(f"acknowledgement failed: {bad}")
        per_member.append(mine)

    consumers = [ShareConsumer(bootstrap, group_id=group, topics=[topic]) for _ in range(members)]
    for c in consumers:
        await c.start()
    try:
        await asyncio.gather(*(member(c) for c in consumers))
        end = time.perf_counter()
    finally:
        for c in consumers:
            await c.close()
    assert progress.first is not None
    return {
        "rate": progress.seen / (end - progress.first),
        "seen": progress.seen,
        "per_member": sorted(per_member, reverse=True),
    }


async def run_classic(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    group = f"bench-classic-{uuid.uuid4().hex[:8]}"
    progress = Progress(records)
    async with Consumer(
        bootstrap, topics=topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        while not progress.done.is_set():
            progress.check_stall()
            batches = await consumer.getmany(timeout_ms=200, max_records=500)
            n = 0
            for batch in batches.values():
                for r in batch:
                    _ = r.value
                n += len(batch)
            if n:
                await consumer.commit()
            progress.got(n)
        end = time.perf_counter()
    assert progress.first is not None
    return {
        "rate": progress.seen / (end - progress.first),
        "seen": progress.seen,
        "per_member": [progress.seen],
    }


def scenario_main(args: argparse.Namespace) -> None:
    if args.scenario == "classic":
        result = asyncio.run(run_classic(args.bootstrap, args.topic, args.records))
    else:
        result = asyncio.run(run_share(args.bootstrap, args.topic, args.records, int(args.scenario)))
    print(json.dumps(result))


def run_scenario(bootstrap: str, topic: str, records: int, scenario: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--scenario",
            scenario,
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--records",
            str(records),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--consumers", default="1,4,16", help="share-group sizes to measure")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--bootstrap", help="a Kafka with share groups (default: an embedded broker process)")
    ap.add_argument("--scenario", help=argparse.SUPPRESS)  # internal: one scenario in this process
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.scenario:
        scenario_main(args)
        return

    broker: subprocess.Popen[str] | None = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker, bootstrap = start_broker()
    where = args.bootstrap or "embedded broker (own process)"
    topic = f"bench-share-{uuid.uuid4().hex[:8]}"
    try:
        asyncio.run(fill(bootstrap, topic, args.records, args.value_size))
        print(f"{args.records:,} records of {args.value_size} B on one partition, {where}", flush=True)
        scenarios = [*(s.strip() for s in args.consumers.split(",")), "classic"]
        best: dict[str, dict[str, Any]] = {}
        for run in range(args.runs):
            for s in scenarios:
                r = run_scenario(bootstrap, topic, args.records, s)
                label = "classic group, 1 consumer" if s == "classic" else f"share group, {s} consumers"
                print(f"  run {run + 1}: {label:28s} {json.dumps(r)}", flush=True)
                if "rate" in r and r["rate"] > best.get(s, {}).get("rate", 0):
                    best[s] = r
                elif "rate" not in r and s not in best:
                    best[s] = r
        print()
        print("| group | consumers | records/s acknowledged | records per consumer (max..min) |")
        print("|---|---:|---:|---|")
        for s in scenarios:
            r = best.get(s, {"error": "?"})
            kind, n = ("classic", "1") if s == "classic" else ("share", s)
            if "rate" in r:
                spread = f"{r['per_member'][0]:,}..{r['per_member'][-1]:,}"
                print(f"| {kind} | {n} | {r['rate']:,.0f} | {spread} |")
            else:
                print(f"| {kind} | {n} | failed: {r['error']} | |")
    finally:
        if args.bootstrap is not None:

            async def cleanup() -> None:
                async with Admin(bootstrap) as admin:
                    await admin.delete_topics([topic])

            with contextlib.suppress(Exception):
                asyncio.run(cleanup())
        if broker is not None:
            broker.terminate()
            broker.wait()


if __name__ == "__main__":
    main()
