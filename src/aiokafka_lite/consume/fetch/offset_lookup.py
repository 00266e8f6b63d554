"""Offset lookups: ListOffsets (reset, seek_to_*, offsets_for_times) and
OffsetForLeaderEpoch (KIP-320 position validation).

Requests go to each partition's leader, all leaders concurrently; retriable errors
(leader moved, leader not available, connection lost) refresh metadata and retry the
affected partitions until the deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages.list_offsets_request import ListOffsetsRequest
from aiokafka_lite.wire.messages.list_offsets_response import ListOffsetsResponse
from aiokafka_lite.wire.messages.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from aiokafka_lite.wire.messages.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse

if TYPE_CHECKING:
    from aiokafka_lite.net import Client

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "EpochEndOffset",
    "OffsetAndTimestamp",
    "list_offsets",
    "offsets_for_leader_epochs",
]

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
_CONSUMER_REPLICA_ID = -1

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """Result of a ListOffsets lookup: offset, its record timestamp, its leader epoch."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """Result of OffsetForLeaderEpoch: the largest epoch <= the asked one and its end offset."""

    leader_epoch: int
    end_offset: int


async def _by_leader(
    client: Client,
    tps: list[TopicPartition],
    deadline: float,
    send_one: Callable[[int, list[TopicPartition]], Awaitable[dict[TopicPartition, T]]],
    what: str,
) -> dict[TopicPartition, T]:
    """Run ``send_one(leader, partitions)`` per leader, retrying the partitions it leaves out."""
    loop = _backend.loop()
    results: dict[TopicPartition, T] = {}
    pending = list(dict.fromkeys(tps))
    attempt = 0
    last_error: BaseException | None = None
    while pending:
        remaining_ms = (deadline - loop.time()) * 1000
        if remaining_ms <= 0:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in pending[:5])
            raise E.KafkaTimeoutError(f"{what} for {names} did not complete: {last_error}") from last_error
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in pending:
            try:
                leader, _ = await client.leader_for(tp, timeout_ms=remaining_ms)
            except E.KafkaError as exc:
                if not exc.retriable:
                    raise
                last_error = exc
                continue
            by_leader.setdefault(leader, []).append(tp)
        outcomes = await _backend.gather(
            *(send_one(node, part) for node, part in by_leader.items()), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                if isinstance(outcome, E.KafkaError) and outcome.retriable:
                    last_error = outcome
                    client.request_metadata_refresh()
                    continue
                raise outcome
            results.update(outcome)
        pending = [tp for tp in pending if tp not in results]
        if pending:
            delay = min(0.05 * (2**attempt), 1.0)
            attempt += 1
            await _backend.sleep(min(delay, max(deadline - loop.time(), 0)))
            # Bounded by the backoff, not the deadline: a new leader that refused us a
            # moment before taking the partition is still the leader to ask.
            try:
                await client.refresh_before_retry({tp.topic for tp in pending}, delay, deadline)
            except E.KafkaError as exc:
                last_error = exc
    return results


async def list_offsets(
    client: Client,
    timestamps: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    timeout_ms: float = 60000,
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """ListOffsets for each partition; ``None`` when no offset matches (timestamp too new).

    Timestamps: ``EARLIEST`` (-2), ``LATEST`` (-1, the last stable offset with
    isolation level 1), ``MAX_TIMESTAMP`` (-3), or a time in ms.
    """
    loop = _backend.loop()
    deadline = loop.time() + timeout_ms / 1000

    async def send_one(
        node: int, tps: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        cluster = client.cluster
        topics: dict[str, ListOffsetsRequest.ListOffsetsTopic] = {}
        for tp in tps:
            t = topics.setdefault(tp.topic, ListOffsetsRequest.ListOffsetsTopic(name=tp.topic))
            t.partitions.append(
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition,
                    current_leader_epoch=cluster.leader_epoch(tp),
                    timestamp=timestamps[tp],
                )
            )
        req = ListOffsetsRequest(
            replica_id=_CONSUMER_REPLICA_ID, isolation_level=isolation_level, topics=list(topics.values())
        )
        version = await client.negotiated_version(
            node, ListOffsetsRequest.API_KEY, timeout_ms=max((deadline - loop.time()) * 1000, 1)
        )
        if version < 7 and any(timestamps[tp] == MAX_TIMESTAMP for tp in tps):
            raise E.UnsupportedVersionError("ListOffsets with MAX_TIMESTAMP needs a broker supporting v7+")
        resp = await client.send(
            req, node_id=node, version=version, timeout_ms=max((deadline - loop.time()) * 1000, 1)
        )
        assert isinstance(resp, ListOffsetsResponse)
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for rt in resp.topics:
            for rp in rt.partitions:
                tp = TopicPartition(rt.name, rp.partition_index)
                if tp not in timestamps:
                    continue
                if rp.error_code:
                    err = E.error_for(rp.error_code, f"ListOffsets {tp.topic}-{tp.partition}")
                    if err.retriable or err.invalidates_metadata:
                        log.debug("ListOffsets %s-%s: %s; retrying", tp.topic, tp.partition, err)
                        client.request_metadata_refresh()
                        continue
                    raise err
                if rp.offset < 0:
                    out[tp] = None
                else:
                    epoch = rp.leader_epoch if rp.leader_epoch >= 0 else None
                    out[tp] = OffsetAndTimestamp(rp.offset, rp.timestamp, epoch)
        return out

    return await _by_leader(client, list(timestamps), deadline, send_one, "ListOffsets")


async def offsets_for_leader_epochs(
    client: Client,
    epochs: Mapping[TopicPartition, tuple[int, int]],
    *,
    timeout_ms: float = 30000,
) -> dict[TopicPartition, EpochEndOffset]:
    """OffsetForLeaderEpoch: ``epochs`` maps a partition to (current leader epoch, epoch to look up)."""
    loop = _backend.loop()
    deadline = loop.time() + timeout_ms / 1000

    async def send_one(node: int, tps: list[TopicPartition]) -> dict[TopicPartition, EpochEndOffset]:
        cluster = client.cluster
        topics: dict[str, OffsetForLeaderEpochRequest.OffsetForLeaderTopic] = {}
        for tp in tps:
            _, epoch = epochs[tp]
            t = topics.setdefault(tp.topic, OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=tp.topic))
            t.partitions.append(
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=tp.partition,
                    # The epoch we believe current now (metadata may be newer than at request time).
                    current_leader_epoch=max(cluster.leader_epoch(tp), epochs[tp][0]),
                    leader_epoch=epoch,
                )
            )
        req = OffsetForLeaderEpochRequest(replica_id=_CONSUMER_REPLICA_ID, topics=list(topics.values()))
        resp = await client.send(req, node_id=node, timeout_ms=max((deadline - loop.time()) * 1000, 1))
        assert isinstance(resp, OffsetForLeaderEpochResponse)
        out: dict[TopicPartition, EpochEndOffset] = {}
        for rt in resp.topics:
            for rp in rt.partitions:
                tp = TopicPartition(rt.topic, rp.partition)
                if tp not in epochs:
                    continue
                if rp.error_code:
                    err = E.error_for(rp.error_code, f"OffsetForLeaderEpoch {tp.topic}-{tp.partition}")
                    if err.retriable or err.invalidates_metadata or rp.error_code in (74, 75):
                        client.request_metadata_refresh()
                        continue
                    raise err
                out[tp] = EpochEndOffset(rp.leader_epoch, rp.end_offset)
        return out

    return await _by_leader(client, list(epochs), deadline, send_one, "OffsetForLeaderEpoch")
