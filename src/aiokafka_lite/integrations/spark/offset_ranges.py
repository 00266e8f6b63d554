"""Offsets and offset ranges for the Spark data source: pure logic, no Spark, no I/O.

Everything here is plain data (ints, strings, tuples, dicts) so it pickles to Spark's
Python workers and round-trips through Spark's JSON streaming checkpoints.

JSON formats (the same as Spark's built-in Kafka source)::

    {"events": {"0": 23, "1": -2}}      # per-partition offsets; -2 earliest, -1 latest
    {"events": {"0": 1700000000000}}    # per-partition timestamps (ms)

A streaming offset is the same mapping with concrete offsets only (the next offset to
read, per partition).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetRange",
    "OffsetSpec",
    "format_partition_json",
    "from_offset_dict",
    "limit_end_offsets",
    "parse_partition_json",
    "plan_ranges",
    "split_ranges",
    "to_offset_dict",
]

#: Sentinels in offset JSON, as in ListOffsets and Spark's Kafka source.
EARLIEST = -2
LATEST = -1

Offsets = dict[TopicPartition, int]


class OffsetRange(NamedTuple):
    """Records ``start <= offset < end`` of one partition: the work of one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        """Offsets covered (an upper bound on records: compaction, transaction markers)."""
        return self.end - self.start


# --------------------------------------------------------------------------------------
# JSON


def parse_partition_json(text: str, what: str) -> Offsets:
    """``{"topic": {"0": n, ...}, ...}`` -> ``{TopicPartition: n}``; ConfigError naming ``what``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what}: invalid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(data, dict):
        raise ConfigError(f'{what}: expected a JSON object like {{"topic": {{"0": 42}}}}, got {text!r}')
    return from_offset_dict(data, what)


def from_offset_dict(data: Mapping[str, Any], what: str = "offsets") -> Offsets:
    """A nested ``{topic: {partition: int}}`` mapping (keys as strings) -> ``{TopicPartition: int}``."""
    out: Offsets = {}
    for topic, parts in data.items():
        if not isinstance(topic, str) or not topic:
            raise ConfigError(f"{what}: topic names must be non-empty strings, got {topic!r}")
        if not isinstance(parts, dict):
            raise ConfigError(f"{what}: value for topic {topic!r} must be an object of partition -> number")
        for pkey, value in parts.items():
            try:
                partition = int(pkey)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"{what}: partition {pkey!r} of topic {topic!r} is not an integer"
                ) from None
            if partition < 0:
                raise ConfigError(f"{what}: negative partition {partition} for topic {topic!r}")
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{what}: value for {topic}-{partition} must be an integer, got {value!r}")
            out[TopicPartition(topic, partition)] = value
    return out


def to_offset_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition: int}`` -> JSON-ready nested dict, sorted for stable checkpoints."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def format_partition_json(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(to_offset_dict(offsets), separators=(",", ":"))


# --------------------------------------------------------------------------------------
# Where to start / stop


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends, before resolution against the cluster.

    Precedence per partition: a global ``timestamp``; else a per-partition timestamp;
    else a per-partition offset (which may be ``EARLIEST``/``LATEST``); else ``default``.
    ``timestamp_fallback`` decides what happens when no record is at or after a
    timestamp: ``"error"`` or ``"latest"`` (then the partition's end offset is used).
    """

    default: int
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp_fallback: str = "error"

    def query(self, tp: TopicPartition) -> tuple[bool, int]:
        """``(is_timestamp, value)``: a timestamp (ms) to look up, or an offset / sentinel."""
        if self.timestamp is not None:
            return True, self.timestamp
        ts = self.timestamps.get(tp)
        if ts is not None:
            return True, ts
        return False, self.offsets.get(tp, self.default)

    def named_partitions(self) -> set[TopicPartition]:
        """Partitions this spec names explicitly (they must exist in the subscription)."""
        return set(self.offsets) | set(self.timestamps)


