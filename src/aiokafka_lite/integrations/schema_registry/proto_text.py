"""A small parser of ``.proto`` text into a ``FileDescriptorProto``, for the registry's checks.

The subset: ``syntax``, ``package``, ``import`` (also ``public``/``weak``), ``option`` statements
(skipped), ``message`` with nested messages and enums, fields with ``optional``/``repeated``/
``required`` labels, ``map<K, V>`` fields, ``oneof`` groups, ``reserved`` and ``extensions``
(skipped), field options in brackets (skipped), ``enum`` and ``service`` (skipped) blocks. Not
supported: ``extend``, groups, custom option semantics. Type names are resolved in this file's
scopes (innermost first); a name not defined here is taken as fully qualified (from an import) and
assumed to be a message.
"""

from __future__ import annotations

import re

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64, "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}  # fmt: skip
_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|([A-Za-z_][\w.]*|\.[A-Za-z_][\w.]*|-?\d[\w.+-]*)|(.)',
    re.S,
)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[str] = []
        for match in _TOKEN.finditer(text):
            token = match.group(1) or match.group(2) or match.group(3)
            if token:
                self.items.append(token)
        self.position = 0

    def peek(self) -> str:
        return self.items[self.position] if self.position < len(self.items) else ""

    def next(self) -> str:
        token = self.peek()
        if not token:
            raise ValueError("unexpected end of .proto text")
        self.position += 1
        return token

    def expect(self, token: str) -> None:
        found = self.next()
        if found != token:
            raise ValueError(f"expected {token!r} in .proto text, found {found!r}")

    def skip_statement(self) -> None:
        depth = 0
        while True:
            token = self.next()
            if token == "{":
                depth += 1
            elif token == "}":
                depth -= 1
                if depth == 0:
                    return
            elif token == ";" and depth == 0:
                return


