"""OrderedWorkers' failure handling against a broker (embedded, or Apache Kafka with
``--kafka=apache``): timeouts, dead letters read back from their topic, the committed
offsets, and the failure-threshold decisions."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest
from workers_testlib import eventually

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.processing.failures import FailureCounts, FailureReport, FailureThresholdError
from aiokafka_lite.processing.ordered_workers import OrderedWorkers

PER_PARTITION = 20


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:10]
    return f"workers-t-{suffix}", f"workers-g-{suffix}"


async def produce(cluster: EmbeddedCluster, topic: str, values: dict[int, list[bytes]]) -> None:
    async with Producer(cluster.bootstrap) as producer:
        for partition, batch in values.items():
            for i, value in enumerate(batch):
                await producer.send(
                    topic, value, b"key-%d" % i, partition=partition, headers=[("src", b"app")]
                )
        await producer.flush()


def consumer(cluster: EmbeddedCluster, topic: str, group: str) -> Consumer:
    return Consumer(
        cluster.bootstrap,
        topics=[topic],
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )


async def committed(cluster: EmbeddedCluster, group: str, tps: list[TP]) -> dict[TP, int | None]:
    async with Consumer(cluster.bootstrap, group_id=group, enable_auto_commit=False) as reader:
        return {tp: await reader.committed(tp) for tp in tps}


async def read_all(cluster: EmbeddedCluster, topic: str, want: int) -> list[Any]:
    out: list[Any] = []
    async with Consumer(cluster.bootstrap, topics=[topic], auto_offset_reset="earliest") as reader:
        deadline = asyncio.get_running_loop().time() + 30
        while len(out) < want and asyncio.get_running_loop().time() < deadline:
            for batch in (await reader.getmany(timeout_ms=300)).values():
                out += batch
    return out


async def test_timeouts_and_errors_are_dead_lettered_then_committed(kafka_cluster: EmbeddedCluster) -> None:
    topic, group = names()
    dlt = topic + ".dlt"
    kafka_cluster.create_topic(topic, partitions=2)
    kafka_cluster.create_topic(dlt, partitions=1)
    slow = {(0, 3), (1, 11)}
    bad = {(0, 8), (1, 0), (1, 19)}

    def value(p: int, o: int) -> bytes:
        kind = "slow" if (p, o) in slow else "bad" if (p, o) in bad else "ok"
        return f"{kind}-{p}-{o}".encode()

    await produce(kafka_cluster, topic, {p: [value(p, o) for o in range(PER_PARTITION)] for p in (0, 1)})
    calls: Counter[tuple[int, int]] = Counter()
    cancelled: list[tuple[int, int]] = []

    async def handle(record: Any) -> None:
        where = (record.partition, record.offset)
        calls[where] += 1
        if record.value.startswith(b"slow"):
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(where)
                raise
        if record.value.startswith(b"bad"):
            raise ValueError(f"cannot handle {record.value.decode()}")

    async with consumer(kafka_cluster, topic, group) as c, Producer(kafka_cluster.bootstrap) as producer:
        pool = OrderedWorkers(
            c,
            handle,
            concurrency=4,
            on_failure="retry",
            max_retries=1,
            retry_backoff_ms=10,
            handler_timeout_ms=300,
            dead_letter_topic=dlt,
            producer=producer,
            commit_interval_ms=100,
        )
        task = asyncio.create_task(pool.run())
        await eventually(lambda: pool.stats.processed == 2 * PER_PARTITION, limit=60, what="every record")
        pool.stop()
        await task
    assert pool.stats.timeouts == 2 * len(slow) and sorted(cancelled) == sorted(list(slow) * 2)
    assert {w: n for w, n in calls.items() if n != 1} == dict.fromkeys(slow | bad, 2)
    assert (pool.stats.dead_lettered, pool.stats.skipped) == (len(slow | bad), len(slow | bad))
    tps = [TP(topic, 0), TP(topic, 1)]
    assert await committed(kafka_cluster, group, tps) == dict.fromkeys(tps, PER_PARTITION)

    letters = await read_all(kafka_cluster, dlt, len(slow | bad))
    by_origin = {
        (int(dict(r.headers)["dlt.partition"]), int(dict(r.headers)["dlt.offset"])): r for r in letters
    }
    assert set(by_origin) == slow | bad and len(letters) == len(slow | bad)
    for (p, o), letter in by_origin.items():
        headers = dict(letter.headers)
        assert letter.value == value(p, o) and letter.key == b"key-%d" % o
        assert headers["src"] == b"app" and headers["dlt.topic"] == topic.encode()
        assert headers["dlt.attempts"] == b"2"
        if (p, o) in slow:
            assert headers["dlt.error.type"] == b"HandlerTimeoutError"
            assert headers["dlt.error"] == b"handler timed out after 300 ms and was cancelled"
        else:
            assert headers["dlt.error.type"] == b"ValueError"
            assert headers["dlt.error"] == f"cannot handle {value(p, o).decode()}".encode()


async def test_threshold_pauses_a_partition_then_it_resumes(kafka_cluster: EmbeddedCluster) -> None:
    topic, group = names()
    kafka_cluster.create_topic(topic, partitions=2)
    await produce(kafka_cluster, topic, {p: [b"v-%d" % o for o in range(PER_PARTITION)] for p in (0, 1)})
    downstream_down = True
    handled: dict[int, list[int]] = {0: [], 1: []}
    reports: list[FailureReport] = []

    async def handle(record: Any) -> None:
        if record.partition == 0 and record.offset == 6 and downstream_down:
            if len(reports) % 2:
                await asyncio.sleep(60)
            raise ConnectionError("downstream down")
        handled[record.partition].append(record.offset)

    def on_threshold(report: FailureReport) -> str:
        reports.append(report)
        return "pause"

    async with consumer(kafka_cluster, topic, group) as c:
        pool = OrderedWorkers(
            c,
            handle,
            on_failure="retry",
            max_retries=None,
            retry_backoff_ms=5,
            retry_backoff_max_ms=5,
            handler_timeout_ms=200,
            failure_threshold=3,
            failure_window_ms=60_000,
            on_failure_threshold=on_threshold,
            commit_interval_ms=100,
        )
        task = asyncio.create_task(pool.run())
        try:
            await eventually(lambda: pool.paused_partitions() == {TP(topic, 0)}, limit=30, what="pause")
            assert TP(topic, 0) in c.paused()
            await eventually(lambda: len(handled[1]) == PER_PARTITION, limit=30, what="partition 1")
            assert handled[0] == list(range(6))
            assert reports[0].partition == TP(topic, 0) and reports[0].record.offset == 6
            assert reports[0].counts == FailureCounts(errors=4)
            downstream_down = False
            pool.resume_partition(TP(topic, 0))
            await eventually(lambda: len(handled[0]) == PER_PARTITION, limit=30, what="partition 0")
            assert handled[0] == list(range(PER_PARTITION)) and pool.paused_partitions() == set()
        finally:
            pool.stop()
            await task
    assert len(reports) == 1 and pool.stats.retries == 3
    tps = [TP(topic, 0), TP(topic, 1)]
    assert await committed(kafka_cluster, group, tps) == dict.fromkeys(tps, PER_PARTITION)


@pytest.mark.parametrize("decision", ["stop", "continue"])
async def test_threshold_stop_or_continue(kafka_cluster: EmbeddedCluster, decision: str) -> None:
    topic, group = names()
    kafka_cluster.create_topic(topic, partitions=1)
    await produce(kafka_cluster, topic, {0: [b"v-%d" % o for o in range(PER_PARTITION)]})
    reports: list[FailureReport] = []

    async def handle(record: Any) -> None:
        if record.offset in (4, 5, 9):
            if record.offset == 5:
                await asyncio.sleep(60)
            raise RuntimeError(f"failed {record.offset}")

    def on_threshold(report: FailureReport) -> str:
        reports.append(report)
        return decision

    async with consumer(kafka_cluster, topic, group) as c:
        pool = OrderedWorkers(
            c,
            handle,
            on_failure="skip",
            handler_timeout_ms=200,
            failure_threshold=2,
            on_failure_threshold=on_threshold,
            commit_interval_ms=100,
        )
        if decision == "stop":
            with pytest.raises(FailureThresholdError) as info:
                await asyncio.wait_for(pool.run(), 60)
            assert info.value.report is reports[0]
        else:
            task = asyncio.create_task(pool.run())
            await eventually(lambda: pool.stats.processed == PER_PARTITION, limit=30, what="every record")
            pool.stop()
            await task
    assert len(reports) == 1
    assert reports[0].record.offset == 9 and reports[0].counts == FailureCounts(errors=2, timeouts=1)
    expected = 9 if decision == "stop" else PER_PARTITION
    assert await committed(kafka_cluster, group, [TP(topic, 0)]) == {TP(topic, 0): expected}
