"""Partition operations of the admin client, sent to each partition's leader:
``list_offsets`` (by spec or timestamp) and ``delete_records``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from aiokafka_lite.admin.requests import AdminRequests, Outcome, error_of, results
from aiokafka_lite.admin.types import (
    DeleteRecordsResult,
    ListOffsetsResult,
    OffsetSpec,
    Results,
)
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

__all__ = ["delete_records", "list_offsets"]

_OFFSET_SPECS: Final = {
    "earliest": OffsetSpec.EARLIEST,
    "latest": OffsetSpec.LATEST,
    "max_timestamp": OffsetSpec.MAX_TIMESTAMP,
}


async def list_offsets(
    rq: AdminRequests,
    specs: Mapping[TopicPartition, OffsetSpec | int | str],
    *,
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
    timeout_ms: float | None = None,
) -> Results[TopicPartition, ListOffsetsResult]:
    """Offsets by spec: ``"earliest"``/``"latest"``/``"max_timestamp"``, an
    ``OffsetSpec``, or a timestamp in ms (first offset with a timestamp >= it)."""
    norm: dict[TopicPartition, int] = {}
    for tp, spec in specs.items():
        if isinstance(spec, str):
            try:
                norm[tp] = int(_OFFSET_SPECS[spec.lower()])
            except KeyError:
                raise E.ConfigError(f"unknown offset spec {spec!r}") from None
        else:
            norm[tp] = int(spec)
    iso = 1 if isolation_level == "read_committed" else 0
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Outcome]:
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in sorted(batch):
            by_topic.setdefault(tp.topic, []).append(tp)
        cluster = rq.client.cluster

        def make(version: int) -> Request:
            return ListOffsetsRequest(
                replica_id=-1,
                isolation_level=iso if version >= 2 else 0,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(
                                partition_index=tp.partition,
                                current_leader_epoch=cluster.leader_epoch(tp) if version >= 4 else -1,
                                timestamp=norm[tp],
                            )
                            for tp in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
                timeout_ms=int(rq.remaining_ms(deadline)) if version >= 10 else 0,
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, ListOffsetsResponse)
        out: dict[TopicPartition, Outcome] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                err = error_of(p.error_code)
                if err is not None:
                    out[tp] = err
                else:
                    out[tp] = ListOffsetsResult(p.offset, p.timestamp, p.leader_epoch)
        return out

    outcomes = await rq.by_leader(list(norm), send, deadline)
    return results(norm, outcomes, lambda tp, e: ListOffsetsResult(error=e))


async def delete_records(
    rq: AdminRequests, before: Mapping[TopicPartition, int], *, timeout_ms: float | None = None
) -> Results[TopicPartition, DeleteRecordsResult]:
    """Delete records below ``before[tp]`` (-1: up to the high watermark)."""
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Outcome]:
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in sorted(batch):
            by_topic.setdefault(tp.topic, []).append(tp)

        def make(version: int) -> Request:
            return DeleteRecordsRequest(
                topics=[
                    DeleteRecordsRequest.DeleteRecordsTopic(
                        name=topic,
                        partitions=[
                            DeleteRecordsRequest.DeleteRecordsPartition(
                                partition_index=tp.partition, offset=before[tp]
                            )
                            for tp in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
                timeout_ms=int(rq.remaining_ms(deadline)),
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, DeleteRecordsResponse)
        out: dict[TopicPartition, Outcome] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                out[tp] = error_of(p.error_code) or DeleteRecordsResult(p.low_watermark)
        return out

    outcomes = await rq.by_leader(list(before), send, deadline)
    return results(before, outcomes, lambda tp, e: DeleteRecordsResult(error=e))
