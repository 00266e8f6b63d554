"""Embedded broker throughput: produce ingest and fetch serving, driven by librdkafka.

The broker runs as its own process (``python -m aiokafka_lite.broker``); client
processes drive it with confluent-kafka (librdkafka):

* ingest: ``--clients`` producer processes (uncompressed, ``produce_batch``) send
  ``--records`` records of 100-byte values in batches of up to ``--batch-size`` bytes
  (>= 16 KiB) to ``--partitions`` partitions, with acks=1 and acks=all. MB/s counts record
  values, from the start signal to the last delivery.
* serve (librdkafka): ``--clients`` consumer processes, each assigned a share of the
  partitions, read everything back.
* serve (kcat): librdkafka without Python: kcat reads the whole topic.
* serve (raw): a wire-level fetch loop (no record parsing) reads everything back: what
  the broker serves when the client is not the bottleneck (MB/s of record-batch bytes).

Each line also shows the broker's CPU use in the phase (from /proc) and its capacity:
MB per second of broker CPU, i.e. what the broker would sustain on a core of its own
(Python runs it on one core). The clients share the same cores, so on a 2-core machine
the client-side rate is usually limited by the clients.

Run: /work/venv/bin/python bench/broker.py [--records N] [--partitions P] [--clients C]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import struct
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
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


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
    mb = nbytes / 1e6
    capacity = mb / broker_cpu if broker_cpu > 0 else float("inf")
    print(
        f"{name:<30} {mb / seconds:7.1f} MB/s  ({mb:5.0f} MB in {seconds:5.2f} s)  "
        f"broker CPU {100 * broker_cpu / seconds:3.0f}%  capacity {capacity:5.0f} MB/s per broker core",
        flush=True,
    )


# -- client processes ------------------------------------------------------------------
def _producer(
    bootstrap: str, records: int, partitions: int, batch_size: int, acks: str, go: Any, done: Any
) -> None:
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
            # Python delivery callbacks per record would make the client the bottleneck.
            "delivery.report.only.error": True,
        }
    )
    errors = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    value = b"v" * VALUE_SIZE
    chunk = 10_000
    msgs = [{"value": value, "partition": i % partitions} for i in range(chunk)]
    p.produce(TOPIC, value, partition=0, on_delivery=on_delivery)  # connections and metadata
    p.flush(30)
    go.wait()
    sent = 0
    while sent < records:
        n = min(chunk, records - sent)
        batch = msgs if n == chunk else msgs[:n]
        while True:
            try:
                p.produce_batch(TOPIC, batch, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
        sent += n
        p.poll(0)
    left = p.flush(300)
    done.put((left, errors))


def _consumer(bootstrap: str, parts: list[int], go: Any, done: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 8_388_608,
            "queued.max.messages.kbytes": 1_000_000,
            # librdkafka backs off fetching (fetch.queue.backoff.ms) once a partition has
            # queued.min.messages waiting; keep it fetching ahead.
            "queued.min.messages": 5_000_000,
            "fetch.queue.backoff.ms": 10,
        }
    )
    expect = sum(c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in parts)
    go.wait()
    c.assign([TopicPartition(TOPIC, p, 0) for p in parts])
    got = 0
    deadline = time.monotonic() + 300
    while got < expect and time.monotonic() < deadline:
        for m in c.consume(num_messages=100_000, timeout=1.0):
            if m.error() is None:
                got += 1
    c.close()
    done.put(got)


def run_clients(targets: list[tuple[Any, tuple[Any, ...]]], pid: int) -> tuple[list[Any], float, float]:
    ctx = mp.get_context("fork")
    go = ctx.Event()
    done = ctx.Queue()
    procs = [ctx.Process(target=t, args=(*a, go, done)) for t, a in targets]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let every client connect and warm up
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    go.set()
    results = [done.get(timeout=600) for _ in procs]
    dt = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    for p in procs:
        p.join(30)
    return results, dt, cpu


def ingest(bootstrap: str, args: argparse.Namespace, acks: str, pid: int) -> None:
    per = args.records // args.clients
    targets = [
        (_producer, (bootstrap, per, args.partitions, args.batch_size, acks)) for _ in range(args.clients)
    ]
    results, dt, cpu = run_clients(targets, pid)
    left = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    if left or errors:
        print(f"  ! {left} records undelivered, {errors} errors")
    report(f"produce ingest (acks={acks})", per * args.clients * VALUE_SIZE, dt, cpu)


def serve_librdkafka(bootstrap: str, args: argparse.Namespace, total: int, pid: int) -> None:
    shares = [[p for p in range(args.partitions) if p % args.clients == i] for i in range(args.clients)]
    targets = [(_consumer, (bootstrap, s)) for s in shares if s]
    results, dt, cpu = run_clients(targets, pid)
    got = sum(results)
    if got < total - args.partitions:
        print(f"  ! consumed {got} of {total}")
    report("fetch serve (librdkafka)", got * VALUE_SIZE, dt, cpu)


def serve_kcat(bootstrap: str, pid: int) -> None:
    """librdkafka without Python in the way: kcat reads the topic to the end, one byte out per record."""
    import shutil

    if shutil.which("kcat") is None:
        print("fetch serve (kcat)              skipped: kcat not installed")
        return
    cmd = [
        "kcat",
        "-b",
        bootstrap,
        "-C",
        "-t",
        TOPIC,
        "-o",
        "beginning",
        "-e",
        "-q",
        "-f",
        "x",
        "-X",
        "fetch.max.bytes=52428800",
        "-X",
        "max.partition.fetch.bytes=8388608",
        "-X",
        "queued.min.messages=5000000",
    ]
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, timeout=600)
    out = r.stdout
    if r.returncode:
        print(f"  ! kcat failed: {r.stderr.decode(errors='replace')[:200]}")
    dt = time.perf_counter() - t0
    report("fetch serve (kcat)", len(out) * VALUE_SIZE, dt, cpu_seconds(pid) - cpu0)


async def serve_raw(bootstrap: str, partitions: int, pid: int, rounds: int) -> None:
    """Fetch everything ``rounds`` times; counts record-batch bytes, parses only batch headers."""
    from aiokafka_lite.wire.framing import encode_request
    from aiokafka_lite.wire.messages import FetchRequest

    host, _, port = bootstrap.split(",")[0].rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 27)
    wire = 0
    corr = 0
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    for _ in range(rounds):
        offsets = dict.fromkeys(range(partitions), 0)
        done: set[int] = set()
        while len(done) < partitions:
            corr += 1
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
                            if p not in done
                        ],
                    )
                ],
            )
            writer.write(encode_request(req, 11, corr, "raw"))
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.readexactly(size)
            for part, hw, recs in _walk_fetch_v11(memoryview(frame)):
                if recs:
                    wire += len(recs)
                    offsets[part] = _next_offset(recs)
                if not recs or offsets[part] >= hw:
                    done.add(part)
    dt = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    writer.close()
    report("fetch serve (raw, batch bytes)", wire, dt, cpu)


def _walk_fetch_v11(buf: memoryview) -> list[tuple[int, int, memoryview]]:
    """(partition, high watermark, records) of a FetchResponse v11 frame (one topic)."""
    pos = 4 + 4 + 2 + 4  # correlation id, throttle, error, session id
    out = []
    (ntopics,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    for _ in range(ntopics):
        (nlen,) = struct.unpack_from(">h", buf, pos)
        pos += 2 + nlen
        (nparts,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        for _ in range(nparts):
            part, _err, hw, _lso, _lstart = struct.unpack_from(">ihqqq", buf, pos)
            pos += 4 + 2 + 8 + 8 + 8
            (naborted,) = struct.unpack_from(">i", buf, pos)
            pos += 4 + max(naborted, 0) * 16
            pos += 4  # preferred read replica
            (rlen,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            recs = buf[pos : pos + max(rlen, 0)]
            pos += max(rlen, 0)
            out.append((part, hw, recs))
    return out


def _next_offset(recs: memoryview) -> int:
    pos = 0
    nxt = 0
    while pos + 61 <= len(recs):
        base, length = struct.unpack_from(">qi", recs, pos)
        (delta,) = struct.unpack_from(">i", recs, pos + 23)
        nxt = base + delta + 1
        pos += 12 + length
    return nxt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000, help="records per ingest phase")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--clients", type=int, default=2, help="client processes per phase")
    ap.add_argument("--batch-size", type=int, default=131_072, help="producer batch.size (>= 16384)")
    ap.add_argument(
        "--raw-rounds", type=int, default=3, help="times the raw fetch loop reads the whole topic"
    )
    args = ap.parse_args()
    if args.batch_size < 16384:
        ap.error("--batch-size must be at least 16384")
    proc, bootstrap = start_broker(args.partitions)
    try:
        print(
            f"broker pid {proc.pid} at {bootstrap}; {args.records} records x {VALUE_SIZE} B per ingest phase, "
            f"{args.partitions} partitions, batch.size {args.batch_size}, {args.clients} client processes",
            flush=True,
        )
        ingest(bootstrap, args, "1", proc.pid)
        ingest(bootstrap, args, "all", proc.pid)
        total = 2 * (args.records // args.clients) * args.clients + 2 * args.clients  # + warm-up records
        serve_librdkafka(bootstrap, args, total, proc.pid)
        serve_kcat(bootstrap, proc.pid)
        asyncio.run(serve_raw(bootstrap, args.partitions, proc.pid, args.raw_rounds))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
