"""Render a traced produce -> consume -> handler flow as an SVG timeline for the docs.

Runs the flow on an embedded broker with tracing switched on through the
OpenTelemetry SDK and an in-memory exporter, then draws the spans of the request's
trace as a timeline (one row per span, indented by depth, coloured by span kind; hover
a bar for its attributes). Nothing beyond the SDK is needed: the SVG is written by hand.

    .venv/bin/python tools/otel_trace_timeline.py [--out docs/images/otel-trace-timeline.svg]

The flow: an HTTP-like ``POST /orders`` server span sends to ``orders``; an
``OrderedWorkers`` handler processes the order (a ``reserve stock`` span of its own) and
sends a record to ``shipments``; a second consumer's ``async for`` loop handles that.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "images" / "otel-trace-timeline.svg"

KIND_COLOURS = {
    "SERVER": "#6d4cc2",
    "PRODUCER": "#1f77b4",
    "CONSUMER": "#2ca02c",
    "CLIENT": "#ff7f0e",
    "INTERNAL": "#7f7f7f",
}


async def run_flow() -> list[Any]:
    """Run the flow; the finished spans of the request's trace."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from aiokafka_lite import Consumer, Producer, otel
    from aiokafka_lite.broker.cluster import EmbeddedCluster
    from aiokafka_lite.processing.ordered_workers import OrderedWorkers

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("shop")
    otel.instrument(tracer_provider=provider)
    try:
        async with EmbeddedCluster(brokers=1) as cluster:
            cluster.create_topic("orders", 1)
            cluster.create_topic("shipments", 1)
            async with (
                Producer(cluster.bootstrap, linger_ms=2) as producer,
                Consumer(
                    cluster.bootstrap,
                    topics="orders",
                    group_id="fulfilment",
                    auto_offset_reset="earliest",
                    enable_auto_commit=False,
                ) as orders,
                Consumer(
                    cluster.bootstrap, topics="shipments", group_id="shipping", auto_offset_reset="earliest"
                ) as shipments,
            ):
                await producer.send("orders", b"warm-up")  # metadata and connections first
                await producer.send("shipments", b"warm-up")
                exporter.clear()
                processed = asyncio.Event()

                async def fulfil(record: Any) -> None:
                    if record.value == b"warm-up":
                        return
                    with tracer.start_as_current_span("reserve stock"):
                        await asyncio.sleep(0.004)
                    await producer.send("shipments", b"ship order-42", key=record.key)
                    processed.set()

                workers = OrderedWorkers(orders, fulfil, fetch_timeout_ms=5)
                runner = asyncio.create_task(workers.run())
                with tracer.start_as_current_span("POST /orders", kind=SpanKind.SERVER):
                    await asyncio.sleep(0.001)  # validating the request
                    await producer.send("orders", b'{"order": 42}', key=b"order-42")
                async with asyncio.timeout(30):
                    await processed.wait()
                    async for record in shipments:
                        if record.value == b"warm-up":
                            continue
                        with tracer.start_as_current_span("print label"):
                            await asyncio.sleep(0.002)
                        break
                workers.stop()
                await runner
    finally:
        otel.uninstrument()
    spans = list(exporter.get_finished_spans())
    (request,) = [s for s in spans if s.name == "POST /orders"]
    return [s for s in spans if s.context.trace_id == request.context.trace_id]


def _ordered(spans: Sequence[Any]) -> list[tuple[int, Any]]:
    """(depth, span) in depth-first order, children by start time."""
    ids = {s.context.span_id for s in spans}
    children: dict[int | None, list[Any]] = {}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        children.setdefault(parent, []).append(s)
    out: list[tuple[int, Any]] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda s: s.start_time):
            out.append((depth, s))
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return out


def render_svg(spans: Sequence[Any]) -> str:
    rows = _ordered(spans)
    t0 = min(s.start_time for s in spans)
    t1 = max(s.end_time for s in spans)
    total_ms = max((t1 - t0) / 1e6, 0.001)
    label_w, chart_w, row_h, top, pad = 250, 620, 26, 46, 12
    width = label_w + chart_w + 3 * pad
    height = top + row_h * len(rows) + 58

    def x(ns: int) -> float:
        return label_w + pad + (ns - t0) / 1e6 / total_ms * chart_w

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{pad}" y="20" font-size="14" font-weight="bold">One trace: an HTTP request, its Kafka '
        f"send, the worker that processes it and the consumer of its output</text>",
    ]
    step = _tick_step(total_ms)
    tick = 0.0
    while tick <= total_ms + 1e-9:
        tx = label_w + pad + tick / total_ms * chart_w
        out.append(
            f'<line x1="{tx:.1f}" y1="{top - 8}" x2="{tx:.1f}" y2="{top + row_h * len(rows)}" '
            'stroke="#e4e4e4"/>'
        )
        out.append(f'<text x="{tx:.1f}" y="{top - 12}" text-anchor="middle" fill="#666">{tick:g} ms</text>')
        tick += step
    for i, (depth, s) in enumerate(rows):
        y = top + i * row_h
        kind = s.kind.name
        colour = KIND_COLOURS.get(kind, "#7f7f7f")
        if i % 2:
            out.append(f'<rect x="0" y="{y}" width="{width}" height="{row_h}" fill="#f7f7f9"/>')
        out.append(
            f'<text x="{pad + depth * 14}" y="{y + 17}" fill="#222">{html.escape(s.name)}'
            f'<tspan dx="6" fill="#888" font-size="10">{kind.lower()}</tspan></text>'
        )
        bx, bw = x(s.start_time), max(x(s.end_time) - x(s.start_time), 2.0)
        dur = (s.end_time - s.start_time) / 1e6
        title = html.escape(
            "\n".join(
                [f"{s.name} ({kind}, {dur:.2f} ms)"] + [f"{k} = {v}" for k, v in (s.attributes or {}).items()]
            )
        )
        out.append(
            f'<rect x="{bx:.1f}" y="{y + 5}" width="{bw:.1f}" height="{row_h - 10}" rx="3" fill="{colour}">'
            f"<title>{title}</title></rect>"
        )
        text_x = bx + bw + 4
        anchor = "start"
        if text_x > width - 70:
            text_x, anchor = bx - 4, "end"
        out.append(
            f'<text x="{text_x:.1f}" y="{y + 17}" fill="#444" font-size="11" text-anchor="{anchor}">'
            f"{dur:.2f} ms</text>"
        )
    ly = top + row_h * len(rows) + 30
    lx = float(pad)
    present = {s.kind.name for s in spans}
    for kind, colour in KIND_COLOURS.items():
        if kind not in present:
            continue
        out.append(f'<rect x="{lx:.0f}" y="{ly - 10}" width="12" height="12" rx="2" fill="{colour}"/>')
        out.append(f'<text x="{lx + 16:.0f}" y="{ly}" fill="#444">{kind.lower()}</text>')
        lx += 100
    out.append(
        f'<text x="{pad}" y="{ly + 20}" fill="#888" font-size="10">Rendered by tools/otel_trace_timeline.py from '
        "the OpenTelemetry SDK's in-memory span exporter (embedded broker).</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _tick_step(total_ms: float) -> float:
    for step in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        if total_ms / step <= 10:
            return float(step)
    return 2000.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    spans = asyncio.run(run_flow())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render_svg(spans))
    for depth, s in _ordered(spans):
        print(f"{'  ' * depth}{s.name} [{s.kind.name}] {(s.end_time - s.start_time) / 1e6:.2f} ms")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
