"""OpenTelemetry spans for Kafka produce and consume, after the messaging semantic conventions.

Span shapes (OpenTelemetry semantic conventions for messaging, Kafka, v1.27 and later):

* ``send {topic}`` (PRODUCER): one per ``send``/``enqueue`` (and per record of
  ``send_batch``/``enqueue_batch``), from the call until the broker acknowledged the
  record or it failed. Its context is injected into the record's headers through the
  configured text-map propagator (W3C ``traceparent``/``tracestate`` by default). A
  header of the same name the caller passed is replaced, not duplicated, as the Java
  instrumentation does: the span is a child of the caller's context, so the trace
  still continues.
* ``poll [topic]`` (CLIENT, operation type ``receive``): one per non-empty ``getmany``
  (and ``ShareConsumer.poll``), linked to the producer context of every record.
* ``process {topic}`` (CONSUMER): one per record handed out by ``async for`` /
  ``getone``, and one per record (or batch) run by ``OrderedWorkers``, ``ShareWorkers``
  and ``TransactSession``. Its parent is the producer context extracted from the record
  (so the trace continues), and it links to it; the handler runs inside it. For
  ``async for`` the span lasts from the hand-out until the next record is asked for
  (the loop body) and is the current span meanwhile, as in the Java agent.

This module is imported only when tracing is enabled; it needs ``opentelemetry-api``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import Token
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter, TextMapPropagator
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from aiokafka_lite import __version__
from aiokafka_lite.core import tracing_hook

if TYPE_CHECKING:
    from aiokafka_lite.produce.batch import RecordFuture, RecordMetadata
    from aiokafka_lite.produce.producer import Producer

__all__ = ["KafkaTracing", "extract_context"]

#: The instrumentation scope's name (what tracer providers and exporters show).
SCOPE = "aiokafka_lite"
#: The semantic-conventions version the spans follow.
SCHEMA_URL = "https://opentelemetry.io/schemas/1.27.0"

# Attribute names of the messaging semantic conventions (kept here, not imported from the
# opentelemetry-semantic-conventions package, which is not a dependency of the API).
SYSTEM = "messaging.system"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
CONSUMER_GROUP = "messaging.consumer.group.name"
BATCH_COUNT = "messaging.batch.message_count"
CLIENT_ID = "messaging.client.id"
BODY_SIZE = "messaging.message.body.size"
KEY = "messaging.kafka.message.key"
OFFSET = "messaging.kafka.offset"
TOMBSTONE = "messaging.kafka.message.tombstone"
DELIVERY_COUNT = "messaging.kafka.message.delivery_count"
ERROR_TYPE = "error.type"

#: Links added to one batch span at most (the SDK's default span-link limit).
MAX_LINKS = 128

R = TypeVar("R")

Headers = Sequence[tuple[str, "bytes | bytearray | memoryview | None"]]


class _HeaderGetter(Getter[Headers]):
    """Reads trace context from Kafka record headers; the last header of a name wins
    (Java's ``Headers.lastHeader``). Values are UTF-8 text."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        found: bytes | bytearray | memoryview | None = None
        seen = False
        for name, value in carrier:
            if name == key:
                found, seen = value, True
        if not seen or found is None:
            return None
        try:
            return [bytes(found).decode("utf-8")]
        except UnicodeDecodeError:
            return None

    def keys(self, carrier: Headers) -> list[str]:
        return [name for name, _ in carrier]


_GETTER = _HeaderGetter()


def _key_attribute(key: Any) -> str | None:
    """The key as text when it has a canonical text form (str, or UTF-8 bytes)."""
    if isinstance(key, str):
        return key
    if isinstance(key, bytes | bytearray | memoryview):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _error_type(exc: BaseException) -> str:
    return type(exc).__qualname__


def _record_error(span: Span, exc: BaseException) -> None:
    if span.is_recording():
        span.record_exception(exc)
        span.set_attribute(ERROR_TYPE, _error_type(exc))
        span.set_status(Status(StatusCode.ERROR, str(exc) or _error_type(exc)))


def _client_id(client: Any) -> str | None:
    config = getattr(getattr(client, "_client", None), "config", None)
    value = getattr(config, "client_id", None)
    return value if isinstance(value, str) else None


def _group_id(consumer: Any) -> str | None:
    group = getattr(consumer, "group_id", None)  # ShareConsumer
    if group is None:
        group = getattr(getattr(consumer, "config", None), "group_id", None)
    return group if isinstance(group, str) and group else None


def extract_context(
    headers: Headers, propagator: TextMapPropagator | None = None
) -> otel_context.Context | None:
    """The trace context carried by a record's headers, or None when they carry none."""
    if not headers:
        return None
    prop = propagator if propagator is not None else propagate.get_global_textmap()
    ctx = prop.extract(headers, getter=_GETTER)
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


class _ProcessScope:
    """A record's ``process`` span made current while ``async for`` hands the record to
    the loop body; ended when the next record is asked for or the consumer closes."""

    __slots__ = ("span", "task", "token")

    def __init__(
        self, span: Span, token: Token[otel_context.Context], task: asyncio.Task[Any] | None
    ) -> None:
        self.span = span
        self.token = token
        self.task = task

    def end(self) -> None:
        self.span.end()
        # The token belongs to the task (its context) that iterated; from elsewhere
        # (close() from another task) there is nothing of ours to restore.
        if self.task is asyncio.current_task():
            otel_context.detach(self.token)


#: The open ``process`` scope of each consumer being iterated with ``async for``.
_iterating: weakref.WeakKeyDictionary[Any, _ProcessScope] = weakref.WeakKeyDictionary()


def end_iteration(consumer: Any) -> None:
    """End the ``process`` span of the record ``consumer`` handed out last, if open."""
    scope = _iterating.pop(consumer, None)
    if scope is not None:
        scope.end()


class KafkaTracing:
    """Creates the spans of one tracer provider and carries trace context in headers.

    ``tracer_provider`` None means OpenTelemetry's global provider (a proxy until one is
    set); ``propagator`` None means the global text-map propagator at each use.
    """

    def __init__(self, tracer_provider: Any = None, propagator: TextMapPropagator | None = None) -> None:
        self.tracer_provider = tracer_provider
        self.propagator = propagator
        self.tracer = trace.get_tracer(
            SCOPE, __version__, tracer_provider=tracer_provider, schema_url=SCHEMA_URL
        )
        #: Base send-span attributes by (client id, topic).
        self._send_base: dict[tuple[str | None, str], dict[str, Any]] = {}

    def _propagator(self) -> TextMapPropagator:
        return self.propagator if self.propagator is not None else propagate.get_global_textmap()

    def extract(self, headers: Headers) -> otel_context.Context | None:
        return extract_context(headers, self._propagator())

    # -- producing --------------------------------------------------------------------

    def _send_attributes(self, producer: Any, topic: str) -> dict[str, Any]:
        """The attributes every send span of ``topic`` from this producer's client id has."""
        client_id = _client_id(producer)
        base = self._send_base.get((client_id, topic))
        if base is None:
            base = {SYSTEM: "kafka", OPERATION_NAME: "send", OPERATION_TYPE: "send", DESTINATION: topic}
            if client_id is not None:
                base[CLIENT_ID] = client_id
            if len(self._send_base) < 10_000:  # bounded: topic names may be unbounded
                self._send_base[(client_id, topic)] = base
        return base

    def _start_send(
        self, producer: Any, topic: str, key: Any, value: Any, partition: int | None, headers: Headers | None
    ) -> tuple[Span, Headers | None]:
        """The ``send`` span (child of the current context) and the headers with its context."""
        attributes = dict(self._send_attributes(producer, topic))
        if partition is not None:
            attributes[PARTITION] = str(partition)
        if key is not None:
            text_key = _key_attribute(key)
            if text_key is not None:
                attributes[KEY] = text_key
        if value is None:
            attributes[TOMBSTONE] = True
        span = self.tracer.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attributes)
        if not span.get_span_context().is_valid:
            return span, headers  # no trace to propagate (no SDK and no current span)
        carrier: dict[str, str] = {}
        self._propagator().inject(carrier, context=trace.set_span_in_context(span))
        if not carrier:
            return span, headers
        out: list[tuple[str, Any]] = [h for h in headers if h[0] not in carrier] if headers else []
        out.extend((name, text.encode("utf-8")) for name, text in carrier.items())
        return span, out

    @staticmethod
    def _acked(span: Span, md: RecordMetadata) -> None:
        if span.is_recording():
            if md.offset >= 0:
                span.set_attributes({PARTITION: str(md.partition), OFFSET: md.offset})
            else:
                span.set_attribute(PARTITION, str(md.partition))
        span.end()

    async def send(
        self,
        enqueue: Callable[..., Awaitable[RecordFuture]],
        producer: Producer,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
    ) -> RecordMetadata:
        """``Producer.send`` traced: ``enqueue`` is the producer's untraced enqueue."""
        span, traced_headers = self._start_send(producer, topic, key, value, partition, headers)
        try:
            fut = await enqueue(topic, value, key, partition, timestamp_ms, traced_headers)
            md = await fut
        except BaseException as exc:
            _record_error(span, exc)
            span.end()
            raise
        self._acked(span, md)
        return md

    async def enqueue(
        self,
        enqueue: Callable[..., Awaitable[RecordFuture]],
        producer: Producer,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
    ) -> RecordFuture:
        """``Producer.enqueue`` traced: the span ends when the record is acknowledged."""
        span, traced_headers = self._start_send(producer, topic, key, value, partition, headers)
        try:
            fut = await enqueue(topic, value, key, partition, timestamp_ms, traced_headers)
        except BaseException as exc:
            _record_error(span, exc)
            span.end()
            raise
        if not span.is_recording():
            return fut  # nothing to add to it, and ending it does nothing
        span.set_attribute(PARTITION, str(fut.partition))

        # A handle of our own: the caller cancelling theirs must not end the span early.
        def done(own: RecordFuture) -> None:
            exc = own.exception()
            if exc is not None:
                _record_error(span, exc)
                span.end()
            else:
                self._acked(span, own.result())

        fut.another_handle().add_done_callback(done)
        return fut

    async def enqueue_batch(
        self,
        enqueue: Callable[..., Awaitable[RecordFuture]],
        producer: Producer,
        topic: str,
        values: Iterable[Any],
        keys: Iterable[Any] | None,
        headers: Iterable[Headers | None] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> list[RecordFuture]:
        """``enqueue_batch`` traced: every record gets its own span and trace headers; the
        handles in input order (the producer makes its ``BatchResult`` of them)."""
        result: list[RecordFuture] = []
        key_iter = iter(keys) if keys is not None else None
        header_iter = iter(headers) if headers is not None else None
        for value in values:
            key = next(key_iter, None) if key_iter is not None else None
            hdrs = next(header_iter, None) if header_iter is not None else None
            fut = await self.enqueue(enqueue, producer, topic, value, key, partition, timestamp_ms, hdrs)
            result.append(fut)
        return result

    # -- consuming --------------------------------------------------------------------

    def _consumer_attributes(self, consumer: Any, operation: str, kind: str) -> dict[str, Any]:
        attributes: dict[str, Any] = {SYSTEM: "kafka", OPERATION_NAME: operation, OPERATION_TYPE: kind}
        group = _group_id(consumer)
        if group is not None:
            attributes[CONSUMER_GROUP] = group
        client_id = _client_id(consumer)
        if client_id is not None:
            attributes[CLIENT_ID] = client_id
        return attributes

    def start_process(self, consumer: Any, record: Any) -> Span:
        """The ``process`` span of one record: child of (and linked to) the producer's
        context from its headers; of the current context when they carry none."""
        parent = self.extract(record.headers)
        attributes = self._consumer_attributes(consumer, "process", "process")
        attributes[DESTINATION] = record.topic
        attributes[PARTITION] = str(record.partition)
        attributes[OFFSET] = record.offset
        text_key = _key_attribute(record.key)
        if text_key is not None:
            attributes[KEY] = text_key
        value = record.value
        if value is None:
            attributes[TOMBSTONE] = True
        elif isinstance(value, bytes | bytearray | memoryview):
            attributes[BODY_SIZE] = len(value)
        delivery_count = getattr(record, "delivery_count", None)
        if delivery_count is not None:
            attributes[DELIVERY_COUNT] = delivery_count
        links = [Link(trace.get_current_span(parent).get_span_context())] if parent is not None else None
        return self.tracer.start_span(
            f"process {record.topic}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
        )

    async def next_record(self, consumer: Any, fetch: Callable[[], Awaitable[R]]) -> R:
        """``async for``/``getone`` traced: ends the previous record's ``process`` span,
        takes the next record with ``fetch`` (the untraced iteration) and makes its span
        current for the loop body."""
        end_iteration(consumer)
        record = await fetch()
        self.begin_iteration(consumer, record)
        return record

    def begin_iteration(self, consumer: Any, record: Any) -> None:
        """Start ``record``'s ``process`` span and make it current for the loop body
        that receives it (``end_iteration`` ends it)."""
        end_iteration(consumer)
        span = self.start_process(consumer, record)
        token = otel_context.attach(trace.set_span_in_context(span))
        _iterating[consumer] = _ProcessScope(span, token, asyncio.current_task())

    def _records_links(self, records: Iterable[Any]) -> list[Link]:
        links: list[Link] = []
        for record in records:
            ctx = self.extract(record.headers)
            if ctx is not None:
                links.append(Link(trace.get_current_span(ctx).get_span_context()))
                if len(links) >= MAX_LINKS:
                    break
        return links

    async def poll(self, consumer: Any, fetch: Callable[[], Awaitable[R]]) -> R:
        """``getmany``/``ShareConsumer.poll`` traced: ``fetch`` is the untraced call; a
        non-empty answer (a list, or lists by partition) gets a ``poll`` span."""
        start_ns = time.time_ns()
        out = await fetch()
        if out:
            records = [r for rs in out.values() for r in rs] if isinstance(out, dict) else list(out)  # type: ignore[call-overload]
            self.received(consumer, records, start_ns)
        return out

    def received(self, consumer: Any, records: Sequence[Any], start_ns: int) -> None:
        """Record the ``poll`` span of a non-empty batch (begun at ``start_ns``)."""
        if not records:
            return
        attributes = self._consumer_attributes(consumer, "poll", "receive")
        attributes[BATCH_COUNT] = len(records)
        topics = {r.topic for r in records}
        name = "poll"
        if len(topics) == 1:
            topic = records[0].topic
            attributes[DESTINATION] = topic
            name = f"poll {topic}"
            partitions = {r.partition for r in records}
            if len(partitions) == 1:
                attributes[PARTITION] = str(records[0].partition)
        span = self.tracer.start_span(
            name,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            links=self._records_links(records),
            start_time=start_ns,
        )
        span.end()

    async def run_handler(self, consumer: Any, record: Any, call: Callable[[], Any]) -> None:
        """Run ``call()`` (a worker's handler for ``record``; awaited when it returns an
        awaitable) inside the record's ``process`` span."""
        await self._run_in(self.start_process(consumer, record), call)

    async def run_batch_handler(self, consumer: Any, records: Sequence[Any], call: Callable[[], Any]) -> None:
        """Run ``call()`` (a handler of a batch) inside one ``process`` span, linked to
        every record's producer context and child of the first one found (so a one-record
        batch, and the batch's first trace, continue in the handler)."""
        parent = None
        for record in records:
            parent = self.extract(record.headers)
            if parent is not None:
                break
        attributes = self._consumer_attributes(consumer, "process", "process")
        attributes[BATCH_COUNT] = len(records)
        name = "process"
        if len({r.topic for r in records}) == 1:
            attributes[DESTINATION] = records[0].topic
            name = f"process {records[0].topic}"
        span = self.tracer.start_span(
            name,
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=self._records_links(records),
        )
        await self._run_in(span, call)

    @staticmethod
    async def _run_in(span: Span, call: Callable[[], Any]) -> None:
        with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            try:
                result = call()
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                _record_error(span, exc)
                raise


# The clients reach tracing through the hook in core (below them); hand it what it builds.
tracing_hook.register(KafkaTracing, end_iteration)
