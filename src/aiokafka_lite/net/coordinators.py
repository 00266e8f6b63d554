"""``CoordinatorLookup``: which broker coordinates a group or a transactional id.

The network client owns one. It caches the answers, batches concurrent lookups of one
key type into one FindCoordinator round (v4+, KIP-699) run by one background task per
key type, and retries retriable answers with the client's ``retry_backoff`` until the
lookup's deadline. Sending a round (connection, version, request) is the client's
``find``; this object owns the cache, the waiting callers and the retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.net.metadata import CoordinatorType
from aiokafka_lite.net.retry import Backoff, Retry

__all__ = ["CoordinatorLookup", "FindRound"]

#: One FindCoordinator round: (key type, keys, deadline) -> node id or error per key.
FindRound = Callable[[CoordinatorType, list[str], float], Awaitable[dict[str, int | E.KafkaError]]]
#: Starts a background task of the client: (coroutine, name) -> task.
Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]


class CoordinatorLookup:
    """The coordinator cache and its batched, retried lookups (see the module docstring)."""

    def __init__(self, find: FindRound, spawn: Spawn, backoff: Backoff) -> None:
        self._find = find
        self._spawn = spawn
        self._backoff = backoff
        self._cache: dict[tuple[CoordinatorType, str], int] = {}
        self._pending: dict[tuple[CoordinatorType, str], asyncio.Future[int]] = {}
        self._lookups: dict[CoordinatorType, asyncio.Task[None]] = {}

    def __len__(self) -> int:
        """How many coordinators are cached."""
        return len(self._cache)

    async def find(self, key: str, key_type: CoordinatorType, timeout_ms: float) -> int:
        """Node id of the coordinator of ``key`` (cached); a caller waits for a running
        lookup at most ``timeout_ms`` (``KafkaTimeoutError``), the lookup goes on for others."""
        loop = _backend.loop()
        deadline = loop.time() + timeout_ms / 1000
        ck = (CoordinatorType(key_type), key)
        cached = self._cache.get(ck)
        if cached is not None:
            return cached
        fut = self._pending.get(ck)
        if fut is None:
            fut = loop.create_future()
            self._pending[ck] = fut
            kt = ck[0]
            task = self._lookups.get(kt)
            if task is None or task.done():
                self._lookups[kt] = self._spawn(
                    self._lookup(kt, max(deadline - loop.time(), 0.001)), f"find-coordinator-{kt.name}"
                )
        try:
            async with _backend.timeout(max(deadline - loop.time(), 0.0)):
                return await _backend.shield(fut)
        except TimeoutError as e:
            if isinstance(e, E.KafkaError):
                raise
            raise E.KafkaTimeoutError(
                f"{ck[0].name.lower()} coordinator for {key!r} not found within {timeout_ms:.0f} ms"
            ) from None

    def invalidate(self, key: str, key_type: CoordinatorType) -> None:
        """Forget the coordinator of ``key`` (it moved, or its broker failed)."""
        self._cache.pop((CoordinatorType(key_type), key), None)

    def forget_node(self, node_id: int) -> None:
        """Forget every coordinator on ``node_id`` (its connection dropped)."""
        for key, coordinator in list(self._cache.items()):
            if coordinator == node_id:
                del self._cache[key]

    def fail_waiting(self, err: BaseException) -> None:
        """Every caller still waiting gets ``err`` (the client closes)."""
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()
        self._pending.clear()

    async def _lookup(self, key_type: CoordinatorType, timeout_s: float) -> None:
        try:
            await self._lookup_loop(key_type, timeout_s)
        except BaseException as exc:
            # Never leave a caller waiting on a lookup that died (cancelled by close(), or a bug).
            err = exc if isinstance(exc, Exception) else E.ClosedError("client closed")
            for (kt, k), fut in list(self._pending.items()):
                if kt == key_type and not fut.done():
                    del self._pending[(kt, k)]
                    fut.set_exception(err)
                    fut.exception()
            raise

    async def _lookup_loop(self, key_type: CoordinatorType, timeout_s: float) -> None:
        loop = _backend.loop()
        await _backend.sleep(0)  # let concurrent callers join this batch
        deadline = loop.time() + timeout_s
        retry = Retry(self._backoff, clock=loop.time, deadline=deadline)
        while True:
            keys = sorted(k for (kt, k), f in self._pending.items() if kt == key_type and not f.done())
            if not keys:
                return
            try:
                results = await self._find(key_type, keys, deadline)
            except E.KafkaError as exc:
                results = {k: exc for k in keys}
            # One wait for the whole batch, drawn at the first retriable failure.
            delay: float | None = None
            retrying = False
            for k in keys:
                outcome = results.get(k)
                fut = self._pending.get((key_type, k))
                if fut is None or fut.done():
                    continue
                if isinstance(outcome, int):
                    self._cache[(key_type, k)] = outcome
                    del self._pending[(key_type, k)]
                    fut.set_result(outcome)
                    continue
                err = (
                    outcome if outcome is not None else E.CoordinatorNotAvailableError(f"no answer for {k!r}")
                )
                if err.retriable:
                    if not retrying:
                        delay, retrying = retry.next_delay(), True
                    if delay is not None:
                        continue
                del self._pending[(key_type, k)]
                fut.set_exception(err)
                fut.exception()
            if delay is None:
                # New keys may have arrived while we were busy: serve them in this task.
                continue
            await _backend.sleep(delay)
