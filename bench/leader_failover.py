"""Leader fail-over: the longest acknowledgement stall and the longest consume gap after
a partition leader is SIGKILLed on a 3-node Apache Kafka cluster.

One ApacheCluster (replication 3, ``min.insync.replicas=2``, no automatic leader
rebalance) serves every round. A round makes a producer (acks=all, idempotent, one
record every ``--interval-ms`` to partition 0) and a consumer (assigned partition 0),
lets them run ``--warmup-s``, SIGKILLs the partition's leader, keeps running for
``--after-s`` and reports the longest gap between consecutive acknowledgements and
between consecutive consumed records, measured from the kill on. The killed node is
then restarted and the round ends once it is back in the ISR.

Rounds alternate between the leader-discovery path on (KIP-951: ``CurrentLeader`` from
Produce/Fetch responses, the default) and off (``Sender.use_leader_hints`` and
``Fetcher.use_leader_hints`` set False: wait for a metadata refresh, the client before
KIP-951), so before and after come from the same run. It measures; it never fails.

Run:  .venv/bin/python bench/leader_failover.py [--rounds 2] [--version 4.4.0]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

TOPIC = "failover"


async def _leader(admin: Any) -> tuple[int, tuple[int, ...]]:
    (p,) = (await admin.describe_topics([TOPIC])).raise_errors()[TOPIC].partitions
    return p.leader, p.isr


async def _round(cluster: Any, hints: bool, args: argparse.Namespace) -> dict[str, Any]:
    from aiokafka_lite import Admin
    from aiokafka_lite.consume import Consumer
    from aiokafka_lite.core.structs import TopicPartition
    from aiokafka_lite.produce import Producer

    tp = TopicPartition(TOPIC, 0)
    acks: list[float] = []
    consumed: list[float] = []
    failed = 0
    stop = asyncio.Event()
    async with (
        Admin(cluster.bootstrap) as admin,
        Producer(cluster.bootstrap, acks="all", linger_ms=0, enable_idempotence=True) as producer,
        Consumer(cluster.bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=100) as consumer,
    ):
        producer._sender.use_leader_hints = hints
        consumer.assign([tp])
        await consumer.seek_to_end(tp)

        def acked(fut: Any) -> None:
            nonlocal failed
            if fut.cancelled() or fut.exception() is not None:
                failed += 1
            else:
                acks.append(time.monotonic())

        async def produce() -> None:
            pending = []
            while not stop.is_set():
                fut = (await producer.enqueue(TOPIC, b"x" * 100, partition=0)).as_future()
                fut.add_done_callback(acked)
                pending.append(fut)
                await asyncio.sleep(args.interval_ms / 1000)
            await asyncio.gather(*pending, return_exceptions=True)

        async def consume() -> None:
            fetcher_set = False
            while not stop.is_set():
                if not fetcher_set and consumer.fetcher is not None:
                    consumer.fetcher.use_leader_hints = hints
                    fetcher_set = True
                batch = await consumer.getmany(timeout_ms=100)
                now = time.monotonic()
                consumed.extend(now for rs in batch.values() for _ in rs)

        tasks = [asyncio.create_task(produce()), asyncio.create_task(consume())]
        await asyncio.sleep(args.warmup_s)
        leader, _ = await _leader(admin)
        t_kill = time.monotonic()
        await cluster.kill_broker(leader)
        await asyncio.sleep(args.after_s)
        t_end = time.monotonic()
        stop.set()
        await asyncio.gather(*tasks)
        new_leader, _ = await _leader(admin)

        def longest_gap(times: list[float]) -> float:
            before = [t for t in times if t <= t_kill]
            after = sorted(t for t in times if t_kill < t <= t_end)
            # The stall that was still going on at the end counts too.
            points = ([before[-1]] if before else [t_kill]) + after + [t_end]
            return max(b - a for a, b in itertools.pairwise(points))

        result = {
            "leader_discovery": hints,
            "killed": leader,
            "new_leader": new_leader,
            "ack_stall_s": round(longest_gap(acks), 3),
            "consume_gap_s": round(longest_gap(consumed), 3),
            "acked": len(acks),
            "failed": failed,
            "batches_moved_by_leader_hint": producer._sender.batches_moved_by_leader_hint,
            "partitions_moved_by_leader_hint": consumer.fetcher.partitions_moved_by_leader_hint
            if consumer.fetcher is not None
            else 0,
        }
        await cluster.start_broker(leader)
        async with asyncio.timeout(180):
            while len((await _leader(admin))[1]) < 3:  # noqa: ASYNC110 (polls the cluster)
                await asyncio.sleep(0.5)
    return result


async def main(args: argparse.Namespace) -> None:
    from aiokafka_lite.testing.apache import ApacheCluster

    configs = {
        "auto.leader.rebalance.enable": "false",
        "min.insync.replicas": "2",
        "broker.session.timeout.ms": str(args.session_timeout_ms),
        "broker.heartbeat.interval.ms": str(max(args.session_timeout_ms // 4, 100)),
    }
    cluster = ApacheCluster(3, version=args.version, configs=configs)
    await asyncio.to_thread(cluster.start)
    try:
        cluster.create_topic(TOPIC, 1, replication_factor=3)
        results = []
        for i in range(args.rounds * 2):
            hints = i % 2 == 1  # off first, then on: before/after alternate
            r = await _round(cluster, hints, args)
            print(json.dumps(r), flush=True)
            results.append(r)
        for hints in (False, True):
            rs = [r for r in results if r["leader_discovery"] is hints]
            label = "after (KIP-951 on)" if hints else "before (KIP-951 off)"
            print(
                f"{label}: ack stall max {max(r['ack_stall_s'] for r in rs):.3f} s "
                f"median {statistics.median(r['ack_stall_s'] for r in rs):.3f} s; "
                f"consume gap max {max(r['consume_gap_s'] for r in rs):.3f} s "
                f"median {statistics.median(r['consume_gap_s'] for r in rs):.3f} s; "
                f"rounds {len(rs)}"
            )
    finally:
        await asyncio.to_thread(cluster.close)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds per mode (on/off)")
    ap.add_argument("--version", default=None, help="Apache Kafka version (default: newest pinned)")
    ap.add_argument("--interval-ms", type=float, default=5.0)
    ap.add_argument("--warmup-s", type=float, default=3.0)
    ap.add_argument("--after-s", type=float, default=12.0)
    ap.add_argument("--session-timeout-ms", type=int, default=3000, help="broker.session.timeout.ms")
    asyncio.run(main(ap.parse_args()))
