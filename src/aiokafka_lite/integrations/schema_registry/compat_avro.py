"""Avro schema resolution (can a reader schema read data written with a writer schema?).

The rules are the Avro specification's "Schema Resolution": the same primitive type or a promotion
(int -> long, float, double; long -> float, double; float -> double; string <-> bytes); records match
by name (or a reader alias) and every reader field is in the writer (by name or alias) or has a
default; enums match by name and every writer symbol is a reader symbol unless the reader has a
default; arrays, maps by their items and values; fixed by name and size; a writer union needs every
branch readable, a reader union one branch that reads the writer. Logical types follow their
underlying type, as Avro's own checker does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fastavro

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class ParsedAvro:
    """A parsed Avro schema and the named types it (and its references) define."""

    def __init__(self, schema: Any, named: dict[str, Any]) -> None:
        self.schema = schema
        self.named = named


def parse(schema_str: str, references: list[str] | None = None) -> ParsedAvro:
    """Parse ``schema_str`` after the referenced schemas (texts, dependencies first); raises ValueError."""
    import json

    named: dict[str, Any] = {}
    try:
        for ref in references or ():
            fastavro.parse_schema(json.loads(ref), named_schemas=named)
        parsed = fastavro.parse_schema(json.loads(schema_str), named_schemas=named)
    except Exception as exc:
        raise ValueError(f"Invalid schema: {exc}") from exc
    _check_declarations(json.loads(schema_str))
    return ParsedAvro(parsed, named)


def _check_declarations(schema: Any) -> None:
    """fastavro fills in a few omissions the Avro specification (and Confluent) reject."""
    if isinstance(schema, list):
        for branch in schema:
            _check_declarations(branch)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record":
            if not isinstance(schema.get("fields"), list):
                raise ValueError(f"Invalid schema: record {schema.get('name')} has no fields list")
            for field in schema["fields"]:
                _check_declarations(field.get("type") if isinstance(field, dict) else None)
        elif kind == "enum" and not schema.get("symbols"):
            raise ValueError(f"Invalid schema: enum {schema.get('name')} has no symbols")
        elif kind == "array":
            _check_declarations(schema.get("items"))
        elif kind == "map":
            _check_declarations(schema.get("values"))
        elif isinstance(kind, dict | list):
            _check_declarations(kind)


def check(reader: ParsedAvro, writer: ParsedAvro) -> list[str]:
    """The reasons ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    return _Checker(reader.named, writer.named).check(reader.schema, writer.schema, "/")


class _Checker:
    def __init__(self, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]) -> None:
        self._reader_named = reader_named
        self._writer_named = writer_named
        self._in_progress: set[tuple[str, str]] = set()

    def _resolve(self, schema: Any, named: Mapping[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            return named[schema]
        if isinstance(schema, dict) and schema.get("type") in PRIMITIVES:
            return schema["type"]  # {"type": "long", "logicalType": ...}: the underlying type
        return schema

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._resolve(reader, self._reader_named)
        writer = self._resolve(writer, self._writer_named)
        if isinstance(writer, list):
            problems: list[str] = []
            for index, branch in enumerate(writer):
                problems += self.check(reader, branch, f"{path}{index}/")
            return problems
        if isinstance(reader, list):
            for branch in reader:
                if not self.check(branch, writer, path):
                    return []
            return [
                f"{path}: reader union lacks a branch for writer type {_type_name(writer)} (MISSING_UNION_BRANCH)"
            ]
        reader_type = _type_name(reader)
        writer_type = _type_name(writer)
        if reader_type != writer_type:
            if isinstance(writer, str) and isinstance(reader, str) and reader in PROMOTIONS.get(writer, ()):
                return []
            return [
                f"{path}: reader type {reader_type} cannot read writer type {writer_type} (TYPE_MISMATCH)"
            ]
        if isinstance(reader, str):
            return []
        if reader_type == "record":
            return self._record(reader, writer, path)
        if reader_type == "enum":
            problems = self._names(reader, writer, path)
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                problems.append(
                    f"{path}symbols: reader lacks writer symbols {missing} (MISSING_ENUM_SYMBOLS)"
                )
            return problems
        if reader_type == "fixed":
            problems = self._names(reader, writer, path)
            if reader["size"] != writer["size"]:
                problems.append(
                    f"{path}size: fixed size {writer['size']} -> {reader['size']} (FIXED_SIZE_MISMATCH)"
                )
            return problems
        if reader_type == "array":
            return self.check(reader["items"], writer["items"], f"{path}items/")
        if reader_type == "map":
            return self.check(reader["values"], writer["values"], f"{path}values/")
        return [f"{path}: unknown type {reader_type}"]

    def _names(self, reader: Mapping[str, Any], writer: Mapping[str, Any], path: str) -> list[str]:
        writer_name = writer["name"]
        aliases = set(reader.get("aliases") or ())
        short = writer_name.rsplit(".", 1)[-1]
        if (
            writer_name == reader["name"]
            or writer_name in aliases
            or short == reader["name"].rsplit(".", 1)[-1]
        ):
            return []
        if short in {a.rsplit(".", 1)[-1] for a in aliases}:
            return []
        return [f"{path}name: expected {writer_name}, found {reader['name']} (NAME_MISMATCH)"]

    def _record(self, reader: Mapping[str, Any], writer: Mapping[str, Any], path: str) -> list[str]:
        key = (reader["name"], writer["name"])
        if key in self._in_progress:  # a recursive type: assume the pair compatible while checking it
            return []
        self._in_progress.add(key)
        try:
            problems = self._names(reader, writer, path)
            writer_fields = {field["name"]: field for field in writer["fields"]}
            for index, field in enumerate(reader["fields"]):
                field_path = f"{path}fields/{index}/"
                match = writer_fields.get(field["name"])
                if match is None:
                    for alias in field.get("aliases") or ():
                        match = writer_fields.get(alias)
                        if match is not None:
                            break
                if match is None:
                    if "default" not in field:
                        problems.append(
                            f"{field_path}: reader field {field['name']!r} has no default and is not in the "
                            "writer (READER_FIELD_MISSING_DEFAULT_VALUE)"
                        )
                    continue
                problems += self.check(field["type"], match["type"], f"{field_path}type/")
            return problems
        finally:
            self._in_progress.discard(key)


def _type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    return str(schema["type"])
