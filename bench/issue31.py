"""Issue #31's table: every pattern of ours against aiokafka and confluent-kafka, in one run.

Brokers: Apache Kafka 4.4 (``aiokafka_lite.testing.apache.ApacheCluster``, one KRaft
node, as the tests' fixture starts it) and the embedded broker (``python -m
aiokafka_lite.broker``, its own process). One broker of each kind serves the whole run;
every client pattern runs in a fresh process of its own; rounds alternate the clients'
order. Settings: ``--records`` (200,000) records of 100 B, 6 partitions, acks=all,
idempotence on, linger 5 ms, no compression.

Patterns (the worker functions are bench/produce.py's, bench/consume.py's and
bench/backends.py's; only confluent-kafka's delivery-callback producer and latency
are here):

  produce, every delivery confirmed   ours ``enqueue`` + ``wait_all``
                                      vs confluent ``produce(on_delivery=cb)`` + ``flush``
  produce, futures gathered           ours ``enqueue`` + ``asyncio.gather``
                                      vs aiokafka ``send`` + ``gather``
  produce, 1,000 tasks                ours ``await send()`` vs aiokafka ``send_and_wait``
  consume, ``async for``              ours vs aiokafka (confluent ``consume(500)`` as reference)
  consume, ``getmany``                ours vs aiokafka (max_records=500, timeout 1 s)
  latency                             ``--rate`` (2,000) records/s for ``--latency-seconds``,
                                      linger 0: p50/p99 of each ``await send()`` vs the
                                      time from confluent ``produce()`` to its delivery callback
  trio                                ours enqueue+wait_all, send x1000, async for and
                                      getmany on trio (bench/backends.py's workers)

Reported: records/s and CPU seconds per million records (``getrusage(RUSAGE_SELF)`` in the
worker process, around the measured part only, so the client's background tasks and
threads count), medians of ``--rounds``, and the ratios ours/aiokafka and
ours/confluent-kafka from the same run, as a Markdown table (``--json FILE`` too). The
1-minute load average is printed around every round (2 shared cores here).

Profiling one pattern (the worker alone, against a broker you started):
  .venv/bin/python bench/issue31.py --worker "ours wait_all" --bootstrap HOST:PORT \\
      [--gc-stats] [--gc-off] [--cprofile FILE]
``--gc-stats`` counts the collections of each generation and their time
(``gc.callbacks``) from the start of the measured part; ``--gc-off`` runs it with
``gc.disable()``. Wrap the same command in ``py-spy record`` for a sampled profile.

Run:  .venv/bin/python bench/issue31.py [--brokers apache,embedded] [--rounds 3]
      [--records 200000] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
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
sys.path.insert(0, HERE)

import backends  # noqa: E402
import consume  # noqa: E402
import produce  # noqa: E402

PARTITIONS = 6
VALUE_SIZE = 100
CONSUME_TOPIC = "issue31-consume"

PRODUCE_WORKERS: dict[str, Callable[..., Any]] = {
    "ours wait_all": produce.lite_enqueue_wait_all,
    "ours gather": produce.lite_enqueue_gather,
    "ours send x1000": produce.lite_send_tasks,
    "aiokafka gather": produce.aiokafka_send_gather,
    "compat gather": produce.compat_send_gather,
    "aiokafka send x1000": produce.aiokafka_send_tasks,
}
CONSUME_WORKERS: dict[str, Callable[[str, int, str], Any]] = {
    "ours async for": lambda b, n, t: asyncio.run(consume.run_ours(b, n, "async-for", t)),
    "ours getmany": lambda b, n, t: asyncio.run(consume.run_ours(b, n, "getmany", t)),
    "aiokafka async for": lambda b, n, t: asyncio.run(consume.run_aiokafka(b, n, "async-for", t)),
    "aiokafka getmany": lambda b, n, t: asyncio.run(consume.run_aiokafka(b, n, "getmany", t)),
    "confluent consume": consume.run_confluent,
}
TRIO_WORKERS = {
    "trio wait_all": "produce enqueue+wait_all",
    "trio send x1000": "produce send x1000 tasks",
    "trio async for": "consume async for",
    "trio getmany": "consume getmany",
}
THROUGHPUT = [*PRODUCE_WORKERS, "confluent callback", *CONSUME_WORKERS, *TRIO_WORKERS]
LATENCY = ["ours latency", "confluent latency"]

#: (label, ours, trio, aiokafka, confluent) rows of the table.
ROWS = [
    ("produce, every delivery confirmed: enqueue + wait_all", "ours wait_all", "trio wait_all", None),
    ("produce: enqueue + gather (aiokafka send + gather)", "ours gather", None, "aiokafka gather"),
    (
        "produce: our aiokafka-compatible send + gather (aiokafka's same code)",
        "compat gather",
        None,
        "aiokafka gather",
    ),
    (
        "produce: send from 1,000 tasks (aiokafka send_and_wait)",
        "ours send x1000",
        "trio send x1000",
        "aiokafka send x1000",
    ),
    ("consume: async for", "ours async for", "trio async for", "aiokafka async for"),
    ("consume: getmany", "ours getmany", "trio getmany", "aiokafka getmany"),
]
CONFLUENT_FOR = {"produce": "confluent callback", "consume": "confluent consume"}


# ----------------------------------------------------------------------------- confluent workers
def _confluent_conf(bootstrap: str, linger: float) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": linger,
        "enable.idempotence": True,
        "queue.buffering.max.messages": 1_000_000,
    }


def confluent_callback(bootstrap: str, topic: str, n: int, value: bytes, codec: str) -> float:
    """``produce()`` with a delivery callback per record (each checks its error), ``flush()``."""
    from confluent_kafka import Producer

    p = Producer(_confluent_conf(bootstrap, 5))
    p.produce(topic, b"warm-up")
    p.flush(60)
    done = 0
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal done
        if err is not None:
            errors.append(err)
        done += 1

    t0 = produce.clock()
    send = p.produce
    poll = p.poll
    for _ in range(n):
        while True:
            try:
                send(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                poll(0.05)
        poll(0)
    remaining = p.flush(300)
    elapsed = produce.clock() - t0
    assert remaining == 0 and done == n and not errors, (remaining, done, errors[:3])
    return elapsed


def confluent_latency(bootstrap: str, topic: str, rate: int, seconds: float, value: bytes) -> list[float]:
    """``produce()`` on a fixed schedule; latency = delivery callback time - produce time.
    Between sends the thread sits in ``poll()``, so callbacks run as soon as they arrive."""
    from confluent_kafka import Producer

    p = Producer(_confluent_conf(bootstrap, 0))
    p.produce(topic, b"warm-up")
    p.flush(60)
    latencies: list[float] = []

    def sent_at(t0: float) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, _msg: Any) -> None:
            assert err is None, err
            latencies.append(time.perf_counter() - t0)

        return on_delivery

    total = int(rate * seconds)
    start = time.perf_counter() + 0.05
    for i in range(total):
        while (delay := start + i / rate - time.perf_counter()) > 0:
            p.poll(delay)
        p.produce(topic, value, on_delivery=sent_at(time.perf_counter()))
        p.poll(0)
    assert p.flush(60) == 0
    return latencies


# ----------------------------------------------------------------------------- one worker process
class GcStats:
    """Collections per generation and the time spent in them, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if not produce.CPU_MARKS:  # not yet in the measured part
            return
        # thread CPU time, not wall time: a preempted collection is not a slower one
        if phase == "start":
            self._t0 = time.thread_time()
        else:
            gen = info["generation"]
            self.count[gen] += 1
            self.seconds[gen] += time.thread_time() - self._t0


