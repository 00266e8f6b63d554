"""One asyncio event loop in a daemon thread, for test services that must not share the
test's loop (the threaded embedded cluster, the blackhole proxy).

Blocking clients cannot share a loop with the broker they talk to, and a service the test
controls (a proxy that drops traffic) must not be starved by the test's loop or depend on
which async library the test runs; so each such service runs on a private asyncio loop::

    service = LoopThread("my-service")
    service.start(setup, teardown)  # setup() runs on the loop; its error is raised here
    service.call(lambda: ...)       # runs on the loop, returns its result
    service.stop()                  # teardown() runs on the loop, then the thread ends
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A daemon thread that runs ``setup()``, then waits for ``stop()``, then runs
    ``teardown()``, all on its own asyncio loop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    @property
    def running(self) -> bool:
        """True from a successful ``start()`` until ``stop()``."""
        loop = self._loop
        return loop is not None and not loop.is_closed()

    def in_thread(self) -> bool:
        """Whether the caller runs on this loop's own thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def start(
        self,
        setup: Callable[[], Awaitable[None]],
        teardown: Callable[[], Awaitable[None]],
        timeout: float,
    ) -> None:
        """Starts the thread and returns once ``setup()`` has finished on its loop (or
        raises what it raised: the thread has then ended)."""
        ready: Future[None] = Future()

        async def main() -> None:
            self._stop = asyncio.Event()
            try:
                await setup()
            except BaseException as e:
                ready.set_exception(e)
                return
            ready.set_result(None)
            try:
                await self._stop.wait()
            finally:
                await teardown()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(main())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        ready.result(timeout)

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        """Runs ``fn()`` on the loop (inside a task) and returns its result."""

        async def in_task() -> T:
            return fn()

        return self.run(in_task, timeout)

    def run(self, fn: Callable[[], Awaitable[T]], timeout: float) -> T:
        """Awaits ``fn()`` on the loop and returns its result."""
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError(f"{self.name} is not running")
        if self.in_thread():
            raise RuntimeError(f"{self.name} is controlled from other threads, not from its own loop")

        async def in_task() -> T:
            return await fn()

        return asyncio.run_coroutine_threadsafe(in_task(), loop).result(timeout)

    def stop(self, timeout: float) -> None:
        """Lets ``teardown()`` run and waits up to ``timeout`` for the thread to end."""
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop has just closed
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(timeout)
        self._thread = None
        self._loop = None
