"""The Producer on asyncio and on trio: the same sends, futures, flush and shutdown."""

from __future__ import annotations

import anyio
import pytest

from aiokafka_lite import Admin, NewTopic, Producer
from aiokafka_lite.admin import OffsetSpec
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running

pytestmark = pytest.mark.anyio


async def _end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    async with Admin(bootstrap, **FAST) as admin:
        found = await admin.list_offsets({TP(topic, p): OffsetSpec.LATEST for p in range(partitions)})
        return sum(r.offset for r in found.raise_errors().values())


async def _topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    async with Admin(bootstrap, **FAST) as admin:
        (
            await admin.create_topics([NewTopic(name, partitions=partitions, replication_factor=1)])
        ).raise_errors()


async def test_send_enqueue_and_batch(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"prod-{anyio_backend}"
    await _topic(bootstrap, topic)
    async with Producer(bootstrap, linger_ms=2, **FAST) as producer:
        md = await producer.send(topic, b"one", key=b"k")
        assert md.topic == topic and md.offset >= 0
        futures = [await producer.enqueue(topic, f"v{i}".encode()) for i in range(500)]
        await producer.flush()
        offsets = {(f.result().partition, f.result().offset) for f in futures}
        assert len(offsets) == 500  # every record its own offset
        # Awaiting the handles themselves (asyncio's future protocol, and trio's await).
        assert (await futures[-1]).offset == futures[-1].result().offset
        more = [await producer.enqueue(topic, b"x") for _ in range(100)]
        await producer.wait_all(more)
        results = await producer.send_batch(topic, [b"b"] * 50)
        assert len(results) == 50
        # Many concurrent senders.
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(producer.send, topic, b"c")
        # Requests reached the broker in the order they were made: no sequence was
        # refused as out of order (trio starts new tasks in no fixed order).
        assert producer.client.errors_by_type == {}
        assert producer._sender.batches_retried == 0
    assert await _end_offsets(bootstrap, topic, 3) == 1 + 500 + 100 + 50 + 50


async def test_awaiting_a_pending_record(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"pending-{anyio_backend}"
    await _topic(bootstrap, topic, 1)
    async with Producer(bootstrap, linger_ms=50, **FAST) as producer:
        fut = await producer.enqueue(topic, b"later")
        assert not fut.done()
        md = await fut  # waits out the linger
        assert md.offset == 0


async def test_cancelled_send_loses_no_buffered_record(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    """A caller whose scope is cancelled while inside send() stops waiting; the record it
    buffered is still delivered (the Java client's semantics: a send is not withdrawn)."""
    bootstrap = threaded_cluster.bootstrap
    topic = f"cancel-{anyio_backend}"
    await _topic(bootstrap, topic, 1)
    # The linger keeps the record buffered until flush(), so the cancel below lands while
    # send() waits for the acknowledgement, whatever the machine's load.
    async with Producer(bootstrap, linger_ms=60_000, delivery_timeout_ms=300_000, **FAST) as producer:
        send_scope = anyio.CancelScope()
        returned: list[object] = []

        async def send_then_get_cancelled() -> None:
            with send_scope:
                returned.append(await producer.send(topic, b"kept"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(send_then_get_cancelled)
            # (no event tells that a record is buffered: poll the producer's own count)
            with anyio.fail_after(30):
                while producer.metrics()["batches_incomplete"] == 0:  # noqa: ASYNC110
                    await anyio.sleep(0.001)
            send_scope.cancel()
        assert send_scope.cancelled_caught and returned == []
        await producer.flush()
    assert await _end_offsets(bootstrap, topic, 1) == 1


async def test_close_with_records_in_flight(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    """close() delivers what is buffered, then no task of the producer or its client runs;
    abort() fails what is left with ProducerClosedError."""
    bootstrap = threaded_cluster.bootstrap
    topic = f"close-{anyio_backend}"
    await _topic(bootstrap, topic, 3)
    unretrieved = UnretrievedErrors()
    producer = Producer(bootstrap, linger_ms=20, **FAST)
    await producer.start()
    futures = [await producer.enqueue(topic, b"v") for _ in range(300)]
    await producer.close()
    assert all(f.done() and f.exception() is None for f in futures)
    assert producer.client._owner is None  # the client's task group is left
    assert await _end_offsets(bootstrap, topic, 3) == 300

    aborted = Producer(bootstrap, linger_ms=10_000, **FAST)
    await aborted.start()
    pending = [await aborted.enqueue(topic, b"w") for _ in range(10)]
    await aborted.abort()
    assert all(isinstance(f.exception(), E.ProducerClosedError) for f in pending)
    assert aborted.client._owner is None
    assert client_tasks_running() == []
    assert unretrieved.check() == []
