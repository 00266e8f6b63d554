"""Legacy ``user_data`` formats used by the sticky assignors.

Before subscriptions carried ``owned_partitions`` (v1, KIP-429) and ``generation``
(v2, KIP-792), the sticky assignors smuggled that information through the opaque
``user_data`` bytes. Members of other clients still send (and may rely on) them, so we
read and write the same layouts:

* ``sticky`` — StickyAssignorUserData, classic (non-flexible) Kafka encoding, all
  integers big-endian::

      v0: int32 topic_count, then per topic:
              int16 name_len, name (UTF-8), int32 partition_count, int32 partition...
      v1: v0 followed by int32 generation            (KIP-341)

* ``cooperative-sticky`` — a bare int32 generation (owned partitions travel in the
  subscription itself).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "StickyUserData",
    "decode_cooperative_generation",
    "decode_sticky_user_data",
    "encode_cooperative_generation",
    "encode_sticky_user_data",
]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class StickyUserData:
    """Decoded StickyAssignorUserData: previously owned partitions + generation.

    ``generation`` is -1 for v0 data, which carried no generation.
    """

    partitions: list[TopicPartition]
    generation: int = -1


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """Encode StickyAssignorUserData: v1 when ``generation`` is given, else v0."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_INT32.pack(len(by_topic)))
    for topic in sorted(by_topic):
        name = topic.encode("utf-8")
        out += _INT16.pack(len(name))
        out += name
        parts = sorted(by_topic[topic])
        out += _INT32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
    if generation is not None:
        out += _INT32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> StickyUserData:
    """Decode StickyAssignorUserData v0 or v1.

    The version is not written on the wire: v1 is v0 plus a trailing int32, so the
    remaining length after the topic array tells them apart.

    Raises ``ValueError`` on malformed input.
    """
    view = memoryview(data)
    pos = 0

    def take(n: int) -> memoryview:
        nonlocal pos
        if n < 0 or pos + n > len(view):
            raise ValueError("truncated StickyAssignorUserData")
        chunk = view[pos : pos + n]
        pos += n
        return chunk

    (topic_count,) = _INT32.unpack(take(4))
    if topic_count < 0:
        raise ValueError("negative topic count in StickyAssignorUserData")
    partitions: list[TopicPartition] = []
    for _ in range(topic_count):
        (name_len,) = _INT16.unpack(take(2))
        if name_len < 0:
            raise ValueError("null topic name in StickyAssignorUserData")
        try:
            topic = bytes(take(name_len)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError("invalid topic name in StickyAssignorUserData") from exc
        (count,) = _INT32.unpack(take(4))
        if count < 0:
            raise ValueError("negative partition count in StickyAssignorUserData")
        values = struct.unpack(f">{count}i", take(4 * count))
        partitions.extend(TopicPartition(topic, p) for p in values)
    remaining = len(view) - pos
    if remaining == 0:
        return StickyUserData(partitions, -1)
    if remaining == 4:
        (generation,) = _INT32.unpack(take(4))
        return StickyUserData(partitions, generation)
    raise ValueError(f"{remaining} trailing bytes in StickyAssignorUserData")


def encode_cooperative_generation(generation: int) -> bytes:
    """Encode the cooperative-sticky user data: a bare int32 generation."""
    return _INT32.pack(generation)


def decode_cooperative_generation(data: bytes) -> int:
    """Decode the cooperative-sticky user data. Raises ``ValueError`` if not 4 bytes."""
    if len(data) != 4:
        raise ValueError(f"cooperative-sticky user data must be 4 bytes, got {len(data)}")
    (generation,) = _INT32.unpack(data)
    return int(generation)
