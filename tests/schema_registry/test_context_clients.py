"""The serializer sees its context, through the clients (the embedded broker, or Apache Kafka with
--kafka=apache): the topic, key or value, and the headers (appendable producing, readable consuming)
for Producer.send/enqueue/send_batch/transactions, Consumer async for/getone/getmany, ShareConsumer
and the workers' dead letters; a schema not cached yet is resolved on the async path while the event
loop keeps running; header-based schema ids round-trip with confluent-kafka's serializers used
directly as a client's (de)serializer."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import anyio
import pytest

from aiokafka_lite import Admin, Consumer, NewTopic, Producer
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.consume.share import ShareConsumer
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.integrations.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    SchemaRegistryClient,
)
from aiokafka_lite.processing import OrderedWorkers
from schema_registry.context_lib import ContextReader, GatedClient, TaggingSerializer
from schema_registry.test_referee_confluent import USER_AVRO, avro_user

POINT = json.dumps({"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]})
FAST: dict[str, Any] = {"retry_backoff_ms": 10, "retry_backoff_max_ms": 100}
_counter = itertools.count()


def _name(kind: str) -> str:
    return f"ctx-{kind}-{os.getpid()}-{next(_counter)}"


async def _topics(bootstrap: str, *names: str, partitions: int = 1) -> None:
    async with Admin(bootstrap, **FAST) as admin:
        (
            await admin.create_topics(
                [NewTopic(n, partitions=partitions, replication_factor=1) for n in names]
            )
        ).raise_errors()


async def _read(bootstrap: str, topic: str, count: int, **options: Any) -> list[Any]:
    got: list[Any] = []
    async with Consumer(
        bootstrap, topics=topic, group_id=_name("g"), auto_offset_reset="earliest", **FAST, **options
    ) as consumer:
        with anyio.fail_after(120):
            async for record in consumer:
                got.append(record)
                if len(got) == count:
                    break
    return got


async def test_producer_paths_hand_the_serializer_its_context(kafka_bootstrap: str) -> None:
    topic = _name("produce")
    await _topics(kafka_bootstrap, topic)
    keys, values = TaggingSerializer(), TaggingSerializer()
    async with Producer(kafka_bootstrap, key_serializer=keys, value_serializer=values, **FAST) as producer:
        await producer.send(topic, "send", key="k0", headers=[("h", b"given")])
        await (await producer.enqueue(topic, "enqueue", key="k1"))
        await producer.send_batch(topic, ["b0", "b1"], keys=["k2", "k3"], headers=[[("h", b"x")], None])
        await producer.send(topic, "no-key")
    # The key's serializer runs first; the value's sees the header it added, after the caller's.
    assert keys.seen[0] == (topic, "key", [("h", b"given")])
    assert values.seen[0] == (topic, "value", [("h", b"given"), ("by-key-serializer", topic.encode())])
    assert [f for _, f, _ in keys.seen] == ["key"] * 4 and len(values.seen) == 5
    assert values.seen[-1] == (topic, "value", [])  # no key: the key serializer is not called
    records = await _read(kafka_bootstrap, topic, 5)
    assert [r.value for r in records] == [b"send", b"enqueue", b"b0", b"b1", b"no-key"]
    first = dict(records[0].headers)
    assert first == {
        "h": b"given",
        "by-key-serializer": topic.encode(),
        "by-value-serializer": topic.encode(),
    }
    assert dict(records[4].headers) == {"by-value-serializer": topic.encode()}


async def test_transactional_sends_see_their_context(kafka_bootstrap: str) -> None:
    topic = _name("txn")
    await _topics(kafka_bootstrap, topic)
    values = TaggingSerializer()
    async with Producer(
        kafka_bootstrap, transactional_id=_name("tx"), value_serializer=values, **FAST
    ) as producer:
        async with producer.transaction():
            await producer.send(topic, "in-txn")
            await producer.send_batch(topic, ["a", "b"])
    assert [s[:2] for s in values.seen] == [(topic, "value")] * 3
    records = await _read(kafka_bootstrap, topic, 3, isolation_level="read_committed")
    assert all(dict(r.headers) == {"by-value-serializer": topic.encode()} for r in records)


async def test_consumer_paths_hand_the_deserializer_its_context(kafka_bootstrap: str) -> None:
    topic = _name("consume")
    await _topics(kafka_bootstrap, topic)
    async with Producer(kafka_bootstrap, **FAST) as producer:
        for i in range(6):
            await producer.send(
                topic, f"v{i}".encode(), key=f"k{i}".encode(), headers=[("n", str(i).encode())]
            )
    # A context deserializer beside a plain one: the plain one keeps its one-argument call.
    reader = ContextReader()
    async with Consumer(
        kafka_bootstrap,
        topics=topic,
        group_id=_name("g"),
        auto_offset_reset="earliest",
        key_deserializer=bytes.decode,
        value_deserializer=reader,
        **FAST,
    ) as consumer:
        with anyio.fail_after(120):
            first = await consumer.getone()
            rest: list[Any] = []
            while len(rest) < 3:
                for recs in (await consumer.getmany(timeout_ms=1000, max_records=3 - len(rest))).values():
                    rest += recs
            async for record in consumer:
                rest.append(record)
                if len(rest) == 5:
                    break
    for i, record in enumerate([first, *rest]):
        assert record.key == f"k{i}"
        assert record.value == (topic, "value", {"n": str(i).encode()}, f"v{i}")


async def _share_group_from_earliest(bootstrap: str, group: str) -> None:
    resource = ConfigResource.group(group)
    async with Admin(bootstrap, **FAST) as admin:
        (
            await admin.incremental_alter_configs({resource: {"share.auto.offset.reset": "earliest"}})
        ).raise_errors()
        with anyio.fail_after(60):  # Kafka applies a group config a moment after answering
            while (await admin.describe_configs([resource])).raise_errors()[resource].value(  # noqa: ASYNC110
                "share.auto.offset.reset"
            ) != "earliest":
                await anyio.sleep(0.1)


async def test_share_consumer_hands_the_deserializer_its_context(kafka_bootstrap: str) -> None:
    topic, group = _name("share"), _name("sg")
    await _topics(kafka_bootstrap, topic)
    await _share_group_from_earliest(kafka_bootstrap, group)
    async with Producer(kafka_bootstrap, **FAST) as producer:
        await producer.send_batch(
            topic, [b"a", b"b"], keys=[b"ka", b"kb"], headers=[[("n", b"0")], [("n", b"1")]]
        )
    got: list[Any] = []
    async with ShareConsumer(
        kafka_bootstrap, group_id=group, topics=topic, key_deserializer=ContextReader(), **FAST
    ) as consumer:
        with anyio.fail_after(120):
            async for record in consumer:
                got.append(record)
                if len(got) == 2:
                    break
    assert [(r.key, r.value) for r in sorted(got, key=lambda r: r.offset)] == [
        ((topic, "key", {"n": b"0"}, "ka"), b"a"),
        ((topic, "key", {"n": b"1"}, "kb"), b"b"),
    ]


async def test_workers_dead_letters_go_through_the_context_serializer(kafka_bootstrap: str) -> None:
    topic, dlt = _name("work"), _name("dlt")
    await _topics(kafka_bootstrap, topic, dlt)
    async with Producer(kafka_bootstrap, **FAST) as producer:
        await producer.send(topic, b"bad", headers=[("by-value-serializer", b"stale")])
    handled: list[Any] = []

    async def handle(record: Any) -> None:
        handled.append(record.value)
        raise ValueError("refused")

    values = TaggingSerializer()
    async with (
        Consumer(
            kafka_bootstrap,
            topics=topic,
            group_id=_name("g"),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            value_deserializer=ContextReader(),
            **FAST,
        ) as consumer,
        Producer(kafka_bootstrap, value_serializer=values, **FAST) as dlt_producer,
    ):
        workers = OrderedWorkers(
            consumer, handle, on_failure="skip", dead_letter_topic=dlt, producer=dlt_producer
        )
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(workers.run)
                dead_letter = await _read(kafka_bootstrap, dlt, 1)
                workers.stop()
    assert handled == [(topic, "value", {"by-value-serializer": b"stale"}, "bad")]
    # The dead letter's serializer saw the DLT topic and the copied headers (dlt.* included).
    (seen_topic, field, headers) = values.seen[0]
    assert (seen_topic, field) == (dlt, "value")
    assert ("dlt.topic", topic.encode()) in headers
    assert dict(dead_letter[0].headers)["by-value-serializer"] == dlt.encode()


async def test_a_schema_not_cached_is_resolved_while_the_loop_runs(
    kafka_bootstrap: str, schema_registry_url: str
) -> None:
    """The registry answers only once another task has run (it opens the gate): a send whose
    schema is not cached waits on the registry without blocking the event loop; then the cached
    path makes no registry call. Same for the consumer's first record of an unseen schema id, and
    a getone cancelled while it waits has taken nothing."""
    topic = _name("gated")
    await _topics(kafka_bootstrap, topic)
    asked, gate = anyio.Event(), anyio.Event()
    async with GatedClient(schema_registry_url, asked, gate) as client:
        serializer = AvroSerializer(client, POINT)
        async with Producer(kafka_bootstrap, value_serializer=serializer, **FAST) as producer:

            async def open_gate() -> None:
                await asked.wait()  # the send is waiting for the registry, and this task runs
                gate.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(open_gate)
                with anyio.fail_after(60):
                    await producer.send(topic, {"x": 1})
            assert client.calls == 1
            await producer.send(topic, {"x": 2})  # cached: the sync path
            await producer.send_batch(topic, [{"x": 3}])
            assert client.calls == 1

    asked, gate = anyio.Event(), anyio.Event()
    async with GatedClient(schema_registry_url, asked, gate) as client:
        async with Consumer(
            kafka_bootstrap,
            topics=topic,
            group_id=_name("g"),
            auto_offset_reset="earliest",
            value_deserializer=AvroDeserializer(client),
            **FAST,
        ) as consumer:
            with anyio.CancelScope() as scope:

                async def cancel_when_asked() -> None:
                    await asked.wait()
                    scope.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_when_asked)
                    await consumer.getone()  # cancelled while the schema is fetched
                    pytest.fail("getone returned before the registry answered")
            assert scope.cancelled_caught
            gate.set()
            with anyio.fail_after(60):
                got = [await consumer.getone() for _ in range(3)]
    assert [r.value for r in got] == [{"x": 1}, {"x": 2}, {"x": 3}]
    assert got[0].offset == 0  # the cancelled getone took nothing


async def test_header_schema_ids_round_trip_with_confluent_kafka(
    kafka_bootstrap: str, schema_registry_url: str
) -> None:
    """Ours with the schema id in a header -> Kafka -> confluent-kafka's AvroDeserializer (used
    directly as our consumer's deserializer, through the adapter), and confluent-kafka's
    AvroSerializer writing the header (directly as our producer's serializer) -> our deserializer."""
    pytest.importorskip("confluent_kafka.schema_registry.avro")
    from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient
    from confluent_kafka.schema_registry import header_schema_id_serializer
    from confluent_kafka.schema_registry.avro import AvroDeserializer as TheirAvroDeserializer
    from confluent_kafka.schema_registry.avro import AvroSerializer as TheirAvroSerializer

    ours_topic, theirs_topic = _name("ours-hdr"), _name("theirs-hdr")
    await _topics(kafka_bootstrap, ours_topic, theirs_topic)
    their_client = TheirClient({"url": schema_registry_url})
    records = [avro_user(i) for i in range(5)]  # confluent-kafka refuses payloads of 5 bytes or fewer
    async with SchemaRegistryClient(schema_registry_url) as client:
        async with Producer(
            kafka_bootstrap,
            value_serializer=AvroSerializer(client, USER_AVRO, schema_id_in_header=True),
            **FAST,
        ) as producer:
            await producer.send_batch(ours_topic, records)
        got = await _read(
            kafka_bootstrap, ours_topic, 5, value_deserializer=TheirAvroDeserializer(their_client)
        )
        assert [r.value for r in got] == records
        assert all(dict(r.headers)["__value_schema_id"][0] == 1 for r in got)  # magic 1 + GUID

        their_serializer = TheirAvroSerializer(
            their_client, USER_AVRO, conf={"schema.id.serializer": header_schema_id_serializer}
        )
        async with Producer(kafka_bootstrap, value_serializer=their_serializer, **FAST) as producer:
            for record in records:
                await producer.send(theirs_topic, record)
        raw = await _read(kafka_bootstrap, theirs_topic, 5)
        assert all("__value_schema_id" in dict(r.headers) for r in raw)
        assert all(r.value[:1] != b"\0" for r in raw)  # the id is in the header, not the payload
        got = await _read(kafka_bootstrap, theirs_topic, 5, value_deserializer=AvroDeserializer(client))
        assert [r.value for r in got] == records


def test_a_serializer_must_be_callable_or_have_serialize() -> None:
    with pytest.raises(ConfigError, match="serialize"):
        Producer("127.0.0.1:1", value_serializer=object())
    with pytest.raises(ConfigError, match="deserialize"):
        Consumer("127.0.0.1:1", value_deserializer=object())
    Consumer("127.0.0.1:1", value_deserializer=ContextReader())  # no __call__ needed


def test_the_kind_is_decided_once() -> None:
    """A plain callable keeps the plain path; an object with serialize() takes the context path."""
    plain = Producer("127.0.0.1:1", value_serializer=str.encode)
    assert not plain._contextual
    contextual = Producer("127.0.0.1:1", value_serializer=TaggingSerializer(), key_serializer=str.encode)
    assert contextual._contextual and contextual._key_serializer is None


async def test_share_consumer_resolves_an_uncached_schema_in_its_fetch_task(
    kafka_bootstrap: str, schema_registry_url: str
) -> None:
    topic, group = _name("share-gated"), _name("sg")
    await _topics(kafka_bootstrap, topic)
    await _share_group_from_earliest(kafka_bootstrap, group)
    async with SchemaRegistryClient(schema_registry_url) as client:
        async with Producer(
            kafka_bootstrap, value_serializer=AvroSerializer(client, POINT), **FAST
        ) as producer:
            await producer.send_batch(topic, [{"x": 1}, {"x": 2}])
    asked, gate = anyio.Event(), anyio.Event()
    got: list[Any] = []
    async with GatedClient(schema_registry_url, asked, gate) as gated:
        async with ShareConsumer(
            kafka_bootstrap, group_id=group, topics=topic, value_deserializer=AvroDeserializer(gated), **FAST
        ) as consumer:

            async def open_gate() -> None:
                await asked.wait()  # the fetch task waits for the registry, and this task runs
                gate.set()

            with anyio.fail_after(120):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(open_gate)
                    async for record in consumer:
                        got.append(record.value)
                        if len(got) == 2:
                            break
        assert gated.calls == 1
    assert sorted(r["x"] for r in got) == [1, 2]
