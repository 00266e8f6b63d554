"""Duplicates after a silent network partition of one group member (issue 24, item 3).

The issue's scenario: a topic pre-filled with 100k records, two members of one group
reading it with ``async for`` and the default automatic commits, each processing at a
steady rate. Member A reaches the broker through a ``BlackholeProxy``; after a few
seconds the proxy drops everything for 20 s (longer than the 10 s session), so the
broker expires A and hands its partitions to B. The script counts records processed
more than once once everything has been read.

Expect duplicates even with the fix: the records A processed after its last automatic
commit and before its own clock said the session was over (up to auto_commit_interval_ms
+ session_timeout_ms of A's processing). What the fix removes is everything after that:
without it A goes on processing its buffered records for the whole partition, in
parallel with B. (A loop that commits each batch before taking the next one bounds the
duplicates by one batch: tests/groups/test_lost_session.py.)

Runs an in-process embedded broker; ``--kafka apache`` starts a local Apache Kafka 4.4
(cached jars, see aiokafka_lite.testing.apache).

Run: .venv/bin/python bench/lost_session_blackhole.py [--protocol classic consumer]
     [--records 100000] [--rate 2500] [--kafka embedded|apache]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

if not os.environ.get("PYTHONPATH"):  # run from a checkout; PYTHONPATH picks another tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from aiokafka_lite import Consumer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.broker.state import BrokerConfig
from aiokafka_lite.net import Client
from aiokafka_lite.net.connection import BrokerConnection, _open_tcp
from aiokafka_lite.produce.producer import Producer
from aiokafka_lite.testing.proxy import BlackholeProxy

PARTITIONS = 4
SESSION_MS = 10_000
BLACKHOLE_S = 20.0
CUT_AFTER_S = 6.0
BROKER_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": "1000",
}


@contextlib.asynccontextmanager
async def kafka(kind: str, topic: str) -> AsyncIterator[str]:
    """The bootstrap of a one-broker Kafka holding ``topic``."""
    if kind == "embedded":
        config = BrokerConfig(extra=BROKER_SETTINGS)
        async with EmbeddedCluster(brokers=1, config=config, topics={topic: PARTITIONS}) as cluster:
            yield cluster.bootstrap
        return
    from aiokafka_lite.testing.apache import ApacheCluster

    apache = ApacheCluster(1, version="latest", configs=BROKER_SETTINGS)
    await asyncio.to_thread(apache.start)
    await asyncio.to_thread(apache.create_topic, topic, PARTITIONS)
    try:
        yield apache.bootstrap
    finally:
        await asyncio.to_thread(apache.close)


async def run(kind: str, protocol: str, records: int, rate: float) -> tuple[int, int, int, int]:
    """(duplicates, of them processed by A after its session had surely expired (the cut
    plus the session timeout: the issue's measure), processed by A, processed by B)."""
    topic = f"lost-{uuid.uuid4().hex[:8]}"
    async with kafka(kind, topic) as bootstrap:
        async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            per = records // PARTITIONS
            for p in range(PARTITIONS):
                await producer.enqueue_batch(topic, [b"%d" % i for i in range(per)], partition=p)
            await producer.flush()
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        with BlackholeProxy(host, int(port)) as proxy:

            async def via_proxy(conn: BrokerConnection) -> None:
                conn.host, conn.port = proxy.host, proxy.port
                await _open_tcp(conn)

            options: dict[str, Any] = {
                "group_id": f"g-{topic}",
                "topics": [topic],
                "auto_offset_reset": "earliest",
                "group_protocol": protocol,
            }
            if protocol == "classic":
                options.update(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000)
            seen: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
            a_times: list[float] = []  # when A processed each of seen["a"]
            cut_at = float("inf")
            last_record = time.monotonic()

            async def member(name: str, consumer: Consumer) -> None:
                nonlocal last_record
                started = time.monotonic()
                async for rec in consumer:
                    seen[name].append((rec.partition, rec.offset))
                    last_record = time.monotonic()
                    if name == "a":
                        a_times.append(last_record)
                    ahead = len(seen[name]) / rate - (time.monotonic() - started)
                    if ahead > 0:  # a steady processing rate
                        await asyncio.sleep(ahead)

            a_client = Client(bootstrap, opener=via_proxy)
            async with (
                a_client,
                Consumer(client=a_client, **options) as a,
                Consumer(bootstrap, **options) as b,
            ):
                tasks = [asyncio.create_task(member("a", a)), asyncio.create_task(member("b", b))]
                await asyncio.sleep(CUT_AFTER_S)
                proxy.blackhole()
                cut_at = time.monotonic()
                await asyncio.sleep(BLACKHOLE_S)
                proxy.restore()
                everything = {(p, o) for p in range(PARTITIONS) for o in range(records // PARTITIONS)}

                def done() -> bool:  # all read, and nothing more came for 5 s
                    return (
                        everything <= set(seen["a"]) | set(seen["b"]) and time.monotonic() - last_record > 5
                    )

                while not done():  # noqa: ASYNC110 - a bench may poll a quiet period
                    await asyncio.sleep(0.5)
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    processed = seen["a"] + seen["b"]
    by_b = set(seen["b"])
    expired_at = cut_at + SESSION_MS / 1000
    after_expiry = sum(1 for rec, t in zip(seen["a"], a_times, strict=True) if t > expired_at and rec in by_b)
    return len(processed) - len(set(processed)), after_expiry, len(seen["a"]), len(seen["b"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol", nargs="+", default=["classic", "consumer"])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=2500.0, help="records/s each member processes")
    parser.add_argument("--kafka", choices=["embedded", "apache"], default="embedded")
    args = parser.parse_args()
    for protocol in args.protocol:
        dups, late, by_a, by_b = asyncio.run(run(args.kafka, protocol, args.records, args.rate))
        print(
            f"{args.kafka} {protocol}: duplicates {dups}, of them processed by A after its session "
            f"had expired {late} (A processed {by_a}, B {by_b})",
            flush=True,
        )


if __name__ == "__main__":
    main()
