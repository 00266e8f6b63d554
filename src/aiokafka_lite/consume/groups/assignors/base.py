"""Data model shared by every partition assignor.

The group leader runs an assignor over the members' subscriptions (decoded from
``ConsumerProtocolSubscription`` elsewhere) and the current topic metadata. Assignors
here are pure functions of that input: no I/O, no clocks, no randomness, so that any
member elected leader computes the same answer for the same input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "Assignment",
    "Assignor",
    "MemberSubscription",
    "RebalanceProtocol",
    "TopicPartition",
    "cooperative_diff",
    "member_sort_key",
]

RebalanceProtocol = Literal["eager", "cooperative"]
"""``eager``: members revoke everything before rejoining (stop-the-world).
``cooperative`` (KIP-429): members keep what they own and revoke only what moves."""

Assignment = dict[str, list[TopicPartition]]
"""member id -> partitions assigned to it (every member appears, possibly with [])."""


@dataclass(slots=True)
class MemberSubscription:
    """One member's JoinGroup subscription, as seen by the leader.

    ``owned_partitions`` and ``generation`` come from subscription v1+/v2+
    (KIP-429/KIP-792); ``rack`` from v3 (KIP-881). ``generation == -1`` means
    "unknown", which is what older members send.
    """

    member_id: str
    topics: list[str]
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation: int = -1
    rack: str | None = None
    user_data: bytes | None = None
    group_instance_id: str | None = None


@runtime_checkable
class Assignor(Protocol):
    """What the consumer needs from a partition assignor.

    Any object with these attributes and methods can be used (``get_assignor`` accepts
    instances directly, ``register_assignor`` makes one available by name). All members
    of a group must agree on ``name``; the coordinator picks a name every member lists.
    """

    name: str
    """Protocol name sent in JoinGroup, e.g. ``"range"``."""

    rebalance_protocol: RebalanceProtocol
    """Whether the client must revoke everything before rejoining (eager) or only the
    partitions that were taken away (cooperative)."""

    def metadata(self, topics: list[str], owned: list[TopicPartition], generation: int) -> bytes | None:
        """Return the ``user_data`` to put in this member's subscription (or None)."""
        ...

    def assign(
        self,
        members: dict[str, MemberSubscription],
        partitions_per_topic: dict[str, int],
        partition_racks: dict[TopicPartition, set[str]] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        """Compute the group assignment. Run by the leader only.

        ``partitions_per_topic`` lists the topics known to exist; subscribed topics
        missing from it are skipped. The result has an entry for every member.
        """
        ...


def member_sort_key(member: MemberSubscription) -> tuple[int, str, str]:
    """Order members the way Kafka's built-in assignors do.

    Static members (KIP-345) sort by ``group.instance.id`` and come before dynamic
    members, which sort by member id. Instance ids survive restarts while member ids do
    not, so ordering by them keeps range/roundrobin output stable across rolling bounces.
    """
    if member.group_instance_id is not None:
        return (0, member.group_instance_id, member.member_id)
    return (1, member.member_id, "")


def subscribed_existing_topics(
    member: MemberSubscription, partitions_per_topic: Mapping[str, int]
) -> set[str]:
    """Topics the member subscribes to that exist in metadata.

    A subscription may name a topic that does not exist (yet) or was deleted; such
    topics have no partitions to hand out, so assignors simply skip them.
    """
    return {t for t in member.topics if partitions_per_topic.get(t, 0) > 0}


def cooperative_diff(
    owned: Iterable[TopicPartition], assigned: Iterable[TopicPartition]
) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """Split a new cooperative assignment into ``(to_revoke, to_add)``.

    Under KIP-429 a member keeps consuming what it owns and is still assigned; it only
    revokes ``owned - assigned`` (then rejoins so the leader can hand those partitions to
    their new owner) and starts consuming ``assigned - owned``.
    """
    owned_set = set(owned)
    assigned_set = set(assigned)
    return owned_set - assigned_set, assigned_set - owned_set
