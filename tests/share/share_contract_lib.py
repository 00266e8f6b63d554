"""Set-up of the share-group contract tests: a topic of numbered records, a share group
that starts at the earliest offset, a ledger counting what reached user code, and the
ways of leaving a step that waits for records.

Tests are plain functions running ``anyio.run`` on the backend they are given, so the
sync broker fixtures serve the embedded broker (in a thread) and Apache Kafka alike,
on asyncio and on trio."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import sniffio

from aiokafka_lite import Admin, NewTopic, Producer
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.consume.share import ShareConsumer, ShareRecord

FAST: dict[str, Any] = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}
#: Generous: joining a share group takes 5-16 s on Apache Kafka 4.4.
DEADLINE_S = float(os.environ.get("SHARE_CONTRACT_DEADLINE_S", "120"))


def names(kind: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"share-contract-{kind}-{suffix}", f"share-contract-{kind}-g-{suffix}"


async def prepare(bootstrap: str, topic: str, group: str, partitions: int = 1) -> None:
    """The topic, and the group starting at the earliest offset (the default, latest,
    would skip what is produced before the member's first fetch)."""
    async with Admin(bootstrap, **FAST) as admin:
        (
            await admin.create_topics([NewTopic(topic, partitions=partitions, replication_factor=1)])
        ).raise_errors()
        changes = {ConfigResource.group(group): {"share.auto.offset.reset": "earliest"}}
        (await admin.incremental_alter_configs(changes)).raise_errors()


async def produce(bootstrap: str, topic: str, numbers: range) -> None:
    """Records valued ``b"<n>"`` for each number, in order (one partition keeps it)."""
    async with Producer(bootstrap, linger_ms=2, **FAST) as producer:
        for n in numbers:
            await producer.enqueue(topic, str(n).encode(), partition=0)
        await producer.flush()


def number(record: ShareRecord) -> int:
    assert record.value is not None
    return int(record.value)


class Ledger:
    """Records that reached user code (``got``) and, for handlers, finished (``done``)."""

    def __init__(self) -> None:
        self.got: Counter[int] = Counter()
        self.done: Counter[int] = Counter()

    def take(self, record: ShareRecord) -> int:
        n = number(record)
        self.got[n] += 1
        return n

    def missing(self, total: int, counter: Counter[int] | None = None) -> list[int]:
        seen = self.got if counter is None else counter
        return [n for n in range(total) if n not in seen]

    def repeated(self, counter: Counter[int] | None = None) -> dict[int, int]:
        seen = self.got if counter is None else counter
        return {n: c for n, c in seen.items() if c > 1}


async def wait_until(condition: Callable[[], bool], within_s: float = DEADLINE_S) -> None:
    """Polls a state (not an event) at a coarse interval, with a deadline."""
    with anyio.fail_after(within_s):
        while not condition():  # noqa: ASYNC110 (a state, not an event)
            await anyio.sleep(0.02)


async def iterate(consumer: ShareConsumer, ledger: Ledger, want: int) -> None:
    """``async for`` until ``want`` more records reached the loop body."""
    if want <= 0:
        return
    seen = 0
    with anyio.fail_after(DEADLINE_S):
        async for record in consumer:
            ledger.take(record)
            seen += 1
            if seen >= want:
                break


def on_asyncio() -> bool:
    return sniffio.current_async_library() == "asyncio"


#: Ways of leaving a step that waits for records (none are coming: the outcome does not
#: depend on when the step is left, only that it is left while waiting).
WAITING_WAYS = ("wait_for", "timeout", "move_on", "cancel_step", "cancel_poll")


async def leave_waiting_step(way: str, consumer: ShareConsumer, it: Any) -> None:
    """Starts a step that waits for records (``it.__anext__()``, or ``consumer.poll()``
    for ``cancel_poll``) and leaves it ``way``; asserts it handed out nothing."""

    async def step() -> Any:
        return await (consumer.poll() if way == "cancel_poll" else it.__anext__())

    if way == "wait_for":
        if on_asyncio():
            import asyncio

            try:
                got = await asyncio.wait_for(step(), 0.3)
            except TimeoutError:
                return
        else:  # trio has no wait_for: the same through a cancel scope that raises
            try:
                with anyio.fail_after(0.3):
                    got = await step()
            except TimeoutError:
                return
        raise AssertionError(f"a waiting step returned {got!r}")
    if way == "timeout":
        if on_asyncio():
            import asyncio

            try:
                async with asyncio.timeout(0.3):
                    got = await step()
            except TimeoutError:
                return
        else:
            try:
                with anyio.fail_after(0.3):
                    got = await step()
            except TimeoutError:
                return
        raise AssertionError(f"a waiting step returned {got!r}")
    if way == "move_on":
        with anyio.move_on_after(0.3) as scope:
            got = await step()
        assert scope.cancelled_caught, f"a waiting step returned {got!r}"
        return
    assert way in ("cancel_step", "cancel_poll"), way
    returned: list[Any] = []
    entered = anyio.Event()

    async def run_step() -> None:
        entered.set()
        returned.append(await step())

    if on_asyncio():
        import asyncio

        task = asyncio.ensure_future(run_step())
        await entered.wait()
        await anyio.wait_all_tasks_blocked()  # the step waits inside the consumer
        task.cancel()
        await asyncio.wait([task])
        assert task.cancelled()
    else:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_step)
            await entered.wait()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    assert returned == [], f"a cancelled step returned {returned!r}"
