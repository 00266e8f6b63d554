"""The group coordinator of an embedded cluster, and its wiring."""

from __future__ import annotations

import logging

from aiokafka_lite.broker.context import HandlerRegistry
from aiokafka_lite.broker.groups.handlers import GroupRequestHandlers
from aiokafka_lite.broker.groups.placement import placement_for
from aiokafka_lite.broker.state import ClusterState

log = logging.getLogger("aiokafka_lite.broker.groups")


class GroupCoordinator(GroupRequestHandlers):
    """Classic and consumer groups, their rebalances and committed offsets for one
    embedded cluster (the layers of this package, assembled).

    Lifecycle: created by ``register_group_handlers`` (published as
    ``cluster.services["groups"]``); ``start()`` loads persisted offsets and watches
    metadata; ``stop()`` (alias ``close()``) cancels every timer, answers waiting
    requests with NOT_COORDINATOR and closes the offsets file.
    """


# -- wiring ---------------------------------------------------------------------------
def get_group_coordinator(cluster: ClusterState) -> GroupCoordinator | None:
    svc = cluster.services.get("groups")
    return svc if isinstance(svc, GroupCoordinator) else None


def register_group_handlers(registry: HandlerRegistry, cluster: ClusterState) -> GroupCoordinator:
    """Registers FindCoordinator and the group APIs; one coordinator per cluster.

    Publishes the coordinator as ``cluster.services["groups"]`` (the cluster calls its
    ``start()``/``stop()``). Safe to call once per broker registry.
    """
    coordinator = get_group_coordinator(cluster)
    if coordinator is None:
        coordinator = GroupCoordinator(cluster)
        cluster.services["groups"] = coordinator
    coordinator.register(registry)
    return coordinator


def expire_member(cluster: ClusterState, group_id: str, member_id: str) -> bool:
    """Fault injection: expire a member's session now. False if there is no such member."""
    coordinator = get_group_coordinator(cluster)
    return coordinator.expire_member(group_id, member_id) if coordinator is not None else False


def move_coordinator(cluster: ClusterState, group_id: str, broker_id: int) -> None:
    """Fault injection: make ``broker_id`` the coordinator of ``group_id``."""
    coordinator = get_group_coordinator(cluster)
    if coordinator is not None:
        coordinator.move_coordinator(group_id, broker_id)
    else:
        placement_for(cluster).move(group_id, broker_id)
