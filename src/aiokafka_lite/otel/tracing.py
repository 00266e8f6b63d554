"""OpenTelemetry spans for Kafka produce and consume (messaging semantic conventions)."""

from __future__ import annotations

from typing import Any

__all__ = ["KafkaTracing"]


class KafkaTracing:
    """Creates the spans of one tracer provider and injects/extracts trace context."""

    def __init__(self, tracer_provider: Any = None, propagator: Any = None) -> None:
        self.tracer_provider = tracer_provider
        self.propagator = propagator