def _new_topic(bootstrap: str) -> str:
    topic = f"issue31-{uuid.uuid4().hex[:10]}"
    asyncio.run(backends._make_topic(bootstrap, topic))
    return topic


def _delete_topic(bootstrap: str, topic: str) -> None:
    from aiokafka_lite import Admin

    async def delete() -> None:
        async with Admin(bootstrap) as admin:
            await admin.delete_topics([topic])

    asyncio.run(delete())


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    name, bootstrap, n = args.worker, args.bootstrap, args.records
    value = b"v" * VALUE_SIZE
    own_topic = name in PRODUCE_WORKERS or name in ("confluent callback", *LATENCY)
    topic = _new_topic(bootstrap) if own_topic else args.topic
    stats = GcStats()
    if args.gc_stats:
        gc.callbacks.append(stats)
    if args.gc_off:
        gc.disable()
    profiler = cProfile.Profile() if args.cprofile else None
    if profiler:
        profiler.enable()
    try:
        out: dict[str, Any] = {}
        if name == "ours latency":
            out["latencies"] = asyncio.run(
                produce.lite_latency(bootstrap, topic, args.rate, args.latency_seconds, value)
            )
        elif name == "confluent latency":
            out["latencies"] = confluent_latency(bootstrap, topic, args.rate, args.latency_seconds, value)
        else:
            if name in PRODUCE_WORKERS:
                res = asyncio.run(PRODUCE_WORKERS[name](bootstrap, topic, n, value, "none"))
            elif name == "confluent callback":
                res = confluent_callback(bootstrap, topic, n, value, "none")
            elif name in CONSUME_WORKERS:
                res = CONSUME_WORKERS[name](bootstrap, n, topic)
            else:
                res = backends.worker("trio", TRIO_WORKERS[name], bootstrap, n, topic)
            elapsed = res[0] if isinstance(res, tuple) else res
            marks = produce.CPU_MARKS
            out.update(elapsed=elapsed, rate=n / elapsed, cpu_per_m=(marks[-1] - marks[0]) / n * 1e6)
    finally:
        if profiler:
            profiler.disable()
            profiler.dump_stats(args.cprofile)
        if own_topic:
            _delete_topic(bootstrap, topic)
    if args.gc_stats:
        per_100k = 100_000 / n
        out["gc"] = {
            "collections_per_100k": [round(c * per_100k, 1) for c in stats.count],
            "gc_seconds_per_100k": [round(s * per_100k, 4) for s in stats.seconds],
        }
    return out


