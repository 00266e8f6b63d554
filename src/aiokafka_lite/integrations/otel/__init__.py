"""OpenTelemetry integration: traces across produce and consume (and metrics, health).

Tracing is switched on for every client with :func:`instrument` and off with
:func:`uninstrument`; a single client can instead be given ``tracer_provider=``.
Importing this package does not import OpenTelemetry: only :func:`instrument` (or a
client's ``tracer_provider=``) does, and it needs the ``otel`` extra
(``pip install aiokafka_lite[otel]``, which installs ``opentelemetry-api``).
"""

from __future__ import annotations

from typing import Any

from aiokafka_lite.core import tracing_hook as _active

__all__ = ["instrument", "is_instrumented", "record_context", "uninstrument"]


def instrument(*, tracer_provider: Any = None, propagator: Any = None) -> None:
    """Trace every producer and consumer (existing and future) that has no ``tracer_provider=``.

    ``tracer_provider`` defaults to OpenTelemetry's global one (looked up at each span,
    so a provider set later is used); ``propagator`` to the global text-map propagator
    (W3C ``traceparent``/``tracestate`` unless the application configured another).
    Calling it again replaces the previous settings.
    """
    from aiokafka_lite.integrations.otel.tracing import KafkaTracing

    _active.set_global(KafkaTracing(tracer_provider, propagator))


def uninstrument() -> None:
    """Stop tracing the clients that use the global setting (per-client providers stay)."""
    _active.set_global(None)


def is_instrumented() -> bool:
    """Whether :func:`instrument` is in effect."""
    return _active.tracing is not None


def record_context(record: Any, propagator: Any = None) -> Any:
    """The OpenTelemetry ``Context`` carried by a consumed record's headers (None if they
    carry none), to parent or link spans of your own::

        ctx = aiokafka_lite.integrations.otel.record_context(record)
        with tracer.start_as_current_span("handle", context=ctx): ...
    """
    from aiokafka_lite.integrations.otel.tracing import extract_context

    return extract_context(record.headers, propagator)
