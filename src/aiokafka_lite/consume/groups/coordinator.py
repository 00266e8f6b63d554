"""``GroupCoordinator``: the async driver of ``membership.Membership`` for one consumer.

Two tasks, both owned here and awaited on ``close``:

* the *main loop* asks the machine what to do (``tick``), executes the actions in order
  (FindCoordinator, JoinGroup, the leader's assignment, SyncGroup, listener callbacks,
  commits, SubscriptionState updates) and feeds the outcomes back;
* the *heartbeat loop* sends a Heartbeat whenever the machine says one is due, so a slow
  listener callback or a long JoinGroup never starves the session.

Every request to the group coordinator travels on the shared client's coordinator lane
(``Lane.COORDINATOR``): a connection of its own per broker, so it never queues behind
the fetcher's long-polling Fetch (brokers answer a connection's requests in order).

The application side (``poll``, ``commit``, ``fetch_committed``) never drives the
protocol itself: ``poll`` records the poll time and waits while listener callbacks are
running, so the records handed to the application and the callbacks never overlap;
partitions about to be revoked are paused first, so no record of them is returned while
their revocation (and commit) is in progress.

A member whose session has most likely expired at the broker (no answer for longer than
the session timeout, by the machine's clock: ``expire_session``) stops handing out records
of the partitions it held at once: the heartbeat loop, which wakes at the session's
deadline, and every ``poll`` check the clock and pause those partitions (``_freeze``;
what the consumer had buffered of them stays unread). When the coordinator answers again,
an expired membership takes the lost path (lost listener, no commit, the partitions and
their buffered records dropped, a rejoin; positions come from the committed offsets after
the new assignment); a session the coordinator kept (it failed over meanwhile) has its
partitions resumed (``_thaw``). The main loop's coordinator lookup and automatic commits
end at the session's deadline, so they never hold it past that point.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aiokafka_lite.consume.groups.listener import invoke_listener
from aiokafka_lite.consume.groups.membership import (
    Action,
    AddPartitions,
    CommitOffsets,
    ComputeAssignment,
    FindCoordinator,
    FreezePartitions,
    GroupSettings,
    InvokeListener,
    Membership,
    MemberState,
    RemovePartitions,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    ThawPartitions,
    leave_group_request,
)
from aiokafka_lite.consume.groups.offset_requests import (
    ZERO_UUID,
    commit_request,
    first_commit_error,
    normalize_offsets,
    offset_fetch_request,
    read_offset_fetch,
    usable_version,
)
from aiokafka_lite.consume.groups.protocol import decode_subscription, run_assignor
from aiokafka_lite.consume.subscription import OffsetAndMetadata, SubscriptionState
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core.errors import (
    BrokerResponseError,
    ClosedError,
    CommitFailedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for,
)
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.client import Lane
from aiokafka_lite.net.retry import Backoff, Retry
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupResponse,
)

__all__ = ["ConsumerGroupMetadata", "GroupClient", "GroupCoordinator"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Group errors (codes) handled by the offset paths.
_COORDINATOR_MOVED = (15, 16)  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
_COORDINATOR_LOADING = 14
_REQUEST_TIMED_OUT = 7
_UNSTABLE_OFFSET_COMMIT = 88
_GENERATION_ERRORS = (22, 25, 27, 82)  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """Identity of a group member, for ``send_offsets_to_transaction`` (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class GroupClient(Protocol):
    """The subset of ``aiokafka_lite.net.Client`` the coordinator uses."""

    async def send(
        self,
        request: Request,
        *,
        node_id: int | None = None,
        version: int | None = None,
        timeout_ms: float | None = None,
        expect_response: bool = True,
        lane: Lane = ...,
    ) -> Response | None: ...

    async def negotiated_version(
        self, node_id: int | None, api_key: int, *, lane: Lane = ..., timeout_ms: float | None = ...
    ) -> int: ...

    async def find_coordinator(
        self, key: str, key_type: Any = ..., *, timeout_ms: float | None = None
    ) -> int: ...

    def invalidate_coordinator(self, key: str, key_type: Any = ...) -> None: ...

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> Any: ...

    @property
    def cluster(self) -> Any: ...


_APP_ACTIONS = (FreezePartitions, ThawPartitions, InvokeListener, RemovePartitions, AddPartitions)


class GroupCoordinator:
    """Joins ``config.group_id`` for ``subscription`` and keeps the membership alive.

    ``listener`` (or, if None, ``subscription.rebalance_listener``) receives rebalance
    callbacks; ``add_listener`` registers internal listeners called before it (for
    example the ordered worker pool, which must drain revoked partitions first).
    """

    def __init__(
        self,
        client: GroupClient,
        subscription: SubscriptionState,
        config: Any,
        listener: object | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._sub = subscription
        self._clock = clock
        self._listener = listener
        self._internal_listeners: list[object] = []
        self._api_timeout_ms = float(getattr(config, "default_api_timeout_ms", None) or 60000)
        self._init_membership(config)
        # Waits between the attempts of a commit or an offset fetch: retry_backoff_ms,
        # doubling up to 1 s.
        self._offset_backoff = Backoff(float(self._settings.retry_backoff_ms), 1000.0, jitter=0)

        self._wake = _backend.event()
        self._hb_wake = _backend.event()
        self._app_idle = _backend.event()
        self._app_idle.set()
        self._main_task: asyncio.Task[None] | None = None
        self._hb_task: asyncio.Task[None] | None = None
        # Network I/O of the main loop, which ``close`` cuts short.
        self._io_guard = _backend.Interruptible()
        self._step: Action | None = None  # the action being executed (named when close times out)
        self._closing = False
        self._closed = False
        self._close_done: asyncio.Future[None] | None = None
        self._listener_error: BaseException | None = None
        self._crash: BaseException | None = None
        #: Called once the group has failed for good (a fatal error such as
        #: GROUP_AUTHORIZATION_FAILED, or a crash): the consumer wakes a waiting poll with it,
        #: so the error is raised at once rather than after the poll's timeout.
        self.on_failure: Callable[[], None] | None = None
        self._seen_subscription = (-1, False)
        self._frozen: set[TopicPartition] = set()

    def _init_membership(self, config: Any) -> None:
        """Settings and state machine (the consumer-protocol driver overrides this)."""
        settings = config if isinstance(config, GroupSettings) else GroupSettings.from_config(config)
        self._settings = _client_backoffs(settings, config, self._client)
        self._m = Membership(self._settings, now=self._now())

    # ------------------------------------------------------------------ introspection
    @property
    def group_id(self) -> str:
        return self._settings.group_id

    @property
    def settings(self) -> GroupSettings:
        return self._settings

    @property
    def membership(self) -> Membership:
        """The state machine (read-only use: state, member id, generation...)."""
        return self._m

    @property
    def state(self) -> MemberState:
        return self._m.state

    @property
    def listener(self) -> object | None:
        return self._listener if self._listener is not None else self._sub.rebalance_listener

    @listener.setter
    def listener(self, value: object | None) -> None:
        self._listener = value

    def add_listener(self, listener: object) -> None:
        """Register an internal listener, invoked before the user's."""
        self._internal_listeners.append(listener)

    def remove_listener(self, listener: object) -> None:
        if listener in self._internal_listeners:
            self._internal_listeners.remove(listener)

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(
            group_id=self._settings.group_id,
            generation_id=self._m.generation,
            member_id=self._m.member_id,
            group_instance_id=self._settings.group_instance_id,
        )

    def _now(self) -> float:
        return self._clock() * 1000.0

    def _kick(self) -> None:
        self._wake.set()
        self._hb_wake.set()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the membership and heartbeat tasks (idempotent)."""
        if self._closed or self._closing:
            raise ClosedError("group coordinator is closed")
        if self._main_task is not None:
            return
        self._m.polled(self._now())
        self._sync_subscription()
        self._sub.add_listener(self)
        # On trio the tasks live in the client's task group (None: not started).
        owner = getattr(self._client, "_owner", None)
        self._main_task = _backend.spawn(owner, self._main_loop(), f"group-{self.group_id}")
        if self._main_task is None:
            raise ClosedError("the group's client is not started")
        self._hb_task = _backend.spawn(owner, self._heartbeat_loop(), f"group-{self.group_id}-heartbeat")

    async def close(self, timeout_ms: float = 30000) -> None:
        """Revoke partitions (commit first when auto-commit is on), leave the group
        (dynamic members only) and stop the tasks. Idempotent; bounded by ``timeout_ms``."""
        if self._close_done is not None:
            await _backend.shield(self._close_done)
            return
        self._close_done = _backend.loop().create_future()
        try:
            self._closing = True
            self._kick()
            self._io_guard.interrupt()
            deadline = self._now() + timeout_ms
            if self._main_task is not None:
                await self._stop_task(self._main_task, timeout_ms)
            if self._main_task is not None:
                actions = self._m.close(self._now())
                self._step = None
                try:
                    async with _backend.timeout(max(deadline - self._now(), 1) / 1000):
                        await self._execute(actions)
                except (TimeoutError, KafkaError) as exc:
                    log.warning(
                        "group %s: close: %s", self.group_id, self._unfinished_close_step(exc, timeout_ms)
                    )
            else:
                self._m.close(self._now())
            if self._hb_task is not None:
                await self._stop_task(self._hb_task, 0)
            self._sub.remove_listener(self)
        finally:
            self._closed = True
            self._app_idle.set()
            self._close_done.set_result(None)

    def _unfinished_close_step(self, exc: BaseException, timeout_ms: float) -> str:
        """Which step of ``close`` did not finish, and what that means for the application."""
        step = self._step
        why = (
            f"did not complete within the close timeout of {timeout_ms:.0f} ms"
            if isinstance(exc, TimeoutError)
            else f"failed: {exc!r}"
        )
        if isinstance(step, CommitOffsets):
            offsets = self._sub.consumed_offsets()
            if step.partitions is not None:
                offsets = {tp: o for tp, o in offsets.items() if tp in step.partitions}
            listed = ", ".join(f"{tp.topic}-{tp.partition}@{om.offset}" for tp, om in sorted(offsets.items()))
            return (
                f"committing the offsets of the records consumed ({listed}) {why}: these offsets were "
                "NOT committed; the records after the group's last commit will be delivered again"
            )
        if isinstance(step, InvokeListener):
            return (
                f"the on_partitions_{step.kind} listener for {len(step.partitions)} partitions {why}; "
                "it was cancelled, and what it had not done (a commit, say) is not done"
            )
        if step is not None and "Leave" in type(step).__name__:  # SendLeaveGroup, SendLeaveHeartbeat
            return (
                f"leaving the group {why}: the broker removes this member only when its session "
                "times out; until then its partitions are not given to other members"
            )
        name = type(step).__name__ if step is not None else "stopping the group's tasks"
        return f"{name} {why}"

    async def _stop_task(self, task: asyncio.Task[None], grace_ms: float) -> None:
        err = await _backend.stop_task(task, grace_ms / 1000)
        if err is not None:  # already recorded as a crash
            log.debug("group task ended with %r", err)

    async def __aenter__(self) -> GroupCoordinator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ application side
    def _raise_pending(self) -> None:
        if self._crash is not None:
            raise self._crash
        if self._m.fatal is not None:
            raise self._m.fatal
        if self._listener_error is not None:
            err, self._listener_error = self._listener_error, None
            raise err

    async def poll(self) -> None:
        """Called by the consumer on every poll: records the poll time (max_poll_interval_ms),
        triggers (re)joins, waits while rebalance callbacks run, and re-raises fatal group
        errors and the first exception of a listener callback."""
        if self._closed or self._closing:
            raise ClosedError("group coordinator is closed")
        if self._main_task is None:
            await self.start()
        self._raise_pending()
        now = self._now()
        self._expire_session(now)
        # Hot path (every getmany/chunk): wake the loops only when there is news.
        resumed = self._m.polled(now)
        if self._sync_subscription() or resumed:
            self._kick()
        if not self._app_idle.is_set():
            await self._app_idle.wait()
        self._raise_pending()

    # SubscriptionListener: wake the loop when the subscription changes.
    def on_partitions_removed(self, tps: set[TopicPartition]) -> None:
        return None

    def on_position_changed(self, tp: TopicPartition) -> None:
        return None

    def on_state_changed(self) -> None:
        if self._sub.subscription_version != self._seen_subscription[0] or (
            self._sub.is_subscribed != self._seen_subscription[1]
        ):
            self._wake.set()

    def _expire_session(self, now: float) -> None:
        """If the session has run out (see the module docstring), stop handing out records
        of the partitions held, now, and let the main loop declare them lost."""
        before = self._m.sessions_expired
        for action in self._m.expire_session(now):
            assert isinstance(action, FreezePartitions)
            self._freeze(action.partitions)
        if self._m.sessions_expired != before:
            self._wake.set()

    def _session_budget_ms(self, timeout_ms: float) -> float:
        """``timeout_ms``, cut short at the session's deadline: a wait of the main loop
        must not keep it from declaring the partitions of an expired session lost."""
        deadline = self._m.session_deadline()
        if deadline is None:
            return timeout_ms
        return min(timeout_ms, max(deadline - self._now() + 1.0, 1.0))

    def _freeze(self, partitions: Iterable[TopicPartition]) -> None:
        """Pause ``partitions``; those not paused already (by the application) are
        remembered, so that ``_thaw`` resumes only what the coordinator paused."""
        tps = [tp for tp in partitions if self._sub.is_assigned(tp)]
        if tps:
            already = self._sub.paused()
            self._frozen.update(tp for tp in tps if tp not in already)
            self._sub.pause(*tps)

    def _thaw(self, partitions: Iterable[TopicPartition]) -> None:
        wanted = set(partitions)
        tps = [tp for tp in wanted if tp in self._frozen and self._sub.is_assigned(tp)]
        self._frozen -= wanted
        if tps:
            self._sub.resume(*tps)

    def _sync_subscription(self) -> bool:
        seen = (self._sub.subscription_version, self._sub.is_subscribed)
        if seen == self._seen_subscription:
            return False
        self._seen_subscription = seen
        self._m.update_subscription(self._sub.subscribed_topics, self._sub.is_subscribed)
        return True

    # ------------------------------------------------------------------ main loop
    async def _main_loop(self) -> None:
        """Ask the machine for work (``tick``) and execute it in order; with nothing to do,
        sleep until woken, the machine's next deadline or ``_idle_wait_ms``.

        The loop is the same for both group protocols: how the machine is ticked
        (``_tick``), when it has failed (``_membership_failed``) and how long an idle loop
        may sleep (``_idle_wait_ms``) are the protocol's."""
        try:
            while not self._closing:
                self._wake.clear()
                self._sync_subscription()
                now = self._now()
                actions = self._tick(now)
                if actions:
                    await self._execute(actions)
                    self._hb_wake.set()
                    continue
                if self._membership_failed():
                    self._app_idle.set()
                    if self.on_failure is not None:
                        self.on_failure()
                    return
                self._hb_wake.set()
                deadline = self._m.next_deadline(now)
                wait_ms = self._idle_wait_ms()
                if deadline is not None:
                    wait_ms = min(wait_ms, max(deadline - now, 0.0))
                try:
                    async with _backend.timeout(wait_ms / 1000):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        except (asyncio.CancelledError, _backend.cancelled_exc()):
            raise
        except BaseException as exc:
            self._crashed("coordinator loop", exc)
            raise

    def _tick(self, now: float) -> list[Action]:
        """The machine's work at ``now`` (classic protocol: the leader first checks the
        partition counts of the topics it assigned, so new partitions get an owner)."""
        self._check_metadata()
        return self._m.tick(now)

    def _membership_failed(self) -> bool:
        """True once the machine has failed for good (the main loop then ends)."""
        return self._m.state is MemberState.FAILED

    def _idle_wait_ms(self) -> float:
        """The longest the main loop sleeps with nothing to do (classic protocol: one
        heartbeat interval, to notice metadata changes)."""
        return float(self._settings.heartbeat_interval_ms)

    def _crashed(self, task: str, exc: BaseException) -> None:
        """One of the group's tasks died of an unexpected exception (a bug, not a Kafka
        error the protocol handles): record it as the coordinator's crash, which ``poll``
        (so the consumer's ``getmany``) raises from now on, and stop making a ``poll`` wait
        for listener callbacks. Without it the member would go on without that task (no
        heartbeats, or no rebalances) while the application keeps polling."""
        log.error("group %s: %s crashed", self.group_id, task, exc_info=exc)
        if self._crash is None:  # the first crash is the one to report
            self._crash = (
                exc if isinstance(exc, KafkaError) else KafkaError(f"group coordinator crashed: {exc!r}")
            )
        self._app_idle.set()
        if self.on_failure is not None:
            self.on_failure()

    def _check_metadata(self) -> None:
        if not self._m.is_leader or not self._m.assigned_topic_counts:
            return
        try:
            cluster = self._client.cluster
            counts = {t: len(cluster.partitions_for(t)) for t in self._m.assigned_topic_counts}
        except Exception:  # no metadata yet
            return
        self._m.check_metadata(counts)

    async def _execute(self, actions: Iterable[Action]) -> None:
        """Run actions in order; outcomes of requests are fed back and may append more."""
        queue: deque[Action] = deque(actions)
        try:
            while queue:
                if any(isinstance(a, _APP_ACTIONS) for a in queue):
                    self._app_idle.clear()
                else:
                    self._app_idle.set()
                action = queue.popleft()
                self._step = action
                more = await self._do(action)
                queue.extend(more)
        finally:
            self._app_idle.set()

    def _interrupted_by_close(self) -> bool:
        """True when the CancelledError came from ``close`` cancelling in-flight I/O
        (not from someone cancelling the loop task itself)."""
        return self._closing and not _backend.Interruptible.caller_cancelled()

    async def _io(self, aw: Awaitable[T]) -> T:
        """Await network I/O in a way ``close`` can interrupt (raised as
        ``asyncio.CancelledError`` on both libraries)."""
        return await self._io_guard.run(aw)

    async def _do(self, action: Action) -> list[Action]:
        m = self._m
        if log.isEnabledFor(logging.DEBUG):
            log.debug("group %s member %s: %s", self.group_id, m.member_id or "-", type(action).__name__)
        if isinstance(action, FindCoordinator):
            if self._closing:
                return []
            if action.invalidate:
                self._client.invalidate_coordinator(self.group_id)
            request_timeout = getattr(getattr(self._client, "config", None), "request_timeout_ms", None)
            lookup_ms = float(request_timeout) if isinstance(request_timeout, int | float) else 30000.0
            try:
                node = await self._io(
                    self._client.find_coordinator(
                        self.group_id, timeout_ms=self._session_budget_ms(lookup_ms)
                    )
                )
            except asyncio.CancelledError:
                if self._interrupted_by_close():
                    return []
                raise
            except KafkaError as exc:
                m.coordinator_failed(exc, self._now())
                return []
            m.coordinator_found(node, self._now())
            self._hb_wake.set()
            return []

        if isinstance(action, SendJoinGroup):
            if self._closing:
                return []
            req = m.join_request(action.attempt, self._now())
            if req is None:
                return []
            if m.coordinator is None:  # lost while the callbacks ran
                return m.join_failed(action.attempt, KafkaConnectionError("coordinator unknown"), self._now())
            try:
                resp = await self._io(
                    self._client.send(
                        req, node_id=m.coordinator, timeout_ms=action.timeout_ms, lane=Lane.COORDINATOR
                    )
                )
            except asyncio.CancelledError:
                if self._interrupted_by_close():
                    return []
                raise
            except (KafkaConnectionError, KafkaTimeoutError, ClosedError, BrokerResponseError) as exc:
                return m.join_failed(action.attempt, exc, self._now())
            except KafkaError as exc:  # VersionError (e.g. static membership on an old broker)
                m.fail(exc)
                return []
            assert isinstance(resp, JoinGroupResponse)
            return m.join_response(action.attempt, resp, self._now())

        if isinstance(action, ComputeAssignment):
            try:
                assignments, counts = await self._io(self._assign(action))
            except asyncio.CancelledError:
                if self._interrupted_by_close():
                    return []
                raise
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                # Metadata unavailable: this exchange is lost, rejoin.
                log.info("group %s: metadata for the assignment unavailable (%r)", self.group_id, exc)
                return m.assignment_io_failed(action.attempt, exc, self._now())
            except Exception as exc:
                return m.assignment_failed(action.attempt, exc, self._now())
            return m.assignment_computed(action.attempt, assignments, counts, self._now())

        if isinstance(action, SendSyncGroup):
            if self._closing:
                return []
            if m.coordinator is None:
                return m.sync_failed(action.attempt, KafkaConnectionError("coordinator unknown"), self._now())
            try:
                resp = await self._io(
                    self._client.send(
                        action.request,
                        node_id=m.coordinator,
                        timeout_ms=action.timeout_ms or None,
                        lane=Lane.COORDINATOR,
                    )
                )
            except asyncio.CancelledError:
                if self._interrupted_by_close():
                    return []
                raise
            except (KafkaConnectionError, KafkaTimeoutError, ClosedError, BrokerResponseError) as exc:
                return m.sync_failed(action.attempt, exc, self._now())
            except KafkaError as exc:
                m.fail(exc)
                return []
            assert isinstance(resp, SyncGroupResponse)
            return m.sync_response(action.attempt, resp, self._now())

        if isinstance(action, SendLeaveGroup):
            await self._leave(action)
            return []

        if isinstance(action, FreezePartitions):
            self._freeze(action.partitions)
            return []

        if isinstance(action, ThawPartitions):
            self._thaw(action.partitions)
            return []

        if isinstance(action, InvokeListener):
            await self._invoke(action)
            return []

        if isinstance(action, CommitOffsets):
            offsets = self._sub.consumed_offsets()
            if action.partitions is not None:
                offsets = {tp: o for tp, o in offsets.items() if tp in action.partitions}
            if offsets:
                try:
                    # A commit that cannot complete within the session is refused anyway.
                    await self._commit(offsets, self._session_budget_ms(self._api_timeout_ms))
                except asyncio.CancelledError:
                    if self._interrupted_by_close():
                        return []
                    raise
                except KafkaError as exc:
                    log.warning(
                        "group %s: automatic offset commit failed: %s (not committed: unless a later "
                        "commit succeeds, the records after the last commit will be delivered again)",
                        self.group_id,
                        exc,
                    )
            return []

        if isinstance(action, RemovePartitions):
            self._frozen.difference_update(action.partitions)
            self._sub.revoke(action.partitions)
            return []

        if isinstance(action, AddPartitions):
            self._sub.assign_from_group(action.partitions)
            return []

        raise AssertionError(f"unknown action {action!r}")  # pragma: no cover

    async def _assign(self, action: ComputeAssignment) -> tuple[dict[str, bytes], dict[str, int]]:
        """Leader: fresh metadata for every member's topics, then the assignor."""
        topics: set[str] = set()
        for member in action.members:
            try:
                topics.update(decode_subscription(member.metadata).topics)
            except KafkaError:
                continue  # run_assignor reports it
        # Fresh metadata (the client sends it on its least-loaded connection of any lane,
        # so it does not wait behind the fetcher's long polls when another one is idle).
        cluster = await self._client.refresh_metadata(sorted(topics)) if topics else self._client.cluster
        counts: dict[str, int] = {}
        racks: dict[TopicPartition, set[str]] = {}
        for topic in topics:
            info = cluster.topics.get(topic)
            if info is None or info.error_code != 0:
                counts[topic] = 0
                continue
            counts[topic] = len(info.partitions)
            for p, pinfo in info.partitions.items():
                rset = set()
                for r in pinfo.replicas:
                    broker = cluster.brokers.get(r)
                    if broker is not None and broker.rack:
                        rset.add(broker.rack)
                if rset:
                    racks[TopicPartition(topic, p)] = rset
        present = {t: c for t, c in counts.items() if c > 0}
        assignments = run_assignor(action.assignor, action.members, present, racks or None)
        return assignments, counts

    async def _leave(self, action: SendLeaveGroup) -> None:
        node = self._m.coordinator
        if node is None:
            return
        try:
            version = await self._client.negotiated_version(
                node, LeaveGroupRequest.API_KEY, lane=Lane.COORDINATOR, timeout_ms=5000
            )
            req = leave_group_request(
                self.group_id, action.member_id, action.group_instance_id, action.reason, version
            )
            resp = await self._client.send(
                req, node_id=node, version=version, timeout_ms=5000, lane=Lane.COORDINATOR
            )
        except asyncio.CancelledError:
            raise
        except KafkaError as exc:
            log.info("group %s: LeaveGroup failed (ignored): %r", self.group_id, exc)
            return
        if isinstance(resp, LeaveGroupResponse) and resp.error_code:
            log.info("group %s: LeaveGroup answered %s", self.group_id, error_for(resp.error_code).name)
        else:
            log.info(
                "group %s: member %s left the group (%s)", self.group_id, action.member_id, action.reason
            )

    async def _invoke(self, action: InvokeListener) -> None:
        listeners = [*self._internal_listeners]
        user = self.listener
        if user is not None:
            listeners.append(user)
        for listener in listeners:
            try:
                await invoke_listener(listener, action.kind, set(action.partitions))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception(
                    "group %s: on_partitions_%s callback of %r failed", self.group_id, action.kind, listener
                )
                if self._listener_error is None:
                    self._listener_error = exc

    # ------------------------------------------------------------------ heartbeats
    async def _heartbeat_loop(self) -> None:
        """Send heartbeats when the machine asks for one, also while listener callbacks run.

        The loop is the same for both group protocols: the machine (classic or KIP-848)
        builds the request and says when the next one is due (``heartbeat_request``,
        ``time_to_heartbeat``); what its outcome means is the protocol's, in
        ``_heartbeat_answered`` and ``_heartbeat_failed``."""
        m = self._m
        try:
            while not self._closed:
                self._hb_wake.clear()
                now = self._now()
                self._expire_session(now)
                req = m.heartbeat_request(now)
                session_end = m.session_deadline()
                if req is None:
                    if m.coordinator is None:
                        self._wake.set()  # the main loop looks the coordinator up
                    delay = m.time_to_heartbeat(now)
                    if session_end is not None:  # wake to expire the session on time
                        until_end = session_end - now + 1.0
                        delay = until_end if delay is None else min(delay, until_end)
                    try:
                        async with _backend.timeout(None if delay is None else max(delay, 1.0) / 1000):
                            await self._hb_wake.wait()
                    except TimeoutError:
                        pass
                    continue
                timeout_ms = self._heartbeat_timeout_ms()
                if session_end is not None:  # no answer by then: the session is over anyway
                    timeout_ms = min(timeout_ms, max(session_end - now + 1.0, 1.0))
                try:
                    resp = await self._client.send(
                        req,
                        node_id=m.coordinator,
                        timeout_ms=timeout_ms,
                        lane=Lane.COORDINATOR,
                    )
                except (asyncio.CancelledError, _backend.cancelled_exc()):
                    raise
                except KafkaError as exc:
                    self._heartbeat_failed(req, exc)
                    continue
                self._heartbeat_answered(req, resp)
        except (asyncio.CancelledError, _backend.cancelled_exc()):
            raise
        except BaseException as exc:  # a bug: must not stop heartbeats silently
            self._crashed("heartbeat loop", exc)
            raise

    def _heartbeat_failed(self, request: HeartbeatRequest, exc: KafkaError) -> None:
        """A heartbeat got no answer (classic protocol: the machine decides what follows)."""
        self._m.heartbeat_failed(request, exc, self._now())
        self._wake.set()

    def _heartbeat_answered(self, request: HeartbeatRequest, response: object) -> None:
        """Feed a Heartbeat answer to the machine; wake the main loop when it changed
        what the member must do (rejoin, find the coordinator, fail)."""
        assert isinstance(response, HeartbeatResponse)
        m = self._m
        before = (m.rejoin_needed, m.coordinator, m.generation)
        m.heartbeat_response(request, response.error_code, self._now())
        if (m.rejoin_needed, m.coordinator, m.generation) != before or m.fatal is not None:
            self._wake.set()

    def _heartbeat_timeout_ms(self) -> float:
        """A heartbeat unanswered for a whole session is as good as lost (the broker has
        expired us by then): do not wait the full request timeout if that is longer."""
        request_timeout = getattr(getattr(self._client, "config", None), "request_timeout_ms", None)
        session = float(self._settings.session_timeout_ms)
        return min(session, float(request_timeout)) if isinstance(request_timeout, int | float) else session

    # ------------------------------------------------------------------ offsets
    async def _coordinator_node(self, deadline: float) -> int:
        node = self._m.coordinator
        if node is not None:
            return node
        remaining = max(deadline - self._now(), 1.0)
        node = await self._client.find_coordinator(self.group_id, timeout_ms=remaining)
        if self._m.coordinator is None:
            # Share the answer: heartbeats wait for a known coordinator, and the main task,
            # which would look it up, may be the one waiting for this request.
            self._m.coordinator_found(node, self._now())
            self._hb_wake.set()
        return node

    def _coordinator_unreachable(self) -> None:
        """A request to the coordinator failed in transit: forget the coordinator, and the
        client's cached answer too (the broker may have died; the next lookup finds its
        successor once Kafka has moved the group)."""
        self._m.coordinator_lost(self._now())
        self._client.invalidate_coordinator(self.group_id)
        self._wake.set()

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int | tuple[int, str]] | None = None
    ) -> None:
        """Commit ``offsets`` (next offset to read per partition), or every consumed
        position when None. Raises ``CommitFailedError`` when the group has moved on."""
        if self._closed:
            raise ClosedError("group coordinator is closed")
        self._raise_fatal()
        to_commit = self._sub.consumed_offsets() if offsets is None else normalize_offsets(offsets)
        if not to_commit:
            return
        await self._commit(to_commit, self._api_timeout_ms)

    def _raise_fatal(self) -> None:
        if self._m.fatal is not None:
            raise self._m.fatal

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float) -> None:
        """Commit ``offsets``, retrying until ``timeout_ms`` has passed.

        The retries are the same for both group protocols (coordinator lookup, transport
        failures, backoff); what the broker's error code means is the protocol's, in
        ``_commit_rejected``, as are the error of a member that may not commit
        (``_commit_without_identity``) and the one raised when time runs out
        (``_commit_gave_up``)."""
        deadline = self._now() + timeout_ms
        retry = self._offset_retry(deadline)
        while True:
            ident = self._m.commit_identity()
            if ident is None:
                raise self._commit_without_identity()
            generation, member_id, instance_id = ident
            try:
                node = await self._coordinator_node(deadline)
                resp = await self._send_commit(node, offsets, generation, member_id, instance_id, deadline)
                code = first_commit_error(resp)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self._coordinator_unreachable()
                err: KafkaError = exc
            except BrokerResponseError as exc:  # find_coordinator gave up
                err = exc
                if not exc.retriable:
                    raise
            else:
                if code == 0:
                    return
                err = self._commit_rejected(generation, code)
            delay = retry.next_delay()
            if delay is None or self._closed:
                raise self._commit_gave_up(err)
            await _backend.sleep(delay)

    def _offset_retry(self, deadline_ms: float) -> Retry:
        """The attempts of one commit or offset fetch, until ``deadline_ms`` (``_now``'s clock)."""
        return Retry(self._offset_backoff, clock=lambda: self._now() / 1000, deadline=deadline_ms / 1000)

    def _commit_without_identity(self) -> CommitFailedError:
        """The error of a commit this member may not make (classic protocol: no generation)."""
        return CommitFailedError(
            "cannot commit: this member is not part of an active group generation "
            "(it is rejoining after a rebalance or was fenced); its partitions may have been reassigned"
        )

    def _commit_rejected(self, generation: int, code: int) -> KafkaError:
        """An OffsetCommit made with ``generation`` was answered ``code`` (not 0): raise the
        error that ends the commit, or return the one to retry after (classic protocol)."""
        if code in _GENERATION_ERRORS:
            failure = self._m.commit_failed(generation, code, self._now())
            self._wake.set()
            raise failure
        err = error_for(code, f"OffsetCommit for group {self.group_id!r}")
        if code in _COORDINATOR_MOVED:
            self._m.coordinator_lost(self._now())
            self._client.invalidate_coordinator(self.group_id)
            self._wake.set()
        elif code not in (_COORDINATOR_LOADING, _REQUEST_TIMED_OUT) and not err.retriable:
            raise err
        return err

    def _commit_gave_up(self, err: KafkaError) -> KafkaError:
        """The error to raise when the commit's time ran out (or the group closed) after
        ``err``: ``err`` itself in the classic protocol."""
        return err

    async def _send_commit(
        self,
        node: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        generation: int,
        member_id: str,
        instance_id: str | None,
        deadline: float,
    ) -> OffsetCommitResponse:
        version = await self._client.negotiated_version(
            node,
            OffsetCommitRequest.API_KEY,
            lane=Lane.COORDINATOR,
            timeout_ms=max(deadline - self._now(), 1.0),
        )
        ids = self._topic_ids({tp.topic for tp in offsets})
        version = usable_version(version, ids)
        req = commit_request(self.group_id, offsets, generation, member_id, instance_id, version, ids)
        timeout = max(deadline - self._now(), 1.0)
        resp = await self._client.send(
            req, node_id=node, version=version, timeout_ms=timeout, lane=Lane.COORDINATOR
        )
        assert isinstance(resp, OffsetCommitResponse)
        return resp

    def _topic_ids(self, topics: Iterable[str]) -> dict[str, uuid.UUID]:
        try:
            cluster = self._client.cluster
        except Exception:
            return {t: ZERO_UUID for t in topics}
        out = {}
        for t in topics:
            tid = None
            try:
                tid = cluster.topic_id(t)
            except Exception:
                tid = None
            out[t] = tid if isinstance(tid, uuid.UUID) else ZERO_UUID
        return out

    async def fetch_committed(
        self, tps: Iterable[TopicPartition], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets (OffsetFetch with require_stable, KIP-447): None where nothing
        is committed. Retries while offsets are unstable (a transaction is pending)."""
        if self._closed:
            raise ClosedError("group coordinator is closed")
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        deadline = self._now() + (self._api_timeout_ms if timeout_ms is None else timeout_ms)
        retry = self._offset_retry(deadline)
        while True:
            try:
                node = await self._coordinator_node(deadline)
                result, code = await self._send_offset_fetch(node, wanted, deadline)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self._coordinator_unreachable()
                err: KafkaError = exc
            else:
                if code == 0:
                    return result
                err = error_for(code, f"OffsetFetch for group {self.group_id!r}")
                if code in _COORDINATOR_MOVED:
                    self._m.coordinator_lost(self._now())
                    self._client.invalidate_coordinator(self.group_id)
                    self._wake.set()
                elif code not in (_COORDINATOR_LOADING, _UNSTABLE_OFFSET_COMMIT, _REQUEST_TIMED_OUT):
                    if not err.retriable:
                        raise err
            delay = retry.next_delay()
            if delay is None or self._closed:
                raise err
            await _backend.sleep(delay)

    async def _send_offset_fetch(
        self, node: int, tps: list[TopicPartition], deadline: float
    ) -> tuple[dict[TopicPartition, OffsetAndMetadata | None], int]:
        """One OffsetFetch; returns the offsets and the first (group or partition) error code."""
        version = await self._client.negotiated_version(
            node,
            OffsetFetchRequest.API_KEY,
            lane=Lane.COORDINATOR,
            timeout_ms=max(deadline - self._now(), 1.0),
        )
        ids = self._topic_ids({tp.topic: None for tp in tps})
        version = usable_version(version, ids)
        req = offset_fetch_request(self.group_id, tps, version, ids)
        timeout = max(deadline - self._now(), 1.0)
        resp = await self._client.send(
            req, node_id=node, version=version, timeout_ms=timeout, lane=Lane.COORDINATOR
        )
        assert isinstance(resp, OffsetFetchResponse)
        result, first_error, unknown = read_offset_fetch(resp, version, tps, ids)
        for tp in unknown:
            log.warning("group %s: committed offset of %s: unknown topic or partition", self.group_id, tp)
        return result, first_error


SettingsT = TypeVar("SettingsT")


def _client_backoffs(settings: SettingsT, config: Any, client: object) -> SettingsT:
    """Consumer configs leave backoffs to the client's configuration: copy them in."""
    if hasattr(config, "retry_backoff_ms"):
        return settings
    client_config = getattr(client, "config", None)
    backoff = getattr(client_config, "retry_backoff_ms", None)
    backoff_max = getattr(client_config, "retry_backoff_max_ms", None)
    if isinstance(backoff, int | float) and isinstance(backoff_max, int | float):
        return dataclasses.replace(  # type: ignore[type-var]
            settings,
            retry_backoff_ms=int(backoff),
            retry_backoff_max_ms=int(max(backoff, backoff_max)),
        )
    return settings
