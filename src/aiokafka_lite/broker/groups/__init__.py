"""The embedded broker's group coordinator (classic and consumer protocols) and coordinator lookup.

One ``GroupCoordinator`` serves a whole embedded cluster: group state lives once, and
each group has a *coordinator broker* chosen the way Kafka maps a group to a
``__consumer_offsets`` partition (Java ``String.hashCode`` of the key modulo
``offsets.topic.num.partitions``), that partition being "led" by one of the live brokers.
Requests for a group reaching another broker get NOT_COORDINATOR. Fault injection can
pin a group to a broker (``move_coordinator``) or expire a member (``expire_member``).

Classic groups follow Kafka's classic state machine (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead) with its rules: KIP-394 member ids, the join barrier
(every known member rejoins or the rebalance timeout removes it), the initial rebalance
delay, leader election, protocol selection by votes, SyncGroup propagation, session
expiry, the pending-sync timeout, static membership (KIP-345, KIP-814), group size
limit. The broker never looks inside their assignments: the leader assigns.

Consumer groups (KIP-848, ``consumer``) have group, assignment and member epochs; the
broker assigns with a server-side assignor and each member reconciles on its own
through ConsumerGroupHeartbeat. Mixed groups and the online upgrade/downgrade between
the two protocols are in ``mixed``.

Time comes from a ``Clock`` (the event loop by default, a fake one in tests). Timers are
loop ``TimerHandle``s owned by the coordinator and cancelled by ``stop()``. Requests
that must wait (JoinGroup in the barrier, SyncGroup of followers) wait on futures the
state machine completes.

Modules, one idea each, layered in this order: ``clock`` (time and timers), ``coordinator_config``
(settings), ``placement`` (which broker coordinates a key), ``classic_group`` (a classic
group's state), ``base`` (what every coordinator shares), ``classic_protocol`` (the classic
protocol), ``consumer_group`` (a consumer group's state and reconciliation),
``assignors`` (``uniform`` and ``range``), ``topic_regex`` (subscription patterns),
``consumer_protocol`` (the consumer protocol), ``mixed`` (classic members in consumer groups,
upgrade and downgrade), ``offset_commits`` (committed offsets, checked against generations and
member epochs), ``handlers`` (request handlers), ``coordinator`` (the assembled
``GroupCoordinator`` and its wiring).

Deviations from Kafka, all deliberate for an in-process test broker: committed offsets
persist in a JSON-lines file (see ``broker.committed_offsets``), not in ``__consumer_offsets``; consumer
groups persist in a JSON file (``groups/consumer_groups.json``); classic group membership
is not persisted (after a cluster restart members get UNKNOWN_MEMBER_ID and rejoin);
offsets never expire by retention.
"""

from aiokafka_lite.broker.groups.classic_group import Group, GroupState, JoinResult, Member, SyncResult
from aiokafka_lite.broker.groups.clock import Cancellable, Clock, LoopClock, ManualClock, Timers
from aiokafka_lite.broker.groups.codes import GROUP_KEY, TXN_KEY
from aiokafka_lite.broker.groups.coordinator import (
    GroupCoordinator,
    expire_member,
    get_group_coordinator,
    move_coordinator,
    register_group_handlers,
)
from aiokafka_lite.broker.groups.coordinator_config import GroupConfig, config_int
from aiokafka_lite.broker.groups.placement import CoordinatorPlacement, java_string_hash, placement_for

__all__ = [
    "GROUP_KEY",
    "TXN_KEY",
    "Cancellable",
    "Clock",
    "CoordinatorPlacement",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "JoinResult",
    "LoopClock",
    "ManualClock",
    "Member",
    "SyncResult",
    "Timers",
    "config_int",
    "expire_member",
    "get_group_coordinator",
    "java_string_hash",
    "move_coordinator",
    "placement_for",
    "register_group_handlers",
]
