"""The aiokafka compatibility layer on the suite's broker (embedded, or --kafka=apache)."""

from __future__ import annotations

import sys
import uuid

import pytest

from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.compat.aiokafka import (
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    TopicPartition,
)
from aiokafka_lite.compat.aiokafka import errors as Errors
from aiokafka_lite.compat.aiokafka.structs import RecordMetadata
from aiokafka_lite.core import errors as E


async def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"compat-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(name, partitions, 1)])).raise_errors()
    return name


async def test_send_forms_and_getmany(kafka_bootstrap: str) -> None:
    topic = await _topic(kafka_bootstrap)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, value_serializer=str.encode)
    await producer.start()
    try:
        fut = await producer.send(topic, "a", key=b"k", headers=[("h", b"v")])
        md = await fut
        assert (
            isinstance(md, RecordMetadata)
            and md.offset == 0
            and md.topic_partition == TopicPartition(topic, 0)
        )
        md2 = await producer.send_and_wait(topic, "b")
        assert md2.offset == 1
        batch = producer.create_batch()
        for i in range(3):
            assert batch.append(key=None, value=f"c{i}".encode(), timestamp=None) is not None
        md3 = await (await producer.send_batch(batch, topic, partition=0))
        assert md3.offset == 2
        assert await producer.partitions_for(topic) == {0}
    finally:
        await producer.stop()
    assert producer._closed
    with pytest.raises(Errors.ProducerClosed):
        await producer.send(topic, "late")

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        got: list[ConsumerRecord[bytes, bytes]] = []
        while len(got) < 5:
            for records in (await consumer.getmany(timeout_ms=5000)).values():
                got.extend(records)
        assert [r.value for r in got] == [b"a", b"b", b"c0", b"c1", b"c2"]
        assert got[0].key == b"k" and got[0].headers == (("h", b"v"),) and got[0].timestamp > 0
        tp = TopicPartition(topic, 0)
        assert await consumer.position(tp) == 5
        assert consumer.highwater(tp) == 5
        assert await consumer.end_offsets([tp]) == {tp: 5}
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        consumer.seek(tp, 1)
        assert (await consumer.getone()).offset == 1
        await consumer.seek_to_beginning(tp)
        assert (await consumer.getone()).offset == 0
        with pytest.raises(Errors.IllegalOperation):
            await consumer.commit()
    finally:
        await consumer.stop()
    with pytest.raises(Errors.ConsumerStoppedError):
        await consumer.getone()


class _Listener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.assigned: list[set[TopicPartition]] = []

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assigned.append(set(assigned))


async def test_break_out_of_async_for_then_commit_covers_only_received(kafka_bootstrap: str) -> None:
    topic = await _topic(kafka_bootstrap)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as producer:
        for i in range(10):
            await producer.send(topic, str(i).encode())
        await producer.flush()
    group = f"g-{uuid.uuid4().hex[:8]}"
    listener = _Listener()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.subscribe([topic], listener=listener)
    await consumer.start()
    try:
        received = []
        async for record in consumer:
            received.append(record.offset)
            if len(received) == 4:
                break
        await consumer.commit()
        tp = TopicPartition(topic, 0)
        assert await consumer.committed(tp) == 4
        assert listener.assigned and tp in listener.assigned[-1]
        assert consumer._group_id == group
        assert consumer._subscription.topics == {topic}
        assert consumer._coordinator.member_id
        await consumer.commit({tp: 6})
        assert await consumer.committed(tp) == 6
    finally:
        await consumer.stop()


async def test_transaction_context_commits_and_aborts(kafka_bootstrap: str) -> None:
    topic = await _topic(kafka_bootstrap)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id=f"t-{uuid.uuid4().hex[:6]}"
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(topic, b"committed")
        with pytest.raises(RuntimeError):
            async with producer.transaction():
                await producer.send(topic, b"aborted")
                raise RuntimeError("boom")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        values = []
        while consumer.last_stable_offset(tp) is None or await consumer.position(tp) < (
            consumer.last_stable_offset(tp) or 0
        ):
            for records in (await consumer.getmany(timeout_ms=2000)).values():
                values.extend(r.value for r in records)
        assert values == [b"committed"]
    finally:
        await consumer.stop()


def test_errors_are_the_native_classes() -> None:
    assert Errors.TopicAlreadyExistsError is E.TopicAlreadyExistsError
    assert Errors.ProducerFenced is E.ProducerFencedError
    assert Errors.for_code(36) is E.TopicAlreadyExistsError
    assert not issubclass(Errors.ConsumerStoppedError, Errors.KafkaError)


def test_subscribe_needs_topics_or_pattern_and_a_listener_subclass() -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(Errors.IllegalStateError):
        consumer.subscribe()
    with pytest.raises(TypeError):
        consumer.subscribe(["t"], listener=object())  # type: ignore[arg-type]


def test_install_aliases_aiokafka_and_refuses_the_real_one() -> None:
    from aiokafka_lite import compat

    saved = {n: m for n, m in sys.modules.items() if n == "aiokafka" or n.startswith("aiokafka.")}
    for name in saved:
        del sys.modules[name]
    try:
        compat.install()
        import aiokafka
        from aiokafka.producer.producer import _missing

        assert aiokafka.AIOKafkaProducer is AIOKafkaProducer
        assert _missing is not None
        compat.uninstall()
        assert "aiokafka" not in sys.modules
        sys.modules["aiokafka"] = type(sys)("aiokafka")  # stands for the real package
        with pytest.raises(E.IllegalStateError, match="already imported"):
            compat.install()
    finally:
        compat.uninstall()
        for name in [n for n in sys.modules if n == "aiokafka" or n.startswith("aiokafka.")]:
            del sys.modules[name]
        sys.modules.update(saved)
