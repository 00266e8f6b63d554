"""Rebalance listeners: user callbacks run in step with the group protocol.

A listener is any object with some of these methods, sync or ``async``::

    class Listener:
        async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...
        async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...
        async def on_partitions_lost(self, lost: set[TopicPartition]) -> None: ...

Semantics (as in the Java client):

* ``on_partitions_revoked`` runs before the partitions are given up: the member has not
  rejoined yet, so offsets committed here are the ones the next owner starts from.
  While it runs the consumer returns no records of those partitions.
* ``on_partitions_assigned`` runs after a rebalance with the partitions *added* to this
  member (cooperative) or its whole new assignment (eager); it is called even with an
  empty set, so it also marks "rebalance complete".
* ``on_partitions_lost`` runs instead of ``revoked`` when ownership is uncertain (the
  member was fenced or expired): another member may already own them, so do not commit.
  A listener without it gets ``on_partitions_revoked``.

An exception raised by a callback does not stop the rebalance; the first one is
re-raised to the application from the next poll.
"""

from __future__ import annotations

import inspect
from typing import Literal, Protocol, runtime_checkable

from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "ConsumerRebalanceListener",
    "ListenerKind",
    "RebalanceListener",
    "invoke_listener",
]

ListenerKind = Literal["revoked", "assigned", "lost"]


@runtime_checkable
class RebalanceListener(Protocol):
    """The full interface; listeners may implement any subset (see module docs)."""

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None: ...


class ConsumerRebalanceListener:
    """Convenience base class: every callback does nothing, ``lost`` defaults to ``revoked``."""

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        await self.on_partitions_revoked(lost)


async def invoke_listener(listener: object, kind: ListenerKind, tps: set[TopicPartition]) -> None:
    """Call ``listener.on_partitions_<kind>(tps)``, awaiting it if it is a coroutine.

    Missing methods are skipped; a missing ``on_partitions_lost`` falls back to
    ``on_partitions_revoked``. Each call gets its own copy of the set.
    """
    method = getattr(listener, f"on_partitions_{kind}", None)
    if method is None and kind == "lost":
        method = getattr(listener, "on_partitions_revoked", None)
    if method is None:
        return
    result = method(set(tps))
    if inspect.isawaitable(result):
        await result
