"""Without instrument() (or a tracer_provider=), OpenTelemetry is never imported."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import aiokafka_lite.integrations.otel
from aiokafka_lite import Consumer, Producer
from aiokafka_lite.processing.ordered_workers import OrderedWorkers
from aiokafka_lite.consume.share import ShareConsumer
from aiokafka_lite.processing import ShareWorkers
from aiokafka_lite.processing.transact import TransactSession
p = Producer("127.0.0.1:1")
c = Consumer("127.0.0.1:1", group_id="g", enable_auto_commit=False)
s = ShareConsumer("127.0.0.1:1", group_id="g", topics="t", acknowledgement_mode="explicit")
OrderedWorkers(c, print)
ShareWorkers(s, print)
assert not aiokafka_lite.integrations.otel.is_instrumented()
{extra}
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")))
"""


def otel_modules_after(extra: str = "") -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(extra=extra)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [m for m in out.stdout.strip().split(",") if m]


def test_clients_do_not_import_opentelemetry_unless_tracing_is_enabled() -> None:
    assert otel_modules_after() == []


def test_instrument_imports_it_and_uninstrument_switches_tracing_off() -> None:
    loaded = otel_modules_after(
        "aiokafka_lite.integrations.otel.instrument()\n"
        "assert aiokafka_lite.integrations.otel.is_instrumented()\n"
        "aiokafka_lite.integrations.otel.uninstrument()\n"
        "from aiokafka_lite.core import tracing_hook as _active\n"
        "assert not _active.enabled and _active.tracing is None"
    )
    assert "opentelemetry.trace" in loaded
