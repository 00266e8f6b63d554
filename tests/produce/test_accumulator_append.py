"""RecordAccumulator's append API (append, try_append, close_open, append_new, append_run,
reserve): what the
producer calls instead of writing into the partition queues itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite.core.errors import KafkaTimeoutError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce.accumulator import RUN_END, BufferPool, RecordAccumulator
from aiokafka_lite.produce.batch import ProducerBatch
from aiokafka_lite.wire.records import decode_batches

TP = TopicPartition("t", 0)


def make_acc(batch_size: int = 1000, pool: int = 1 << 20) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=batch_size, linger_ms=10, delivery_timeout_ms=1000, pool=BufferPool(pool)
    )


def values_of(acc: RecordAccumulator, batch: ProducerBatch) -> list[bytes | None]:
    acc.mark_full(acc.queue(batch.tp))
    batch.close()
    assert batch.buffer is not None
    return [r.value for b in decode_batches(bytes(batch.buffer)) for r in b.records()]


def test_try_append_needs_an_open_batch_and_gives_back_reserved_memory() -> None:
    acc = make_acc()
    q = acc.queue(TP)
    assert acc.try_append(q, 1, None, b"a", None) is None  # no open batch yet
    created: list[ProducerBatch] = []
    acc.on_batch_created = created.append
    first = acc.append_new(q, 1, None, b"a", None, 100, 0, 0.0)
    assert first is not None and first[1] == 0 and created == [first[0]]
    used = acc.pool.used
    held = acc.batch_limit("t", 100)
    assert acc.pool.try_allocate(held)
    assert acc.try_append(q, 2, b"k", b"b", [("h", b"x")], held) == (first[0], 1)
    assert acc.pool.used == used  # the reservation went back: the record fit the open batch
    assert first[0].timestamps == [1, 2]
    assert values_of(acc, first[0]) == [b"a", b"b"]


def test_append_fills_the_open_batch_until_full_then_close_open_stops_it() -> None:
    acc = make_acc(batch_size=200)
    q = acc.queue(TP)
    assert acc.append(q, 1, None, b"a", ()) is None  # no open batch yet
    assert not acc.close_open(q)  # nothing to close
    first = acc.append_new(q, 1, None, b"a", None, 50, 0, 0.0)
    assert first is not None
    batch = first[0]
    indexes = []
    while (done := acc.append(q, 2, b"k", b"v" * 40, ())) is not None:
        assert done[0] is batch
        indexes.append(done[1])
    assert indexes == list(range(1, len(indexes) + 1)) and indexes  # in order, some fit
    assert len(batch.timestamps) == 1 + len(indexes)
    q2 = acc.queue(TopicPartition("t", 1))
    assert acc.append_new(q2, 3, None, b"b", None, 50, 0, 0.0) is not None
    assert acc.close_open(q2)  # closed: the next record needs a new batch
    assert acc.append(q2, 4, None, b"c", ()) is None
    assert not acc.close_open(q2)
    assert values_of(acc, batch)[:2] == [b"a", b"v" * 40]


def test_append_new_refuses_without_memory_and_returns_a_short_reservation() -> None:
    acc = make_acc(batch_size=1000, pool=1500)
    q = acc.queue(TP)
    assert acc.append_new(q, 1, None, b"a", None, 100, 0, 0.0) is not None
    q2 = acc.queue(TopicPartition("t", 1))
    assert acc.append_new(q2, 1, None, b"a", None, 100, 0, 0.0) is None  # 500 bytes left
    assert acc.pool.try_allocate(100)
    assert acc.append_new(q2, 1, None, b"a", None, 100, 100, 0.0) is None  # too small: given back
    assert acc.pool.used == 1000


def test_append_run_stops_at_the_record_that_does_not_fit() -> None:
    acc = make_acc(batch_size=300)
    q = acc.queue(TP)
    runs: list[tuple[ProducerBatch, int, int]] = []
    items = iter([b"x" * 50 for _ in range(20)])
    assert acc.append_run(q, 5, None, None, items, lambda *r: runs.append(r), _never) is not RUN_END
    first = acc.append_new(q, 5, None, b"x" * 50, None, 80, 0, 0.0)
    assert first is not None
    carry = acc.append_run(q, 5, None, None, items, lambda *r: runs.append(r), _never)
    assert isinstance(carry, bytes)  # the record that did not fit is handed back
    assert len(runs) == 1 and runs[0][0] is first[0] and runs[0][1] == 1
    n = runs[0][2]
    assert 0 < n < 19 and len(first[0].timestamps) == n + 1
    assert len(list(items)) == 19 - n - 1  # nothing consumed beyond the carried record


def test_append_run_with_keys_appends_by_index_and_reports_bad_types() -> None:
    acc = make_acc()
    q = acc.queue(TP)
    assert acc.append_new(q, 5, None, b"0", None, 80, 0, 0.0) is not None
    keys: list[Any] = [b"k1", b"k2", 3]
    values: list[Any] = [b"v1", b"v2", b"v3"]
    runs: list[tuple[ProducerBatch, int, int]] = []
    bad: list[tuple[object, object]] = []
    assert acc.append_run(q, 5, keys, values, iter([1, 0]), lambda *r: runs.append(r), _never) is RUN_END
    assert [(r[1], r[2]) for r in runs] == [(1, 2)]
    with pytest.raises(TypeError):
        acc.append_run(
            q, 5, keys, values, iter([0, 2]), lambda *r: runs.append(r), lambda k, v: bad.append((k, v))
        )
    assert bad == [(3, b"v3")]
    assert [(r[1], r[2]) for r in runs] == [(1, 2), (3, 1)]  # the good record before it is reported
    batch = q.open
    assert batch is not None
    assert values_of(acc, batch) == [b"0", b"v2", b"v1", b"v1"]


def test_reserve_waits_for_memory_then_times_out() -> None:
    async def main() -> None:
        acc = make_acc(batch_size=1000, pool=1000)
        assert acc.pool.try_allocate(1000)
        waiter = asyncio.ensure_future(acc.reserve("t", 100, 10_000))
        await asyncio.sleep(0)
        assert not waiter.done()
        acc.pool.release(1000)
        assert await waiter == 1000
        with pytest.raises(KafkaTimeoutError):
            await acc.reserve("t", 100, 0)

    asyncio.run(main())


def _never(key: object, value: object) -> None:
    raise AssertionError(f"unexpected bad record {key!r}, {value!r}")
