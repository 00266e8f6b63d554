"""The async backend the client's shells run on: asyncio (native) or trio (through anyio).

The sans-I/O core never touches an event loop; the shells (connections, the network
client, the admin client) need a handful of primitives. ``current()`` returns the
primitives of the library the caller runs under:

* on asyncio it returns the ``asyncio`` module's own objects (``asyncio.Event``,
  ``asyncio.timeout``, ``loop.create_future``, ``loop.call_soon``, ...): the asyncio path
  keeps ``BufferedProtocol`` and callback-resolved futures and pays nothing for trio;
* on trio it returns equivalents with the same surface (a future resolvable from a
  callback and awaitable, a clearable event, ``call_soon`` through the trio token,
  ``fail_after`` as the timeout), and connections run on anyio streams.

Background tasks belong to a ``TaskOwner``: on asyncio a set of tasks cancelled and
awaited at close, on trio a task group entered at ``start()`` and left at ``close()``,
so a client used as ``async with`` leaves no task behind on either backend.

This module is the one place that asks which library runs (``current()``, and the
primitives below that dispatch on it); code outside ``core/`` uses the primitives and
never tests for asyncio or trio itself. The primitives exist because the two libraries
differ where the client needs the same thing:

* ``is_current_task``: whether the caller is a given task (it must not wait for itself);
* ``Backend.protocol_transports``: whether connections use the loop's transports and a
  ``BufferedProtocol`` (asyncio) or anyio streams with an I/O task (trio);
* ``spawn``: a background task of a client (asyncio: a task of the loop; trio: a task
  in the client's task group, since no trio task outlives its nursery);
* ``structured()``: whether tasks must live in a task group of their caller (trio), for
  the few shells (worker pools, lifecycle steps) that keep a structured variant;
* ``event_for_run`` / ``lock_for_run`` / ``queue_for_run``: an object made before the
  run (in ``__init__``, where no library runs yet) swapped for one of the running library;
* ``wait_any``: until one of several events is set, within a timeout;
* ``wait_done``: until tasks or futures are done, cancelling none of them;
* ``stop_task``: let a task end within a grace period, then cancel it and wait for it;
* ``sleep_until_woken``: a sleep another task cuts short by resolving a future (asyncio
  resolves it from a timer: no timeout scope on the sender's hot loop);
* ``deadline``: ``async with`` that cancels its body at a deadline and says so
  (``expired``) instead of raising;
* ``shielded``: a cleanup block that the cancellation under way cannot cut short,
  bounded by its own limit;
* ``call_later``: a cancellable timer (trio: a sleeping task in the given task group);
* ``Interruptible``: network I/O another task can cut short, raised as
  ``asyncio.CancelledError`` on both libraries, told apart from a cancelled caller;
* ``running_asyncio_loop``: the one-C-call test the await protocol of core's own future
  types needs on their hot path; nothing outside ``core/`` uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
from collections.abc import Awaitable, Callable, Collection, Coroutine, Generator, Iterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import anyio.abc
    import trio

__all__ = [
    "ASYNCIO",
    "AsyncioBackend",
    "Backend",
    "FutureCancelledError",
    "Interruptible",
    "TaskOwner",
    "TrioBackend",
    "TrioFuture",
    "TrioQueue",
    "call_later",
    "current",
    "deadline",
    "event_for_run",
    "is_current_task",
    "lock_for_run",
    "queue_for_run",
    "running_asyncio_loop",
    "shielded",
    "sleep_until_woken",
    "spawn",
    "stop_task",
    "structured",
    "wait_any",
    "wait_done",
]

#: asyncio's running loop or None, one C call: for the await protocol of core's own
#: future types, whose hot path cannot afford more. Everything else uses ``current()``
#: or the primitives below.
running_asyncio_loop: Final = asyncio._get_running_loop

T = TypeVar("T")

_PENDING: Final = 0
_DONE: Final = 1
_CANCELLED: Final = 2


class FutureCancelledError(Exception):
    """Awaiting (or asking the result of) a ``TrioFuture`` that was cancelled."""


class Backend(Protocol):
    """The primitives a shell uses; see the module docstring."""

    name: str
    protocol_transports: bool

    def time(self) -> float: ...
    def create_future(self) -> Any: ...
    def call_soon(self, callback: Callable[..., object], *args: Any) -> None: ...
    def sleep(self, seconds: float) -> Awaitable[None]: ...
    def timeout(self, seconds: float | None) -> AbstractAsyncContextManager[Any]: ...
    def event(self) -> Any: ...
    def lock(self) -> Any: ...
    def cancelled_exc(self) -> type[BaseException]: ...
    def owner(self, name: str) -> TaskOwner: ...
    async def gather(self, *aws: Awaitable[Any], return_exceptions: bool = False) -> list[Any]: ...


class TaskOwner(Protocol):
    """Owns a client's background tasks for the client's lifetime."""

    async def start(self) -> None: ...
    def check_host(self) -> None: ...
    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> Any: ...
    async def aclose(self) -> None: ...


# ---------------------------------------------------------------------------- asyncio


class AsyncioBackend:
    """asyncio's own primitives (no wrapping on the hot paths)."""

    name = "asyncio"
    #: Connections run on the loop's transports with a ``BufferedProtocol`` (the fast
    #: path: no I/O task, writes corked until the end of the loop round).
    protocol_transports = True
    sleep = staticmethod(asyncio.sleep)
    timeout = staticmethod(asyncio.timeout)
    event = asyncio.Event
    lock = asyncio.Lock

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    def call_soon(self, callback: Callable[..., object], *args: Any) -> None:
        asyncio.get_running_loop().call_soon(callback, *args)

    def cancelled_exc(self) -> type[BaseException]:
        return asyncio.CancelledError

    def owner(self, name: str) -> AsyncioTaskOwner:
        return AsyncioTaskOwner(name)

    async def gather(self, *aws: Awaitable[Any], return_exceptions: bool = False) -> list[Any]:
        return await asyncio.gather(*aws, return_exceptions=return_exceptions)


