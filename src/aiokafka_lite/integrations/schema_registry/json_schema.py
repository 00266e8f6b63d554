"""JSON Schema serializer and deserializer (jsonschema validation), Confluent wire format."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from jsonschema import ValidationError
from jsonschema.validators import validator_for

from aiokafka_lite.integrations.schema_registry.avro import _as_schema, _default_to_dict
from aiokafka_lite.integrations.schema_registry.client import Schema, SchemaRegistryClient
from aiokafka_lite.integrations.schema_registry.errors import SchemaNotResolvedError, SerializationError
from aiokafka_lite.integrations.schema_registry.serde import (
    MessageField,
    SchemaSerializerBase,
    SerializationContext,
    SubjectNameStrategy,
    fetch_writer_schema,
    topic_subject_name_strategy,
    writer_reference,
)


def _validator(schema_str: str, referenced: Sequence[tuple[str, str]] = ()) -> Any:
    """A validator for the schema; ``referenced`` (reference name, schema text) resolve its ``$ref``s."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    schema = json.loads(schema_str)
    cls = validator_for(schema)
    cls.check_schema(schema)
    if not referenced:
        return cls(schema)
    registry: Any = Registry().with_resources(
        (name, Resource.from_contents(json.loads(text), default_specification=DRAFT202012))
        for name, text in referenced
    )
    return cls(schema, registry=registry)


async def _named_references(client: SchemaRegistryClient, schema: Schema) -> list[tuple[str, str]]:
    """Every schema ``schema`` references, directly or not, by its reference name."""
    found: list[tuple[str, str]] = []
    for ref in schema.references:
        registered = await client.get_version(ref.subject, ref.version)
        found += await _named_references(client, registered.schema)
        found.append((ref.name, registered.schema.schema_str))
    return found


class JSONSerializer(SchemaSerializerBase):
    """``JSONSerializer(schema_str, client, to_dict=None, ...)`` as confluent-kafka's (argument order too).

    Every record is validated against the schema before it is written (``validate=False`` skips
    that). The record name for the record strategies is the schema's ``title``.
    """

    schema_type = "JSON"

    def __init__(
        self,
        schema_str: str | Schema | None,
        client: SchemaRegistryClient,
        to_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        *,
        validate: bool = True,
        auto_register: bool = True,
        use_latest_version: bool = False,
        normalize: bool = False,
        schema_id_in_header: bool = False,
        subject_name_strategy: SubjectNameStrategy = topic_subject_name_strategy,
        field: MessageField = MessageField.VALUE,
    ) -> None:
        schema = _as_schema(schema_str, "JSON")
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
        self._validate = validate
        self._title: str | None = None
        if schema is not None:
            parsed = json.loads(schema.schema_str)
            self._title = parsed.get("title") if isinstance(parsed, dict) else None

    @property
    def record_name(self) -> str | None:
        return self._title

    async def _writer_for(self, schema: Schema) -> Any:
        if not self._validate:
            return None
        return _validator(schema.schema_str, await _named_references(self._client, schema))

    def _encode(self, obj: Any, writer: Any, ctx: SerializationContext | None) -> bytes:
        value = self._to_dict(obj, ctx) if self._to_dict is not None else _default_to_dict(obj)
        if writer is not None:
            try:
                writer.validate(value)
            except ValidationError as exc:
                raise SerializationError(f"record does not match the JSON schema: {exc.message}") from exc
        return json.dumps(value, separators=(",", ":")).encode()


class JSONDeserializer:
    """``JSONDeserializer(schema_str, from_dict=None, client=None)`` as confluent-kafka's.

    Validates against ``schema_str`` when given; else (with a client) against the writer's schema,
    fetched by id; with neither, decodes without validating.
    """

    def __init__(
        self,
        schema_str: str | Schema | None,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        client: SchemaRegistryClient | None = None,
    ) -> None:
        schema = _as_schema(schema_str, "JSON")
        if schema is not None and schema.references and client is None:
            raise ValueError("a schema with references needs a client to fetch them")
        self._reader_schema = schema
        self._validator = (
            _validator(schema.schema_str) if schema is not None and not schema.references else None
        )
        self._from_dict = from_dict
        self._client = client
        self._writers: dict[int | str, Any] = {}

    async def prefetch(self, data: bytes, ctx: SerializationContext | None = None) -> None:
        schema_id, _, _ = writer_reference(data, ctx)
        if self._client is None:
            return
        if self._validator is None and self._reader_schema is not None:
            references = await _named_references(self._client, self._reader_schema)
            self._validator = _validator(self._reader_schema.schema_str, references)
        elif self._validator is None and schema_id not in self._writers:
            schema = await fetch_writer_schema(self._client, schema_id)
            self._writers[schema_id] = _validator(
                schema.schema_str, await _named_references(self._client, schema)
            )

    def deserialize(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        schema_id, _, payload = writer_reference(data, ctx)
        validator = self._validator
        if validator is None and self._client is not None:
            validator = self._writers.get(schema_id)
            if validator is None:
                raise SchemaNotResolvedError(
                    f"writer schema {schema_id} not fetched yet: await deserializer.prefetch(data) first"
                )
        try:
            value = json.loads(bytes(payload))
        except ValueError as exc:
            raise SerializationError(f"payload of schema id {schema_id} is not JSON: {exc}") from exc
        if validator is not None:
            try:
                validator.validate(value)
            except ValidationError as exc:
                raise SerializationError(f"record does not match the JSON schema: {exc.message}") from exc
        return self._from_dict(value, ctx) if self._from_dict is not None else value

    __call__ = deserialize

    async def deserialize_async(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        await self.prefetch(data, ctx)
        return self.deserialize(data, ctx)
