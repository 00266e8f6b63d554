"""The async-contract matrix of the processing helpers (OrderedWorkers, TransactSession,
Mirror): numbered records, a ledger of what user code started and finished, and the
checks made after each way of leaving (committed offsets never pass an unfinished
record) and at the end (none lost, repeats only of records finished but not committed).

Tests are plain functions running ``anyio.run`` on the backend they are given, so the
sync ``kafka_bootstrap`` fixture serves the embedded broker (in a thread) and, with
``--kafka=apache``, the session's Apache Kafka, on asyncio and on trio alike."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio

from aiokafka_lite import Admin, NewTopic, Producer
from aiokafka_lite.core.errors import UnstableOffsetCommitError
from aiokafka_lite.core.structs import TopicPartition as TP

FAST: dict[str, Any] = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}
PARTITIONS = 3


def report_counts(api: str, way: str, backend: str, **counts: int) -> None:
    """With ``CONTRACT_COUNTS=<file>``, appends this cell of the matrix (for the notes)."""
    path = os.environ.get("CONTRACT_COUNTS")
    if path:
        line = {"api": api, "way": way, "backend": backend, "kafka": os.environ.get("CONTRACT_KAFKA", "")}
        with open(path, "a") as out:
            out.write(json.dumps({**line, **counts}) + "\n")


def names(kind: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"contract-{kind}-{suffix}", f"contract-{kind}-g-{suffix}"


async def create_topics(bootstrap: str, *topics: str, partitions: int = PARTITIONS) -> None:
    async with Admin(bootstrap, **FAST) as admin:
        result = await admin.create_topics(
            [NewTopic(t, partitions=partitions, replication_factor=1) for t in topics]
        )
        result.raise_errors()


async def produce_numbered(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records valued ``b"0"``..., spread round-robin over the partitions."""
    async with Producer(bootstrap, linger_ms=2, **FAST) as producer:
        for i in range(count):
            await producer.enqueue(topic, str(i).encode(), partition=i % PARTITIONS)
        await producer.flush()


async def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per partition (0 where nothing is committed), once
    stable: a transaction that just committed offsets (TransactSession, exactly-once
    Mirror) makes them visible a moment after its output, so wait for no pending ones."""
    async with Admin(bootstrap, **FAST) as admin:
        with anyio.fail_after(30):
            while True:
                try:
                    found = await admin.list_group_offsets(
                        group, [TP(topic, p) for p in range(PARTITIONS)], require_stable=True
                    )
                except UnstableOffsetCommitError:
                    found = None
                if found is not None and not any(
                    isinstance(o.error, UnstableOffsetCommitError) for o in found.values()
                ):
                    break
                await anyio.sleep(0.05)
    errors = {tp: o.error for tp, o in found.items() if o.error is not None}
    assert not errors, errors
    return {tp.partition: max(o.offset, 0) for tp, o in found.items()}


@dataclass
class Ledger:
    """What user code did with each record ``(partition, offset)``."""

    total: int
    started: list[tuple[int, int]] = field(default_factory=list)
    finished: Counter[tuple[int, int]] = field(default_factory=Counter)
    #: Finished but above the committed offset at some way out: these may be processed again.
    may_repeat: set[tuple[int, int]] = field(default_factory=set)
    leaves: int = 0

    def check_left(self, committed: dict[int, int]) -> None:
        """After leaving: every committed offset covers finished records only."""
        self.leaves += 1
        done = set(self.finished)
        for partition, offset in committed.items():
            unfinished = [o for o in range(offset) if (partition, o) not in done]
            assert not unfinished, (
                f"partition {partition} committed up to {offset} but offsets {unfinished[:5]} never finished"
            )
        self.may_repeat |= {(p, o) for p, o in done if o >= committed.get(p, 0)}

    def all_finished(self) -> bool:
        return len(self.finished) == self.total

    def check_end(self, committed: dict[int, int]) -> dict[str, int]:
        """At the end: every record finished, the commits cover the topic, repeats only
        of records that were finished-but-uncommitted when a way out was taken."""
        assert len(self.finished) == self.total, f"{self.total - len(self.finished)} records never finished"
        assert sum(committed.values()) == self.total, committed
        repeated = {k: n for k, n in self.finished.items() if n > 1}
        assert set(repeated) <= self.may_repeat, sorted(set(repeated) - self.may_repeat)[:5]
        assert all(n <= 1 + self.leaves for n in repeated.values()), repeated
        return {"finished": len(self.finished), "repeated": len(repeated), "leaves": self.leaves}


async def wait_until(condition: Any, within_s: float = 60) -> None:
    """Polls a state (not an event) at a coarse interval, with a deadline."""
    with anyio.fail_after(within_s):
        while not condition():  # noqa: ASYNC110 (a state, not an event)
            await anyio.sleep(0.02)


WAYS_OUT = ("exception", "cancel", "timeout", "move_on", "stop", "close")


def matrix(ways: tuple[str, ...] = WAYS_OUT, backends: tuple[str, ...] = ("asyncio", "trio")) -> list[Any]:
    """``(way, backend)`` pairs. ``close`` from another task is asyncio-only: on trio a
    client is closed by the task that started it (it refuses another task with
    ``IllegalStateError``); cancelling the task that runs the loop is trio's way out."""
    return [(w, b) for w in ways for b in backends if not (w == "close" and b == "trio")]


