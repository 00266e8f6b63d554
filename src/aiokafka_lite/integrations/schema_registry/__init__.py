"""Schema Registry support: a registry client, an embedded registry, Avro/Protobuf/JSON serdes.

Needs the ``[schemas]`` extra (httpx, fastavro, protobuf, jsonschema). Names load on first use, so
importing this package costs nothing until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiokafka_lite.integrations.schema_registry.avro import AvroDeserializer, AvroSerializer
    from aiokafka_lite.integrations.schema_registry.client import (
        RegisteredSchema,
        Schema,
        SchemaReference,
        SchemaRegistryClient,
    )
    from aiokafka_lite.integrations.schema_registry.embedded import EmbeddedSchemaRegistry
    from aiokafka_lite.integrations.schema_registry.errors import (
        IncompatibleSchemaError,
        InvalidCompatibilityLevelError,
        InvalidSchemaError,
        InvalidVersionError,
        RegistryUnavailableError,
        SchemaNotFoundError,
        SchemaNotResolvedError,
        SchemaRegistryError,
        SerializationError,
        SubjectNotFoundError,
        SubjectNotSoftDeletedError,
        SubjectSoftDeletedError,
        VersionNotFoundError,
    )
    from aiokafka_lite.integrations.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from aiokafka_lite.integrations.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from aiokafka_lite.integrations.schema_registry.serde import (
        MessageField,
        SerializationContext,
        record_subject_name_strategy,
        topic_record_subject_name_strategy,
        topic_subject_name_strategy,
    )

_WHERE = {
    "SchemaRegistryClient": "client",
    "Schema": "client",
    "SchemaReference": "client",
    "RegisteredSchema": "client",
    "EmbeddedSchemaRegistry": "embedded",
    "AvroSerializer": "avro",
    "AvroDeserializer": "avro",
    "ProtobufSerializer": "protobuf",
    "ProtobufDeserializer": "protobuf",
    "JSONSerializer": "json_schema",
    "JSONDeserializer": "json_schema",
    "SerializationContext": "serde",
    "MessageField": "serde",
    "topic_subject_name_strategy": "serde",
    "record_subject_name_strategy": "serde",
    "topic_record_subject_name_strategy": "serde",
    "SchemaRegistryError": "errors",
    "SubjectNotFoundError": "errors",
    "VersionNotFoundError": "errors",
    "SchemaNotFoundError": "errors",
    "SubjectSoftDeletedError": "errors",
    "SubjectNotSoftDeletedError": "errors",
    "IncompatibleSchemaError": "errors",
    "InvalidSchemaError": "errors",
    "InvalidVersionError": "errors",
    "InvalidCompatibilityLevelError": "errors",
    "RegistryUnavailableError": "errors",
    "SerializationError": "errors",
    "SchemaNotResolvedError": "errors",
}

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "EmbeddedSchemaRegistry",
    "IncompatibleSchemaError",
    "InvalidCompatibilityLevelError",
    "InvalidSchemaError",
    "InvalidVersionError",
    "JSONDeserializer",
    "JSONSerializer",
    "MessageField",
    "ProtobufDeserializer",
    "ProtobufSerializer",
    "RegisteredSchema",
    "RegistryUnavailableError",
    "Schema",
    "SchemaNotFoundError",
    "SchemaNotResolvedError",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SerializationContext",
    "SerializationError",
    "SubjectNotFoundError",
    "SubjectNotSoftDeletedError",
    "SubjectSoftDeletedError",
    "VersionNotFoundError",
    "record_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
