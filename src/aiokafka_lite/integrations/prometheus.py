"""The clients' metrics in the Prometheus text exposition format (version 0.0.4).

For services without OpenTelemetry: serve ``render_prometheus()`` at ``/metrics`` with
``CONTENT_TYPE``. Needs neither ``prometheus_client`` nor OpenTelemetry.

Names are the OpenTelemetry names of ``aiokafka_lite.core.client_metrics`` converted as
OpenTelemetry's Prometheus exporters do: dots become underscores, the unit becomes a
suffix (``s`` -> ``_seconds``, ``By`` -> ``_bytes``; annotations such as ``{message}`` add
none) and counters end in ``_total``; attribute names get underscores too. So
``messaging.client.sent.messages`` is ``messaging_client_sent_messages_total`` and
``messaging.client.operation.duration`` the histogram
``messaging_client_operation_duration_seconds``.
"""

from __future__ import annotations

import math
import re

from aiokafka_lite.core.client_metrics import HistogramValue, MetricFamily, collect

__all__ = ["CONTENT_TYPE", "prometheus_name", "render_families", "render_prometheus"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_UNIT_SUFFIX = {"s": "seconds", "By": "bytes", "ms": "milliseconds"}
_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(name: str, unit: str, kind: str) -> str:
    """The Prometheus metric name for an OpenTelemetry metric name, unit and kind."""
    out = _INVALID_NAME.sub("_", name)
    suffix = _UNIT_SUFFIX.get(unit)
    if suffix and not out.endswith("_" + suffix):
        out += "_" + suffix
    if kind == "counter" and not out.endswith("_total"):
        out += "_total"
    return out


def _label_name(name: str) -> str:
    out = _INVALID_LABEL.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 2**53):
        return str(int(value))
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def _labels(pairs: list[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    return "{" + ",".join(f'{_label_name(k)}="{_escape_label_value(v)}"' for k, v in pairs) + "}"


def render_families(families: list[MetricFamily]) -> str:
    """Text exposition of ``families`` (those without points are left out)."""
    lines: list[str] = []
    for family in families:
        if not family.points:
            continue
        spec = family.spec
        name = prometheus_name(spec.name, spec.unit, spec.kind)
        prom_type = {"counter": "counter", "histogram": "histogram"}.get(spec.kind, "gauge")
        lines.append(f"# HELP {name} {_escape_help(spec.description)}")
        lines.append(f"# TYPE {name} {prom_type}")
        for point in family.points:
            attrs = list(point.attributes)
            value = point.value
            if isinstance(value, HistogramValue):
                base = name
                cumulative = 0
                for bound, n in zip((*value.bounds, math.inf), value.counts, strict=True):
                    cumulative += n
                    le = "+Inf" if math.isinf(bound) else _number(bound)
                    lines.append(f"{base}_bucket{_labels([*attrs, ('le', le)])} {cumulative}")
                lines.append(f"{base}_sum{_labels(attrs)} {_number(value.sum)}")
                lines.append(f"{base}_count{_labels(attrs)} {value.count}")
            else:
                lines.append(f"{name}{_labels(attrs)} {_number(value)}")
    return "\n".join(lines) + "\n" if lines else ""


def render_prometheus(*clients: object) -> str:
    """Metrics of ``clients`` (default: every live Producer, Consumer, Admin and
    ShareConsumer) in the Prometheus text format."""
    return render_families(collect(*clients))
