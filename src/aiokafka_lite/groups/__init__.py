"""Consumer groups, client side (classic protocol: JoinGroup/SyncGroup/Heartbeat).

* ``GroupCoordinator`` plugs into the ``Consumer`` (see ``coordinator``); it drives the
  pure ``membership.Membership`` state machine.
* Rebalance listeners: ``ConsumerRebalanceListener`` / ``RebalanceListener`` (``listener``).
* Assignors: ``groups.assignors`` (range, roundrobin, sticky, cooperative-sticky, custom).
* ``OrderedWorkers`` (``workers``): concurrent processing with per-partition order.
"""

from aiokafka_lite.groups.coordinator import ConsumerGroupMetadata, GroupCoordinator
from aiokafka_lite.groups.listener import ConsumerRebalanceListener, RebalanceListener
from aiokafka_lite.groups.membership import GroupSettings, Membership, MemberState
from aiokafka_lite.groups.workers import OrderedWorkers, WorkerFailedError

__all__ = [
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "GroupCoordinator",
    "GroupSettings",
    "MemberState",
    "Membership",
    "OrderedWorkers",
    "RebalanceListener",
    "WorkerFailedError",
]
