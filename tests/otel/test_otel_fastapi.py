"""The FastAPI example, traced: one trace spans the HTTP request, its Kafka send and the
consumer loop that handles the record (FastAPI's own OpenTelemetry instrumentation for
the server span, aiokafka_lite.integrations.otel for the Kafka spans)."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from opentelemetry import propagate
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.trace import SpanKind
from otel_testlib import Spans

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_service.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_fastapi_service_otel", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic looks its models' module up by name
    spec.loader.exec_module(module)
    return module


async def serve(example: ModuleType, app: Any) -> tuple[Any, asyncio.Task[None], str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = example.make_server(app)
    server.config.log_level = "warning"
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(30):
        while not server.started:
            assert not task.done(), task
            await asyncio.sleep(0.01)
    return server, task, f"http://127.0.0.1:{sock.getsockname()[1]}"


async def test_one_trace_spans_the_request_the_send_and_the_consumer(
    kafka_bootstrap: str, spans: Spans
) -> None:
    example = load_example()
    topic = f"otel-events-{uuid.uuid4().hex[:6]}"
    app = example.create_app(kafka_bootstrap, topic)
    FastAPIInstrumentor.instrument_app(app, tracer_provider=spans.provider)
    server, task, url = await serve(example, app)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            async with http.stream("GET", "/events/stream") as stream:
                lines = stream.aiter_lines()
                async with asyncio.timeout(30):
                    while (await anext(lines)) != "event: ready":
                        pass
                with spans.tracer.start_as_current_span("caller", kind=SpanKind.CLIENT) as caller:
                    headers: dict[str, str] = {}
                    propagate.inject(headers)  # the calling service's trace context
                    posted = await http.post("/events", json={"key": "user-1", "value": 1}, headers=headers)
                assert posted.status_code == 200, posted.text
                async with asyncio.timeout(30):
                    while not (await anext(lines)).startswith("data: "):
                        pass  # the consumer loop handled the record and streamed it
    finally:
        server.should_exit = True
        async with asyncio.timeout(30):
            await task
    trace_id = caller.get_span_context().trace_id
    (request,) = [s for s in spans.all() if s.kind is SpanKind.SERVER and s.name.startswith("POST")]
    (send,) = spans.named(f"send {topic}")
    (process,) = spans.named(f"process {topic}")
    assert request.parent is not None and request.parent.span_id == caller.get_span_context().span_id
    assert send.parent is not None and send.parent.span_id == request.context.span_id
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert request.context.trace_id == send.context.trace_id == process.context.trace_id == trace_id
    attrs = process.attributes or {}
    assert attrs["messaging.kafka.offset"] == posted.json()["offset"]
    assert attrs["messaging.destination.partition.id"] == str(posted.json()["partition"])
