"""OrderedWorkers: per-partition order, safe commits, draining on revoke, failure policies."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import pytest
from group_testlib import eventually

from aiokafka_lite.core.errors import CommitFailedError, ConfigError
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.processing.ordered_workers import OrderedWorkers, WorkerFailedError


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int


class FakeCoordinator:
    def __init__(self) -> None:
        self.listeners: list[object] = []

    def add_listener(self, listener: object) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: object) -> None:
        self.listeners.remove(listener)


class FakeConsumer:
    """Hands out scripted records per partition, honours pause, records commits."""

    def __init__(self, partitions: int, per_partition: int, *, batch: int = 7) -> None:
        self.coordinator = FakeCoordinator()
        self.pending = {TP("t", p): [Rec("t", p, o) for o in range(per_partition)] for p in range(partitions)}
        self.records = {tp: list(recs) for tp, recs in self.pending.items()}
        self.assigned = set(self.pending)
        self.paused: set[TP] = set()
        self.pause_calls: list[set[TP]] = []
        self.commits: list[dict[TP, int]] = []
        self.committed: dict[TP, int] = {}
        self.batch = batch
        self.fail_commits = 0

    async def getmany(
        self, *parts: TP, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TP, list[Rec]]:
        out: dict[TP, list[Rec]] = {}
        for tp in sorted(self.assigned - self.paused):
            recs = self.pending[tp][: self.batch]
            if recs:
                out[tp] = recs
                del self.pending[tp][: self.batch]
        if not out:
            await asyncio.sleep(timeout_ms / 1000)
        else:
            await asyncio.sleep(0)
        return out

    async def commit(self, offsets: Any = None) -> None:
        if self.fail_commits:
            self.fail_commits -= 1
            raise CommitFailedError("rebalancing")
        self.commits.append(dict(offsets))
        for tp, o in offsets.items():
            assert o >= self.committed.get(tp, 0), "commits must never go backwards"
            self.committed[tp] = o

    def seek(self, tp: TP, offset: int) -> None:  # the pool rewinds to its first unfinished record
        self.pending[tp] = [r for r in self.records[tp] if r.offset >= offset]

    def pause(self, *tps: TP) -> None:
        self.paused.update(tps)
        self.pause_calls.append(set(tps))

    def resume(self, *tps: TP) -> None:
        self.paused.difference_update(tps)

    def assignment(self) -> set[TP]:
        return set(self.assigned)


@pytest.fixture
async def runner() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def start(pool: OrderedWorkers, tasks: list[asyncio.Task[None]]) -> asyncio.Task[None]:
    t = asyncio.create_task(pool.run())
    tasks.append(t)
    return t


async def test_order_per_partition_and_parallelism(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=6, per_partition=40)
    active: dict[int, int] = defaultdict(int)
    running = 0
    peak = 0
    order: dict[int, list[int]] = defaultdict(list)

    async def handle(rec: Rec) -> None:
        nonlocal running, peak
        active[rec.partition] += 1
        assert active[rec.partition] == 1, "two records of one partition at once"
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        order[rec.partition].append(rec.offset)
        running -= 1
        active[rec.partition] -= 1

    pool = OrderedWorkers(consumer, handle, concurrency=4, commit_interval_ms=20)
    task = start(pool, runner)
    await eventually(lambda: sum(len(v) for v in order.values()) == 240)
    pool.stop()
    await task
    assert all(order[p] == list(range(40)) for p in range(6))
    assert peak == 4  # partitions really ran in parallel, never more than the pool size
    assert consumer.committed == {TP("t", p): 40 for p in range(6)}
    assert pool.stats.processed == 240
    assert consumer.coordinator.listeners == []


async def test_commits_only_contiguous_finished_offsets(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=2, per_partition=20)
    gate = asyncio.Event()
    slow = TP("t", 0)

    async def handle(rec: Rec) -> None:
        if rec.partition == 0 and rec.offset == 5:
            await gate.wait()

    pool = OrderedWorkers(consumer, handle, concurrency=4, commit_interval_ms=10)
    task = start(pool, runner)
    await eventually(lambda: consumer.committed.get(TP("t", 1)) == 20)
    assert consumer.committed.get(slow) == 5  # offsets 0-4 done, 5 in flight
    assert pool.in_flight() == {slow}
    gate.set()
    await eventually(lambda: consumer.committed.get(slow) == 20)
    pool.stop()
    await task


async def test_revoke_waits_for_in_flight_commits_and_drops_queued(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=2, per_partition=50, batch=50)
    gate = asyncio.Event()
    started = asyncio.Event()
    handled: list[tuple[int, int]] = []
    tp0 = TP("t", 0)

    async def handle(rec: Rec) -> None:
        if rec.partition == 0 and rec.offset == 3:
            started.set()
            await gate.wait()
        handled.append((rec.partition, rec.offset))

    pool = OrderedWorkers(consumer, handle, concurrency=2, commit_interval_ms=60_000)
    start(pool, runner)
    await asyncio.wait_for(started.wait(), 5)
    revoke = asyncio.create_task(pool.on_partitions_revoked({tp0}))
    await asyncio.sleep(0.05)
    assert not revoke.done()  # waiting for the in-flight record
    gate.set()
    await asyncio.wait_for(revoke, 5)
    assert consumer.committed[tp0] == 4  # 0..3 done, the queued rest dropped
    assert max(o for p, o in handled if p == 0) == 3
    assert tp0 not in pool.committable()
    pool.stop()


async def test_lost_partitions_are_not_committed(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=10)
    pool = OrderedWorkers(consumer, lambda rec: None, concurrency=1, commit_interval_ms=60_000)
    task = start(pool, runner)
    await eventually(lambda: pool.committable().get(TP("t", 0)) == 10)
    await pool.on_partitions_lost({TP("t", 0)})
    pool.stop()
    await task
    assert consumer.commits == []


async def test_stop_policy_raises_and_commits_up_to_the_failure(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=2, per_partition=10)

    def handle(rec: Rec) -> None:
        if rec.partition == 1 and rec.offset == 4:
            raise ValueError("bad record")

    pool = OrderedWorkers(consumer, handle, concurrency=2, on_failure="stop")
    with pytest.raises(WorkerFailedError) as info:
        await asyncio.wait_for(pool.run(), 10)
    assert info.value.record == Rec("t", 1, 4)
    assert isinstance(info.value.cause, ValueError)
    assert consumer.committed[TP("t", 1)] == 4  # the failed record is retried after a restart


async def test_skip_policy_continues(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=10)

    def handle(rec: Rec) -> None:
        if rec.offset in (2, 7):
            raise ValueError("bad")

    pool = OrderedWorkers(consumer, handle, concurrency=2, on_failure="skip", commit_interval_ms=10)
    task = start(pool, runner)
    await eventually(lambda: consumer.committed.get(TP("t", 0)) == 10)
    pool.stop()
    await task
    assert pool.stats.skipped == 2 and pool.stats.processed == 10


async def test_retry_policy_with_backoff_then_success_and_exhaustion(
    runner: list[asyncio.Task[None]],
) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=5)
    failures = {1: 2, 3: 99}

    def handle(rec: Rec) -> None:
        left = failures.get(rec.offset, 0)
        if left:
            failures[rec.offset] = left - 1
            raise RuntimeError("flaky")

    pool = OrderedWorkers(
        consumer, handle, on_failure="retry", max_retries=3, retry_backoff_ms=1, retry_backoff_max_ms=4
    )
    with pytest.raises(WorkerFailedError) as info:
        await asyncio.wait_for(pool.run(), 10)
    assert info.value.record.offset == 3  # offset 1 recovered after 2 retries, 3 never did
    assert pool.stats.retries == 2 + 3
    assert consumer.committed[TP("t", 0)] == 3


async def test_revoke_abandons_retries(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=3)
    calls = 0

    def handle(rec: Rec) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("always")

    pool = OrderedWorkers(
        consumer, handle, on_failure="retry", max_retries=None, retry_backoff_ms=20, retry_backoff_max_ms=20
    )
    start(pool, runner)
    await eventually(lambda: calls >= 2)
    await asyncio.wait_for(pool.on_partitions_revoked({TP("t", 0)}), 5)
    assert consumer.commits == []  # nothing finished
    pool.stop()


async def test_backpressure_pauses_full_partitions(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=100, batch=10)
    gate = asyncio.Event()

    async def handle(rec: Rec) -> None:
        await gate.wait()

    pool = OrderedWorkers(consumer, handle, concurrency=1, max_buffered_per_partition=20, fetch_timeout_ms=5)
    task = start(pool, runner)
    await eventually(lambda: TP("t", 0) in consumer.paused)
    await asyncio.sleep(0.05)
    assert len(consumer.pending[TP("t", 0)]) >= 70  # stopped fetching at the cap
    gate.set()
    await eventually(lambda: consumer.committed.get(TP("t", 0)) == 100)
    assert TP("t", 0) not in consumer.paused
    pool.stop()
    await task


async def test_commit_failures_are_tolerated(runner: list[asyncio.Task[None]]) -> None:
    consumer = FakeConsumer(partitions=1, per_partition=5)
    consumer.fail_commits = 2
    pool = OrderedWorkers(consumer, lambda rec: None, commit_interval_ms=10)
    task = start(pool, runner)
    await eventually(lambda: consumer.committed.get(TP("t", 0)) == 5)
    pool.stop()
    await task


def test_configuration_errors() -> None:
    consumer = FakeConsumer(1, 1)
    with pytest.raises(ConfigError):
        OrderedWorkers(consumer, lambda r: None, concurrency=0)
    with pytest.raises(ConfigError):
        OrderedWorkers(consumer, lambda r: None, on_failure="ignore")  # type: ignore[arg-type]

    class AutoCommitting(FakeConsumer):
        class config:
            enable_auto_commit = True
            group_id = "g"

    with pytest.raises(ConfigError, match="enable_auto_commit"):
        OrderedWorkers(AutoCommitting(1, 1), lambda r: None)


async def test_needs_a_group() -> None:
    consumer = FakeConsumer(1, 1)
    consumer.coordinator = None  # type: ignore[assignment]
    with pytest.raises(ConfigError):
        await OrderedWorkers(consumer, lambda r: None).run()