class AsyncioTaskOwner:
    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        return None

    def check_host(self) -> None:
        return None  # asyncio: any task may close

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro, name=f"{self._name}.{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: errors go to awaiters, never logged as lost

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


ASYNCIO: Final = AsyncioBackend()


# ---------------------------------------------------------------------------- trio


class TrioFuture(Generic[T]):
    """The part of ``asyncio.Future``'s protocol the shells use, for trio: resolvable
    from synchronous callbacks, awaitable by any number of trio tasks."""

    __slots__ = ("_callbacks", "_event", "_exc", "_result", "_state")

    def __init__(self) -> None:
        self._state = _PENDING
        self._result: Any = None
        self._exc: BaseException | None = None
        self._event: trio.Event | None = None
        self._callbacks: list[Callable[[TrioFuture[T]], object]] | None = None

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> T:
        if self._state == _CANCELLED:
            raise FutureCancelledError("future was cancelled")
        if self._state == _PENDING:
            raise asyncio.InvalidStateError("result is not set")
        if self._exc is not None:
            raise self._exc
        return self._result  # type: ignore[no-any-return]

    def exception(self) -> BaseException | None:
        if self._state == _CANCELLED:
            raise FutureCancelledError("future was cancelled")
        if self._state == _PENDING:
            raise asyncio.InvalidStateError("exception is not set")
        return self._exc

    def _finish(self, state: int) -> None:
        self._state = state
        if self._event is not None:
            self._event.set()
        callbacks = self._callbacks
        if callbacks:
            self._callbacks = None
            for cb in callbacks:
                cb(self)

    def set_result(self, result: T) -> None:
        if self._state != _PENDING:
            raise asyncio.InvalidStateError("future is done")
        self._result = result
        self._finish(_DONE)

    def set_exception(self, exc: BaseException) -> None:
        if self._state != _PENDING:
            raise asyncio.InvalidStateError("future is done")
        self._exc = exc
        self._finish(_DONE)

    def cancel(self, msg: object = None) -> bool:
        if self._state != _PENDING:
            return False
        self._finish(_CANCELLED)
        return True

    def add_done_callback(self, cb: Callable[[TrioFuture[T]], object]) -> None:
        if self._state != _PENDING:
            cb(self)
        elif self._callbacks is None:
            self._callbacks = [cb]
        else:
            self._callbacks.append(cb)

    async def _wait(self) -> T:
        if self._state == _PENDING:
            import trio

            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, T]:
        return self._wait().__await__()


