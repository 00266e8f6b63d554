"""Declarative option definitions shared by every configurable object.

Each option is declared once, as a dataclass field built with ``option()``: its type
(the annotation), default, documentation and validation live together, so the
configuration reference can be generated from the classes and every constructor
validates the same way::

    @dataclass(frozen=True, kw_only=True)
    class ProducerConfig(Options):
        acks: int = option(-1, "Acknowledgements: 0, 1 or -1 (all).", one_of(0, 1, -1))
        linger_ms: float = option(5.0, "How long to fill a batch.", at_least(0))

    cfg = ProducerConfig.from_options(acks=1)  # unknown names -> ConfigError
    ProducerConfig(acks=2)  # ConfigError: acks: must be one of 0, 1, -1
    ProducerConfig.describe()  # [OptionDoc(name, type, default, doc), ...]

Annotate container options as ``Mapping``/``Sequence`` (read-only): ruff's RUF009 then
accepts ``option(default_factory=...)`` and frozen configs stay effectively immutable.

Validation runs in ``__post_init__`` and raises ``ConfigError`` naming the option.
Options declared with ``secret=True`` are redacted in ``repr`` and ``describe``.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar, Literal, Self, Union

from aiokafka_lite.core.errors import ConfigError

__all__ = [
    "OptionDoc",
    "Options",
    "Validator",
    "at_least",
    "at_most",
    "between",
    "non_empty",
    "one_of",
    "option",
]

#: A validator returns None when the value is fine, else a short reason ("must be >= 0").
Validator = Callable[[Any], str | None]

_REDACTED = "<redacted>"


def option(
    default: Any = MISSING,
    doc: str = "",
    validator: Validator | None = None,
    *,
    default_factory: Callable[[], Any] | None = None,
    secret: bool = False,
    type_check: bool = True,
) -> Any:
    """Declare one option: a dataclass field carrying its documentation and validator.

    ``secret=True`` hides the value in ``repr`` and generated docs. ``type_check=False``
    skips the runtime check of the annotation (for types the checker cannot express).
    Mutable defaults need ``default_factory``.
    """
    metadata = {"doc": doc, "validator": validator, "secret": secret, "type_check": type_check}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata, repr=not secret)
    if default is MISSING:
        return field(metadata=metadata, repr=not secret)
    return field(default=default, metadata=metadata, repr=not secret)


# --------------------------------------------------------------------------------------
# Validators


def at_least(lo: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value is None or value >= lo else f"must be >= {lo}"

    return check


def at_most(hi: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value is None or value <= hi else f"must be <= {hi}"

    return check


def between(lo: float, hi: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value is None or lo <= value <= hi else f"must be between {lo} and {hi}"

    return check


def one_of(*choices: Any) -> Validator:
    def check(value: Any) -> str | None:
        if value in choices:
            return None
        return "must be one of " + ", ".join(repr(c) for c in choices)

    return check


def non_empty(value: Any) -> str | None:
    return None if value else "must not be empty"


# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OptionDoc:
    """One row of a generated configuration reference."""

    name: str
    type: str
    default: str
    doc: str


def _type_ok(value: Any, tp: Any) -> bool:
    """Best-effort isinstance for annotations; unknown constructs are accepted."""
    if tp is Any:
        return True
    if tp is None or tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return any(_type_ok(value, arg) for arg in typing.get_args(tp))
    if origin is Literal:
        return value in typing.get_args(tp)
    if origin is not None:
        if isinstance(origin, type):
            try:
                return isinstance(value, origin)
            except TypeError:
                return True
        return True
    if tp is Callable or tp is typing.Callable:
        return callable(value)
    if isinstance(tp, type):
        try:
            return isinstance(value, tp)
        except TypeError:
            return True
    return True


def _type_name(tp: Any) -> str:
    if isinstance(tp, type) and typing.get_origin(tp) is None:
        return tp.__name__
    return str(tp).replace("typing.", "").replace("collections.abc.", "")


@dataclass(frozen=True, kw_only=True)
class Options:
    """Base of option dataclasses: validation, docs, ``from_options``.

    Subclasses must be ``@dataclass(frozen=True, kw_only=True)``. Secret options are
    declared with ``repr=False`` by ``option(secret=True)``, so the generated repr omits them.
    """

    _hints_cache: ClassVar[dict[type, dict[str, Any]]] = {}

    def __post_init__(self) -> None:
        hints = self._hints()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            meta = f.metadata
            if meta.get("type_check", True) and f.name in hints and not _type_ok(value, hints[f.name]):
                shown = _REDACTED if meta.get("secret") else repr(value)
                raise ConfigError(f"{f.name}: expected {_type_name(hints[f.name])}, got {shown}")
            validator: Validator | None = meta.get("validator")
            if validator is not None:
                reason = validator(value)
                if reason:
                    shown = _REDACTED if meta.get("secret") else repr(value)
                    raise ConfigError(f"{f.name}: {reason} (got {shown})")
        self.validate()

    def validate(self) -> None:
        """Cross-option checks; subclasses override and raise ``ConfigError``."""

    @classmethod
    def _hints(cls) -> dict[str, Any]:
        hints = Options._hints_cache.get(cls)
        if hints is None:
            try:
                hints = typing.get_type_hints(cls)
            except (NameError, TypeError):  # forward refs we cannot resolve: skip type checks
                hints = {}
            Options._hints_cache[cls] = hints
        return hints

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.init]

    @classmethod
    def from_options(cls, base: Self | None = None, /, **options: Any) -> Self:
        """Build from keyword options (on top of ``base`` if given); unknown names raise."""
        known = set(cls.option_names())
        unknown = [name for name in options if name not in known]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, known, n=1)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ConfigError(f"unknown {cls.__name__} option(s): " + ", ".join(hints))
        if base is not None:
            return dataclasses.replace(base, **options)
        return cls(**options)

    def replace(self, **changes: Any) -> Self:
        return type(self).from_options(self, **changes)

    def as_dict(self, *, redact: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = _REDACTED if (redact and f.metadata.get("secret") and value is not None) else value
        return out

    @classmethod
    def describe(cls) -> list[OptionDoc]:
        """Reference rows for documentation generation."""
        hints = cls._hints()
        rows = []
        for f in dataclasses.fields(cls):
            if f.default is not MISSING:
                default = repr(f.default)
            elif f.default_factory is not MISSING:
                default = repr(f.default_factory())
            else:
                default = "(required)"
            if f.metadata.get("secret"):
                default = "None" if f.default is None else _REDACTED
            tp = hints.get(f.name, f.type)
            rows.append(OptionDoc(f.name, _type_name(tp), default, str(f.metadata.get("doc", ""))))
        return rows


def options_from_mapping(cls: type[Options], mapping: Mapping[str, Any]) -> Options:
    """``cls.from_options(**mapping)`` for callers holding a dict (e.g. parsed properties)."""
    return cls.from_options(**dict(mapping))
