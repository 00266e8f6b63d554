"""The "consumer" embedded protocol: what members put in JoinGroup/SyncGroup bytes.

The classic group protocol treats member metadata and assignments as opaque bytes; for
``protocol_type="consumer"`` they are ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` prefixed by an int16 version. Java, librdkafka and
kafka-python all speak it, so a mixed group works as long as every member reads the
versions the others write:

* a newer version than we know is read with our highest version and trailing bytes are
  ignored (later versions only append fields), as Kafka's own reader does;
* the leader answers each member with an assignment no newer than the subscription
  version that member sent, so an old client is never sent a layout it cannot read.

Everything here is pure (no I/O) and shared by the state machine and the leader.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from aiokafka_lite.consume.groups.assignors import Assignor, MemberSubscription
from aiokafka_lite.core.errors import CorruptFrameError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from aiokafka_lite.wire.primitives import Reader

__all__ = [
    "ASSIGNMENT_VERSION",
    "PROTOCOL_TYPE",
    "SUBSCRIPTION_VERSION",
    "DecodedSubscription",
    "JoinedMember",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "group_by_topic",
    "run_assignor",
]

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.MAX_VERSION
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.MAX_VERSION

_VERSION = struct.Struct(">h")


def group_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """``{topic: sorted partitions}`` in topic order: the layout both messages use."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return {t: sorted(by_topic[t]) for t in sorted(by_topic)}


# ------------------------------------------------------------------------------ subscription


def encode_subscription(
    topics: Iterable[str],
    *,
    user_data: bytes | None = None,
    owned: Iterable[TopicPartition] = (),
    generation: int = -1,
    rack: str | None = None,
    version: int = SUBSCRIPTION_VERSION,
) -> bytes:
    """Version-prefixed ``ConsumerProtocolSubscription`` (fields a version lacks are dropped)."""
    msg = ConsumerProtocolSubscription(
        topics=sorted(set(topics)),
        user_data=user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
            for t, ps in group_by_topic(owned).items()
        ],
        generation_id=generation,
        rack_id=rack or None,
    )
    return _VERSION.pack(version) + msg.encode(version)


@dataclass(slots=True)
class DecodedSubscription:
    """A member's subscription plus the version it was written with."""

    version: int
    topics: list[str]
    user_data: bytes | None
    owned_partitions: list[TopicPartition]
    generation: int
    rack: str | None


def _read_version(data: bytes | bytearray | memoryview, what: str) -> tuple[int, Reader]:
    r = Reader(data)
    if r.remaining() < 2:
        raise CorruptFrameError(f"{what}: {r.remaining()} bytes, no version")
    version = r.int16()
    if version < 0:
        raise CorruptFrameError(f"{what}: negative version {version}")
    return version, r


def decode_subscription(data: bytes | bytearray | memoryview) -> DecodedSubscription:
    """Decode a member's metadata; newer versions are read as our newest, tail ignored.

    Raises ``CorruptFrameError`` on malformed bytes.
    """
    version, r = _read_version(data, "ConsumerProtocolSubscription")
    msg = ConsumerProtocolSubscription.decode_from(r, min(version, SUBSCRIPTION_VERSION), strict=False)
    owned = [TopicPartition(t.topic, p) for t in msg.owned_partitions for p in t.partitions]
    return DecodedSubscription(
        version=version,
        topics=list(msg.topics),
        user_data=None if msg.user_data is None else bytes(msg.user_data),
        owned_partitions=owned,
        generation=msg.generation_id,
        rack=msg.rack_id,
    )


# ------------------------------------------------------------------------------ assignment


def encode_assignment(
    partitions: Iterable[TopicPartition],
    *,
    user_data: bytes | None = None,
    version: int = ASSIGNMENT_VERSION,
) -> bytes:
    """Version-prefixed ``ConsumerProtocolAssignment``."""
    version = max(0, min(version, ASSIGNMENT_VERSION))
    msg = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
            for t, ps in group_by_topic(partitions).items()
        ],
        user_data=user_data,
    )
    return _VERSION.pack(version) + msg.encode(version)


def decode_assignment(data: bytes | bytearray | memoryview) -> tuple[list[TopicPartition], bytes | None]:
    """``(partitions, user_data)``; empty bytes mean "nothing assigned" (what brokers
    send to a member the leader left out). Raises ``CorruptFrameError`` when malformed."""
    if len(data) == 0:
        return [], None
    version, r = _read_version(data, "ConsumerProtocolAssignment")
    msg = ConsumerProtocolAssignment.decode_from(r, min(version, ASSIGNMENT_VERSION), strict=False)
    tps = [TopicPartition(t.topic, p) for t in msg.assigned_partitions for p in t.partitions]
    return tps, None if msg.user_data is None else bytes(msg.user_data)


# ------------------------------------------------------------------------------ leader


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One entry of a JoinGroup response's member list (leader only)."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


def run_assignor(
    assignor: Assignor,
    members: Sequence[JoinedMember],
    partitions_per_topic: Mapping[str, int],
    partition_racks: Mapping[TopicPartition, set[str]] | None = None,
) -> dict[str, bytes]:
    """Leader side: decode every member's subscription, run ``assignor``, encode the result.

    A member whose metadata cannot be decoded is kept in the group with no topics (and so
    no partitions) rather than failing the whole rebalance; the error is logged. Each
    member's assignment is encoded at most at the version of the subscription it sent.
    """
    subs: dict[str, MemberSubscription] = {}
    versions: dict[str, int] = {}
    for m in members:
        try:
            d = decode_subscription(m.metadata)
        except CorruptFrameError as exc:
            log.warning(
                "member %s sent an unreadable subscription (%s); assigning it nothing", m.member_id, exc
            )
            subs[m.member_id] = MemberSubscription(m.member_id, [], group_instance_id=m.group_instance_id)
            versions[m.member_id] = 0
            continue
        subs[m.member_id] = MemberSubscription(
            member_id=m.member_id,
            topics=d.topics,
            owned_partitions=d.owned_partitions,
            generation=d.generation,
            rack=d.rack,
            user_data=d.user_data,
            group_instance_id=m.group_instance_id,
        )
        versions[m.member_id] = d.version
    racks = {tp: set(r) for tp, r in partition_racks.items()} if partition_racks else None
    result = assignor.assign(subs, dict(partitions_per_topic), racks)
    out: dict[str, bytes] = {}
    for member_id in subs:
        out[member_id] = encode_assignment(result.get(member_id, []), version=versions[member_id])
    unknown = set(result) - set(subs)
    if unknown:
        log.warning("assignor %s returned unknown members %s; ignored", assignor.name, sorted(unknown))
    return out
