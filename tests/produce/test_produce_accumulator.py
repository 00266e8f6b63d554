"""RecordAccumulator and BufferPool: ready/drain/retry/expiry rules, memory bounds."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite.core.errors import KafkaTimeoutError, ProducerClosedError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce.accumulator import BATCH_OVERHEAD, BufferPool, RecordAccumulator
from aiokafka_lite.produce.batch import ProducerBatch, RecordFuture
from aiokafka_lite.produce.sequencing import IdempotenceManager
from aiokafka_lite.wire.records import Compression, decode_batches

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TP2 = TopicPartition("t", 2)


def make_acc(**kw: object) -> RecordAccumulator:
    opts: dict[str, object] = {"batch_size": 1000, "linger_ms": 10, "delivery_timeout_ms": 1000}
    opts.update(kw)
    return RecordAccumulator(**opts)  # type: ignore[arg-type]


def add(
    acc: RecordAccumulator, tp: TopicPartition, n: int, now: float = 0.0, leader: int = 1
) -> ProducerBatch:
    """Append ``n`` 10-byte records to a fresh batch on ``tp``."""
    q = acc.queue(tp)
    q.leader = leader
    limit = acc.batch_limit(tp.topic, 40)
    assert acc.pool.try_allocate(limit)
    batch = acc.new_batch(q, limit, limit, now)
    assert batch.builder is not None
    for i in range(n):
        assert batch.builder.append(1000 + i, None, b"v%09d" % i, ())
        batch.timestamps.append(1000 + i)
    return batch


# -- buffer pool -------------------------------------------------------------------------


async def test_pool_blocks_and_serves_waiters_in_order() -> None:
    pool = BufferPool(100)
    assert pool.try_allocate(80)
    order: list[str] = []

    async def want(name: str, size: int) -> None:
        await pool.allocate(size, 5000)
        order.append(name)

    big = asyncio.create_task(want("big", 60))
    await asyncio.sleep(0)
    small = asyncio.create_task(want("small", 10))  # would fit now, but must queue behind "big"
    await asyncio.sleep(0.01)
    assert order == [] and pool.available == 20
    pool.release(80)
    await asyncio.gather(big, small)
    assert order == ["big", "small"]
    assert pool.available == 30


async def test_pool_timeout_raises_and_leaks_nothing() -> None:
    pool = BufferPool(100)
    assert pool.try_allocate(100)
    with pytest.raises(KafkaTimeoutError, match="max_block_ms"):
        await pool.allocate(50, 20)
    assert not pool.has_waiters
    pool.release(100)
    assert pool.available == 100


async def test_pool_close_fails_waiters() -> None:
    pool = BufferPool(10)
    assert pool.try_allocate(10)
    task = asyncio.create_task(pool.allocate(5, 5000))
    await asyncio.sleep(0)
    pool.close()
    with pytest.raises(ProducerClosedError):
        await task
    with pytest.raises(ProducerClosedError):
        await pool.allocate(1, 10)


async def test_pool_cancelled_waiter_does_not_block_others() -> None:
    pool = BufferPool(100)
    assert pool.try_allocate(100)
    first = asyncio.create_task(pool.allocate(90, 5000))
    await asyncio.sleep(0)
    second = asyncio.create_task(pool.allocate(10, 5000))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    pool.release(10)
    await asyncio.wait_for(second, 1)
    assert pool.available == 0


# -- ready -------------------------------------------------------------------------------


def test_not_ready_until_linger_then_ready() -> None:
    acc = make_acc(linger_ms=10)
    add(acc, TP0, 1, now=0)
    nodes, delay, unknown = acc.ready(4.0)
    assert nodes == set() and delay == pytest.approx(6.0) and not unknown
    nodes, _, _ = acc.ready(10.0)
    assert nodes == {1}


def test_full_batch_flush_close_and_memory_pressure_make_ready() -> None:
    acc = make_acc(linger_ms=1000)
    b = add(acc, TP0, 1)
    assert acc.ready(0)[0] == set()
    b.full = True
    assert acc.ready(0)[0] == {1}
    b.full = False
    acc.flushing = 1
    assert acc.ready(0)[0] == {1}
    acc.flushing = 0
    acc.closing = True
    assert acc.ready(0)[0] == {1}


async def test_memory_waiters_make_batches_ready() -> None:
    acc = make_acc(linger_ms=1000)
    add(acc, TP0, 1)
    task = asyncio.create_task(acc.pool.allocate(acc.pool.total, 5000))
    await asyncio.sleep(0)
    assert acc.ready(0)[0] == {1}
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_unknown_leader_reported_and_node_filter() -> None:
    acc = make_acc(linger_ms=0)
    add(acc, TP0, 1, leader=-1)
    add(acc, TP1, 1, leader=2)
    nodes, _, unknown = acc.ready(0)
    assert nodes == {2} and unknown
    nodes, _, _ = acc.ready(0, node_ready=lambda n: n != 2)
    assert nodes == set()


# -- drain -------------------------------------------------------------------------------


def test_drain_takes_one_batch_per_partition_and_builds_them() -> None:
    acc = make_acc(linger_ms=0)
    a1 = add(acc, TP0, 3)
    a2 = add(acc, TP0, 2)  # second batch on the same partition
    b1 = add(acc, TP1, 1)
    add(acc, TP2, 1, leader=2)  # other broker
    drained = acc.drain(1, 10**6, 0)
    assert set(drained) == {a1, b1}
    for batch in drained:
        assert batch.buffer is not None and batch.attempts == 1
        (decoded,) = decode_batches(batch.buffer)
        assert decoded.record_count == batch.record_count
        assert decoded.producer_id == -1
    assert acc.drain(1, 10**6, 0) == [a2]
    assert set(acc.in_flight) == {a1, b1, a2}


def test_drain_respects_max_bytes_but_sends_at_least_one() -> None:
    acc = make_acc(linger_ms=0)
    add(acc, TP0, 20)
    add(acc, TP1, 20)
    first = acc.drain(1, 10, 0)
    assert len(first) == 1
    assert len(acc.drain(1, 10, 0)) == 1


def test_drain_rotates_start_partition() -> None:
    acc = make_acc(linger_ms=0)
    firsts = []
    for _ in range(3):
        for tp in (TP0, TP1, TP2):
            add(acc, tp, 1)
    for _ in range(3):
        drained = acc.drain(1, 300, 0)  # room for one batch per request
        firsts.append(drained[0].tp)
    assert len(set(firsts)) == 3


def test_drain_assigns_sequences_through_sequencer() -> None:
    acc = make_acc(linger_ms=0)
    idem = IdempotenceManager()
    idem.set_producer_id_and_epoch(77, 3)
    add(acc, TP0, 5)
    add(acc, TP0, 4)
    (b1,) = acc.drain(1, 10**6, 0, idem)
    assert acc.drain(1, 10**6, 0, idem) == []  # the first batch of a partition goes alone
    idem.on_success(b1, 0)
    (b2,) = acc.drain(1, 10**6, 0, idem)
    assert (b1.base_sequence, b2.base_sequence) == (0, 5)
    assert b2.buffer is not None
    (decoded,) = decode_batches(b2.buffer)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (77, 3, 5)


def test_drain_waits_for_producer_id() -> None:
    acc = make_acc(linger_ms=0)
    idem = IdempotenceManager()
    add(acc, TP0, 1)
    assert acc.drain(1, 10**6, 0, idem) == []
    idem.set_producer_id_and_epoch(1, 0)
    assert len(acc.drain(1, 10**6, 0, idem)) == 1


# -- retries -----------------------------------------------------------------------------


def test_reenqueue_keeps_sequence_order_and_backs_off() -> None:
    acc = make_acc(linger_ms=0, retry_backoff_ms=100)
    idem = IdempotenceManager()
    idem.set_producer_id_and_epoch(1, 0)
    batches = []
    first = add(acc, TP0, 1)
    assert acc.drain(1, 10**6, 0, idem) == [first]
    idem.on_success(first, 0)
    acc.complete(first)
    for _ in range(3):
        add(acc, TP0, 2)
    for _ in range(3):
        batches += acc.drain(1, 10**6, 0, idem)
    fresh = add(acc, TP0, 1)
    # Responses come back in reverse order.
    acc.reenqueue(batches[2], 5)
    acc.reenqueue(batches[0], 5)
    acc.reenqueue(batches[1], 5)
    q = acc.queue(TP0)
    assert list(q.batches) == [batches[0], batches[1], batches[2], fresh]
    nodes, delay, _ = acc.ready(10)
    assert nodes == set() and 70 <= delay <= 120  # backoff 100 ms +-20% jitter
    assert acc.ready(200)[0] == {1}
    (again,) = acc.drain(1, 10**6, 200, idem)
    assert again is batches[0] and again.attempts == 2 and again.base_sequence == 1
    # the next retry waits: it is not the lowest unfinished sequence while batches[0] is out
    assert acc.drain(1, 10**6, 200, idem) == []


def test_split_repacks_records_and_keeps_sequences() -> None:
    acc = make_acc(linger_ms=0, batch_size=200)
    idem = IdempotenceManager()
    idem.set_producer_id_and_epoch(9, 1)
    q = acc.queue(TP0)
    q.leader = 1
    assert acc.pool.try_allocate(5000)
    big = acc.new_batch(q, 5000, 5000, 0)
    assert big.builder is not None
    for i in range(30):
        big.builder.append(2000 + i, b"k%d" % i, b"value-%04d" % i, [("h", b"x")])
        big.timestamps.append(2000 + i)
    (sent,) = acc.drain(1, 10**6, 0, idem)
    assert sent is big and big.base_sequence == 0
    handle = RecordFuture(big, 17)
    children = acc.split(big, 1)
    idem.on_split(big, children)
    assert len(children) > 1
    assert idem.in_flight_count(TP0) == len(children)
    seq = 0
    records = []
    for i, child in enumerate(children):
        assert child.base_sequence == seq
        seq += child.count
        # Children go one at a time, like retries: each waits for the one before.
        drained = acc.drain(1, 10**6, 2, idem)
        assert drained == [child]
        assert acc.drain(1, 10**6, 2, idem) == []
        assert child.buffer is not None
        (decoded,) = decode_batches(child.buffer)
        assert decoded.producer_id == 9 and decoded.base_sequence == child.base_sequence
        records += decoded.records()
        assert not big.is_done
        idem.on_success(child, 100 * i)
        child.complete(100 * i, -1)
        acc.complete(child)
    assert [r.value for r in records] == [b"value-%04d" % i for i in range(30)]
    assert [r.headers for r in records] == [[("h", b"x")]] * 30
    assert idem.last_acked_sequence(TP0) == 29
    assert big.is_done and handle.done()
    target, idx = big.locate(17)
    md = handle.result()
    assert md.offset == target.base_offset + idx and md.timestamp_ms == 2017


# -- expiry and completion ----------------------------------------------------------------


def test_expire_queued_batches_after_delivery_timeout() -> None:
    acc = make_acc(delivery_timeout_ms=100)
    old = add(acc, TP0, 1, now=0)
    new = add(acc, TP1, 1, now=50)
    assert acc.next_expiry_ms(60) == pytest.approx(40)
    assert acc.expire(99) == []
    assert acc.expire(100) == [old]
    assert acc.expire(150) == [new]
    assert not acc.has_queued


def test_complete_releases_memory_once() -> None:
    acc = make_acc()
    total = acc.pool.available
    b = add(acc, TP0, 1)
    assert acc.pool.available == total - b.reserved
    acc.complete(b)
    acc.complete(b)
    assert acc.pool.available == total
    assert b not in acc.incomplete


def test_batch_limit_grows_with_good_compression_ratio() -> None:
    acc = make_acc(batch_size=1000, compression=Compression.LZ4, max_request_size=100000)
    assert acc.batch_limit("t", 10) == int(1000 / 1.05)
    for _ in range(200):
        acc.ratios.observe("t", 0.25)
    assert acc.batch_limit("t", 10) == int(1000 / (0.25 * 1.05))
    acc.ratios.observe("t", 0.9)  # worse: adopted at once
    assert acc.batch_limit("t", 10) == int(1000 / (0.9 * 1.05))
    assert acc.batch_limit("t", 5000) == 5000 + BATCH_OVERHEAD  # one big record gets its own


def test_sender_reports_brokers_stuck_past_availability_timeout() -> None:
    from aiokafka_lite.produce.producer_config import ProducerConfig
    from aiokafka_lite.produce.sender import Sender

    acc = make_acc(linger_ms=0)
    cfg = ProducerConfig(partitioner_availability_timeout_ms=100)
    sender = Sender(None, cfg, acc, None, None)  # type: ignore[arg-type]  # only the accumulator is used
    add(acc, TP0, 1, leader=1)
    assert sender._stuck_nodes(0) == set()  # first seen now
    assert sender._stuck_nodes(50) == set()
    assert sender._stuck_nodes(150) == {1}  # data waiting, nothing sent for > 100 ms
    acc.drain(1, 10**6, 150)
    assert sender._stuck_nodes(400) == set()  # nothing waiting any more
    assert Sender(None, ProducerConfig(), acc, None, None)._stuck_nodes(10**6) == set()  # type: ignore[arg-type]