# --------------------------------------------------------------------------------------
# Ranges


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    on_reversed: str = "error",
) -> list[OffsetRange]:
    """One range per partition of ``end`` (all must be in ``start``), sorted; empty ones dropped.

    ``on_reversed``: what to do when an end offset is below its start (the log was
    truncated or the topic recreated): ``"error"`` (ConfigError naming the partition)
    or ``"skip"``.
    """
    out: list[OffsetRange] = []
    for tp in sorted(end):
        e = end[tp]
        try:
            s = start[tp]
        except KeyError:
            raise ConfigError(f"no starting offset for {tp.topic}-{tp.partition}") from None
        if s < 0 or e < 0:
            raise ConfigError(f"unresolved offset for {tp.topic}-{tp.partition}: start {s}, end {e}")
        if e < s:
            if on_reversed == "skip":
                continue
            raise ConfigError(
                f"ending offset {e} is before starting offset {s} for {tp.topic}-{tp.partition} "
                "(records were deleted, the topic was recreated, or the offsets options are wrong)"
            )
        if e > s:
            out.append(OffsetRange(tp.topic, tp.partition, s, e))
    return out


def split_ranges(
    ranges: Iterable[OffsetRange],
    *,
    max_records: int | None = None,
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """Cut ranges into contiguous, non-overlapping pieces for parallel tasks.

    ``max_records``: no piece covers more offsets than this (a range of n offsets
    becomes ``ceil(n / max_records)`` pieces of near-equal size). ``min_partitions``:
    if there are fewer pieces than this, big ranges are cut further, each in proportion
    to its share of all offsets. The pieces of one range stay in offset order.
    """
    if max_records is not None and max_records < 1:
        raise ConfigError(f"maxRecordsPerPartition must be >= 1, got {max_records}")
    if min_partitions is not None and min_partitions < 1:
        raise ConfigError(f"minPartitions must be >= 1, got {min_partitions}")
    rs = [r for r in ranges if r.size > 0]
    counts = [1] * len(rs)
    if max_records is not None:
        counts = [max(1, math.ceil(r.size / max_records)) for r in rs]
    if min_partitions is not None and sum(counts) < min_partitions:
        total = sum(r.size for r in rs)
        if total:
            for i, r in enumerate(rs):
                share = math.ceil(r.size * min_partitions / total)
                counts[i] = min(max(counts[i], share), r.size)
    out: list[OffsetRange] = []
    for r, n in zip(rs, counts, strict=True):
        out.extend(_cut(r, n))
    return out


def _cut(r: OffsetRange, pieces: int) -> list[OffsetRange]:
    """``pieces`` contiguous parts whose sizes differ by at most one."""
    pieces = max(1, min(pieces, r.size))
    base, extra = divmod(r.size, pieces)
    out = []
    s = r.start
    for i in range(pieces):
        e = s + base + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, s, e))
        s = e
    return out


def limit_end_offsets(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_records: int
) -> Offsets:
    """End offsets for a micro-batch of about ``max_records`` offsets (maxOffsetsPerTrigger).

    The same proration as Spark's built-in Kafka source, so that both cut a backlog into
    the same micro-batches: each partition with a backlog gets ``max_records * backlog /
    total`` offsets, rounded down, but at least one (a small partition is never starved;
    so a batch may exceed the limit by up to one offset per partition). Partitions
    missing from ``start`` (new ones) count from offset 0 here; the caller passes their
    resolved earliest offsets when known.
    """
    if max_records < 1:
        raise ConfigError(f"maxOffsetsPerTrigger must be >= 1, got {max_records}")
    backlog = {tp: latest[tp] - start.get(tp, 0) for tp in latest}
    total = float(sum(n for n in backlog.values() if n > 0))
    if total < 1:
        return dict(latest)
    end: Offsets = {}
    for tp, last in latest.items():
        size = backlog[tp]
        if size <= 0:
            end[tp] = last
            continue
        prorate = max_records * (size / total)
        take = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        end[tp] = min(last, start.get(tp, 0) + take)
    return end


def delay_batch(
    new_records: int, min_records: int, now_ms: int, last_trigger_ms: int, max_delay_ms: int
) -> tuple[bool, int]:
    """minOffsetsPerTrigger / maxTriggerDelay, as Spark's built-in Kafka source decides:
    skip this trigger (``True``) while fewer than ``min_records`` new offsets are
    available, unless ``max_delay_ms`` passed since the last trigger that ran a batch.
    Returns the decision and the new last-trigger time."""
    if now_ms - last_trigger_ms >= max_delay_ms:
        return False, now_ms
    if new_records < min_records:
        return True, last_trigger_ms
    return False, now_ms