class TrioEvent:
    """``asyncio.Event`` for trio: can be cleared (trio's cannot)."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        import trio

        self._event = trio.Event()

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        if self._event.is_set():
            import trio

            self._event = trio.Event()

    async def wait(self) -> bool:
        if not self._event.is_set():
            await self._event.wait()
        return True


class TrioQueue(Generic[T]):
    """The part of ``asyncio.Queue``'s surface the worker pools use, for trio (unbounded,
    on a trio memory channel; ``task_done``/``join`` count unfinished items)."""

    def __init__(self) -> None:
        import trio

        self._send, self._receive = trio.open_memory_channel[T](math.inf)
        self._unfinished = 0
        self._all_done = trio.Event()
        self._all_done.set()

    def put_nowait(self, item: T) -> None:
        if self._unfinished == 0:
            import trio

            self._all_done = trio.Event()
        self._unfinished += 1
        self._send.send_nowait(item)

    async def get(self) -> T:
        return await self._receive.receive()

    def get_nowait(self) -> T:
        import trio

        try:
            return self._receive.receive_nowait()
        except trio.WouldBlock:
            raise asyncio.QueueEmpty from None

    def qsize(self) -> int:
        return self._receive.statistics().current_buffer_used

    def empty(self) -> bool:
        return self.qsize() == 0

    def task_done(self) -> None:
        if self._unfinished <= 0:
            raise ValueError("task_done() called too many times")
        self._unfinished -= 1
        if self._unfinished == 0:
            self._all_done.set()

    async def join(self) -> None:
        if self._unfinished:
            await self._all_done.wait()


class TrioTask(TrioFuture[T]):
    """A task in a ``TrioTaskOwner``'s task group, with ``asyncio.Task``'s surface:
    awaiting it waits for its result without being able to cancel it (as through
    ``asyncio.shield``); ``cancel()`` cancels its scope."""

    __slots__ = ("_name", "_scope", "_trio_task")

    def __init__(self, name: str) -> None:
        super().__init__()
        import trio

        self._name = name
        self._scope = trio.CancelScope()
        self._trio_task: object = None

    def running_here(self) -> bool:
        """Whether the caller is this task (it must not wait for itself)."""
        import trio

        return self._trio_task is not None and self._trio_task is trio.lowlevel.current_task()

    def get_name(self) -> str:
        return self._name

    def cancel(self, msg: object = None) -> bool:
        if self.done():
            return False
        self._scope.cancel()
        return True

    async def _run(self, coro: Coroutine[Any, Any, T]) -> None:
        import trio

        finished = False
        self._trio_task = trio.lowlevel.current_task()
        try:
            with self._scope:
                result = await coro
                finished = True
        except trio.Cancelled:
            if not self.done():
                self._finish(_CANCELLED)
            raise
        except BaseException as exc:
            if not self.done():
                self.set_exception(exc)
            return
        if not self.done():
            if finished:
                self.set_result(result)
            else:
                self._finish(_CANCELLED)


class TrioTaskOwner:
    def __init__(self, name: str) -> None:
        self._name = name
        self._nursery_cm: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._nursery: trio.Nursery | None = None
        self._tasks: set[TrioTask[Any]] = set()
        self._host: object = None

    async def start(self) -> None:
        if self._nursery is not None:
            return
        import trio

        self._host = trio.lowlevel.current_task()
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()

    def check_host(self) -> None:
        """Only the task that entered the task group can leave it."""
        import trio

        if self._nursery is not None and trio.lowlevel.current_task() is not self._host:
            from aiokafka_lite.core.errors import IllegalStateError

            raise IllegalStateError(
                f"{self._name}: on trio a client is closed by the task that started it "
                "(its task group lives in that task): use `async with`, or close it there"
            )

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> TrioTask[T]:
        nursery = self._nursery
        if nursery is None:
            coro.close()
            raise RuntimeError(
                f"{self._name}: background tasks on trio need the client started first "
                "(use it as `async with`, or await start())"
            )
        task: TrioTask[T] = TrioTask(f"{self._name}.{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        nursery.start_soon(task._run, coro, name=task.get_name())
        return task

    async def aclose(self) -> None:
        if self._nursery_cm is None or self._nursery is None:
            return
        self.check_host()
        cm, self._nursery_cm = self._nursery_cm, None
        self._nursery = None
        for task in list(self._tasks):
            task.cancel()
        # Tasks cancelled above end at their next checkpoint; the nursery waits for them.
        await cm.__aexit__(None, None, None)


class TrioBackend:
    """trio's equivalents of the asyncio primitives the shells use."""

    name = "trio"
    #: Connections run on anyio byte streams driven by an I/O task (which corks on its own).
    protocol_transports = False

    def time(self) -> float:
        import trio

        return trio.current_time()

    def create_future(self) -> TrioFuture[Any]:
        return TrioFuture()

    def call_soon(self, callback: Callable[..., object], *args: Any) -> None:
        import trio

        trio.lowlevel.current_trio_token().run_sync_soon(callback, *args)

    async def sleep(self, seconds: float) -> None:
        import trio

        await trio.sleep(max(seconds, 0.0))

    def timeout(self, seconds: float | None) -> AbstractAsyncContextManager[Any]:
        import anyio

        return _AsyncCM(anyio.fail_after(math.inf if seconds is None else max(seconds, 0.0)))

    def event(self) -> TrioEvent:
        return TrioEvent()

    def lock(self) -> Any:
        import anyio

        return anyio.Lock()

    def cancelled_exc(self) -> type[BaseException]:
        import trio

        return trio.Cancelled

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        """What asyncio's loop does with an error raised in a callback: log it."""
        import logging

        exc = context.get("exception")
        logging.getLogger("aiokafka_lite").error(
            "%s", context.get("message", "error in a callback"), exc_info=exc if exc is not None else None
        )

    def owner(self, name: str) -> TrioTaskOwner:
        return TrioTaskOwner(name)

    async def gather(self, *aws: Awaitable[Any], return_exceptions: bool = False) -> list[Any]:
        """All at once in a nursery; the first failure (without ``return_exceptions``)
        cancels the others and is raised as itself, not inside an exception group."""
        import trio

        results: list[Any] = [None] * len(aws)
        failure: list[BaseException] = []

        async def one(i: int, aw: Awaitable[Any], cancel: trio.CancelScope) -> None:
            try:
                results[i] = await aw
            except trio.Cancelled:
                raise
            except Exception as exc:
                if return_exceptions:
                    results[i] = exc
                elif not failure:
                    failure.append(exc)
                    cancel.cancel()

        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                for i, aw in enumerate(aws):
                    nursery.start_soon(one, i, aw, scope)
        if failure:
            raise failure[0]
        return results


