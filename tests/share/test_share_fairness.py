"""Fairness of ShareConsumer's ``async for``: serving a batch of acquired records never
keeps the event loop from other tasks, on asyncio and on trio.

A ticker task counts its own turns while the loop body (which never awaits) takes the
records of one large batch; the gaps between its turns are measured in records handed
out, not in seconds. The same loop with the turns switched off is the control: it shows
the batch was large enough for the measure to mean something (the ticker then gets no
turn for the whole batch).
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from _support.fairness import ticking, turn_gaps
from share_contract_lib import DEADLINE_S, FAST, names, prepare, produce

from aiokafka_lite.consume import fairness
from aiokafka_lite.consume.share import ShareConsumer

RECORDS = 4000


def busy_body(value: bytes | None) -> int:
    """A loop body of some 20 microseconds of synchronous work per record."""
    return sum(range(2000)) + len(value or b"")


async def longest_run_without_a_turn(bootstrap: str, topic: str, group: str) -> tuple[int, int]:
    """(records handed out, the longest run of them during which the ticker had no turn),
    over the first batch the consumer acquired."""
    turns_at: list[int] = []
    async with ShareConsumer(
        bootstrap, group_id=group, topics=topic, max_poll_records=RECORDS, **FAST
    ) as consumer:
        with anyio.fail_after(DEADLINE_S):
            # Wait until one ShareFetch holds every record, so the loop below serves
            # buffered records only.
            while consumer.metrics()["records_buffered"] < RECORDS:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        async with ticking() as ticker:
            async for record in consumer:
                busy_body(record.value)
                turns_at.append(ticker.turns)
                if len(turns_at) == RECORDS:
                    break
    _, longest = turn_gaps(turns_at)
    return len(turns_at), longest


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_for_over_a_large_batch_lets_other_tasks_run(
    kafka_bootstrap: str, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def both() -> tuple[tuple[int, int], tuple[int, int]]:
        topic, group = names("fair")
        await prepare(kafka_bootstrap, topic, group)
        await produce(kafka_bootstrap, topic, range(RECORDS))
        with_turns = await longest_run_without_a_turn(kafka_bootstrap, topic, group)
        topic, group = names("fair-off")
        await prepare(kafka_bootstrap, topic, group)
        await produce(kafka_bootstrap, topic, range(RECORDS))
        monkeypatch.setattr(fairness, "YIELD_INTERVAL_S", float("inf"))
        without = await longest_run_without_a_turn(kafka_bootstrap, topic, group)
        return with_turns, without

    (handed, longest), (handed_off, longest_off) = anyio.run(both, backend=backend)
    assert handed == handed_off == RECORDS
    # The control: without turns the ticker waits out (nearly) the whole batch.
    assert longest_off >= RECORDS * 3 // 4, longest_off
    # With them, ~3 ms of a ~20-microsecond body is some 150 records (more on a faster machine).
    assert longest < RECORDS // 3, longest
