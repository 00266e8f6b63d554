"""Transactions across clients: confluent-kafka (librdkafka) and aiokafka_lite agree on
what a read_committed consumer sees, whichever of them wrote the transactions."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from _support.reading import read_topic
from txn_testlib import threaded_cluster

from aiokafka_lite import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.interop

TOPIC = "xtxn"
PARTS = 3


def confluent_read(bootstrap: str, isolation: str, topic: str = TOPIC) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record librdkafka delivers at ``isolation``
    up to the end of each partition."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError
    from confluent_kafka import Consumer as CConsumer
    from confluent_kafka import TopicPartition as CTP

    c = CConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([CTP(topic, p, OFFSET_BEGINNING) for p in range(PARTS)])
        out: list[tuple[int, int, bytes]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while len(at_end) < PARTS:
            assert time.monotonic() < deadline, f"confluent {isolation} reader did not reach the end"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            out.append((m.partition(), m.offset(), m.value()))
        return sorted(out)
    finally:
        c.close()


async def ours(bootstrap: str, isolation: str) -> list[tuple[int, int, bytes]]:
    return sorted(
        (r.partition, r.offset, r.value) for r in await read_topic(bootstrap, TOPIC, PARTS, isolation)
    )


async def test_confluent_readers_agree_with_ours_on_our_transactions(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_threaded_cluster_factory: Any
) -> None:
    tc = threaded_cluster(request, {TOPIC: PARTS}, brokers=3)
    bs = tc.bootstrap
    async with Producer(bs, transactional_id="ours-tx", linger_ms=1) as p:
        async with p.transaction():
            await p.send_batch(TOPIC, [b"committed-%d" % i for i in range(60)])
        await p.begin_transaction()
        await p.send_batch(TOPIC, [b"aborted-%d" % i for i in range(40)])
        await p.abort_transaction()
        async with p.transaction():
            await p.send_batch(TOPIC, [b"committed2-%d" % i for i in range(30)])
        await p.begin_transaction()
        await p.send_batch(TOPIC, [b"open-%d" % i for i in range(10)])

        rc_theirs = await asyncio.to_thread(confluent_read, bs, "read_committed")
        ru_theirs = await asyncio.to_thread(confluent_read, bs, "read_uncommitted")
        assert rc_theirs == await ours(bs, "read_committed")
        assert ru_theirs == await ours(bs, "read_uncommitted")
        assert sorted(v for _, _, v in rc_theirs) == sorted(
            [b"committed-%d" % i for i in range(60)] + [b"committed2-%d" % i for i in range(30)]
        )
        assert len(ru_theirs) == 140

        await p.commit_transaction()
    rc_theirs = await asyncio.to_thread(confluent_read, bs, "read_committed")
    assert rc_theirs == await ours(bs, "read_committed")
    assert len(rc_theirs) == 100


async def test_we_read_confluent_transactions(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_threaded_cluster_factory: Any
) -> None:
    from confluent_kafka import Producer as CProducer

    tc = threaded_cluster(request, {TOPIC: PARTS})
    bs = tc.bootstrap

    def write() -> None:
        p = CProducer({"bootstrap.servers": bs, "transactional.id": "theirs-tx", "linger.ms": 2})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(50):
            p.produce(TOPIC, key=b"%d" % i, value=b"c-%d" % i)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(25):
            p.produce(TOPIC, key=b"%d" % i, value=b"a-%d" % i)
        p.flush(30)
        p.abort_transaction(30)
        p.begin_transaction()
        for i in range(5):
            p.produce(TOPIC, key=b"%d" % i, value=b"c2-%d" % i)
        p.commit_transaction(30)

    await asyncio.to_thread(write)
    rc = await ours(bs, "read_committed")
    ru = await ours(bs, "read_uncommitted")
    assert sorted(v for _, _, v in rc) == sorted(
        [b"c-%d" % i for i in range(50)] + [b"c2-%d" % i for i in range(5)]
    )
    assert sorted(v for _, _, v in ru) == sorted(
        [b"c-%d" % i for i in range(50)] + [b"a-%d" % i for i in range(25)] + [b"c2-%d" % i for i in range(5)]
    )
    assert rc == await asyncio.to_thread(confluent_read, bs, "read_committed")
    # Markers occupy offsets but never surface.
    hw = sum(tc.call(lambda c, p=p: c.high_watermark(TOPIC, p)) for p in range(PARTS))
    assert hw > len(ru)


async def test_confluent_consumer_starts_from_offsets_we_committed_in_a_transaction(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_threaded_cluster_factory: Any
) -> None:
    from confluent_kafka import Consumer as CConsumer

    tc = threaded_cluster(request, {TOPIC: PARTS, "src": 1})
    bs = tc.bootstrap
    async with Producer(bs, transactional_id="ours-offsets") as p:
        async with p.transaction():
            await p.send(TOPIC, b"x")
            await p.send_offsets_to_transaction({TopicPartition("src", 0): 4}, "shared-group")
        await p.begin_transaction()
        await p.send_offsets_to_transaction({TopicPartition("src", 0): 99}, "shared-group")
        await p.abort_transaction()

    def committed() -> int:
        from confluent_kafka import TopicPartition as CTP

        c = CConsumer({"bootstrap.servers": bs, "group.id": "shared-group", "enable.auto.commit": False})
        try:
            (tp,) = c.committed([CTP("src", 0)], timeout=10)
            return int(tp.offset)
        finally:
            c.close()

    assert await asyncio.to_thread(committed) == 4
    async with Consumer(bs, group_id="shared-group", enable_auto_commit=False) as ours_c:
        assert await ours_c.committed(TopicPartition("src", 0)) == 4
