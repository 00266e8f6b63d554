"""The worker pools on asyncio and on trio: OrderedWorkers (a handler timeout skipped,
a failure-threshold pause resumed by its timer, finished offsets committed) and
ShareWorkers (a timed-out record released and redelivered, a pause on failures)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.consume.share import ShareConsumer, ShareRecord
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.processing import ShareWorkers
from aiokafka_lite.processing.failures import FailureReport
from aiokafka_lite.processing.ordered_workers import OrderedWorkers
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running
from anyio_backends.testlib import fill_topic, prepare_share_topic

pytestmark = pytest.mark.anyio


async def _wait_for(condition: object, within_s: float = 30) -> None:
    with anyio.fail_after(within_s):
        while not condition():  # type: ignore[operator]  # noqa: ASYNC110 (a state, not an event)
            await anyio.sleep(0.02)


async def test_ordered_workers_timeout_and_pause(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic, group = f"ow-{anyio_backend}", f"ow-g-{anyio_backend}"
    sent = await fill_topic(bootstrap, topic, 2, 60)
    slow, flaky = f"{topic}-7".encode(), f"{topic}-11".encode()
    calls: dict[bytes, int] = {}
    done: list[bytes] = []
    reports: list[FailureReport] = []
    unretrieved = UnretrievedErrors()

    async def handler(record: object) -> None:
        value: bytes = record.value  # type: ignore[attr-defined]
        calls[value] = calls.get(value, 0) + 1
        if value == slow and calls[value] == 1:
            await anyio.sleep(30)  # cut short by handler_timeout_ms, then retried
        if value == flaky and calls[value] <= 2:
            raise ValueError("flaky")  # retried once, then the threshold pauses the partition
        await anyio.lowlevel.checkpoint()
        done.append(value)

    def on_threshold(report: FailureReport) -> str:
        reports.append(report)
        return "pause"

    async with Consumer(
        bootstrap,
        group_id=group,
        topics=topic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **FAST,
    ) as consumer:
        workers = OrderedWorkers(
            consumer,
            handler,
            concurrency=3,
            on_failure="retry",
            max_retries=None,
            retry_backoff_ms=10,
            handler_timeout_ms=200,
            failure_threshold=1,
            on_failure_threshold=on_threshold,
            failure_pause_ms=300,
            commit_interval_ms=100,
        )
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(workers.run)
                # Every record is done: the slow one on its retry, the flaky one on its
                # third call (after the pause its second failure caused).
                await _wait_for(lambda: len(done) == len(sent))
                workers.stop()
        assert sorted(done) == sorted(sent)  # each record done once
        assert calls[flaky] == 3 and calls[slow] == 2
        assert workers.stats.timeouts == 1
        assert reports and {r.partition for r in reports} <= {TP(topic, 0), TP(topic, 1)}
        assert workers.paused_partitions() == set()  # run's end resumed and forgot them
        # run's end committed every finished record: the committed offsets cover the topic.
        committed = [await consumer.committed(TP(topic, p)) for p in range(2)]
        assert sum(c or 0 for c in committed) == len(sent)
    assert client_tasks_running() == []
    assert unretrieved.check() == []


async def test_share_workers_timeout_releases_and_pause(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic, group = f"sw-{anyio_backend}", f"sw-g-{anyio_backend}"
    sent = await prepare_share_topic(bootstrap, topic, group, 1, 40)
    slow = f"{topic}-5".encode()
    calls: dict[bytes, list[int]] = {}
    accepted: list[bytes] = []
    paused_seen: list[bool] = []
    unretrieved = UnretrievedErrors()

    async def handler(record: ShareRecord) -> None:
        calls.setdefault(record.value, []).append(record.delivery_count)
        if record.value == slow and record.delivery_count == 1:
            await anyio.sleep(30)  # cut short by handler_timeout_ms: released, delivered again
        accepted.append(record.value)

    def on_threshold(report: FailureReport) -> str:
        return "pause"

    async with ShareConsumer(
        bootstrap, group_id=group, topics=topic, acknowledgement_mode="explicit", **FAST
    ) as consumer:
        workers = ShareWorkers(
            consumer,
            handler,
            concurrency=4,
            poll_timeout_ms=100,
            handler_timeout_ms=200,
            failure_threshold=0,
            on_failure_threshold=on_threshold,
            failure_pause_ms=300,
        )
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(workers.run)

                async def watch_pause() -> None:
                    while not workers.paused:  # noqa: ASYNC110 (a state, not an event)
                        await anyio.sleep(0.01)
                    paused_seen.append(True)

                tg.start_soon(watch_pause)
                await _wait_for(lambda: set(accepted) == sent)
                workers.stop()
        assert workers.stats.timeouts == 1
        assert workers.stats.threshold_reports == 1
        assert paused_seen == [True] and not workers.paused  # resumed by its timer
        assert calls[slow] == [1, 2]
        assert sorted(accepted) == sorted(sent)
    assert client_tasks_running() == []
    assert unretrieved.check() == []
