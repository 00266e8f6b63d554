"""Measuring fairness: a task that counts its own turns while a loop body that never
awaits takes records from a consumer, and the gaps between its turns counted in records
handed out (not in seconds: the machine may be slow). On asyncio and trio."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel


class Ticker:
    """A task that counts its own turns."""

    def __init__(self) -> None:
        self.turns = 0

    async def run(self) -> None:
        while True:
            self.turns += 1
            await anyio.lowlevel.checkpoint()


@contextlib.asynccontextmanager
async def ticking() -> AsyncIterator[Ticker]:
    """A running ``Ticker`` (it has had its first turn) until the block ends."""
    ticker = Ticker()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker.run)
        await anyio.lowlevel.checkpoint()
        try:
            yield ticker
        finally:
            tg.cancel_scope.cancel()


def turn_gaps(turns_at: list[int]) -> tuple[int, int]:
    """(turns the ticker had while the records were handed out, the longest run of
    records handed out in a row without the ticker getting a turn), from the ticker's
    turn count read at each record."""
    longest = run = 0
    for prev, cur in itertools.pairwise(turns_at):
        run = run + 1 if cur == prev else 0
        longest = max(longest, run)
    return turns_at[-1] - turns_at[0], longest
