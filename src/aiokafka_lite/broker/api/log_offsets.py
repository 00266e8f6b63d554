"""ListOffsets, OffsetForLeaderEpoch, DeleteRecords."""

from __future__ import annotations

from typing import Final

from aiokafka_lite.broker.api.common import check_leader
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.core.errors import (
    InvalidRequestError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

__all__ = ["register"]

LATEST: Final = -1
EARLIEST: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL: Final = -4
LATEST_TIERED: Final = -5
EARLIEST_PENDING_UPLOAD: Final = -6
READ_COMMITTED: Final = 1


def register(registry: HandlerRegistry) -> None:
    registry.register(
        ListOffsetsRequest.API_KEY,
        list_offsets,
        ListOffsetsRequest.MIN_VERSION,
        ListOffsetsRequest.MAX_VERSION,
    )
    registry.register(
        OffsetForLeaderEpochRequest.API_KEY,
        offset_for_leader_epoch,
        OffsetForLeaderEpochRequest.MIN_VERSION,
        OffsetForLeaderEpochRequest.MAX_VERSION,
    )
    registry.register(DeleteRecordsRequest.API_KEY, delete_records, 0, DeleteRecordsRequest.MAX_VERSION)


async def list_offsets(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, ListOffsetsRequest)
    state = ctx.cluster
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            pr = ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=rp.partition_index)
            parts.append(pr)
            p = state.get_partition(t.name, rp.partition_index)
            if p is None:
                pr.error_code = UnknownTopicOrPartitionError.code
                continue
            err = check_leader(ctx, p, rp.current_leader_epoch)
            if err:
                pr.error_code = err
                continue
            plog = p.log
            ts = rp.timestamp
            if ctx.api_version >= 4:
                pr.leader_epoch = p.leader_epoch
            if ts == LATEST:
                pr.offset = (
                    plog.last_stable_offset if req.isolation_level == READ_COMMITTED else plog.high_watermark
                )
            elif ts in (EARLIEST, EARLIEST_LOCAL):
                pr.offset = plog.log_start_offset
                if ctx.api_version >= 4:
                    pr.leader_epoch = plog.epoch_for_offset(pr.offset)
            elif ts == LATEST_TIERED:
                pr.offset = -1  # nothing is tiered
            elif ts == EARLIEST_PENDING_UPLOAD:
                pr.offset = -1
            elif ts == MAX_TIMESTAMP:
                # The (first) record carrying the largest timestamp (KIP-734).
                found = plog.offset_for_timestamp(plog.max_timestamp) if plog.max_timestamp >= 0 else None
                pr.offset, pr.timestamp = found if found is not None else (-1, -1)
            elif ts >= 0:
                found = plog.offset_for_timestamp(ts)
                if found is None:
                    pr.offset, pr.timestamp = -1, -1
                else:
                    pr.offset, pr.timestamp = found
                    if req.isolation_level == READ_COMMITTED and pr.offset >= plog.last_stable_offset:
                        pr.offset, pr.timestamp = -1, -1
            else:
                pr.error_code = InvalidRequestError.code
            if ctx.api_version >= 4 and ts not in (LATEST, EARLIEST, EARLIEST_LOCAL) and not pr.error_code:
                # A found offset carries the epoch it was written in; nothing found, none.
                pr.leader_epoch = plog.epoch_for_offset(pr.offset) if pr.offset >= 0 else -1
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(topics=topics)


async def offset_for_leader_epoch(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, OffsetForLeaderEpochRequest)
    state = ctx.cluster
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            er = OffsetForLeaderEpochResponse.EpochEndOffset(
                partition=rp.partition, leader_epoch=-1, end_offset=-1
            )
            parts.append(er)
            p = state.get_partition(t.topic, rp.partition)
            if p is None:
                er.error_code = UnknownTopicOrPartitionError.code
                continue
            err = check_leader(ctx, p, rp.current_leader_epoch)
            if err:
                er.error_code = err
                continue
            er.leader_epoch, er.end_offset = p.log.end_offset_for_epoch(rp.leader_epoch)
        topics.append(
            OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts)
        )
    return OffsetForLeaderEpochResponse(topics=topics)


async def delete_records(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DeleteRecordsRequest)
    state = ctx.cluster
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            pr = DeleteRecordsResponse.DeleteRecordsPartitionResult(
                partition_index=rp.partition_index, low_watermark=-1
            )
            parts.append(pr)
            p = state.get_partition(t.name, rp.partition_index)
            if p is None:
                pr.error_code = UnknownTopicOrPartitionError.code
                continue
            err = check_leader(ctx, p)
            if err:
                pr.error_code = err
                continue
            plog = p.log
            offset = plog.high_watermark if rp.offset == -1 else rp.offset
            if offset < 0 or offset > plog.high_watermark:
                pr.error_code = OffsetOutOfRangeError.code
                continue
            pr.low_watermark = plog.delete_records_before(offset)
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(topics=topics)
