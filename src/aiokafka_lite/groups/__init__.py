"""Consumer groups, client side: the classic protocol (JoinGroup/SyncGroup/Heartbeat) and
the consumer protocol (KIP-848, ConsumerGroupHeartbeat; ``group_protocol="consumer"``).

* ``GroupCoordinator`` plugs into the ``Consumer`` (see ``coordinator``); it drives the
  pure ``membership.Membership`` state machine. ``ConsumerGroupCoordinator``
  (``consumer_coordinator``) does the same for ``consumer_membership.ConsumerMembership``.
* Rebalance listeners: ``ConsumerRebalanceListener`` / ``RebalanceListener`` (``listener``).
* Assignors: ``groups.assignors`` (range, roundrobin, sticky, cooperative-sticky, custom).
* ``OrderedWorkers`` (``workers``): concurrent processing with per-partition order.
"""

from aiokafka_lite.groups.consumer_coordinator import ConsumerGroupCoordinator
from aiokafka_lite.groups.consumer_membership import ConsumerMembership, ConsumerMemberState
from aiokafka_lite.groups.coordinator import ConsumerGroupMetadata, GroupCoordinator
from aiokafka_lite.groups.listener import ConsumerRebalanceListener, RebalanceListener
from aiokafka_lite.groups.membership import GroupSettings, Membership, MemberState
from aiokafka_lite.groups.workers import OrderedWorkers, WorkerFailedError

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
    "OrderedWorkers",
    "RebalanceListener",
    "WorkerFailedError",
]
