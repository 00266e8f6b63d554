"""Referee: confluent-kafka's own registry client and serializers against our embedded registry.

Their serializers and ours register through the same registry and must agree byte for byte, and each
side decodes the other's bytes record for record, for Avro, JSON Schema and Protobuf (with a schema
reference: order.proto imports common.proto).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from aiokafka_lite.integrations.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    EmbeddedSchemaRegistry,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    Schema,
    SchemaRegistryClient,
    SerializationContext,
    SerializationError,
)
from schema_registry.protos import Order, sample_order

ck = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as TheirAvroDeserializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as TheirAvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as TheirJSONDeserializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer as TheirJSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as TheirProtobufDeserializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as TheirProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField as TheirField  # noqa: E402
from confluent_kafka.serialization import SerializationContext as TheirContext  # noqa: E402

pytestmark = pytest.mark.interop

USER_AVRO = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "example",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": ["null", "int"], "default": None},
            {"name": "score", "type": "double"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
            {"name": "attrs", "type": {"type": "map", "values": "long"}},
            {"name": "blob", "type": "bytes"},
        ],
    }
)
USER_JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "User",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": ["integer", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name"],
    }
)


def avro_user(i: int) -> dict[str, Any]:
    return {
        "name": f"user-{i} \u00e9",
        "age": None if i % 3 == 0 else i,
        "score": i / 7,
        "tags": [str(j) for j in range(i % 4)],
        "color": "GREEN" if i % 2 else "RED",
        "attrs": {"k": -(2**40) + i},
        "blob": bytes(range(i % 8)),
    }


def json_user(i: int) -> dict[str, Any]:
    return {"name": f"user-{i}", "age": None if i % 2 else i, "tags": ["x"] * (i % 3)}


RECORDS = 20


def formats() -> list[Any]:
    return [
        pytest.param(
            lambda c: AvroSerializer(c, USER_AVRO),
            lambda c: AvroDeserializer(c),
            lambda t: TheirAvroSerializer(t, USER_AVRO),
            lambda t: TheirAvroDeserializer(t),
            avro_user,
            id="avro",
        ),
        pytest.param(
            lambda c: JSONSerializer(USER_JSON, c),
            lambda c: JSONDeserializer(USER_JSON),
            lambda t: TheirJSONSerializer(USER_JSON, t),
            lambda t: TheirJSONDeserializer(USER_JSON),
            json_user,
            id="json",
        ),
        pytest.param(
            lambda c: ProtobufSerializer(Order, c),
            lambda c: ProtobufDeserializer(Order),
            lambda t: TheirProtobufSerializer(Order, t, {"use.deprecated.format": False}),
            lambda t: TheirProtobufDeserializer(Order, {"use.deprecated.format": False}, t),
            sample_order,
            id="protobuf",
        ),
    ]


@pytest.mark.parametrize(("ours_ser", "ours_de", "their_ser", "their_de", "make"), formats())
@pytest.mark.parametrize("who_registers", ["ours", "theirs"])
async def test_bytes_agree_and_decode_both_ways(
    threaded_registry: EmbeddedSchemaRegistry,
    ours_ser: Any,
    ours_de: Any,
    their_ser: Any,
    their_de: Any,
    make: Any,
    who_registers: str,
) -> None:
    topic = f"people-{who_registers}"
    their_client = TheirClient({"url": threaded_registry.url})
    their_serializer, their_deserializer = their_ser(their_client), their_de(their_client)
    their_ctx = TheirContext(topic, TheirField.VALUE)
    ctx = SerializationContext(topic)
    records = [make(i) for i in range(RECORDS)]
    async with SchemaRegistryClient(threaded_registry.url) as client:
        serializer, deserializer = ours_ser(client), ours_de(client)
        if who_registers == "theirs":
            theirs_first = await asyncio.to_thread(their_serializer, records[0], their_ctx)
            assert theirs_first is not None
        ours = [await serializer.serialize_async(record, ctx) for record in records]
        theirs = await asyncio.to_thread(lambda: [their_serializer(r, their_ctx) for r in records])
        assert ours == theirs  # the same schema id, the same encoding, record for record
        # Theirs decode ours, ours decode theirs: the original records.
        decoded_by_them = await asyncio.to_thread(lambda: [their_deserializer(b, their_ctx) for b in ours])
        decoded_by_us = [await deserializer.deserialize_async(b, ctx) for b in theirs]
        assert decoded_by_them == records
        assert decoded_by_us == records
        # One schema registered, under the topic's subject.
        assert await client.get_versions(f"{topic}-value") == [1]


async def test_their_registry_client_against_ours(threaded_registry: EmbeddedSchemaRegistry) -> None:
    from confluent_kafka.schema_registry import Schema as TheirSchema
    from confluent_kafka.schema_registry.error import SchemaRegistryError as TheirError

    def drive() -> dict[str, Any]:
        their = TheirClient({"url": threaded_registry.url})
        v1 = TheirSchema(
            json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}), "AVRO"
        )
        v2 = TheirSchema(
            json.dumps(
                {
                    "type": "record",
                    "name": "R",
                    "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}],
                }
            ),
            "AVRO",
        )
        out: dict[str, Any] = {}
        out["id"] = their.register_schema("r-value", v1)
        out["fetched"] = json.loads(their.get_schema(out["id"]).schema_str)
        out["latest"] = their.get_latest_version("r-value").version
        out["lookup"] = their.lookup_schema("r-value", v1).version
        out["compatible"] = their.test_compatibility("r-value", v2)
        try:
            their.register_schema("r-value", v2)
        except TheirError as exc:
            out["refused"] = (exc.http_status_code, exc.error_code)
        out["level"] = their.set_compatibility("r-value", "NONE")
        out["v2"] = their.register_schema("r-value", v2)
        out["versions"] = their.get_versions("r-value")
        out["subjects"] = their.get_subjects()
        out["deleted"] = their.delete_version("r-value", 2)
        out["soft"] = their.delete_subject("r-value")
        out["hard"] = their.delete_subject("r-value", permanent=True)
        try:
            their.get_versions("r-value")  # (their latest-version cache would still answer)
        except TheirError as exc:
            out["gone"] = exc.error_code
        return out

    out = await asyncio.to_thread(drive)
    assert out["fetched"] == {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    assert (out["latest"], out["lookup"], out["compatible"]) == (1, 1, False)
    assert out["refused"] == (409, 409)
    assert out["level"]["compatibility"] == "NONE"
    assert out["v2"] != out["id"]
    assert out["versions"] == [1, 2] and out["subjects"] == ["r-value"]
    assert (out["deleted"], out["soft"], out["hard"]) == (2, [1], [1, 2])
    assert out["gone"] == 40401


async def test_their_reader_schema_resolution_of_our_old_records(
    threaded_registry: EmbeddedSchemaRegistry,
) -> None:
    """Evolution across the two implementations: we write v1, they register v2 (a field with a default)
    and read our v1 bytes with v2 as reader schema, and we read their v2 bytes with v1 as reader."""
    v1 = json.dumps({"type": "record", "name": "P", "fields": [{"name": "a", "type": "int"}]})
    v2 = json.dumps(
        {
            "type": "record",
            "name": "P",
            "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": "-"}],
        }
    )
    their_client = TheirClient({"url": threaded_registry.url})
    their_ctx = TheirContext("evolve", TheirField.VALUE)
    async with SchemaRegistryClient(threaded_registry.url) as client:
        ours_v1 = await AvroSerializer(client, v1).serialize_async({"a": 7}, SerializationContext("evolve"))
        assert ours_v1 is not None

        def theirs() -> tuple[Any, bytes]:
            their_reader = TheirAvroDeserializer(their_client, v2)
            written = TheirAvroSerializer(their_client, v2)({"a": 2**40, "b": "x"}, their_ctx)
            return their_reader(ours_v1, their_ctx), written

        read_by_them, their_v2 = await asyncio.to_thread(theirs)
        assert read_by_them == {"a": 7, "b": "-"}
        our_reader = AvroDeserializer(
            client,
            Schema(json.dumps({"type": "record", "name": "P", "fields": [{"name": "b", "type": "string"}]})),
        )
        assert await our_reader.deserialize_async(their_v2) == {"b": "x"}
        assert await client.get_versions("evolve-value") == [1, 2]


async def test_avro_schema_references_both_ways(threaded_registry: EmbeddedSchemaRegistry) -> None:
    """A record whose field type is a named type registered under another subject (a reference)."""
    from confluent_kafka.schema_registry import Schema as TheirSchema
    from confluent_kafka.schema_registry import SchemaReference as TheirReference

    from aiokafka_lite.integrations.schema_registry import SchemaReference

    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "ex",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "ex",
            "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "ex.Address"}],
        }
    )
    records = [{"name": f"p{i}", "home": {"city": f"c{i}"}} for i in range(5)]
    their_client = TheirClient({"url": threaded_registry.url})
    their_ctx = TheirContext("people", TheirField.VALUE)
    async with SchemaRegistryClient(threaded_registry.url) as client:
        await client.register_schema("ex.Address", Schema(address))
        ours = AvroSerializer(
            client, Schema(person, references=(SchemaReference("ex.Address", "ex.Address", 1),))
        )
        our_bytes = [await ours.serialize_async(r, SerializationContext("people")) for r in records]

        def theirs() -> tuple[list[bytes], list[Any]]:
            schema = TheirSchema(person, "AVRO", [TheirReference("ex.Address", "ex.Address", 1)])
            serializer = TheirAvroSerializer(their_client, schema)
            deserializer = TheirAvroDeserializer(their_client)
            return [serializer(r, their_ctx) for r in records], [
                deserializer(b, their_ctx) for b in our_bytes
            ]

        their_bytes, decoded_by_them = await asyncio.to_thread(theirs)
        assert our_bytes == their_bytes
        assert decoded_by_them == records
        assert [await AvroDeserializer(client).deserialize_async(b) for b in their_bytes] == records
        assert await client.get_versions("people-value") == [1]


def header_formats() -> list[Any]:
    from confluent_kafka.schema_registry import header_schema_id_serializer

    conf = {"schema.id.serializer": header_schema_id_serializer}
    return [
        pytest.param(
            lambda c: AvroSerializer(c, USER_AVRO, schema_id_in_header=True),
            lambda c: AvroDeserializer(c),
            lambda t: TheirAvroSerializer(t, USER_AVRO, conf=conf),
            lambda t: TheirAvroDeserializer(t),
            avro_user,
            id="avro",
        ),
        pytest.param(
            lambda c: JSONSerializer(USER_JSON, c, schema_id_in_header=True),
            lambda c: JSONDeserializer(None, client=c),
            lambda t: TheirJSONSerializer(USER_JSON, t, conf=conf),
            lambda t: TheirJSONDeserializer(None, schema_registry_client=t),
            json_user,
            id="json",
        ),
        pytest.param(
            lambda c: ProtobufSerializer(Order, c, schema_id_in_header=True),
            lambda c: ProtobufDeserializer(Order),
            lambda t: TheirProtobufSerializer(Order, t, {"use.deprecated.format": False, **conf}),
            lambda t: TheirProtobufDeserializer(Order, {"use.deprecated.format": False}, t),
            sample_order,
            id="protobuf",
        ),
    ]


@pytest.mark.parametrize(("ours_ser", "ours_de", "their_ser", "their_de", "make"), header_formats())
async def test_schema_id_in_header_both_ways(
    threaded_registry: EmbeddedSchemaRegistry,
    ours_ser: Any,
    ours_de: Any,
    their_ser: Any,
    their_de: Any,
    make: Any,
) -> None:
    """Confluent's header format: the schema GUID in ``__value_schema_id``, the payload unprefixed."""
    from aiokafka_lite.integrations.schema_registry.serde import VALUE_SCHEMA_ID_HEADER

    topic = "headers"
    their_client = TheirClient({"url": threaded_registry.url})
    their_serializer, their_deserializer = their_ser(their_client), their_de(their_client)
    records = [make(i) for i in range(10)]
    async with SchemaRegistryClient(threaded_registry.url) as client:
        serializer, deserializer = ours_ser(client), ours_de(client)
        ours: list[tuple[bytes, list[tuple[str, bytes | None]]]] = []
        for record in records:
            headers: list[tuple[str, bytes | None]] = []
            data = await serializer.serialize_async(record, SerializationContext(topic, headers=headers))
            assert data is not None
            ours.append((data, headers))

        def theirs() -> tuple[list[tuple[bytes, list[Any]]], list[Any]]:
            written = []
            for record in records:
                headers: list[Any] = []
                written.append(
                    (their_serializer(record, TheirContext(topic, TheirField.VALUE, headers)), headers)
                )
            read = [their_deserializer(data, TheirContext(topic, TheirField.VALUE, h)) for data, h in ours]
            return written, read

        their_written, read_by_them = await asyncio.to_thread(theirs)
        assert ours == their_written  # same payloads, same header (name, magic 1, GUID, indexes)
        assert [h[0][0] for _, h in ours] == [VALUE_SCHEMA_ID_HEADER] * len(records)
        assert read_by_them == records
        read_by_us = [
            await deserializer.deserialize_async(data, SerializationContext(topic, headers=h))
            for data, h in their_written
        ]
        assert read_by_us == records
    with pytest.raises(SerializationError, match="headers"):
        serializer.serialize(records[0], SerializationContext(topic))  # header mode without a headers list


