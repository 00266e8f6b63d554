"""What waiting for many record futures costs, by design and by asyncio route (no broker).

N records (default 200,000) in batches of 130 (16 KB of 100-byte records), as the
producer makes them. For each design of the per-record future:

  RecordFuture            the producer's: a (batch, index) view speaking asyncio's future
                          protocol; callbacks run per batch, nothing resolved per record
  asyncio.Future          a C future per record (aiokafka's design), resolved with its
                          RecordMetadata when the batch completes
  Future subclass         the same with a Python subclass of asyncio.Future
  awaitable, not future   an object with only __await__ (a per-batch waiter behind it):
                          asyncio wraps each one in a Task (the RecordFuture before issue #16)

and each route (asyncio.gather, asyncio.wait, asyncio.as_completed, one ``await`` after
another, a TaskGroup with a task per record), it measures three steps: create the
futures (the enqueue side), complete the batches, wait. Records are either all
complete before the wait starts (after ``flush()``) or complete while waited for.
Best of ``--rounds``; the 1-minute load average is printed (2 shared cores here).

Run:  .venv/bin/python bench/produce_futures.py [--records N] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from aiokafka_lite.core.structs import TopicPartition  # noqa: E402
from aiokafka_lite.produce.batch import ProducerBatch, RecordFuture, RecordMetadata  # noqa: E402
from aiokafka_lite.wire.records import BatchBuilder  # noqa: E402

PER_BATCH = 130


class FutureSubclass(asyncio.Future[RecordMetadata]):
    __slots__ = ()


class AwaitableView:
    """Awaitable but not a future: gather/wait/as_completed wrap it in a Task."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self.batch = batch
        self.index = index

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.batch.is_done:
            yield from self.batch.waiter().__await__()
        return self.batch.metadata(self.index)


def make_batches(n: int) -> list[ProducerBatch]:
    out = []
    for _ in range(n // PER_BATCH + 1):
        b = ProducerBatch(TopicPartition("t", 0), BatchBuilder(max_batch_size=1 << 20), 1 << 20, 0, 0.0)
        b.timestamps.extend([1] * PER_BATCH)
        out.append(b)
    return out


class Design:
    """Creates the futures of n records and completes their batches."""

    name = ""

    def create(self, batches: list[ProducerBatch], n: int) -> list[Any]:
        raise NotImplementedError

    def complete(self, batches: list[ProducerBatch]) -> None:
        for b in batches:
            b.complete(0, -1)


class RecordFutureDesign(Design):
    name = "RecordFuture"

    def create(self, batches: list[ProducerBatch], n: int) -> list[Any]:
        return [RecordFuture(batches[i // PER_BATCH], i % PER_BATCH) for i in range(n)]


class AsyncioFutureDesign(Design):
    name = "asyncio.Future"
    factory: Callable[[asyncio.AbstractEventLoop], asyncio.Future[RecordMetadata]] = staticmethod(
        lambda loop: loop.create_future()
    )

    def create(self, batches: list[ProducerBatch], n: int) -> list[Any]:
        loop = asyncio.get_running_loop()
        self.per_batch: list[list[asyncio.Future[RecordMetadata]]] = [[] for _ in batches]
        futs = []
        for i in range(n):
            f = self.factory(loop)
            self.per_batch[i // PER_BATCH].append(f)
            futs.append(f)
        return futs

    def complete(self, batches: list[ProducerBatch]) -> None:
        for b, futs in zip(batches, self.per_batch, strict=True):
            b.complete(0, -1)
            tp, ts = b.tp, b.timestamps
            for i, f in enumerate(futs):
                f.set_result(RecordMetadata(tp.topic, tp.partition, i, ts[i]))


class FutureSubclassDesign(AsyncioFutureDesign):
    name = "Future subclass"
    factory = staticmethod(lambda loop: FutureSubclass(loop=loop))


class AwaitableDesign(Design):
    name = "awaitable, not future"

    def create(self, batches: list[ProducerBatch], n: int) -> list[Any]:
        return [AwaitableView(batches[i // PER_BATCH], i % PER_BATCH) for i in range(n)]


async def _gather(futs: list[Any]) -> None:
    await asyncio.gather(*futs)


async def _wait(futs: list[Any]) -> None:
    # asyncio.wait takes futures only: an awaitable must be wrapped in a Task by hand
    await asyncio.wait([f if asyncio.isfuture(f) else asyncio.ensure_future(f) for f in futs])


async def _as_completed(futs: list[Any]) -> None:
    for next_done in asyncio.as_completed(futs):
        await next_done


async def _one_by_one(futs: list[Any]) -> None:
    for f in futs:
        await f


async def _task_group(futs: list[Any]) -> None:
    async def deliver(f: Awaitable[RecordMetadata]) -> RecordMetadata:
        return await f

    async with asyncio.TaskGroup() as tg:
        for f in futs:
            tg.create_task(deliver(f))


ROUTES: dict[str, Callable[[list[Any]], Awaitable[None]]] = {
    "gather": _gather,
    "wait": _wait,
    "as_completed": _as_completed,
    "await one by one": _one_by_one,
    "TaskGroup": _task_group,
}
DESIGNS = [RecordFutureDesign, AsyncioFutureDesign, FutureSubclassDesign, AwaitableDesign]


async def measure(design: Design, route: str, n: int, complete_first: bool) -> tuple[float, float, float]:
    batches = make_batches(n)
    gc.collect()
    t0 = time.perf_counter()
    futs = design.create(batches, n)
    t1 = time.perf_counter()
    if complete_first:
        design.complete(batches)
        t2 = time.perf_counter()
        await ROUTES[route](futs)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2

    async def complete_soon() -> None:
        await asyncio.sleep(0.001)
        design.complete(batches)

    completer = asyncio.ensure_future(complete_soon())
    await ROUTES[route](futs)
    await completer
    t3 = time.perf_counter()
    return t1 - t0, 0.0, t3 - t1  # completing and waiting overlap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--routes", default=",".join(ROUTES))
    args = ap.parse_args()
    n = args.records
    routes = [r.strip() for r in args.routes.split(",")]
    print(f"# {n:,} records, {PER_BATCH} per batch; best of {args.rounds}; load {os.getloadavg()[0]:.1f}")
    for complete_first in (True, False):
        when = "complete before the wait" if complete_first else "complete while waited for"
        print(f"\n## records {when}: seconds (create + complete + wait = total)")
        print(f"{'route':<18}" + "".join(f"{d.name:>26}" for d in DESIGNS))
        for route in routes:
            cells = []
            for design_cls in DESIGNS:
                best: tuple[float, float, float] | None = None
                for _ in range(args.rounds):  # a fresh loop per round
                    r = asyncio.run(measure(design_cls(), route, n, complete_first))
                    if best is None or sum(r) < sum(best):
                        best = r
                assert best is not None
                if complete_first:
                    cells.append(f"{best[0]:.2f}+{best[1]:.2f}+{best[2]:.2f}={sum(best):.2f}")
                else:
                    cells.append(f"{best[0]:.2f}+({best[2]:.2f})={sum(best):.2f}")
            print(f"{route:<18}" + "".join(f"{c:>26}" for c in cells), flush=True)
    print(f"\nload at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