class _AsyncCM:
    """A synchronous context manager (anyio's cancel scopes) used with ``async with``."""

    __slots__ = ("_cm",)

    def __init__(self, cm: Any) -> None:
        self._cm = cm

    async def __aenter__(self) -> Any:
        return self._cm.__enter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        return self._cm.__exit__(*exc)  # type: ignore[no-any-return]


_TRIO: TrioBackend | None = None


def current() -> Backend:
    """The backend of the async library running the caller."""
    if asyncio._get_running_loop() is not None:
        return ASYNCIO
    trio = sys.modules.get("trio")  # imported by whoever runs trio; never by us first
    if trio is not None:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            pass
        else:
            global _TRIO
            if _TRIO is None:
                _TRIO = TrioBackend()
            return _TRIO
    raise RuntimeError("aiokafka_lite runs under asyncio or trio; no event loop of either is running here")


# ---------------------------------------------------------------------------- call-site helpers
# For shells that are not per-connection hot paths: each dispatches on the running library.


class Loop(Protocol):
    """What the shells use of asyncio's loop (on trio, the backend offers the same)."""

    def time(self) -> float: ...
    def create_future(self) -> Any: ...
    def call_soon(self, callback: Callable[..., object], *args: Any) -> Any: ...


def loop() -> Loop:
    """asyncio's running loop, or on trio the backend (same ``time``/``create_future``/``call_soon``)."""
    running = asyncio._get_running_loop()
    return running if running is not None else current()


