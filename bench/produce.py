"""Producer benchmark: aiokafka_lite vs aiokafka, confluent-kafka and kafka-python.

Throughput: N records (default 200,000) of 100-byte values, no key, acks=all,
linger 5 ms, idempotence on, 6 partitions, no compression and then lz4; time from the
first send to the last acknowledgement. Each client pattern runs in a fresh worker
process, against a fresh embedded broker (``python -m aiokafka_lite.broker``, another
process) or, with ``--bootstrap HOST:PORT``, against an external cluster (each worker
creates its own 6-partition topic there and deletes it afterwards).

Patterns (what users write, each client's fastest documented way, and concurrency):
  lite enqueue+gather     futs = [await p.enqueue()...]; await p.flush(); await asyncio.gather(*futs)
  lite enqueue+wait_all   futs = [await p.enqueue()...]; await p.wait_all(futs)
  lite enqueue (discard)  await p.enqueue() per record, futures dropped; await p.flush()
  lite send x1000 tasks   1,000 tasks, each awaiting p.send() for its share of the records
  lite send_batch         await p.send_batch(topic, values) (one call, one await)
  aiokafka send+gather    futs = [await p.send()...]; await p.flush(); await asyncio.gather(*futs)
  aiokafka send x1000     1,000 tasks, each awaiting p.send_and_wait() for its share
  aiokafka batch          create_batch()/append()/send_batch() per partition (the documented batch API)
  confluent classic       Producer.produce() + poll(0) per record, flush()
  confluent aio           confluent_kafka.aio.AIOProducer: await produce() per record, flush(), gather
  kafka-python            KafkaProducer.send() per record, flush()

For "lite enqueue+gather" and "aiokafka send+gather" the split of the best round
(enqueue loop / flush / gather) is shown too.

Latency: a steady R records/s (default 5,000) for S seconds (default 20), linger 0,
each record an ``await send()`` (aiokafka: send_and_wait; confluent aio: await the
delivery future) started on schedule in its own task; p50/p99/p99.9 of those awaits.

Machine load matters a lot (2 shared cores here): throughput shows the best of
``--throughput-rounds`` interleaved rounds, latency the median of ``--rounds`` rounds;
the 1-minute load average is printed around every round.

Run:  .venv/bin/python bench/produce.py [--records N] [--bootstrap HOST:PORT] [--only lite,aiokafka]
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
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")
sys.path.insert(0, SRC)

TOPIC = "bench"
PARTITIONS = 6
#: Concurrent senders in the "x1000 tasks" patterns.
TASKS = 1000

#: The process's CPU seconds (user + system) at every ``clock()`` call: the first and
#: last marks of a worker bracket its measured part (bench/issue31.py reports the CPU
#: time between them).
CPU_MARKS: list[float] = []


def clock() -> float:
    """``time.perf_counter()``, noting the process's CPU time in ``CPU_MARKS`` too."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    CPU_MARKS.append(ru.ru_utime + ru.ru_stime)
    return time.perf_counter()


# ----------------------------------------------------------------------------- broker


class Broker:
    """The embedded broker in its own process."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=SRC)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0", "--topic", f"{TOPIC}:{PARTITIONS}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on"):
            self.close()
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = line.split()[-1].split(",")[0]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ExternalTopic:
    """A fresh 6-partition topic on an external cluster (``--bootstrap``), deleted on close."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.topic = f"bench-{uuid.uuid4().hex[:12]}"
        asyncio.run(self._create())

    async def _create(self) -> None:
        from aiokafka_lite.admin import Admin, NewTopic

        async with Admin(self.bootstrap) as admin:
            (result,) = (await admin.create_topics([NewTopic(self.topic, PARTITIONS, 1)])).values()
            if getattr(result, "error", None) is not None:
                raise RuntimeError(f"cannot create {self.topic}: {result.error}")
        # (each worker's untimed warm-up send waits for the partition leaders)

    def close(self) -> None:
        from aiokafka_lite.admin import Admin

        async def delete() -> None:
            async with Admin(self.bootstrap) as admin:
                await admin.delete_topics([self.topic])

        asyncio.run(delete())


# ----------------------------------------------------------------------------- throughput workers


