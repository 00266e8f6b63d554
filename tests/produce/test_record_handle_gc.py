"""Record handles and the garbage collector (produce/_handles.py, produce/_chandle.c).

A handle made by ``enqueue`` is not tracked by the collector until it gets its first
done-callback (with the C extension; the pure-Python twin's handles are tracked from the
start). The tests pin down what that must not change: results, cancellation, and that a
cycle through a handle's callbacks is still collected.
"""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce import Producer, RecordFuture, RecordMetadata, _handles
from aiokafka_lite.produce.batch import ProducerBatch, new_handle, track_handle
from aiokafka_lite.wire.records import HAS_C_EXTENSION, BatchBuilder

C_HANDLES = new_handle is not _handles._py_new


def make_batch(n: int) -> ProducerBatch:
    b = ProducerBatch(TopicPartition("events", 2), BatchBuilder(max_batch_size=1 << 20), 1 << 20, 0, 0.0)
    assert b.builder is not None
    for i in range(n):
        b.builder.append(7000 + i, None, b"v", ())
        b.timestamps.append(7000 + i)
    return b


class Marker:
    """Something a callback can hold, whose death a weakref can see."""


def test_the_c_handles_are_in_use_whenever_the_extension_is() -> None:
    # CI builds the extensions (AIOKAFKA_LITE_REQUIRE_EXTENSIONS=1): both or neither.
    assert C_HANDLES == HAS_C_EXTENSION


@pytest.mark.parametrize("make", [new_handle, _handles._py_new], ids=["active", "pure-python"])
async def test_both_ways_of_making_a_handle_give_the_same_handle(
    make: _handles.NewHandle[RecordFuture],
) -> None:
    batch = make_batch(3)
    fut = make(RecordFuture, batch, 1)
    assert type(fut) is RecordFuture and asyncio.isfuture(fut)
    assert (fut._batch, fut._index, fut._callbacks, fut._cancelled) == (batch, 1, None, False)
    assert fut._cancel_message is None and fut._asyncio_future_blocking is False
    assert not fut.done()
    batch.complete(500, -1)
    assert fut.result() == RecordMetadata("events", 2, 501, 7001)
    assert await fut == RecordMetadata("events", 2, 501, 7001)


@pytest.mark.skipif(not C_HANDLES, reason="the pure-Python handles are tracked from the start")
async def test_a_handle_is_untracked_until_its_first_callback() -> None:
    batch = make_batch(2)
    fut = new_handle(RecordFuture, batch, 0)
    assert not gc.is_tracked(fut)
    fut.add_done_callback(lambda f: None)
    assert gc.is_tracked(fut)
    track_handle(fut)  # idempotent
    assert gc.is_tracked(fut)
    done = new_handle(RecordFuture, batch, 1)
    batch.complete(10, -1)
    assert not gc.is_tracked(done)
    seen: list[RecordMetadata] = []
    done.add_done_callback(lambda f: seen.append(f.result()))  # on a completed record
    assert gc.is_tracked(done)
    await asyncio.sleep(0)
    assert seen == [RecordMetadata("events", 2, 11, 7001)]
    with pytest.raises(TypeError, match="subclass without slots"):
        new_handle(Marker, batch, 0)  # type: ignore[arg-type,type-var]


@pytest.mark.parametrize("completes", [True, False], ids=["batch-completes", "batch-abandoned"])
async def test_a_cycle_through_a_handles_callback_is_collected(completes: bool) -> None:
    batch = make_batch(1)
    marker = Marker()
    alive = weakref.ref(marker)
    fut = new_handle(RecordFuture, batch, 0)

    def callback(f: RecordFuture, marker: Marker = marker, fut: RecordFuture = fut) -> None:
        pass  # holds the handle it is registered on: handle -> callbacks -> callback -> handle

    fut.add_done_callback(callback)  # and the batch -> its watchers -> the handle
    del fut, callback, marker
    if completes:
        batch.fail(RuntimeError("gone"))  # the callback runs and is dropped
        await asyncio.sleep(0)
    del batch  # abandoned: only the collector can free the cycle, if it sees the handle
    gc.collect()
    assert alive() is None


async def test_enqueued_handles_are_untracked_and_deliver(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("handles", 2)
    async with Producer(kafka_cluster.bootstrap, linger_ms=5) as producer:
        futs = [await producer.enqueue("handles", b"%d" % i) for i in range(300)]
        futs.append(await producer.enqueue("handles", b"keyed", key=b"k", headers=[("h", b"1")]))
        if C_HANDLES:
            assert not any(gc.is_tracked(f) for f in futs)  # fast path and general path alike
        gathered = await asyncio.gather(*futs[:10])  # gather adds callbacks: tracked from there
        if C_HANDLES:
            assert all(gc.is_tracked(f) for f in futs[:10])
        await producer.wait_all(futs)
        offsets = {(f.result().partition, f.result().offset) for f in futs}
        assert len(offsets) == 301
        assert gathered == [f.result() for f in futs[:10]]
