"""The async contract of ``Consumer``, as a matrix: way of leaving a loop x membership
(plain ``assign``, a classic group, a KIP-848 group) x backend (asyncio, trio).

Each case produces numbered records, reads some of them with one way of leaving, checks
what the group committed (never past a record the loop did not receive), resumes with
the same consumer, closes it (the commit on close), then reads the rest with a fresh
member of the same group. Every record ``(partition, offset)`` is counted: each must be
received exactly once over both consumers (nothing skipped; with commits of exactly the
records handed out, nothing is delivered twice either).

Tests are plain functions running ``anyio.run`` on the backend they are given, so the
``kafka_bootstrap`` fixture serves the embedded broker (in a thread) and, with
``--kafka=apache``, the session's Apache Kafka, on asyncio and on trio alike.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import sniffio

from aiokafka_lite import Admin, Consumer, NewTopic, Producer
from aiokafka_lite.consume import Record
from aiokafka_lite.core.structs import TopicPartition as TP

FAST: dict[str, Any] = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}
PARTITIONS = 3
FIRST = 150  # produced before the first consumer starts
SECOND = 150  # produced after it has left its first loop
TOTAL = FIRST + SECOND
LEAVE_AT = 60  # records received before leaving (where the way allows choosing)
MODES = ("assign", "classic", "consumer")
WAYS = ("break", "exception", "cancelled_wait", "step_timeouts", "cancelled_getmany", "close")

Key = tuple[int, int]


def keys(records: list[Record]) -> list[Key]:
    return [(r.partition, r.offset) for r in records]


def consumer_options(mode: str, group: str) -> dict[str, Any]:
    opts: dict[str, Any] = {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100, **FAST}
    if mode == "classic":
        opts.update(group_id=group, session_timeout_ms=6000, heartbeat_interval_ms=200)
    elif mode == "consumer":
        opts.update(group_id=group, group_protocol="consumer")
    return opts


async def produce(bootstrap: str, topic: str, count: int) -> None:
    async with Producer(bootstrap, linger_ms=2, **FAST) as producer:
        for i in range(count):
            await producer.enqueue(topic, str(i).encode(), partition=i % PARTITIONS)
        await producer.flush()


async def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per partition (0 where nothing is committed)."""
    async with Admin(bootstrap, **FAST) as admin:
        found = await admin.list_group_offsets(group, [TP(topic, p) for p in range(PARTITIONS)])
    return {tp.partition: max(o.offset, 0) for tp, o in found.items()}


def check_commits_cover_received_only(commits: dict[int, int], received: list[Key], exact: bool) -> None:
    """A committed offset never passes a record the loop did not receive; ``exact``: it is
    the position after the last record received (a commit of the consumed positions)."""
    seen = set(received)
    for p, offset in commits.items():
        unseen = [o for o in range(offset) if (p, o) not in seen]
        assert not unseen, f"partition {p} committed up to {offset}; never received: {unseen[:5]}"
        if exact:
            last = max((o for q, o in seen if q == p), default=-1)
            assert offset == last + 1, f"partition {p}: committed {offset}, received up to {last}"


async def read_until(it: Any, got: list[Record], count: int) -> None:
    with anyio.fail_after(60):
        while len(got) < count:
            got.append(await anext(it))


