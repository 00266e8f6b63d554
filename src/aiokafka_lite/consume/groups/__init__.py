"""Consumer groups, client side: the classic protocol (JoinGroup/SyncGroup/Heartbeat) and
the consumer protocol (KIP-848, ConsumerGroupHeartbeat; ``group_protocol="consumer"``).

* ``GroupCoordinator`` plugs into the ``Consumer`` (see ``coordinator``); it drives the
  pure ``membership.Membership`` state machine. ``ConsumerGroupCoordinator``
  (``consumer_coordinator``) does the same for ``consumer_membership.ConsumerMembership``.
* Rebalance listeners: ``ConsumerRebalanceListener`` / ``RebalanceListener`` (``listener``).
* Assignors: ``groups.assignors`` (range, roundrobin, sticky, cooperative-sticky, custom).
* ``OrderedWorkers`` moved to ``aiokafka_lite.processing`` (also ``aiokafka_lite.OrderedWorkers``);
  importing it from here still works, with a ``DeprecationWarning``.
"""

from typing import Any

from aiokafka_lite.consume.groups.consumer_coordinator import ConsumerGroupCoordinator
from aiokafka_lite.consume.groups.consumer_membership import ConsumerMembership, ConsumerMemberState
from aiokafka_lite.consume.groups.coordinator import ConsumerGroupMetadata, GroupCoordinator
from aiokafka_lite.consume.groups.listener import ConsumerRebalanceListener, RebalanceListener
from aiokafka_lite.consume.groups.membership import GroupSettings, Membership, MemberState

__all__ = [
    "ConsumerGroupCoordinator",
    "ConsumerGroupMetadata",
    "ConsumerMemberState",
    "ConsumerMembership",
    "ConsumerRebalanceListener",
    "GroupCoordinator",
    "GroupSettings",
    "MemberState",
    "Membership",
    "RebalanceListener",
]


def __getattr__(name: str) -> Any:
    # The worker pool moved to processing/ (it runs on a consumer, it is not group protocol);
    # the old import path works for one more release. No static import: processing imports us.
    if name in ("OrderedWorkers", "WorkerFailedError"):
        import importlib
        import warnings

        warnings.warn(
            f"aiokafka_lite.groups.{name} moved: import it from aiokafka_lite.processing",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("aiokafka_lite.processing.ordered_workers"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
