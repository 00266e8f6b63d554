"""What every group coordinator shares: state, lifecycle, placement, helpers."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol, runtime_checkable

from aiokafka_lite.broker.committed_offsets import OffsetStore
from aiokafka_lite.broker.groups.classic_group import Group, JoinResult, Member, SyncResult
from aiokafka_lite.broker.groups.clock import Clock, LoopClock, Timers
from aiokafka_lite.broker.groups.codes import GROUP_KEY, NOT_COORDINATOR
from aiokafka_lite.broker.groups.coordinator_config import GroupConfig
from aiokafka_lite.broker.groups.placement import placement_for
from aiokafka_lite.broker.state import ClusterState

log = logging.getLogger("aiokafka_lite.broker.groups")


@runtime_checkable
class TxnOffsetCheck(Protocol):
    """What the group coordinator asks the transaction coordinator (published as
    ``cluster.services["transactions"]``) before a TxnOffsetCommit. A protocol here, below
    both, so that groups need not import ``broker.transactions`` (which builds on groups)."""

    def check_offset_commit(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        *,
        implicit_add: bool = False,
        abortable: bool = False,
    ) -> int: ...


class CoordinatorBase:
    """The state every protocol's coordinator shares: groups, offsets, timers, placement.

    Lifecycle: created by ``register_group_handlers`` (published as
    ``cluster.services["groups"]``); ``start()`` loads persisted offsets and watches
    metadata; ``stop()`` (alias ``close()``) cancels every timer, answers waiting
    requests with NOT_COORDINATOR and closes the offsets file.
    """

    def __init__(
        self,
        cluster: ClusterState,
        *,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        store: OffsetStore | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config or GroupConfig.from_cluster(cluster)
        self.clock: Clock = clock or LoopClock()
        self.timers = Timers(self.clock)
        self.placement = placement_for(cluster)
        self.groups: dict[str, Group] = {}
        self.offsets = store if store is not None else OffsetStore(self._offsets_path())
        self._started = False
        self._live_brokers: tuple[int, ...] = ()

    def _offsets_path(self) -> str | None:
        storage = self.cluster.storage
        return str(storage.dir / "groups" / "offsets.jsonl") if storage is not None else None

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.timers.closed = False
        if self.cluster.storage is not None and self.offsets._path is None:
            self.offsets = OffsetStore(self._offsets_path())
        self.offsets.open()
        for group_id in self.offsets.groups():
            self._get_or_create(group_id)
        self._live_brokers = self._live_ids()
        self.cluster.add_listener(self._on_metadata_change)
        self._on_metadata_change()

    async def stop(self) -> None:
        self.timers.cancel_all()
        self.cluster.remove_listener(self._on_metadata_change)
        for group in self.groups.values():
            group.join_timer = group.sync_timer = None
            for m in group.members.values():
                m.session_timer = None
                self._answer_join(m, JoinResult(NOT_COORDINATOR, m.member_id))
                self._answer_sync(m, SyncResult(NOT_COORDINATOR))
        self.offsets.close()
        self._started = False

    close = stop

    def _live_ids(self) -> tuple[int, ...]:
        return tuple(sorted(b.node_id for b in self.cluster.live_brokers()))

    def _on_metadata_change(self) -> None:
        # Deleted topics lose their committed offsets (Kafka cleans them up too).
        existing = set(self.cluster.topics)
        if self.offsets.topics() - existing:
            self.offsets.delete_topics(existing)
        live = self._live_ids()
        if live != self._live_brokers:
            self._live_brokers = live
            for group in self.groups.values():
                self._check_coordinator_moved(group)

    def _check_coordinator_moved(self, group: Group) -> None:
        now_id = self.placement.coordinator_id(group.group_id)
        if group.coordinator_id != now_id:
            old, group.coordinator_id = group.coordinator_id, now_id
            if old != -1:
                self._unload(group)

    def _unload(self, group: Group) -> None:
        """The group moved to another coordinator: in-flight requests fail, sessions restart."""
        now = self.clock.now_ms()
        for m in group.members.values():
            self._answer_join(m, JoinResult(NOT_COORDINATOR, m.member_id))
            self._answer_sync(m, SyncResult(NOT_COORDINATOR))
            m.last_heartbeat_ms = now

    def now(self) -> float:
        return self.clock.now_ms()

    # -- fault injection ------------------------------------------------------------------
    def move_coordinator(self, group_id: str, broker_id: int) -> None:
        """Makes ``broker_id`` the group's coordinator; the old one answers NOT_COORDINATOR."""
        self.placement.move(group_id, broker_id)
        group = self.groups.get(group_id)
        if group is not None:
            self._check_coordinator_moved(group)

    # -- helpers ----------------------------------------------------------------------------
    def _get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.now())
            group.coordinator_id = self.placement.coordinator_id(group_id)
        return group

    def coordinator_error(self, group_id: str, broker_id: int) -> int:
        return self.placement.check(group_id, GROUP_KEY, broker_id)

    def _txn_coordinator(self) -> TxnOffsetCheck | None:
        svc = self.cluster.services.get("transactions")
        return svc if isinstance(svc, TxnOffsetCheck) else None

    @staticmethod
    def _answer_join(member: Member, result: JoinResult) -> None:
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)

    @staticmethod
    def _answer_sync(member: Member, result: SyncResult) -> None:
        waiter, member.sync_waiter = member.sync_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _join_future() -> asyncio.Future[JoinResult]:
    return asyncio.get_running_loop().create_future()


def _sync_future() -> asyncio.Future[SyncResult]:
    return asyncio.get_running_loop().create_future()
