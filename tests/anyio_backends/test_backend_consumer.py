"""The Consumer on asyncio and on trio: async for, getmany, a classic group, shutdown."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from _support.fairness import ticking, turn_gaps

from aiokafka_lite import Consumer
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running
from anyio_backends.testlib import fill_topic

pytestmark = pytest.mark.anyio


async def test_async_for_reads_everything(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"iter-{anyio_backend}"
    sent = await fill_topic(bootstrap, topic, 3, 600)
    seen: list[bytes] = []
    async with Consumer(bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([TP(topic, p) for p in range(3)])
        with anyio.fail_after(30):
            async for record in consumer:
                seen.append(record.value)
                if len(seen) == len(sent):
                    break
    assert sorted(seen) == sorted(sent)


async def test_getmany_and_cancelled_caller_loses_nothing(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    """getmany batches; a caller cancelled inside getmany (waiting for more data) loses
    no record that was already buffered: the next getmany returns it."""
    bootstrap = threaded_cluster.bootstrap
    topic = f"many-{anyio_backend}"
    sent = await fill_topic(bootstrap, topic, 2, 400)
    got: list[bytes] = []
    async with Consumer(bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([TP(topic, 0), TP(topic, 1)])
        with anyio.fail_after(30):
            while len(got) < 150:
                batch = await consumer.getmany(timeout_ms=1000, max_records=50)
                assert sum(len(v) for v in batch.values()) <= 50
                got += [r.value for recs in batch.values() for r in recs]
        for _ in range(5):
            # Cancelled at once: it may return nothing, but must not swallow records.
            with anyio.CancelScope() as scope:
                scope.cancel()
                batch = await consumer.getmany(timeout_ms=1000, max_records=7)
                got += [r.value for recs in batch.values() for r in recs]
        with anyio.fail_after(30):
            while len(got) < len(sent):
                batch = await consumer.getmany(timeout_ms=1000)
                got += [r.value for recs in batch.values() for r in recs]
    assert sorted(got) == sorted(sent)  # each record exactly once


async def test_close_while_fetching_leaves_no_task(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"closing-{anyio_backend}"
    await fill_topic(bootstrap, topic, 3, 50)
    unretrieved = UnretrievedErrors()
    consumer = Consumer(bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=5000, **FAST)
    await consumer.start()
    consumer.assign([TP(topic, p) for p in range(3)])
    # Long-polling fetches are in flight (nothing new arrives).
    assert await consumer.getmany(timeout_ms=300) == {}
    await consumer.close()
    assert consumer._client._owner is None
    assert consumer._client.closed
    assert client_tasks_running() == []
    assert unretrieved.check() == []


async def test_async_for_over_buffered_records_lets_other_tasks_run(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    """While ``async for`` serves buffered records to a body that never awaits, another
    task still gets turns (counted in records handed out between its turns: without the
    consumer's own yields it gets none until the buffer is empty)."""
    bootstrap = threaded_cluster.bootstrap
    topic = f"fair-{anyio_backend}"
    n = 100_000
    await fill_topic(bootstrap, topic, 1, n)
    tp = TP(topic, 0)
    big = {
        "max_buffered_bytes": 256 << 20,
        "fetch_max_bytes": 64 << 20,
        "max_partition_fetch_bytes": 64 << 20,
    }
    async with Consumer(bootstrap, auto_offset_reset="earliest", **big, **FAST) as consumer:
        consumer.assign([tp])
        fetcher = consumer.fetcher
        assert fetcher is not None
        with anyio.fail_after(60):  # every record buffered before the loop starts
            while (last := fetcher.buffer.last(tp)) is None or last.next_fetch_offset < n:  # noqa: ASYNC110 - the buffer has no event to wait on
                await anyio.sleep(0.01)
        turns_at: list[int] = []
        async with ticking() as ticker:
            async for record in consumer:
                turns_at.append(ticker.turns)
                if record.offset == n - 1:
                    break
    turns, longest = turn_gaps(turns_at)
    assert turns >= 5
    assert longest < 20_000, longest


async def test_close_refused_from_another_task_on_trio_leaves_the_consumer_usable(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    """On trio a client is closed by the task that started it; a close() from another
    task is refused before anything is closed (it used to half-close the consumer, which
    then corrupted trio's cancel-scope stack). On asyncio any task may close."""
    bootstrap = threaded_cluster.bootstrap
    topic = f"close-other-{anyio_backend}"
    sent = await fill_topic(bootstrap, topic, 1, 50)
    refused: list[Exception] = []
    async with Consumer(bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([TP(topic, 0)])

        async def close_elsewhere() -> None:
            try:
                await consumer.close()
            except Exception as exc:  # what was raised is the assertion
                refused.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(close_elsewhere)
        if anyio_backend == "trio":
            assert [type(e).__name__ for e in refused] == ["IllegalStateError"]
            assert not consumer.closed
            got: list[bytes] = []
            with anyio.fail_after(30):
                while len(got) < len(sent):
                    batch = await consumer.getmany(timeout_ms=1000)
                    got += [r.value for recs in batch.values() for r in recs]
            assert sorted(got) == sorted(sent)
        else:
            assert refused == [] and consumer.closed
