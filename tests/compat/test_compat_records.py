"""The compat layer's per-record objects: consumed records as views of the native ones,
``send()``'s future as the native per-record handle, and ``create_batch()``'s builder."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import uuid

from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.compat.aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka_lite.compat.aiokafka.producer.producer import BatchBuilder, BatchRecordMetadata
from aiokafka_lite.compat.aiokafka.structs import RecordMetadata, record_from_native, records_from_native
from aiokafka_lite.consume.record import Record
from aiokafka_lite.wire.records import TimestampType


def _native(
    offset: int, key: bytes | None, value: object, headers: tuple[tuple[str, bytes | None], ...] = ()
) -> Record:
    return Record("t", 2, offset, key, value, headers, 1_700_000_000_000, TimestampType.LOG_APPEND_TIME, 5)


def test_consumed_record_reads_like_aiokafkas_dataclass() -> None:
    rec = record_from_native(_native(7, b"k", b"value", (("h", b"v"),)))
    assert isinstance(rec, ConsumerRecord)
    assert (rec.topic, rec.partition, rec.offset, rec.key, rec.value) == ("t", 2, 7, b"k", b"value")
    assert rec.timestamp == 1_700_000_000_000 and rec.timestamp_type == 1
    assert rec.headers == (("h", b"v"),)  # aiokafka's consumer gives a tuple too
    assert (rec.checksum, rec.serialized_key_size, rec.serialized_value_size) == (None, 1, 5)
    plain = ConsumerRecord("t", 2, 7, 1_700_000_000_000, 1, b"k", b"value", None, 1, 5, (("h", b"v"),))
    assert dataclasses.asdict(rec) == dataclasses.asdict(plain)
    assert repr(rec) == repr(plain)
    assert pickle.loads(pickle.dumps(rec)).value == b"value"
    # a deserialized value has no serialized size the native record keeps
    assert record_from_native(_native(8, None, {"a": 1})).serialized_value_size == -1
    many = records_from_native([_native(i, None, b"x") for i in range(3)])
    assert [r.offset for r in many] == [0, 1, 2]


def test_batch_builder_counts_and_fills_like_aiokafkas() -> None:
    batch = BatchBuilder(200)
    first = batch.append(key=None, value=b"x" * 10, timestamp=None)
    assert first == BatchRecordMetadata(0, 32, -1) and first.crc is None
    assert batch.keys is None and batch.headers is None and batch.timestamps is None
    second = batch.append(key=b"k", value=b"y", timestamp=None, headers=[("h", b"v")])
    assert second is not None and second.offset == 1
    assert batch.keys == [None, b"k"] and batch.headers == [None, [("h", b"v")]]
    assert batch.append(key=None, value=b"z" * 500, timestamp=None) is None  # full
    assert batch.record_count() == 2
    timed = BatchBuilder(1000)
    for ts in (5, 5, 9):
        timed.append(key=None, value=b"v", timestamp=ts)
    assert timed.timestamps == [5, 5, 9]
    huge = BatchBuilder(10)
    assert huge.append(key=None, value=b"w" * 100, timestamp=None) is not None  # a first record always fits


async def test_send_futures_gather_and_batches_keep_timestamps(kafka_bootstrap: str) -> None:
    topic = f"compat-rec-{uuid.uuid4().hex[:8]}"
    async with Admin(kafka_bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 1, 1)])).raise_errors()
    tp = TopicPartition(topic, 0)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as producer:
        futures = [await producer.send(topic, b"%d" % i) for i in range(5)]
        assert all(isinstance(f, asyncio.Future) for f in futures)  # as aiokafka (FastStream checks it)
        results = await asyncio.gather(*futures)
        assert [md.offset for md in results] == [0, 1, 2, 3, 4]
        assert all(isinstance(md, RecordMetadata) and md.topic_partition == tp for md in results)
        assert (await asyncio.wait_for(await producer.send(topic, b"5"), 30)).offset == 5
        batch = producer.create_batch()
        for ts in (1_600_000_000_000, 1_600_000_001_000):
            assert batch.append(key=None, value=b"timed", timestamp=ts) is not None
        md = await (await producer.send_batch(batch, topic, partition=0))
        assert md.offset == 6
    async with AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        got: list[ConsumerRecord[bytes, bytes]] = []
        while len(got) < 8:
            got += (await consumer.getmany(timeout_ms=5000)).get(tp, [])
    assert [r.value for r in got[:6]] == [b"%d" % i for i in range(6)]
    assert [r.timestamp for r in got[6:]] == [1_600_000_000_000, 1_600_000_001_000]


async def test_getmany_without_max_poll_records_returns_everything_fetched(kafka_bootstrap: str) -> None:
    """aiokafka's ``max_poll_records=None`` (the default) puts no limit on ``getmany``;
    the native default (500) does not apply through the compat layer."""
    topic = f"compat-many-{uuid.uuid4().hex[:8]}"
    async with Admin(kafka_bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 1, 1)])).raise_errors()
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=50) as producer:
        for f in [await producer.send(topic, b"v") for _ in range(1200)]:
            await f
    tp = TopicPartition(topic, 0)
    async with AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest") as consumer:
        assert consumer._max_poll_records is None
        consumer.assign([tp])
        batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        while not batch:
            batch = await consumer.getmany(timeout_ms=5000)
        # one fetch (1 MiB per partition) holds all 1,200 records (12 KB)
        assert len(batch[tp]) == 1200
    async with AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest", max_poll_records=100
    ) as limited:
        limited.assign([tp])
        got = await limited.getmany(timeout_ms=5000)
        assert 0 < len(got[tp]) <= 100
