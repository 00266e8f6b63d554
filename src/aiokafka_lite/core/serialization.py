"""Serializers that see their record: the topic, key or value, and the headers.

A client's ``key_serializer``/``value_serializer`` (and ``key_deserializer``/``value_deserializer``)
is one of two kinds, told apart once, when the client is built (never per record):

* a **plain callable** ``f(data) -> bytes`` (``f(data) -> object`` for a deserializer): called
  with the key or value alone, exactly as before, on the same fast path;
* a **context serializer**: an object with a ``serialize(data, ctx)`` method
  (:class:`Serializer`; a deserializer has ``deserialize(data, ctx)``, :class:`Deserializer`).
  ``ctx`` is a :class:`SerializationContext`: the topic, whether the key or the value is
  (de)serialized, and the record's headers. On produce the headers are a list the serializer may
  append to (a schema id in a header); the key's serializer runs first and the value's sees what it
  added. On consume they are the record's headers (a tuple, read-only).
  confluent-kafka's serializers and deserializers (``confluent_kafka.serialization.Serializer``
  subclasses, called ``s(data, ctx)`` with their own ``SerializationContext``) are recognised and
  adapted; see :func:`context_serializer`.

A serializer may need I/O for a record (a schema registry lookup for a subject not yet cached). The
synchronous ``serialize`` never does it: it raises :class:`~aiokafka_lite.core.errors.SerializerNotReadyError`
instead, and the client, on its async path (``send``, ``enqueue``, ``send_batch``, a consumer's
``async for``/``getone``/``getmany``), awaits the serializer's ``serialize_async(data, ctx)``
(``deserialize_async``), which resolves what is missing without blocking the event loop and
caches it; the next records take the synchronous path again. A serializer without the async method
gets the error raised to the caller. A consumer resolving a record's schema has handed out
nothing for it yet: a cancelled or failed resolution leaves the position at that record.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio

from aiokafka_lite.core.errors import SerializerNotReadyError

__all__ = [
    "ContextDeserializeFn",
    "ContextSerializeFn",
    "Deserializer",
    "MessageField",
    "SerializationContext",
    "Serializer",
    "context_deserializer",
    "context_serializer",
]

Header = tuple[str, Any]


class MessageField(enum.StrEnum):
    """Which part of the record a (de)serializer works on (equal to confluent-kafka's strings)."""

    KEY = "key"
    VALUE = "value"


class SerializationContext:
    """The record a serializer works for: ``topic``, ``field`` (key or value) and ``headers``.

    Producing, ``headers`` is a list the serializer may append to; consuming, the record's
    headers (a tuple). Same constructor as confluent-kafka's ``SerializationContext``.
    """

    __slots__ = ("field", "headers", "topic")

    def __init__(
        self, topic: str, field: MessageField = MessageField.VALUE, headers: Sequence[Header] | None = None
    ) -> None:
        self.topic = topic
        self.field = field
        self.headers = headers

    def __repr__(self) -> str:
        return f"SerializationContext({self.topic!r}, {self.field!s}, {self.headers!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SerializationContext):
            return NotImplemented
        return (self.topic, self.field, self.headers) == (other.topic, other.field, other.headers)

    __hash__ = None  # type: ignore[assignment]  # mutable headers


@runtime_checkable
class Serializer(Protocol):
    """A serializer that sees its context. ``serialize_async`` (optional) does what ``serialize``
    refused with ``SerializerNotReadyError`` (I/O), then serializes."""

    def serialize(self, data: Any, ctx: SerializationContext) -> Any: ...


@runtime_checkable
class Deserializer(Protocol):
    """A deserializer that sees its context (``deserialize_async`` optional, as for Serializer)."""

    def deserialize(self, data: Any, ctx: SerializationContext) -> Any: ...


ContextSerializeFn = Callable[[Any, SerializationContext], Any]
ContextDeserializeFn = Callable[[Any, SerializationContext], Any]


class ContextCall:
    """A (de)serializer bound for the clients: ``sync(data, ctx)`` and ``resolve(data, ctx)``.

    ``resolve`` is the awaitable path taken when ``sync`` raised ``SerializerNotReadyError``
    (None: the serializer has none; the error reaches the caller).
    """

    __slots__ = ("resolve", "sync", "wrapped")

    def __init__(self, wrapped: Any, sync: Callable[[Any, SerializationContext], Any], resolve: Any) -> None:
        self.wrapped = wrapped
        self.sync = sync
        self.resolve = resolve


def _confluent_base(obj: Any) -> str | None:
    """``"Serializer"``/``"Deserializer"`` when ``obj`` is one of confluent-kafka's (no import needed:
    such an object exists only once ``confluent_kafka.serialization`` is loaded)."""
    for cls in type(obj).__mro__:
        if cls.__module__ == "confluent_kafka.serialization" and cls.__name__ in (
            "Serializer",
            "Deserializer",
        ):
            return cls.__name__
    return None


class _ConfluentAdapter:
    """confluent-kafka's ``s(data, ctx)`` with their ``SerializationContext`` (same fields as ours).

    Their serializers use a blocking registry client: the first record of each topic and field
    (of each schema id, deserializing Confluent-framed data) is (de)serialized in a worker thread;
    once the schema is in their client's cache the call is synchronous."""

    __slots__ = ("_ctx_type", "_fn", "_seen")

    def __init__(self, fn: Any) -> None:
        self._fn = fn
        self._ctx_type = sys.modules["confluent_kafka.serialization"].SerializationContext
        self._seen: set[Any] = set()

    def _seen_key(self, data: Any, ctx: SerializationContext) -> Any:
        if type(data) is bytes and len(data) >= 5 and data[0] == 0:
            return (ctx.topic, ctx.field, data[1:5])
        return (ctx.topic, ctx.field)

    def _theirs(self, ctx: SerializationContext) -> Any:
        headers = ctx.headers
        if type(headers) is tuple:  # a consumed record's: theirs look for header ids in a list only
            headers = list(headers)
        return self._ctx_type(ctx.topic, str(ctx.field), headers)

    def sync(self, data: Any, ctx: SerializationContext) -> Any:
        if self._seen_key(data, ctx) not in self._seen:
            raise SerializerNotReadyError(
                f"{type(self._fn).__name__} has not seen topic {ctx.topic!r} ({ctx.field}) yet: its first "
                "call may block on its registry client, so it runs on the async path (send, enqueue, "
                "a consumer's async for/getone/getmany)"
            )
        return self._fn(data, self._theirs(ctx))

    async def resolve(self, data: Any, ctx: SerializationContext) -> Any:
        theirs = self._theirs(ctx)
        result = await anyio.to_thread.run_sync(self._fn, data, theirs)
        self._seen.add(self._seen_key(data, ctx))
        ctx.headers = theirs.headers
        return result


def _bind(obj: Any, method: str, async_method: str, kind: str) -> ContextCall | None:
    if obj is None or isinstance(obj, type):
        return None
    if _confluent_base(obj) == kind:
        adapter = _ConfluentAdapter(obj)
        return ContextCall(obj, adapter.sync, adapter.resolve)
    sync = getattr(obj, method, None)
    if sync is None or not callable(sync) or not hasattr(type(obj), method):
        return None  # a plain callable (function, lambda, bound method, builtin)
    return ContextCall(obj, sync, getattr(obj, async_method, None))


def context_serializer(obj: Any) -> ContextCall | None:
    """The context-serializer binding of ``obj``, or None for a plain callable (decided once)."""
    return _bind(obj, "serialize", "serialize_async", "Serializer")


def context_deserializer(obj: Any) -> ContextCall | None:
    """The context-deserializer binding of ``obj``, or None for a plain callable (decided once)."""
    return _bind(obj, "deserialize", "deserialize_async", "Deserializer")


def plain_call(fn: Any) -> ContextCall | None:
    """A plain (de)serializer used beside a context one (key plain, value with context), called
    with the data alone."""
    if fn is None:
        return None
    return ContextCall(fn, lambda data, ctx: fn(data), None)