def _codec(name: str, client: str) -> Any:
    if name == "none":
        return None if client in ("aiokafka", "kafka-python") else "none"
    return name


Phases = dict[str, float]
_LITE = {"acks": "all", "linger_ms": 5, "enable_idempotence": True}


def _aiokafka_producer(bootstrap: str, codec: str, compat: bool = False) -> Any:
    """aiokafka's producer, or (``compat``) ours behind the aiokafka-compatible API, with
    the same arguments."""
    if compat:
        from aiokafka_lite.compat.aiokafka import AIOKafkaProducer
    else:
        from aiokafka import AIOKafkaProducer

    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        enable_idempotence=True,
        compression_type=_codec(codec, "aiokafka"),
    )


async def lite_enqueue_gather(
    bootstrap: str, topic: str, n: int, value: bytes, codec: str
) -> tuple[float, Phases]:
    from aiokafka_lite.produce import Producer

    async with Producer(bootstrap, compression=codec, **_LITE) as p:
        await p.send(topic, b"warm-up")
        t0 = clock()
        enqueue = p.enqueue
        futs = [await enqueue(topic, value) for _ in range(n)]
        t1 = clock()
        await p.flush()
        t2 = clock()
        results = await asyncio.gather(*futs)
        t3 = clock()
        assert len(results) == n
        return t3 - t0, {"enqueue": t1 - t0, "flush": t2 - t1, "gather": t3 - t2}


