"""The mirror as a process: Ctrl-C loses nothing, a crash (SIGKILL) loses nothing, and in
exactly-once mode duplicates nothing under read_committed; two instances share the work."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mirror_testlib import (
    FAST_SOURCE,
    MirrorProcess,
    SourceWriter,
    by_partition,
    committed,
    create_topics,
    end_offsets,
    produce,
    read_all,
    record_value,
    session_ms,
    wait_for,
)

from aiokafka_lite import TopicPartition
from aiokafka_lite.integrations.mirror import Mirror


def fast_args(cluster: Any) -> list[str]:
    return [
        "--refresh-interval-ms",
        "500",
        "--interval",
        "0.2",
        "-S",
        f"session_timeout_ms={session_ms(cluster)}",
        "-S",
        "heartbeat_interval_ms=200",
    ]


async def test_ctrl_c_commits_everything_read_and_a_restart_resumes(
    clusters: tuple[Any, Any], tmp_path: Path
) -> None:
    source, target = clusters
    await create_topics(source.bootstrap, {"events": 3})
    await produce(source.bootstrap, "events", 3, 100)
    tps = [TopicPartition("events", p) for p in range(3)]
    # Commits only at shutdown (the interval is far away): what Ctrl-C commits is all there is.
    args = [
        "--include",
        "events",
        "--group",
        "cli-mirror",
        "--commit-interval-ms",
        "600000",
        *fast_args(source),
    ]
    first = await MirrorProcess(source.bootstrap, target.bootstrap, *args, log_dir=tmp_path).start()

    async def copied(n: int) -> bool:
        try:
            return all(o == n for o in (await end_offsets(target.bootstrap, tps)).values())
        except Exception:
            return False  # the target topic is not there yet

    await wait_for(lambda: copied(100), "the first 300 records on the target")
    assert await committed(source.bootstrap, "cli-mirror", tps) == dict.fromkeys(tps, -1)
    assert await first.interrupt() == 130, first.log()
    assert await committed(source.bootstrap, "cli-mirror", tps) == dict.fromkeys(tps, 100)

    await produce(source.bootstrap, "events", 3, 50, start=100)
    second = await MirrorProcess(source.bootstrap, target.bootstrap, *args, log_dir=tmp_path).start()
    await wait_for(lambda: copied(150), "the next 150 records on the target")
    assert await second.interrupt() == 130, second.log()
    records = await read_all(target.bootstrap, "events", 450)
    # Nothing lost, nothing copied twice, order kept.
    assert by_partition(records) == {p: [record_value("events", p, i) for i in range(150)] for p in range(3)}
    # Progress went to stderr as plain lines (no terminal); the last one sums up each run.
    assert "300 records copied" in first.log().splitlines()[-1]
    assert "150 records copied" in second.log().splitlines()[-1]


async def test_exactly_once_crash_and_restart_neither_duplicates_nor_loses(
    clusters: tuple[Any, Any], tmp_path: Path
) -> None:
    source, target = clusters
    await create_topics(source.bootstrap, {"payments": 2})
    writer = SourceWriter(source.bootstrap, "payments", 2)
    writer.start()
    args = [
        "--include",
        "payments",
        "--exactly-once",
        "--instance-id",
        "solo",
        "--group",
        "eos-mirror",
        "--commit-interval-ms",
        "100",
        *fast_args(source),
    ]
    tps = [TopicPartition("payments", p) for p in range(2)]
    crashed = await MirrorProcess(source.bootstrap, target.bootstrap, *args, log_dir=tmp_path).start()

    async def some_committed() -> bool:
        try:
            return sum((await end_offsets(target.bootstrap, tps)).values()) > 200
        except Exception:
            return False

    await wait_for(some_committed, "the first transactions on the target")
    await crashed.kill()
    # The stream goes on while the mirror is down; the restarted instance (same
    # transactional id) fences the dead one, aborts its open transaction and resumes from
    # the position committed with the last transaction.
    restarted = await MirrorProcess(source.bootstrap, target.bootstrap, *args, log_dir=tmp_path).start()
    await asyncio.sleep(0.5)
    total = await writer.stop()
    records = await read_all(target.bootstrap, "payments", 2 * total, read_committed=True, timeout_s=90)
    assert await restarted.interrupt() == 130, restarted.log()
    assert by_partition(records) == writer.expected()


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
async def test_two_instances_share_the_work_and_one_crashing_loses_nothing(
    clusters: tuple[Any, Any], tmp_path: Path, exactly_once: bool
) -> None:
    source, target = clusters
    topic = f"jobs-{'eos' if exactly_once else 'alo'}"  # the shared source may still be deleting the other
    await create_topics(source.bootstrap, {topic: 4})
    writer = SourceWriter(source.bootstrap, topic, 4)
    writer.start()
    group = f"shared-{'eos' if exactly_once else 'alo'}"
    mode = ["--exactly-once", "--transaction-timeout-ms", "3000"] if exactly_once else []
    other = await MirrorProcess(
        source.bootstrap,
        target.bootstrap,
        "--include",
        topic,
        "--group",
        group,
        "--instance-id",
        "b",
        "--commit-interval-ms",
        "100",
        *mode,
        *fast_args(source),
        log_dir=tmp_path,
    ).start()
    mirror = Mirror(
        source.bootstrap,
        target.bootstrap,
        include=topic,
        group_id=group,
        instance_id="a",
        exactly_once=exactly_once,
        commit_interval_ms=100,
        transaction_timeout_ms=3000,
        refresh_interval_ms=500,
        source_options={**FAST_SOURCE, "session_timeout_ms": session_ms(source)},
    )
    async with mirror:
        task = asyncio.ensure_future(mirror.run())

        async def owned(n: int) -> bool:
            assert not task.done(), task
            return len(mirror.stats().partitions) == n

        # Both instances work: this one holds some partitions, the process the others.
        try:
            await wait_for(lambda: owned(2), "the partitions split 2/2 between the instances")
        except AssertionError as exc:
            exc.add_note(f"the other instance's output:\n{other.log()}")
            raise
        await wait_for(
            lambda: _target_has(target.bootstrap, topic, 4, 50), "both instances' records on the target"
        )
        await other.kill()
        await wait_for(lambda: owned(4), "the crashed instance's partitions moving here", timeout_s=90)
        total = await writer.stop()

        async def all_durable() -> bool:
            assert not task.done(), task
            return all(p.position == total for p in mirror.stats().partitions.values())

        # Everything durable first: at-least-once duplicates would otherwise reach the
        # expected count before the last records arrive.
        await wait_for(all_durable, "every record durable on the target", timeout_s=90)
        records = await read_all(
            target.bootstrap, topic, 4 * total, read_committed=exactly_once, timeout_s=90
        )
        mirror.stop()
        await task
    got = by_partition(records)
    expected = writer.expected()
    if exactly_once:
        assert got == expected
    else:
        # At-least-once: everything arrives, in order per key; the crashed instance's
        # uncommitted tail may arrive twice.
        for p, values in expected.items():
            assert set(got[p]) == set(values)
            assert list(dict.fromkeys(got[p])) == values


async def _target_has(bootstrap: str, topic: str, partitions: int, at_least: int) -> bool:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    try:
        return all(o >= at_least for o in (await end_offsets(bootstrap, tps)).values())
    except Exception:
        return False