async def leave(way: str, consumer: Consumer, got: list[Record]) -> bool:
    """Reads with ``way`` of leaving; True when the consumer was closed."""
    on_asyncio = sniffio.current_async_library() == "asyncio"
    it = aiter(consumer)
    if way == "break":
        with anyio.fail_after(60):
            async for record in consumer:
                got.append(record)
                if len(got) == LEAVE_AT:
                    break
    elif way == "exception":

        class Boom(Exception):
            pass

        with pytest.raises(Boom), anyio.fail_after(60):
            async for record in consumer:
                got.append(record)
                if len(got) == LEAVE_AT:
                    raise Boom
    elif way == "cancelled_wait":
        # Everything produced so far, then a step that waits for more and is cancelled.
        await read_until(it, got, FIRST)
        for _ in range(2):
            if on_asyncio:
                import asyncio

                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(anext(it), 0.3)
            else:
                with pytest.raises(TimeoutError), anyio.fail_after(0.3):
                    await anext(it)
    elif way == "step_timeouts":
        # A timeout that has already expired around each step: a step that returns hands
        # out its record; one that must wait is cancelled and takes nothing.
        for _ in range(400):
            if on_asyncio:
                import asyncio

                try:
                    async with asyncio.timeout(0):
                        record = await anext(it)
                    got.append(record)
                except TimeoutError:
                    pass
            else:
                with anyio.move_on_after(0):
                    got.append(await anext(it))
        await read_until(it, got, LEAVE_AT)
    elif way == "cancelled_getmany":
        # getmany calls cancelled at once: each returns its records or takes none.
        cancelled = 0
        while len(got) < LEAVE_AT:
            with anyio.CancelScope() as scope:
                scope.cancel()
                batch = await consumer.getmany(timeout_ms=5000, max_records=7)
                got.extend(r for recs in batch.values() for r in recs)
            cancelled += scope.cancelled_caught
            with anyio.fail_after(60):
                batch = await consumer.getmany(timeout_ms=5000, max_records=5)
                got.extend(r for recs in batch.values() for r in recs)
        assert cancelled > 0
    else:
        assert way == "close", way
        reached = anyio.Event()
        ended: list[str] = []

        async def loop() -> None:
            async for record in consumer:
                got.append(record)
                if len(got) == LEAVE_AT:
                    reached.set()
                await anyio.lowlevel.checkpoint()  # a body that awaits: the close lands mid-chunk
            ended.append("loop ended")

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(loop)
                await reached.wait()
                if on_asyncio:
                    await consumer.close()  # from another task than the loop's
                else:
                    # trio: a client is closed where it was started (its task group is
                    # there); the loop's task is cancelled instead, then the close follows.
                    tg.cancel_scope.cancel()
        if on_asyncio:
            assert ended == ["loop ended"]  # the loop ended cleanly, without an error
        else:
            assert ended == []
            await consumer.close()
        return True
    return False


async def scenario(bootstrap: str, mode: str, way: str) -> dict[str, int]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"cc-{way}-{suffix}", f"cc-{mode}-{way}-{suffix}"
    async with Admin(bootstrap, **FAST) as admin:
        (
            await admin.create_topics([NewTopic(topic, partitions=PARTITIONS, replication_factor=1)])
        ).raise_errors()
    await produce(bootstrap, topic, FIRST)
    grouped = mode != "assign"
    first: list[Record] = []
    consumer = Consumer(bootstrap, **consumer_options(mode, group))
    if grouped:
        consumer.subscribe([topic])
    await consumer.start()
    try:
        if not grouped:
            consumer.assign([TP(topic, p) for p in range(PARTITIONS)])
        closed = await leave(way, consumer, first)
        left_with = len(first)
        if grouped and not closed:
            await consumer.commit()
        if grouped:
            check_commits_cover_received_only(
                await committed(bootstrap, group, topic), keys(first), exact=True
            )
        await produce(bootstrap, topic, SECOND)
        if not closed:
            # The same consumer goes on: for a group two thirds of all, else everything.
            await read_until(aiter(consumer), first, 2 * TOTAL // 3 if grouped else TOTAL)
    finally:
        await consumer.close()  # commits the consumed positions (auto-commit)
    second: list[Record] = []
    if grouped:
        check_commits_cover_received_only(await committed(bootstrap, group, topic), keys(first), exact=True)
        async with Consumer(bootstrap, topics=[topic], **consumer_options(mode, group)) as fresh:
            with anyio.move_on_after(60):
                async for record in fresh:
                    second.append(record)
                    if len(first) + len(second) >= TOTAL:
                        break
    elif closed:
        # No group to remember where the closed consumer was: a new one starts after the
        # last record received per partition (the received records must be prefixes).
        async with Consumer(bootstrap, **consumer_options(mode, group)) as fresh:
            fresh.assign([TP(topic, p) for p in range(PARTITIONS)])
            for p in range(PARTITIONS):
                fresh.seek(TP(topic, p), 1 + max((o for q, o in keys(first) if q == p), default=-1))
            with anyio.move_on_after(60):
                async for record in fresh:
                    second.append(record)
                    if len(first) + len(second) >= TOTAL:
                        break
    counts = Counter(keys(first) + keys(second))
    everything = {(p, o) for p in range(PARTITIONS) for o in range(TOTAL // PARTITIONS)}
    missing = sorted(everything - set(counts))
    assert not missing, f"{len(missing)} records never received, e.g. {missing[:5]}"
    twice = {k: n for k, n in counts.items() if n > 1}
    assert not twice, f"{len(twice)} records received more than once, e.g. {sorted(twice)[:5]}"
    assert set(counts) == everything
    return {"left_with": left_with, "same_consumer": len(first), "fresh_consumer": len(second)}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("way", WAYS)
def test_consumer_leaving_a_loop(kafka_bootstrap: str, way: str, mode: str, backend: str) -> None:
    counts = anyio.run(scenario, kafka_bootstrap, mode, way, backend=backend)
    print(f"CONTRACT consumer {way} {mode} {backend}: {counts}")
