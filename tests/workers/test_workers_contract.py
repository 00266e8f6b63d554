"""OrderedWorkers under the async contract, on asyncio and trio, on the embedded broker
and (``--kafka=apache``) on Apache Kafka: numbered records are processed, the pool is
left mid-way (handler exception under ``on_failure="stop"``, cancellation of the task
running ``run()``, a timeout around it, ``stop()`` or ``Consumer.close()`` from another
task), run again on the same consumer and left again, then finished by a fresh consumer
of the group. Committed offsets never pass an unfinished record, no record is lost, and
only records finished but not yet committed when the pool was left are repeated."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from contract_testlib import (
    FAST,
    Ledger,
    committed_offsets,
    create_topics,
    matrix,
    names,
    produce_numbered,
    report_counts,
    run_and_leave,
    wait_until,
)

from aiokafka_lite import Consumer
from aiokafka_lite.processing.ordered_workers import OrderedWorkers, WorkerFailedError

N = 150
STEP = 25  # records started in a run before it is left


class Boom(Exception):
    pass


@pytest.mark.parametrize(("way", "backend"), matrix())
def test_ordered_workers_leaving(kafka_bootstrap: str, backend: str, way: str) -> None:
    counts = anyio.run(_scenario, kafka_bootstrap, way, backend=backend)
    report_counts("OrderedWorkers", way, backend, **counts)


async def _scenario(bootstrap: str, way: str) -> dict[str, int]:
    topic, group = names("ow")
    await create_topics(bootstrap, topic)
    await produce_numbered(bootstrap, topic, N)
    ledger = Ledger(N)
    phase: dict[str, Any] = {}

    def new_phase(*, leave_after: int | None) -> anyio.Event:
        """Leave once ``leave_after`` more records have started (None: never);
        under cancellation/timeouts, records started after that are held in the handler
        until they are cut short, so some are in flight when the pool is left."""
        trigger = anyio.Event()
        phase.update(
            trigger=trigger,
            leave_at=None if leave_after is None else len(ledger.started) + leave_after,
            hold=anyio.Event(),
            failed=None,
        )
        return trigger

    async def handler(record: Any) -> None:
        key = (record.partition, record.offset)
        ledger.started.append(key)
        leave_at = phase["leave_at"]
        if leave_at is not None and len(ledger.started) >= leave_at:
            phase["trigger"].set()
            if way == "exception" and phase["failed"] is None:
                phase["failed"] = Boom(f"handler failed on {key}")
                raise phase["failed"]
            if way in ("cancel", "timeout", "move_on"):
                await phase["hold"].wait()  # cut short by the way out, never finished
        await anyio.lowlevel.checkpoint()
        ledger.finished[key] += 1

    def consumer() -> Consumer:
        return Consumer(
            bootstrap,
            group_id=group,
            topics=topic,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **FAST,
        )

    options: dict[str, Any] = {"concurrency": 4, "commit_interval_ms": 50, "on_failure": "stop"}
    with anyio.fail_after(120):
        async with consumer() as first:
            workers = OrderedWorkers(first, handler, **options)
            # Twice on the same pool and consumer (a run after a way out resumes it)...
            for _ in range(1 if way == "close" else 2):
                trigger = new_phase(leave_after=STEP)
                left = await run_and_leave(way, workers.run, trigger, stop=workers.stop, close=first.close)
                _check_way_out(way, left, phase)
                ledger.check_left(await committed_offsets(bootstrap, group, topic))
        assert 0 < len(ledger.finished) < N
        # ... then a fresh member of the group finishes the topic.
        async with consumer() as fresh:
            workers = OrderedWorkers(fresh, handler, **options)
            new_phase(leave_after=None)
            async with anyio.create_task_group() as tg:
                tg.start_soon(workers.run)
                await wait_until(ledger.all_finished)
                workers.stop()
        counts = ledger.check_end(await committed_offsets(bootstrap, group, topic))
    assert counts["finished"] == N
    return {**counts, "records": N, "handler_calls": len(ledger.started)}


def _check_way_out(way: str, left: Any, phase: dict[str, Any]) -> None:
    if way == "exception":  # the policy said stop: run raises, the handler's error as cause
        assert isinstance(left.error, WorkerFailedError), left
        assert left.error.cause is phase["failed"] and left.error.__cause__ is phase["failed"]
    elif way in ("cancel", "move_on"):  # the cancellation came out of run, not swallowed
        assert left.cancelled and not left.returned and left.error is None, left
    elif way == "timeout":
        assert left.cancelled and isinstance(left.error, TimeoutError), left
    elif way == "stop":
        assert left.returned and left.error is None, left
    else:  # close: run ends (returns or raises a Kafka error), never hangs
        assert left.returned or left.error is not None, left
