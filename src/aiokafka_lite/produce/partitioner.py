"""Partition choice for produced records (pure; no I/O, no clock).

* Keyed records: ``(murmur2(key) & 0x7fffffff) % partition_count``, bit-for-bit the Java
  client's default, so keyed data lands on the same partitions whichever client wrote it.
* Keyless records (or every record with ``partitioner_ignore_keys``): KIP-794 "uniform
  sticky" partitioning. All keyless records of a topic go to one partition until about
  ``batch_size`` bytes were produced to it, then another partition is picked at random,
  weighted towards partitions with shorter queues (adaptive partitioning) so a slow
  broker receives less. Sticking fills batches; switching by *bytes* (not by batch, as
  the pre-KIP-794 sticky partitioner did) keeps the distribution uniform.
* ``"round_robin"``: each record to the next available partition, keys ignored.
* Any callable ``(topic, serialized_key, partition_count) -> partition``.
"""

from __future__ import annotations

import bisect
import random
import struct
from collections.abc import Callable, Collection, Sequence
from typing import Final

from aiokafka_lite.wire.records._c_extension import c_ext

__all__ = [
    "PartitionerCallable",
    "RoundRobinPartitioner",
    "UniformStickyPartitioner",
    "key_partition",
    "murmur2",
]

#: User partitioner signature: ``(topic, serialized key or None, partition count) -> partition``.
PartitionerCallable = Callable[[str, bytes | None, int], int]

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF
_WORDS: dict[int, struct.Struct] = {}


