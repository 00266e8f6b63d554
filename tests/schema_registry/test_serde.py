"""Our serializers and deserializers: wire format, subject strategies, the prepare/sync split, hooks."""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Any

import pytest

from aiokafka_lite.integrations.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    Schema,
    SchemaNotFoundError,
    SchemaNotResolvedError,
    SchemaRegistryClient,
    SerializationContext,
    SerializationError,
    SubjectNotFoundError,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from aiokafka_lite.integrations.schema_registry.protobuf import (
    decode_message_indexes,
    encode_message_indexes,
    message_indexes,
)
from schema_registry.protos import Customer, Order, OrderLine, sample_order

POINT = json.dumps(
    {
        "type": "record",
        "name": "Point",
        "namespace": "geo",
        "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int"}],
    }
)


@dataclasses.dataclass
class Point:
    x: int
    y: int


async def test_avro_wire_format_and_round_trip(client: SchemaRegistryClient) -> None:
    serializer = AvroSerializer(client, POINT)
    data = await serializer.serialize_async({"x": 1, "y": -1}, SerializationContext("pts"))
    assert data is not None
    schema_id = (await client.get_latest_version("pts-value")).schema_id
    # magic 0, big-endian id, then Avro's zigzag varints 1 -> 0x02, -1 -> 0x01
    assert data == b"\x00" + struct.pack(">I", schema_id) + b"\x02\x01"
    assert await AvroDeserializer(client).deserialize_async(data) == {"x": 1, "y": -1}


async def test_sync_path_needs_prepare_and_then_does_no_io(
    registry: Any, client: SchemaRegistryClient
) -> None:
    serializer = AvroSerializer(client, POINT)
    with pytest.raises(SchemaNotResolvedError, match="prepare"):
        serializer({"x": 1, "y": 2})
    schema_id = await serializer.prepare("pts")
    served = registry.requests_served
    data = [serializer(Point(i, i)) for i in range(100)]  # a dataclass needs no to_dict hook
    assert registry.requests_served == served
    assert all(d is not None and d[1:5] == struct.pack(">I", schema_id) for d in data)
    assert serializer(None) is None  # a tombstone stays a tombstone
    deserializer = AvroDeserializer(client, from_dict=lambda d, ctx: Point(**d))
    first = data[0]
    assert first is not None
    with pytest.raises(SchemaNotResolvedError, match="prefetch"):
        deserializer(first)
    await deserializer.prefetch(first)
    assert [deserializer(d) for d in data if d is not None] == [Point(i, i) for i in range(100)]
    # Two prepared topics: the context-free call cannot know which one is meant.
    await serializer.prepare("other")
    with pytest.raises(SchemaNotResolvedError, match="exactly one"):
        serializer({"x": 1, "y": 2})
    assert serializer.serialize({"x": 1, "y": 2}, SerializationContext("other")) is not None


async def test_subject_name_strategies(client: SchemaRegistryClient) -> None:
    ctx = SerializationContext("shapes", MessageField.KEY)
    await AvroSerializer(client, POINT, field=MessageField.KEY).serialize_async({"x": 0, "y": 0}, ctx)
    await AvroSerializer(client, POINT, subject_name_strategy=record_subject_name_strategy).serialize_async(
        {"x": 0, "y": 0}, SerializationContext("shapes")
    )
    await AvroSerializer(
        client, POINT, subject_name_strategy=topic_record_subject_name_strategy
    ).serialize_async({"x": 0, "y": 0}, SerializationContext("shapes"))
    await ProtobufSerializer(Customer, client, subject_name_strategy=record_subject_name_strategy).prepare(
        "any"
    )
    await JSONSerializer(
        json.dumps({"title": "Note", "type": "object"}),
        client,
        subject_name_strategy=topic_record_subject_name_strategy,
    ).prepare("notes")
    assert await client.get_subjects() == [
        "geo.Point",
        "notes-Note",
        "shapes-geo.Point",
        "shapes-key",
        "shop.Customer",
        "shop/common.proto",
    ]


async def test_without_auto_register_the_schema_must_exist(client: SchemaRegistryClient) -> None:
    serializer = AvroSerializer(client, POINT, auto_register=False)
    with pytest.raises(SubjectNotFoundError):
        await serializer.prepare("pts")
    await client.register_schema(
        "pts-value", Schema(json.dumps({"type": "record", "name": "Other", "fields": []}))
    )
    with pytest.raises(SchemaNotFoundError):
        await serializer.prepare("pts")
    await client.set_compatibility("NONE", "pts-value")
    await client.register_schema("pts-value", Schema(POINT))
    assert (
        await serializer.prepare("pts") == (await client.lookup_schema("pts-value", Schema(POINT))).schema_id
    )


