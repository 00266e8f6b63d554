"""What the clients' hot paths look at: the globally enabled tracing, or None.

This module imports nothing: the producer and consumers import it unconditionally, so
with OpenTelemetry off (not installed, or not enabled) a send costs one module-attribute
load and a ``None`` check. ``aiokafka_lite.otel.instrument()`` sets ``tracing``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiokafka_lite.otel.tracing import KafkaTracing

#: The tracing every client uses unless it was given its own ``tracer_provider=``.
tracing: KafkaTracing | None = None
