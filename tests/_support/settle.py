"""``settled``: read until the answer is the expected one, for admin reads after a write
that Kafka applies asynchronously (its controller commits, the broker's metadata image
catches up a moment later). A deadline, never a fixed sleep."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiokafka_lite.core import concurrency

T = TypeVar("T")


async def settled(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], within_s: float = 15.0) -> T:
    """``await read()`` until ``ok(answer)`` or ``within_s`` passed; returns the last answer
    (the caller asserts on it, so a timeout fails with what was seen)."""
    deadline = concurrency.loop().time() + within_s
    while True:
        answer = await read()
        if ok(answer) or concurrency.loop().time() > deadline:
            return answer
        await concurrency.sleep(0.1)
