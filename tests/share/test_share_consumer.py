"""ShareConsumer against the embedded broker and Apache Kafka 4.4 (share groups on by
default there): every case runs on both (``share_broker``), the Apache run in every pass.

Share groups start at the latest offset unless the group says otherwise, so each test
sets ``share.auto.offset.reset=earliest`` on its group (a group config, through the
admin client) before producing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import textwrap
import uuid
from collections import Counter
from collections.abc import Mapping

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume.share import AcknowledgeType, ShareConsumer, ShareRecord
from aiokafka_lite.core.errors import IllegalStateError
from aiokafka_lite.processing import ShareWorkers
from aiokafka_lite.testing.apache import ApacheCluster

Broker = EmbeddedCluster | ApacheCluster


@pytest.fixture
def share_broker(kafka_cluster: Broker) -> Broker:
    """``kafka_cluster``: the embedded broker, or under --kafka=apache Apache Kafka (scripts/test.sh
    runs this module in its Apache 4.4 pass)."""
    return kafka_cluster


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:10]
    return f"share-t-{suffix}", f"share-g-{suffix}"


async def prepare(cluster: Broker, topic: str, group: str, records: int, **group_configs: str) -> None:
    cluster.create_topic(topic, partitions=1)
    configs: Mapping[str, str] = {"share.auto.offset.reset": "earliest", **group_configs}
    async with Admin(cluster.bootstrap) as admin:
        results = await admin.incremental_alter_configs({ConfigResource.group(group): dict(configs)})
        for result in results.values():
            assert result.error is None, result.error
    async with Producer(cluster.bootstrap) as producer:
        for i in range(records):
            await producer.send(topic, key=b"%d" % i, value=b"job-%d" % i)
        await producer.flush()


async def poll_until(consumer: ShareConsumer, want: int, within_s: float = 30.0) -> list[ShareRecord]:
    """Poll until ``want`` records came (implicit mode accepts them on the way)."""
    out: list[ShareRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while len(out) < want and loop.time() < deadline:
        out += await consumer.poll(timeout_ms=500)
    return out


async def test_three_consumers_accept_every_record_exactly_once(share_broker: Broker) -> None:
    topic, group = names()
    total = 300
    await prepare(share_broker, topic, group, total)
    seen: list[ShareRecord] = []
    done = asyncio.Event()

    async def member(consumer: ShareConsumer) -> None:
        while not done.is_set():
            for record in await consumer.poll(timeout_ms=300):
                seen.append(record)
            if len(seen) >= total:
                done.set()

    # record_limit acquisition (ShareFetch v2) hands out 20 at a time, so the members share the work.
    options = {"max_poll_records": 20, "share_acquire_mode": "record_limit"}
    consumers = [
        ShareConsumer(share_broker.bootstrap, group_id=group, topics=[topic], **options) for _ in range(3)
    ]
    for c in consumers:
        await c.start()
    try:
        async with asyncio.timeout(60):
            await asyncio.gather(*(member(c) for c in consumers))
    finally:
        for c in consumers:
            await c.close()  # accepts what the last poll returned, leaves the group
    offsets = Counter(r.offset for r in seen)
    assert sorted(offsets) == list(range(total))
    assert max(offsets.values()) == 1, [o for o, n in offsets.items() if n > 1]
    assert {r.delivery_count for r in seen} == {1}
    assert {r.value for r in seen} == {b"job-%d" % i for i in range(total)}
    # Everything was accepted: a new member of the group gets nothing.
    async with ShareConsumer(share_broker.bootstrap, group_id=group, topics=[topic]) as late:
        assert await poll_until(late, 1, within_s=8) == []


async def test_released_records_come_back_with_delivery_count_two_rejected_never(
    share_broker: Broker,
) -> None:
    topic, group = names()
    await prepare(share_broker, topic, group, 10)
    async with ShareConsumer(
        share_broker.bootstrap, group_id=group, topics=[topic], acknowledgement_mode="explicit"
    ) as consumer:
        first = await poll_until(consumer, 10)
        assert [r.offset for r in first] == list(range(10)) and {r.delivery_count for r in first} == {1}
        with pytest.raises(IllegalStateError, match="not acknowledged"):
            await consumer.poll(timeout_ms=0)
        with pytest.raises(IllegalStateError, match="explicit"):
            ShareConsumer(share_broker.bootstrap, group_id=group, topics=[topic]).acknowledge(first[0])
        for r in first:
            kind = {3: AcknowledgeType.RELEASE, 4: AcknowledgeType.RELEASE, 5: AcknowledgeType.REJECT}
            consumer.acknowledge(r, kind.get(r.offset, AcknowledgeType.ACCEPT))
        with pytest.raises(IllegalStateError, match="already acknowledged"):
            consumer.acknowledge(first[0], AcknowledgeType.ACCEPT)
        failures = await consumer.commit()
        assert failures == {(topic, 0): None}
        again = await poll_until(consumer, 2)
        assert [(r.offset, r.delivery_count, r.value) for r in again] == [(3, 2, b"job-3"), (4, 2, b"job-4")]
        for r in again:
            consumer.acknowledge(r)
        assert await consumer.commit() == {(topic, 0): None}
        # Rejected offset 5 is archived: never delivered again.
        assert await poll_until(consumer, 1, within_s=3) == []


async def test_delivery_limit_archives_a_poison_record(share_broker: Broker) -> None:
    topic, group = names()
    await prepare(share_broker, topic, group, 3, **{"share.delivery.count.limit": "2"})
    deliveries: list[tuple[int, int]] = []
    async with ShareConsumer(
        share_broker.bootstrap, group_id=group, topics=[topic], acknowledgement_mode="explicit"
    ) as consumer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        accepted: set[int] = set()
        while loop.time() < deadline and (len(accepted) < 2 or len(deliveries) < 4):
            for r in await consumer.poll(timeout_ms=500):
                deliveries.append((r.offset, r.delivery_count))
                if r.offset == 1:  # the poison job: its handler always fails
                    consumer.acknowledge(r, AcknowledgeType.RELEASE)
                else:
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                    accepted.add(r.offset)
            await consumer.commit()
        # After its second failed delivery the broker archives it: nothing comes back.
        assert await poll_until(consumer, 1, within_s=3) == []
    assert accepted == {0, 2}
    assert sorted(d for d in deliveries if d[0] == 1) == [(1, 1), (1, 2)]


_KILLED_MEMBER = textwrap.dedent(
    """
    import asyncio, json, sys
    from aiokafka_lite.consume.share import ShareConsumer

    async def main():
        consumer = ShareConsumer(sys.argv[1], group_id=sys.argv[2], topics=[sys.argv[3]],
                                 acknowledgement_mode="explicit")
        await consumer.start()
        held = []
        while not held:
            held = await consumer.poll(timeout_ms=500)
        print(json.dumps([r.offset for r in held]), flush=True)
        await asyncio.sleep(3600)  # holds the records until killed

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(
    "how",
    [signal.SIGKILL, signal.SIGSTOP],
    ids=["killed-connections-dropped", "frozen-connections-open-locks-expire"],
)
async def test_lost_member_records_go_to_another_member(share_broker: Broker, how: signal.Signals) -> None:
    """A killed member's connections drop (the broker releases its records at once); a
    frozen one keeps them open, so its records come back only when their locks expire."""
    topic, group = names()
    # 15 s is the shortest lock a group may ask for with the broker's default bounds.
    await prepare(share_broker, topic, group, 5, **{"share.record.lock.duration.ms": "15000"})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _KILLED_MEMBER,
        share_broker.bootstrap,
        group,
        topic,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        held = json.loads(line)
        assert held == [0, 1, 2, 3, 4]
    finally:
        proc.send_signal(how)  # no acknowledgement, no leave
    try:
        async with ShareConsumer(share_broker.bootstrap, group_id=group, topics=[topic]) as survivor:
            got = await poll_until(survivor, 5, within_s=45)
    finally:
        with contextlib.suppress(ProcessLookupError):  # already gone when it was killed
            proc.kill()
        await proc.wait()
    assert [(r.offset, r.delivery_count) for r in got] == [(o, 2) for o in held]


