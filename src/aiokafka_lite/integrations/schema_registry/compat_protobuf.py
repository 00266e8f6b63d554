"""Protobuf compatibility on descriptors, a subset of Confluent's rules.

Checked per message (by full name) and per field (by number), between the writer's and the reader's
file: MESSAGE_REMOVED (a message of the writer is not in the reader, so a rename is a removal),
FIELD_KIND_CHANGED (scalar vs message vs enum, or singular vs repeated), FIELD_SCALAR_KIND_CHANGED
outside the wire-compatible groups (int32/uint32/int64/uint64/bool; sint32/sint64; fixed32/sfixed32;
fixed64/sfixed64; string/bytes), FIELD_NAMED_TYPE_CHANGED, REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED
(proto2), PACKAGE_CHANGED, and MULTIPLE_FIELDS_MOVED_TO_ONEOF. Added and removed optional fields and
renamed fields keep their numbers on the wire and are compatible, as in Confluent's registry.

Schemas arrive as text ``.proto`` or as a base64 ``FileDescriptorProto`` (what confluent-kafka's
Python serializer registers); see :mod:`.proto_text` for the text subset parsed.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2

FDP = descriptor_pb2.FieldDescriptorProto
_GROUPS = [
    {FDP.TYPE_INT32, FDP.TYPE_UINT32, FDP.TYPE_INT64, FDP.TYPE_UINT64, FDP.TYPE_BOOL},
    {FDP.TYPE_SINT32, FDP.TYPE_SINT64},
    {FDP.TYPE_FIXED32, FDP.TYPE_SFIXED32},
    {FDP.TYPE_FIXED64, FDP.TYPE_SFIXED64},
    {FDP.TYPE_STRING, FDP.TYPE_BYTES},
]


def _messages(
    file: descriptor_pb2.FileDescriptorProto,
) -> dict[str, descriptor_pb2.DescriptorProto]:
    found: dict[str, descriptor_pb2.DescriptorProto] = {}

    def visit(prefix: str, messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            name = f"{prefix}.{message.name}" if prefix else message.name
            if not message.options.map_entry:
                found[name] = message
            visit(name, list(message.nested_type))

    visit(file.package, list(file.message_type))
    return found


def _kind(field: descriptor_pb2.FieldDescriptorProto) -> str:
    if field.type in (FDP.TYPE_MESSAGE, FDP.TYPE_GROUP):
        return "message"
    if field.type == FDP.TYPE_ENUM:
        return "enum"
    return "scalar"


def check(
    reader: descriptor_pb2.FileDescriptorProto, writer: descriptor_pb2.FileDescriptorProto
) -> list[str]:
    """The reasons data written with ``writer`` may not be read with ``reader`` (empty: compatible)."""
    problems: list[str] = []
    if reader.package != writer.package:
        problems.append(f"#/package: {writer.package!r} -> {reader.package!r} (PACKAGE_CHANGED)")
    reader_messages = _messages(reader)
    for name, writer_message in _messages(writer).items():
        reader_message = reader_messages.get(name)
        if reader_message is None:
            problems.append(f"#/{name}: message removed (MESSAGE_REMOVED)")
            continue
        reader_fields = {f.number: f for f in reader_message.field}
        writer_fields = {f.number: f for f in writer_message.field}
        moved_to_oneof = 0
        for number, old in writer_fields.items():
            new = reader_fields.get(number)
            path = f"#/{name}/{number}"
            if new is None:
                if old.label == FDP.LABEL_REQUIRED:
                    problems.append(f"{path}: required field removed (REQUIRED_FIELD_REMOVED)")
                continue
            if _kind(old) != _kind(new) or (old.label == FDP.LABEL_REPEATED) != (
                new.label == FDP.LABEL_REPEATED
            ):
                problems.append(f"{path}: field kind changed (FIELD_KIND_CHANGED)")
            elif _kind(old) == "scalar" and old.type != new.type:
                if not any(old.type in group and new.type in group for group in _GROUPS):
                    problems.append(f"{path}: scalar type changed (FIELD_SCALAR_KIND_CHANGED)")
            elif _kind(old) != "scalar" and old.type_name.lstrip(".") != new.type_name.lstrip("."):
                problems.append(f"{path}: type {old.type_name} -> {new.type_name} (FIELD_NAMED_TYPE_CHANGED)")
            if not old.HasField("oneof_index") and new.HasField("oneof_index") and not new.proto3_optional:
                moved_to_oneof += 1
        if moved_to_oneof > 1:
            problems.append(f"#/{name}: several fields moved into a oneof (MULTIPLE_FIELDS_MOVED_TO_ONEOF)")
        for number, new in reader_fields.items():
            if number not in writer_fields and new.label == FDP.LABEL_REQUIRED:
                problems.append(f"#/{name}/{number}: required field added (REQUIRED_FIELD_ADDED)")
    return problems
