"""What the three serializer families share: the wire format, subject naming and schema-id caching.

Wire format (Confluent's): byte 0 is the magic 0, bytes 1-4 the schema id (big-endian), then the
payload (Protobuf puts its message indexes before the payload).

The clients hand these serializers their context (``aiokafka_lite.core.serialization``): a
``Producer(value_serializer=AvroSerializer(...))`` calls ``serialize(obj, ctx)`` with the record's
topic (the subject name strategy), the field (key or value) and its headers (a list: with
``schema_id_in_header=True`` the schema GUID goes there, replacing a same-named header copied from
another record); a ``Consumer(value_deserializer=AvroDeserializer(...))`` calls ``deserialize(data,
ctx)`` with the record's headers, where the header-based schema id is read. A subject or writer
schema not cached yet makes the sync call raise ``SchemaNotResolvedError`` (a
``SerializerNotReadyError``): the client then awaits ``serialize_async``/``deserialize_async`` on its
async path, so nothing blocks the event loop and no ``prepare`` is needed.

A registry lookup is I/O, so it never happens inside the synchronous call: ``await
serializer.prepare(topic)`` (or one ``await serializer.serialize_async(obj, ctx)``) resolves and caches
the schema id of that topic's subject; after that ``serializer(obj)`` (one prepared topic) or
``serializer.serialize(obj, ctx)`` is a plain synchronous function with no I/O, fit for a producer's
``value_serializer``. Deserializers likewise: ``deserialize_async`` fetches an unknown writer schema,
``deserializer(data)`` decodes with the schemas already cached and raises
:class:`SchemaNotResolvedError` for an unseen id (``await deserializer.prefetch(data)`` resolves it).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from aiokafka_lite.core.serialization import MessageField as MessageField
from aiokafka_lite.core.serialization import SerializationContext as SerializationContext
from aiokafka_lite.integrations.schema_registry.client import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
)
from aiokafka_lite.integrations.schema_registry.errors import SchemaNotResolvedError, SerializationError

MAGIC_BYTE = 0
MAGIC_BYTE_GUID = 1
_HEADER = struct.Struct(">bI")
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"


def schema_id_header_name(field: MessageField) -> str:
    return KEY_SCHEMA_ID_HEADER if field is MessageField.KEY else VALUE_SCHEMA_ID_HEADER


def writer_reference(
    data: bytes, ctx: SerializationContext | None
) -> tuple[int | str, memoryview, memoryview]:
    """Where the writer's schema is named: the schema id (payload prefix) or the schema GUID (the
    ``__value_schema_id``/``__key_schema_id`` header, magic 1 + 16 bytes, as Confluent's header
    format), the rest of that header (Protobuf's message indexes) and the payload."""
    if ctx is not None and ctx.headers:
        name = schema_id_header_name(ctx.field)
        for key, value in ctx.headers:
            if key == name and value is not None:
                if len(value) < 17 or value[0] != MAGIC_BYTE_GUID:
                    raise SerializationError(
                        f"header {name} is not magic byte 1 and a 16-byte schema GUID: {value[:17]!r}"
                    )
                return str(uuid.UUID(bytes=bytes(value[1:17]))), memoryview(value)[17:], memoryview(data)
    schema_id, payload = unframe(data)
    return schema_id, payload[:0], payload


SubjectNameStrategy = Callable[[SerializationContext, str | None], str]


def topic_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<topic>-key`` / ``<topic>-value`` (Confluent's default)."""
    return f"{ctx.topic}-{ctx.field.value}"


def record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """The record's fully qualified name (the same subject on every topic)."""
    if not record_name:
        raise SerializationError(
            "record_subject_name_strategy needs a record name (Avro name, Protobuf message, JSON title)"
        )
    return record_name


def topic_record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<topic>-<record name>``."""
    return f"{ctx.topic}-{record_subject_name_strategy(ctx, record_name)}"


def frame(schema_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC_BYTE, schema_id) + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """The schema id and the payload after the 5-byte header; SerializationError if not framed."""
    if len(data) < 5 or data[0] != MAGIC_BYTE:
        raise SerializationError(
            f"not Confluent-framed data: expected magic byte 0 and a 4-byte schema id, got {bytes(data[:5])!r} "
            "(was it written without a schema registry serializer?)"
        )
    return int.from_bytes(data[1:5], "big"), memoryview(data)[5:]


async def fetch_writer_schema(client: SchemaRegistryClient, reference: int | str) -> Schema:
    """The writer's schema by id (payload prefix) or by GUID (schema id header)."""
    if isinstance(reference, int):
        return await client.get_schema(reference)
    return await client.get_schema_by_guid(reference)


async def referenced_schemas(
    client: SchemaRegistryClient, references: Sequence[SchemaReference]
) -> list[Schema]:
    """The schemas ``references`` name, each one's own references before it (dependencies first)."""
    ordered: list[Schema] = []
    for ref in references:
        registered = await client.get_version(ref.subject, ref.version)
        ordered += await referenced_schemas(client, registered.schema.references)
        ordered.append(registered.schema)
    return ordered


@dataclass(frozen=True, slots=True)
class _Resolved:
    """A subject's resolved schema: its id, the format's compiled writer, the schema-id header (header
    mode) and the bytes before the payload (prefix mode: magic, id, Protobuf's indexes)."""

    schema_id: int
    writer: Any
    guid_header: bytes | None
    prefix: bytes


class SchemaSerializerBase:
    """Resolves and caches, per subject, the id of the schema records are written with.

    ``auto_register``: register the schema (Confluent's ``auto.register.schemas``, default on);
    otherwise it must already be registered (looked up). ``use_latest_version``: write with the
    subject's latest registered schema instead. ``normalize``: ask the registry to normalize.
    ``schema_id_in_header``: write the schema's GUID into the ``__value_schema_id`` (``__key_schema_id``)
    header instead of the 5-byte prefix (Confluent's header format; needs a context with a headers list).
    """

    schema_type = "AVRO"

    def __init__(
        self,
        client: SchemaRegistryClient,
        schema: Schema | None,
        *,
        auto_register: bool = True,
        use_latest_version: bool = False,
        normalize: bool = False,
        schema_id_in_header: bool = False,
        subject_name_strategy: SubjectNameStrategy = topic_subject_name_strategy,
        field: MessageField = MessageField.VALUE,
    ) -> None:
        if schema is None and not use_latest_version:
            raise ValueError("a schema is needed unless use_latest_version=True")
        if use_latest_version and auto_register:
            auto_register = False  # Confluent's rule: use.latest.version excludes auto-registering
        self._client = client
        self._schema = schema
        self._auto_register = auto_register
        self._use_latest = use_latest_version
        self._normalize = normalize
        self._subject_name = subject_name_strategy
        self._field = field
        self._id_in_header = schema_id_in_header
        #: Resolved schemas by (topic, field): the context's topic and field name the subject.
        self._by_topic: dict[tuple[str, MessageField], _Resolved] = {}
        self._by_subject: dict[str, _Resolved] = {}
        self._locks: dict[str, anyio.Lock] = {}

    @property
    def record_name(self) -> str | None:
        return None

    async def prepare(self, topic: str, field: MessageField | None = None) -> int:
        """Resolve (register, look up or fetch latest) this topic's schema id; cached afterwards."""
        ctx = SerializationContext(topic, field or self._field)
        cached = self._by_topic.get((topic, ctx.field))
        if cached is not None:
            return cached.schema_id
        subject = self._subject_name(ctx, self.record_name)
        # One resolution per subject at a time: a burst of first sends makes one registry call.
        async with self._locks.setdefault(subject, anyio.Lock()):
            entry = await self._resolve(subject)
        self._by_topic[(topic, ctx.field)] = entry
        return entry.schema_id

    async def _resolve(self, subject: str) -> _Resolved:
        entry = self._by_subject.get(subject)
        if entry is None:
            if self._use_latest:
                registered: RegisteredSchema = await self._client.get_latest_version(subject)
                schema = registered.schema
            else:
                assert self._schema is not None
                schema = self._schema
                if self._auto_register:
                    registered = await self._client.register_schema_full_response(
                        subject, schema, normalize=self._normalize
                    )
                else:
                    registered = await self._client.lookup_schema(subject, schema)
            writer = await self._writer_for(schema)
            guid_header = None
            if self._id_in_header:
                if not registered.guid:
                    raise SerializationError(
                        f"the registry gave no schema GUID for {subject}: it cannot take the schema id in "
                        "a header (use schema_id_in_header=False)"
                    )
                guid_header = bytes([MAGIC_BYTE_GUID]) + uuid.UUID(registered.guid).bytes + self._indexes
            prefix = _HEADER.pack(MAGIC_BYTE, registered.schema_id) + self._indexes
            entry = _Resolved(registered.schema_id, writer, guid_header, prefix)
            self._by_subject[subject] = entry
        return entry

    async def _writer_for(self, schema: Schema) -> Any:
        """The format's compiled writer for ``schema`` (parsed Avro schema, validator, ...)."""
        return None

    def _encode(self, obj: Any, writer: Any, ctx: SerializationContext | None) -> bytes:
        raise NotImplementedError

    # Protobuf's message indexes; they go after the id, in the payload or in the header.
    _indexes = b""

    def _entry(self, ctx: SerializationContext | None) -> _Resolved:
        if ctx is None:
            if len(self._by_topic) != 1:
                raise SchemaNotResolvedError(
                    f"{type(self).__name__}(obj) without a context needs exactly one prepared topic, "
                    f"have {sorted(t for t, _ in self._by_topic)}: await serializer.prepare(topic) first, "
                    "or call serialize(obj, ctx)"
                )
            return next(iter(self._by_topic.values()))
        entry = self._by_topic.get((ctx.topic, ctx.field))
        if entry is None:
            raise SchemaNotResolvedError(
                f"the schema for topic {ctx.topic!r} ({ctx.field.value}) is not resolved yet: "
                "await serializer.prepare(topic) or serializer.serialize_async(obj, ctx) first"
            )
        return entry

    def serialize(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        """Sync fast path (no I/O): the framed bytes of ``obj`` (None stays None, a tombstone)."""
        if obj is None:
            return None
        entry = self._entry(ctx)
        if entry.guid_header is None:
            return entry.prefix + self._encode(obj, entry.writer, ctx)
        headers = ctx.headers if ctx is not None else None
        if not isinstance(headers, MutableSequence):
            raise SerializationError(
                "schema_id_in_header=True needs a SerializationContext whose headers is a list to append to"
            )
        body = self._encode(obj, entry.writer, ctx)
        name = schema_id_header_name(ctx.field if ctx is not None else self._field)
        if any(key == name for key, _ in headers):
            # A header copied from another record (a dead letter, a re-publish) names another
            # schema; the deserializer reads the first one, so this record's replaces it.
            headers[:] = [h for h in headers if h[0] != name]
        headers.append((name, entry.guid_header))
        return body

    __call__ = serialize

    async def serialize_async(self, obj: Any, ctx: SerializationContext) -> bytes | None:
        """Resolve the schema when needed, then serialize."""
        if obj is None:
            return None
        await self.prepare(ctx.topic, ctx.field)
        return self.serialize(obj, ctx)
