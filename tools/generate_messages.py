#!/usr/bin/env python3
"""Generate ``src/aiokafka_lite/wire/messages/`` from Apache Kafka's JSON message schemas.

Usage: python tools/generate_messages.py [SCHEMA_DIR] [OUT_DIR]

Defaults: ``../shared/kafka-protocol/messages`` relative to the repository root and
``src/aiokafka_lite/wire/messages``. The output is committed, so a checkout never needs
the schemas; rerun this after updating them.

What is generated, per schema file, is one module holding one dataclass per struct
(the message itself plus its nested and common structs as class attributes). Each
struct gets straight-line ``_encode``/``_decode`` methods in which version gates are
plain integer comparisons, so a decode costs a handful of method calls per field and
nothing per version that does not apply. Only structure is taken from the schemas
(names, types, versions, defaults, nullability, tags); their prose is not copied.
"""

from __future__ import annotations

import json
import keyword
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

NO_VERSION = 32767
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCHEMAS = ROOT.parent / "shared" / "kafka-protocol" / "messages"
DEFAULT_OUT = ROOT / "src" / "aiokafka_lite" / "wire" / "messages"

# Request header v0 (no client id) is only used by ControlledShutdown v0, long gone from
# the schemas, but decoding it keeps the broker able to answer very old probes.
MIN_VERSION_OVERRIDES = {"RequestHeader": 0}

# Fields whose values are credentials: kept out of reprs and logs.
SECRET_FIELDS = {"AuthBytes", "SaltedPassword", "Salt", "Hmac", "TokenHmac"}

PRIMITIVES = {
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "float64",
    "bool",
    "uuid",
    "string",
    "bytes",
    "records",
}
INT_TYPES = {"int8", "int16", "int32", "int64", "uint16", "uint32"}


def strip_comments(text: str) -> str:
    out = []
    for line in text.splitlines():
        # The schemas only use whole-line and trailing // comments outside strings.
        stripped = line.lstrip()
        if stripped.startswith("//"):
            continue
        out.append(line)
    return "\n".join(out)


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), NO_VERSION
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    if keyword.iskeyword(s) or s in {"encode", "decode", "unknown_tags"}:
        s += "_"
    return s


def module_name(name: str) -> str:
    return snake(name).rstrip("_")