def sleep(seconds: float) -> Awaitable[None]:
    return current().sleep(seconds)


def timeout(seconds: float | None) -> AbstractAsyncContextManager[Any]:
    return current().timeout(seconds)


def _current_or_asyncio() -> Backend:
    # asyncio's Event and Lock may be made before any loop runs (a shell built outside
    # async code); trio's are made for the trio run they are used in.
    if asyncio._get_running_loop() is None and "trio" not in sys.modules:
        return ASYNCIO
    try:
        return current()
    except RuntimeError:
        return ASYNCIO


def event() -> Any:
    return _current_or_asyncio().event()


def lock() -> Any:
    return _current_or_asyncio().lock()


def queue() -> Any:
    """An unbounded ``asyncio.Queue``, or on trio a ``TrioQueue`` (same surface)."""
    if _current_or_asyncio() is ASYNCIO:
        return asyncio.Queue()
    return TrioQueue()


def cancelled_exc() -> type[BaseException]:
    return current().cancelled_exc()


def gather(*aws: Awaitable[Any], return_exceptions: bool = False) -> Awaitable[list[Any]]:
    return current().gather(*aws, return_exceptions=return_exceptions)


async def shield(aw: Awaitable[T]) -> T:
    """``asyncio.shield`` for a task or future; on trio awaiting one never cancels it."""
    if asyncio._get_running_loop() is not None:
        return await asyncio.shield(aw)
    return await aw


# ---------------------------------------------------------------------------- primitives
# Each one keeps asyncio's own mechanism as the asyncio path (no wrapper, no extra
# await) and holds the trio counterpart, so callers never branch on the library.


def structured() -> bool:
    """Whether tasks must live in a task group of their caller (trio). The worker pools
    and the clients' start/close steps keep a structured variant for that case; any other
    difference between the libraries belongs in a primitive of this module."""
    return asyncio._get_running_loop() is None


def is_current_task(task: Any) -> bool:
    """Whether the caller is ``task`` (a task of ``spawn``/``TaskOwner.spawn``): a task
    must not wait for itself."""
    if asyncio._get_running_loop() is not None:
        return task is asyncio.current_task()
    running_here = getattr(task, "running_here", None)
    return bool(running_here()) if running_here is not None else False


def spawn(owner: TaskOwner | None, coro: Coroutine[Any, Any, T], name: str) -> Any:
    """Start ``coro`` as a background task of a client; returns the task (``asyncio.Task``
    surface), or None, with ``coro`` closed, when the client's task group is gone.

    asyncio: a plain task of the running loop, which its owner object cancels and awaits
    at close (``owner`` is not needed). trio: a task in ``owner``, the client's task group
    (a trio task cannot outlive the nursery it started in)."""
    loop = asyncio._get_running_loop()
    if loop is not None:
        return loop.create_task(coro, name=name)
    if owner is None:
        coro.close()
        return None
    return owner.spawn(coro, name)


def event_for_run(event: Any) -> Any:
    """``event`` when the running library can wait on it, else a new event of that
    library, set if ``event`` was. Events made in ``__init__`` (no library runs yet) are
    asyncio's; trio needs its own made in the run."""
    if asyncio._get_running_loop() is not None and isinstance(event, asyncio.Event):
        return event
    fresh = current().event()
    if event is not None and event.is_set():
        fresh.set()
    return fresh


