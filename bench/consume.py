"""Consumer throughput and memory: aiokafka_lite against aiokafka, confluent-kafka, kafka-python.

One embedded broker runs in its own process (``python -m aiokafka_lite.broker``). The
records are produced once, then every client reads them all back in its own fresh
process (manual assignment of all partitions from the beginning, no group, no
commits), touching each record's value. Reported: records/s (best of ``--runs``),
and the ratios the issue asks for.

* ``ours async for`` / ``ours getmany``: ``async for`` over the Consumer, and
  ``getmany(timeout_ms=1000, max_records=500)``.
* ``aiokafka async for`` / ``aiokafka getmany``: the same with AIOKafkaConsumer.
* ``confluent consume``: ``Consumer.consume(num_messages=500, timeout=1)`` batches;
  ``confluent aio``: ``confluent_kafka.aio.AIOConsumer.consume`` when installed.
* ``kafka-python``: iterating a KafkaConsumer.

``--rss``: peak RSS of a *slow* consumer (sleeps 1 ms per record) reading a
2 GiB topic for ``--rss-seconds``, for a couple of ``max_buffered_bytes`` caps: memory
must track the cap, not the topic size.

Run: /work/venv/bin/python bench/consume.py [--records 1000000] [--runs 2] [--rss]
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
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from produce import clock  # a wall clock that notes CPU time too

TOPIC = "bench"
PARTITIONS = 6
VALUE_SIZE = 100

CLIENTS = [
    "ours-async-for",
    "ours-getmany",
    "aiokafka-async-for",
    "aiokafka-getmany",
    "confluent-consume",
    "confluent-aio",
    "kafka-python",
]


# ---------------------------------------------------------------------------- broker + data
def start_broker(*topics: str) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0"]
    for t in topics:
        args += ["--topic", t]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


async def produce(
    bootstrap: str, topic: str, partitions: int, records: int, value_size: int, per_batch: int
) -> None:
    """Fill ``topic`` with raw ProduceRequests (fast and independent of any producer)."""
    from aiokafka_lite.net import Client
    from aiokafka_lite.wire.messages import ProduceRequest
    from aiokafka_lite.wire.primitives import ZERO_UUID
    from aiokafka_lite.wire.records import encode_batch

    value = b"v" * value_size
    async with Client(bootstrap, request_timeout_ms=120000) as client:
        await client.wait_for_topic(topic, 30000)
        topic_id = client.cluster.topic_id(topic) or ZERO_UUID
        now = int(time.time() * 1000)
        sem = asyncio.Semaphore(8)

        async def send(partition: int, n: int) -> None:
            batch = encode_batch([(now, None, value, ()) for _ in range(n)])
            req = ProduceRequest(
                acks=1,
                timeout_ms=60000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=topic,
                        topic_id=topic_id,
                        partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)],
                    )
                ],
            )
            async with sem:
                resp: Any = await client.send(req, node_id=1)
            assert resp.responses[0].partition_responses[0].error_code == 0

        jobs = []
        remaining = records
        i = 0
        while remaining > 0:
            n = min(per_batch, remaining)
            jobs.append(send(i % partitions, n))
            remaining -= n
            i += 1
        await asyncio.gather(*jobs)


# ---------------------------------------------------------------------------- clients
async def run_ours(bootstrap: str, records: int, mode: str, topic: str = TOPIC) -> float:
    from aiokafka_lite import Consumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        # Every client's clock starts before assignment: position lookup and the first
        # fetches count, whatever each client does eagerly.
        start = clock()
        consumer.assign(tps)
        n = 0
        size = 0
        if mode == "async-for":
            async for rec in consumer:
                n += 1
                size += len(rec.value)
                if n == records:
                    break
        else:
            while n < records:
                batch = await consumer.getmany(timeout_ms=1000, max_records=500)
                for recs in batch.values():
                    for rec in recs:
                        n += 1
                        size += len(rec.value)
        elapsed = clock() - start
    assert size == records * VALUE_SIZE
    return elapsed


async def run_aiokafka(bootstrap: str, records: int, mode: str, topic: str = TOPIC) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        start = clock()
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        n = 0
        size = 0
        if mode == "async-for":
            async for rec in consumer:
                n += 1
                size += len(rec.value)
                if n == records:
                    break
        else:
            while n < records:
                batch = await consumer.getmany(timeout_ms=1000, max_records=500)
                for recs in batch.values():
                    for rec in recs:
                        n += 1
                        size += len(rec.value)
        elapsed = clock() - start
    finally:
        await consumer.stop()
    assert size == records * VALUE_SIZE
    return elapsed


def run_confluent(bootstrap: str, records: int, topic: str = TOPIC) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    try:
        start = clock()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        n = 0
        size = 0
        while n < records:
            for msg in consumer.consume(num_messages=500, timeout=1.0):
                if msg.error():
                    continue
                n += 1
                size += len(msg.value())
        elapsed = clock() - start
    finally:
        consumer.close()
    assert size == records * VALUE_SIZE
    return elapsed


async def run_confluent_aio(bootstrap: str, records: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    from confluent_kafka.aio import AIOConsumer

    consumer = AIOConsumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    try:
        start = clock()
        await consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        n = 0
        size = 0
        while n < records:
            for msg in await consumer.consume(num_messages=500, timeout=1.0):
                if msg.error():
                    continue
                n += 1
                size += len(msg.value())
        elapsed = clock() - start
    finally:
        await consumer.close()
    assert size == records * VALUE_SIZE
    return elapsed


def run_kafka_python(bootstrap: str, records: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        start = clock()
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        n = 0
        size = 0
        for msg in consumer:
            n += 1
            size += len(msg.value)
            if n == records:
                break
        elapsed = clock() - start
    finally:
        consumer.close()
    assert size == records * VALUE_SIZE
    return elapsed


def client_main(name: str, bootstrap: str, records: int) -> None:
    if name == "confluent-aio":
        try:
            import confluent_kafka.aio  # noqa: F401
        except ImportError:
            print(json.dumps({"skip": "confluent_kafka.aio not installed"}))
            return
    runners: dict[str, Any] = {
        "ours-async-for": lambda: asyncio.run(run_ours(bootstrap, records, "async-for")),
        "ours-getmany": lambda: asyncio.run(run_ours(bootstrap, records, "getmany")),
        "aiokafka-async-for": lambda: asyncio.run(run_aiokafka(bootstrap, records, "async-for")),
        "aiokafka-getmany": lambda: asyncio.run(run_aiokafka(bootstrap, records, "getmany")),
        "confluent-consume": lambda: run_confluent(bootstrap, records),
        "confluent-aio": lambda: asyncio.run(run_confluent_aio(bootstrap, records)),
        "kafka-python": lambda: run_kafka_python(bootstrap, records),
    }
    elapsed = runners[name]()
    print(json.dumps({"elapsed": elapsed}))


def run_client(name: str, bootstrap: str, records: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--client", name, "--bootstrap", bootstrap, "--records", str(records)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        return {
            "error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
        }
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------- RSS
def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def slow_consumer(bootstrap: str, topic: str, cap: int, seconds: float) -> dict[str, Any]:
    from aiokafka_lite import Consumer, TopicPartition

    async with Consumer(bootstrap, auto_offset_reset="earliest", max_buffered_bytes=cap) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        baseline = rss_bytes()
        peak = baseline
        peak_buffered = 0
        n = 0
        assert consumer.fetcher is not None
        buf = consumer.fetcher.buffer
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                async for _rec in consumer:
                    n += 1
                    await asyncio.sleep(0.001)  # the slow part: at most ~1000 records/s
                    if n % 20 == 0:
                        peak = max(peak, rss_bytes())
                        peak_buffered = max(peak_buffered, buf.buffered_bytes + buf.reserved_bytes)
    return {"baseline": baseline, "peak": peak, "records": n, "peak_buffered": peak_buffered}


def rss_main(bootstrap: str, topic: str, cap: int, seconds: float) -> None:
    print(json.dumps(asyncio.run(slow_consumer(bootstrap, topic, cap, seconds))))


# ---------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--rss", action="store_true", help="also run the 2 GiB slow-consumer memory test")
    ap.add_argument("--rss-only", action="store_true")
    ap.add_argument("--rss-gib", type=float, default=2.0)
    ap.add_argument("--rss-seconds", type=float, default=20.0)
    # internal: run one client in this process
    ap.add_argument("--client")
    ap.add_argument("--rss-client", action="store_true")
    ap.add_argument("--bootstrap")
    ap.add_argument("--cap", type=int, default=0)
    ap.add_argument("--topic", default="big")
    args = ap.parse_args()

    if args.client:
        client_main(args.client, args.bootstrap, args.records)
        return
    if args.rss_client:
        rss_main(args.bootstrap, args.topic, args.cap, args.rss_seconds)
        return

    if not args.rss_only:
        throughput(args)
    if args.rss or args.rss_only:
        memory(args)


def throughput(args: argparse.Namespace) -> None:
    broker, bootstrap = start_broker(f"{TOPIC}:{PARTITIONS}")
    try:
        t = time.perf_counter()
        asyncio.run(produce(bootstrap, TOPIC, PARTITIONS, args.records, VALUE_SIZE, 2000))
        print(
            f"produced {args.records:,} records of {VALUE_SIZE} B to {PARTITIONS} partitions in {time.perf_counter() - t:.1f}s"
        )
        # Runs are interleaved (every client once, then again...) and the best time is
        # kept: on a shared machine, load swings then hit every client alike.
        names = args.clients.split(",")
        best: dict[str, float] = {}
        notes: dict[str, str] = {}
        per_run: list[dict[str, float]] = []
        for run in range(args.runs):
            per_run.append({})
            for name in names:
                if name in notes:
                    continue
                res = run_client(name, bootstrap, args.records)
                if "elapsed" in res:
                    best[name] = min(best.get(name, float("inf")), res["elapsed"])
                    per_run[-1][name] = args.records / res["elapsed"]
                    print(
                        f"  run {run + 1}: {name:20s} {args.records / res['elapsed']:>12,.0f} records/s",
                        flush=True,
                    )
                else:
                    notes[name] = res.get("skip") or res.get("error", "failed")
                    print(f"  run {run + 1}: {name:20s} {notes[name]}", flush=True)
        results: dict[str, float | str] = {n: args.records / best[n] for n in best}
        results.update(notes)
    finally:
        broker.kill()
        broker.wait()
    report(args, results, per_run)


def report(
    args: argparse.Namespace, results: dict[str, float | str], per_run: list[dict[str, float]]
) -> None:
    def rate(name: str) -> float | None:
        v = results.get(name)
        return v if isinstance(v, float) else None

    print()
    print("| client | records/s | vs aiokafka (same mode) |")
    print("|---|---:|---:|")
    for name in args.clients.split(","):
        r = rate(name)
        ref = None
        if name.endswith("async-for"):
            ref = rate("aiokafka-async-for")
        elif name.endswith("getmany"):
            ref = rate("aiokafka-getmany")
        ratio = f"{r / ref:.2f}x" if r and ref else ""
        print(f"| {name} | {r:,.0f} | {ratio} |" if r else f"| {name} | {results.get(name)} | |")
    for ours, theirs, bar in (
        ("ours-async-for", "aiokafka-async-for", 2.0),
        ("ours-getmany", "aiokafka-getmany", 1.5),
    ):
        a, b = rate(ours), rate(theirs)
        if a and b:
            verdict = "OK" if a / b >= bar else "BELOW BAR"
            # Same-run ratios resist load swings between runs better than best-of.
            ratios = sorted(r[ours] / r[theirs] for r in per_run if ours in r and theirs in r)
            median = ratios[len(ratios) // 2] if ratios else 0.0
            runs = ", ".join(f"{x:.2f}" for x in ratios)
            print(
                f"{ours} / {theirs}: best-of {a / b:.2f}x, per run {runs} (median {median:.2f}x); bar {bar}x: {verdict}"
            )


def memory(args: argparse.Namespace) -> None:
    topic = "big"
    value_size = 10_000
    records = int(args.rss_gib * (1 << 30) / value_size)
    broker, bootstrap = start_broker(f"{topic}:2")
    try:
        t = time.perf_counter()
        asyncio.run(produce(bootstrap, topic, 2, records, value_size, 100))
        print(
            f"\nproduced {records:,} records of {value_size} B ({args.rss_gib:g} GiB) in {time.perf_counter() - t:.1f}s"
        )
        print(
            "| max_buffered_bytes | RSS before consuming | peak RSS | peak - before | peak buffered+reserved | records read |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        mib = 1 << 20
        for cap in (16 * mib, 64 * mib):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--rss-client",
                    "--bootstrap",
                    bootstrap,
                    "--topic",
                    topic,
                    "--cap",
                    str(cap),
                    "--rss-seconds",
                    str(args.rss_seconds),
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if out.returncode != 0:
                print(f"| {cap // mib} MiB | failed: {out.stderr.strip().splitlines()[-1:]} |")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"| {cap // mib} MiB | {r['baseline'] / mib:.0f} MiB | {r['peak'] / mib:.0f} MiB | "
                f"{(r['peak'] - r['baseline']) / mib:.0f} MiB | {r['peak_buffered'] / mib:.1f} MiB | {r['records']:,} |",
                flush=True,
            )
    finally:
        broker.kill()
        broker.wait()


if __name__ == "__main__":
    main()
