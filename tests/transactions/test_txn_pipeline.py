"""Exactly-once consume-transform-produce with ``TransactSession``, on the embedded cluster
or on Apache Kafka (--kafka=apache).

The pipeline test runs two instances in one group over 20,000 input records, adds a
third instance and removes it again (two rebalances), kills one instance in the middle
of a transaction whose output is already written (no EndTxn, no LeaveGroup) and restarts
it with the same transactional id. The output read with read_committed must hold each
input record's transform exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest
from _support.reading import read_topic
from txn_testlib import short_session_ms, txn_cluster, values

from aiokafka_lite import Producer, TopicPartition
from aiokafka_lite.admin import Admin
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.consume import Record
from aiokafka_lite.core import errors as E
from aiokafka_lite.processing.transact import TransactSession
from aiokafka_lite.produce.transaction import TxnState
from aiokafka_lite.wire.messages import EndTxnRequest

IN, OUT = "eos-in", "eos-out"
IN_PARTS, OUT_PARTS = 6, 4
GROUP = "eos"

FAST_GROUP = {"heartbeat_interval_ms": 100, "auto_offset_reset": "earliest"}


def fast_group(cluster: EmbeddedCluster) -> dict[str, Any]:
    """Consumer options for short group timers (as short as the cluster allows)."""
    return {**FAST_GROUP, "session_timeout_ms": short_session_ms(cluster)}


class Worker:
    """One pipeline instance: input value v becomes output b"out-" + v (key v)."""

    def __init__(self, cluster: EmbeddedCluster, tid: str, **consumer_options: Any) -> None:
        self.session = TransactSession(
            cluster.bootstrap,
            group_id=GROUP,
            transactional_id=tid,
            topics=[IN],
            consumer_options={**fast_group(cluster), "max_poll_records": 250, **consumer_options},
            producer_options={"linger_ms": 2, "transaction_timeout_ms": 30000},
        )
        self.freeze = False
        self.frozen = asyncio.Event()
        self.results: list[bool] = []
        self.task: asyncio.Task[None] | None = None

    async def handler(self, batch: dict[TopicPartition, list[Record]], producer: Producer) -> None:
        for recs in batch.values():
            await producer.enqueue_batch(OUT, [b"out-" + r.value for r in recs], keys=[r.value for r in recs])
        await asyncio.sleep(0.005)  # some work per batch: rebalances meet work in progress
        if self.freeze:
            await producer.flush()  # the output is in the log, uncommitted
            self.frozen.set()
            await asyncio.Event().wait()  # the process "dies" here

    async def start(self) -> None:
        await self.session.start()
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            result = await self.session.process(self.handler, timeout_ms=100)
            if result is not None:
                self.results.append(result)

    async def stop(self) -> None:
        """Graceful: finish nothing more, abort what is open, leave the group."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.session.close()

    async def kill(self) -> None:
        """A crash: the task stops mid-transaction and the connections drop; neither
        EndTxn nor LeaveGroup reaches the broker."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        session = self.session
        await session.producer.client.close()
        await session.consumer.client.close()
        # Release local resources (their requests fail on the closed clients).
        await session.producer.close(flush=False)
        await session.consumer.close()

    @property
    def committed(self) -> int:
        return sum(self.results)


async def committed_total(admin: Admin) -> int:
    try:
        offsets = await admin.list_group_offsets(GROUP)
    except E.KafkaError:
        return 0
    return sum(max(o.offset, 0) for tp, o in offsets.items() if tp.topic == IN)


async def wait_for(predicate: Any, what: str, limit_s: float = 60.0) -> None:
    try:
        async with asyncio.timeout(limit_s):
            while not await predicate():  # noqa: ASYNC110 - a remote condition, polled
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_exactly_once_pipeline_with_crash_and_rebalances(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: Any
) -> None:
    n = 20_000
    cluster = await txn_cluster(request, brokers=3)
    cluster.create_topic(IN, IN_PARTS)
    cluster.create_topic(OUT, OUT_PARTS)
    source = Producer(cluster.bootstrap, linger_ms=5)
    admin = Admin(cluster.bootstrap)
    workers: list[Worker] = []
    produced = 0

    async def feed(count: int) -> None:
        # Input arrives in steps, spread over every partition, so that each event below
        # happens while every instance has work.
        nonlocal produced
        for part in range(IN_PARTS):
            chunk = [b"%d" % i for i in range(produced + part, produced + count, IN_PARTS)]
            await source.send_batch(IN, chunk, partition=part)
        produced += count

    async def feed_until(done: Any, what: str, budget: int) -> None:
        start = produced
        async with asyncio.timeout(60):
            while not done():
                assert produced - start < budget, f"no {what} after {budget} more records"
                await feed(300)
                await asyncio.sleep(0.05)

    async def progress(at_least: int) -> bool:
        return await committed_total(admin) >= at_least

    await source.start()
    await admin.start()
    try:
        await feed(6000)
        a, b = Worker(cluster, "tx-a"), Worker(cluster, "tx-b")
        workers += [a, b]
        await a.start()
        await b.start()
        await wait_for(lambda: progress(2000), "first progress")

        # Rebalances in the middle: a third instance joins, works, and leaves.
        c = Worker(cluster, "tx-c")
        workers.append(c)
        await c.start()
        await feed_until(lambda: c.committed >= 3, "commits by the third instance", 4000)
        stopping = asyncio.get_running_loop().create_task(c.stop())
        await feed(2000)
        await stopping
        workers.remove(c)

        # Kill one instance mid-transaction, with its output already written.
        a.freeze = True
        await feed_until(a.frozen.is_set, "transaction in the instance to kill", 4000)
        assert a.session.producer.transaction_state is TxnState.IN_TRANSACTION
        await a.kill()
        workers.remove(a)

        # The restarted instance fences its predecessor and aborts its transaction.
        a2 = Worker(cluster, "tx-a")
        workers.append(a2)
        await a2.start()
        if isinstance(cluster, EmbeddedCluster):  # (Kafka's coordinator state is not inspectable)
            assert str(cluster.state.services["transactions"].txns["tx-a"].state) != "Ongoing"  # type: ignore[attr-defined]
        await feed(n - produced)

        await wait_for(lambda: progress(n), "all input committed", limit_s=90)
        for w in list(workers):
            await w.stop()
            workers.remove(w)
    finally:
        for w in workers:
            with contextlib.suppress(Exception):
                await w.stop()
        await admin.close()
        await source.close()

    rc = await read_topic(cluster.bootstrap, OUT, OUT_PARTS, "read_committed")
    assert len(rc) == n
    assert values(rc) == sorted(b"out-%d" % i for i in range(n))
    assert all(r.key is not None and r.value == b"out-" + r.key for r in rc)
    ru = await read_topic(cluster.bootstrap, OUT, OUT_PARTS, "read_uncommitted")
    assert len(ru) > n  # at least the crashed transaction's output is in the log, aborted
    assert c.committed >= 3 and a2.committed >= 1 and b.committed >= 1


async def test_revocation_aborts_the_open_transaction(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: Any
) -> None:
    """A member whose partitions are revoked mid-transaction aborts it before giving
    them up; the output of the aborted batch never becomes visible, and the batch is
    processed again (by whoever owns the partitions next)."""
    cluster = await txn_cluster(request)
    cluster.create_topic(IN, 2)
    cluster.create_topic(OUT, 1)
    async with Producer(cluster.bootstrap) as source:
        for i in range(40):
            await source.enqueue(IN, b"%d" % i, partition=i % 2)
    # Eager assignment: a join revokes every partition of every member.
    eager = {"partition_assignment_strategy": ("range",)}
    first = Worker(cluster, "tx-first", **eager)
    second = Worker(cluster, "tx-second", **eager)
    revoked_in_txn = asyncio.Event()
    try:
        await first.session.start()
        async with asyncio.timeout(20):
            batch: dict[TopicPartition, list[Record]] = {}
            while not batch:
                batch = await first.session.poll(timeout_ms=100)
        assert first.session.in_transaction
        await first.session.producer.send_batch(OUT, [b"doomed-%d" % i for i in range(5)])

        class Watch:
            async def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
                # The session's own listener runs first: the transaction is gone already.
                if not first.session.in_transaction:
                    revoked_in_txn.set()

        coordinator = first.session.consumer.coordinator
        assert coordinator is not None
        coordinator.add_listener(Watch())
        await second.start()  # joining triggers the rebalance (driven by the group's own task)
        await asyncio.wait_for(revoked_in_txn.wait(), 20)
        assert await first.session.commit() is False
        with pytest.raises(E.IllegalStateError):
            await first.session.producer.send(OUT, b"late")
        first.task = asyncio.get_running_loop().create_task(first._run())

        admin = Admin(cluster.bootstrap)
        async with admin:
            await wait_for(lambda: _total_is(admin, 40), "all input committed")
    finally:
        for w in (first, second):
            if w.task is not None:
                await w.stop()
            else:
                await w.session.close()
    rc = await read_topic(cluster.bootstrap, OUT, 1, "read_committed")
    assert values(rc) == sorted(b"out-%d" % i for i in range(40))
    ru = await read_topic(cluster.bootstrap, OUT, 1, "read_uncommitted")
    assert {b"doomed-%d" % i for i in range(5)} <= {r.value for r in ru}


async def _total_is(admin: Admin, n: int) -> bool:
    return await committed_total(admin) >= n


async def test_handler_error_aborts_and_input_is_consumed_again(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: Any
) -> None:
    cluster = await txn_cluster(request)
    cluster.create_topic(IN, 1)
    cluster.create_topic(OUT, 1)
    async with Producer(cluster.bootstrap) as source:
        await source.send_batch(IN, [b"%d" % i for i in range(10)])
    w = Worker(cluster, "tx-err")
    calls = 0

    async def flaky(batch: dict[TopicPartition, list[Record]], producer: Producer) -> None:
        nonlocal calls
        calls += 1
        await w.handler(batch, producer)
        if calls == 1:
            raise RuntimeError("transform failed")

    async with w.session as session:
        with pytest.raises(RuntimeError, match="transform failed"):
            async with asyncio.timeout(20):
                while await session.process(flaky, timeout_ms=100) is None:
                    pass
        assert not session.in_transaction
        async with asyncio.timeout(20):
            done = 0
            while done < 10:
                if await session.process(flaky, timeout_ms=100):
                    done = sum(1 for _ in await read_topic(cluster.bootstrap, OUT, 1, "read_committed"))
    rc = await read_topic(cluster.bootstrap, OUT, 1, "read_committed")
    assert values(rc) == sorted(b"out-%d" % i for i in range(10))


async def test_close_after_a_commit_was_cancelled_ends_the_transaction(
    request: pytest.FixtureRequest,
    kafka_mode: str,
    kafka_cluster_factory: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The task running the session is cancelled mid-commit (a shutdown), then the session
    closes: the transaction ends (aborted) at once, instead of staying open until Kafka
    times it out and holding back every read_committed reader of the output."""
    cluster = await txn_cluster(request)
    cluster.create_topic(IN, 1)
    cluster.create_topic(OUT, 1)
    async with Producer(cluster.bootstrap) as source:
        await source.send_batch(IN, [b"%d" % i for i in range(5)])
    w = Worker(cluster, "tx-cancelled-commit")
    await w.session.start()
    try:
        async with asyncio.timeout(20):
            batch: dict[TopicPartition, list[Record]] = {}
            while not batch:
                batch = await w.session.poll(timeout_ms=100)
        await w.handler(batch, w.session.producer)
        await w.session.producer.flush()
        committing = asyncio.get_running_loop().create_task(w.session.commit())
        await asyncio.sleep(0)  # the offsets are on their way
        committing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await committing
    finally:
        with caplog.at_level(logging.WARNING):
            await w.session.close()
    # The session's own abort did it (it used to be refused while the offsets were in
    # flight, leaving it to luck whether the producer's close could abort later).
    assert not [r.getMessage() for r in caplog.records if "abort at close failed" in r.getMessage()]
    out = TopicPartition(OUT, 0)
    async with Admin(cluster.bootstrap) as admin:
        latest = (await admin.list_offsets({out: "latest"}))[out].offset
        stable = (await admin.list_offsets({out: "latest"}, isolation_level="read_committed"))[out].offset
        assert latest > 0 and stable == latest  # (an open transaction holds the stable offset back)
        assert await committed_total(admin) == 0
    assert await read_topic(cluster.bootstrap, OUT, 1, "read_committed") == []