async def test_use_latest_version_writes_with_the_registered_schema(client: SchemaRegistryClient) -> None:
    with pytest.raises(ValueError, match="use_latest_version"):
        AvroSerializer(client, None)
    v2 = json.dumps(
        {
            "type": "record",
            "name": "Point",
            "namespace": "geo",
            "fields": [
                {"name": "x", "type": "int"},
                {"name": "y", "type": "int"},
                {"name": "z", "type": "int", "default": 0},
            ],
        }
    )
    await client.register_schema("pts-value", Schema(POINT))
    latest_id = await client.register_schema("pts-value", Schema(v2))
    serializer = AvroSerializer(client, use_latest_version=True)
    data = await serializer.serialize_async({"x": 1, "y": 2, "z": 3}, SerializationContext("pts"))
    assert data is not None and data[1:5] == struct.pack(">I", latest_id)
    # A reader on the old schema resolves the new writer's record (z dropped).
    assert await AvroDeserializer(client, POINT).deserialize_async(data) == {"x": 1, "y": 2}


async def test_avro_bad_records_and_bad_frames(client: SchemaRegistryClient) -> None:
    serializer = AvroSerializer(client, POINT, to_dict=lambda p, ctx: {"x": p.x, "y": p.y})
    await serializer.prepare("pts")
    with pytest.raises(SerializationError, match="Avro schema"):
        serializer(Point("not an int", 1))  # type: ignore[arg-type]
    deserializer = AvroDeserializer(client)
    for data in (b"", b"\x01\x00\x00\x00\x01\x02", b"\x00\x00"):
        with pytest.raises(SerializationError, match="magic byte"):
            await deserializer.deserialize_async(data)
    with pytest.raises(SchemaNotFoundError):
        await deserializer.deserialize_async(b"\x00\x00\x00\x03\xe7\x02")


async def test_json_validates_both_ways(client: SchemaRegistryClient) -> None:
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    serializer = JSONSerializer(schema, client)
    ctx = SerializationContext("nums")
    data = await serializer.serialize_async({"n": 5}, ctx)
    assert data is not None and data[5:] == b'{"n":5}'
    with pytest.raises(SerializationError, match="required"):
        await serializer.serialize_async({"m": 5}, ctx)
    assert JSONDeserializer(schema)(data) == {"n": 5}
    invalid = data[:5] + b'{"n":"five"}'
    with pytest.raises(SerializationError, match="JSON schema"):
        JSONDeserializer(schema)(invalid)
    # Without a schema of its own, with a client: the writer's schema validates.
    by_writer = JSONDeserializer(None, client=client)
    assert await by_writer.deserialize_async(data) == {"n": 5}
    with pytest.raises(SerializationError):
        by_writer(invalid)
    assert JSONSerializer(schema, client, validate=False) is not None


def test_message_indexes() -> None:
    assert message_indexes(Customer.DESCRIPTOR) == [0]
    assert message_indexes(Order.DESCRIPTOR) == [1]
    assert message_indexes(OrderLine.DESCRIPTOR) == [1, 0]
    assert encode_message_indexes([0]) == b"\x00"
    assert encode_message_indexes([1]) == b"\x02\x02"  # count 1, index 1, as zigzag varints
    assert encode_message_indexes([1, 0]) == b"\x04\x02\x00"
    for indexes in ([0], [1], [1, 0], [70, 3000]):
        decoded, rest = decode_message_indexes(memoryview(encode_message_indexes(indexes) + b"rest"))
        assert (decoded, bytes(rest)) == (indexes, b"rest")
    with pytest.raises(SerializationError, match="varint"):
        decode_message_indexes(memoryview(b"\x80"))


async def test_protobuf_nested_message_and_reference(client: SchemaRegistryClient) -> None:
    line = OrderLine(sku="x", count=3)
    data = await ProtobufSerializer(OrderLine, client).serialize_async(line, SerializationContext("lines"))
    assert data is not None and data[5:8] == b"\x04\x02\x00"
    assert ProtobufDeserializer(OrderLine)(data) == line
    registered = await client.get_latest_version("lines-value")
    assert [r.subject for r in registered.schema.references] == ["shop/common.proto"]
    order = sample_order(3)
    serializer = ProtobufSerializer(Order, client)
    await serializer.prepare("orders")
    with pytest.raises(SerializationError, match=r"shop\.Order"):
        serializer(line)
    assert ProtobufDeserializer(Order)(serializer(order)) == order


async def test_pydantic_models_and_key_field(client: SchemaRegistryClient) -> None:
    pydantic = pytest.importorskip("pydantic")

    class PointModel(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        x: int
        y: int

    key_serializer = AvroSerializer(client, POINT, field=MessageField.KEY)
    await key_serializer.prepare("pts")
    data = key_serializer(PointModel(x=3, y=4))  # model_dump() is the default to_dict
    assert data is not None
    assert (await client.get_subjects()) == ["pts-key"]
    from_dict = AvroDeserializer(client, from_dict=lambda d, ctx: PointModel(**d))
    assert await from_dict.deserialize_async(data) == PointModel(x=3, y=4)


async def test_a_burst_of_first_sends_resolves_once(registry: Any, client: SchemaRegistryClient) -> None:
    import asyncio

    serializer = AvroSerializer(client, POINT)
    served = registry.requests_served
    ctx = SerializationContext("burst")
    results = await asyncio.gather(*(serializer.serialize_async({"x": i, "y": i}, ctx) for i in range(20)))
    assert registry.requests_served == served + 1  # one registration, not twenty
    assert len({r[:5] for r in results if r is not None}) == 1
