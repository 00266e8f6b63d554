"""A member cut off from the group for longer than its session stops handing out the
records of the partitions it held (issue 24, item 3), end to end through a proxy that
silently drops all traffic, on the embedded broker and on Apache Kafka (--kafka=apache),
with both group protocols.

Scenario: member A (through the proxy) owns every partition of a pre-filled topic and
processes one record (or one ``getmany`` batch) per step, committing it synchronously
before taking the next. After K records the test cuts A off; member B (direct) joins and,
once the broker has expired A's session, owns every partition. Only then is A let go on:
its session is over, so whatever it hands out now is a record B processes too. B reads
everything, the network heals and A rejoins. Every record must have been processed (none
lost), and at most one step of A twice (see the final assertion). Without the fix A goes
on handing out the records it had buffered, during the partition and after it heals.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from group_testlib import eventually

from aiokafka_lite import Consumer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.broker.state import BrokerConfig
from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.net import Client
from aiokafka_lite.net.connection import BrokerConnection, _open_tcp
from aiokafka_lite.produce.producer import Producer
from aiokafka_lite.testing.proxy import BlackholeProxy

PARTITIONS = 4
RECORDS = 20000
BEFORE_CUT = 5  # records A processes and commits before the network is cut
SESSION_MS = 6000  # Apache Kafka's group.min.session.timeout.ms

# Broker timers: the consumer protocol's session and heartbeat are the broker's.
BROKER_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": "1000",
}


@pytest.fixture
async def cluster(kafka_mode: str, kafka_cluster_factory: Any) -> EmbeddedCluster:
    """A fresh one-broker cluster (one broker: A's connections all go to the proxy)."""
    topics = {"t": PARTITIONS}
    if kafka_mode == "apache":
        fresh: EmbeddedCluster = await kafka_cluster_factory(
            brokers=1, topics=topics, configs=BROKER_SETTINGS
        )
        return fresh
    embedded: EmbeddedCluster = await kafka_cluster_factory(
        brokers=1, topics=topics, config=BrokerConfig(extra=BROKER_SETTINGS)
    )
    return embedded


def through(proxy: BlackholeProxy) -> Callable[[BrokerConnection], Any]:
    """A connection opener sending every connection of a client to ``proxy`` (the broker
    advertises its own address; only this member's traffic crosses the proxy)."""

    async def opener(conn: BrokerConnection) -> None:
        conn.host, conn.port = proxy.host, proxy.port
        await _open_tcp(conn)

    return opener


def member_options(protocol: str, group: str) -> dict[str, Any]:
    common: dict[str, Any] = {
        "group_id": group,
        "topics": ["t"],
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "group_protocol": protocol,
    }
    if protocol == "classic":
        common.update(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    return common


def owned(consumer: Consumer) -> set[TP]:
    return set(consumer.subscription_state.assignment())


def in_group(consumer: Consumer) -> bool:
    gc = consumer.coordinator
    if gc is None:
        return False
    m: Any = gc.membership
    return str(m.state.value) == "stable" and (
        getattr(m, "generation", 0) >= 0 and getattr(m, "epoch", 1) > 0
    )


COMMIT_PATIENCE_S = 0.5
POLL_S = 0.2  # how long one step of A waits for records
ATTEMPTS_AFTER_LET_GO = 10  # steps A tries while still cut off, once let go
STEP_RECORDS = {"iterate": 1, "getmany": 50}  # records A takes per step, by loop style


@pytest.mark.parametrize("style", ["iterate", "getmany"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_member_cut_off_past_its_session_hands_out_no_stale_record(
    cluster: EmbeddedCluster, protocol: str, style: str
) -> None:
    bootstrap = cluster.bootstrap
    per_partition = RECORDS // PARTITIONS
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for part in range(PARTITIONS):
            await producer.enqueue_batch("t", [b"%d" % i for i in range(per_partition)], partition=part)
        await producer.flush()
    everything = {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}
    every_partition = {TP("t", p) for p in range(PARTITIONS)}

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    proxy = BlackholeProxy(host, int(port))
    proxy.start()
    group = f"lost-{protocol}-{style}-{uuid.uuid4().hex[:8]}"
    seen_a: list[tuple[int, int]] = []
    seen_b: list[tuple[int, int]] = []
    steps_a = 0  # steps A completed (records handed out, commit attempted)
    attempts_a = 0  # times A asked for records
    after_cut: list[int] = []  # records A was handed in each step after the cut
    cut = False
    go_on = asyncio.Event()
    step = STEP_RECORDS[style]

    committed_b: set[tuple[int, int]] = set()

    lost_a: list[set[TP]] = []

    class LostRecorder:
        async def on_partitions_lost(self, tps: set[TP]) -> None:
            lost_a.append(set(tps))

    a_client = Client(bootstrap, opener=through(proxy))
    a = Consumer(client=a_client, listener=LostRecorder(), **member_options(protocol, group))
    b = Consumer(bootstrap, **member_options(protocol, group))

    async def a_took(records: list[tuple[int, int]]) -> None:
        nonlocal steps_a
        seen_a.extend(records)
        if cut:
            after_cut.append(len(records))
        try:
            # An application that gives a commit half a second, then goes on.
            await asyncio.wait_for(a.commit(), COMMIT_PATIENCE_S)
        except (KafkaError, TimeoutError):
            pass
        steps_a += 1
        if steps_a >= BEFORE_CUT:
            await go_on.wait()

    async def run_a() -> None:
        nonlocal attempts_a
        records = aiter(a)
        while True:
            attempts_a += 1
            if style == "iterate":
                try:  # a step with a timeout: the iterator survives it
                    rec = await asyncio.wait_for(anext(records), POLL_S)
                except TimeoutError:
                    continue
                await a_took([(rec.partition, rec.offset)])
                continue
            batch = await a.getmany(timeout_ms=POLL_S * 1000, max_records=step)
            if batch:
                await a_took([(r.partition, r.offset) for recs in batch.values() for r in recs])

    async def run_b() -> None:
        while True:
            batch = await b.getmany(timeout_ms=200, max_records=500)
            for recs in batch.values():
                seen_b.extend((r.partition, r.offset) for r in recs)
            if batch:
                snapshot = set(seen_b)
                await b.commit()
                committed_b.update(snapshot)

    tasks: list[asyncio.Task[None]] = []
    try:
        await a.start()
        tasks.append(asyncio.create_task(run_a()))
        await eventually(lambda: steps_a >= BEFORE_CUT, 60, "A processes and commits its first records")
        assert owned(a) == every_partition

        proxy.blackhole()
        cut = True
        committed_before_cut = set(seen_a)
        await b.start()
        tasks.append(asyncio.create_task(run_b()))
        await eventually(
            lambda: owned(b) == every_partition,
            60,
            "B owns every partition once A's session expired",
            lambda: (owned(a), owned(b)),
        )
        # A's own clock runs out a moment after the broker's (it counts from the heartbeat
        # answer): wait until it has stopped handing out records of its partitions (it
        # pauses them), so that A is let go on only once it knows (without the fix it never
        # does; the test goes on, to count what follows).
        with contextlib.suppress(AssertionError):
            await eventually(
                lambda: a.paused() == every_partition, 2 * SESSION_MS / 1000, "A stops handing out records"
            )
        frozen_when_let_go = a.paused()
        go_on.set()
        let_go_at = attempts_a
        await eventually(
            lambda: attempts_a >= let_go_at + ATTEMPTS_AFTER_LET_GO,
            60,
            "A asks for records again and again while cut off",
        )
        await eventually(
            lambda: everything - committed_before_cut <= committed_b,
            60,
            "B reads and commits every record A had not committed",
            lambda: (len(seen_a), len(seen_b)),
        )
        proxy.restore()
        await eventually(
            lambda: bool(lost_a) and in_group(a) and in_group(b), 60, "A rejoins after the network heals"
        )
        for t in tasks:
            assert not t.done(), t
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        proxy.restore()
        await a.close()
        await b.close()
        await a_client.close()
        proxy.close()

    processed = seen_a + seen_b
    duplicates = len(processed) - len(set(processed))
    print(
        f"\n{protocol}/{style}: A processed {len(seen_a)} ({sum(after_cut)} after the cut, "
        f"in {len(after_cut)} steps), B {len(seen_b)}, duplicates {duplicates}"
    )
    assert everything - set(processed) == set(), "records lost"
    # The bound: A had committed its last step before the cut (A commits each step before
    # taking the next), and A is let go on only once B owns everything (the broker expired
    # A's session) and A has declared its partitions lost. From then on A hands out nothing
    # of them; after rejoining it fetches from B's commits, which cover everything. So no
    # record should be processed twice; the assertion allows one step of A (1 record, or
    # one getmany batch of max_records), the bound, in case A's step at the cut
    # had not committed.
    assert duplicates <= step, (duplicates, after_cut)
    assert len(after_cut) <= 1, after_cut
    # A stopped on its own clock during the partition; once the network healed the
    # coordinator told it it had been expired: its partitions were lost (no commit).
    assert frozen_when_let_go == every_partition, frozen_when_let_go
    assert lost_a[:1] == [every_partition], lost_a
