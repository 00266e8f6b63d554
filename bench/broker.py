"""Embedded broker throughput: produce ingest and fetch serving, driven by librdkafka.

The broker runs as its own process (``python -m aiokafka_lite.broker``); this process
drives it with confluent-kafka (librdkafka):

* ingest: an idempotent-off, uncompressed producer (``produce_batch``) sends N records of
  100-byte values in batches of ``--batch-size`` bytes (>= 16 KiB) to P partitions;
  MB/s counts record values, from the first send to the last delivery report.
* serve (librdkafka): a consumer assigned to every partition reads everything back.
* serve (raw): a wire-level fetch loop (no record parsing) reads everything back, which
  measures what the broker can serve when the client is not the bottleneck.

Next to each rate the broker's CPU use during the phase is printed (from /proc): a
broker below ~100% of one core is not the bottleneck of that phase.

Run: /work/venv/bin/python bench/broker.py [--records N] [--partitions P] [--batch-size B]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

VALUE_SIZE = 100
TOPIC = "bench"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def start_broker(partitions: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0", "--topic", f"{TOPIC}:{partitions}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def report(name: str, nbytes: int, seconds: float, broker_cpu: float) -> None:
    """Rate seen by the client, and the broker's own capacity: bytes per broker CPU second
    (what one core running only the broker would sustain)."""
    mb = nbytes / 1e6
    capacity = mb / broker_cpu if broker_cpu > 0 else float("inf")
    print(
        f"{name:<28} {mb / seconds:8.1f} MB/s  ({mb:.0f} MB in {seconds:.2f} s; broker CPU "
        f"{100 * broker_cpu / seconds:.0f}% -> capacity {capacity:.0f} MB per broker CPU second)"
    )


def ingest(bootstrap: str, records: int, partitions: int, batch_size: int, acks: str, pid: int) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "enable.idempotence": False,
            "compression.type": "none",
            "linger.ms": 20,
            "batch.size": batch_size,
            "batch.num.messages": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "message.max.bytes": 1_000_000,
            # Python delivery callbacks per record would make the client the bottleneck.
            "delivery.report.only.error": True,
        }
    )
    value = b"v" * VALUE_SIZE
    chunk = 10_000
    msgs = [{"value": value, "partition": i % partitions} for i in range(chunk)]
    delivered = 0
    errors = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal delivered, errors
        if err is None:
            delivered += 1
        else:
            errors += 1

    # warm up connections and metadata
    p.produce(TOPIC, value, partition=0, on_delivery=on_delivery)
    p.flush(10)
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    sent = 0
    while sent < records:
        n = min(chunk, records - sent)
        batch = msgs if n == chunk else msgs[:n]
        while True:
            try:
                p.produce_batch(TOPIC, batch, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        sent += n
        p.poll(0)
    left = p.flush(120)
    dt = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    if errors or left:
        print(f"  ! {left} records undelivered, {errors} errors")
    report(f"produce ingest (acks={acks})", records * VALUE_SIZE, dt, cpu)


def serve_librdkafka(bootstrap: str, total: int, partitions: int, pid: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 8_388_608,
            "queued.max.messages.kbytes": 1_000_000,
            "fetch.wait.max.ms": 100,
            # librdkafka pauses fetching for fetch.queue.backoff.ms once a partition has
            # queued.min.messages waiting; keep it fetching ahead.
            "queued.min.messages": 5_000_000,
            "fetch.queue.backoff.ms": 10,
        }
    )
    c.assign([TopicPartition(TOPIC, i, 0) for i in range(partitions)])
    got = 0
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < total and time.perf_counter() < deadline:
        for m in c.consume(num_messages=100_000, timeout=1.0):
            if m.error() is None:
                got += 1
    dt = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    c.close()
    if got < total:
        print(f"  ! consumed {got} of {total}")
    report("fetch serve (librdkafka)", got * VALUE_SIZE, dt, cpu)


async def serve_raw(bootstrap: str, partitions: int, pid: int, rounds: int) -> None:
    from aiokafka_lite.testing.rawclient import RawClient
    from aiokafka_lite.wire.messages import FetchRequest, FetchResponse

    c = await RawClient.connect(bootstrap)
    offsets = dict.fromkeys(range(partitions), 0)
    ends: dict[int, int] = {}
    wire = 0
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    for _ in range(rounds):
        offsets = dict.fromkeys(range(partitions), 0)
        while True:
            req = FetchRequest(
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=52_428_800,
                topics=[
                    FetchRequest.FetchTopic(
                        topic=TOPIC,
                        partitions=[
                            FetchRequest.FetchPartition(
                                partition=p, fetch_offset=o, partition_max_bytes=8_388_608
                            )
                            for p, o in offsets.items()
                            if o < ends.get(p, 1 << 62)
                        ],
                    )
                ],
            )
            if not req.topics[0].partitions:
                break
            resp = await c.request(req, 12, within=60)
            assert isinstance(resp, FetchResponse)
            for tr in resp.responses:
                for pr in tr.partitions:
                    ends[pr.partition_index] = pr.high_watermark
                    recs = pr.records
                    if recs:
                        wire += len(recs)
                        # the last batch's base offset + delta -> next offset
                        offsets[pr.partition_index] = _next_offset(recs)
                    else:
                        offsets[pr.partition_index] = pr.high_watermark
    dt = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    await c.close()
    report("fetch serve (raw wire bytes)", wire, dt, cpu)


def _next_offset(recs: Any) -> int:
    import struct

    view = memoryview(recs)
    pos = 0
    nxt = 0
    while pos + 61 <= len(view):
        base, length = struct.unpack_from(">qi", view, pos)
        delta = struct.unpack_from(">i", view, pos + 23)[0]
        nxt = base + delta + 1
        pos += 12 + length
    return nxt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=65_536, help="producer batch.size (>= 16384)")
    ap.add_argument(
        "--raw-rounds", type=int, default=3, help="times the raw fetch loop reads the whole topic"
    )
    args = ap.parse_args()
    proc, bootstrap = start_broker(args.partitions)
    try:
        print(
            f"broker pid {proc.pid} at {bootstrap}; {args.records} records x {VALUE_SIZE} B, "
            f"{args.partitions} partitions, batch.size {args.batch_size}"
        )
        ingest(bootstrap, args.records, args.partitions, args.batch_size, "1", proc.pid)
        ingest(bootstrap, args.records, args.partitions, args.batch_size, "all", proc.pid)
        serve_librdkafka(bootstrap, 2 * args.records + 2, args.partitions, proc.pid)
        asyncio.run(serve_raw(bootstrap, args.partitions, proc.pid, args.raw_rounds))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
