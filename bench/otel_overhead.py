"""What OpenTelemetry tracing costs: produce and consume throughput, tracing off and on.

One embedded broker runs in its own process (``python -m aiokafka_lite.broker``). Every
(mode, workload) runs in a fresh interpreter, so a mode that imports OpenTelemetry does
not slow down the others. Modes:

* ``off``: no ``instrument()`` (OpenTelemetry never imported: the clients' one check);
* ``on-noop``: ``instrument()`` with the API's default provider (no SDK configured:
  non-recording spans, trace context still propagated from the current span);
* ``on-sdk``: ``instrument()`` with an SDK ``TracerProvider`` without span processors
  (spans recorded, then dropped: no exporter);
* ``on-memory``: an SDK provider exporting to an ``InMemorySpanExporter`` through a
  ``SimpleSpanProcessor`` (the exporter is cleared every 10,000 spans).

Workloads: ``enqueue`` (``enqueue`` per record of ``--value-size`` bytes, then ``flush``),
``send-batch`` (``send_batch`` of 1,000 records at a time), ``async-for`` and
``getmany`` (reading ``--records`` records that a traced producer wrote, so they carry
``traceparent`` headers; manual assignment, no group). Reported: records/s, best of
``--runs``, and each mode's ratio to ``off``.

Run: .venv/bin/python bench/otel_overhead.py [--records 100000] [--runs 3] [--json]
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

MODES = ["off", "on-noop", "on-sdk", "on-memory"]
WORKLOADS = ["enqueue", "send-batch", "async-for", "getmany"]
PARTITIONS = 3


def start_broker() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def setup_tracing(mode: str) -> object:
    """Switch tracing on as ``mode`` says; returns what keeps the exporter alive."""
    if mode == "off":
        return None
    from aiokafka_lite.integrations import otel

    if mode == "on-noop":
        otel.instrument()
        return None
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    exporter = None
    if mode == "on-memory":
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    return exporter


async def create_topic(bootstrap: str, topic: str) -> None:
    from aiokafka_lite import Admin, NewTopic

    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])


async def workload(bootstrap: str, mode: str, name: str, topic: str, records: int, value_size: int) -> float:
    """Records/s of one workload in this process."""
    from aiokafka_lite import Consumer, Producer, TopicPartition

    exporter = setup_tracing(mode)

    def trim() -> None:  # keeps the in-memory exporter from holding every span
        if exporter is not None and len(exporter.get_finished_spans()) > 10_000:  # type: ignore[attr-defined]
            exporter.clear()  # type: ignore[attr-defined]

    value = b"v" * value_size
    if name in ("enqueue", "send-batch"):
        await create_topic(bootstrap, topic)
        async with Producer(bootstrap, linger_ms=5) as producer:
            await producer.send(topic, b"warm-up")
            start = time.perf_counter()
            if name == "enqueue":
                for i in range(records):
                    await producer.enqueue(topic, value)
                    if i % 10_000 == 0:
                        trim()
            else:
                chunk = [value] * 1000
                for _ in range(records // 1000):
                    await producer.send_batch(topic, chunk)
                    trim()
            await producer.flush()
            return records / (time.perf_counter() - start)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        start = time.perf_counter()
        consumer.assign(tps)
        n = 0
        if name == "async-for":
            async for rec in consumer:
                n += len(rec.value) > 0
                if n % 10_000 == 0:
                    trim()
                if n == records:
                    break
        else:
            while n < records:
                batch = await consumer.getmany(timeout_ms=1000, max_records=500)
                n += sum(len(recs) for recs in batch.values())
                trim()
        return n / (time.perf_counter() - start)


async def fill(bootstrap: str, topic: str, records: int, value_size: int) -> None:
    """The consume workloads' input, written by a traced producer (traceparent headers)."""
    setup_tracing("on-sdk")
    from aiokafka_lite import Producer

    await create_topic(bootstrap, topic)
    async with Producer(bootstrap) as producer:
        value = b"v" * value_size
        for _ in range(records // 1000):
            await producer.send_batch(topic, [value] * 1000)


def child(args: argparse.Namespace) -> None:
    rate = asyncio.run(
        workload(args.bootstrap, args.mode, args.workload, args.topic, args.records, args.value_size)
    )
    print(json.dumps({"rate": rate}))


def run_child(bootstrap: str, mode: str, name: str, topic: str, records: int, value_size: int) -> float:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            "--bootstrap",
            bootstrap,
            "--mode",
            mode,
            "--workload",
            name,
            "--topic",
            topic,
            "--records",
            str(records),
            "--value-size",
            str(value_size),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["rate"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    modes = args.modes.split(",")
    workloads = args.workloads.split(",")
    records = args.records // 1000 * 1000
    proc, bootstrap = start_broker()
    try:
        source = f"otel-bench-in-{uuid.uuid4().hex[:8]}"
        if any(w in ("async-for", "getmany") for w in workloads):
            asyncio.run(fill(bootstrap, source, records, args.value_size))
        best: dict[tuple[str, str], float] = {}
        for run in range(args.runs):
            for name in workloads:
                for mode in modes:  # interleaved, so drift hits every mode alike
                    topic = (
                        source if name in ("async-for", "getmany") else f"otel-bench-{uuid.uuid4().hex[:8]}"
                    )
                    rate = run_child(bootstrap, mode, name, topic, records, args.value_size)
                    best[(name, mode)] = max(best.get((name, mode), 0.0), rate)
                    print(f"run {run + 1}: {name:<10} {mode:<9} {rate:>12,.0f} rec/s", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"\n{records:,} records of {args.value_size} B, best of {args.runs} (records/s; ratio to off)")
    print(f"{'workload':<11}" + "".join(f"{m:>22}" for m in modes))
    for name in workloads:
        base = best.get((name, "off"))
        cells = []
        for mode in modes:
            rate = best[(name, mode)]
            ratio = f" ({rate / base:.2f})" if base else ""
            cells.append(f"{rate:>14,.0f}{ratio:>8}")
        print(f"{name:<11}" + "".join(cells))
    if args.json:
        print(json.dumps({f"{n}/{m}": r for (n, m), r in best.items()}))


if __name__ == "__main__":
    main()