def lock_for_run(lock: Any) -> Any:
    """``lock`` when the running library can use it, else a new (free) lock of that library."""
    if asyncio._get_running_loop() is not None and isinstance(lock, asyncio.Lock):
        return lock
    return current().lock()


def queue_for_run(queue_: Any) -> Any:
    """``queue_`` when the running library can use it, else a new empty queue of that
    library (what was left in the old one is dropped, as a structured run starts afresh)."""
    if asyncio._get_running_loop() is not None and isinstance(queue_, asyncio.Queue):
        return queue_
    return queue()


async def wait_any(events: Collection[Any], timeout_s: float) -> None:
    """Until one of ``events`` is set, at most ``timeout_s``; never raises on timeout."""
    if asyncio._get_running_loop() is not None:
        waiters = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return
    import anyio

    with anyio.move_on_after(timeout_s):
        async with anyio.create_task_group() as tg:

            async def one(event: Any) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            for event in events:
                tg.start_soon(one, event)


async def wait_done(aws: Collection[Any], timeout_s: float | None = None) -> None:
    """Until every task or future in ``aws`` is done, at most ``timeout_s``; cancels none
    and leaves their outcome to their owner (``asyncio.wait`` semantics)."""
    if not aws:
        return
    if asyncio._get_running_loop() is not None:
        await asyncio.wait(aws, timeout=timeout_s)
        return
    import anyio

    with anyio.move_on_after(math.inf if timeout_s is None else timeout_s):
        for aw in aws:
            with contextlib.suppress(Exception):  # its outcome is read by its owner
                await aw  # awaiting a trio backend task or future never cancels it


async def stop_task(task: Any, grace_s: float) -> BaseException | None:
    """Give ``task`` up to ``grace_s`` to end by itself, then cancel it and wait for its
    end. Returns the error it ended with (None when it returned or was cancelled); a
    cancellation of the caller itself is raised."""
    if asyncio._get_running_loop() is not None:
        if grace_s > 0:
            done, _ = await asyncio.wait({task}, timeout=grace_s)
            if done:
                return None if task.cancelled() else task.exception()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if task.cancelled():
                return None
            raise  # the caller was cancelled
        except Exception as exc:
            return exc
        return None
    import anyio

    if grace_s > 0:
        with anyio.move_on_after(grace_s):
            try:
                await task  # awaiting a TrioTask never cancels it
            except FutureCancelledError:
                return None
            except Exception as exc:
                return exc
            return None
    task.cancel()
    try:
        await task
    except FutureCancelledError:
        return None
    except Exception as exc:
        return exc
    return None


async def sleep_until_woken(wakeup: Any, seconds: float) -> None:
    """Sleep ``seconds`` (``math.inf``: until woken) unless ``wakeup``, a future of
    ``loop().create_future()``, is resolved first by whoever wants this task going.

    asyncio: a timer resolves ``wakeup`` at the end (no timeout scope, no extra task);
    trio: the wait runs in a cancel scope with that deadline."""
    loop = asyncio._get_running_loop()
    if loop is None:
        import anyio

        with anyio.move_on_after(math.inf if seconds == math.inf else max(seconds, 0.0)):
            await wakeup
        return
    handle = None if seconds == math.inf else loop.call_later(max(seconds, 0.0), _resolve_none, wakeup)
    try:
        await wakeup
    finally:
        if handle is not None:
            handle.cancel()


def _resolve_none(fut: Any) -> None:
    if not fut.done():
        fut.set_result(None)


