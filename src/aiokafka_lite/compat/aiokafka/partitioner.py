"""aiokafka's ``DefaultPartitioner`` (murmur2 of the key; a random available partition
for keyless records). Passed to ``AIOKafkaProducer`` it selects our native 'default'
partitioner (same murmur2 placement for keys; uniform sticky batches for keyless records)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from aiokafka_lite.produce.partitioner import key_partition, murmur2

__all__ = ["DefaultPartitioner", "murmur2"]


class DefaultPartitioner:
    def __call__(self, key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
        if key is None:
            return random.choice(available or all_partitions)
        return all_partitions[key_partition(key, len(all_partitions))]
