"""Helpers for the consumer tests: raw produce through our Client (no producer needed)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from aiokafka_lite.consume import Consumer, Record
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.errors import error_for
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.wire.messages.produce_request import ProduceRequest
from aiokafka_lite.wire.messages.produce_response import ProduceResponse
from aiokafka_lite.wire.primitives import ZERO_UUID
from aiokafka_lite.wire.records import Compression, encode_batch

KV = tuple[bytes | None, bytes | None]
R = TypeVar("R")


# Errors with which a broker refuses a produce without appending anything, so sending the
# batch again cannot duplicate it. A real Kafka answers NOT_LEADER_OR_FOLLOWER for a moment
# after a topic is created (its metadata names the leader before the replica serves it).
_NOT_APPENDED = (E.NotLeaderOrFollowerError, E.UnknownTopicOrPartitionError, E.LeaderNotAvailableError)


async def produce_raw(
    client: Client,
    tp: TopicPartition,
    records: Sequence[KV],
    *,
    compression: Compression = Compression.NONE,
    timestamp: int | None = None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> int:
    """Append one batch of ``records`` to ``tp``; returns its base offset."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    batch = encode_batch(
        [(ts + i, k, v, list(headers)) for i, (k, v) in enumerate(records)], compression=compression
    )

    async def attempt() -> int:
        await client.wait_for_topic(tp.topic, 10000)
        leader, _ = await client.leader_for(tp, 10000)
        topic_id = client.cluster.topic_id(tp.topic) or ZERO_UUID
        req = ProduceRequest(
            acks=-1,
            timeout_ms=10000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=tp.topic,
                    topic_id=topic_id,
                    partition_data=[ProduceRequest.PartitionProduceData(index=tp.partition, records=batch)],
                )
            ],
        )
        resp = await client.send(req, node_id=leader)
        assert isinstance(resp, ProduceResponse)
        p = resp.responses[0].partition_responses[0]
        if p.error_code:
            raise error_for(p.error_code, "produce_raw")
        return int(p.base_offset)

    async with asyncio.timeout(30):
        while True:
            try:
                return await attempt()
            except _NOT_APPENDED:
                await asyncio.sleep(0.05)
                await client.refresh_metadata([tp.topic])


async def produce_values(
    client: Client, tp: TopicPartition, values: Sequence[bytes], batch: int = 100
) -> None:
    for i in range(0, len(values), batch):
        await produce_raw(client, tp, [(None, v) for v in values[i : i + batch]])


async def fill(bootstrap: str, counts: dict[TopicPartition, int], batch: int = 10) -> None:
    """Produce ``n`` values ``b"<topic>-<partition>-<offset>"`` to each partition (from empty)."""
    async with Client(bootstrap) as client:
        for tp, n in counts.items():
            values = [b"%s-%d-%d" % (tp.topic.encode(), tp.partition, i) for i in range(n)]
            await produce_values(client, tp, values, batch)


async def take(consumer: Consumer, n: int, limit_s: float = 10) -> list[Record]:
    """The next ``n`` records from ``async for`` (fails after ``limit_s``)."""
    out: list[Record] = []
    async with asyncio.timeout(limit_s):
        async for rec in consumer:
            out.append(rec)
            if len(out) == n:
                break
    return out


@dataclass(frozen=True)
class Sent(Generic[R]):
    """A request as the client handed it to ``Client.send``."""

    node_id: int | None
    version: int | None
    request: R


@contextlib.contextmanager
def sent_requests(client: Client, kind: type[R]) -> Iterator[list[Sent[R]]]:
    """Records the ``kind`` requests that ``client`` sends, on the client's side, so that a
    test can check what the consumer asked for against any broker (the embedded broker's
    ``record_requests`` sees the same requests from the other end)."""
    seen: list[Sent[R]] = []
    send = client.send

    async def recording_send(request: Any, **kwargs: Any) -> Any:
        if isinstance(request, kind):
            seen.append(Sent(kwargs.get("node_id"), kwargs.get("version"), request))
        return await send(request, **kwargs)

    client.send = recording_send  # type: ignore[method-assign]  # shadows the method on this instance
    try:
        yield seen
    finally:
        del client.send
