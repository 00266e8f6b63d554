"""Consumer-group partition assignors.

Built-in assignors, by the protocol name they advertise in JoinGroup:

=====================  ===========  =====================================================
name                   protocol     behaviour
=====================  ===========  =====================================================
``range``              eager        per-topic contiguous ranges (co-partitioned joins)
``roundrobin``         eager        all partitions dealt over all members
``sticky``             eager        balanced, keeps previous ownership where possible
``cooperative-sticky`` cooperative  same target, incremental (KIP-429) hand-over
=====================  ===========  =====================================================

Custom assignors
----------------
Any object with ``name``, ``rebalance_protocol``, ``metadata()`` and ``assign()`` (see
``Assignor``) works. Either pass the instance wherever an assignor name is accepted
(``get_assignor`` returns it unchanged after validation), or make it available by name::

    class MyAssignor:
        name = "my-assignor"
        rebalance_protocol = "eager"
        def metadata(self, topics, owned, generation): return None
        def assign(self, members, partitions_per_topic, partition_racks=None): ...

    register_assignor(MyAssignor())

Every member of a group must list the same name for the coordinator to select it, and
``assign`` must be deterministic: only the leader runs it, but any member can become
leader.
"""

from __future__ import annotations

from aiokafka_lite.consume.groups.assignors.base import (
    Assignment,
    Assignor,
    MemberSubscription,
    RebalanceProtocol,
    cooperative_diff,
    member_sort_key,
)
from aiokafka_lite.consume.groups.assignors.simple import RangeAssignor, RoundRobinAssignor
from aiokafka_lite.consume.groups.assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from aiokafka_lite.consume.groups.assignors.userdata import (
    StickyUserData,
    decode_cooperative_generation,
    decode_sticky_user_data,
    encode_cooperative_generation,
    encode_sticky_user_data,
)
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "StickyUserData",
    "TopicPartition",
    "cooperative_diff",
    "decode_cooperative_generation",
    "decode_sticky_user_data",
    "encode_cooperative_generation",
    "encode_sticky_user_data",
    "get_assignor",
    "member_sort_key",
    "register_assignor",
]

ASSIGNORS: dict[str, Assignor] = {
    a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor())
}
"""Assignors available by name. Built-ins are stateless, so one shared instance each."""


def _validate(assignor: object) -> Assignor:
    """Reject objects that would only fail later, in the middle of a rebalance."""
    if not isinstance(assignor, Assignor):
        raise ConfigError(
            f"{assignor!r} is not an assignor: it needs name, rebalance_protocol, metadata() and assign()"
        )
    if not isinstance(assignor.name, str) or not assignor.name:
        raise ConfigError(f"assignor {assignor!r} must have a non-empty string name")
    if assignor.rebalance_protocol not in ("eager", "cooperative"):
        raise ConfigError(
            f"assignor {assignor.name!r} has rebalance_protocol {assignor.rebalance_protocol!r}; "
            "expected 'eager' or 'cooperative'"
        )
    return assignor


def register_assignor(assignor: Assignor, *, replace: bool = False) -> None:
    """Make ``assignor`` available to ``get_assignor`` under ``assignor.name``.

    Refuses to shadow an existing name unless ``replace=True``, so a typo cannot
    silently replace a built-in that other group members rely on.
    """
    _validate(assignor)
    if assignor.name in ASSIGNORS and not replace:
        raise ConfigError(f"an assignor named {assignor.name!r} is already registered")
    ASSIGNORS[assignor.name] = assignor


def get_assignor(name: str | Assignor) -> Assignor:
    """Resolve a configured assignor: a registered name, or an assignor instance."""
    if isinstance(name, str):
        try:
            return ASSIGNORS[name]
        except KeyError:
            known = ", ".join(sorted(ASSIGNORS))
            raise ConfigError(f"unknown partition assignor {name!r} (known: {known})") from None
    return _validate(name)
