"""aiokafka's five usage patterns through the real aiokafka, our compat layer and our native API.

Issue #28's measure: code written for aiokafka, run unchanged on
``aiokafka_lite.compat`` (``compat.install()`` then ``import aiokafka``), against the
real aiokafka and against the same work written for the native API. Patterns:

  send+gather     ``fut = await producer.send(...)`` per record, then ``gather(*futs)``
                  (native: ``enqueue`` and its ``RecordFuture``)
  send_and_wait   1,000 tasks, each ``await producer.send_and_wait(...)`` 5 times
                  (native: ``await producer.send(...)``)
  send_batch      ``create_batch()``/``append`` until full, ``send_batch(batch, topic,
                  partition=0)``, as aiokafka's batch example; the futures are awaited at the
                  end (native: ``enqueue_batch`` of the same number of records per batch)
  async for       ``async for record in consumer`` over everything produced above
  getmany         ``getmany(timeout_ms=1000)`` until everything is read

Records are 100-byte values without keys (default partitioning: the topic has one
partition; only ``send_batch`` names it), producer settings aiokafka's defaults
(acks=1, linger 0, no idempotence, 16 KiB batches); consumers are assigned the topic's
one partition from the earliest offset, without a group. Every client runs in a fresh
process of its own (the compat layer and the real aiokafka cannot share one), on a
fresh topic; rounds alternate the clients' order. Each pattern reports records/s and
CPU seconds per million records (``getrusage`` of that process around the pattern, so
the client's background tasks count). The table shows the median of the rounds, with
the ratios compat/aiokafka and native/aiokafka. Brokers: the embedded broker
(``python -m aiokafka_lite.broker``, its own process) and Apache Kafka 4.4
(``aiokafka_lite.testing.apache.ApacheCluster``, one node).

Run:  .venv/bin/python bench/compat_patterns.py [--brokers embedded,apache] [--rounds 3]
      [--records 50000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

CLIENTS = ["aiokafka", "compat", "native"]
PATTERNS = ["send+gather", "send_and_wait", "send_batch", "async for", "getmany"]
VALUE = b"x" * 100
TASKS = 1000
PER_TASK = 5
NATIVE_BATCH = 140  # records aiokafka's 16 KiB create_batch() holds at this value size


# ---------------------------------------------------------------------------- measuring
def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def measure(
    out: dict[str, dict[str, float]], name: str, records: int, fn: Callable[[], Awaitable[Any]]
) -> None:
    cpu, wall = _cpu(), time.perf_counter()
    await fn()
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    out[name] = {"rate": records / wall, "cpu_per_m": cpu / records * 1e6}


# ---------------------------------------------------------------------------- aiokafka API
async def run_aiokafka_api(bootstrap: str, topic: str, n: int) -> dict[str, dict[str, float]]:
    """The same code for the real aiokafka and for the compat layer (``import aiokafka``
    resolves to whichever the process installed)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    out: dict[str, dict[str, float]] = {}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up")

        async def send_gather() -> None:
            futs = [await producer.send(topic, VALUE) for _ in range(n)]
            await asyncio.gather(*futs)

        async def send_and_wait() -> None:
            async def task() -> None:
                for _ in range(PER_TASK):
                    await producer.send_and_wait(topic, VALUE)

            await asyncio.gather(*(task() for _ in range(TASKS)))

        async def send_batch() -> None:
            futs = []
            sent = 0
            while sent < n:
                batch = producer.create_batch()
                while sent < n and batch.append(key=None, value=VALUE, timestamp=None) is not None:
                    sent += 1
                futs.append(await producer.send_batch(batch, topic, partition=0))
            await asyncio.gather(*futs)

        await measure(out, "send+gather", n, send_gather)
        await measure(out, "send_and_wait", TASKS * PER_TASK, send_and_wait)
        await measure(out, "send_batch", n, send_batch)
    finally:
        await producer.stop()
    total = 1 + n + TASKS * PER_TASK + n
    tp = TopicPartition(topic, 0)

    for pattern in ("async for", "getmany"):
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([tp])

            async def async_for(c: Any = consumer) -> None:
                seen = 0
                async for _record in c:
                    seen += 1
                    if seen == total:
                        break

            async def getmany(c: Any = consumer) -> None:
                seen = 0
                while seen < total:
                    for records in (await c.getmany(timeout_ms=1000)).values():
                        seen += len(records)

            await measure(out, pattern, total, async_for if pattern == "async for" else getmany)
        finally:
            await consumer.stop()
    return out