@dataclass
class Field:
    name: str  # schema name
    type: str
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tag: int | None
    tagged: tuple[int, int] | None
    ignorable: bool
    default: object
    flexible_override: tuple[int, int] | bool | None  # False = no override
    struct: str | None = None  # struct class name for struct and []struct types

    @property
    def attr(self) -> str:
        return snake(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class StructDef:
    name: str
    fields: list[Field] = field(default_factory=list)


class Generator:
    def __init__(self, schema: dict[str, object]) -> None:
        self.schema = schema
        self.name = str(schema["name"])
        self.kind = str(schema["type"])
        valid = parse_versions(str(schema["validVersions"]))
        assert valid is not None
        lo, hi = valid
        self.min_v = MIN_VERSION_OVERRIDES.get(self.name, lo)
        self.max_v = hi
        flex = parse_versions(str(schema.get("flexibleVersions", "none")))
        self.flex_v = flex[0] if flex else NO_VERSION
        self.structs: dict[str, StructDef] = {}
        self.order: list[str] = []
        for common in schema.get("commonStructs", []) or []:  # type: ignore[attr-defined]
            self.add_struct(str(common["name"]), common["fields"])
        self.top = self.add_struct(self.name, schema.get("fields", []))

    # -- schema walking ------------------------------------------------------------
    def add_struct(self, name: str, raw_fields: list[dict[str, object]]) -> StructDef:
        if name in self.structs and name != self.name:
            raise SystemExit(f"{self.name}: struct {name} defined twice")
        sd = StructDef(name)
        self.structs[name] = sd
        for raw in raw_fields:
            sd.fields.append(self.make_field(raw))
        self.order.append(name)
        return sd

    def make_field(self, raw: dict[str, object]) -> Field:
        ftype = str(raw["type"])
        versions = parse_versions(str(raw["versions"]))
        assert versions is not None, raw
        fo = raw.get("flexibleVersions")
        f = Field(
            name=str(raw["name"]),
            type=ftype,
            versions=versions,
            nullable=parse_versions(raw.get("nullableVersions")),  # type: ignore[arg-type]
            tag=int(raw["tag"]) if "tag" in raw else None,  # type: ignore[call-overload]
            tagged=parse_versions(raw.get("taggedVersions")),  # type: ignore[arg-type]
            ignorable=bool(raw.get("ignorable", False)),
            default=raw.get("default"),
            flexible_override=parse_versions(str(fo)) if fo is not None else False,
        )
        elem = f.elem
        if elem not in PRIMITIVES:
            f.struct = elem
            if "fields" in raw:
                self.add_struct(elem, raw["fields"])  # type: ignore[arg-type]
        return f

    # -- version conditions --------------------------------------------------------
    def clip(self, rng: tuple[int, int]) -> tuple[int, int]:
        return max(rng[0], self.min_v), min(rng[1], self.max_v)

    def cond(self, rng: tuple[int, int] | None) -> str:
        """A boolean expression in ``v`` for a version range; "True"/"False" when constant."""
        if rng is None:
            return "False"
        lo, hi = self.clip(rng)
        if lo > hi:
            return "False"
        parts = []
        if lo > self.min_v:
            parts.append(f"{lo} <= v")
        if hi < self.max_v:
            parts.append(f"v <= {hi}")
        if not parts:
            return "True"
        if len(parts) == 2:
            return f"{lo} <= v <= {hi}"
        return parts[0]

    def flex_cond(self, f: Field) -> str:
        if f.flexible_override is not False:
            return self.cond(f.flexible_override)  # type: ignore[arg-type]
        return self.cond((self.flex_v, NO_VERSION)) if self.flex_v != NO_VERSION else "False"

    def nullable_cond(self, f: Field) -> str:
        if f.nullable is None:
            return "False"
        # Nullability only matters where the field exists.
        lo = max(f.nullable[0], f.versions[0])
        hi = min(f.nullable[1], f.versions[1])
        if lo > hi:
            return "False"
        if self.clip((lo, hi)) == self.clip(f.versions):
            return "True"
        return self.cond((lo, hi))

    # -- python types and defaults -------------------------------------------------
    def qual(self, struct: str) -> str:
        return f"{self.name}.{struct}" if struct != self.name else self.name

    def elem_pytype(self, f: Field) -> str:
        e = f.elem
        if e in INT_TYPES:
            return "int"
        return {
            "float64": "float",
            "bool": "bool",
            "uuid": "uuid.UUID",
            "string": "str",
            "bytes": "bytes",
            "records": "Records",
        }.get(e) or self.qual(e)

    def pytype(self, f: Field) -> str:
        t = self.elem_pytype(f)
        if f.is_array:
            t = f"list[{t}]"
        if f.nullable is not None or (f.type == "records"):
            t += " | None"
        return t

    def default_expr(self, f: Field) -> tuple[str, bool]:
        """(python expression, needs default_factory)."""
        d = f.default
        e = f.elem
        if f.is_array:
            if d == "null":
                return "None", False
            return "list", True
        if d == "null":
            return "None", False
        if e in INT_TYPES:
            if d in (None, ""):
                return "0", False
            return str(int(str(d), 0)), False
        if e == "float64":
            return repr(float(d)) if d not in (None, "") else "0.0", False  # type: ignore[arg-type]
        if e == "bool":
            return ("True" if str(d).lower() == "true" else "False"), False
        if e == "string":
            return repr(str(d) if d is not None else ""), False
        if e == "uuid":
            return "ZERO_UUID", False
        if e in ("bytes",):
            return 'b""', False
        if e == "records":
            return "None", False
        if f.nullable is not None and d is None:
            # A nullable struct field without an explicit default starts out null.
            return "None", False
        return f"lambda: {self.qual(e)}()", True

    def is_default_expr(self, f: Field, expr: str) -> str:
        """Expression true when the field value equals its default."""
        d, factory = self.default_expr(f)
        if f.is_array and factory:
            return f"not {expr}"
        if factory:
            return f"{expr} == {self.qual(f.elem)}()"
        if d == "None":
            return f"{expr} is None"
        if d == 'b""':
            return f"not {expr}"
        return f"{expr} == {d}"

    # -- encode --------------------------------------------------------------------
    def enc_value(self, f: Field, expr: str, w: str, flex: str, nullable: str, ind: str) -> list[str]:
        """Lines encoding ``expr`` (the whole field value) into writer ``w``."""
        e = f.elem
        lines: list[str] = []

        if f.is_array:
            lines.append(f"{ind}{self._variant('array_len', w, flex, nullable)}({expr})")
            inner = ind
            if nullable != "False":
                lines.append(f"{ind}if {expr} is not None:")
                inner = ind + "    "
            if e == "int32":
                lines.append(f"{inner}{w}.int32_array({expr})")
            elif e == "int64":
                lines.append(f"{inner}{w}.int64_array({expr})")
            else:
                var = f"_{f.attr.rstrip('_')}"
                lines.append(f"{inner}for {var} in {expr}:")
                lines += self.enc_scalar(f, e, var, w, flex, "False", inner + "    ")
            return lines
        return self.enc_scalar(f, e, expr, w, flex, nullable, ind)

    def enc_scalar(
        self, f: Field, e: str, expr: str, w: str, flex: str, nullable: str, ind: str
    ) -> list[str]:
        if e in INT_TYPES or e in ("float64", "bool", "uuid"):
            return [f"{ind}{w}.{e}({expr})"]
        if e in ("string", "bytes"):
            return [f"{ind}{self._variant(e, w, flex, nullable)}({expr})"]
        if e == "records":
            return [f"{ind}{self._variant('bytes', w, flex, 'True')}({expr})"]
        # struct
        if nullable == "False":
            return [f"{ind}{expr}._encode({w}, v)"]
        # Nullable structs are prefixed by an int8 presence marker (-1 null, 1 present).
        marked = [
            f"{ind}if {expr} is None:",
            f"{ind}    {w}.int8(-1)",
            f"{ind}else:",
            f"{ind}    {w}.int8(1)",
            f"{ind}    {expr}._encode({w}, v)",
        ]
        if nullable == "True":
            return marked
        return [
            f"{ind}if {nullable}:",
            *["    " + line for line in marked],
            f"{ind}elif {expr} is None:",
            f"{ind}    raise self._gate_error('null', v)",
            f"{ind}else:",
            f"{ind}    {expr}._encode({w}, v)",
        ]

    def _variant(self, base: str, w: str, flex: str, nullable: str) -> str:
        fc = {"True": True, "False": False}.get(flex)
        nc = {"True": True, "False": False}.get(nullable)
        if fc is not None and nc is not None:
            return f"{w}.{'compact_' if fc else ''}{'nullable_' if nc else ''}{base}"
        if fc is not None:
            pre = "compact_" if fc else ""
            return f"({w}.{pre}nullable_{base} if {nullable} else {w}.{pre}{base})"
        if nc is not None:
            mid = "nullable_" if nc else ""
            return f"({w}.compact_{mid}{base} if {flex} else {w}.{mid}{base})"
        return (
            f"(({w}.compact_nullable_{base} if {nullable} else {w}.compact_{base}) if {flex} "
            f"else ({w}.nullable_{base} if {nullable} else {w}.{base}))"
        )

    # -- decode --------------------------------------------------------------------
    def dec_value(self, f: Field, r: str, flex: str, nullable: str, target: str, ind: str) -> list[str]:
        e = f.elem
        if f.is_array:
            lines = [f"{ind}_n = {self._rvariant('array_len', r, flex, nullable)}()"]
            inner = ind
            if nullable != "False":
                lines.append(f"{ind}if _n < 0:")
                lines.append(f"{ind}    {target} = None")
                lines.append(f"{ind}else:")
                inner = ind + "    "
            if e == "int32":
                lines.append(f"{inner}{target} = {r}.int32_array(_n)")
            elif e == "int64":
                lines.append(f"{inner}{target} = {r}.int64_array(_n)")
            else:
                lines.append(
                    f"{inner}{target} = [{self.dec_scalar_expr(e, r, flex, 'False')} for _ in range(_n)]"
                )
            return lines
        if e not in PRIMITIVES and nullable != "False":
            cond = "" if nullable == "True" else f"{nullable} and "
            return [
                f"{ind}if {cond}{r}.int8() < 0:",
                f"{ind}    {target} = None",
                f"{ind}else:",
                f"{ind}    {target} = {self.qual(e)}._decode({r}, v)",
            ]
        return [f"{ind}{target} = {self.dec_scalar_expr(e, r, flex, nullable)}"]

    def dec_scalar_expr(self, e: str, r: str, flex: str, nullable: str) -> str:
        if e in INT_TYPES or e in ("float64", "bool", "uuid"):
            return f"{r}.{e}()"
        if e in ("string", "bytes"):
            return f"{self._rvariant(e, r, flex, nullable)}()"
        if e == "records":
            return f"{self._rvariant('records', r, flex, 'True', records=True)}()"
        return f"{self.qual(e)}._decode({r}, v)"

    def _rvariant(self, base: str, r: str, flex: str, nullable: str, records: bool = False) -> str:
        if records:
            if flex in ("True", "False"):
                return f"{r}.{'compact_' if flex == 'True' else ''}records"
            return f"({r}.compact_records if {flex} else {r}.records)"
        return self._variant(base, r, flex, nullable)

    # -- struct emission -----------------------------------------------------------
    def emit_struct(self, sd: StructDef, ind: str, top: bool) -> list[str]:
        L: list[str] = []
        base = {"request": "Request", "response": "Response"}.get(self.kind, "Message") if top else "Struct"
        L.append(f"{ind}@dataclass(slots=True, kw_only=True)")
        L.append(f"{ind}class {sd.name}({base}):")
        i2 = ind + "    "
        if top:
            L.append(f'{i2}NAME: ClassVar[str] = "{self.name}"')
            if self.kind in ("request", "response"):
                L.append(f"{i2}API_KEY: ClassVar[int] = {self.schema['apiKey']}")
            L.append(f"{i2}MIN_VERSION: ClassVar[int] = {self.min_v}")
            L.append(f"{i2}MAX_VERSION: ClassVar[int] = {self.max_v}")
            L.append(f"{i2}FLEXIBLE_VERSION: ClassVar[int] = {self.flex_v}")
        specs = []
        for f in sd.fields:
            specs.append(
                f'FieldSpec("{f.attr}", "{f.type}", {f.versions}, {f.nullable}, {f.tag}, {f.tagged}, {f.ignorable})'
            )
        if specs:
            L.append(f"{i2}FIELDS: ClassVar[tuple[FieldSpec, ...]] = (")
            for s in specs:
                L.append(f"{i2}    {s},")
            L.append(f"{i2})")
        L.append("")
        for f in sd.fields:
            d, factory = self.default_expr(f)
            extra = ", repr=False" if f.name in SECRET_FIELDS else ""
            if factory:
                L.append(f"{i2}{f.attr}: {self.pytype(f)} = field(default_factory={d}{extra})")
            elif extra:
                L.append(f"{i2}{f.attr}: {self.pytype(f)} = field(default={d}{extra})")
            else:
                L.append(f"{i2}{f.attr}: {self.pytype(f)} = {d}")
        L.append(f"{i2}unknown_tags: dict[int, bytes] | None = field(default=None, repr=False)")
        L.append("")
        if top:
            # Nested and common structs live as attributes of the message class.
            for name in self.order:
                if name != self.name:
                    L += self.emit_struct(self.structs[name], i2, top=False)
        L += self.emit_encode(sd, i2)
        L.append("")
        L += self.emit_decode(sd, i2)
        L.append("")
        return L

    def struct_flex(self) -> str:
        return self.cond((self.flex_v, NO_VERSION)) if self.flex_v != NO_VERSION else "False"

    def emit_encode(self, sd: StructDef, ind: str) -> list[str]:
        L = [f"{ind}def _encode(self, w: Writer, v: int) -> None:"]
        b = ind + "    "
        sflex = self.struct_flex()
        uses_flex = sflex not in ("True", "False")
        if uses_flex:
            L.append(f"{b}flex = {sflex}")
        fl = "flex" if uses_flex else sflex
        tagged = [f for f in sd.fields if f.tag is not None]
        for f in sd.fields:
            if f.tag is not None:
                # A tagged field outside its tagged versions cannot be carried at all.
                if not f.ignorable:
                    present = self.cond(f.tagged)
                    if present != "True":
                        L.append(
                            f"{b}if not ({present}) and not ({self.is_default_expr(f, 'self.' + f.attr)}):"
                        )
                        L.append(f"{b}    raise self._gate_error({f.attr!r}, v)")
                continue
            c = self.cond(f.versions)
            ffl = self.flex_cond(f) if f.flexible_override is not False else fl
            nl = self.nullable_cond(f)
            body = self.enc_value(f, f"self.{f.attr}", "w", ffl, nl, b + ("    " if c != "True" else ""))
            if c == "False":
                continue
            if c == "True":
                L += body
            else:
                L.append(f"{b}if {c}:")
                L += body
                if not f.ignorable:
                    L.append(f"{b}elif not ({self.is_default_expr(f, 'self.' + f.attr)}):")
                    L.append(f"{b}    raise self._gate_error({f.attr!r}, v)")
        if fl != "False":
            tb = b + ("    " if fl != "True" else "")
            if fl != "True":
                L.append(f"{b}if {fl}:")
            if tagged:
                L.append(
                    f"{tb}_tags: dict[int, bytes] = dict(self.unknown_tags) if self.unknown_tags else {{}}"
                )
                for f in tagged:
                    c = self.cond(f.tagged)
                    isdef = self.is_default_expr(f, "self." + f.attr)
                    cc = f"not ({isdef})" if c == "True" else f"{c} and not ({isdef})"
                    L.append(f"{tb}if {cc}:")
                    L.append(f"{tb}    _t = Writer()")
                    L += self.enc_value(f, f"self.{f.attr}", "_t", "True", self.nullable_cond(f), tb + "    ")
                    L.append(f"{tb}    _tags[{f.tag}] = bytes(_t.buf)")
                L.append(f"{tb}w.tagged_fields(_tags)")
            else:
                L.append(f"{tb}w.tagged_fields(self.unknown_tags)")
        if len(L) == 1:
            L.append(f"{b}pass")
        return L

    def emit_decode(self, sd: StructDef, ind: str) -> list[str]:
        L = [f"{ind}@classmethod", f"{ind}def _decode(cls, r: Reader, v: int) -> Self:"]
        b = ind + "    "
        sflex = self.struct_flex()
        uses_flex = sflex not in ("True", "False")
        if uses_flex:
            L.append(f"{b}flex = {sflex}")
        fl = "flex" if uses_flex else sflex
        tagged = [f for f in sd.fields if f.tag is not None]
        for f in sd.fields:
            ann = f"{f.attr}: {self.pytype(f)}"
            d, factory = self.default_expr(f)
            default_value = d if not factory else ("[]" if f.is_array else f"{self.qual(f.elem)}()")
            if f.tag is not None:
                L.append(f"{b}{ann} = {default_value}")
                continue
            c = self.cond(f.versions)
            ffl = self.flex_cond(f) if f.flexible_override is not False else fl
            nl = self.nullable_cond(f)
            if c == "False":
                L.append(f"{b}{ann} = {default_value}")
            elif c == "True":
                first, *rest = self.dec_value(f, "r", ffl, nl, f.attr, b)
                if not rest and first.startswith(f"{b}{f.attr} = "):
                    L.append(f"{b}{ann} = {first[len(b) + len(f.attr) + 3 :]}")
                else:
                    L.append(f"{b}{ann}")
                    L.append(first)
                    L += rest
            else:
                L.append(f"{b}{ann}")
                L.append(f"{b}if {c}:")
                L += self.dec_value(f, "r", ffl, nl, f.attr, b + "    ")
                L.append(f"{b}else:")
                L.append(f"{b}    {f.attr} = {default_value}")
        L.append(f"{b}unknown_tags: dict[int, bytes] | None = None")
        if fl != "False":
            tb = b + ("    " if fl != "True" else "")
            if fl != "True":
                L.append(f"{b}if {fl}:")
            L.append(f"{tb}for _tag, _r in r.tagged_fields():")
            kw = "if"
            for f in tagged:
                c = self.cond(f.tagged)
                cc = f"_tag == {f.tag}" + ("" if c == "True" else f" and {c}")
                L.append(f"{tb}    {kw} {cc}:")
                L += self.dec_value(f, "_r", "True", self.nullable_cond(f), f.attr, tb + "        ")
                kw = "elif"
            if tagged:
                L.append(f"{tb}    else:")
                ub = tb + "        "
            else:
                ub = tb + "    "
            L.append(f"{ub}if unknown_tags is None:")
            L.append(f"{ub}    unknown_tags = {{}}")
            L.append(f"{ub}unknown_tags[_tag] = _r.rest()")
        args = ", ".join(f"{f.attr}={f.attr}" for f in sd.fields)
        sep = ", " if args else ""
        L.append(f"{b}return cls({args}{sep}unknown_tags=unknown_tags)")
        return L

    def module(self) -> str:
        L = [
            "# Generated by tools/generate_messages.py from Apache Kafka's message schemas. Do not edit.",
            "# ruff: noqa",
            "from __future__ import annotations",
            "",
            "import uuid",
            "from dataclasses import dataclass, field",
            "from typing import ClassVar, Self",
            "",
            "from aiokafka_lite.wire.message import FieldSpec, Message, Request, Response, Struct",
            "from aiokafka_lite.wire.primitives import ZERO_UUID, Reader, Writer",
            "",
            "Records = bytes | bytearray | memoryview",
            "",
            "__all__ = [" + repr(self.name) + "]",
            "",
            "",
        ]
        L += self.emit_struct(self.top, "", top=True)
        # Silence unused-import warnings where a module has no such fields.
        L.append("_ = (uuid, ZERO_UUID, Message, Request, Response, Struct)")
        return "\n".join(L) + "\n"


def main() -> None:
    schema_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SCHEMAS
    out_dir = Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_OUT
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.py"):
        old.unlink()
    entries: list[tuple[str, str, str, int | None]] = []  # (module, class, kind, api key)
    max_versions: dict[str, int] = {}
    for path in sorted(schema_dir.glob("*.json")):
        schema = json.loads(strip_comments(path.read_text()))
        gen = Generator(schema)
        mod = module_name(gen.name)
        (out_dir / f"{mod}.py").write_text(gen.module())
        key = schema.get("apiKey")
        entries.append((mod, gen.name, gen.kind, int(key) if key is not None else None))
        max_versions[gen.name] = gen.max_v

    # The package imports lazily: a module per schema is loaded on first use, so a
    # program pays only for the messages it touches (all 128 take ~0.3 s to import).
    # Type checkers see ordinary imports.
    init = [
        "# Generated by tools/generate_messages.py from Apache Kafka's message schemas. Do not edit.",
        '"""Every Kafka protocol message as a class: ``REQUESTS``/``RESPONSES`` map API keys to classes.',
        "",
        "Modules load on first use of a name (PEP 562), so importing this package is cheap.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from typing import TYPE_CHECKING",
        "",
        "from aiokafka_lite.wire.message import LazyRegistry, Request, Response",
        "",
        "if TYPE_CHECKING:",
    ]
    for mod, cls, _, _ in entries:
        init.append(f"    from .{mod} import {cls}")
    init.append("")
    init.append("_MODULES: dict[str, str] = {")
    for mod, cls, _, _ in entries:
        init.append(f'    "{cls}": "{mod}",')
    init.append("}")
    init.append("")
    init.append("")
    init.append("def __getattr__(name: str) -> type:")
    init.append("    mod = _MODULES.get(name)")
    init.append("    if mod is None:")
    init.append('        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")')
    init.append('    cls: type = getattr(importlib.import_module(f".{mod}", __name__), name)')
    init.append("    globals()[name] = cls")
    init.append("    return cls")
    init.append("")
    init.append("")
    # Kafka sometimes renames an API and keeps its key (ListClientMetricsResources became
    # ListConfigResources, key 74); the registry maps the key to the schema with the most
    # versions, and the older class stays importable by name.
    for kind, var, base in (("request", "REQUESTS", "Request"), ("response", "RESPONSES", "Response")):
        by_key: dict[int, tuple[int, str]] = {}
        for _, cls, k, key in entries:
            if k == kind and key is not None:
                span = max_versions[cls]
                if key not in by_key or span > by_key[key][0]:
                    by_key[key] = (span, cls)
        init.append(f"{var}: LazyRegistry[{base}] = LazyRegistry(")
        init.append("    __getattr__,")
        init.append("    {")
        for key in sorted(by_key):
            init.append(f'        {key}: "{by_key[key][1]}",')
        init.append("    },")
        init.append(")")
    init.append("")
    init.append("__all__ = [")
    init.append('    "REQUESTS",')
    init.append('    "RESPONSES",')
    for _, cls, _, _ in entries:
        init.append(f'    "{cls}",')
    init.append("]")
    (out_dir / "__init__.py").write_text("\n".join(init) + "\n")
    # Keep the output tidy and stable; formatting is cosmetic, so a missing ruff is fine.
    subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(out_dir)], check=False)
    print(f"generated {len(entries)} schemas into {out_dir}")


if __name__ == "__main__":
    main()
