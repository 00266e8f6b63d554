"""The callback-resolved futures of the concurrency core: how they await on both libraries.

The producer hands out one handle per record (``RecordFuture``) and one wake-up per
``send`` (``SendWakeup``). Neither is an ``asyncio.Future``: a record's outcome lives in
its batch, so a handle holds no result of its own and a million of them cost nothing when
the batch completes unless someone added a callback. They follow asyncio's future
protocol (``_asyncio_future_blocking``, ``add_done_callback``, ``get_loop``) so that an
asyncio Task awaits them directly and ``gather``/``wait``/``shield`` take them as they are.

trio has no Task to hand such an object to, so on trio ``await`` goes through
:func:`wait_for_callback`: the handle's done-callback resolves a trio-side future, and a
cancelled caller just stops listening. :func:`on_asyncio` is the one-C-call test the
``__await__`` hot path uses to pick the way; it lives here so nothing outside ``core/``
asks which library runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from aiokafka_lite.core import concurrency

__all__ = ["on_asyncio", "wait_for_callback"]

#: ``on_asyncio() is not None`` inside an asyncio Task (the running loop), None on trio.
on_asyncio: Final = concurrency.running_asyncio_loop


async def wait_for_callback(
    add: Callable[[Callable[[object], None]], object],
    remove: Callable[[Callable[[object], None]], object] | None,
) -> None:
    """Wait (outside asyncio) until the callback given to ``add`` is called; ``remove``
    (if given) takes it back when the wait ends, also when the caller is cancelled."""
    fut: concurrency.TrioFuture[None] = concurrency.TrioFuture()

    def resolve(_handle: object) -> None:
        if not fut.done():
            fut.set_result(None)

    add(resolve)
    try:
        await fut
    finally:
        if remove is not None:
            remove(resolve)
