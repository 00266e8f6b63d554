"""Avro serializer and deserializer (fastavro), Confluent wire format."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from typing import Any

import fastavro

from aiokafka_lite.integrations.schema_registry.client import Schema, SchemaRegistryClient
from aiokafka_lite.integrations.schema_registry.errors import SchemaNotResolvedError, SerializationError
from aiokafka_lite.integrations.schema_registry.serde import (
    MessageField,
    SchemaSerializerBase,
    SerializationContext,
    SubjectNameStrategy,
    fetch_writer_schema,
    referenced_schemas,
    topic_subject_name_strategy,
    writer_reference,
)


def _as_schema(schema: str | Schema | None, schema_type: str) -> Schema | None:
    if schema is None or isinstance(schema, Schema):
        return schema
    return Schema(schema, schema_type)


async def _parse_avro(client: SchemaRegistryClient, schema: Schema) -> Any:
    named: dict[str, Any] = {}
    for ref in await referenced_schemas(client, schema.references):
        fastavro.parse_schema(json.loads(ref.schema_str), named_schemas=named)
    return fastavro.parse_schema(json.loads(schema.schema_str), named_schemas=named)


def _default_to_dict(obj: Any) -> Any:
    # Dataclasses and pydantic models serialize without a hook; dicts pass through (checked first:
    # the common case, and is_dataclass costs more than the type test).
    if type(obj) is dict:
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump):
        return model_dump()
    return obj


class AvroSerializer(SchemaSerializerBase):
    """``AvroSerializer(client, schema_str, to_dict=None, ...)`` as confluent-kafka's.

    ``to_dict(obj, ctx)`` turns an application object into the record dict (default: dataclasses and
    pydantic models are converted, dicts pass through). See :class:`SchemaSerializerBase` for
    ``prepare`` and the keyword options.
    """

    schema_type = "AVRO"

    def __init__(
        self,
        client: SchemaRegistryClient,
        schema_str: str | Schema | None = None,
        to_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        *,
        auto_register: bool = True,
        use_latest_version: bool = False,
        normalize: bool = False,
        schema_id_in_header: bool = False,
        subject_name_strategy: SubjectNameStrategy = topic_subject_name_strategy,
        field: MessageField = MessageField.VALUE,
    ) -> None:
        schema = _as_schema(schema_str, "AVRO")
        super().__init__(
            client,
            schema,
            auto_register=auto_register,
            use_latest_version=use_latest_version,
            normalize=normalize,
            schema_id_in_header=schema_id_in_header,
            subject_name_strategy=subject_name_strategy,
            field=field,
        )
        self._to_dict = to_dict
        self._record_name: str | None = None
        if schema is not None:
            try:
                parsed = json.loads(schema.schema_str)
            except ValueError as exc:
                raise ValueError(f"schema_str is not JSON: {exc}") from exc
            if isinstance(parsed, dict) and "name" in parsed:
                namespace = parsed.get("namespace")
                name = str(parsed["name"])
                self._record_name = f"{namespace}.{name}" if namespace and "." not in name else name

    @property
    def record_name(self) -> str | None:
        return self._record_name

    async def _writer_for(self, schema: Schema) -> Any:
        return await _parse_avro(self._client, schema)

    def _encode(self, obj: Any, writer: Any, ctx: SerializationContext | None) -> bytes:
        record = self._to_dict(obj, ctx) if self._to_dict is not None else _default_to_dict(obj)
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, writer, record)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(f"record does not match the Avro schema: {exc}") from exc
        return out.getvalue()


class AvroDeserializer:
    """``AvroDeserializer(client, schema_str=None, from_dict=None, return_record_name=False)``.

    With ``schema_str`` records are read with it as the reader schema (Avro schema resolution: fields
    added with defaults, promotions, ...); without, with the writer's schema. ``from_dict(record, ctx)``
    builds the application object.
    """

    def __init__(
        self,
        client: SchemaRegistryClient,
        schema_str: str | Schema | None = None,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        return_record_name: bool = False,
    ) -> None:
        self._client = client
        reader = _as_schema(schema_str, "AVRO")
        self._reader_schema = reader
        self._reader: Any = None
        if reader is not None and not reader.references:
            self._reader = fastavro.parse_schema(json.loads(reader.schema_str))
        self._from_dict = from_dict
        self._return_record_name = return_record_name
        self._writers: dict[int | str, Any] = {}

    async def prefetch(self, data: bytes, ctx: SerializationContext | None = None) -> None:
        """Fetch and cache the writer schema ``data`` names (and the reader schema's references)."""
        schema_id, _, _ = writer_reference(data, ctx)
        if self._reader is None and self._reader_schema is not None:
            self._reader = await _parse_avro(self._client, self._reader_schema)
        if schema_id not in self._writers:
            self._writers[schema_id] = await _parse_avro(
                self._client, await fetch_writer_schema(self._client, schema_id)
            )

    def deserialize(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        """Sync path: decode with cached schemas; SchemaNotResolvedError for an unseen schema id."""
        if data is None:
            return None
        schema_id, _, payload = writer_reference(data, ctx)
        writer = self._writers.get(schema_id)
        if writer is None or (self._reader is None and self._reader_schema is not None):
            raise SchemaNotResolvedError(
                f"writer schema {schema_id} not fetched yet: await deserializer.prefetch(data) "
                "or deserializer.deserialize_async(data, ctx)"
            )
        try:
            record = fastavro.schemaless_reader(
                io.BytesIO(payload),
                writer,
                self._reader,
                return_record_name=self._return_record_name,
            )
        except Exception as exc:
            raise SerializationError(f"cannot decode Avro record with schema id {schema_id}: {exc}") from exc
        return self._from_dict(record, ctx) if self._from_dict is not None else record

    __call__ = deserialize

    async def deserialize_async(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        await self.prefetch(data, ctx)
        return self.deserialize(data, ctx)
