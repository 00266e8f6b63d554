"""Classic vs consumer group protocol (KIP-848): how long a group takes to be stable again
after a member joins and after one leaves, and how long the members that keep their
partitions stop delivering meanwhile.

Scenario (issue 14): 10 members, 120 partitions of one topic that a producer keeps
filling (one record per partition every 50 ms). 9 members start and settle; then the
10th joins (event "join"); once the group is stable again, one of the first nine closes
(event "leave"). For each event the script reports

* ``stable_s``: from the event until every member is stable and the partitions are
  spread over the members, each owned once;
* ``kept_gap_s``: over the members that own some partitions both before and after the
  event, the longest time one of them went without a record of those partitions
  between the event and the group being stable (median and max over members).

The classic members use cooperative-sticky (the best the classic protocol offers); the
consumer-protocol members use the broker's default assignor. Timers are the defaults of
each side (classic: 3 s heartbeats, set by the client; consumer protocol: the broker's
``group.consumer.heartbeat.interval.ms``, 5 s by default), which is what users get.

Run: .venv/bin/python bench/groups_consumer_protocol.py --bootstrap 127.0.0.1:9092 [--runs 1]
     [--protocols classic consumer]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import statistics
import sys
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from aiokafka_lite import Consumer
from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.consume.groups import ConsumerMemberState, MemberState
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce.producer import Producer

MEMBERS = 10
PARTITIONS = 120
PRODUCE_INTERVAL_S = 0.05


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str) -> None:
        opts: dict[str, Any] = {"group_protocol": protocol, "auto_offset_reset": "latest"}
        if protocol == "classic":
            opts["partition_assignment_strategy"] = ["cooperative-sticky"]
        self.protocol = protocol
        self.consumer = Consumer(bootstrap, topics=[topic], group_id=group, **opts)
        self.arrivals: list[tuple[float, TopicPartition]] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Member:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=100)
            now = time.monotonic()
            self.arrivals.extend((now, tp) for tp in batch)

    def stable(self) -> bool:
        gc = self.consumer.coordinator
        if gc is None:
            return False
        if self.protocol == "classic":
            return gc.state is MemberState.STABLE and not gc.membership.rejoin_needed
        return gc.state is ConsumerMemberState.STABLE  # type: ignore[comparison-overlap]

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.consumer.close()


def settled(members: list[Member]) -> bool:
    owned = [m.consumer.assignment() for m in members]
    if sum(len(o) for o in owned) != PARTITIONS or len(set().union(*owned)) != PARTITIONS:
        return False
    sizes = [len(o) for o in owned]
    return min(sizes) > 0 and all(m.stable() for m in members)


async def wait_settled(members: list[Member], limit_s: float = 300.0) -> float:
    start = time.monotonic()
    while not settled(members):
        if time.monotonic() - start > limit_s:
            raise TimeoutError("the group did not settle")
        await asyncio.sleep(0.01)
    return time.monotonic()


def kept_gaps(
    members: list[Member], before: dict[int, set[TopicPartition]], t0: float, t1: float
) -> list[float]:
    gaps = []
    for i, m in enumerate(members):
        kept = before.get(i, set()) & m.consumer.assignment()
        if not kept:
            continue
        times = [t0] + [t for t, tp in m.arrivals if t0 <= t <= t1 and tp in kept] + [t1]
        gaps.append(max(b - a for a, b in itertools.pairwise(times)))
    return gaps


def summary(stable_s: float, gaps: list[float]) -> dict[str, float]:
    return {
        "stable_s": stable_s,
        "kept_members": len(gaps),
        "kept_gap_median_s": statistics.median(gaps) if gaps else 0.0,
        "kept_gap_max_s": max(gaps, default=0.0),
    }


async def produce(bootstrap: str, topic: str, stop: asyncio.Event) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        while not stop.is_set():
            for part in range(PARTITIONS):
                await p.enqueue(topic, b"x", partition=part)
            await asyncio.sleep(PRODUCE_INTERVAL_S)


async def one_run(bootstrap: str, protocol: str) -> dict[str, dict[str, float]]:
    topic, group = f"kip848-bench-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, PARTITIONS)])).raise_errors()
    stop = asyncio.Event()
    producer = asyncio.create_task(produce(bootstrap, topic, stop))
    members = [Member(bootstrap, topic, group, protocol) for _ in range(MEMBERS)]
    out: dict[str, dict[str, float]] = {}
    try:
        for m in members[:-1]:
            await m.start()
        await wait_settled(members[:-1])
        await asyncio.sleep(2)
        # join
        before = {i: m.consumer.assignment() for i, m in enumerate(members)}
        t0 = time.monotonic()
        await members[-1].start()
        t1 = await wait_settled(members)
        gaps = kept_gaps(members, before, t0, t1)
        out["join"] = summary(t1 - t0, gaps)
        await asyncio.sleep(2)
        # leave
        leaving = members[0]
        rest = members[1:]
        before = {i: m.consumer.assignment() for i, m in enumerate(rest)}
        t0 = time.monotonic()
        await leaving.close()
        t1 = await wait_settled(rest)
        gaps = kept_gaps(rest, before, t0, t1)
        out["leave"] = summary(t1 - t0, gaps)
    finally:
        stop.set()
        await producer
        for m in members:
            with contextlib.suppress(Exception):
                await m.close()
        async with Admin(bootstrap) as admin:
            with contextlib.suppress(Exception):
                await admin.delete_topics([topic])
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", required=True, help="an Apache Kafka 4.0+ cluster")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--protocols", nargs="+", default=["classic", "consumer"])
    args = parser.parse_args()
    print(f"{MEMBERS} members, {PARTITIONS} partitions, bootstrap {args.bootstrap}")
    for protocol in args.protocols:
        for run in range(args.runs):
            result = await one_run(args.bootstrap, protocol)
            for event, r in result.items():
                print(
                    f"{protocol:9s} run {run + 1} {event:5s}: stable after {r['stable_s']:6.2f} s; the "
                    f"{r['kept_members']:.0f} members keeping partitions paused median "
                    f"{r['kept_gap_median_s']:5.2f} s, max {r['kept_gap_max_s']:5.2f} s"
                )


if __name__ == "__main__":
    asyncio.run(main())
