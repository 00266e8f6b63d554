"""The two stateless eager assignors: ``range`` and ``roundrobin``.

Both are deterministic functions of (members, metadata) and reproduce the Kafka Java
client's output so that a group mixing aiokafka_lite with other clients gets the same
assignment whichever member is elected leader.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka_lite.consume.groups.assignors.base import (
    MemberSubscription,
    RebalanceProtocol,
    TopicPartition,
    member_sort_key,
    subscribed_existing_topics,
)

__all__ = ["RangeAssignor", "RoundRobinAssignor"]


class RangeAssignor:
    """Per topic, give each subscribed member a contiguous range of partitions.

    Members subscribed to a topic are sorted (see ``member_sort_key``); the topic's
    ``n`` partitions are split into ``k`` ranges of ``n // k``, and the first
    ``n % k`` members get one extra. Because the split is per topic and always in the
    same member order, partition *i* of co-partitioned topics lands on the same member,
    which is what joins over keyed topics rely on; the price is that the first members
    can end up with several extra partitions overall.

    Example (two members C0, C1; topics t0, t1 with 3 partitions each)::

        C0: t0-0, t0-1, t1-0, t1-1
        C1: t0-2, t1-2
    """

    name: str = "range"
    rebalance_protocol: RebalanceProtocol = "eager"

    def metadata(self, topics: list[str], owned: list[TopicPartition], generation: int) -> bytes | None:
        """Range needs no user data."""
        return None

    def assign(
        self,
        members: Mapping[str, MemberSubscription],
        partitions_per_topic: Mapping[str, int],
        partition_racks: Mapping[TopicPartition, set[str]] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        """Compute range assignment (rack information is not used)."""
        result: dict[str, list[TopicPartition]] = {member_id: [] for member_id in members}
        subscribers: dict[str, list[tuple[tuple[int, str, str], str]]] = {}
        for member_id, sub in members.items():
            key = member_sort_key(sub)
            for topic in subscribed_existing_topics(sub, partitions_per_topic):
                subscribers.setdefault(topic, []).append((key, member_id))
        for topic, topic_members in subscribers.items():
            topic_members.sort()
            count = partitions_per_topic[topic]
            per_member, extra = divmod(count, len(topic_members))
            start = 0
            for i, (_, member_id) in enumerate(topic_members):
                length = per_member + (1 if i < extra else 0)
                result[member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        for partitions in result.values():
            partitions.sort()
        return result


class RoundRobinAssignor:
    """Deal all partitions out one at a time over the sorted members.

    Partitions are laid out sorted by (topic, partition) and members in
    ``member_sort_key`` order; a single cursor cycles through the members, skipping any
    member not subscribed to the current partition's topic. With identical
    subscriptions this yields per-member counts within one of each other; with differing
    subscriptions it can be unbalanced (use ``sticky`` for best-effort balance).

    Example (C0, C1; t0 and t1 with 3 partitions each)::

        C0: t0-0, t0-2, t1-1
        C1: t0-1, t1-0, t1-2
    """

    name: str = "roundrobin"
    rebalance_protocol: RebalanceProtocol = "eager"

    def metadata(self, topics: list[str], owned: list[TopicPartition], generation: int) -> bytes | None:
        """Round robin needs no user data."""
        return None

    def assign(
        self,
        members: Mapping[str, MemberSubscription],
        partitions_per_topic: Mapping[str, int],
        partition_racks: Mapping[TopicPartition, set[str]] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        """Compute round-robin assignment (rack information is not used)."""
        result: dict[str, list[TopicPartition]] = {member_id: [] for member_id in members}
        ordered = sorted(members.items(), key=lambda item: (member_sort_key(item[1]), item[0]))
        subscriptions = [subscribed_existing_topics(sub, partitions_per_topic) for _, sub in ordered]
        all_topics = sorted(set().union(*subscriptions)) if subscriptions else []
        cursor = 0
        n_members = len(ordered)
        for topic in all_topics:
            for partition in range(partitions_per_topic[topic]):
                # Terminates: at least one member subscribes to `topic`.
                while topic not in subscriptions[cursor]:
                    cursor = (cursor + 1) % n_members
                result[ordered[cursor][0]].append(TopicPartition(topic, partition))
                cursor = (cursor + 1) % n_members
        return result
