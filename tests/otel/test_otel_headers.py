"""Trace context in Kafka record headers: reading it (no broker)."""

from __future__ import annotations

from types import SimpleNamespace

from aiokafka_lite.integrations import otel

TRACE = 0x0AF7651916CD43DD8448EB211C80319C


def header(span_id: int) -> bytes:
    return f"00-{TRACE:032x}-{span_id:016x}-01".encode()


def span_id_of(headers: tuple[tuple[str, bytes | None], ...]) -> int | None:
    from opentelemetry import trace

    ctx = otel.record_context(SimpleNamespace(headers=headers))
    return None if ctx is None else trace.get_current_span(ctx).get_span_context().span_id


def test_the_last_traceparent_header_wins_as_in_java() -> None:
    assert span_id_of((("traceparent", header(1)), ("x", b"y"), ("traceparent", header(2)))) == 2


def test_headers_without_a_valid_context_give_none() -> None:
    assert span_id_of(()) is None
    assert span_id_of((("traceparent", None),)) is None
    assert span_id_of((("traceparent", b"\xff\xfe not utf-8"),)) is None
    assert span_id_of((("traceparent", b"00-garbage"),)) is None
    assert span_id_of((("Traceparent", header(3)),)) is None  # Kafka header names are case-sensitive