class deadline:
    """``async with deadline(seconds):`` cancels its body after ``seconds`` and then
    sets ``expired`` instead of raising; a ``TimeoutError`` the body raises itself
    propagates. asyncio: ``asyncio.timeout``; trio: an anyio cancel scope."""

    __slots__ = ("_cm", "expired", "seconds")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.expired = False
        self._cm: Any = None

    async def __aenter__(self) -> deadline:
        if asyncio._get_running_loop() is not None:
            self._cm = asyncio.timeout(self.seconds)
            await self._cm.__aenter__()
        else:
            import anyio

            self._cm = anyio.move_on_after(math.inf if self.seconds is None else max(self.seconds, 0.0))
            self._cm.__enter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        cm = self._cm
        if isinstance(cm, asyncio.Timeout):
            try:
                await cm.__aexit__(*exc)
            except TimeoutError:
                if cm.expired():
                    self.expired = True
                    return True
                raise
            return False
        handled = bool(cm.__exit__(*exc))
        self.expired = bool(cm.cancelled_caught)
        return handled


@contextlib.contextmanager
def shielded(limit_s: float) -> Iterator[None]:
    """A cleanup block (a commit, an abort) that the cancellation under way cannot cut
    short (anyio's cancel scopes, on either library, cancel every later await), bounded
    by ``limit_s``, at which it is cancelled and left quietly. A plain ``Task.cancel()``
    on asyncio still reaches it."""
    import anyio

    with anyio.CancelScope(shield=True), anyio.move_on_after(limit_s):
        yield


class _TrioTimer:
    """``call_later`` on trio: a sleeping task; ``cancel()`` is a no-op once it fires
    (the callback may cancel its own timer, as asyncio's timer handles allow)."""

    __slots__ = ("_fired", "_scope")

    def __init__(self) -> None:
        import anyio

        self._scope = anyio.CancelScope()
        self._fired = False

    def cancel(self) -> None:
        if not self._fired:
            self._scope.cancel()

    async def _run(self, delay_s: float, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        import anyio

        with self._scope:
            await anyio.sleep(delay_s)
            self._fired = True
        if self._fired:
            callback(*args)


def call_later(
    delay_s: float,
    callback: Callable[..., object],
    *args: Any,
    task_group: anyio.abc.TaskGroup | None = None,
    name: str = "timer",
) -> Any:
    """Call ``callback(*args)`` in ``delay_s``; returns what ``cancel()`` stops.

    asyncio: the loop's timer. trio: a task sleeping in ``task_group`` (the caller's
    structured run); without one, the timer never fires."""
    loop = asyncio._get_running_loop()
    if loop is not None:
        return loop.call_later(delay_s, callback, *args)
    timer = _TrioTimer()
    if task_group is not None:
        task_group.start_soon(timer._run, delay_s, callback, args, name=name)
    return timer


class Interruptible:
    """Awaits (network I/O) that another task may cut short with ``interrupt()`` (a close);
    the cut-short await raises ``asyncio.CancelledError`` on both libraries.

    asyncio: the awaitable runs as a future that ``interrupt()`` cancels; trio: in a
    cancel scope that ``interrupt()`` cancels. ``caller_cancelled()`` tells the
    cancellation of the awaiting task itself apart (asyncio; on trio that is
    ``trio.Cancelled``, never ``asyncio.CancelledError``)."""

    __slots__ = ("_inflight",)

    def __init__(self) -> None:
        self._inflight: Any = None

    @property
    def busy(self) -> bool:
        return self._inflight is not None

    async def run(self, aw: Awaitable[T]) -> T:
        if asyncio._get_running_loop() is not None:
            fut = asyncio.ensure_future(aw)
            self._inflight = fut
            try:
                return await fut
            finally:
                self._inflight = None
        import anyio

        scope = anyio.CancelScope()
        self._inflight = scope
        try:
            with scope:
                return await aw
        finally:
            self._inflight = None
        raise asyncio.CancelledError("interrupted")

    def interrupt(self) -> None:
        """Cut the await in progress short (nothing when none is)."""
        if self._inflight is not None:
            self._inflight.cancel()

    @staticmethod
    def caller_cancelled() -> bool:
        """Whether the task running this was itself cancelled (so a ``CancelledError``
        is not only the interruption)."""
        if asyncio._get_running_loop() is None:
            return False
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0
