"""The concurrency core's primitives (``core/concurrency.py``) on asyncio and on trio:
each behaves the same on both, which is what lets the rest of the client never ask
which library runs."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from aiokafka_lite.core import concurrency

pytestmark = pytest.mark.anyio


async def _forever() -> None:
    await concurrency.event().wait()  # an event nobody sets


async def test_spawn_runs_in_the_owner_and_returns_its_result(anyio_backend: str) -> None:
    owner = concurrency.current().owner("test")
    await owner.start()
    try:

        async def answer() -> int:
            await anyio.lowlevel.checkpoint()
            return 42

        task = concurrency.spawn(owner, answer(), "answer")
        assert task is not None
        assert await task == 42
        assert task.done() and not task.cancelled()
    finally:
        await owner.aclose()


async def test_spawn_without_a_task_group_closes_the_coroutine_on_trio(anyio_backend: str) -> None:
    ran: list[int] = []

    async def work() -> None:
        ran.append(1)

    coro = work()
    task = concurrency.spawn(None, coro, "orphan")
    if anyio_backend == "trio":
        assert task is None
        assert coro.cr_frame is None  # closed: no "never awaited" warning, never runs
    else:
        assert task is not None  # asyncio: a task of the loop needs no owner
        await task
        assert ran == [1]


def _made_before_the_run() -> tuple[Any, Any, Any]:
    event = concurrency.event()
    event.set()
    return event, concurrency.lock(), concurrency.queue()


MADE_BEFORE = _made_before_the_run()  # at import: no library runs here


async def test_objects_made_before_the_run_are_swapped_for_ones_of_the_running_library(
    anyio_backend: str,
) -> None:
    old_event, old_lock, old_queue = MADE_BEFORE
    event = concurrency.event_for_run(old_event)
    assert event.is_set()  # the state carries over
    event.clear()
    waiter_done = concurrency.event()

    async def wait_then_signal() -> None:
        await event.wait()
        waiter_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_then_signal)
        await anyio.lowlevel.checkpoint()
        event.set()
        with anyio.fail_after(10):
            await waiter_done.wait()
    async with concurrency.lock_for_run(old_lock):
        pass
    queue = concurrency.queue_for_run(old_queue)
    queue.put_nowait(1)
    assert await queue.get() == 1
    if anyio_backend == "asyncio":  # asyncio's own objects serve any asyncio run
        assert event is old_event


async def test_wait_any_returns_when_one_event_is_set_and_at_the_timeout(anyio_backend: str) -> None:
    first, second = concurrency.event(), concurrency.event()

    async def set_later() -> None:
        await anyio.lowlevel.checkpoint()
        second.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(set_later)
        with anyio.fail_after(10):
            await concurrency.wait_any((first, second), 60)
    assert second.is_set() and not first.is_set()
    with anyio.fail_after(10):
        await concurrency.wait_any((first, concurrency.event()), 0.01)  # neither: the timeout ends it
    assert not first.is_set()


async def test_wait_done_cancels_nothing(anyio_backend: str) -> None:
    owner = concurrency.current().owner("test")
    await owner.start()
    release = concurrency.event()
    try:

        async def held() -> str:
            await release.wait()
            return "done"

        task = concurrency.spawn(owner, held(), "held")
        with anyio.fail_after(10):
            await concurrency.wait_done([task], 0.01)
        assert not task.done()  # the timeout passed; the task goes on
        release.set()
        with anyio.fail_after(10):
            await concurrency.wait_done([task])
        assert task.result() == "done"
        await concurrency.wait_done([])  # nothing to wait for
    finally:
        await owner.aclose()


async def test_stop_task_grace_cancel_and_crash(anyio_backend: str) -> None:
    owner = concurrency.current().owner("test")
    await owner.start()
    try:
        finishing = concurrency.event()

        async def ends_when_told() -> None:
            await finishing.wait()

        polite = concurrency.spawn(owner, ends_when_told(), "polite")
        finishing.set()
        with anyio.fail_after(10):
            assert await concurrency.stop_task(polite, 60) is None
        assert polite.done() and not polite.cancelled()

        stuck = concurrency.spawn(owner, _forever(), "stuck")
        with anyio.fail_after(10):
            assert await concurrency.stop_task(stuck, 0) is None
        assert stuck.cancelled()

        async def crashes() -> None:
            await anyio.lowlevel.checkpoint()
            raise ValueError("boom")

        crashed = concurrency.spawn(owner, crashes(), "crashes")
        with anyio.fail_after(10):
            error = await concurrency.stop_task(crashed, 60)
        assert isinstance(error, ValueError)
    finally:
        await owner.aclose()


async def test_sleep_until_woken(anyio_backend: str) -> None:
    wakeup = concurrency.loop().create_future()

    async def wake() -> None:
        await anyio.lowlevel.checkpoint()
        wakeup.set_result(None)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wake)
        with anyio.fail_after(10):
            await concurrency.sleep_until_woken(wakeup, math.inf)
    assert wakeup.done()
    unwoken = concurrency.loop().create_future()
    with anyio.fail_after(10):
        await concurrency.sleep_until_woken(unwoken, 0.01)  # the time ends it


async def test_deadline_says_expired_instead_of_raising(anyio_backend: str) -> None:
    with anyio.fail_after(10):
        async with concurrency.deadline(0.01) as scope:
            await _forever()
    assert scope.expired
    async with concurrency.deadline(60) as scope:
        await anyio.lowlevel.checkpoint()
    assert not scope.expired
    with pytest.raises(TimeoutError):  # the body's own TimeoutError is not the deadline
        async with concurrency.deadline(60) as scope:
            raise TimeoutError("the body's own")
    assert not scope.expired


async def test_shielded_block_outlives_the_cancellation_under_way(anyio_backend: str) -> None:
    finished: list[str] = []
    with anyio.CancelScope() as outer:
        outer.cancel()
        with concurrency.shielded(10):
            await anyio.lowlevel.checkpoint()  # would raise here without the shield
            finished.append("cleanup")
        await anyio.lowlevel.checkpoint()
        finished.append("after")  # the cancellation goes on after the block
    assert finished == ["cleanup"]
    with anyio.fail_after(10), concurrency.shielded(0.01):
        await _forever()  # the block's own limit ends it


async def test_call_later_fires_and_cancel_stops_it(anyio_backend: str) -> None:
    fired: list[str] = []
    second_fired = concurrency.event()

    def note(what: str) -> None:
        fired.append(what)
        if what == "second":
            second_fired.set()

    async with anyio.create_task_group() as tg:
        cancelled = concurrency.call_later(0.01, note, "first", task_group=tg)
        cancelled.cancel()
        concurrency.call_later(0.02, note, "second", task_group=tg)
        with anyio.fail_after(10):
            await second_fired.wait()
        own: list[Any] = []
        own_fired = concurrency.event()

        def cancel_own() -> None:
            own[0].cancel()  # a timer cancelled from its own callback: a no-op
            fired.append("own")
            own_fired.set()

        own.append(concurrency.call_later(0, cancel_own, task_group=tg))
        with anyio.fail_after(10):
            await own_fired.wait()
    assert fired == ["second", "own"]


async def test_interruptible_io_raises_cancelled_error_on_interrupt(anyio_backend: str) -> None:
    io = concurrency.Interruptible()
    outcome: list[str] = []

    async def call() -> None:
        try:
            await io.run(_forever())
        except asyncio.CancelledError:
            outcome.append("interrupted" if not io.caller_cancelled() else "caller")

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(10):
            while not io.busy:
                await anyio.lowlevel.checkpoint()
        io.interrupt()
    assert outcome == ["interrupted"]
    assert not io.busy
    assert await io.run(_answer()) == 7  # an await that is not interrupted returns its result
    io.interrupt()  # nothing in flight: nothing happens


async def _answer() -> int:
    await anyio.lowlevel.checkpoint()
    return 7


async def test_is_current_task_and_the_transport_capability(anyio_backend: str) -> None:
    owner = concurrency.current().owner("test")
    await owner.start()
    try:
        seen: list[bool] = []

        async def look() -> None:
            await anyio.lowlevel.checkpoint()
            seen.append(concurrency.is_current_task(me[0]))

        me: list[Any] = []
        me.append(concurrency.spawn(owner, look(), "look"))
        await me[0]
        assert seen == [True]
        assert not concurrency.is_current_task(me[0])  # the caller is another task
    finally:
        await owner.aclose()
    assert concurrency.current().protocol_transports is (anyio_backend == "asyncio")
