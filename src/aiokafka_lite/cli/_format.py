"""Output formats: ``consume``'s kcat-like format strings and JSON lines, and the tables
the ``groups`` and ``share-groups`` commands print (``table``, ``print_sections``).

A format string is compiled once into a list of parts (literal bytes or field getters),
so formatting a record is a join over a short list.

==========  ================================================
``%s``      value             ``%S``  value size in bytes (-1: null)
``%k``      key               ``%K``  key size in bytes (-1: null)
``%t``      topic             ``%p``  partition
``%o``      offset            ``%T``  timestamp (ms)
``%h``      headers as ``k=v,k2=v2``
``%%``      a percent sign
==========  ================================================

Escapes ``\\n``, ``\\r``, ``\\t`` and ``\\\\`` are understood, so a shell argument such as
``'%k\\t%s\\n'`` works without ``$'...'`` quoting. Null keys and values print as nothing.

Tables have no box and a bold header; a cell that is None, empty text or an empty list
prints as ``-`` (a column is never blank), a list as ``a, b``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from aiokafka_lite.consume import Record

__all__ = [
    "DEFAULT_FORMAT",
    "FormatError",
    "cell",
    "compile_format",
    "print_sections",
    "record_to_json",
    "table",
]

DEFAULT_FORMAT = "%s\\n"

Part = bytes | Callable[[Record], bytes]


class FormatError(ValueError):
    """A format string with an unknown ``%`` directive or a dangling ``%``/``\\``."""


def _bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode()


def _size(value: Any) -> bytes:
    return b"-1" if value is None else str(len(value)).encode()


def _headers(record: Record) -> bytes:
    return b",".join(k.encode() + b"=" + _bytes(v) for k, v in record.headers)


_FIELDS: dict[str, Callable[[Record], bytes]] = {
    "s": lambda r: _bytes(r.value),
    "k": lambda r: _bytes(r.key),
    "S": lambda r: _size(r.value),
    "K": lambda r: _size(r.key),
    "t": lambda r: r.topic.encode(),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "T": lambda r: str(r.timestamp_ms).encode(),
    "h": _headers,
}
_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}


def compile_format(fmt: str) -> Callable[[Record], bytes]:
    """Compile a kcat-like format string into a function ``record -> bytes``."""
    parts: list[Part] = []
    literal = bytearray()
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch in "%\\":
            if i + 1 >= len(fmt):
                raise FormatError(f"format ends with a lone {ch!r}")
            nxt = fmt[i + 1]
            if ch == "%" and nxt == "%":
                literal += b"%"
            elif ch == "%":
                getter = _FIELDS.get(nxt)
                if getter is None:
                    known = " ".join("%" + k for k in _FIELDS)
                    raise FormatError(f"unknown directive %{nxt} (known: {known} %%)")
                if literal:
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(getter)
            else:
                esc = _ESCAPES.get(nxt)
                if esc is None:
                    raise FormatError(f"unknown escape \\{nxt} (known: \\n \\r \\t \\\\)")
                literal += esc
            i += 2
        else:
            literal += ch.encode()
            i += 1
    if literal:
        parts.append(bytes(literal))
    frozen = tuple(parts)

    def render(record: Record) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(record) for p in frozen)

    return render


_TIMESTAMP_TYPES = {-1: "NoTimestamp", 0: "CreateTime", 1: "LogAppendTime"}


def _json_bytes(value: bytes | None) -> str | dict[str, str] | None:
    """UTF-8 text as a string; anything else as ``{"base64": ...}`` (JSON has no bytes)."""
    if value is None:
        return None
    try:
        return bytes(value).decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode()}


def record_to_json(record: Record) -> str:
    """One JSON object per record (no newline)."""
    return json.dumps(
        {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp_ms,
            "timestamp_type": _TIMESTAMP_TYPES.get(int(record.timestamp_type), "Unknown"),
            "key": _json_bytes(record.key),
            "value": _json_bytes(record.value),
            "headers": [[k, _json_bytes(v)] for k, v in record.headers],
        },
        ensure_ascii=False,
    )


def cell(value: object) -> str:
    """A table cell: ``-`` for None, empty text or an empty list; a list joined with ", "."""
    if isinstance(value, list | tuple):
        value = ", ".join(str(v) for v in value)
    if value is None or value == "":
        return "-"
    return str(value)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A table of ``rows`` (one value a column, rendered by ``cell``)."""
    out = Table(*columns, box=None, header_style="bold")
    for row in rows:
        out.add_row(*(cell(v) for v in row))
    return out


def print_sections(console: Console, sections: Iterable[tuple[str, Sequence[Table]]]) -> None:
    """One section a described item: its summary line (rich markup) and its tables (the
    empty ones left out), a blank line between sections."""
    for i, (summary, tables) in enumerate(sections):
        if i:
            console.print()
        console.print(summary, markup=True)
        for t in tables:
            if t.row_count:
                console.print(t)
