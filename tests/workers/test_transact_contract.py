"""TransactSession under the async contract, on asyncio and trio, on the embedded broker
and (``--kafka=apache``) on Apache Kafka: a loop of ``process()`` rounds copies numbered
records to a sink, and is left mid-round (handler exception, cancellation of the task
running it, a timeout around it, a stop flag, ``close()`` from another task); the same
session resumes and is left again, then a fresh session (same group, same transactional
id) finishes. After every way out the group's committed offsets and the sink's committed
output agree (each input below the offsets has its output, once); at the end every input
has exactly one committed output (exactly-once under read_committed: no repeats)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from contract_testlib import (
    FAST,
    PARTITIONS,
    committed_offsets,
    create_topics,
    matrix,
    names,
    produce_numbered,
    report_counts,
    run_and_leave,
)

from aiokafka_lite import Consumer, Producer, errors
from aiokafka_lite.processing.transact import Batch, TransactSession

N = 120
STEP = 25  # records handled in a loop before it is left


class Boom(Exception):
    pass


@pytest.mark.parametrize(("way", "backend"), matrix())
def test_transact_session_leaving(kafka_bootstrap: str, backend: str, way: str) -> None:
    counts = anyio.run(_scenario, kafka_bootstrap, way, backend=backend)
    report_counts("TransactSession", way, backend, **counts)


async def read_committed(bootstrap: str, topic: str, want: int) -> Counter[bytes]:
    """Every committed record of ``topic`` (``want`` expected; a quiet poll confirms no more)."""
    seen: Counter[bytes] = Counter()
    async with Consumer(
        bootstrap, topics=topic, auto_offset_reset="earliest", isolation_level="read_committed", **FAST
    ) as reader:
        with anyio.fail_after(60):
            while True:
                batch = await reader.getmany(timeout_ms=300)
                for records in batch.values():
                    seen.update(r.value for r in records)
                if not batch and sum(seen.values()) >= want:
                    return seen


async def _scenario(bootstrap: str, way: str) -> dict[str, int]:
    source, group = names("ts")
    sink = source + "-out"
    await create_topics(bootstrap, source, sink)
    await produce_numbered(bootstrap, source, N)
    txn_id = group + "-instance"
    handled: list[tuple[int, int]] = []  # every (partition, offset) the handler was given
    done: set[tuple[int, int]] = set()  # inputs of rounds that committed
    phase: dict[str, Any] = {}

    def new_phase(leave_after: int | None) -> anyio.Event:
        trigger = anyio.Event()
        phase.update(
            trigger=trigger,
            leave_at=None if leave_after is None else len(handled) + leave_after,
            failed=None,
            stopping=False,
        )
        return trigger

    async def handler(batch: Batch, producer: Producer) -> None:
        for records in batch.values():
            for r in records:
                handled.append((r.partition, r.offset))
                await producer.enqueue(sink, b"out-%d-%d" % (r.partition, r.offset), partition=r.partition)
                leave_at = phase["leave_at"]
                if leave_at is not None and len(handled) >= leave_at and not phase["trigger"].is_set():
                    phase["trigger"].set()
                    if way == "exception":
                        phase["failed"] = Boom(f"handler failed on {r.partition}@{r.offset}")
                        raise phase["failed"]
                    if way in ("cancel", "timeout", "move_on"):
                        await anyio.sleep_forever()  # mid-round, output partly produced
                await anyio.lowlevel.checkpoint()

    def session() -> TransactSession:
        return TransactSession(
            bootstrap,
            group_id=group,
            topics=source,
            transactional_id=txn_id,
            consumer_options={"auto_offset_reset": "earliest", "max_poll_records": 10, **FAST},
            producer_options={"linger_ms": 1, **FAST},
        )

    async def loop(s: TransactSession) -> None:
        while not phase["stopping"] and len(done) < N:
            batch_keys: list[tuple[int, int]] = []

            async def recording(batch: Batch, producer: Producer, keys: list[Any] = batch_keys) -> None:
                keys.extend((r.partition, r.offset) for rs in batch.values() for r in rs)
                await handler(batch, producer)

            if await s.process(recording, timeout_ms=100):
                done.update(batch_keys)

    def stop() -> None:
        phase["stopping"] = True

    async def check_left() -> None:
        committed = await committed_offsets(bootstrap, group, source)
        output = await read_committed(bootstrap, sink, sum(committed.values()))
        expected = {b"out-%d-%d" % (p, o) for p in range(PARTITIONS) for o in range(committed[p])}
        assert set(output) == expected, (
            sorted(set(output) - expected)[:5],
            sorted(expected - set(output))[:5],
        )
        assert all(n == 1 for n in output.values()), output.most_common(3)

    with anyio.fail_after(120):
        async with session() as first:
            for _ in range(1 if way == "close" else 2):
                trigger = new_phase(STEP)
                left = await run_and_leave(way, lambda: loop(first), trigger, stop=stop, close=first.close)
                _check_way_out(way, left, phase)
                if way != "close":
                    assert not first.in_transaction  # the round left mid-way was aborted
                await check_left()
        assert 0 < len(done) < N
        async with session() as fresh:
            new_phase(None)
            await loop(fresh)
        committed = await committed_offsets(bootstrap, group, source)
        assert sum(committed.values()) == N
        output = await read_committed(bootstrap, sink, N)
    assert len(output) == N and all(n == 1 for n in output.values()), output.most_common(3)
    # Rounds left mid-way were handled again (their first output aborted).
    assert way == "stop" or len(handled) > N
    return {
        "records": N,
        "committed_outputs": len(output),
        "repeated": sum(n - 1 for n in output.values()),
        "handler_calls": len(handled),
    }


def _check_way_out(way: str, left: Any, phase: dict[str, Any]) -> None:
    if way == "exception":  # process() aborts the round and raises the handler's error
        assert left.error is phase["failed"], left
    elif way in ("cancel", "move_on"):
        assert left.cancelled and not left.returned and left.error is None, left
    elif way == "timeout":
        assert left.cancelled and isinstance(left.error, TimeoutError), left
    elif way == "stop":
        assert left.returned and left.error is None, left
    else:  # close: the loop ends (returns or raises), never hangs
        assert left.returned or left.error is not None, left


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_poll_failing_before_records_join_hands_them_out_again(kafka_bootstrap: str, backend: str) -> None:
    """poll() got records but could not open the transaction: the records are not
    skipped, the next poll() returns them again."""

    async def scenario() -> None:
        source, group = names("ts-poll")
        await create_topics(bootstrap, source, partitions=1)
        await produce_numbered_one_partition(bootstrap, source, 20)
        async with TransactSession(
            bootstrap,
            group_id=group,
            topics=source,
            transactional_id=group + "-instance",
            consumer_options={"auto_offset_reset": "earliest", "max_poll_records": 5, **FAST},
            producer_options=FAST,
        ) as session:
            begin = session.producer.begin_transaction

            async def refuse() -> None:
                raise errors.KafkaError("coordinator unavailable")

            session.producer.begin_transaction = refuse  # type: ignore[method-assign]
            with anyio.fail_after(30):
                while True:
                    try:
                        await session.poll(timeout_ms=200)
                    except errors.KafkaError:
                        break
            session.producer.begin_transaction = begin  # type: ignore[method-assign]
            assert not session.in_transaction
            batch = await session.poll(timeout_ms=2000)
            assert [r.offset for rs in batch.values() for r in rs][:1] == [0]  # from the first record
            await session.abort()

    bootstrap = kafka_bootstrap
    anyio.run(scenario, backend=backend)


async def produce_numbered_one_partition(bootstrap: str, topic: str, count: int) -> None:
    async with Producer(bootstrap, linger_ms=2, **FAST) as producer:
        for i in range(count):
            await producer.enqueue(topic, str(i).encode(), partition=0)
        await producer.flush()
