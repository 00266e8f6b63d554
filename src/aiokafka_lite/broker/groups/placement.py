"""Which broker coordinates a group or transactional id (Kafka's hash of the key)."""

from __future__ import annotations

import functools
import logging
import weakref

from aiokafka_lite.broker.groups.codes import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_KEY,
    NONE,
    NOT_COORDINATOR,
    TXN_KEY,
)
from aiokafka_lite.broker.groups.coordinator_config import config_int
from aiokafka_lite.broker.state import BrokerInfo, ClusterState
from aiokafka_lite.core import errors

log = logging.getLogger("aiokafka_lite.broker.groups")


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=4096)
def _cached_hash(key: str) -> int:
    # Every group request looks its coordinator up; the hash is the costly part.
    return java_string_hash(key)


def _java_abs(n: int) -> int:
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 rather than staying negative.
    return 0 if n == -(2**31) else abs(n)


class CoordinatorPlacement:
    """Which broker coordinates a group / transactional id.

    Kafka: partition = abs(hash(key)) % N of ``__consumer_offsets`` (groups) or
    ``__transaction_state`` (transactional ids); the coordinator is that partition's
    leader. Here the "leader" of internal partition p is the p-th live broker (modulo),
    so a broker going down moves its keys to live brokers. ``move`` pins a key.
    """

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.partitions = {
            GROUP_KEY: max(config_int(cluster, "offsets.topic.num.partitions", 50), 1),
            TXN_KEY: max(config_int(cluster, "transaction.state.log.num.partitions", 50), 1),
        }
        self._pinned: dict[tuple[int, str], int] = {}

    def partition_for(self, key: str, key_type: int = GROUP_KEY) -> int:
        return _java_abs(_cached_hash(key)) % self.partitions[key_type]

    def coordinator(self, key: str, key_type: int = GROUP_KEY) -> BrokerInfo | None:
        """The coordinator broker, or None when no broker is alive."""
        pinned = self._pinned.get((key_type, key))
        if pinned is not None and self.cluster.is_alive(pinned):
            return self.cluster.brokers[pinned]
        live = sorted(self.cluster.live_brokers(), key=lambda b: b.node_id)
        if not live:
            return None
        return live[self.partition_for(key, key_type) % len(live)]

    def coordinator_id(self, key: str, key_type: int = GROUP_KEY) -> int:
        b = self.coordinator(key, key_type)
        return b.node_id if b is not None else -1

    def move(self, key: str, broker_id: int, key_type: int = GROUP_KEY) -> None:
        if broker_id not in self.cluster.brokers:
            raise errors.InvalidRequestError(f"no broker {broker_id}")
        self._pinned[(key_type, key)] = broker_id

    def unpin(self, key: str, key_type: int = GROUP_KEY) -> None:
        self._pinned.pop((key_type, key), None)

    def check(self, key: str, key_type: int, broker_id: int) -> int:
        """NONE if ``broker_id`` coordinates ``key``, else the error Kafka answers."""
        b = self.coordinator(key, key_type)
        if b is None:
            return COORDINATOR_NOT_AVAILABLE
        return NONE if b.node_id == broker_id else NOT_COORDINATOR


_PLACEMENTS: weakref.WeakKeyDictionary[ClusterState, CoordinatorPlacement] = weakref.WeakKeyDictionary()


def placement_for(cluster: ClusterState) -> CoordinatorPlacement:
    """The cluster's (single) placement, shared by the group and transaction coordinators."""
    p = _PLACEMENTS.get(cluster)
    if p is None:
        p = _PLACEMENTS[cluster] = CoordinatorPlacement(cluster)
    return p
