"""The group's committed offsets on the wire: OffsetCommit and OffsetFetch, built and read.

Pure functions (no I/O): the group coordinator (``coordinator.GroupCoordinator``) picks
the coordinator node and the version, sends, and retries; what goes into a request and
what an answer means for each partition is here. Topic ids are used from the versions
that carry them (OffsetCommit v10+, OffsetFetch v10+) when every topic's id is known,
names otherwise.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from aiokafka_lite.consume.subscription import OffsetAndMetadata
from aiokafka_lite.core.errors import IllegalStateError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

__all__ = [
    "ZERO_UUID",
    "commit_request",
    "first_commit_error",
    "normalize_offsets",
    "offset_fetch_request",
    "read_offset_fetch",
    "usable_version",
]

ZERO_UUID = uuid.UUID(int=0)
#: The first version of OffsetCommit and OffsetFetch that names topics by id.
_TOPIC_ID_VERSION = 10
_UNKNOWN_TOPIC_OR_PARTITION = 3


def usable_version(version: int, topic_ids: Mapping[str, uuid.UUID]) -> int:
    """``version``, or 9 (names) when it would need a topic id the metadata lacks."""
    if version >= _TOPIC_ID_VERSION and any(i == ZERO_UUID for i in topic_ids.values()):
        return _TOPIC_ID_VERSION - 1
    return version


def commit_request(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    generation: int,
    member_id: str,
    instance_id: str | None,
    version: int,
    topic_ids: Mapping[str, uuid.UUID],
) -> OffsetCommitRequest:
    """An OffsetCommit of ``offsets`` for ``version`` (``usable_version``'s answer);
    ``generation`` is the generation (classic) or the member epoch (KIP-848)."""
    by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for tp in sorted(offsets):
        om = offsets[tp]
        by_topic.setdefault(tp.topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    with_ids = version >= _TOPIC_ID_VERSION
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=t, topic_id=topic_ids.get(t, ZERO_UUID) if with_ids else ZERO_UUID, partitions=parts
            )
            for t, parts in by_topic.items()
        ],
    )


def first_commit_error(resp: OffsetCommitResponse) -> int:
    """The first partition error of an OffsetCommit answer (0: every offset committed)."""
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                return p.error_code
    return 0


def offset_fetch_request(
    group_id: str, tps: Iterable[TopicPartition], version: int, topic_ids: Mapping[str, uuid.UUID]
) -> OffsetFetchRequest:
    """An OffsetFetch of ``tps`` with require_stable (KIP-447, v7+) for ``version``."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if version >= 8:
        with_ids = version >= _TOPIC_ID_VERSION
        return OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group_id,
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(
                            name=t, topic_id=topic_ids[t] if with_ids else ZERO_UUID, partition_indexes=ps
                        )
                        for t, ps in by_topic.items()
                    ],
                )
            ],
            require_stable=True,
        )
    return OffsetFetchRequest(
        group_id=group_id,
        topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in by_topic.items()
        ],
        require_stable=version >= 7,
    )


def read_offset_fetch(
    resp: OffsetFetchResponse, version: int, tps: Iterable[TopicPartition], topic_ids: Mapping[str, uuid.UUID]
) -> tuple[dict[TopicPartition, OffsetAndMetadata | None], int, list[TopicPartition]]:
    """The committed offsets of ``tps`` in an OffsetFetch answer (None where nothing is
    committed), the first (group or partition) error code, and the partitions the broker
    called unknown (left None)."""
    names = {i: t for t, i in topic_ids.items()}
    result: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in tps}
    first_error = 0
    unknown: list[TopicPartition] = []
    parts: list[tuple[str, int, int, int, str | None, int]] = []
    if version >= 8:
        for group in resp.groups:
            if group.error_code and not first_error:
                first_error = group.error_code
            for t in group.topics:
                name = t.name or names.get(t.topic_id, "")
                for p in t.partitions:
                    parts.append(
                        (
                            name,
                            p.partition_index,
                            p.committed_offset,
                            p.committed_leader_epoch,
                            p.metadata,
                            p.error_code,
                        )
                    )
    else:
        if resp.error_code:
            first_error = resp.error_code
        for old in resp.topics:
            for op in old.partitions:
                parts.append(
                    (
                        old.name,
                        op.partition_index,
                        op.committed_offset,
                        op.committed_leader_epoch,
                        op.metadata,
                        op.error_code,
                    )
                )
    for topic, partition, offset, epoch, metadata, code in parts:
        tp = TopicPartition(topic, partition)
        if tp not in result:
            continue
        if code == _UNKNOWN_TOPIC_OR_PARTITION:
            unknown.append(tp)
            continue
        if code:
            if not first_error:
                first_error = code
            continue
        if offset >= 0:
            result[tp] = OffsetAndMetadata(offset, metadata or "", None if epoch < 0 else epoch)
    return result, first_error, unknown


def normalize_offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int | tuple[int, str]],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """What ``commit(offsets)`` accepts (an offset, ``(offset, metadata)`` or
    ``OffsetAndMetadata`` per partition), checked and made ``OffsetAndMetadata``."""
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, value in offsets.items():
        if not isinstance(tp, tuple) or len(tp) != 2:
            raise IllegalStateError(f"commit: expected TopicPartition keys, got {tp!r}")
        tp = TopicPartition(tp[0], tp[1])
        if isinstance(value, OffsetAndMetadata):
            om = value
        elif isinstance(value, int) and not isinstance(value, bool):
            om = OffsetAndMetadata(value)
        elif isinstance(value, tuple) and len(value) == 2:
            om = OffsetAndMetadata(int(value[0]), str(value[1]))
        else:
            raise IllegalStateError(f"commit: invalid offset {value!r} for {tp}")
        if om.offset < 0:
            raise IllegalStateError(f"commit: negative offset {om.offset} for {tp}")
        out[tp] = om
    return out