async def lite_enqueue_wait_all(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    from aiokafka_lite.produce import Producer

    async with Producer(bootstrap, compression=codec, **_LITE) as p:
        await p.send(topic, b"warm-up")
        t0 = clock()
        enqueue = p.enqueue
        futs = [await enqueue(topic, value) for _ in range(n)]
        await p.wait_all(futs)
        return clock() - t0


async def lite_enqueue_discard(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    from aiokafka_lite.produce import Producer

    async with Producer(bootstrap, compression=codec, **_LITE) as p:
        await p.send(topic, b"warm-up")
        t0 = clock()
        enqueue = p.enqueue
        for _ in range(n):
            await enqueue(topic, value)
        await p.flush()
        return clock() - t0


async def _concurrent(send_one: Callable[[], Any], n: int) -> None:
    """``TASKS`` tasks, each awaiting ``send_one()`` for its share of ``n`` records."""

    async def worker(count: int) -> None:
        for _ in range(count):
            await send_one()

    share, extra = divmod(n, TASKS)
    async with asyncio.TaskGroup() as tg:
        for i in range(TASKS):
            tg.create_task(worker(share + (1 if i < extra else 0)))


async def lite_send_tasks(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    from aiokafka_lite.produce import Producer

    async with Producer(bootstrap, compression=codec, **_LITE) as p:
        await p.send(topic, b"warm-up")
        t0 = clock()
        await _concurrent(lambda: p.send(topic, value), n)
        return clock() - t0


async def lite_send_batch(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    from aiokafka_lite.produce import Producer

    values = [value] * n
    async with Producer(bootstrap, compression=codec, **_LITE) as p:
        await p.send(topic, b"warm-up")
        t0 = clock()
        await p.send_batch(topic, values)
        return clock() - t0


async def compat_send_gather(
    bootstrap: str, topic: str, n: int, value: bytes, codec: str
) -> tuple[float, Phases]:
    """``aiokafka_send_gather``'s code on our aiokafka-compatible producer."""
    return await aiokafka_send_gather(bootstrap, topic, n, value, codec, compat=True)


async def aiokafka_send_gather(
    bootstrap: str, topic: str, n: int, value: bytes, codec: str, compat: bool = False
) -> tuple[float, Phases]:
    p = _aiokafka_producer(bootstrap, codec, compat)
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm-up")
        t0 = clock()
        send = p.send
        futs = [await send(topic, value) for _ in range(n)]
        t1 = clock()
        await p.flush()
        t2 = clock()
        results = await asyncio.gather(*futs)
        t3 = clock()
        assert len(results) == n
        return t3 - t0, {"enqueue": t1 - t0, "flush": t2 - t1, "gather": t3 - t2}
    finally:
        await p.stop()


async def aiokafka_send_tasks(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    p = _aiokafka_producer(bootstrap, codec)
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm-up")
        t0 = clock()
        await _concurrent(lambda: p.send_and_wait(topic, value), n)
        return clock() - t0
    finally:
        await p.stop()


async def aiokafka_batch(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    p = _aiokafka_producer(bootstrap, codec)
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm-up")
        partitions = sorted(await p.partitions_for(topic))
        t0 = clock()
        pending = []
        i = 0
        while i < n:
            for part in partitions:
                batch = p.create_batch()
                while i < n and batch.append(key=None, value=value, timestamp=None) is not None:
                    i += 1
                batch.close()
                pending.append(await p.send_batch(batch, topic, partition=part))
                if i >= n:
                    break
        await asyncio.gather(*pending)
        return clock() - t0
    finally:
        await p.stop()


def _confluent_conf(bootstrap: str, codec: str, linger: float = 5) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": linger,
        "enable.idempotence": True,
        "compression.type": _codec(codec, "confluent"),
    }


async def confluent_aio(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    from confluent_kafka.aio import AIOProducer

    p = AIOProducer(_confluent_conf(bootstrap, codec))
    try:
        await (await p.produce(topic, b"warm-up"))
        t0 = clock()
        futures = []
        produce = p.produce
        for _ in range(n):
            futures.append(await produce(topic, value))
        await p.flush()
        await asyncio.gather(*futures)
        return clock() - t0
    finally:
        await p.close()


def confluent_classic(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    from confluent_kafka import Producer

    conf = _confluent_conf(bootstrap, codec)
    conf["queue.buffering.max.messages"] = 1_000_000
    p = Producer(conf)
    p.produce(topic, b"warm-up")
    p.flush(30)
    t0 = clock()
    produce = p.produce
    poll = p.poll
    for _ in range(n):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.05)
        poll(0)
    remaining = p.flush(300)
    assert remaining == 0
    return clock() - t0


def kafka_python(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, compression_type=_codec(codec, "kafka-python")
    )
    p.send(topic, b"warm-up").get(30)
    t0 = clock()
    send = p.send
    for _ in range(n):
        send(topic, value)
    p.flush(600)
    elapsed = clock() - t0
    p.close()
    return elapsed


THROUGHPUT: dict[str, Callable[..., Any]] = {
    "lite enqueue+gather": lite_enqueue_gather,
    "lite enqueue+wait_all": lite_enqueue_wait_all,
    "lite enqueue (discard)": lite_enqueue_discard,
    "lite send x1000 tasks": lite_send_tasks,
    "lite send_batch": lite_send_batch,
    "aiokafka send+gather": aiokafka_send_gather,
    "aiokafka send x1000": aiokafka_send_tasks,
    "aiokafka batch": aiokafka_batch,
    "confluent classic": confluent_classic,
    "confluent aio": confluent_aio,
    "kafka-python": kafka_python,
}
#: (pattern, reference, target ratio) checked after each throughput table (issue #16).
TARGETS = [
    ("lite enqueue+gather", "aiokafka send+gather", 1.5),
    ("lite enqueue+gather", "confluent classic", 1.0),
    ("lite send x1000 tasks", "aiokafka send x1000", 2.5),
]


# ----------------------------------------------------------------------------- latency workers


async def _paced(send_one: Callable[[], Any], rate: int, seconds: float) -> list[float]:
    """Start ``send_one()`` on a fixed schedule (open loop); latencies of each await, s."""
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    tasks: set[asyncio.Task[None]] = set()

    async def one() -> None:
        t0 = time.perf_counter()
        await send_one()
        latencies.append(time.perf_counter() - t0)

    total = int(rate * seconds)
    start = loop.time() + 0.05
    for i in range(total):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(one())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)
    return latencies


async def lite_latency(bootstrap: str, topic: str, rate: int, seconds: float, value: bytes) -> list[float]:
    from aiokafka_lite.produce import Producer

    async with Producer(bootstrap, acks="all", linger_ms=0) as p:
        await p.send(topic, b"warm-up")
        return await _paced(lambda: p.send(topic, value), rate, seconds)


async def aiokafka_latency(
    bootstrap: str, topic: str, rate: int, seconds: float, value: bytes
) -> list[float]:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm-up")
        return await _paced(lambda: p.send_and_wait(topic, value), rate, seconds)
    finally:
        await p.stop()


async def confluent_aio_latency(
    bootstrap: str, topic: str, rate: int, seconds: float, value: bytes
) -> list[float]:
    from confluent_kafka.aio import AIOProducer

    # batch_size=1: hand each record to librdkafka at once (the default buffers 1000).
    p = AIOProducer(_confluent_conf(bootstrap, "none", linger=0), batch_size=1)
    try:
        await (await p.produce(topic, b"warm-up"))

        async def one() -> None:
            await (await p.produce(topic, value))

        return await _paced(one, rate, seconds)
    finally:
        await p.close()


LATENCY: dict[str, Callable[..., Any]] = {
    "lite": lite_latency,
    "aiokafka": aiokafka_latency,
    "confluent aio": confluent_aio_latency,
}


# ----------------------------------------------------------------------------- driver


def _worker(args: argparse.Namespace) -> None:
    """Runs one measurement in this (fresh) process; prints a JSON result line."""
    target: Broker | ExternalTopic = ExternalTopic(args.bootstrap) if args.bootstrap else Broker()
    topic = target.topic if isinstance(target, ExternalTopic) else TOPIC
    try:
        value = b"v" * args.value_size
        if args.kind == "throughput":
            fn = THROUGHPUT[args.name]
            if asyncio.iscoroutinefunction(fn):
                res = asyncio.run(fn(target.bootstrap, topic, args.records, value, args.codec))
            else:
                res = fn(target.bootstrap, topic, args.records, value, args.codec)
            elapsed, phases = res if isinstance(res, tuple) else (res, None)
            print(json.dumps({"elapsed": elapsed, "phases": phases}))
        else:
            lat = asyncio.run(
                LATENCY[args.name](target.bootstrap, topic, args.rate, args.latency_seconds, value)
            )
            print(json.dumps({"latencies": lat}))
    finally:
        target.close()


def _run_worker(kind: str, name: str, args: argparse.Namespace, codec: str = "none") -> dict[str, Any] | None:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        kind,
        "--name",
        name,
        "--codec",
        codec,
        "--records",
        str(args.records),
        "--value-size",
        str(args.value_size),
        "--rate",
        str(args.rate),
        "--latency-seconds",
        str(args.latency_seconds),
    ]
    if args.bootstrap:
        cmd += ["--bootstrap", args.bootstrap]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    sys.stderr.write(f"{kind} {name} {codec} failed:\n{proc.stderr[-2000:]}\n")
    return None


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _gather_floor(n: int) -> float:
    """Seconds ``asyncio.gather`` alone takes over ``n`` asyncio futures that are already
    done: the least any "keep the futures, gather them" pattern can cost on top of
    producing (asyncio.gather is Python code with a few calls per future)."""

    async def run() -> float:
        loop = asyncio.get_running_loop()
        futs = [loop.create_future() for _ in range(n)]
        for f in futs:
            f.set_result(None)
        t0 = time.perf_counter()
        await asyncio.gather(*futs)
        return time.perf_counter() - t0

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument(
        "--bootstrap",
        default="",
        metavar="HOST:PORT",
        help="an external cluster (e.g. Apache Kafka) instead of a fresh embedded broker per run",
    )
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--latency-seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3, help="latency rounds per client (interleaved)")
    ap.add_argument(
        "--throughput-rounds",
        type=int,
        default=3,
        help="throughput rounds per client (interleaved; best is shown)",
    )
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--only", default="", help="comma-separated name prefixes (e.g. 'lite,aiokafka')")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--worker", choices=("throughput", "latency"), help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    ap.add_argument("--codec", default="none", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.kind = args.worker
        _worker(args)
        return
    only = [o.strip() for o in args.only.split(",") if o.strip()]

    def wanted(name: str) -> bool:
        return not only or any(name.startswith(o) for o in only)

    mb = args.records * args.value_size / 1e6
    where = args.bootstrap or "embedded broker (a fresh process per run)"
    print(
        f"# {args.records:,} records x {args.value_size} B, {PARTITIONS} partitions, acks=all, linger 5 ms, "
        f"idempotence on; {where}; {os.cpu_count()} CPUs, load {_load()}"
    )
    if not args.skip_throughput:
        for codec in args.codecs.split(","):
            print(
                f"\n## throughput, compression={codec}; best of {args.throughput_rounds} interleaved round(s)"
            )
            names = [n for n in THROUGHPUT if wanted(n)]
            times: dict[str, list[float]] = {n: [] for n in names}
            phases: dict[str, dict[float, dict[str, float]]] = {n: {} for n in names}
            loads: list[str] = []
            floors: list[float] = []
            for _ in range(args.throughput_rounds):
                round_loads = [_load()]
                floors.append(_gather_floor(args.records))
                for name in names:  # interleaved, so background load hits every client alike
                    res = _run_worker("throughput", name, args, codec)
                    if res is not None:
                        times[name].append(res["elapsed"])
                        if res.get("phases"):
                            phases[name][res["elapsed"]] = res["phases"]
                round_loads.append(_load())
                loads.append("->".join(round_loads))
            print(f"load (1-min average) at the start->end of each round: {', '.join(loads)}")
            print(f"{'client':<24}{'records/s':>12}{'MB/s':>9}{'seconds':>9}   seconds per round")
            rates: dict[str, float] = {}
            for name in names:
                if not times[name]:
                    print(f"{name:<24}{'failed':>12}")
                    continue
                el = min(times[name])
                rates[name] = args.records / el
                rounds_s = " ".join(f"{t:.2f}" for t in times[name])
                split = phases[name].get(el)
                split_s = "   (" + ", ".join(f"{k} {v:.2f}" for k, v in split.items()) + ")" if split else ""
                print(
                    f"{name:<24}{args.records / el:>12,.0f}{mb / el:>9.1f}{el:>9.2f}   {rounds_s}{split_s}",
                    flush=True,
                )
            print(
                f"  (asyncio.gather alone over {args.records:,} done asyncio futures: {min(floors):.2f} s, "
                f"best of {len(floors)}; no client can gather its futures faster)"
            )
            for pattern, reference, target in TARGETS:
                if pattern in rates and reference in rates:
                    ratio = rates[pattern] / rates[reference]
                    verdict = "ok" if ratio >= target else "BELOW TARGET"
                    print(f"  {pattern} / {reference}: {ratio:.2f}x (target {target:g}x: {verdict})")
            best_lite = max((v for k, v in rates.items() if k.startswith("lite")), default=0.0)
            for other in ("aiokafka batch", "confluent aio", "confluent classic", "kafka-python"):
                if other in rates and best_lite:
                    print(f"  best lite / {other}: {best_lite / rates[other]:.2f}x")
    if not args.skip_latency:
        print(
            f"\n## latency of await send(), {args.rate}/s for {args.latency_seconds:g} s, linger 0 (ms); "
            f"{args.rounds} interleaved round(s), median of the per-round percentiles; load {_load()}"
        )
        print(f"{'client':<20}{'p50':>8}{'p99':>8}{'p99.9':>8}{'max':>8}{'mean':>8}   p99 per round")
        names = [n for n in LATENCY if wanted(n)]
        rounds: dict[str, list[list[float]]] = {n: [] for n in names}
        for _ in range(args.rounds):
            for name in names:  # interleaved, so background load hits every client alike
                res = _run_worker("latency", name, args)
                if res is not None:
                    rounds[name].append([x * 1000 for x in res["latencies"]])
        p99s: dict[str, float] = {}
        for name in names:
            runs = rounds[name]
            if not runs:
                print(f"{name:<20}{'failed':>8}")
                continue

            def med(fn: Callable[[list[float]], float], runs: list[list[float]] = runs) -> float:
                return statistics.median(fn(r) for r in runs)

            p99s[name] = med(lambda r: _pct(r, 0.99))
            per_round = " ".join(f"{_pct(r, 0.99):.2f}" for r in runs)
            print(
                f"{name:<20}{med(lambda r: _pct(r, 0.5)):>8.2f}{p99s[name]:>8.2f}"
                f"{med(lambda r: _pct(r, 0.999)):>8.2f}{med(max):>8.2f}{med(statistics.fmean):>8.2f}   {per_round}",
                flush=True,
            )
        if "lite" in p99s and "aiokafka" in p99s:
            print(f"  p99 lite / aiokafka: {p99s['lite'] / p99s['aiokafka']:.2f}")


if __name__ == "__main__":
    main()