# ---------------------------------------------------------------------------- native API
async def run_native(bootstrap: str, topic: str, n: int) -> dict[str, dict[str, float]]:
    from aiokafka_lite import Consumer, Producer, TopicPartition

    out: dict[str, dict[str, float]] = {}
    async with Producer(bootstrap, acks=1, enable_idempotence=False, linger_ms=0) as producer:
        await producer.send(topic, b"warm-up")

        async def send_gather() -> None:
            futs = [await producer.enqueue(topic, VALUE) for _ in range(n)]
            await asyncio.gather(*futs)

        async def send_and_wait() -> None:
            async def task() -> None:
                for _ in range(PER_TASK):
                    await producer.send(topic, VALUE)

            await asyncio.gather(*(task() for _ in range(TASKS)))

        async def send_batch() -> None:
            results = []
            for start in range(0, n, NATIVE_BATCH):
                count = min(NATIVE_BATCH, n - start)
                results.append(await producer.enqueue_batch(topic, [VALUE] * count, partition=0))
            for result in results:
                await result

        await measure(out, "send+gather", n, send_gather)
        await measure(out, "send_and_wait", TASKS * PER_TASK, send_and_wait)
        await measure(out, "send_batch", n, send_batch)
    total = 1 + n + TASKS * PER_TASK + n
    tp = TopicPartition(topic, 0)

    for pattern in ("async for", "getmany"):
        async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])

            async def async_for(c: Any = consumer) -> None:
                seen = 0
                async for _record in c:
                    seen += 1
                    if seen == total:
                        break

            async def getmany(c: Any = consumer) -> None:
                seen = 0
                while seen < total:
                    for records in (await c.getmany(timeout_ms=1000)).values():
                        seen += len(records)

            await measure(out, pattern, total, async_for if pattern == "async for" else getmany)
    return out


def client_main(client: str, bootstrap: str, topic: str, n: int) -> None:
    if client == "compat":
        import aiokafka_lite.compat

        aiokafka_lite.compat.install()
    run = run_native if client == "native" else run_aiokafka_api
    print(json.dumps(asyncio.run(run(bootstrap, topic, n))))


# ---------------------------------------------------------------------------- brokers
def start_embedded() -> tuple[Callable[[], None], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"embedded broker did not start: {line!r}")

    def stop() -> None:
        proc.kill()
        proc.wait()

    return stop, line.removeprefix("listening on ")


def start_apache(version: str) -> tuple[Callable[[], None], str]:
    from aiokafka_lite.testing.apache import ApacheCluster

    cluster = ApacheCluster(1, version=version)
    cluster.start()
    return cluster.close, cluster.bootstrap


async def create_topic(bootstrap: str, topic: str) -> None:
    from aiokafka_lite import Admin, NewTopic

    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, partitions=1, replication_factor=1)])).raise_errors()


def run_client(client: str, bootstrap: str, n: int) -> dict[str, Any]:
    topic = f"compat-bench-{client}-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(bootstrap, topic))
    args = [sys.executable, __file__, "--client", client, "--bootstrap", bootstrap, "--topic", topic]
    proc = subprocess.run([*args, "--records", str(n)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return {"error": tail[0]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------- report
def report(broker: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    def med(client: str, pattern: str, key: str) -> float | None:
        values = [r[pattern][key] for r in runs.get(client, []) if pattern in r]
        return statistics.median(values) if values else None

    print(f"\n### {broker}: median of {max(len(v) for v in runs.values())} rounds\n")
    print(
        "| pattern | aiokafka rec/s | compat rec/s | native rec/s | compat/aiokafka | native/aiokafka "
        "| CPU s/M aiokafka | compat | native |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pattern in PATTERNS:
        rate = {c: med(c, pattern, "rate") for c in CLIENTS}
        cpu = {c: med(c, pattern, "cpu_per_m") for c in CLIENTS}
        ref = rate["aiokafka"]

        def ratio(client: str, rate: dict[str, float | None] = rate, ref: float | None = ref) -> str:
            r = rate[client]
            return f"{r / ref:.2f}x" if r and ref else "-"

        cells = [f"{rate[c]:,.0f}" if rate[c] else "-" for c in CLIENTS]
        cpus = [f"{cpu[c]:.1f}" if cpu[c] is not None else "-" for c in CLIENTS]
        print(
            f"| {pattern} | {' | '.join(cells)} | {ratio('compat')} | {ratio('native')} | {' | '.join(cpus)} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="embedded,apache")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=50_000, help="records of send+gather and of send_batch")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        client_main(args.client, args.bootstrap, args.topic, args.records)
        return
    clients = args.clients.split(",")
    for broker in args.brokers.split(","):
        stop, bootstrap = start_embedded() if broker == "embedded" else start_apache(args.kafka_version)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        try:
            for rnd in range(args.rounds):
                # Alternate who goes first: load swings on a shared machine hit all alike.
                order = clients[rnd % len(clients) :] + clients[: rnd % len(clients)]
                for client in order:
                    res = run_client(client, bootstrap, args.records)
                    if "error" in res:
                        print(f"{broker} round {rnd + 1} {client}: {res['error']}", flush=True)
                        continue
                    runs[client].append(res)
                    cells = ", ".join(
                        f"{p} {res[p]['rate']:,.0f}/s {res[p]['cpu_per_m']:.1f} s/M" for p in PATTERNS
                    )
                    print(f"{broker} round {rnd + 1} {client:8s} {cells}", flush=True)
        finally:
            stop()
        report(broker if broker == "embedded" else f"Apache Kafka {args.kafka_version}", runs)
    print(f"\nload average: {os.getloadavg()[0]:.1f} (2 shared cores)")


if __name__ == "__main__":
    main()