async def test_share_workers_route_failing_records_to_the_dead_letter_topic(
    share_broker: Broker,
) -> None:
    topic, group = names()
    dlt = topic + ".dlt"
    total = 40
    await prepare(share_broker, topic, group, total)
    share_broker.create_topic(dlt, partitions=1)
    poison = {7, 19, 33}
    attempts: Counter[int] = Counter()
    done: set[int] = set()

    async def handle(record: ShareRecord) -> None:
        attempts[record.offset] += 1
        await asyncio.sleep(0.01)
        if record.offset in poison:
            raise ValueError(f"cannot process job {record.offset}")
        done.add(record.offset)

    async with (
        ShareConsumer(
            share_broker.bootstrap, group_id=group, topics=[topic], acknowledgement_mode="explicit"
        ) as consumer,
        Producer(share_broker.bootstrap) as producer,
    ):
        workers = ShareWorkers(
            consumer,
            handle,
            concurrency=4,
            max_in_flight=8,
            max_attempts=2,
            dead_letter_topic=dlt,
            producer=producer,
        )
        runner = asyncio.create_task(workers.run())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while (
            len(done) < total - len(poison) or workers.stats.dead_lettered < len(poison)
        ) and loop.time() < deadline:
            await asyncio.sleep(0.1)
            assert workers.in_flight <= 8
        workers.stop()
        await runner
        failures = await consumer.commit()
        assert all(err is None for err in failures.values()), failures
    assert done == set(range(total)) - poison
    assert {o: attempts[o] for o in poison} == dict.fromkeys(poison, 2)
    assert workers.stats.rejected == len(poison) and workers.stats.dead_lettered == len(poison)
    async with Consumer(share_broker.bootstrap, topics=[dlt], auto_offset_reset="earliest") as reader:
        letters = []
        deadline = asyncio.get_running_loop().time() + 20
        while len(letters) < len(poison) and asyncio.get_running_loop().time() < deadline:
            for batch in (await reader.getmany(timeout_ms=500)).values():
                letters += batch
    by_offset = {int(dict(r.headers)["dlt.offset"] or b"-1"): r for r in letters}
    assert set(by_offset) == poison
    for offset, r in by_offset.items():
        headers = dict(r.headers)
        assert r.value == b"job-%d" % offset and r.key == b"%d" % offset
        assert headers["dlt.error"] == f"cannot process job {offset}".encode()
        assert headers["dlt.error.type"] == b"ValueError" and headers["dlt.topic"] == topic.encode()
        assert headers["dlt.delivery.count"] == b"2"
