"""Through Kafka (the embedded broker, or Apache Kafka with --kafka=apache): our serializers with our
Producer -> confluent-kafka's Consumer with their deserializers, and their Producer with their
serializers -> our Consumer with our deserializers; identical records, all three formats."""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.integrations.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    EmbeddedSchemaRegistry,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    SchemaRegistryClient,
)
from schema_registry.protos import Order, sample_order
from schema_registry.test_referee_confluent import USER_AVRO, USER_JSON, avro_user, json_user

pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka import Consumer as TheirConsumer
from confluent_kafka import Producer as TheirProducer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as TheirAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as TheirAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as TheirJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as TheirJSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as TheirProtobufDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as TheirProtobufSerializer
from confluent_kafka.serialization import MessageField as TheirField
from confluent_kafka.serialization import SerializationContext as TheirContext

pytestmark = pytest.mark.interop

RECORDS = 50
_counter = itertools.count()

FORMATS = {
    "avro": (
        lambda c: AvroSerializer(c, USER_AVRO),
        lambda c: AvroDeserializer(c),
        lambda t: TheirAvroSerializer(t, USER_AVRO),
        lambda t: TheirAvroDeserializer(t),
        avro_user,
    ),
    "json": (
        lambda c: JSONSerializer(USER_JSON, c),
        lambda c: JSONDeserializer(USER_JSON),
        lambda t: TheirJSONSerializer(USER_JSON, t),
        lambda t: TheirJSONDeserializer(USER_JSON),
        json_user,
    ),
    "protobuf": (
        lambda c: ProtobufSerializer(Order, c),
        lambda c: ProtobufDeserializer(Order),
        lambda t: TheirProtobufSerializer(Order, t, {"use.deprecated.format": False}),
        lambda t: TheirProtobufDeserializer(Order, {"use.deprecated.format": False}, t),
        sample_order,
    ),
}


def _topic(kind: str) -> str:
    return f"sr-{kind}-{os.getpid()}-{next(_counter)}"


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(60)


@pytest.fixture(scope="module")
def shared_registry() -> Any:
    with EmbeddedSchemaRegistry.in_thread() as registry:
        yield registry


@pytest.mark.parametrize("kind", sorted(FORMATS))
async def test_ours_to_kafka_to_theirs(
    kafka_bootstrap: str, shared_registry: EmbeddedSchemaRegistry, kind: str
) -> None:
    ours_ser, _, _, their_de, make = FORMATS[kind]
    topic = _topic(kind)
    await asyncio.to_thread(_create_topic, kafka_bootstrap, topic)
    records = [make(i) for i in range(RECORDS)]
    async with SchemaRegistryClient(shared_registry.url) as client:
        serializer = ours_ser(client)
        await serializer.prepare(topic)  # the registry I/O, once, before the hot path
        async with Producer(kafka_bootstrap, value_serializer=serializer) as producer:
            for record in records:
                await producer.send(topic, record)

    def consume() -> list[Any]:
        their_deserializer = their_de(TheirClient({"url": shared_registry.url}))
        consumer = TheirConsumer(
            {"bootstrap.servers": kafka_bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([topic])
        got: list[Any] = []
        try:
            for _ in range(600):
                if len(got) == RECORDS:
                    break
                message = consumer.poll(0.5)
                if message is None or message.error():
                    continue
                got.append(their_deserializer(message.value(), TheirContext(topic, TheirField.VALUE)))
        finally:
            consumer.close()
        return got

    assert await asyncio.to_thread(consume) == records


@pytest.mark.parametrize("kind", sorted(FORMATS))
async def test_theirs_to_kafka_to_ours(
    kafka_bootstrap: str, shared_registry: EmbeddedSchemaRegistry, kind: str
) -> None:
    _, ours_de, their_ser, _, make = FORMATS[kind]
    topic = _topic(kind)
    records = [make(i) for i in range(RECORDS)]

    def produce() -> None:
        _create_topic(kafka_bootstrap, topic)
        serializer = their_ser(TheirClient({"url": shared_registry.url}))
        producer = TheirProducer({"bootstrap.servers": kafka_bootstrap})
        for record in records:
            producer.produce(topic, value=serializer(record, TheirContext(topic, TheirField.VALUE)))
        assert producer.flush(60) == 0

    await asyncio.to_thread(produce)
    async with SchemaRegistryClient(shared_registry.url) as client:
        deserializer = ours_de(client)
        got: list[Any] = []
        values: list[bytes] = []
        async with Consumer(
            kafka_bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest"
        ) as consumer:
            async with asyncio.timeout(120):
                while len(got) < RECORDS:
                    record = await consumer.getone()
                    values.append(record.value)
                    got.append(await deserializer.deserialize_async(record.value))
        # The writer schema is cached now: the sync path (a consumer's value_deserializer) decodes alike.
        assert [deserializer(value) for value in values] == records
    assert got == records
