"""RecordFuture under asyncio's own machinery (gather, wait, as_completed, wait_for,
shield, TaskGroup, cancellation, callbacks) and Producer.wait_all."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from producer_testlib import read_topic

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce import (
    DeliveryFailedError,
    Producer,
    RecordFuture,
    RecordMetadata,
)
from aiokafka_lite.produce.batch import ProducerBatch, SendWakeup
from aiokafka_lite.wire.messages import ProduceRequest
from aiokafka_lite.wire.records import BatchBuilder


def make_batch(n: int, topic: str = "events", partition: int = 3) -> ProducerBatch:
    b = ProducerBatch(TopicPartition(topic, partition), BatchBuilder(max_batch_size=1 << 20), 1 << 20, 0, 0.0)
    assert b.builder is not None
    for i in range(n):
        b.builder.append(5000 + i, None, b"v", ())
        b.timestamps.append(5000 + i)
    return b


def handles(batch: ProducerBatch) -> list[RecordFuture]:
    return [RecordFuture(batch, i) for i in range(len(batch.timestamps))]


async def test_gather_takes_record_futures_as_they_are() -> None:
    b1, b2 = make_batch(3), make_batch(2, partition=4)
    futs = [*handles(b1), *handles(b2)]
    assert all(asyncio.isfuture(f) for f in futs)
    tasks_before = len(asyncio.all_tasks())
    gathered = asyncio.gather(*futs)
    assert len(asyncio.all_tasks()) == tasks_before  # no Task wraps a record future
    b2.complete(40, -1)
    await asyncio.sleep(0)
    assert not gathered.done()
    b1.complete(10, -1)
    assert await gathered == [
        RecordMetadata("events", 3, 10, 5000),
        RecordMetadata("events", 3, 11, 5001),
        RecordMetadata("events", 3, 12, 5002),
        RecordMetadata("events", 4, 40, 5000),
        RecordMetadata("events", 4, 41, 5001),
    ]


async def test_gather_on_futures_already_done_and_failed() -> None:
    ok, bad = make_batch(2), make_batch(2, partition=5)
    ok.complete(0, -1)
    err = E.NotEnoughReplicasError("events-5")
    bad.fail(err)
    results = await asyncio.gather(*handles(ok), *handles(bad), return_exceptions=True)
    assert results[:2] == [RecordMetadata("events", 3, 0, 5000), RecordMetadata("events", 3, 1, 5001)]
    assert results[2] is err and results[3] is err
    with pytest.raises(E.NotEnoughReplicasError):
        await asyncio.gather(*handles(ok), *handles(bad))


async def test_wait_first_completed_then_all() -> None:
    b1, b2 = make_batch(2), make_batch(1, partition=1)
    futs = [*handles(b1), *handles(b2)]
    waiter = asyncio.ensure_future(asyncio.wait(futs, return_when=asyncio.FIRST_COMPLETED))
    await asyncio.sleep(0)
    b2.complete(7, -1)
    done, pending = await waiter
    assert done == {futs[2]} and pending == set(futs[:2])
    # asyncio.wait took its callbacks back off the pending handles
    assert all(not f._callbacks for f in pending)
    b1.complete(0, -1)
    done, pending = await asyncio.wait(futs)
    assert done == set(futs) and not pending


async def test_wait_with_timeout_leaves_records_pending() -> None:
    b = make_batch(2)
    futs = handles(b)
    done, pending = await asyncio.wait(futs, timeout=0.01)
    assert not done and pending == set(futs)
    assert not any(f.done() for f in futs)
    b.complete(3, -1)
    assert [(await f).offset for f in futs] == [3, 4]


async def test_as_completed_yields_in_completion_order() -> None:
    b1, b2 = make_batch(1), make_batch(1, partition=1)
    f1, f2 = RecordFuture(b1, 0), RecordFuture(b2, 0)
    order = []

    async def collect() -> None:
        for next_done in asyncio.as_completed([f1, f2]):
            order.append((await next_done).partition)

    task = asyncio.ensure_future(collect())
    await asyncio.sleep(0)
    b2.complete(0, -1)
    await asyncio.sleep(0.001)
    b1.complete(0, -1)
    await task
    assert order == [1, 3]


async def test_await_one_by_one_and_in_task_group() -> None:
    b = make_batch(4)
    futs = handles(b)
    results: list[RecordMetadata] = []

    async def deliver(f: RecordFuture) -> None:
        results.append(await f)

    async def complete_later() -> None:
        await asyncio.sleep(0.001)
        b.complete(100, 12345)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(complete_later())
        for f in futs:
            tg.create_task(deliver(f))
    assert sorted(md.offset for md in results) == [100, 101, 102, 103]
    assert {md.timestamp_ms for md in results} == {12345}
    assert [(await f).offset for f in futs] == [100, 101, 102, 103]


async def test_wait_for_timeout_cancels_the_handle_not_the_record() -> None:
    b = make_batch(1)
    fut = RecordFuture(b, 0)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(fut, 0.01)
    assert fut.cancelled() and fut.done()
    with pytest.raises(asyncio.CancelledError):
        fut.result()
    assert fut.cancel() is False  # already cancelled
    b.complete(9, -1)
    assert fut.cancelled()  # the handle stays cancelled...
    assert (await RecordFuture(b, 0)).offset == 9  # ...the record was delivered


async def test_cancelling_the_awaiting_task_cancels_that_handle_only() -> None:
    b = make_batch(1)
    awaited, other = RecordFuture(b, 0), RecordFuture(b, 0)
    task = asyncio.ensure_future(awaited)
    await asyncio.sleep(0)
    task.cancel("stop")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert awaited.cancelled() and not other.done()
    b.complete(1, -1)
    assert (await other).offset == 1


async def test_cancelled_gather_cancels_its_children() -> None:
    b = make_batch(2)
    futs = handles(b)
    gathered = asyncio.gather(*futs)
    await asyncio.sleep(0)
    gathered.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gathered
    assert all(f.cancelled() for f in futs)


async def test_shield_keeps_the_handle_alive() -> None:
    b = make_batch(1)
    fut = RecordFuture(b, 0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await asyncio.shield(fut)
    assert not fut.done()
    b.complete(5, -1)
    assert (await fut).offset == 5


async def test_callbacks_run_from_the_loop_in_their_context_and_errors_are_reported() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    try:
        await _check_callbacks(reported)
    finally:
        loop.set_exception_handler(None)


async def _check_callbacks(reported: list[dict[str, object]]) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[tuple[int, str]] = []
    b = make_batch(2)
    f0, f1 = handles(b)

    def boom(_f: RecordFuture) -> None:
        raise RuntimeError("callback failed")

    var.set("registration")
    f0.add_done_callback(lambda f: seen.append((f._index, var.get())))
    f0.add_done_callback(boom)
    explicit = contextvars.Context()
    f1.add_done_callback(lambda f: seen.append((f._index, var.get())), context=explicit)
    f1.add_done_callback(boom)
    assert f1.remove_done_callback(boom) == 1
    var.set("completion")
    b.complete(0, -1)
    assert seen == []  # never inside the completing code
    await asyncio.sleep(0)
    assert seen == [(0, "registration"), (1, "unset")]
    assert len(reported) == 1 and isinstance(reported[0]["exception"], RuntimeError)
    assert reported[0]["future"] is f0
    # added once done: scheduled as well, not run on the spot
    f1.add_done_callback(lambda f: seen.append((f._index, "late")))
    assert seen[-1] != (1, "late")
    await asyncio.sleep(0)
    assert seen[-1] == (1, "late")


async def test_as_future_mirrors_outcome_and_cancellation() -> None:
    b = make_batch(1)
    fut = RecordFuture(b, 0)
    real = fut.as_future()
    fut.cancel()
    await asyncio.sleep(0)
    assert real.cancelled()
    failed = make_batch(1)
    failed.fail(E.KafkaTimeoutError("x"))
    with pytest.raises(E.KafkaTimeoutError):
        await RecordFuture(failed, 0).as_future()


async def test_split_batch_handles_follow_their_records() -> None:
    parent = make_batch(4)
    first, second = make_batch(2), make_batch(2)
    parent.split_into([(first, 0), (second, 2)])
    futs = handles(parent)
    gathered = asyncio.gather(*futs, return_exceptions=True)
    first.complete(50, -1)
    err = E.RecordListTooLargeError("events-3")
    second.fail(err)
    assert await gathered == [
        RecordMetadata("events", 3, 50, 5000),
        RecordMetadata("events", 3, 51, 5001),
        err,
        err,
    ]


async def test_wait_all_on_split_batches_reports_only_the_records_that_failed() -> None:
    producer = Producer("127.0.0.1:9")  # never started: wait_all only looks at the records
    parent = make_batch(4)
    first, second = make_batch(2), make_batch(2)
    parent.split_into([(first, 0), (second, 2)])
    futs = handles(parent)
    first.complete(50, -1)
    second.fail(E.RecordListTooLargeError("events-3"))
    await producer.wait_all(futs[:2])  # the part they are in was delivered
    with pytest.raises(DeliveryFailedError) as info:
        await producer.wait_all(futs)
    assert [(f.position, f.partition) for f in info.value.failures] == [(2, 3), (3, 3)]
    assert "2 of 4 record(s) not delivered: events-3: RecordListTooLargeError" in str(info.value)


async def test_send_wakeups_wake_every_waiting_task_and_cancel_only_one() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    try:
        b = make_batch(3)

        async def send_like(index: int) -> RecordMetadata:
            await SendWakeup(b)
            return b.metadata(index)

        tasks = [asyncio.ensure_future(send_like(i)) for i in range(3)]
        await asyncio.sleep(0)
        tasks[1].cancel()
        await asyncio.sleep(0)
        assert tasks[1].cancelled() and not tasks[0].done() and not tasks[2].done()
        b.complete(20, -1)
        assert [md.offset for md in await asyncio.gather(tasks[0], tasks[2])] == [20, 22]
        await asyncio.sleep(0)
        assert reported == []  # the cancelled task was not woken a second time
        await SendWakeup(b)  # done already: no suspension
    finally:
        loop.set_exception_handler(None)


# -- against a broker ---------------------------------------------------------------------


async def test_enqueue_then_gather_wait_and_as_completed(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("gather", 3)
    async with Producer(kafka_cluster.bootstrap, linger_ms=5, batch_size=2048) as producer:
        values = [b"%05d" % i for i in range(3000)]
        futs = [await producer.enqueue("gather", v) for v in values]
        await producer.flush()
        results = await asyncio.gather(*futs)
        done, pending = await asyncio.wait(futs)
        assert len(done) == len(futs) and not pending
        via_as_completed = [await next_done for next_done in asyncio.as_completed(futs[:50])]
        assert sorted(via_as_completed) == sorted(results[:50])
        await producer.wait_all(futs)
    records = await read_topic(kafka_cluster.bootstrap, "gather", 3)
    where = {(md.partition, md.offset) for md in results}
    assert len(where) == 3000
    for md, value in zip(results, values, strict=True):
        assert md.topic == "gather"
        assert records[md.partition][md.offset].value == value


async def test_wait_all_returns_once_everything_is_delivered(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("all", 2)
    async with Producer(kafka_cluster.bootstrap, linger_ms=20) as producer:
        futs = [await producer.enqueue("all", b"%d" % i, key=b"k%d" % (i % 5)) for i in range(500)]
        assert not all(f.done() for f in futs)
        await producer.wait_all(futs)  # no flush needed: waits out linger
        assert all(f.done() and f.exception() is None for f in futs)
        by_partition: dict[int, list[int]] = {}
        for f in futs:
            by_partition.setdefault(f.partition, []).append(f.result().offset)
        for offsets in by_partition.values():
            assert offsets == list(range(len(offsets)))
        await producer.wait_all([])  # nothing to wait for
        await producer.wait_all(f for f in futs)  # any iterable
        with pytest.raises(TypeError, match=r"RecordFuture returned by Producer\.enqueue"):
            await producer.wait_all([futs[0], futs[0].as_future()])  # type: ignore[list-item]


@pytest.mark.kafka_embedded
async def test_wait_all_names_every_failed_record(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("ok", 1)
    kafka_cluster.create_topic("denied", 2)
    async with Producer(kafka_cluster.bootstrap, linger_ms=0) as producer:
        await producer.send("ok", b"warm-up")
        await producer.send("denied", b"warm-up", partition=0)
        await producer.send("denied", b"warm-up", partition=1)
        futs = [await producer.enqueue("ok", b"a")]
        await producer.flush()
        kafka_cluster.inject_error(ProduceRequest, E.TopicAuthorizationFailedError.code, count=1)
        futs.append(await producer.enqueue("denied", b"b", partition=1))
        await asyncio.wait(futs[1:])  # its own request, answered with the injected error
        futs.append(await producer.enqueue("ok", b"c"))
        futs.append(await producer.enqueue("denied", b"d", partition=0))
        with pytest.raises(DeliveryFailedError) as info:
            await producer.wait_all(futs)
    group = info.value
    assert isinstance(group, ExceptionGroup)
    assert [(f.position, f.topic, f.partition, type(f.error)) for f in group.failures] == [
        (1, "denied", 1, E.TopicAuthorizationFailedError)
    ]
    assert group.exceptions == (group.failures[0].error,)
    assert "1 of 4 record(s) not delivered" in str(group)
    assert "denied-1: TopicAuthorizationFailedError" in str(group)
    assert [f.result().offset for f in (futs[0], futs[2], futs[3])] == [1, 2, 1]
    # except* matches the delivery errors inside
    try:
        raise group
    except* E.TopicAuthorizationFailedError as matched:
        assert isinstance(matched, DeliveryFailedError)
        assert [f.position for f in matched.failures] == [1]


@pytest.mark.kafka_embedded
async def test_wait_all_failures_across_batches_and_errors(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("multi", 3)
    async with Producer(
        kafka_cluster.bootstrap,
        linger_ms=10,
        delivery_timeout_ms=300,
        request_timeout_ms=200,
        retry_backoff_ms=1000,  # the retry would come after the deadline: records expire queued
        retry_backoff_max_ms=1000,
    ) as producer:
        for p in range(3):
            await producer.send("multi", b"warm-up", partition=p)
        # Every produce is answered with NOT_ENOUGH_REPLICAS: all records expire, each
        # batch with its own timeout error naming its partition.
        kafka_cluster.inject_error(ProduceRequest, E.NotEnoughReplicasError.code, count=None)
        futs = [await producer.enqueue("multi", b"x", partition=i % 3) for i in range(9)]
        with pytest.raises(DeliveryFailedError) as info:
            await producer.wait_all(futs)
        kafka_cluster.clear_faults()
    group = info.value
    assert [(f.position, f.partition) for f in group.failures] == [(i, i % 3) for i in range(9)]
    assert all(isinstance(f.error, E.KafkaTimeoutError) for f in group.failures)
    assert len(group.exceptions) == 3
    for exc in group.exceptions:
        assert isinstance(exc.__cause__, E.NotEnoughReplicasError)
    for p in range(3):
        assert f"multi-{p}: KafkaTimeoutError" in str(group)
        assert str(group).count(f"multi-{p}: ") == 1
    assert "(3 records)" in str(group)


@pytest.mark.kafka_embedded
async def test_wait_all_timeout(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("slow", 1)
    async with Producer(kafka_cluster.bootstrap, linger_ms=0) as producer:
        await producer.send("slow", b"warm-up")
        kafka_cluster.add_latency(ProduceRequest, 0.5, count=1)
        futs = [await producer.enqueue("slow", b"v")]
        with pytest.raises(E.KafkaTimeoutError, match="1 batch"):
            await producer.wait_all(futs, timeout=0.05)
        await producer.wait_all(futs)
        assert futs[0].result().offset == 1
