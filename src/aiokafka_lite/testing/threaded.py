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

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.testing.loop_thread import LoopThread

__all__ = ["ThreadedCluster"]

T = TypeVar("T")


class ThreadedCluster:
    """Starts ``EmbeddedCluster(**kwargs)`` in a daemon thread; ``close()`` stops it."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._loop_thread = LoopThread("embedded-kafka")
        self._cluster: EmbeddedCluster | None = None

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
        async def setup() -> None:
            cluster = EmbeddedCluster(**self._kwargs)
            await cluster.start()
            self._cluster = cluster

        async def teardown() -> None:
            await self.cluster.close()

        self._loop_thread.start(setup, teardown, timeout)

    def call(self, fn: Callable[[EmbeddedCluster], T], timeout: float = 30.0) -> T:
        """Runs ``fn(cluster)`` on the cluster's loop and returns its result."""
        if not self._loop_thread.running:
            raise RuntimeError("the cluster is not running")
        return self._loop_thread.call(lambda: fn(self.cluster), timeout)

    def run(self, fn: Callable[[EmbeddedCluster], Awaitable[T]], timeout: float = 60.0) -> T:
        """Awaits ``fn(cluster)`` on the cluster's loop (for coroutine control methods)."""
        if not self._loop_thread.running:
            raise RuntimeError("the cluster is not running")
        return self._loop_thread.run(lambda: fn(self.cluster), timeout)

    def close(self, timeout: float = 30.0) -> None:
        self._loop_thread.stop(timeout)
        self._cluster = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
