"""Mirror under the async contract, on the embedded broker and (``--kafka=apache``) on
Apache Kafka, in both delivery modes: numbered records are copied to a renamed topic of
the same cluster, ``run()`` is left mid-copy (the target producer failing, cancellation
of the task running it, a timeout around it, ``stop()`` or ``close()`` from another
task), run again on the same mirror and left again, then a fresh instance of the group
finishes. Committed positions never pass a record the target does not hold; at the end
every record is on the target; at-least-once repeats only records copied but not yet
committed when run() was left, exactly-once (read_committed) repeats none.

Mirror is asyncio-only (its loop, events and locks are asyncio's); on trio ``start()``
refuses with ``IllegalStateError``, which the last test checks."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from contract_testlib import (
    FAST,
    PARTITIONS,
    WAYS_OUT,
    committed_offsets,
    create_topics,
    names,
    produce_numbered,
    report_counts,
    run_and_leave,
)

from aiokafka_lite import Consumer, errors
from aiokafka_lite.integrations.mirror import Mirror

N = 150
STEP = 25  # records handed to the target producer in a run before it is left


class TargetDown(errors.KafkaError):
    pass


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
@pytest.mark.parametrize("way", WAYS_OUT)
def test_mirror_leaving(kafka_bootstrap: str, way: str, mode: str) -> None:
    counts = anyio.run(_scenario, kafka_bootstrap, way, mode == "exactly-once", backend="asyncio")
    report_counts(f"Mirror ({mode})", way, "asyncio", **counts)


def test_mirror_refuses_trio(kafka_bootstrap: str) -> None:
    async def start_on_trio() -> None:
        mirror = Mirror(kafka_bootstrap, kafka_bootstrap, include="never", rename="{topic}.m")
        with pytest.raises(errors.IllegalStateError, match="asyncio only"):
            await mirror.start()

    anyio.run(start_on_trio, backend="trio")


async def read_target(bootstrap: str, topic: str, want: int) -> Counter[bytes]:
    """Every committed record of the target (``want`` expected; a quiet poll confirms)."""
    seen: Counter[bytes] = Counter()
    async with Consumer(
        bootstrap, topics=topic, auto_offset_reset="earliest", isolation_level="read_committed", **FAST
    ) as reader:
        with anyio.fail_after(60):
            while True:
                batch = await reader.getmany(timeout_ms=300)
                for records in batch.values():
                    seen.update(r.value for r in records)
                if not batch and sum(seen.values()) >= want:
                    return seen


def value_of(partition: int, offset: int) -> bytes:
    return str(offset * PARTITIONS + partition).encode()  # produce_numbered's round-robin


async def _scenario(bootstrap: str, way: str, exactly_once: bool) -> dict[str, int]:
    source, group = names("mirror")
    target = source + ".mirror"
    await create_topics(bootstrap, source)
    await produce_numbered(bootstrap, source, N)
    handed = 0  # records handed to the target producer, over every run
    phase: dict[str, Any] = {}
    may_repeat: set[bytes] = set()
    leaves = 0

    def new_phase(leave_after: int | None) -> anyio.Event:
        trigger = anyio.Event()
        phase.update(
            trigger=trigger,
            leave_at=None if leave_after is None else handed + leave_after,
            hold=anyio.Event(),
        )
        return trigger

    def mirror() -> Mirror:
        m = Mirror(
            bootstrap,
            bootstrap,
            include=source,
            rename="{topic}.mirror",
            group_id=group,
            exactly_once=exactly_once,
            instance_id="contract",
            commit_interval_ms=50,
            source_options={"max_poll_records": 10, **FAST},
            target_options=FAST,
        )
        return m

    def slow_target(m: Mirror) -> None:
        """The target producer, as the mirror uses it: sets the trigger once the phase's
        records were handed over, then fails (``exception``) or hangs (cancellations)."""
        producer = m._producer
        assert producer is not None
        enqueue = producer.enqueue

        async def watched(*args: Any, **kwargs: Any) -> Any:
            nonlocal handed
            leave_at = phase["leave_at"]
            if leave_at is not None and handed >= leave_at:
                phase["trigger"].set()
                if way == "exception":
                    raise TargetDown("the target refused the record")
                # Cancellations: cut short here. stop/close: held until asked (buffered
                # records are copied without a pause: the leaving task would come too late).
                await phase["hold"].wait()
            handed += 1
            return await enqueue(*args, **kwargs)

        producer.enqueue = watched  # type: ignore[method-assign]

    async def positions() -> dict[int, int]:
        if not exactly_once:
            return await committed_offsets(bootstrap, group, source)
        committed = await committed_offsets(bootstrap, group, target)  # (target topic, source partition)
        return {p: committed.get(p, 0) for p in range(PARTITIONS)}

    async def check_left() -> None:
        nonlocal leaves
        leaves += 1
        committed = await positions()
        copied = await read_target(bootstrap, target, sum(committed.values()))
        missing = [
            (p, o) for p in range(PARTITIONS) for o in range(committed[p]) if value_of(p, o) not in copied
        ]
        assert not missing, f"positions {committed} pass records not on the target: {missing[:5]}"
        covered = {value_of(p, o) for p in range(PARTITIONS) for o in range(committed[p])}
        may_repeat.update(set(copied) - covered)
        if exactly_once:
            assert set(copied) == covered and all(n == 1 for n in copied.values()), copied.most_common(3)

    with anyio.fail_after(120):
        async with mirror() as first:
            slow_target(first)  # (the fresh instance copies at full speed)
            for _ in range(1 if way == "close" else 2):
                trigger = new_phase(STEP)

                def stop(m: Mirror = first) -> None:
                    m.stop()
                    phase["hold"].set()

                async def close(m: Mirror = first) -> None:
                    phase["hold"].set()  # (close() sets the stop before run() resumes)
                    await m.close()

                left = await run_and_leave(way, first.run, trigger, stop=stop, close=close)
                _check_way_out(way, left)
                await check_left()
        assert handed < N
        async with mirror() as fresh:
            new_phase(None)
            async with anyio.create_task_group() as tg:
                tg.start_soon(fresh.run)
                while sum((await positions()).values()) < N:  # noqa: ASYNC110 (committed positions: a state)
                    await anyio.sleep(0.1)
                fresh.stop()
        assert sum((await positions()).values()) == N
        copied = await read_target(bootstrap, target, N)
    assert set(copied) == {str(i).encode() for i in range(N)}  # none lost
    repeated = {v for v, n in copied.items() if n > 1}
    if exactly_once:
        assert not repeated, sorted(repeated)[:5]
    else:
        assert repeated <= may_repeat, sorted(repeated - may_repeat)[:5]
        assert all(copied[v] <= 1 + leaves for v in repeated)
    return {"records": N, "on_target": len(copied), "repeated": len(repeated), "leaves": leaves}


def _check_way_out(way: str, left: Any) -> None:
    if way == "exception":  # the target's error comes out of run()
        assert isinstance(left.error, TargetDown), left
    elif way in ("cancel", "move_on"):
        assert left.cancelled and not left.returned and left.error is None, left
    elif way == "timeout":
        assert left.cancelled and isinstance(left.error, TimeoutError), left
    else:  # stop, close: run() flushes, commits and returns
        assert left.returned and left.error is None, left
