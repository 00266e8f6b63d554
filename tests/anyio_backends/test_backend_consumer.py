"""The Consumer on asyncio and on trio: async for, getmany, a classic group, shutdown."""

from __future__ import annotations

import anyio
import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.structs import TopicPartition as TP
from aiokafka_lite.testing.threaded import ThreadedCluster

from .conftest import FAST, UnretrievedErrors, client_tasks_running
from .testlib import fill_topic

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