# ----------------------------------------------------------------------------- driver
def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def spawn(name: str, bootstrap: str, args: argparse.Namespace) -> dict[str, Any] | None:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        name,
        "--bootstrap",
        bootstrap,
        "--records",
        str(args.records),
        "--topic",
        CONSUME_TOPIC,
        "--rate",
        str(args.rate),
        "--latency-seconds",
        str(args.latency_seconds),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"  {name}: timed out after {args.timeout:g} s", flush=True)
        return None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    tail = proc.stderr.strip().splitlines()[-3:]
    print(f"  {name}: failed: {' | '.join(tail)}", flush=True)
    return None


class EmbeddedBroker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=SRC),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.close()
            raise SystemExit(f"embedded broker did not start: {line!r}")
        self.bootstrap = line.removeprefix("listening on ").split(",")[0]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_broker(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """All rounds on one broker; the medians and every round's numbers."""
    t = time.perf_counter()
    if kind == "apache":
        from aiokafka_lite.testing.apache import ApacheCluster

        cluster: Any = ApacheCluster(1, version=args.kafka_version)
        cluster.start()
        bootstrap = cluster.bootstrap
    else:
        cluster = EmbeddedBroker()
        bootstrap = cluster.bootstrap
    print(f"\n# {kind}: started in {time.perf_counter() - t:.0f} s, load {_load()}", flush=True)
    names = [n for n in THROUGHPUT if _wanted(n, args)] + [n for n in LATENCY if _wanted(n, args)]
    rounds: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    loads: list[str] = []
    try:
        t = time.perf_counter()
        asyncio.run(backends.fill(bootstrap, CONSUME_TOPIC, args.records))
        print(f"filled {CONSUME_TOPIC} with {args.records:,} records in {time.perf_counter() - t:.1f} s")
        for rnd in range(args.rounds):
            # Alternate the order: load swings on the shared machine then hit all alike.
            order = names[::-1] if rnd % 2 else names
            before = _load()
            for name in order:
                res = spawn(name, bootstrap, args)
                if res is None:
                    continue
                rounds[name].append(res)
                if "latencies" in res:
                    lat = [x * 1000 for x in res["latencies"]]
                    cell = f"p50 {_pct(lat, 0.5):.2f} ms, p99 {_pct(lat, 0.99):.2f} ms"
                else:
                    # CPU s / wall s: far below 1 for a one-thread client = starved by the load
                    share = res["rate"] * res["cpu_per_m"] / 1e6
                    cell = f"{res['rate']:>11,.0f}/s {res['cpu_per_m']:5.2f} CPU s/M (CPU/wall {share:.2f})"
                print(f"  {kind} round {rnd + 1} {name:22s} {cell}", flush=True)
            loads.append(f"{before}->{_load()}")
            print(f"round {rnd + 1}: load (1-min) {loads[-1]}", flush=True)
    finally:
        cluster.close()
    summary: dict[str, Any] = {}
    for name, runs in rounds.items():
        if not runs:
            continue
        if "latencies" in runs[0]:
            ms = [[x * 1000 for x in r["latencies"]] for r in runs]
            summary[name] = {
                "p50_ms": statistics.median(_pct(r, 0.5) for r in ms),
                "p99_ms": statistics.median(_pct(r, 0.99) for r in ms),
                "rounds": len(runs),
            }
        else:
            summary[name] = {
                "rate": statistics.median(r["rate"] for r in runs),
                "cpu_per_m": statistics.median(r["cpu_per_m"] for r in runs),
                "rates": [round(r["rate"]) for r in runs],
                "rounds": len(runs),
            }
    return {"bootstrap": bootstrap, "loads": loads, "results": summary}


def _wanted(name: str, args: argparse.Namespace) -> bool:
    only = [o.strip() for o in args.only.split(",") if o.strip()]
    return not only or any(name.startswith(o) for o in only)


def _cell(r: dict[str, Any] | None) -> str:
    return f"{r['rate']:,.0f}/s, {r['cpu_per_m']:.2f} CPU s/M" if r else "—"


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    if not a or not b:
        return "—"
    return f"{a['rate'] / b['rate']:.2f}x (CPU {a['cpu_per_m'] / b['cpu_per_m']:.2f}x)"


def table(kind: str, res: dict[str, Any], args: argparse.Namespace) -> str:
    r = res["results"]
    title = f"Apache Kafka {args.kafka_version}" if kind == "apache" else "embedded broker"
    lines = [
        f"### {title}: {args.records:,} records x {VALUE_SIZE} B, {PARTITIONS} partitions, acks=all, "
        f"idempotence on, linger 5 ms; median of {args.rounds} round(s); load (1-min) per round "
        f"{', '.join(res['loads'])}",
        "",
        "| pattern | ours (asyncio) | ours (trio) | aiokafka | confluent-kafka | ours / aiokafka | ours / confluent |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, ours, trio, aio in ROWS:
        conf_name = CONFLUENT_FOR[label.split(",")[0].split(":")[0]]
        o, c = r.get(ours), r.get(conf_name)
        a = r.get(aio) if aio else None
        lines.append(
            f"| {label} | {_cell(o)} | {_cell(r.get(trio) if trio else None)} | {_cell(a)} | "
            f"{_cell(c)} ({conf_name}) | {_ratio(o, a)} | {_ratio(o, c)} |"
        )
    ol, cl = r.get("ours latency"), r.get("confluent latency")
    if ol or cl:

        def lat(x: dict[str, Any] | None) -> str:
            return f"{x['p50_ms']:.2f} / {x['p99_ms']:.2f} ms" if x else "—"

        ratio = (
            f"{ol['p50_ms'] / cl['p50_ms']:.2f}x / {ol['p99_ms'] / cl['p99_ms']:.2f}x" if ol and cl else "—"
        )
        lines.append(
            f"| latency at {args.rate:,}/s, linger 0, p50 / p99 (confluent: delivery callback) | "
            f"{lat(ol)} | — | — | {lat(cl)} | — | {ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="apache,embedded")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--only", default="", help="comma-separated worker name prefixes")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--worker", help="run one pattern in this process (see the module docstring)")
    ap.add_argument("--bootstrap", help="the broker of --worker")
    ap.add_argument("--topic", default=CONSUME_TOPIC, help="the filled topic of --worker's consume patterns")
    ap.add_argument("--gc-stats", action="store_true")
    ap.add_argument("--gc-off", action="store_true")
    ap.add_argument("--cprofile", metavar="FILE")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args)))
        return
    print(f"# issue #31, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {_load()}", flush=True)
    all_results: dict[str, Any] = {}
    tables: list[str] = []
    for kind in args.brokers.split(","):
        all_results[kind] = run_broker(kind, args)
        tables.append(table(kind, all_results[kind], args))
        print("\n" + tables[-1], flush=True)
    print("\n\n" + "\n\n".join(tables))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_results, f, indent=1)


if __name__ == "__main__":
    main()
