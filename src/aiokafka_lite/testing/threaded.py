"""An ``EmbeddedCluster`` running in a background thread with its own event loop.

Blocking clients (confluent-kafka, kafka-python, kcat subprocesses) cannot share an
event loop with the broker they talk to; this runs the cluster on a private loop and
offers thread-safe access to its control API::

    with ThreadedCluster(brokers=3) as tc:
        Producer({"bootstrap.servers": tc.bootstrap}) ...
        tc.call(lambda c: c.move_leader("t", 0))
        tc.run(lambda c: c.stop_broker(2))
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Self, TypeVar

from aiokafka_lite.broker.cluster import EmbeddedCluster

__all__ = ["ThreadedCluster"]

T = TypeVar("T")


class ThreadedCluster:
    """Starts ``EmbeddedCluster(**kwargs)`` in a daemon thread; ``close()`` stops it."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._cluster: EmbeddedCluster | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def cluster(self) -> EmbeddedCluster:
        """The cluster object; touch it only through ``call``/``run`` (it lives on another loop)."""
        if self._cluster is None:
            raise RuntimeError("the cluster is not running")
        return self._cluster

    @property
    def bootstrap(self) -> str:
        return self.call(lambda c: c.bootstrap)

    def start(self, timeout: float = 30.0) -> None:
        ready: Future[None] = Future()

        async def main() -> None:
            self._stopped = asyncio.Event()
            cluster = EmbeddedCluster(**self._kwargs)
            try:
                await cluster.start()
            except BaseException as e:
                ready.set_exception(e)
                return
            self._cluster = cluster
            ready.set_result(None)
            try:
                await self._stopped.wait()
            finally:
                await cluster.close()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(main())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="embedded-kafka", daemon=True)
        self._thread.start()
        ready.result(timeout)

    def call(self, fn: Callable[[EmbeddedCluster], T], timeout: float = 30.0) -> T:
        """Runs ``fn(cluster)`` on the cluster's loop and returns its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the cluster is not running")

        async def wrapper() -> T:
            return fn(self.cluster)

        return asyncio.run_coroutine_threadsafe(wrapper(), loop).result(timeout)

    def run(self, fn: Callable[[EmbeddedCluster], Awaitable[T]], timeout: float = 60.0) -> T:
        """Awaits ``fn(cluster)`` on the cluster's loop (for coroutine control methods)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the cluster is not running")

        async def wrapper() -> T:
            return await fn(self.cluster)

        return asyncio.run_coroutine_threadsafe(wrapper(), loop).result(timeout)

    def close(self, timeout: float = 30.0) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopped.set)
            except RuntimeError:
                pass  # loop already closed
        if self._thread is not None:
            self._thread.join(timeout)
        self._thread = None
        self._loop = None
        self._cluster = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