def parse_proto(text: str, name: str = "schema.proto") -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` of ``.proto`` text (the subset in the module docstring)."""
    try:
        return _parse(text, name)
    except (IndexError, KeyError) as exc:
        raise ValueError(f"cannot parse .proto text: {exc!r}") from exc


def _parse(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    tokens = _Tokens(text)
    file = descriptor_pb2.FileDescriptorProto(name=name, syntax="proto2")
    while tokens.peek():
        keyword = tokens.next()
        if keyword == "syntax" or keyword == "edition":
            tokens.expect("=")
            file.syntax = tokens.next().strip("\"'")
            tokens.expect(";")
        elif keyword == "package":
            file.package = tokens.next()
            tokens.expect(";")
        elif keyword == "import":
            path = tokens.next()
            if path in ("public", "weak"):
                path = tokens.next()
            file.dependency.append(path.strip("\"'"))
            tokens.expect(";")
        elif keyword == "message":
            _message(tokens, file.message_type.add(), file.syntax)
        elif keyword == "enum":
            _enum(tokens, file.enum_type.add())
        elif keyword in ("option", "service", "extend"):
            tokens.skip_statement()
        elif keyword == ";":
            continue
        else:
            raise ValueError(f"unsupported .proto statement {keyword!r}")
    _resolve(file)
    return file


def _message(tokens: _Tokens, message: descriptor_pb2.DescriptorProto, syntax: str) -> None:
    message.name = tokens.next()
    tokens.expect("{")
    oneof: int | None = None
    while True:
        token = tokens.peek()
        if token == "}":
            tokens.next()
            if oneof is None:
                for field in message.field:
                    if field.proto3_optional:
                        message.oneof_decl.add(name=f"_{field.name}")
                        field.oneof_index = len(message.oneof_decl) - 1
                return
            oneof = None
            continue
        if token == "message":
            tokens.next()
            _message(tokens, message.nested_type.add(), syntax)
        elif token == "enum":
            tokens.next()
            _enum(tokens, message.enum_type.add())
        elif token == "oneof":
            tokens.next()
            message.oneof_decl.add(name=tokens.next())
            tokens.expect("{")
            oneof = len(message.oneof_decl) - 1
        elif token in ("option", "reserved", "extensions", "extend"):
            tokens.skip_statement()
        elif token == ";":
            tokens.next()
        else:
            _field(tokens, message, syntax, oneof)


def _field(tokens: _Tokens, message: descriptor_pb2.DescriptorProto, syntax: str, oneof: int | None) -> None:
    label = F.LABEL_OPTIONAL
    proto3_optional = False
    token = tokens.next()
    if token in ("optional", "repeated", "required"):
        label = {"optional": F.LABEL_OPTIONAL, "repeated": F.LABEL_REPEATED, "required": F.LABEL_REQUIRED}[
            token
        ]
        proto3_optional = token == "optional" and syntax == "proto3"
        token = tokens.next()
    field = message.field.add()
    if token == "map":
        tokens.expect("<")
        key_type = tokens.next()
        tokens.expect(",")
        value_type = tokens.next()
        tokens.expect(">")
        field.name = tokens.next()
        entry = message.nested_type.add(name="".join(p.capitalize() for p in field.name.split("_")) + "Entry")
        entry.options.map_entry = True
        for entry_name, number, kind in (("key", 1, key_type), ("value", 2, value_type)):
            entry_field = entry.field.add(name=entry_name, number=number, label=F.LABEL_OPTIONAL)
            _set_type(entry_field, kind)
        field.label = F.LABEL_REPEATED
        field.type = F.TYPE_MESSAGE
        field.type_name = entry.name
    else:
        field.name = tokens.next()
        field.label = label
        _set_type(field, token)
    tokens.expect("=")
    field.number = int(tokens.next(), 0)
    if tokens.peek() == "[":
        while tokens.next() != "]":
            pass
    tokens.expect(";")
    if oneof is not None:
        field.oneof_index = oneof
    elif proto3_optional:
        field.proto3_optional = True  # its synthetic oneof is added after the real ones


def _set_type(field: descriptor_pb2.FieldDescriptorProto, kind: str) -> None:
    if kind in _SCALARS:
        field.type = _SCALARS[kind]
    else:
        field.type_name = kind  # resolved once every name of the file is known


def _enum(tokens: _Tokens, enum: descriptor_pb2.EnumDescriptorProto) -> None:
    enum.name = tokens.next()
    tokens.expect("{")
    while (token := tokens.next()) != "}":
        if token in ("option", "reserved"):
            tokens.position -= 1
            tokens.skip_statement()
            continue
        if token == ";":
            continue
        tokens.expect("=")
        enum.value.add(name=token, number=int(tokens.next(), 0))
        if tokens.peek() == "[":
            while tokens.next() != "]":
                pass
        tokens.expect(";")


def _resolve(file: descriptor_pb2.FileDescriptorProto) -> None:
    kinds: dict[str, int] = {}

    def collect(
        prefix: str,
        messages: list[descriptor_pb2.DescriptorProto],
        enums: list[descriptor_pb2.EnumDescriptorProto],
    ) -> None:
        for enum in enums:
            kinds[f"{prefix}.{enum.name}"] = F.TYPE_ENUM
        for message in messages:
            full = f"{prefix}.{message.name}"
            kinds[full] = F.TYPE_MESSAGE
            collect(full, list(message.nested_type), list(message.enum_type))

    root = f".{file.package}" if file.package else ""
    collect(root, list(file.message_type), list(file.enum_type))

    def visit(scope: str, messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            inner = f"{scope}.{message.name}"
            for field in message.field:
                if not field.type_name or field.type_name.startswith("."):
                    if field.type_name and not field.HasField("type"):
                        field.type = kinds.get(field.type_name, F.TYPE_MESSAGE)
                    continue
                candidates = []
                parts = inner.split(".")
                while parts:
                    candidates.append(".".join([*parts, field.type_name]))
                    parts.pop()
                resolved = next((c for c in candidates if c in kinds), "." + field.type_name)
                field.type_name = resolved
                field.type = kinds.get(resolved, F.TYPE_MESSAGE)
            visit(inner, list(message.nested_type))

    visit(root, list(file.message_type))
