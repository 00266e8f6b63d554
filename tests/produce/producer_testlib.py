"""Helpers for producer integration tests: read partitions back over the wire."""

from __future__ import annotations

import asyncio

from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.wire.messages import FetchRequest, FetchResponse
from aiokafka_lite.wire.records import Record, decode_batches


async def read_partition(
    client: Client, topic: str, partition: int, *, until: int | None = None
) -> list[Record]:
    """Every record of ``topic``/``partition`` from offset 0 to the high watermark, fetched
    from the partition leader with Fetch v12 (topic names), as a plain consumer would."""
    tp = TopicPartition(topic, partition)
    out: list[Record] = []
    offset = 0
    for _ in range(100000):
        leader, _epoch = await client.leader_for(tp, timeout_ms=10000)
        req = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=16 * 1024 * 1024,
            isolation_level=0,
            topics=[
                FetchRequest.FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=8 * 1024 * 1024
                        )
                    ],
                )
            ],
        )
        resp = await client.send(
            req, node_id=leader, version=min(12, await client.negotiated_version(leader, 1))
        )
        assert isinstance(resp, FetchResponse)
        pdata = resp.responses[0].partitions[0]
        if pdata.error_code:
            client.request_metadata_refresh()
            await asyncio.sleep(0.05)
            continue
        hw = pdata.high_watermark
        for batch in decode_batches(pdata.records or b""):
            for rec in batch.records():
                if rec.offset >= offset:
                    out.append(rec)
            offset = max(offset, batch.next_offset)
        target = hw if until is None else until
        if offset >= target:
            return out
    raise AssertionError("read_partition did not finish")


async def read_topic(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Record]]:
    async with Client(bootstrap) as client:
        return {p: await read_partition(client, topic, p) for p in range(partitions)}