@dataclass
class Left:
    """How ``body`` ended: ``error`` is what it raised (None: it returned)."""

    returned: bool = False
    error: BaseException | None = None
    cancelled: bool = False  # a cancellation came out of body (not swallowed)


async def run_and_leave(
    way: str,
    body: Any,
    trigger: anyio.Event,
    *,
    stop: Any = None,
    close: Any = None,
) -> Left:
    """Runs ``await body()`` and, once ``trigger`` is set, leaves it ``way``:

    ``cancel``: cancels the task running it (asyncio: ``Task.cancel``; trio: its cancel
    scope); ``timeout``: a timeout around it expires (asyncio: ``asyncio.timeout``;
    trio: ``anyio.fail_after``), moved to now; ``move_on``: ``anyio.move_on_after``
    likewise; ``stop``/``close``: ``stop()`` / ``await close()`` from another task;
    ``exception``: nothing here (body's handler raises by itself)."""
    import sniffio

    on_asyncio = sniffio.current_async_library() == "asyncio"
    left = Left()
    body_done = anyio.Event()

    async def guarded() -> None:
        try:
            await body()
            left.returned = True
        except anyio.get_cancelled_exc_class():
            left.cancelled = True
            raise
        except Exception as exc:
            left.error = exc
        finally:
            body_done.set()

    async def triggered() -> bool:
        """True once the trigger is set; False if body ended first."""
        async with anyio.create_task_group() as tg:

            async def watch(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch, trigger)
            tg.start_soon(watch, body_done)
        return trigger.is_set() and not body_done.is_set()

    async with anyio.create_task_group() as tg:
        if way == "cancel" and on_asyncio:
            import asyncio

            task = asyncio.ensure_future(guarded())
            if await triggered():
                task.cancel()
            await asyncio.wait([task])
            left.cancelled = left.cancelled and task.cancelled()
        elif way == "cancel":
            with anyio.CancelScope() as scope:

                async def cancel_it() -> None:
                    if await triggered():
                        scope.cancel()

                tg.start_soon(cancel_it)
                await guarded()
            left.cancelled = left.cancelled and scope.cancelled_caught
        elif way == "timeout" and on_asyncio:
            import asyncio

            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(None) as deadline:

                    async def expire() -> None:
                        if await triggered():
                            deadline.reschedule(loop.time())

                    tg.start_soon(expire)
                    await guarded()
            except TimeoutError as exc:
                left.error = exc
        elif way in ("timeout", "move_on"):
            scope_cm = anyio.fail_after(3600) if way == "timeout" else anyio.move_on_after(3600)
            try:
                with scope_cm as timeout_scope:

                    async def expire_trio() -> None:
                        if await triggered():
                            timeout_scope.deadline = anyio.current_time()

                    tg.start_soon(expire_trio)
                    await guarded()
            except TimeoutError as exc:
                left.error = exc
        elif way in ("stop", "close"):

            async def leave() -> None:
                if await triggered():
                    if way == "stop":
                        stop()
                    else:
                        await close()

            tg.start_soon(leave)
            await guarded()
        else:
            assert way == "exception", way
            await guarded()
        tg.cancel_scope.cancel()
    return left
