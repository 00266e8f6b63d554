"""Protobuf serializer and deserializer, Confluent wire format.

After the 5-byte header comes the message-index path of the record's message type within its
``.proto`` file, as zigzag varints: the count, then each index (top-level message 2 is ``[2]``; a
nested message ``[2, 0]``); the common ``[0]`` is written as the single byte 0. The schema registered
is the file's ``FileDescriptorProto``, base64-encoded (as confluent-kafka's Python serializer does);
its imports are registered first as references, under their file names, except Google's well-known
types, which registries know built in.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import DecodeError, Message

from aiokafka_lite.integrations.schema_registry.client import Schema, SchemaReference, SchemaRegistryClient
from aiokafka_lite.integrations.schema_registry.errors import SerializationError
from aiokafka_lite.integrations.schema_registry.serde import (
    MessageField,
    SchemaSerializerBase,
    SerializationContext,
    SubjectNameStrategy,
    topic_subject_name_strategy,
    writer_reference,
)


def _zigzag_varint(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_message_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    return _zigzag_varint(len(indexes)) + b"".join(_zigzag_varint(i) for i in indexes)


def decode_message_indexes(data: memoryview) -> tuple[list[int], memoryview]:
    """The message indexes at the start of ``data`` and the rest (the message bytes)."""
    if data and data[0] == 0:  # the common [0], written as one byte
        return [0], data[1:]
    values: list[int] = []
    position = 0
    count = -1
    while count < 0 or len(values) < count:
        shift = result = 0
        while True:
            if position >= len(data) or shift > 63:
                raise SerializationError("truncated or overlong varint in the Protobuf message indexes")
            byte = data[position]
            position += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
        value = (result >> 1) ^ -(result & 1)
        if count < 0:
            if value < 0 or value > 1024:
                raise SerializationError(f"bad Protobuf message index count {value}")
            count = value
        else:
            values.append(value)
    return values or [0], data[position:]


def message_indexes(descriptor: Descriptor) -> list[int]:
    path: list[int] = []
    current: Descriptor | None = descriptor
    while current is not None:
        parent = current.containing_type
        siblings = (
            parent.nested_types if parent is not None else list(current.file.message_types_by_name.values())
        )
        path.append([d.full_name for d in siblings].index(current.full_name))
        current = parent
    return path[::-1]


def _schema_text(file: FileDescriptor) -> str:
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    return base64.b64encode(proto.SerializeToString()).decode()


def _is_well_known(file: FileDescriptor) -> bool:
    return bool(file.name.startswith("google/protobuf/"))


class ProtobufSerializer(SchemaSerializerBase):
    """``ProtobufSerializer(msg_type, client, ...)`` as confluent-kafka's (argument order too).

    Dependencies of the message's file are registered under their file names as references (when
    ``auto_register``) and the file under the subject. ``to_dict`` is not used: records are messages.
    """

    schema_type = "PROTOBUF"

    def __init__(
        self,
        msg_type: type[Message],
        client: SchemaRegistryClient,
        *,
        auto_register: bool = True,
        use_latest_version: bool = False,
        normalize: bool = False,
        schema_id_in_header: bool = False,
        subject_name_strategy: SubjectNameStrategy = topic_subject_name_strategy,
        field: MessageField = MessageField.VALUE,
    ) -> None:
        self._msg_type = msg_type
        self._descriptor: Descriptor = msg_type.DESCRIPTOR
        super().__init__(
            client,
            Schema(_schema_text(self._descriptor.file), "PROTOBUF"),
            auto_register=auto_register,
            use_latest_version=use_latest_version,
            normalize=normalize,
            schema_id_in_header=schema_id_in_header,
            subject_name_strategy=subject_name_strategy,
            field=field,
        )
        self._indexes = encode_message_indexes(message_indexes(self._descriptor))
        self._references_resolved = False

    @property
    def record_name(self) -> str | None:
        return str(self._descriptor.full_name)

    async def prepare(self, topic: str, field: MessageField | None = None) -> int:
        if not self._references_resolved and not self._use_latest:
            references = await self._resolve_references(self._descriptor.file)
            assert self._schema is not None
            self._schema = Schema(self._schema.schema_str, "PROTOBUF", tuple(references))
            self._references_resolved = True
        return await super().prepare(topic, field)

    async def _resolve_references(self, file: FileDescriptor) -> list[SchemaReference]:
        references = []
        for dependency in file.dependencies:
            if _is_well_known(dependency):
                continue
            schema = Schema(
                _schema_text(dependency), "PROTOBUF", tuple(await self._resolve_references(dependency))
            )
            if self._auto_register:
                registered = await self._client.register_schema_full_response(dependency.name, schema)
            else:
                registered = await self._client.lookup_schema(dependency.name, schema)
            references.append(SchemaReference(dependency.name, dependency.name, registered.version))
        return references

    def _encode(self, obj: Any, writer: Any, ctx: SerializationContext | None) -> bytes:
        if not isinstance(obj, self._msg_type):
            raise SerializationError(
                f"expected a {self._descriptor.full_name} message, got {type(obj).__name__}"
            )
        return bytes(obj.SerializeToString())


class ProtobufDeserializer:
    """``ProtobufDeserializer(message_type, ...)``: decodes into ``message_type``.

    The registry is not needed to decode (the reader brings its message type); the message indexes
    are read and skipped. ``from_dict`` is not used.
    """

    def __init__(self, message_type: type[Message], client: SchemaRegistryClient | None = None) -> None:
        self._msg_type = message_type
        self._client = client

    def deserialize(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        schema_id, header_rest, payload = writer_reference(data, ctx)
        if isinstance(schema_id, str):  # the id in a header: the message indexes follow the GUID there
            body = payload
            if header_rest:
                decode_message_indexes(header_rest)
        else:
            _indexes, body = decode_message_indexes(payload)
        try:
            return self._msg_type.FromString(bytes(body))
        except DecodeError as exc:
            raise SerializationError(
                f"cannot decode {self._msg_type.__name__} (schema id {schema_id}): {exc}"
            ) from exc

    __call__ = deserialize

    async def deserialize_async(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        return self.deserialize(data, ctx)
