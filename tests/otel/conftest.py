"""Tracing tests: spans go to the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from otel_testlib import Spans

from aiokafka_lite.integrations import otel


@pytest.fixture
def spans() -> Iterator[Spans]:
    """Every client traced through a fresh SDK provider; uninstrumented afterwards."""
    s = Spans()
    otel.instrument(tracer_provider=s.provider)
    try:
        yield s
    finally:
        otel.uninstrument()
        s.provider.shutdown()