def _murmur2_u32(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 (32-bit, seed 0x9747b28c) as the Java client computes it, unsigned."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    nwords = length >> 2
    if nwords:
        unpack = _WORDS.get(nwords)
        if unpack is None:
            unpack = _WORDS[nwords] = struct.Struct(f"<{nwords}I")
        for k in unpack.unpack_from(data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = length & 3
    if tail:
        base = length - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


_murmur2_u32_py: Final = _murmur2_u32
if c_ext is not None:  # the C twin of the loop above: the same hash, ~20x cheaper per key
    _murmur2_u32 = c_ext.murmur2_u32


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Java's ``Utils.murmur2``: the hash as a signed 32-bit int."""
    h = _murmur2_u32(data)
    return h - (1 << 32) if h & 0x80000000 else h


#: Recent key hashes: keys repeat a lot in practice (user ids, order ids...), and a dict
#: lookup is several times cheaper than hashing in Python. Cleared when it fills.
_HASH_CACHE: dict[bytes, int] = {}
_HASH_CACHE_MAX: Final = 1 << 16


def key_partition(key: bytes | bytearray | memoryview, partition_count: int) -> int:
    """Partition of a keyed record under the default partitioner (Java-compatible)."""
    if type(key) is bytes:
        h = _HASH_CACHE.get(key)
        if h is None:
            h = _murmur2_u32(key) & 0x7FFFFFFF
            if len(_HASH_CACHE) >= _HASH_CACHE_MAX:
                _HASH_CACHE.clear()
            _HASH_CACHE[key] = h
        return h % partition_count
    return (_murmur2_u32(key) & 0x7FFFFFFF) % partition_count


def _group_by_key_partition_py(keys: list[bytes], count: int) -> tuple[list[int], list[int]]:
    parts = [(_murmur2_u32(k) & 0x7FFFFFFF) % count for k in keys]
    order = sorted(range(len(keys)), key=parts.__getitem__)  # stable: input order within one
    ends: list[int] = []
    total = 0
    sizes = [0] * count
    for p in parts:
        sizes[p] += 1
    for size in sizes:
        total += size
        ends.append(total)
    return order, ends


def group_by_key_partition(keys: list[bytes], count: int) -> tuple[list[int], list[int]]:
    """The default partitioner over many keys at once, as a stable grouping: ``order``
    lists the indexes of ``keys`` partition by partition (input order within each), and
    partition ``p``'s indexes are ``order[ends[p - 1]:ends[p]]``."""
    if c_ext is not None:
        return c_ext.group_by_key_partition(keys, count)  # type: ignore[no-any-return]
    for i, k in enumerate(keys):
        if type(k) is not bytes:
            raise TypeError(f"key {i} is {type(k).__name__}, not bytes")
    return _group_by_key_partition_py(keys, count)


class UniformStickyPartitioner:
    """Per-topic state of the KIP-794 keyless partitioner.

    The accumulator reads :attr:`current` for each keyless record and reports the bytes
    it appended with :meth:`on_append`. ``available`` lists partitions with a leader;
    :meth:`update_load` feeds adaptive weights (queue lengths per available partition).
    """

    __slots__ = (
        "_cumulative",
        "_load_ids",
        "_rng",
        "available",
        "current",
        "partition_count",
        "produced",
        "sticky_bytes",
    )

    def __init__(
        self,
        partition_count: int,
        available: Sequence[int] | None = None,
        *,
        sticky_bytes: int = 16384,
        rng: random.Random | None = None,
    ) -> None:
        self._rng = rng if rng is not None else random.Random()
        self.sticky_bytes = max(1, sticky_bytes)
        self.partition_count = partition_count
        self.available: list[int] = list(available) if available is not None else list(range(partition_count))
        self._load_ids: list[int] | None = None
        self._cumulative: list[int] = []
        self.produced = 0
        self.current = self._next()

    def update_metadata(self, partition_count: int, available: Sequence[int]) -> None:
        """New partition count / leader availability from a metadata refresh."""
        self.partition_count = partition_count
        self.available = list(available)
        self._load_ids = None
        if self.current >= partition_count:
            self.produced = 0
            self.current = self._next()

    def update_load(self, queue_sizes: dict[int, int], unavailable: Collection[int] = ()) -> None:
        """Adaptive partitioning: weights from queue lengths (batches waiting) per partition.

        Each available partition's weight is ``max_queue + 1 - its_queue``, so a partition
        whose leader drains slowly (longer queue) is picked less often. Equal queues (the
        normal case) mean no stats at all: a plain uniform choice. ``unavailable``
        partitions (leader stuck past the availability timeout) are left out, unless that
        would leave nothing.
        """
        ids = [p for p in self.available if p < self.partition_count]
        if unavailable:
            ids = [p for p in ids if p not in unavailable] or ids
        if not ids:
            self._load_ids = None
            return
        sizes = [queue_sizes.get(p, 0) for p in ids]
        top = max(sizes)
        if top == min(sizes) and len(ids) == len(self.available):
            self._load_ids = None
            return
        total = 0
        cumulative = []
        for size in sizes:
            total += top + 1 - size
            cumulative.append(total)
        self._load_ids = ids
        self._cumulative = cumulative

    def _next(self) -> int:
        ids = self._load_ids
        if ids is not None:
            cumulative = self._cumulative
            pick = self._rng.randrange(cumulative[-1])
            return ids[bisect.bisect_right(cumulative, pick)]
        avail = [p for p in self.available if p < self.partition_count]
        if avail:
            return avail[self._rng.randrange(len(avail))]
        return self._rng.randrange(self.partition_count)

    def on_append(self, nbytes: int, allow_switch: bool) -> None:
        """Account ``nbytes`` produced to :attr:`current`; maybe switch partition.

        The switch waits for the current batch to be full (``allow_switch``) so batches
        are not cut short, but happens anyway after twice the threshold (a keyed record
        may have opened a fresh batch on the same partition meanwhile).
        """
        produced = self.produced + nbytes
        if produced >= self.sticky_bytes and (allow_switch or produced >= 2 * self.sticky_bytes):
            self.produced = 0
            self.current = self._next()
        else:
            self.produced = produced

    def switch_away(self, partition: int) -> None:
        """Leave ``partition`` now (e.g. its leader became unavailable)."""
        if self.current == partition:
            self.produced = 0
            self.current = self._next()


class RoundRobinPartitioner:
    """Per-topic counter cycling over available partitions (all partitions if none are)."""

    __slots__ = ("_counter",)

    def __init__(self) -> None:
        self._counter = 0

    def partition(self, partition_count: int, available: Sequence[int]) -> int:
        """Next partition; ``available`` must only hold ids below ``partition_count``."""
        n = self._counter
        self._counter = (n + 1) & 0x7FFFFFFF
        if available:
            return available[n % len(available)]
        return n % partition_count
