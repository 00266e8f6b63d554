"""examples/fastapi_service.py: driven over real HTTP with httpx against Kafka (embedded by default)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from examples_testlib import EXAMPLES, load_example

from aiokafka_lite import Admin, TopicPartition

fastapi_service = load_example("fastapi_service")


async def start(app: Any) -> tuple[Any, asyncio.Task[None], str]:
    """Serve ``app`` with the example's uvicorn server on a free port; returns its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = fastapi_service.make_server(app)
    server.config.log_level = "warning"
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(30):
        while not server.started:
            assert not task.done(), task
            await asyncio.sleep(0.01)
    return server, task, f"http://127.0.0.1:{sock.getsockname()[1]}"


async def stop(server: Any, task: asyncio.Task[None]) -> None:
    server.should_exit = True
    async with asyncio.timeout(30):
        await task


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs from a text/event-stream."""
    event, data = "message", ""
    async for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data:
            yield event, json.loads(data)
            event, data = "message", ""


async def total_records(bootstrap: str, topic: str) -> int:
    async with Admin(bootstrap) as admin:
        ends = await admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(3)})
    return sum(r.offset for r in ends.values())


async def test_post_returns_where_the_record_went_and_the_stream_delivers_it(kafka_bootstrap: str) -> None:
    topic = f"events-{uuid.uuid4().hex[:6]}"
    server, task, url = await start(fastapi_service.create_app(kafka_bootstrap, topic))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            health = await http.get("/health")
            assert health.status_code == 200 and health.json()["status"] == "ok"
            assert [(c["client"], c["ready"]) for c in health.json()["clients"]] == [
                ("producer", True),
                ("consumer", True),
            ]
            async with http.stream("GET", "/events/stream") as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                events = sse_events(stream.aiter_lines())
                assert await anext(events) == ("ready", {"topic": topic})

                posted = []
                for i in range(5):
                    r = await http.post("/events", json={"key": f"user-{i % 2}", "value": {"n": i}})
                    assert r.status_code == 200, r.text
                    posted.append(r.json())
                assert all(p["topic"] == topic and p["offset"] >= 0 for p in posted)

                streamed = [await anext(events) for _ in range(5)]
            assert [e for e, _ in streamed] == ["record"] * 5
            got = sorted((d["partition"], d["offset"], d["key"], d["value"]["n"]) for _, d in streamed)
            want = sorted((p["partition"], p["offset"], f"user-{i % 2}", i) for i, p in enumerate(posted))
            assert got == want

            bad = await http.post("/events", json={"key": "k"})  # no value
            assert bad.status_code == 422

            metrics = await http.get("/metrics")
            assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
            sent = [
                line
                for line in metrics.text.splitlines()
                if line.startswith("messaging_client_sent_messages_total{")
                and f'messaging_destination_name="{topic}"' in line
            ]
            assert len(sent) == 1 and sent[0].endswith(" 5")
            assert "# TYPE messaging_client_consumed_messages_total counter" in metrics.text
    finally:
        await stop(server, task)
    assert await total_records(kafka_bootstrap, topic) == 5


async def test_graceful_shutdown_flushes_accepted_events_and_ends_streams(kafka_bootstrap: str) -> None:
    topic = f"events-{uuid.uuid4().hex[:6]}"
    # Batches wait up to a minute to fill: only the shutdown flush can deliver them in time.
    app = fastapi_service.create_app(kafka_bootstrap, topic, linger_ms=60_000)
    server, task, url = await start(app)
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        async with http.stream("GET", "/events/stream") as stream:
            events = sse_events(stream.aiter_lines())
            assert (await anext(events))[0] == "ready"
            for i in range(50):
                r = await http.post("/events?wait=false", json={"value": i})
                assert r.status_code == 202 and r.json() == {"queued": True}
            assert await total_records(kafka_bootstrap, topic) == 0  # still buffered
            await stop(server, task)
            # The open stream ended with the server instead of holding the shutdown up.
            assert [e async for e in events] == []
    assert await total_records(kafka_bootstrap, topic) == 50


async def test_health_answers_503_while_kafka_is_away(kafka_cluster_factory: Any) -> None:
    cluster = await kafka_cluster_factory(brokers=1)
    topic = f"events-{uuid.uuid4().hex[:6]}"
    server, task, url = await start(
        fastapi_service.create_app(cluster.bootstrap, topic, reconnect_backoff_max_ms=500)
    )
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:

            async def status() -> int:
                return (await http.get("/health")).status_code

            assert await status() == 200
            (broker,) = (await http.get("/health")).json()["clients"][0]["brokers"]
            await cluster.stop_broker(broker["node_id"])
            async with asyncio.timeout(60):
                while await status() != 503:  # noqa: ASYNC110 - polling the service
                    await asyncio.sleep(0.1)
            body = (await http.get("/health")).json()
            assert body["status"] == "unavailable"
            assert "no broker reachable" in body["clients"][1]["reasons"]  # the tailing consumer
            await cluster.start_broker(broker["node_id"])
            async with asyncio.timeout(60):
                while await status() != 200:  # noqa: ASYNC110 - polling the service
                    await asyncio.sleep(0.1)
    finally:
        await stop(server, task)


def test_the_script_serves_with_an_embedded_broker_and_stops_on_sigterm() -> None:
    serve_one_event_then_sigterm()


def test_the_script_serves_against_a_given_cluster(kafka_bootstrap: str) -> None:
    serve_one_event_then_sigterm("--bootstrap", kafka_bootstrap)


def serve_one_event_then_sigterm(*args: str) -> None:
    """Runs the script as the docs say, posts an event to a fresh ``events`` topic, stops it."""
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "fastapi_service.py"), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:  # uvicorn logs its address once the app has started
            if "running on http://" in line:
                url = line.split("running on ")[1].split()[0]
                break
        assert url is not None
        r = httpx.post(f"{url}/events", json={"key": "a", "value": "hello"}, timeout=30)
        assert r.status_code == 200 and r.json()["offset"] == 0
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
        # uvicorn shuts down gracefully, then re-raises the signal it caught (newer versions).
        assert proc.returncode in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