async def test_json_schema_references_both_ways(threaded_registry: EmbeddedSchemaRegistry) -> None:
    from confluent_kafka.schema_registry import Schema as TheirSchema
    from confluent_kafka.schema_registry import SchemaReference as TheirReference

    from aiokafka_lite.integrations.schema_registry import SchemaReference

    address = json.dumps(
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
         "properties": {"city": {"type": "string"}}, "required": ["city"]}
    )  # fmt: skip
    person = json.dumps(
        {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object",
         "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}}}
    )  # fmt: skip
    records = [{"name": f"p{i}", "home": {"city": f"c{i}"}} for i in range(5)]
    their_client = TheirClient({"url": threaded_registry.url})
    their_ctx = TheirContext("jpeople", TheirField.VALUE)
    async with SchemaRegistryClient(threaded_registry.url) as client:
        await client.register_schema("address.json", Schema(address, "JSON"))
        refs = (SchemaReference("address.json", "address.json", 1),)
        ours = JSONSerializer(Schema(person, "JSON", refs), client)
        our_bytes = [await ours.serialize_async(r, SerializationContext("jpeople")) for r in records]
        with pytest.raises(SerializationError, match="city"):  # the referenced schema validates
            ours.serialize({"name": "x", "home": {}}, SerializationContext("jpeople"))

        def theirs() -> tuple[list[bytes], list[Any]]:
            schema = TheirSchema(person, "JSON", [TheirReference("address.json", "address.json", 1)])
            serializer = TheirJSONSerializer(schema, their_client)
            deserializer = TheirJSONDeserializer(schema, schema_registry_client=their_client)
            return [serializer(r, their_ctx) for r in records], [
                deserializer(b, their_ctx) for b in our_bytes
            ]

        their_bytes, decoded_by_them = await asyncio.to_thread(theirs)
        assert our_bytes == their_bytes
        assert decoded_by_them == records
        by_writer = JSONDeserializer(None, client=client)
        assert [await by_writer.deserialize_async(b) for b in their_bytes] == records
        with pytest.raises(SerializationError, match="city"):
            by_writer(their_bytes[0][:5] + b'{"name": "x", "home": {}}')
        with pytest.raises(ValueError, match="client"):
            JSONDeserializer(Schema(person, "JSON", refs))
