"""Share-partition state and share-group configs survive a crash (SIGKILL) of an embedded
broker process with a data dir, as the logs and committed offsets do: what a consumer was
told (accepted, released, rejected, delivery counts) holds after the restart, and the
records it held when the broker died come back to the next consumer."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from aiokafka_lite import NewTopic, Producer
from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.consume.share import AcknowledgeType, ShareConsumer, ShareRecord
from aiokafka_lite.core.structs import TopicPartition


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise AssertionError(f"broker did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


async def poll_until(consumer: ShareConsumer, want: int, within_s: float = 20.0) -> list[ShareRecord]:
    out: list[ShareRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while len(out) < want and loop.time() < deadline:
        out += await consumer.poll(timeout_ms=300)
    return out


async def test_share_state_survives_a_killed_broker(tmp_path: Path) -> None:
    proc, bootstrap = start_broker(tmp_path)
    try:
        async with Admin(bootstrap) as admin:
            (await admin.create_topics([NewTopic("jobs", 1)])).raise_errors()
            configs = {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "3"}
            (await admin.incremental_alter_configs({ConfigResource.group("g"): configs})).raise_errors()
            # A group no member ever joins: its configs are kept too.
            idle = {ConfigResource.group("idle"): {"share.record.lock.duration.ms": "20000"}}
            (await admin.incremental_alter_configs(idle)).raise_errors()
        async with Producer(bootstrap) as producer:
            await producer.send_batch("jobs", [b"job-%d" % i for i in range(10)])
        consumer = ShareConsumer(bootstrap, group_id="g", topics=["jobs"], acknowledgement_mode="explicit")
        await consumer.start()
        got = await poll_until(consumer, 10)
        assert [(r.offset, r.delivery_count) for r in got] == [(o, 1) for o in range(10)]
        for r in got[:7]:
            consumer.acknowledge(r, AcknowledgeType.REJECT if r.offset in (2, 5) else AcknowledgeType.ACCEPT)
        assert await consumer.commit() == {("jobs", 0): None}
        # Offsets 7..9 are still held (acquired, locked) when the broker dies. (A record
        # released here could be fetched again before the kill: its count would vary.)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        await consumer.close(timeout_ms=500)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    proc, bootstrap = start_broker(tmp_path)
    try:
        async with Admin(bootstrap) as admin:
            described = await admin.describe_configs([ConfigResource.group("idle")])
            assert described[ConfigResource.group("idle")].value("share.record.lock.duration.ms") == "20000"
        async with ShareConsumer(
            bootstrap, group_id="g", topics=["jobs"], acknowledgement_mode="explicit"
        ) as consumer:
            again = await poll_until(consumer, 3)
            # Accepted and rejected records stay done; the held 7..9 come back, their first
            # delivery counted.
            assert [(r.offset, r.delivery_count, r.value) for r in again] == [
                (o, 2, b"job-%d" % o) for o in (7, 8, 9)
            ]
            for r in again:
                consumer.acknowledge(r, AcknowledgeType.RELEASE)
            assert await consumer.commit() == {("jobs", 0): None}
            third = await poll_until(consumer, 3)
            assert [(r.offset, r.delivery_count) for r in third] == [(o, 3) for o in (7, 8, 9)]
            for r in third:
                consumer.acknowledge(r, AcknowledgeType.RELEASE)
            assert await consumer.commit() == {("jobs", 0): None}
            # The group's delivery limit (3, a config set before the crash) archives them.
            assert await poll_until(consumer, 1, within_s=3) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


async def test_admin_changes_to_share_state_survive_a_killed_broker(tmp_path: Path) -> None:
    """AlterShareGroupOffsets and DeleteGroups change share-partition state too: a broker
    killed after answering them must not bring the old state back."""
    proc, bootstrap = start_broker(tmp_path)
    try:
        async with Admin(bootstrap) as admin:
            (await admin.create_topics([NewTopic("jobs", 1)])).raise_errors()
            earliest = {"share.auto.offset.reset": "earliest"}
            changes = {ConfigResource.group("moved"): earliest, ConfigResource.group("deleted"): earliest}
            (await admin.incremental_alter_configs(changes)).raise_errors()
            async with Producer(bootstrap) as producer:
                await producer.send_batch("jobs", [b"job-%d" % i for i in range(5)])
            for group in ("moved", "deleted"):
                async with ShareConsumer(bootstrap, group_id=group, topics=["jobs"]) as consumer:
                    assert len(await poll_until(consumer, 5)) == 5  # accepted at close
            (await admin.alter_share_group_offsets("moved", {TopicPartition("jobs", 0): 2})).raise_errors()
            (await admin.delete_share_groups(["deleted"])).raise_errors()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    proc, bootstrap = start_broker(tmp_path)
    try:
        for group, offsets in (("moved", [2, 3, 4]), ("deleted", [0, 1, 2, 3, 4])):
            async with ShareConsumer(bootstrap, group_id=group, topics=["jobs"]) as consumer:
                got = await poll_until(consumer, len(offsets))
                assert [(r.offset, r.delivery_count) for r in got] == [(o, 1) for o in offsets], group
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
