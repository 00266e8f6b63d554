"""Compatibility rules of the embedded registry, on a table of evolution cases per schema type.

Each case is (old schema, new schema, backward?, forward?): BACKWARD asks whether the new schema reads
data written with the old one, FORWARD the reverse, FULL both. The expected answers are the published
rules (Avro specification's schema resolution; Confluent's JSON Schema and Protobuf rules), case by
case; the test asks the registry through the REST API, as any client would.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from aiokafka_lite.integrations.schema_registry import IncompatibleSchemaError, Schema, SchemaRegistryClient

F = descriptor_pb2.FieldDescriptorProto


def avro(*fields: dict[str, Any], name: str = "User", aliases: list[str] | None = None) -> Schema:
    record: dict[str, Any] = {"type": "record", "name": name, "namespace": "ex", "fields": list(fields)}
    if aliases:
        record["aliases"] = aliases
    return Schema(json.dumps(record))


def field(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
COLOR_MORE = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
COLOR_MORE_DEFAULT = {**COLOR_MORE, "default": "RED"}
COLOR_LESS = {"type": "enum", "name": "Color", "symbols": ["RED"]}

AVRO_CASES = {
    "field added with default": (
        avro(field("a", "int")),
        avro(field("a", "int"), field("b", "string", default="")),
        True,
        True,
    ),
    "field added without default": (
        avro(field("a", "int")),
        avro(field("a", "int"), field("b", "string")),
        False,
        True,
    ),
    "field with default removed": (
        avro(field("a", "int"), field("b", "string", default="")),
        avro(field("a", "int")),
        True,
        True,
    ),
    "field without default removed": (
        avro(field("a", "int"), field("b", "string")),
        avro(field("a", "int")),
        True,
        False,
    ),
    "int promoted to long": (avro(field("a", "int")), avro(field("a", "long")), True, False),
    "long narrowed to int": (avro(field("a", "long")), avro(field("a", "int")), False, True),
    "int promoted to double": (avro(field("a", "int")), avro(field("a", "double")), True, False),
    "float promoted to double": (avro(field("a", "float")), avro(field("a", "double")), True, False),
    "string to bytes": (avro(field("a", "string")), avro(field("a", "bytes")), True, True),
    "string to int": (avro(field("a", "string")), avro(field("a", "int")), False, False),
    "enum symbol added": (avro(field("c", COLOR)), avro(field("c", COLOR_MORE)), True, False),
    "enum symbol added, new has a default": (
        avro(field("c", COLOR)),
        avro(field("c", COLOR_MORE_DEFAULT)),
        True,
        False,
    ),
    "enum symbol removed": (avro(field("c", COLOR)), avro(field("c", COLOR_LESS)), False, True),
    "type made nullable": (
        avro(field("a", "int")),
        avro(field("a", ["null", "int"], default=None)),
        True,
        False,
    ),
    "union branch added": (
        avro(field("a", ["null", "int"])),
        avro(field("a", ["null", "int", "string"])),
        True,
        False,
    ),
    "union branch removed": (
        avro(field("a", ["null", "int", "string"])),
        avro(field("a", ["null", "int"])),
        False,
        True,
    ),
    "record renamed": (avro(field("a", "int")), avro(field("a", "int"), name="Person"), False, False),
    "record renamed with alias": (
        avro(field("a", "int")),
        avro(field("a", "int"), name="Person", aliases=["ex.User"]),
        True,
        False,
    ),
    "field renamed with alias": (
        avro(field("a", "int")),
        avro(field("b", "int", aliases=["a"])),
        True,
        False,
    ),
    "array items promoted": (
        avro(field("a", {"type": "array", "items": "int"})),
        avro(field("a", {"type": "array", "items": "long"})),
        True,
        False,
    ),
    "map values changed": (
        avro(field("a", {"type": "map", "values": "int"})),
        avro(field("a", {"type": "map", "values": "string"})),
        False,
        False,
    ),
    "fixed size changed": (
        avro(field("a", {"type": "fixed", "name": "H", "size": 16})),
        avro(field("a", {"type": "fixed", "name": "H", "size": 32})),
        False,
        False,
    ),
}


def js(properties: dict[str, Any], *, required: list[str] | None = None, closed: bool = False) -> Schema:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return Schema(json.dumps(schema), "JSON")


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
JSON_CASES = {
    "property added to open model": (js({"a": STR}), js({"a": STR, "b": STR}), False, True),
    "property added to closed model": (
        js({"a": STR}, closed=True),
        js({"a": STR, "b": STR}, closed=True),
        True,
        False,
    ),
    "property removed from open model": (js({"a": STR, "b": STR}), js({"a": STR}), True, False),
    "property removed from closed model": (
        js({"a": STR, "b": STR}, closed=True),
        js({"a": STR}, closed=True),
        False,
        True,
    ),
    "required added": (js({"a": STR}), js({"a": STR}, required=["a"]), False, True),
    "required removed": (js({"a": STR}, required=["a"]), js({"a": STR}), True, False),
    "integer widened to number": (js({"a": INT}), js({"a": NUM}), True, False),
    "string to integer": (js({"a": STR}), js({"a": INT}), False, False),
    "enum extended": (js({"a": {"enum": ["x", "y"]}}), js({"a": {"enum": ["x", "y", "z"]}}), True, False),
    "maxLength narrowed": (
        js({"a": {"type": "string", "maxLength": 10}}),
        js({"a": {"type": "string", "maxLength": 5}}),
        False,
        True,
    ),
    "pydantic-style $defs model changed": (
        Schema(
            json.dumps(
                {
                    "type": "object",
                    "properties": {"a": {"$ref": "#/$defs/A"}},
                    "$defs": {"A": {"type": "object", "properties": {"x": STR}}},
                }
            ),
            "JSON",
        ),
        Schema(
            json.dumps(
                {
                    "type": "object",
                    "properties": {"a": {"$ref": "#/$defs/A"}},
                    "$defs": {"A": {"type": "object", "properties": {"x": INT}}},
                }
            ),
            "JSON",
        ),
        False,
        False,
    ),
    "pydantic-style $defs model widened": (
        Schema(
            json.dumps(
                {
                    "type": "object",
                    "properties": {"a": {"$ref": "#/$defs/A"}},
                    "$defs": {"A": {"type": "object", "properties": {"x": INT}}},
                }
            ),
            "JSON",
        ),
        Schema(
            json.dumps(
                {
                    "type": "object",
                    "properties": {"a": {"$ref": "#/$defs/A"}},
                    "$defs": {"A": {"type": "object", "properties": {"x": NUM}}},
                }
            ),
            "JSON",
        ),
        True,
        False,
    ),
    "array items widened": (
        js({"a": {"type": "array", "items": INT}}),
        js({"a": {"type": "array", "items": NUM}}),
        True,
        False,
    ),
}


def proto(messages: dict[str, list[tuple[str, int, int, str, bool]]], package: str = "shop") -> Schema:
    """A base64 FileDescriptorProto: message -> [(field, number, type, type_name, repeated)]."""
    file = descriptor_pb2.FileDescriptorProto(name="shop.proto", package=package, syntax="proto3")
    for message_name, fields in messages.items():
        message = file.message_type.add(name=message_name)
        for name, number, kind, type_name, repeated in fields:
            f = message.field.add(name=name, number=number, type=kind)
            f.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
            if type_name:
                f.type_name = type_name
    return Schema(base64.b64encode(file.SerializeToString()).decode(), "PROTOBUF")


ID = ("id", 1, F.TYPE_STRING, "", False)
QTY32 = ("qty", 2, F.TYPE_INT32, "", False)
ITEM = {"Item": [("sku", 1, F.TYPE_STRING, "", False)]}
PROTOBUF_CASES = {
    "field added": (proto({"Order": [ID]}), proto({"Order": [ID, QTY32]}), True, True),
    "field removed": (proto({"Order": [ID, QTY32]}), proto({"Order": [ID]}), True, True),
    "field renamed, same number": (
        proto({"Order": [ID]}),
        proto({"Order": [("key", 1, F.TYPE_STRING, "", False)]}),
        True,
        True,
    ),
    "int32 to int64 (wire compatible)": (
        proto({"Order": [ID, QTY32]}),
        proto({"Order": [ID, ("qty", 2, F.TYPE_INT64, "", False)]}),
        True,
        True,
    ),
    "int32 to sint32 (zigzag differs)": (
        proto({"Order": [ID, QTY32]}),
        proto({"Order": [ID, ("qty", 2, F.TYPE_SINT32, "", False)]}),
        False,
        False,
    ),
    "string to bytes": (
        proto({"Order": [ID]}),
        proto({"Order": [("id", 1, F.TYPE_BYTES, "", False)]}),
        True,
        True,
    ),
    "string to int32": (
        proto({"Order": [ID]}),
        proto({"Order": [("id", 1, F.TYPE_INT32, "", False)]}),
        False,
        False,
    ),
    "singular to repeated": (
        proto({"Order": [ID]}),
        proto({"Order": [("id", 1, F.TYPE_STRING, "", True)]}),
        False,
        False,
    ),
    "scalar to message": (
        proto({**ITEM, "Order": [ID]}),
        proto({**ITEM, "Order": [("id", 1, F.TYPE_MESSAGE, ".shop.Item", False)]}),
        False,
        False,
    ),
    "message renamed": (proto({"Order": [ID]}), proto({"Purchase": [ID]}), False, False),
    "message added": (proto({"Order": [ID]}), proto({"Order": [ID], **ITEM}), True, False),
    "package changed": (proto({"Order": [ID]}), proto({"Order": [ID]}, package="store"), False, False),
}

CASES = [
    pytest.param(old, new, backward, forward, id=f"{kind}: {name}")
    for kind, table in (("avro", AVRO_CASES), ("json", JSON_CASES), ("protobuf", PROTOBUF_CASES))
    for name, (old, new, backward, forward) in table.items()
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"), CASES)
async def test_evolution_case(
    client: SchemaRegistryClient, old: Schema, new: Schema, backward: bool, forward: bool
) -> None:
    answers = {}
    for level in ("BACKWARD", "FORWARD", "FULL", "NONE"):
        subject = f"case-{level}"
        await client.set_compatibility(level, subject)
        await client.register_schema(subject, old)
        answers[level], messages = await client.test_compatibility(subject, new)
        assert bool(messages) != answers[level]  # an incompatible answer names its reason
    assert answers == {"BACKWARD": backward, "FORWARD": forward, "FULL": backward and forward, "NONE": True}
    # Registering enforces the same answer.
    if not backward:
        with pytest.raises(IncompatibleSchemaError):
            await client.register_schema("case-BACKWARD", new)
    else:
        assert (await client.register_schema_full_response("case-BACKWARD", new)).version == 2


async def test_transitive_levels_check_every_version(client: SchemaRegistryClient) -> None:
    v1 = avro(field("f", "string", default=""))
    v2 = avro()
    v3 = avro(field("f", "int", default=0))  # compatible with v2 both ways, with v1 neither way
    for level in ("BACKWARD", "FORWARD", "FULL"):
        for transitive in (False, True):
            subject = f"t-{level}-{transitive}"
            await client.set_compatibility(level + "_TRANSITIVE" * transitive, subject)
            await client.register_schema(subject, v1)
            await client.register_schema(subject, v2)
            assert (await client.test_compatibility(subject, v3))[0] is not transitive, (level, transitive)
            # Against one version, whatever the level:
            assert (await client.test_compatibility(subject, v3, version=1))[0] is False
            assert (await client.test_compatibility(subject, v3, version="latest"))[0] is True
            if transitive:
                with pytest.raises(IncompatibleSchemaError, match="version 1"):
                    await client.register_schema(subject, v3)
            else:
                assert (await client.register_schema_full_response(subject, v3)).version == 3


async def test_a_schema_type_change_is_incompatible(client: SchemaRegistryClient) -> None:
    await client.register_schema("s", avro(field("a", "int")))
    ok, messages = await client.test_compatibility("s", js({"a": INT}))
    assert not ok and "different schema type" in messages[0]
