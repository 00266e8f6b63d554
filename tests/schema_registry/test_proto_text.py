"""Protobuf schemas registered as .proto text (as the Java serializers do): parsed, checked for
compatibility, and served as a base64 descriptor (``format=serialized``) that confluent-kafka's
deserializer builds its descriptor pool from."""

from __future__ import annotations

import asyncio

import pytest
from google.protobuf import descriptor_pool

from aiokafka_lite.integrations.schema_registry import (
    EmbeddedSchemaRegistry,
    IncompatibleSchemaError,
    InvalidSchemaError,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
)
from aiokafka_lite.integrations.schema_registry.proto_text import parse_proto
from aiokafka_lite.integrations.schema_registry.protobuf import encode_message_indexes
from aiokafka_lite.integrations.schema_registry.serde import frame
from schema_registry.protos import Order, common_file, order_file, sample_order

COMMON = """
syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 units = 2; }
"""

ORDER = """
syntax = "proto3";
// the same messages as tests/schema_registry/protos.py builds from descriptors
package shop;
import "shop/common.proto";
option java_multiple_files = true;

message Customer { string name = 1; }

message Order {
  string id = 1;
  sint32 quantity = 2 [deprecated = true];
  shop.common.Money total = 3;
  message Line {
    string sku = 1;
    int32 count = 2;
  }
  repeated Line lines = 4;
  repeated string tags = 5;
}
"""


def test_text_parses_to_the_same_descriptor_as_built() -> None:
    parsed = parse_proto(ORDER, "shop/order.proto")
    built = order_file()
    for message in parsed.message_type:
        for field in message.field:
            field.ClearField("options")
    assert parsed == built
    assert parse_proto(COMMON, "shop/common.proto") == common_file()


def test_text_subset_features_build_a_valid_pool() -> None:
    text = """
    syntax = "proto3";
    package p;
    message M {
      map<string, int64> attrs = 1;
      optional string note = 2;
      oneof pay { string card = 3; Kind kind = 4; }
      enum Kind { K0 = 0; K1 = 1 [deprecated = true]; }
      reserved 20, 21;
      N n = 5;
    }
    message N { repeated M children = 1; }
    service S { rpc Call (M) returns (N); }
    """
    pool = descriptor_pool.DescriptorPool()
    pool.Add(parse_proto(text, "p.proto"))
    message = pool.FindMessageTypeByName("p.M")
    assert message.fields_by_name["attrs"].message_type.GetOptions().map_entry
    assert message.fields_by_name["kind"].enum_type.full_name == "p.M.Kind"
    assert message.fields_by_name["kind"].containing_oneof.name == "pay"
    assert message.fields_by_name["n"].message_type.full_name == "p.N"
    assert message.fields_by_name["note"].has_presence
    with pytest.raises(ValueError, match="expected"):
        parse_proto("syntax = 'proto3'; message M { string a 1; }")
    with pytest.raises(ValueError, match="unsupported"):
        parse_proto("frobnicate;")


async def test_text_schemas_register_evolve_and_are_checked(client: SchemaRegistryClient) -> None:
    await client.register_schema("shop/common.proto", Schema(COMMON, "PROTOBUF"))
    refs = (SchemaReference("shop/common.proto", "shop/common.proto", 1),)
    first = await client.register_schema_full_response("orders-value", Schema(ORDER, "PROTOBUF", refs))
    added = ORDER.replace("repeated string tags = 5;", "repeated string tags = 5;\n  string note = 6;")
    assert (
        await client.register_schema_full_response("orders-value", Schema(added, "PROTOBUF", refs))
    ).version == 2
    renamed = added.replace("message Customer", "message Client")
    with pytest.raises(IncompatibleSchemaError, match="MESSAGE_REMOVED"):
        await client.register_schema("orders-value", Schema(renamed, "PROTOBUF", refs))
    retyped = added.replace("string id = 1;", "int32 id = 1;")
    ok, messages = await client.test_compatibility("orders-value", Schema(retyped, "PROTOBUF", refs))
    assert not ok and "FIELD_SCALAR_KIND_CHANGED" in messages[0]
    with pytest.raises(InvalidSchemaError):
        await client.register_schema("bad", Schema("message {", "PROTOBUF"))
    assert first.version == 1


@pytest.mark.interop
async def test_confluent_deserializer_reads_with_a_text_registered_schema(
    threaded_registry: EmbeddedSchemaRegistry,
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as TheirDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    async with SchemaRegistryClient(threaded_registry.url) as client:
        await client.register_schema("shop/common.proto", Schema(COMMON, "PROTOBUF"))
        refs = (SchemaReference("shop/common.proto", "shop/common.proto", 1),)
        schema_id = await client.register_schema("orders-value", Schema(ORDER, "PROTOBUF", refs))
    order = sample_order(5)
    data = frame(schema_id, encode_message_indexes([1]) + order.SerializeToString())

    def read() -> object:
        # With a registry client their deserializer fetches the writer schema (format=serialized)
        # and builds its descriptor pool from it, references included.
        their = TheirDeserializer(
            Order, {"use.deprecated.format": False}, TheirClient({"url": threaded_registry.url})
        )
        return their(data, SerializationContext("orders", MessageField.VALUE))

    served = threaded_registry.requests_served
    assert await asyncio.to_thread(read) == order
    assert threaded_registry.requests_served > served
