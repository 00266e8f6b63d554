"""Consumption gap during a rebalance: how long a member goes without records of the
partitions it keeps while two more members join its group.

The scenario of tests/groups/test_group_consumer_e2e.py's
``test_cooperative_rebalance_keeps_consuming_kept_partitions`` (which checks only that
records keep arriving mid-rebalance): member ``a`` consumes a 12-partition topic that a
producer keeps filling (one record per partition every 20 ms); then ``b`` joins, then
``c``. From the moment ``b`` starts until all three own a balanced, stable assignment,
the script records when ``a`` receives each record of the partitions it still owns at
the end, and reports the longest pause between them (the window's start and end count
as records), next to the heartbeat interval.

With ``cooperative-sticky`` the kept partitions are never revoked, so the pause should
stay well below the heartbeat interval; with an eager strategy (``range``) every member
stops consuming for the whole rebalance: the contrast is the point of the comparison.

Runs on an in-process embedded three-broker cluster, or on any Kafka given with
``--bootstrap`` (a fresh topic is created there, e.g. a local Apache Kafka).

Run: .venv/bin/python bench/groups_rebalance_gap.py [--runs 3] [--strategy cooperative-sticky range]
     [--bootstrap 127.0.0.1:9092]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import statistics
import sys
import uuid
from collections.abc import AsyncIterator, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from aiokafka_lite import Consumer
from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume.groups import MemberState
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce.producer import Producer

PARTITIONS = 12
HEARTBEAT_MS = 1000
SESSION_MS = 10_000
PRODUCE_INTERVAL_S = 0.02


@contextlib.asynccontextmanager
async def kafka(bootstrap: str | None) -> AsyncIterator[tuple[str, str]]:
    """(bootstrap, topic): a fresh topic on the given Kafka, or an embedded 3-broker cluster."""
    topic = f"gap-{uuid.uuid4().hex[:8]}"
    if bootstrap is None:
        async with EmbeddedCluster(brokers=3, topics={topic: PARTITIONS}) as cluster:
            yield cluster.bootstrap, topic
        return
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, PARTITIONS)])).raise_errors()
        try:
            yield bootstrap, topic
        finally:
            with contextlib.suppress(Exception):
                await admin.delete_topics([topic])


async def produce_until(bootstrap: str, topic: str, stop: asyncio.Event) -> None:
    n = 0
    async with Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        while not stop.is_set():
            for part in range(PARTITIONS):
                await p.enqueue(topic, b"%d" % n, partition=part)
                n += 1
            await asyncio.sleep(PRODUCE_INTERVAL_S)
        await p.flush()


async def eventually(cond: Callable[[], bool], what: str, within_s: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not cond():
        if loop.time() > deadline:
            raise TimeoutError(f"not reached within {within_s:.0f} s: {what}")
        await asyncio.sleep(0.02)


def stable_and_balanced(consumers: list[Consumer], topic: str) -> bool:
    owned = [c.subscription_state.assignment() for c in consumers]
    if set().union(*owned) != {TopicPartition(topic, p) for p in range(PARTITIONS)}:
        return False
    if sum(len(o) for o in owned) != PARTITIONS or max(map(len, owned)) - min(map(len, owned)) > 1:
        return False
    for c in consumers:
        gc = c.coordinator
        if gc is None or gc.state is not MemberState.STABLE or gc.membership.rejoin_needed:
            return False
    return True


async def drain(consumer: Consumer) -> None:
    async for _ in consumer:
        pass


async def one_run(bootstrap: str | None, strategy: str) -> tuple[float, int, float]:
    """(longest gap in s, records a got of its kept partitions in the window, window in s)."""
    async with kafka(bootstrap) as (servers, topic):
        group = f"gap-{uuid.uuid4().hex[:8]}"

        def member() -> Consumer:
            return Consumer(
                servers,
                topics=[topic],
                group_id=group,
                auto_offset_reset="earliest",
                partition_assignment_strategy=[strategy],
                heartbeat_interval_ms=HEARTBEAT_MS,
                session_timeout_ms=SESSION_MS,
                auto_commit_interval_ms=500,
            )

        loop = asyncio.get_running_loop()
        arrivals: list[tuple[float, int]] = []
        a, b, c = member(), member(), member()

        async def run_a() -> None:
            async for rec in a:
                arrivals.append((loop.time(), rec.partition))

        stop = asyncio.Event()
        tasks = [asyncio.create_task(produce_until(servers, topic, stop))]
        try:
            await a.start()
            tasks.append(asyncio.create_task(run_a()))
            await eventually(lambda: stable_and_balanced([a], topic) and bool(arrivals), "a alone")
            start = loop.time()
            await b.start()
            tasks.append(asyncio.create_task(drain(b)))
            await eventually(lambda: stable_and_balanced([a, b], topic), "a+b")
            await c.start()
            tasks.append(asyncio.create_task(drain(c)))
            await eventually(lambda: stable_and_balanced([a, b, c], topic), "a+b+c")
            end = loop.time()
            kept = {tp.partition for tp in a.subscription_state.assignment()}
        finally:
            stop.set()
            await tasks[0]
            for consumer in (a, b, c):
                with contextlib.suppress(Exception):
                    await consumer.close()
            for t in tasks[1:]:
                t.cancel()
                with contextlib.suppress(BaseException):
                    await t
        times = [start] + [t for t, p in arrivals if start <= t <= end and p in kept] + [end]
        longest = max(later - earlier for earlier, later in itertools.pairwise(times))
        return longest, len(times) - 2, end - start


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--strategy", nargs="+", default=["cooperative-sticky", "range"])
    ap.add_argument("--bootstrap", default=None, help="a running Kafka (default: embedded 3 brokers)")
    args = ap.parse_args()
    where = args.bootstrap or "embedded 3-broker cluster"
    print(f"kept-partition consumption gap while 2 members join ({where}; heartbeat {HEARTBEAT_MS} ms)")
    for strategy in args.strategy:
        gaps = []
        for _ in range(args.runs):
            longest, records, window = await one_run(args.bootstrap, strategy)
            gaps.append(longest)
            print(
                f"  {strategy:>18}: longest gap {longest * 1000:6.0f} ms "
                f"({longest * 1000 / HEARTBEAT_MS:.2f} x heartbeat), "
                f"{records} kept-partition records in the {window:.1f} s rebalance window"
            )
        print(
            f"  {strategy:>18}: median {statistics.median(gaps) * 1000:.0f} ms, "
            f"worst {max(gaps) * 1000:.0f} ms over {len(gaps)} runs"
        )


if __name__ == "__main__":
    asyncio.run(main())
