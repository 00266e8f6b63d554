"""ShareWorkers' failure handling against a broker with share groups (embedded, or
Apache Kafka with ``--kafka=apache``): handler timeouts and their dead letters, and the
failure-threshold decisions (pause, then resume; stop)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest
from workers_testlib import eventually

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume.share import ShareConsumer, ShareRecord
from aiokafka_lite.processing import ShareWorkers
from aiokafka_lite.processing.failures import FailureReport, FailureThresholdError


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:10]
    return f"share-workers-t-{suffix}", f"share-workers-g-{suffix}"


async def prepare(cluster: EmbeddedCluster, topic: str, group: str, records: int) -> None:
    cluster.create_topic(topic, partitions=1)
    async with Admin(cluster.bootstrap) as admin:
        results = await admin.incremental_alter_configs(
            {ConfigResource.group(group): {"share.auto.offset.reset": "earliest"}}
        )
        assert all(r.error is None for r in results.values()), results
    async with Producer(cluster.bootstrap) as producer:
        for i in range(records):
            await producer.send(topic, b"job-%d" % i, b"%d" % i)
        await producer.flush()


def share_consumer(cluster: EmbeddedCluster, topic: str, group: str) -> ShareConsumer:
    return ShareConsumer(cluster.bootstrap, group_id=group, topics=[topic], acknowledgement_mode="explicit")


async def test_a_slow_handler_times_out_and_is_dead_lettered(kafka_cluster: EmbeddedCluster) -> None:
    topic, group = names()
    dlt = topic + ".dlt"
    total = 12
    await prepare(kafka_cluster, topic, group, total)
    kafka_cluster.create_topic(dlt, partitions=1)
    slow = {4, 9}
    calls: Counter[int] = Counter()
    cancelled: Counter[int] = Counter()
    done: set[int] = set()

    async def handle(record: ShareRecord) -> None:
        calls[record.offset] += 1
        if record.offset in slow:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled[record.offset] += 1
                raise
        done.add(record.offset)

    async with (
        share_consumer(kafka_cluster, topic, group) as consumer,
        Producer(kafka_cluster.bootstrap) as producer,
    ):
        workers = ShareWorkers(
            consumer,
            handle,
            concurrency=4,
            max_attempts=2,
            dead_letter_topic=dlt,
            producer=producer,
            handler_timeout_ms=300,
        )
        runner = asyncio.create_task(workers.run())
        await eventually(
            lambda: len(done) == total - len(slow) and workers.stats.dead_lettered == len(slow),
            limit=60,
            what="every record accepted or dead-lettered",
        )
        workers.stop()
        await runner
        await consumer.commit()
    assert cancelled == dict.fromkeys(slow, 2) and workers.stats.timeouts == 2 * len(slow)
    assert workers.stats.rejected == len(slow) and workers.stats.accepted == total - len(slow)
    async with Consumer(kafka_cluster.bootstrap, topics=[dlt], auto_offset_reset="earliest") as reader:
        letters: list[Any] = []
        deadline = asyncio.get_running_loop().time() + 20
        while len(letters) < len(slow) and asyncio.get_running_loop().time() < deadline:
            for batch in (await reader.getmany(timeout_ms=300)).values():
                letters += batch
    by_offset = {int(dict(r.headers)["dlt.offset"] or b"-1"): r for r in letters}
    assert set(by_offset) == slow
    for offset, letter in by_offset.items():
        headers = dict(letter.headers)
        assert letter.value == b"job-%d" % offset
        assert headers["dlt.error.type"] == b"HandlerTimeoutError"
        assert headers["dlt.error"] == b"handler timed out after 300 ms and was cancelled"
        assert headers["dlt.attempts"] == b"2" and headers["dlt.delivery.count"] == b"2"
        assert headers["dlt.topic"] == topic.encode() and headers["dlt.partition"] == b"0"


async def test_threshold_pause_releases_and_stops_polling_until_resumed(
    kafka_cluster: EmbeddedCluster,
) -> None:
    topic, group = names()
    total = 30
    await prepare(kafka_cluster, topic, group, total)
    failing = {5, 6, 7}
    broken = True
    reports: list[FailureReport] = []
    done: set[int] = set()
    calls_while_paused = 0

    async def handle(record: ShareRecord) -> None:
        nonlocal calls_while_paused
        if reports and broken:
            calls_while_paused += 1
        if record.offset in failing and broken:
            raise ConnectionError("downstream down")
        done.add(record.offset)

    def on_threshold(report: FailureReport) -> str:
        reports.append(report)
        return "pause"

    async with share_consumer(kafka_cluster, topic, group) as consumer:
        workers = ShareWorkers(
            consumer,
            handle,
            concurrency=1,
            max_in_flight=1,
            failure_threshold=2,
            on_failure_threshold=on_threshold,
        )
        runner = asyncio.create_task(workers.run())
        try:
            await eventually(lambda: workers.paused, limit=30, what="the pause")
            await eventually(lambda: workers.in_flight == 0, what="the records held released")
            await asyncio.sleep(0.5)  # several poll timeouts: nothing is polled while paused
            assert calls_while_paused == 0 and workers.paused
            assert len(reports) == 1
            (report,) = reports
            assert report.partition is None and report.record.offset in failing
            assert report.counts.errors == 3 and report.counts.timeouts == 0
            assert isinstance(report.error, ConnectionError)
            broken = False
            workers.resume()
            await eventually(lambda: len(done) == total, limit=30, what="every record after the resume")
        finally:
            workers.stop()
            await runner
        await consumer.commit()
    assert workers.stats.accepted == total and workers.stats.rejected == 0
    assert workers.stats.released == 3 and workers.stats.threshold_reports == 1


@pytest.mark.parametrize("callback", ["stop", "none"])
async def test_threshold_stop_releases_the_record_and_raises(
    kafka_cluster: EmbeddedCluster, callback: str
) -> None:
    topic, group = names()
    total = 10
    await prepare(kafka_cluster, topic, group, total)
    done: set[int] = set()
    reports: list[FailureReport] = []

    async def handle(record: ShareRecord) -> None:
        if record.offset == 3:
            await asyncio.sleep(60)
        done.add(record.offset)

    def on_threshold(report: FailureReport) -> str:
        reports.append(report)
        return "stop"

    async with share_consumer(kafka_cluster, topic, group) as consumer:
        workers = ShareWorkers(
            consumer,
            handle,
            concurrency=1,
            max_in_flight=1,
            handler_timeout_ms=200,
            failure_threshold=1,
            on_failure_threshold=on_threshold if callback == "stop" else None,
        )
        with pytest.raises(FailureThresholdError) as info:
            await asyncio.wait_for(workers.run(), 60)
        await consumer.commit()
    assert info.value.report.counts.timeouts == 2 and info.value.report.record.offset == 3
    assert reports == ([info.value.report] if callback == "stop" else [])
    assert workers.stats.rejected == 0 and 3 not in done
    # Released, not rejected: the next member gets it again.
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as survivor:
        again: list[ShareRecord] = []
        deadline = asyncio.get_running_loop().time() + 30
        while not any(r.offset == 3 for r in again) and asyncio.get_running_loop().time() < deadline:
            again += await survivor.poll(timeout_ms=300)
    (record,) = [r for r in again if r.offset == 3]
    # Two deliveries timed out here (the consumer may have fetched it once more before
    # it closed and released its buffer).
    assert record.delivery_count >= 3