def test_session_forces_read_committed() -> None:
    with pytest.raises(E.ConfigError, match="isolation_level"):
        TransactSession(
            "127.0.0.1:1",
            group_id="g",
            transactional_id="t",
            topics=["x"],
            consumer_options={"isolation_level": "read_uncommitted"},
        )


@pytest.mark.kafka_embedded  # add_latency
async def test_commit_timeout_can_be_retried(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: Any
) -> None:
    cluster = await txn_cluster(request)
    cluster.create_topic(IN, 1)
    cluster.create_topic(OUT, 1)
    async with Producer(cluster.bootstrap) as source:
        await source.send_batch(IN, [b"%d" % i for i in range(5)])
    session = TransactSession(
        cluster.bootstrap,
        group_id=GROUP,
        transactional_id="tx-slow-commit",
        topics=[IN],
        consumer_options=fast_group(cluster),
        producer_options={"max_block_ms": 300},
    )
    async with session:
        async with asyncio.timeout(20):
            batch: dict[TopicPartition, list[Record]] = {}
            while not batch:
                batch = await session.poll(timeout_ms=100)
        for recs in batch.values():
            await session.producer.send_batch(OUT, [b"out-" + r.value for r in recs])
        cluster.add_latency(EndTxnRequest, 1.0, count=1)
        with pytest.raises(E.KafkaTimeoutError):
            await session.commit()
        assert session.in_transaction
        async with asyncio.timeout(20):
            while True:
                try:
                    assert await session.commit() is True
                    break
                except E.KafkaTimeoutError:
                    continue
        assert not session.in_transaction
    rc = await read_topic(cluster.bootstrap, OUT, 1, "read_committed")
    assert values(rc) == sorted(b"out-" + r.value for recs in batch.values() for r in recs)
