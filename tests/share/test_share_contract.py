"""The async contract for ShareConsumer's iterator and ShareWorkers, on asyncio and trio,
on the embedded broker and on Apache Kafka 4.4 (``share_bootstrap``: the broker of the pass;
scripts/test.sh runs this module in its Apache 4.4 pass too).

Numbered records are produced, consumed with a way of leaving the loop (``break``, an
exception in the body, ``close()`` from another task; or a step waiting for records that
is cancelled or times out), then the same consumer goes on and a fresh consumer of the
group takes what is left. Every record must reach user code; none is accepted unseen:

* ``async for`` (implicit acknowledgement) delivers every record exactly once: a record
  counts as delivered (and is accepted) only once the iterator handed it out; the rest
  of its batch goes to the next loop, or back to the group on close;
* ShareWorkers accept a record only when its handler completed: records in flight or
  not started when the pool is left are released. The one allowed repeat is a record
  whose handler completed after ``consumer.close()`` (its acceptance can no longer be
  sent)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Any

import anyio
import pytest
from share_contract_lib import (
    DEADLINE_S,
    FAST,
    WAITING_WAYS,
    Ledger,
    iterate,
    leave_waiting_step,
    names,
    on_asyncio,
    prepare,
    produce,
    wait_until,
)

from aiokafka_lite import Admin, Client
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.consume.share import ShareConsumer, ShareRecord
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.processing import ShareWorkers
from aiokafka_lite.processing.failures import FailureThresholdError

BACKENDS = ["asyncio", "trio"]


@pytest.fixture
def share_bootstrap(kafka_bootstrap: str) -> str:
    """The broker of the pass: the embedded broker in a thread, or under --kafka=apache
    the session's Apache Kafka (share groups on: Kafka 4.4 is formatted with
    share.version=1). scripts/test.sh runs this module in its Apache 4.4 pass, so the
    embedded pass does not start Apache Kafka for it."""
    return kafka_bootstrap


class Boom(Exception):
    pass


# ------------------------------------------------------------------ the two loops


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_then_a_second_loop_gets_the_other_17(share_bootstrap: str, backend: str) -> None:
    anyio.run(_break_then_same_consumer, share_bootstrap, backend=backend)


async def _break_then_same_consumer(bootstrap: str) -> None:
    topic, group = names("same")
    await prepare(bootstrap, topic, group)
    await produce(bootstrap, topic, range(20))
    ledger = Ledger()
    async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as consumer:
        await iterate(consumer, ledger, 3)
        assert sorted(ledger.got) == [0, 1, 2]
        await iterate(consumer, ledger, 17)
    assert ledger.got == Counter(range(20))


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_close_then_a_fresh_consumer_gets_the_other_17(share_bootstrap: str, backend: str) -> None:
    anyio.run(_break_close_then_fresh_consumer, share_bootstrap, backend=backend)


async def _break_close_then_fresh_consumer(bootstrap: str) -> None:
    topic, group = names("fresh")
    await prepare(bootstrap, topic, group)
    await produce(bootstrap, topic, range(20))
    ledger = Ledger()
    async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as first:
        await iterate(first, ledger, 3)
    assert sorted(ledger.got) == [0, 1, 2]
    async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as fresh:
        await iterate(fresh, ledger, 17)  # released by close, not accepted
    assert ledger.got == Counter(range(20))


# ------------------------------------------------------------------ async for: leaving mid-batch


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("way", ["break", "exception", "close"])
def test_iterator_left_mid_batch(share_bootstrap: str, backend: str, way: str) -> None:
    anyio.run(_left_mid_batch, share_bootstrap, way, backend=backend)


async def _left_mid_batch(bootstrap: str, way: str) -> None:
    topic, group = names(way)
    await prepare(bootstrap, topic, group)
    await produce(bootstrap, topic, range(20))
    ledger = Ledger()
    # trio: a consumer that made its own client is closed by the task that started it;
    # with a shared client any task may close it.
    shared = Client(bootstrap, **FAST) if way == "close" and not on_asyncio() else None
    if shared is not None:
        await shared.start()
    try:
        if shared is not None:
            consumer = ShareConsumer(group_id=group, topics=topic, client=shared)
        else:
            consumer = ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST)
        await consumer.start()
        try:
            total = await _leave_mid_batch(way, consumer, ledger, bootstrap, topic)
        finally:
            await consumer.close()
        async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as fresh:
            await iterate(fresh, ledger, total - len(ledger.got))
    finally:
        if shared is not None:
            await shared.close()
    assert ledger.missing(total) == [] and ledger.repeated() == {}
    assert ledger.got == Counter(range(total))


async def _leave_mid_batch(
    way: str, consumer: ShareConsumer, ledger: Ledger, bootstrap: str, topic: str
) -> int:
    """Leaves a loop after 3 of 20 records ``way``; returns how many records the topic has
    once the caller should let a fresh consumer finish."""
    if way == "break":
        await iterate(consumer, ledger, 3)
    elif way == "exception":
        with pytest.raises(Boom):
            async for record in consumer:
                ledger.take(record)
                if len(ledger.got) == 3:
                    raise Boom
    else:
        assert way == "close"
        in_body, resume = anyio.Event(), anyio.Event()
        ended: list[bool] = []

        async def loop() -> None:
            async for record in consumer:
                ledger.take(record)
                if len(ledger.got) == 3:
                    in_body.set()
                    await resume.wait()  # the loop body awaits while another task closes
            ended.append(True)  # the loop ended without an error

        async def closer() -> None:
            await in_body.wait()
            await consumer.close()
            resume.set()

        with anyio.fail_after(DEADLINE_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(loop)
                tg.start_soon(closer)
        assert ended == [True]
        assert sorted(ledger.got) == [0, 1, 2]
        return 20  # the fresh consumer gets the 17 close released
    assert sorted(ledger.got) == [0, 1, 2]
    # The same consumer goes on: the other 17 of the batch, in order, none skipped.
    before = len(ledger.got)
    await iterate(consumer, ledger, 17)
    assert sorted(ledger.got)[before:] == list(range(3, 20))
    # More records; leave again after 3 of them: close releases the other 17.
    await produce(bootstrap, topic, range(20, 40))
    await iterate(consumer, ledger, 3)
    return 40


# ------------------------------------------------------------------ async for: a waiting step left


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("way", WAITING_WAYS)
def test_iterator_survives_a_waiting_step_left(share_bootstrap: str, backend: str, way: str) -> None:
    anyio.run(_waiting_step_left, share_bootstrap, way, backend=backend)


async def _waiting_step_left(bootstrap: str, way: str) -> None:
    topic, group = names(way.replace("_", ""))
    await prepare(bootstrap, topic, group)
    await produce(bootstrap, topic, range(20))
    ledger = Ledger()
    async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as consumer:
        it = aiter(consumer)
        with anyio.fail_after(DEADLINE_S):
            while len(ledger.got) < 20:
                ledger.take(await anext(it))
        await leave_waiting_step(way, consumer, it)  # nothing to get: it waits, and is left
        await produce(bootstrap, topic, range(20, 40))
        with anyio.fail_after(DEADLINE_S):  # the same iterator goes on
            for _ in range(3):
                ledger.take(await anext(it))
        assert sorted(ledger.got) == list(range(23))
    async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as fresh:
        await iterate(fresh, ledger, 17)  # close released them
    assert ledger.got == Counter(range(40))


# ------------------------------------------------------------------ ShareWorkers

WORKER_WAYS = ("cancel", "timeout", "move_on", "stop", "close", "failure_stop")
CONCURRENCY, MAX_IN_FLIGHT, TOTAL = 4, 8, 60


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("way", WORKER_WAYS)
def test_share_workers_left(share_bootstrap: str, backend: str, way: str) -> None:
    anyio.run(_workers_left, share_bootstrap, way, backend=backend)


async def _workers_left(bootstrap: str, way: str) -> None:
    topic, group = names(way.replace("_", ""))
    await prepare(bootstrap, topic, group)
    await produce(bootstrap, topic, range(TOTAL))
    ledger = Ledger()  # got: handler started; done: handler completed
    late: set[int] = set()  # completed after the consumer closed: may come again
    hold = anyio.Event()
    blocking = [True]
    blocked = [0]
    shared = Client(bootstrap, **FAST) if way == "close" and not on_asyncio() else None
    if shared is not None:
        await shared.start()

    def consumer_of() -> ShareConsumer:
        if shared is not None:
            return ShareConsumer(group_id=group, topics=topic, client=shared, acknowledgement_mode="explicit")
        return ShareConsumer(bootstrap, group_id=group, topics=topic, acknowledgement_mode="explicit", **FAST)

    consumer = consumer_of()

    async def handler(record: ShareRecord) -> None:
        n = ledger.take(record)
        if blocking[0] and len(ledger.done) >= 10:
            if way == "failure_stop":
                raise Boom(n)
            blocked[0] += 1
            try:
                await hold.wait()
            finally:
                blocked[0] -= 1
        ledger.done[n] += 1
        if consumer.closed:
            late.add(n)

    try:
        await consumer.start()
        workers = ShareWorkers(
            consumer,
            handler,
            concurrency=CONCURRENCY,
            max_in_flight=MAX_IN_FLIGHT,
            failure_threshold=0 if way == "failure_stop" else None,
        )
        outcome = await _run_and_leave(way, workers, consumer, blocked, hold)
        if way == "failure_stop":
            assert isinstance(outcome, FailureThresholdError), outcome
        elif way == "timeout":
            assert isinstance(outcome, TimeoutError), outcome
        else:
            assert outcome is None, outcome
        # Left: the pool holds nothing; what it held and did not finish went back (held
        # undecided, those records would wait for close or for their locks to expire).
        assert workers.in_flight == 0
        if not consumer.closed:
            assert consumer._tracker.unacknowledged() == 0
        if way in ("cancel", "timeout", "move_on"):
            # The blocked handlers' records and those queued behind them: released.
            assert workers.stats.released == MAX_IN_FLIGHT, workers.stats
        blocking[0] = False
        hold.set()
        done_at_leave = set(ledger.done)
        if not consumer.closed:  # the same consumer goes on, with a new pool, to 40 records
            await _run_until(ShareWorkers(consumer, handler, concurrency=CONCURRENCY), ledger, 40)
            await consumer.close()
        fresh = ShareConsumer(
            bootstrap, group_id=group, topics=topic, acknowledgement_mode="explicit", **FAST
        )
        async with fresh:
            await _run_until(ShareWorkers(fresh, handler, concurrency=CONCURRENCY), ledger, TOTAL)
    finally:
        await consumer.close()
        if shared is not None:
            await shared.close()
    assert ledger.missing(TOTAL, ledger.done) == []
    repeated = ledger.repeated(ledger.done)
    assert set(repeated) <= late, (repeated, late)
    assert len(done_at_leave) >= 10


async def _run_until(workers: ShareWorkers, ledger: Ledger, count: int) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(workers.run)
        await wait_until(lambda: len(ledger.done) >= count)
        workers.stop()


async def _run_and_leave(
    way: str, workers: ShareWorkers, consumer: ShareConsumer, blocked: list[int], hold: anyio.Event
) -> BaseException | None:
    """Runs the pool until its handlers are blocked with records queued behind them (or,
    for ``failure_stop``, until it stops by itself), then leaves it ``way``; returns what
    ``run()`` raised (None: returned, or cancelled as asked)."""

    def busy() -> bool:
        return blocked[0] == CONCURRENCY and workers.in_flight == MAX_IN_FLIGHT

    outcome: list[BaseException | None] = []

    async def run() -> None:
        try:
            await workers.run()
        except Exception as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    with anyio.fail_after(DEADLINE_S):
        if way == "failure_stop":
            await run()
        elif way in ("stop", "close"):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await wait_until(busy)
                if way == "stop":
                    workers.stop()
                else:
                    await consumer.close()
                hold.set()  # the handlers in flight complete
        elif way == "cancel" and on_asyncio():
            import asyncio

            task = asyncio.ensure_future(run())
            await wait_until(busy)
            task.cancel()
            await asyncio.wait([task])
            assert task.cancelled()
            outcome.append(None)
        elif way == "cancel":
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await wait_until(busy)
                tg.cancel_scope.cancel()
            outcome.append(None)
        elif way == "timeout" and on_asyncio():
            import asyncio

            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(None) as deadline:
                    async with anyio.create_task_group() as tg:

                        async def expire() -> None:
                            await wait_until(busy)
                            deadline.reschedule(loop.time())

                        tg.start_soon(expire)
                        await workers.run()
            except TimeoutError as exc:
                outcome.append(exc)
        else:
            assert way in ("timeout", "move_on"), way
            scope_cm = anyio.fail_after(3600) if way == "timeout" else anyio.move_on_after(3600)
            try:
                with scope_cm as scope:
                    async with anyio.create_task_group() as tg:

                        async def expire_now() -> None:
                            await wait_until(busy)
                            scope.deadline = anyio.current_time()

                        tg.start_soon(expire_now)
                        await workers.run()
            except TimeoutError as exc:
                outcome.append(exc)
            else:
                outcome.append(None)
    assert len(outcome) == 1, outcome
    return outcome[0]


# ------------------------------------------------------------------ auto_offset_reset


def test_auto_offset_reset_is_refused_with_the_group_config_and_the_admin_call() -> None:
    with pytest.raises(ConfigError) as refused:
        ShareConsumer("127.0.0.1:1", group_id="jobs", topics="t", auto_offset_reset="earliest")
    message = str(refused.value)
    assert "share.auto.offset.reset" in message
    assert "'latest' (the default" in message and "'earliest'" in message and "by_duration:" in message
    assert (
        "(await admin.incremental_alter_configs({ConfigResource.group('jobs'): "
        "{'share.auto.offset.reset': 'earliest'}})).raise_errors()" in message
    )
    assert "from aiokafka_lite.admin import Admin, ConfigResource" in message
    with pytest.raises(ConfigError, match=r"share\.isolation\.level"):
        ShareConsumer("127.0.0.1:1", group_id="jobs", topics="t", isolation_level="read_committed")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_admin_call_of_the_message_works(share_bootstrap: str, backend: str) -> None:
    anyio.run(_admin_call_of_the_message, share_bootstrap, backend=backend)


async def _admin_call_of_the_message(bootstrap: str) -> None:
    """The line the ConfigError gives, run as written: the group then starts at the
    earliest offset (a record written before the member joined is delivered)."""
    topic, group = names("reset")
    with pytest.raises(ConfigError) as refused:
        ShareConsumer(bootstrap, group_id=group, topics=topic, auto_offset_reset="earliest")
    found = re.search(
        r"\(await admin\.incremental_alter_configs\(.*?\)\)\.raise_errors\(\)", str(refused.value)
    )
    assert found is not None, refused.value
    imports = re.search(r"from aiokafka_lite\.admin import [\w, ]+", str(refused.value))
    assert imports is not None
    scope: dict[str, Any] = {}
    exec(imports.group(0), scope)
    async with Admin(bootstrap, **FAST) as admin:
        from aiokafka_lite import NewTopic

        (await admin.create_topics([NewTopic(topic, partitions=1, replication_factor=1)])).raise_errors()
        code = compile(found.group(0), "<ConfigError message>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        await eval(code, {**scope, "admin": admin})
        # Kafka answers IncrementalAlterConfigs once its controller has the change; a broker
        # applies it to its metadata image a moment later. Wait for the broker to show it
        # (a group that joins before would start at "latest"), as Kafka's own tests do.
        value = None
        with anyio.fail_after(60):
            while True:
                described = (await admin.describe_configs([ConfigResource.group(group)])).raise_errors()
                value = described[ConfigResource.group(group)].value("share.auto.offset.reset")
                if value == "earliest":
                    break
                await anyio.sleep(0.1)
    assert value == "earliest"
    await produce(bootstrap, topic, range(1))  # before any member joined
    ledger = Ledger()
    async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as consumer:
        await iterate(consumer, ledger, 1)
    assert ledger.got == Counter([0])
