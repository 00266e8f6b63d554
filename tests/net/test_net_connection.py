"""BrokerConnection over the in-memory transport: pipelining, cancellation, failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from netfakes import FakeBroker, FakeCluster

from aiokafka_lite.core import errors as E
from aiokafka_lite.net.client_config import ClientConfig
from aiokafka_lite.net.connection import BrokerConnection, negotiate_version
from aiokafka_lite.wire.framing import RequestFrame
from aiokafka_lite.wire.message import Response
from aiokafka_lite.wire.messages import (
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    ProduceRequest,
    ProduceResponse,
)


def _echo(broker: FakeBroker, req: RequestFrame) -> Response:
    body: Any = req.body
    return FindCoordinatorResponse(host=body.key, node_id=broker.node_id)


async def _connect(cluster: FakeCluster, node: int = 0, **options: Any) -> BrokerConnection:
    b = cluster.brokers[node]
    conn = BrokerConnection(node, b.host, b.port, ClientConfig.from_options(**options), opener=cluster.opener)
    await conn.connect()
    return conn


def _req(key: str) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(key=key)


async def test_connect_negotiates_versions() -> None:
    cluster = FakeCluster(1)
    cluster.brokers[0].api_versions[10] = (0, 2)
    conn = await _connect(cluster)
    assert conn.ready
    assert conn.version_for(10) == 2  # min(ours 6, broker 2)
    first = cluster.brokers[0].log[0]
    assert first.api_key == 18 and first.api_version == 4
    assert first.body.client_software_name == "aiokafka-lite"  # type: ignore[attr-defined]
    conn.close()


async def test_api_versions_fallback_to_broker_max() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]

    def old_broker(b: FakeBroker, req: RequestFrame) -> Response:
        if req.api_version > 2:
            # Answered in v0 format: the fake encodes at the request's version, so emulate
            # what a real broker does by returning a body that is valid v0.
            return ApiVersionsResponse(
                error_code=35,
                api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)],
            )
        return ApiVersionsResponse(
            api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in b.api_versions.items()
            ]
        )

    broker.handlers[18] = old_broker
    # Make the first response truly v0-encoded: respond() encodes at the request version,
    # so patch respond for the error case.
    orig = broker.respond

    def respond(transport: Any, req: RequestFrame, resp: Response) -> None:
        if isinstance(resp, ApiVersionsResponse) and resp.error_code == 35:
            from aiokafka_lite.wire.framing import encode_response

            transport.deliver(encode_response(resp, 0, req.correlation_id))
            return
        orig(transport, req, resp)

    broker.respond = respond  # type: ignore[method-assign]
    conn = await _connect(cluster)
    assert [r.api_version for r in broker.log[:2]] == [4, 2]
    assert conn.version_for(3) > 0
    conn.close()


async def test_unsupported_version_names_the_api() -> None:
    cluster = FakeCluster(1)
    cluster.brokers[0].api_versions[0] = (0, 2)  # Produce v0-2 only; we need v3+
    conn = await _connect(cluster)
    with pytest.raises(E.UnsupportedVersionError, match="Produce"):
        conn.version_for(0)
    del cluster.brokers[0].api_versions[0]
    with pytest.raises(E.UnsupportedVersionError, match="does not support Produce"):
        negotiate_version(0, {}, node_id=3)
    conn.close()


async def test_pipelining_bounded_by_max_in_flight() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]
    broker.handlers[10] = _echo
    conn = await _connect(cluster, max_in_flight_requests_per_connection=2)
    broker.hold = True
    before = broker.requests[10]
    tasks = [asyncio.create_task(conn.send(_req(str(i)), 3)) for i in range(5)]
    await asyncio.sleep(0.01)
    assert broker.requests[10] - before == 2  # only two written
    assert conn.in_flight == 2 and conn.load == 5
    broker.release()
    results = await asyncio.gather(*tasks)
    assert [r.host for r in results] == [str(i) for i in range(5)]  # type: ignore[union-attr]
    assert conn.in_flight == 0
    conn.close()


async def test_thousand_concurrent_requests_resolve_to_their_own_responses() -> None:
    cluster = FakeCluster(1)
    cluster.brokers[0].handlers[10] = _echo
    conn = await _connect(cluster, max_in_flight_requests_per_connection=64)
    results = await asyncio.gather(*(conn.send(_req(f"key-{i}"), 3) for i in range(1000)))
    assert [r.host for r in results] == [f"key-{i}" for i in range(1000)]  # type: ignore[union-attr]
    conn.close()


async def test_acks_zero_leaves_no_waiter_and_no_slot() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]
    broker.handlers[0] = lambda b, r: None  # acks=0: the broker never answers
    broker.handlers[10] = _echo
    conn = await _connect(cluster, max_in_flight_requests_per_connection=1)
    for _ in range(10):
        assert await conn.send(ProduceRequest(acks=0), 9, expect_response=False) is None
    assert conn.in_flight == 0
    resp = await conn.send(_req("after"), 3, timeout_s=1)
    assert resp.host == "after"  # type: ignore[union-attr]
    conn.close()


async def test_cancelled_caller_keeps_stream_in_sync() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]
    broker.handlers[10] = _echo
    conn = await _connect(cluster, max_in_flight_requests_per_connection=1)
    broker.hold = True
    task = asyncio.create_task(conn.send(_req("cancelled"), 3))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert conn.in_flight == 1  # still on the wire; its slot is still taken
    follow = asyncio.create_task(conn.send(_req("next"), 3))
    await asyncio.sleep(0.01)
    assert broker.requests[10] == 1  # waits for the slot
    broker.release()
    resp = await follow
    assert resp.host == "next"  # type: ignore[union-attr]
    assert conn.ready and conn.in_flight == 0
    conn.close()


async def test_cancel_while_waiting_for_slot_does_not_leak_it() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]
    broker.handlers[10] = _echo
    conn = await _connect(cluster, max_in_flight_requests_per_connection=1)
    broker.hold = True
    first = asyncio.create_task(conn.send(_req("a"), 3))
    queued = asyncio.create_task(conn.send(_req("b"), 3))
    await asyncio.sleep(0.01)
    queued.cancel()
    broker.release()
    assert (await first).host == "a"  # type: ignore[union-attr]
    assert (await conn.send(_req("c"), 3)).host == "c"  # type: ignore[union-attr]
    assert broker.requests[10] == 2  # "b" was never written
    conn.close()


async def test_disconnect_fails_in_flight_retriably() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]
    broker.handlers[10] = _echo
    closed: list[BaseException | None] = []
    b = cluster.brokers[0]
    conn = BrokerConnection(
        0, b.host, b.port, ClientConfig(), opener=cluster.opener, on_close=lambda c, e: closed.append(e)
    )
    await conn.connect()
    broker.hold = True
    tasks = [asyncio.create_task(conn.send(_req(str(i)), 3)) for i in range(3)]
    await asyncio.sleep(0.01)
    broker.drop_connections()
    for t in tasks:
        with pytest.raises(E.KafkaConnectionError) as ei:
            await t
        assert ei.value.retriable
    assert conn.closed and len(closed) == 1
    with pytest.raises(E.KafkaConnectionError):
        await conn.send(_req("x"), 3)


async def test_corrupt_response_fails_in_flight_with_corrupt_frame() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]

    def garbage(b: FakeBroker, req: RequestFrame) -> None:
        for t in b.transports:
            t.deliver(b"\x00\x00\x00\x06" + req.correlation_id.to_bytes(4, "big") + b"\xff\xff")
        return None

    broker.handlers[10] = garbage
    conn = await _connect(cluster)
    with pytest.raises(E.CorruptFrameError):
        await conn.send(_req("x"), 3)
    assert conn.closed


async def test_oversized_response_closes_connection() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]

    def huge(b: FakeBroker, req: RequestFrame) -> None:
        for t in b.transports:
            t.deliver((50_000).to_bytes(4, "big") + req.correlation_id.to_bytes(4, "big"))
        return None

    broker.handlers[10] = huge
    conn = await _connect(cluster, max_response_size=10_000)
    with pytest.raises(E.CorruptFrameError, match="exceeds the limit"):
        await conn.send(_req("x"), 3)
    assert conn.closed


async def test_request_timeout_closes_connection() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]
    broker.handlers[10] = _echo
    conn = await _connect(cluster)
    broker.hold = True
    other = asyncio.create_task(conn.send(_req("other"), 3, timeout_s=5))
    with pytest.raises(E.KafkaTimeoutError):
        await conn.send(_req("slow"), 3, timeout_s=0.05)
    with pytest.raises(E.KafkaConnectionError):
        await other
    assert conn.closed


async def test_close_fails_pending_with_closed_error() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]
    broker.handlers[10] = _echo
    conn = await _connect(cluster)
    broker.hold = True
    task = asyncio.create_task(conn.send(_req("x"), 3))
    await asyncio.sleep(0.01)
    conn.close()
    with pytest.raises(E.ClosedError):
        await task
    await conn.wait_closed()


async def test_connect_refused_is_connection_error() -> None:
    cluster = FakeCluster(1)
    cluster.brokers[0].up = False
    b = cluster.brokers[0]
    conn = BrokerConnection(0, b.host, b.port, ClientConfig(), opener=cluster.opener)
    with pytest.raises(E.KafkaConnectionError):
        await conn.connect()
    assert conn.closed


async def test_throttle_delays_next_send_and_calls_hook() -> None:
    cluster = FakeCluster(1)
    broker = cluster.brokers[0]
    broker.handlers[0] = lambda b, r: ProduceResponse(throttle_time_ms=80)
    broker.handlers[10] = _echo
    seen: list[tuple[int, int]] = []

    class H:
        def on_throttle(self, node_id: int, ms: int, api_key: int) -> None:
            seen.append((ms, api_key))

    from aiokafka_lite.net.hooks import HookDispatcher

    hooks = HookDispatcher()
    hooks.add(H())
    b = cluster.brokers[0]
    conn = BrokerConnection(0, b.host, b.port, ClientConfig(), opener=cluster.opener, hooks=hooks)
    await conn.connect()
    await conn.send(ProduceRequest(acks=1), 9)
    assert seen == [(80, 0)]
    loop = asyncio.get_running_loop()
    start = loop.time()
    await conn.send(_req("after"), 3)
    assert loop.time() - start >= 0.05
    assert conn.stats.throttle_ms_total == 80
    conn.close()


async def test_hooks_see_written_and_read() -> None:
    cluster = FakeCluster(1)
    cluster.brokers[0].handlers[10] = _echo
    events: list[tuple[str, int]] = []

    class H:
        def on_request_written(self, node: int, key: int, ver: int, n: int, err: object) -> None:
            events.append(("written", key))

        def on_response_read(self, node: int, key: int, ver: int, n: int, lat: float, err: object) -> None:
            assert n > 0 and lat >= 0 and err is None
            events.append(("read", key))

        def on_broker_connect(self, node: int, host: str, port: int, elapsed: float, err: object) -> None:
            events.append(("connect", node))

        def on_broker_disconnect(self, node: int, host: str, port: int) -> None:
            events.append(("disconnect", node))

    from aiokafka_lite.net.hooks import HookDispatcher

    hooks = HookDispatcher()
    hooks.add(H())
    b = cluster.brokers[0]
    conn = BrokerConnection(0, b.host, b.port, ClientConfig(), opener=cluster.opener, hooks=hooks)
    await conn.connect()
    await conn.send(_req("a"), 3)
    cluster.brokers[0].drop_connections()
    await asyncio.sleep(0.01)
    assert events == [
        ("written", 18),
        ("read", 18),
        ("connect", 0),
        ("written", 10),
        ("read", 10),
        ("disconnect", 0),
    ]
