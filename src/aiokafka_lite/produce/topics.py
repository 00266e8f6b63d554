"""What the producer knows about each topic it writes to, derived from cluster metadata.

A ``TopicState`` is looked up once per record, so it carries exactly what the append
path needs, precomputed: partition count, partitions with a leader, the partition
queues indexed by partition, and the keyless partitioner state.
"""

from __future__ import annotations

import uuid

from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.metadata import ClusterMetadata, TopicInfo
from aiokafka_lite.produce.accumulator import PartitionQueue, RecordAccumulator
from aiokafka_lite.produce.partitioner import RoundRobinPartitioner, UniformStickyPartitioner

__all__ = ["TopicRegistry", "TopicState"]


class TopicState:
    __slots__ = ("available", "name", "partition_count", "queues", "round_robin", "sticky", "topic_id")

    def __init__(self, name: str) -> None:
        self.name = name
        self.partition_count = 0
        self.available: list[int] = []
        self.queues: list[PartitionQueue] = []
        self.topic_id: uuid.UUID | None = None
        self.sticky: UniformStickyPartitioner | None = None
        self.round_robin: RoundRobinPartitioner | None = None


class TopicRegistry:
    """Topic states keyed by name, kept in line with the client's metadata snapshots."""

    def __init__(self, acc: RecordAccumulator, *, partitioner: object, sticky_bytes: int) -> None:
        self._acc = acc
        self._partitioner = partitioner
        self._sticky_bytes = sticky_bytes
        self.topics: dict[str, TopicState] = {}
        self._cluster: ClusterMetadata | None = None

    def add(self, info: TopicInfo) -> TopicState:
        """State for a topic just found in metadata (the append path's slow path)."""
        state = self.topics.get(info.name)
        if state is None:
            state = self.topics[info.name] = TopicState(info.name)
        self._apply(state, info)
        return state

    def _apply(self, state: TopicState, info: TopicInfo) -> None:
        count = max(info.partitions) + 1 if info.partitions else 0
        available = sorted(p for p, part in info.partitions.items() if part.leader >= 0)
        queues = state.queues
        acc = self._acc
        while len(queues) < count:
            queues.append(acc.queue(TopicPartition(info.name, len(queues))))
        for p, part in info.partitions.items():
            queues[p].leader = part.leader
        for q in queues[count:]:
            q.leader = -1  # partitions gone from metadata (topic re-created smaller)
        state.topic_id = info.topic_id
        changed = count != state.partition_count or available != state.available
        state.partition_count = count
        state.available = available
        if self._partitioner == "default":
            if state.sticky is None:
                state.sticky = UniformStickyPartitioner(count, available, sticky_bytes=self._sticky_bytes)
            elif changed:
                state.sticky.update_metadata(count, available)
                if state.sticky.current not in available and available:
                    state.sticky.switch_away(state.sticky.current)
            for q in queues:
                q.sticky = state.sticky
        elif self._partitioner == "round_robin" and state.round_robin is None:
            state.round_robin = RoundRobinPartitioner()

    def update(self, cluster: ClusterMetadata) -> bool:
        """Apply a new snapshot if it is one; True when something was applied."""
        if cluster is self._cluster:
            return False
        self._cluster = cluster
        for name, state in self.topics.items():
            info = cluster.topics.get(name)
            if info is None:
                for q in state.queues:
                    q.leader = -1
                continue
            self._apply(state, info)
        return True

    def name_for(self, topic_id: uuid.UUID) -> str | None:
        for name, state in self.topics.items():
            if state.topic_id == topic_id:
                return name
        return None
