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
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import trio

__all__ = [
    "ASYNCIO",
    "AsyncioBackend",
    "Backend",
    "FutureCancelledError",
    "TaskOwner",
    "TrioBackend",
    "TrioFuture",
    "TrioQueue",
    "current",
]

T = TypeVar("T")

_PENDING: Final = 0
_DONE: Final = 1
_CANCELLED: Final = 2


class FutureCancelledError(Exception):
    """Awaiting (or asking the result of) a ``TrioFuture`` that was cancelled."""


class Backend(Protocol):
    """The primitives a shell uses; see the module docstring."""

    name: str

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
