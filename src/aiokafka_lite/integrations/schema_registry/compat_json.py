"""JSON Schema compatibility: does every instance valid under the writer validate under the reader?

A published subset of Confluent's JSON Schema rules, checked structurally (not by sampling):
type changes (the reader's types must cover the writer's; ``integer`` widens to ``number``);
properties added or removed under open and closed content models (``additionalProperties: false``
closes an object); ``required`` added; ``enum`` narrowed; ``maxLength``/``minLength``/``maximum``/
``minimum``/``maxItems``/``minItems`` narrowed; ``items`` and property schemas recursively.
Local ``$ref`` pointers (``#/$defs/...``, ``#/definitions/...``, as pydantic writes nested models) are
inlined before comparing (recursive ones to a bounded depth). Combinators (``oneOf``/``anyOf``/
``allOf``), ``$ref`` to other documents and ``patternProperties`` are compared only for equality: a
change to them is reported as incompatible, the conservative answer.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema.validators import validator_for

_NARROWING = {
    "maxLength": "max",
    "maxItems": "max",
    "maxProperties": "max",
    "maximum": "max",
    "minLength": "min",
    "minItems": "min",
    "minProperties": "min",
    "minimum": "min",
}
_OPAQUE = ("oneOf", "anyOf", "allOf", "not", "$ref", "patternProperties", "if", "then", "else")


_INLINE_DEPTH = 8  # a self-reference doubles per level with two uses: 2**8 nodes at most


def parse(schema_str: str) -> Any:
    """The schema as JSON, checked against its metaschema, local ``$ref`` inlined; raises ValueError."""
    try:
        schema = json.loads(schema_str)
        validator_for(schema).check_schema(schema)
    except Exception as exc:
        raise ValueError(f"Invalid schema: {exc}") from exc
    return _inline(schema, schema, 0)


def _inline(node: Any, root: Any, depth: int) -> Any:
    """``node`` with every local ``$ref`` replaced by its target (beyond the depth: left as is)."""
    if isinstance(node, list):
        return [_inline(item, root, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#") and depth < _INLINE_DEPTH:
        target: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise ValueError(f"Invalid schema: $ref {ref!r} does not resolve")
            target = target[part]
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        merged = {**target, **siblings} if isinstance(target, dict) else target
        return _inline(merged, root, depth + 1)
    return {k: _inline(v, root, depth) for k, v in node.items() if k not in ("$defs", "definitions")}


def check(reader: Any, writer: Any, path: str = "#") -> list[str]:
    """The reasons ``reader`` rejects some instance ``writer`` accepts (empty: none found)."""
    if reader is True or reader == {}:
        return []
    if writer is False:
        return []
    if reader is False:
        return [f"{path}: the reader accepts nothing (SCHEMA_FALSE)"]
    if writer is True:
        writer = {}
    problems: list[str] = []
    for keyword in _OPAQUE:
        if reader.get(keyword) != writer.get(keyword):
            problems.append(f"{path}: {keyword} changed (COMBINED_TYPE_OR_REFERENCE_CHANGED)")
    reader_types = _types(reader)
    writer_types = _types(writer)
    if reader_types is not None:
        if writer_types is None:
            problems.append(f"{path}: type narrowed to {sorted(reader_types)} (TYPE_NARROWED)")
        else:
            uncovered = {
                t
                for t in writer_types
                if t not in reader_types and not (t == "integer" and "number" in reader_types)
            }
            if uncovered:
                problems.append(
                    f"{path}: type {sorted(writer_types)} -> {sorted(reader_types)} (TYPE_CHANGED)"
                )
    if "enum" in reader:
        extra = (
            [v for v in writer.get("enum", [None, object()]) if v not in reader["enum"]]
            if "enum" in writer
            else ["*"]
        )
        if extra:
            problems.append(f"{path}: enum narrowed (ENUM_ARRAY_NARROWED)")
    if "const" in reader and reader.get("const") != writer.get("const"):
        problems.append(f"{path}: const changed (CONST_CHANGED)")
    for keyword, kind in _NARROWING.items():
        if keyword not in reader:
            continue
        old = writer.get(keyword)
        if old is None or (reader[keyword] < old if kind == "max" else reader[keyword] > old):
            problems.append(f"{path}: {keyword} narrowed to {reader[keyword]} ({keyword.upper()}_NARROWED)")
    problems += _objects(reader, writer, path)
    if "items" in reader or "items" in writer:
        problems += check(reader.get("items", True), writer.get("items", True), f"{path}/items")
    return problems


def _objects(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    problems: list[str] = []
    reader_props: dict[str, Any] = reader.get("properties", {})
    writer_props: dict[str, Any] = writer.get("properties", {})
    reader_additional = reader.get("additionalProperties", True)
    writer_additional = writer.get("additionalProperties", True)
    writer_open = writer_additional is not False
    for name, reader_prop in reader_props.items():
        prop_path = f"{path}/properties/{name}"
        if name in writer_props:
            problems += check(reader_prop, writer_props[name], prop_path)
        elif writer_open:
            # Under the writer's open model the property may hold anything the additional schema allows.
            if check(reader_prop, writer_additional if writer_additional is not True else True, prop_path):
                problems.append(
                    f"{prop_path}: property added to an open content model (PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL)"
                )
    for name, writer_prop in writer_props.items():
        if name in reader_props:
            continue
        prop_path = f"{path}/properties/{name}"
        if reader_additional is False:
            problems.append(
                f"{prop_path}: property removed from a closed content model (PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL)"
            )
        elif reader_additional is not True and check(reader_additional, writer_prop, prop_path):
            problems.append(
                f"{prop_path}: property removed, not covered by additionalProperties (PROPERTY_REMOVED_NOT_COVERED)"
            )
    if writer_open and reader_additional is not True and reader_additional != writer_additional:
        if check(reader_additional, writer_additional, f"{path}/additionalProperties"):
            problems.append(f"{path}: additionalProperties narrowed (ADDITIONAL_PROPERTIES_NARROWED)")
    added_required = set(reader.get("required", ())) - set(writer.get("required", ()))
    if added_required:
        problems.append(
            f"{path}: required properties added {sorted(added_required)} (REQUIRED_ATTRIBUTE_ADDED)"
        )
    return problems


def _types(schema: dict[str, Any]) -> set[str] | None:
    value = schema.get("type")
    if value is None:
        return None
    return {value} if isinstance(value, str) else set(value)
