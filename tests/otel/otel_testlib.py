"""Tracing test helpers: spans go to the OpenTelemetry SDK's in-memory exporter.

(A module of its own: test files import it by name, which a ``conftest`` cannot be
when several test folders with a conftest are collected together.)"""

from __future__ import annotations

import uuid

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Spans:
    """The provider under test and what it exported."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests.otel")

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name.startswith(prefix)]

    def by_id(self, span_id: int) -> ReadableSpan:
        (found,) = [s for s in self.all() if s.context.span_id == span_id]
        return found


def unique(prefix: str) -> str:
    return f"otel-{prefix}-{uuid.uuid4().hex[:10]}"
