"""Malformed, truncated, oversized and unknown requests; fuzzing the request path."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import KafkaConnectionError
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.framing import encode_request
from aiokafka_lite.wire.messages import (
    REQUESTS,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from aiokafka_lite.wire.records import encode_batch


async def healthy(cluster: EmbeddedCluster) -> bool:
    async with await RawClient.connect(cluster.bootstrap) as c:
        resp = await c.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3, within=5
        )
        return isinstance(resp, ApiVersionsResponse) and resp.error_code == 0


def header_only(api_key: int, version: int, corr: int = 1) -> bytes:
    body = struct.pack(">hhih", api_key, version, corr, -1)
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(struct.pack(">i", 100 * 1024 * 1024 + 1), id="oversized-prefix"),
        pytest.param(struct.pack(">i", -5) + b"xxxx", id="negative-size"),
        pytest.param(struct.pack(">i", 3) + b"abc", id="shorter-than-header"),
        pytest.param(header_only(999, 0), id="unknown-api-key"),
        pytest.param(header_only(0, 2), id="produce-below-min-version"),
        pytest.param(header_only(3, 99), id="metadata-unknown-version"),
        pytest.param(header_only(3, 12) + b"", id="metadata-truncated-body"),
        pytest.param(
            struct.pack(">i", 12) + struct.pack(">hhi", 3, 12, 7) + b"\xff\xff\xff\xff", id="garbage-body"
        ),
    ],
)
async def test_protocol_violations_close_the_connection(kafka_cluster: EmbeddedCluster, frame: bytes) -> None:
    async with await RawClient.connect(kafka_cluster.bootstrap) as bystander:
        async with await RawClient.connect(kafka_cluster.bootstrap) as c:
            await c.send_raw(frame)
            assert await c.is_closed_by_peer()
        # Other connections are unaffected.
        other = await bystander.request(MetadataRequest(topics=None), 12)
        assert isinstance(other, MetadataResponse) and len(other.brokers) == 1
    assert await healthy(kafka_cluster)


async def test_truncated_frame_then_disconnect(kafka_cluster: EmbeddedCluster) -> None:
    frame = encode_request(MetadataRequest(topics=None), 12, 1, "x")
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        await c.send_raw(frame[: len(frame) // 2])
    # A huge declared frame that never arrives costs nothing and blocks nobody.
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        await c.send_raw(struct.pack(">i", 90 * 1024 * 1024) + b"x" * 1000)
        assert await healthy(kafka_cluster)
    assert await healthy(kafka_cluster)


async def test_every_api_and_version_answers_a_default_request(
    kafka_cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """No handler may crash or produce an unencodable response for a minimal request."""
    kafka_cluster.create_topic("t", 1)
    caplog.set_level(logging.ERROR, logger="aiokafka_lite.broker")
    for entry in kafka_cluster.registry:
        cls = REQUESTS[entry.api_key]
        async with await RawClient.connect(kafka_cluster.bootstrap) as c:
            for v in range(entry.min_version, entry.max_version + 1):
                req = cls()
                if isinstance(req, FetchRequest):
                    req.max_wait_ms = 0
                if isinstance(req, ProduceRequest):
                    req.acks = 1
                await c.request(req, v)
                if entry.api_key in (17, 36):  # SASL without users: a fresh connection each time
                    break
    assert [r.getMessage() for r in caplog.records] == []
    assert await healthy(kafka_cluster)


async def test_pipelined_requests_without_reading(kafka_cluster: EmbeddedCluster) -> None:
    """A client that never reads its responses gets back-pressure, not unbounded buffers."""
    kafka_cluster.create_topic("t", 1)
    records = encode_batch([(1, None, b"x" * 1000, [])])
    frame = encode_request(
        FetchRequest(
            max_wait_ms=0,
            max_bytes=10_000_000,
            topics=[
                FetchRequest.FetchTopic(
                    topic="t",
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=10_000_000
                        )
                    ],
                )
            ],
        ),
        12,
        1,
        "x",
    )
    async with await RawClient.connect(kafka_cluster.bootstrap) as p:
        for _ in range(200):
            await p.request(
                ProduceRequest(
                    acks=1,
                    timeout_ms=1000,
                    topic_data=[
                        ProduceRequest.TopicProduceData(
                            name="t",
                            partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)],
                        )
                    ],
                ),
                9,
            )
    _reader, writer = await asyncio.open_connection(*kafka_cluster.bootstrap.split(":"))
    try:
        writer.write(frame * 2000)  # ~2000 responses of ~200 KB each, never read
        (broker,) = kafka_cluster.brokers

        def backed_up() -> list[asyncio.Transport]:
            return [
                c.transport
                for c in broker.connections
                if c.transport is not None and c.transport.get_write_buffer_size() > 0
            ]

        # Wait (however slow the machine) until responses pile up, then give the broker
        # time in which unbounded buffering would show.
        deadline = asyncio.get_running_loop().time() + 30
        while not backed_up():
            assert asyncio.get_running_loop().time() < deadline, "the broker never answered"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        (transport,) = backed_up()
        assert transport.get_write_buffer_size() < 64 * 1024 * 1024
        assert await healthy(kafka_cluster)
    finally:
        writer.close()


# -- fuzzing -------------------------------------------------------------------------

_VALID = [
    encode_request(MetadataRequest(topics=None), 12, 1, "fz"),
    encode_request(ApiVersionsRequest(client_software_name="a", client_software_version="1"), 3, 2, "fz"),
    encode_request(
        FetchRequest(
            max_wait_ms=0,
            topics=[
                FetchRequest.FetchTopic(
                    topic="t",
                    partitions=[
                        FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1000)
                    ],
                )
            ],
        ),
        12,
        3,
        "fz",
    ),
    encode_request(
        ProduceRequest(
            acks=1,
            timeout_ms=100,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name="t",
                    partition_data=[
                        ProduceRequest.PartitionProduceData(
                            index=0, records=encode_batch([(1, b"k", b"v", [])])
                        )
                    ],
                )
            ],
        ),
        9,
        4,
        "fz",
    ),
]


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["random", "mutated", "header"]))
    if kind == "random":
        body = draw(st.binary(max_size=300))
        return struct.pack(">i", len(body)) + body
    if kind == "header":
        key = draw(st.integers(-2, 80))
        ver = draw(st.integers(-1, 20))
        rest = draw(st.binary(max_size=200))
        body = struct.pack(">hhi", key, ver, 9) + rest
        return struct.pack(">i", len(body)) + body
    frame = bytearray(draw(st.sampled_from(_VALID)))
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(4, len(frame) - 1))
        op = draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        if op == "flip":
            frame[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            frame[pos] = draw(st.integers(0, 255))
        elif op == "cut" and len(frame) > 10:
            del frame[pos]
        else:
            frame.insert(pos, draw(st.integers(0, 255)))
    frame[0:4] = struct.pack(">i", len(frame) - 4)
    return bytes(frame)


def broker_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the broker logged at ERROR: a handler that raised (answered UNKNOWN_SERVER_ERROR),
    a response it could not encode, or a connection task that crashed."""
    return [
        f"{r.getMessage()}: {r.exc_info[1]!r}" if r.exc_info else r.getMessage()
        for r in caplog.records
        if r.name.startswith("aiokafka_lite.broker") and r.levelno >= logging.ERROR
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(frames(), min_size=1, max_size=4))
async def test_fuzz_request_path(
    kafka_cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture, batch: list[bytes]
) -> None:
    caplog.set_level(logging.ERROR, logger="aiokafka_lite.broker")
    caplog.clear()  # one example's log; the fixture lives across examples
    if "t" not in kafka_cluster.state.topics:
        kafka_cluster.create_topic("t", 1)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        await c.send_raw(b"".join(batch))
        c.writer.write_eof()  # nothing more comes: the broker answers what it can, then closes
        # Answers, then the broker's close (or a stall on a frame it still waits for).
        try:
            while True:
                await c.read_frame(within=0.5)
        except (KafkaConnectionError, ConnectionError, TimeoutError):
            pass
    # The broker stays healthy, and no handler crashed into UNKNOWN_SERVER_ERROR on the way:
    # bad input must be rejected with a protocol error or a closed connection, never a crash.
    assert await healthy(kafka_cluster)
    assert broker_errors(caplog) == [], batch
