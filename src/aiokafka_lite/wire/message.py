"""Base classes of the generated protocol messages (see ``wire/messages``)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Generic, NamedTuple, Self, TypeVar

from aiokafka_lite.core.errors import CorruptFrameError, VersionError
from aiokafka_lite.wire.primitives import Reader, Writer

NO_VERSION = 32767  # open upper bound of a version range ("3+")


class FieldSpec(NamedTuple):
    """Schema facts of one field, kept at runtime for introspection and test strategies."""

    name: str  # snake_case attribute name
    type: str  # schema type: "int32", "string", "[]int32", "[]TopicData", "TopicData", ...
    versions: tuple[int, int]
    nullable_versions: tuple[int, int] | None
    tag: int | None
    tagged_versions: tuple[int, int] | None
    ignorable: bool


class Struct:
    """A (possibly nested) schema struct. Subclasses are generated dataclasses."""

    __slots__ = ()

    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()

    def _encode(self, w: Writer, v: int) -> None:
        raise NotImplementedError

    @classmethod
    def _decode(cls, r: Reader, v: int) -> Self:
        raise NotImplementedError

    @classmethod
    def _gate_error(cls, field: str, v: int) -> VersionError:
        return VersionError(
            f"{cls.__qualname__}.{field} has a non-default value that version {v} cannot carry"
        )


class Message(Struct):
    """A top-level schema: request, response, header or data."""

    __slots__ = ()

    NAME: ClassVar[str]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FLEXIBLE_VERSION: ClassVar[int]  # first flexible version, NO_VERSION if none

    @classmethod
    def check_version(cls, version: int) -> None:
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise VersionError(
                f"{cls.NAME} has no version {version} (valid {cls.MIN_VERSION}-{cls.MAX_VERSION})"
            )

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return version >= cls.FLEXIBLE_VERSION

    def encode(self, version: int) -> bytes:
        w = Writer()
        self.encode_into(w, version)
        return bytes(w.buf)

    def encode_into(self, w: Writer, version: int) -> None:
        """Appends the encoded body to ``w`` (lets framing avoid an extra copy)."""
        self.check_version(version)
        try:
            self._encode(w, version)
        except struct.error as e:
            raise VersionError(f"{self.NAME} v{version}: value out of range: {e}") from e

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int, *, strict: bool = True) -> Self:
        """Decodes a body. ``strict`` rejects trailing bytes (a sign of a version mismatch)."""
        return cls.decode_from(Reader(data), version, strict=strict)

    @classmethod
    def decode_from(cls, r: Reader, version: int, *, strict: bool = True) -> Self:
        cls.check_version(version)
        start = r.pos
        try:
            msg = cls._decode(r, version)
        except CorruptFrameError as e:
            raise CorruptFrameError(f"{cls.NAME} v{version}: {e}") from None
        except (struct.error, ValueError, IndexError) as e:
            raise CorruptFrameError(f"{cls.NAME} v{version}: {e} (near offset {r.pos - start})") from None
        if strict and r.pos != r.end:
            raise CorruptFrameError(f"{cls.NAME} v{version}: {r.end - r.pos} unexpected trailing bytes")
        return msg

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view (for logs, CLIs and tests)."""
        plain = _to_plain(self)
        assert isinstance(plain, dict)
        return plain


class ApiMessage(Message):
    __slots__ = ()
    API_KEY: ClassVar[int]


class Request(ApiMessage):
    __slots__ = ()


class Response(ApiMessage):
    __slots__ = ()


M = TypeVar("M", bound=ApiMessage)


class LazyRegistry(Mapping[int, type[M]], Generic[M]):
    """API key -> message class, importing each class's module on first lookup.

    Lookups after the first are a plain dict hit (the hot path of frame dispatch).
    """

    __slots__ = ("_load", "_loaded", "_names")

    def __init__(self, load: Callable[[str], type], names: dict[int, str]) -> None:
        self._load = load
        self._names = names
        self._loaded: dict[int, type[M]] = {}

    def __getitem__(self, key: int) -> type[M]:
        cls = self._loaded.get(key)
        if cls is None:
            cls = self._load(self._names[key])
            self._loaded[key] = cls
        return cls

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[int]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _to_plain(value: object) -> object:
    if isinstance(value, Struct):
        return {f.name: _to_plain(getattr(value, f.name)) for f in value.FIELDS}
    if isinstance(value, list):
        return [_to_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value
