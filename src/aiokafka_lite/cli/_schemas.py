"""``--schema-registry`` for ``produce`` and ``consume``: Avro and JSON Schema records as JSON text.

``produce`` reads one JSON document per line and writes it with the schema given by
``--value-schema FILE`` (registered under the topic's subject, ``TOPIC-value``, as a serializer
with auto-registration does), ``--value-schema @SUBJECT`` (that subject's latest version), or,
without ``--value-schema``, the latest version of ``TOPIC-value``. ``consume`` decodes each value
by the schema id it carries (Confluent's 5-byte prefix) and prints it as one line of JSON.

JSON text is the value as the serializers take and give it: for Avro, a union's value is written
plainly (not wrapped in ``{"type": value}`` as Avro's own JSON encoding does), ``bytes``/``fixed``
print as ISO-8859-1 strings (Avro's JSON convention), and logical types (dates, timestamps,
decimals, UUIDs) print as ISO-8601 or decimal strings. Protobuf is not offered: JSON text needs
the generated message classes. Keys stay plain bytes (``--key-separator``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

#: ``--value-schema`` file types the CLI writes, by the registry's ``schemaType``.
CLI_SCHEMA_TYPES = ("AVRO", "JSON")
_AVRO_KINDS = ("record", "enum", "fixed", "array", "map")


class SchemaTextError(Exception):
    """A schema, registry or record problem in ``--schema-registry`` mode, said for the user."""


class _Serializer(Protocol):
    async def prepare(self, topic: str) -> int: ...

    def serialize(self, obj: Any, ctx: Any = None) -> bytes | None: ...


def guess_schema_type(text: str, path: str) -> str:
    """``AVRO`` or ``JSON`` for a schema file: ``.avsc`` is Avro; otherwise an Avro-only ``type``
    (record, enum, fixed, ...; or a union list) says Avro, and anything else is JSON Schema."""
    if path.endswith(".avsc"):
        return "AVRO"
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise SchemaTextError(
            f"{path} is not JSON ({exc}): a schema file holds an Avro or JSON Schema"
        ) from None
    if isinstance(parsed, list) or (isinstance(parsed, dict) and parsed.get("type") in _AVRO_KINDS):
        return "AVRO"
    return "JSON"


def _registry_error(exc: Exception) -> SchemaTextError:
    return SchemaTextError(f"schema registry: {type(exc).__name__}: {exc}")


class ValueEncoder:
    """Turns input lines (JSON text) into framed values for one topic."""

    def __init__(self, serializer: _Serializer, topic: str) -> None:
        from aiokafka_lite.integrations.schema_registry import MessageField, SerializationContext

        self._serializer = serializer
        self._ctx = SerializationContext(topic, MessageField.VALUE)
        self.topic = topic

    def encode(self, line: bytes, record_number: int) -> bytes:
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise SchemaTextError(
                f"record {record_number} (a non-blank input line) is not JSON: {exc}"
            ) from None
        try:
            data = self._serializer.serialize(obj, self._ctx)
        except Exception as exc:  # the serializer's own errors (validation, Avro types) name the cause
            raise SchemaTextError(f"record {record_number} does not fit the schema: {exc}") from None
        assert data is not None  # obj is not None: JSON null is refused above by the schema
        return data


@asynccontextmanager
async def value_encoder(
    url: str, topic: str, value_schema: str | None, schema_type: str | None
) -> AsyncIterator[ValueEncoder]:
    """A :class:`ValueEncoder` whose schema is resolved (registered or looked up) before any line."""
    from aiokafka_lite.integrations.schema_registry import (
        AvroSerializer,
        JSONSerializer,
        Schema,
        SchemaRegistryClient,
        SchemaRegistryError,
    )

    schema: Schema | None = None
    subject: str | None = None
    if value_schema is not None and value_schema.startswith("@"):
        subject = value_schema[1:]
        if not subject:
            raise SchemaTextError("--value-schema @SUBJECT needs a subject name after @")
    elif value_schema is not None:
        try:
            text = await asyncio.to_thread(Path(value_schema).read_text)
        except OSError as exc:
            raise SchemaTextError(f"cannot read {value_schema}: {exc.strerror}") from None
        schema = Schema(text, schema_type or guess_schema_type(text, value_schema))
    async with SchemaRegistryClient(url) as client:
        try:
            if schema is None:
                # Use-latest: of @SUBJECT, or of the topic's subject (topic name strategy).
                latest_subject = subject or f"{topic}-value"
                latest = await client.get_latest_version(latest_subject)
                schema_type = latest.schema.schema_type
                kwargs: dict[str, Any] = {"use_latest_version": True, "auto_register": False}
                if subject is not None:
                    kwargs["subject_name_strategy"] = lambda ctx, record_name: latest_subject
            else:
                schema_type = schema.schema_type
                kwargs = {}
            if schema_type not in CLI_SCHEMA_TYPES:
                raise SchemaTextError(
                    f"the CLI writes Avro and JSON Schema records as JSON text, not {schema_type} "
                    "(Protobuf needs the generated message classes: use ProtobufSerializer in Python)"
                )
            serializer: _Serializer
            if schema_type == "AVRO":
                serializer = AvroSerializer(client, schema, **kwargs)
            else:
                serializer = JSONSerializer(schema, client, **kwargs)
            await serializer.prepare(topic)
        except SchemaRegistryError as exc:
            raise _registry_error(exc) from None
        except ValueError as exc:  # a schema that does not parse
            raise SchemaTextError(f"--value-schema: {exc}") from None
        yield ValueEncoder(serializer, topic)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")  # Avro's JSON encoding of bytes and fixed
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


class ValueDecoder:
    """Turns framed values into JSON text, by the schema id each one carries."""

    def __init__(self, client: Any) -> None:
        from aiokafka_lite.integrations.schema_registry import AvroDeserializer, JSONDeserializer

        self._client = client
        self._avro = AvroDeserializer(client)
        self._json = JSONDeserializer(None, client=client)
        self._types: dict[int, str] = {}

    async def decode(self, value: bytes | None) -> bytes | None:
        from aiokafka_lite.integrations.schema_registry import SchemaRegistryError, SerializationError
        from aiokafka_lite.integrations.schema_registry.serde import unframe

        if value is None:
            return None
        try:
            schema_id, _ = unframe(value)
            schema_type = self._types.get(schema_id)
            if schema_type is None:
                schema_type = (await self._client.get_schema(schema_id)).schema_type
                self._types[schema_id] = schema_type
            if schema_type == "AVRO":
                obj = await self._avro.deserialize_async(value)
            elif schema_type == "JSON":
                obj = await self._json.deserialize_async(value)
            else:
                raise SchemaTextError(
                    f"schema {schema_id} is {schema_type}: the CLI prints Avro and JSON Schema records only"
                )
        except SchemaRegistryError as exc:
            raise _registry_error(exc) from None
        except SerializationError as exc:
            raise SchemaTextError(str(exc)) from None
        return json.dumps(obj, default=_json_default, ensure_ascii=False).encode()


@asynccontextmanager
async def value_decoder(url: str) -> AsyncIterator[ValueDecoder]:
    from aiokafka_lite.integrations.schema_registry import SchemaRegistryClient

    async with SchemaRegistryClient(url) as client:
        yield ValueDecoder(client)
