"""ProducerConfig validation, Producer option routing, and per-record result handles."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite.core.errors import ConfigError, NotEnoughReplicasError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.produce import BatchResult, Producer, ProducerConfig, RecordFuture, RecordMetadata
from aiokafka_lite.produce.batch import ProducerBatch
from aiokafka_lite.wire.compression import Compression
from aiokafka_lite.wire.records import BatchBuilder

# -- config ------------------------------------------------------------------------------


def test_defaults_follow_java() -> None:
    cfg = ProducerConfig()
    assert cfg.acks_value == -1 and cfg.idempotent
    assert (cfg.linger_ms, cfg.batch_size, cfg.buffer_memory) == (5, 16384, 32 * 1024 * 1024)
    assert (cfg.max_request_size, cfg.max_block_ms, cfg.delivery_timeout_ms) == (1048576, 60000, 120000)
    assert cfg.max_in_flight_requests_per_connection == 5 and cfg.retries == 2**31 - 1
    assert cfg.codec is Compression.NONE
    docs = {row.name: row for row in ProducerConfig.describe()}
    assert all(row.doc for row in docs.values())


@pytest.mark.parametrize(("acks", "value"), [("all", -1), (-1, -1), ("-1", -1), (1, 1), ("1", 1), (0, 0)])
def test_acks_forms(acks: object, value: int) -> None:
    assert ProducerConfig(acks=acks, enable_idempotence=False).acks_value == value  # type: ignore[arg-type]


def test_idempotence_default_yields_to_conflicts_explicit_refuses() -> None:
    assert not ProducerConfig(acks=1).idempotent
    assert not ProducerConfig(max_in_flight_requests_per_connection=10).idempotent
    with pytest.raises(ConfigError, match="acks"):
        ProducerConfig(acks=1, enable_idempotence=True)
    with pytest.raises(ConfigError, match="max_in_flight"):
        ProducerConfig(max_in_flight_requests_per_connection=6, enable_idempotence=True)
    with pytest.raises(ConfigError, match="retries"):
        ProducerConfig(retries=0, enable_idempotence=True)


@pytest.mark.parametrize(
    "bad",
    [
        {"acks": 2},
        {"acks": True},
        {"compression": "brotli"},
        {"compression": "gzip", "compression_level": 12},
        {"linger_ms": -1},
        {"batch_size": 0},
        {"delivery_timeout_ms": 1000},  # < linger + request timeout
        {"partitioner": "murmur3"},
        {"key_serializer": "str"},
        {"retry_backoff_ms": 2000, "retry_backoff_max_ms": 1000},
    ],
)
def test_invalid_options(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ProducerConfig(**bad)  # type: ignore[arg-type]


def test_compression_names_and_levels() -> None:
    assert ProducerConfig(compression="LZ4").codec is Compression.LZ4
    assert ProducerConfig(compression="zstd", compression_level=19).codec is Compression.ZSTD
    assert ProducerConfig(compression=Compression.SNAPPY).codec is Compression.SNAPPY


def test_producer_routes_options_between_producer_and_client() -> None:
    p = Producer("127.0.0.1:1", client_id="svc", linger_ms=0, request_timeout_ms=5000)
    assert p.config.linger_ms == 0 and p.config.request_timeout_ms == 5000
    assert p.client.config.client_id == "svc" and p.client.config.request_timeout_ms == 5000
    with pytest.raises(ConfigError, match="lingr_ms"):
        Producer("127.0.0.1:1", lingr_ms=3)
    with pytest.raises(ConfigError, match="client="):
        Producer(client=Client("127.0.0.1:1"), client_id="x")
    with pytest.raises(ConfigError, match="bootstrap"):
        Producer()


# -- results -----------------------------------------------------------------------------

TP = TopicPartition("events", 3)


def make_batch(n: int) -> ProducerBatch:
    b = ProducerBatch(TP, BatchBuilder(max_batch_size=1 << 20), 1 << 20, 0, 0.0)
    assert b.builder is not None
    for i in range(n):
        b.builder.append(5000 + i, None, b"v", ())
        b.timestamps.append(5000 + i)
    return b


async def test_record_future_resolves_from_batch() -> None:
    b = make_batch(3)
    fut = RecordFuture(b, 2)
    assert not fut.done()
    with pytest.raises(asyncio.InvalidStateError):
        fut.result()
    seen: list[RecordFuture] = []
    fut.add_done_callback(seen.append)
    waiter = asyncio.ensure_future(fut)  # awaitable by asyncio machinery
    await asyncio.sleep(0)
    b.complete(100, -1)
    assert seen == []  # callbacks are scheduled, never run inside the completing code
    assert await waiter == RecordMetadata("events", 3, 102, 5002)
    await asyncio.sleep(0)
    assert fut.result().offset == 102 and fut.exception() is None and seen == [fut]


async def test_record_future_log_append_time_and_error() -> None:
    b = make_batch(2)
    b.complete(7, 99999)
    assert await RecordFuture(b, 1) == RecordMetadata("events", 3, 8, 99999)
    failed = make_batch(1)
    err = NotEnoughReplicasError("x")
    failed.fail(err)
    assert RecordFuture(failed, 0).exception() is err
    with pytest.raises(NotEnoughReplicasError):
        await RecordFuture(failed, 0)


async def test_cancelling_one_waiter_leaves_others() -> None:
    b = make_batch(1)
    w1 = asyncio.ensure_future(RecordFuture(b, 0))
    w2 = asyncio.ensure_future(RecordFuture(b, 0))
    await asyncio.sleep(0)
    w1.cancel()
    await asyncio.sleep(0)
    b.complete(1, -1)
    assert (await w2).offset == 1


async def test_batch_result_runs_and_lookup() -> None:
    b1, b2 = make_batch(5), make_batch(5)
    res = BatchResult()
    for i in range(5):
        res._add(b1, i)
    res._add(b2, 0)
    res._add(b1, 4)  # not consecutive: a new run
    res._add(b2, 1)
    assert len(res) == 8 and len(res._batches) == 4
    assert not res.done()
    b1.complete(10, -1)
    b2.complete(20, -1)
    assert res.done()
    assert await res is res
    assert [m.offset for m in res] == [10, 11, 12, 13, 14, 20, 14, 21]
    assert res[-1].offset == 21 and [m.offset for m in res[1:3]] == [11, 12]
    assert res.errors() == []
