"""Mirroring topics between clusters: ``Mirror`` (and ``aiokafka-lite mirror``).

::

    from aiokafka_lite.integrations.mirror import Mirror

    async with Mirror("source:9092", "target:9092", include=r"orders\\..*",
                      exclude=r".*\\.tmp", rename="{topic}.mirror", exactly_once=True) as m:
        await m.run()

See ``docs/guide/mirror.md`` for the delivery modes and where positions are stored.
"""

from aiokafka_lite.integrations.mirror.mirror import Mirror, MirrorError
from aiokafka_lite.integrations.mirror.naming import (
    MirrorConfigError,
    TopicFilter,
    TopicRenamer,
    target_partition,
)
from aiokafka_lite.integrations.mirror.progress import ProgressDisplay
from aiokafka_lite.integrations.mirror.stats import MirrorStats, PartitionStats, RateMeter

__all__ = [
    "Mirror",
    "MirrorConfigError",
    "MirrorError",
    "MirrorStats",
    "PartitionStats",
    "ProgressDisplay",
    "RateMeter",
    "TopicFilter",
    "TopicRenamer",
    "target_partition",
]
