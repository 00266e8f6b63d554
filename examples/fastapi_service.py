"""A FastAPI service that publishes events to Kafka and streams them to browsers.

    pip install fastapi uvicorn
    python examples/fastapi_service.py                       # embedded broker, in this process
    python examples/fastapi_service.py --bootstrap HOST:PORT # any Kafka cluster

    curl -N localhost:8000/events/stream                     # server-sent events, one per record
    curl -X POST localhost:8000/events -H 'content-type: application/json' \\
         -d '{"key": "user-1", "value": {"clicked": "buy"}}'  # -> {"partition": 0, "offset": 0, ...}

The app's lifespan owns one ``Producer`` and one ``Consumer``, started with the app and
closed with it. ``POST /events`` awaits the acknowledgement and returns where the record
was written (``?wait=false`` only buffers it and answers 202). ``GET /events/stream``
tails the topic: the single consumer's ``async for`` feeds every connected browser
through a small fan-out hub, so a thousand open tabs still cost one consumer. On
shutdown the producer is flushed, so every accepted event reaches Kafka. ``GET /health``
is a readiness probe built on the clients' ``health()`` (503 while a client is not
ready) and ``GET /metrics`` serves their metrics for Prometheus.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from aiokafka_lite import Admin, Consumer, NewTopic, Producer, Record
from aiokafka_lite.core.errors import KafkaError, TopicAlreadyExistsError
from aiokafka_lite.integrations.prometheus import CONTENT_TYPE as PROMETHEUS_CONTENT_TYPE
from aiokafka_lite.integrations.prometheus import render_prometheus

KEEPALIVE_SECONDS = 15.0  # an SSE comment this often keeps proxies from closing idle streams


class Event(BaseModel):
    key: str | None = None
    value: Any


class Hub:
    """Fans records from one consumer out to any number of subscribers (one queue each).

    A subscriber that falls ``max_backlog`` records behind is disconnected rather than
    allowed to make the service buffer without bound; its stream ends and the browser's
    EventSource reconnects.
    """

    def __init__(self, max_backlog: int = 1000) -> None:
        self.max_backlog = max_backlog
        self.subscribers: set[asyncio.Queue[Record | None]] = set()

    def subscribe(self) -> asyncio.Queue[Record | None]:
        queue: asyncio.Queue[Record | None] = asyncio.Queue(self.max_backlog)
        self.subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Record | None]) -> None:
        self.subscribers.discard(queue)

    @staticmethod
    def _end(queue: asyncio.Queue[Record | None]) -> None:
        while not queue.empty():  # make room for the end marker
            queue.get_nowait()
        queue.put_nowait(None)

    async def pump(self, consumer: Consumer) -> None:
        async for record in consumer:
            for queue in list(self.subscribers):
                try:
                    queue.put_nowait(record)
                except asyncio.QueueFull:
                    self.unsubscribe(queue)
                    self._end(queue)

    def close(self) -> None:
        for queue in list(self.subscribers):
            self.unsubscribe(queue)
            self._end(queue)


def sse(event: str, data: object, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def record_json(record: Record) -> dict[str, Any]:
    value = record.value
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp_ms,
        "key": record.key.decode() if record.key is not None else None,
        "value": json.loads(value) if value is not None else None,
    }


def create_app(bootstrap: str, topic: str = "events", **producer_options: Any) -> FastAPI:
    """The service, publishing to and streaming from ``topic`` on ``bootstrap``."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with Admin(bootstrap) as admin:
            result = (await admin.create_topics([NewTopic(topic, partitions=3)]))[topic]
            if result.error is not None and not isinstance(result.error, TopicAlreadyExistsError):
                raise result.error
        producer = Producer(bootstrap, **producer_options)
        # No group: every instance of the service streams every record (a live tail).
        consumer = Consumer(bootstrap, topics=topic, auto_offset_reset="latest")
        hub = Hub()
        async with producer, consumer:
            await consumer.seek_to_end()  # the stream starts now, not at the first poll
            pump = asyncio.create_task(hub.pump(consumer))
            app.state.producer, app.state.consumer, app.state.hub = producer, consumer, hub
            try:
                yield
            finally:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump
                hub.close()
                await producer.flush(timeout=30)  # graceful: deliver what POST accepted

    app = FastAPI(title="events", lifespan=lifespan)

    @app.post("/events")
    async def publish(
        event: Event, request: Request, response: Response, wait: bool = True
    ) -> dict[str, Any]:
        producer: Producer = request.app.state.producer
        key = event.key.encode() if event.key is not None else None
        value = json.dumps(event.value).encode()
        try:
            if not wait:
                await producer.enqueue(topic, value, key=key)  # buffered; delivered in the background
                response.status_code = 202
                return {"queued": True}
            md = await producer.send(topic, value, key=key)
        except KafkaError as exc:
            raise HTTPException(503, f"{type(exc).__name__}: {exc}") from exc
        return {
            "topic": md.topic,
            "partition": md.partition,
            "offset": md.offset,
            "timestamp": md.timestamp_ms,
        }

    @app.get("/events/stream")
    async def stream(request: Request) -> StreamingResponse:
        hub: Hub = request.app.state.hub
        queue = hub.subscribe()  # before the response starts: nothing published after this is missed

        async def events() -> AsyncIterator[bytes]:
            try:
                yield sse("ready", {"topic": topic})
                while True:
                    try:
                        record = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    if record is None:  # shutting down, or this client fell too far behind
                        return
                    yield sse("record", record_json(record), f"{record.partition}-{record.offset}")
            finally:
                hub.unsubscribe(queue)

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    @app.get("/health")
    async def health(request: Request, response: Response) -> dict[str, Any]:
        """Readiness: 200 while the producer and the consumer are ready, else 503 (so an
        orchestrator stops routing here); the body says why (see aiokafka_lite.core.health)."""
        state = request.app.state
        checks = [state.producer.health(), state.consumer.health()]
        ready = all(h.ready for h in checks)
        response.status_code = 200 if ready else 503
        return {"status": "ok" if ready else "unavailable", "clients": [h.as_dict() for h in checks]}

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        """The clients' metrics in the Prometheus text format."""
        state = request.app.state
        text = render_prometheus(state.producer, state.consumer)
        return Response(text, media_type=PROMETHEUS_CONTENT_TYPE)

    return app


def make_server(app: FastAPI, host: str = "127.0.0.1", port: int = 8000) -> Any:
    """A uvicorn server that ends the open event streams when it shuts down.

    uvicorn waits for open connections before it runs the lifespan's shutdown, and an
    event stream never ends by itself: so end them first, then let uvicorn wait.
    """
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            hub = getattr(app.state, "hub", None)
            if hub is not None:
                hub.close()
            await super().shutdown(sockets)

    return Server(uvicorn.Config(app, host=host, port=port, timeout_graceful_shutdown=10))


async def serve(bootstrap: str | None, host: str, port: int) -> None:
    from aiokafka_lite.broker import EmbeddedCluster

    async with contextlib.AsyncExitStack() as stack:
        if bootstrap is None:  # no cluster given: run an embedded broker in this process
            bootstrap = (await stack.enter_async_context(EmbeddedCluster())).bootstrap
            print(f"embedded Kafka broker on {bootstrap}", flush=True)
        await make_server(create_app(bootstrap), host, port).serve()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP") or None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP, else an embedded broker)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    asyncio.run(serve(args.bootstrap, args.host, args.port))
