"""The fetcher: background tasks keeping the consumer's buffer filled and positions valid.

Tasks (all owned here, cancelled and awaited by :meth:`Fetcher.close`):

* one *fetch loop per broker* leading (or serving, KIP-392) fetchable partitions. A
  loop has at most one Fetch in flight, built by that broker's
  :class:`~aiokafka_lite.consume.fetch.session.FetchSession`. Fetching is pipelined: a
  partition's next fetch starts where its buffered data ends, so the consumer rarely
  waits for a round trip. Requests are sized by the shared byte budget
  (``max_buffered_bytes``); when it is spent the loops wait for the consumer.
* a *manager* that starts loops for new leaders, notices metadata changes and hands
  them to the consumer (pattern subscriptions).
* a *position resolver* that gives positions to partitions without one (committed
  offset via the group coordinator, else ListOffsets per ``auto_offset_reset``) and
  validates positions after leader changes (OffsetForLeaderEpoch, KIP-320).

Leader discovery (KIP-951): a partition answered with NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH may name its new leader (``CurrentLeader`` plus the response's
``NodeEndpoints``). As Java's fetcher, a leader with a newer epoch than the cached one
goes into the cluster view at once and the partition is fetched from it without
backoff (after the usual KIP-320 position validation); a metadata refresh is still
requested in the background.

Responses are framed and CRC-checked here, off the consumer's critical path; record
decoding happens batch by batch when the consumer reaches the data.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from aiokafka_lite.consume.consumer_config import ConsumerConfig
from aiokafka_lite.consume.fetch.buffer import FetchBuffer
from aiokafka_lite.consume.fetch.decode import CompletedFetch, parse_partition
from aiokafka_lite.consume.fetch.offset_lookup import (
    EARLIEST,
    LATEST,
    list_offsets,
    offsets_for_leader_epochs,
)
from aiokafka_lite.consume.fetch.session import SESSION_ERRORS, FetchPlan, FetchSession, PartitionFetch
from aiokafka_lite.consume.subscription import (
    OffsetAndMetadata,
    PartitionState,
    SubscriptionState,
    SubscriptionType,
)
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.metadata import LeaderHint, hint_endpoints
from aiokafka_lite.net.retry import Backoff, Retry
from aiokafka_lite.wire.messages.fetch_request import FetchRequest
from aiokafka_lite.wire.messages.fetch_response import FetchResponse
from aiokafka_lite.wire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from aiokafka_lite.net import Client, ClusterMetadata

__all__ = ["Fetcher"]

log = logging.getLogger(__name__)
T = TypeVar("T")

FETCH_KEY = FetchRequest.API_KEY
OFFSET_FOR_LEADER_EPOCH_KEY = 23
_OFFSET_OUT_OF_RANGE = 1
#: Partition errors whose response may name the new leader (KIP-951).
_LEADER_MOVED_ERRORS = (6, 74)  # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH
_LOOP_IDLE_EXIT_S = 30.0
_MANAGER_TICK_S = 0.5

CommittedLookup = Callable[[set[TopicPartition]], Awaitable[dict[TopicPartition, OffsetAndMetadata | None]]]


class Fetcher:
    """Owns the fetch loops, the buffer and position resolution for one consumer."""

    def __init__(
        self,
        client: Client,
        subscription: SubscriptionState,
        config: ConsumerConfig,
        *,
        committed_lookup: CommittedLookup | None = None,
        on_metadata: Callable[[ClusterMetadata], None] | None = None,
    ) -> None:
        self._client = client
        self._sub = subscription
        self._cfg = config
        self._committed_lookup = committed_lookup
        self._on_metadata = on_metadata
        self.buffer = FetchBuffer(config.max_buffered_bytes)
        # Waits after failed fetches and position lookups: twice retry_backoff_ms after
        # the first failure, doubling up to 32 times it (at most 5 s).
        base_ms = client.config.retry_backoff_ms
        self._backoff = Backoff(2 * base_ms, min(32 * base_ms, 5000.0), jitter=0)
        self._isolation = 1 if config.read_committed else 0
        # Wait for at least this much budget before sending (avoids dribbling tiny fetches).
        self._min_request_bytes = max(1, min(config.fetch_max_bytes, config.max_buffered_bytes // 4))
        self.sessions: dict[int, FetchSession] = {}
        self._loops: dict[int, asyncio.Task[None]] = {}
        self._loop_events: dict[int, asyncio.Event] = {}
        # Next offset to fetch and the leader epoch of the last fetched batch.
        self._fetch_pos: dict[TopicPartition, tuple[int, int | None]] = {}
        # Bumped whenever a partition's fetch state resets: in-flight responses become stale.
        self._gen: dict[TopicPartition, int] = {}
        self._inflight: dict[TopicPartition, int] = {}
        # Partitions whose buffered data ends in an error the user must see first.
        self.halted: set[TopicPartition] = set()
        self._backoff_until: dict[TopicPartition, float] = {}
        self._preferred: dict[TopicPartition, tuple[int, float]] = {}
        self._leader_epochs: dict[TopicPartition, int] = {}
        # Errors about positions (no offset with auto_offset_reset=none, log truncation);
        # raised by the consumer on every poll until the user seeks.
        self.position_errors: dict[TopicPartition, E.KafkaError] = {}
        self.data_ready = _backend.event()
        self._space = _backend.event()
        self._manager_event = _backend.event()
        self._resolve_event = _backend.event()
        self._positions_changed = _backend.event()
        self._manager: asyncio.Task[None] | None = None
        self._resolver: asyncio.Task[None] | None = None
        self._helpers: set[asyncio.Task[Any]] = set()
        self._refresh_task: asyncio.Task[None] | None = None
        self._refresh_topics: set[str] = set()
        self._closed = False
        self._started = False
        #: Record-batch bytes received per topic (counted per partition in a response).
        self.bytes_by_topic: dict[str, int] = {}
        #: Partitions moved to a new leader named by a fetch response (KIP-951).
        self.partitions_moved_by_leader_hint = 0
        #: False: ignore the leaders fetch responses name and wait for metadata, as
        #: clients before KIP-951 do (for comparisons, e.g. bench/leader_failover.py).
        self.use_leader_hints = True
        subscription.add_listener(self)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._manager = self._spawn(self._manage(), "aiokafka_lite.fetcher.manager")
        self._resolver = self._spawn(self._resolve_loop(), "aiokafka_lite.fetcher.positions")
        self._wake()

    def _spawn(
        self, coro: Coroutine[Any, Any, T], name: str = "aiokafka_lite.fetcher.helper"
    ) -> asyncio.Task[T]:
        """A background task, cancelled and awaited by ``close()`` (on trio it lives in the
        client's task group; the consumer closes its client after the fetcher)."""
        task: asyncio.Task[T] | None = _backend.spawn(self._client._owner, coro, name)
        if task is None:
            raise E.ClosedError("the consumer's client is closed")
        return task

    async def close(self, *, close_sessions: bool = True) -> None:
        """Stop every task (awaited), then close broker-side fetch sessions best-effort."""
        if self._closed:
            return
        self._closed = True
        self._sub.remove_listener(self)
        tasks: list[asyncio.Task[Any]] = [*self._loops.values(), *self._helpers]
        for t in (self._manager, self._resolver):
            if t is not None:
                tasks.append(t)
        for t in tasks:
            t.cancel()
        await _backend.gather(*tasks, return_exceptions=True)
        self._loops.clear()
        self.data_ready.set()
        if close_sessions and not self._client.closed:
            await self._close_sessions()
        self.buffer.clear()

    async def _close_sessions(self) -> None:
        async def close_one(node: int, plan: FetchPlan) -> None:
            req = plan.to_request(max_wait_ms=0, min_bytes=0, max_bytes=1, isolation_level=self._isolation)
            with contextlib.suppress(E.KafkaError, OSError):
                await self._client.send(req, node_id=node, timeout_ms=1000)

        jobs = []
        for node, session in self.sessions.items():
            plan = session.close_plan()
            if plan is not None:
                jobs.append(close_one(node, plan))
        if jobs:
            with contextlib.suppress(TimeoutError):
                async with _backend.timeout(2.0):
                    await _backend.gather(*jobs, return_exceptions=True)

    def _spawn_helper(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = self._spawn(coro)
        self._helpers.add(task)
        task.add_done_callback(self._helper_done)

    def _helper_done(self, task: asyncio.Task[Any]) -> None:
        self._helpers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("fetcher helper failed: %r", task.exception())

    # ------------------------------------------------------------------ subscription listener
    def on_partitions_removed(self, tps: set[TopicPartition]) -> None:
        self.buffer.drop(tps)
        for tp in tps:
            self._reset_fetch_state(tp)
            self.halted.discard(tp)
            self._backoff_until.pop(tp, None)
            self._preferred.pop(tp, None)
            self._leader_epochs.pop(tp, None)
            self.position_errors.pop(tp, None)
        self._space.set()

    def on_position_changed(self, tp: TopicPartition) -> None:
        self.buffer.drop((tp,))
        self._reset_fetch_state(tp)
        self.halted.discard(tp)
        self.position_errors.pop(tp, None)
        self._space.set()
        self._positions_changed.set()

    def on_state_changed(self) -> None:
        self._wake()
        self.data_ready.set()

    def _wake(self) -> None:
        for ev in self._loop_events.values():
            ev.set()
        self._manager_event.set()
        self._resolve_event.set()

    def _reset_fetch_state(self, tp: TopicPartition) -> None:
        self._fetch_pos.pop(tp, None)
        self._gen[tp] = self._gen.get(tp, 0) + 1

    def consumed(self) -> None:
        """The consumer freed buffer space (a completed fetch was fully consumed)."""
        self._space.set()

    # ------------------------------------------------------------------ manager
    def _fetch_node(self, tp: TopicPartition, cluster: ClusterMetadata, now: float) -> int | None:
        preferred = self._preferred.get(tp)
        if preferred is not None:
            node, expiry = preferred
            if now < expiry and node in cluster.brokers:
                return node
            del self._preferred[tp]
        return cluster.leader_for(tp)

    async def _manage(self) -> None:
        loop = _backend.loop()
        last_cluster: ClusterMetadata | None = None
        while True:
            self._manager_event.clear()
            cluster = self._client.cluster
            if cluster is not last_cluster:
                last_cluster = cluster
                if self._on_metadata is not None:
                    try:
                        self._on_metadata(cluster)
                    except Exception:
                        log.exception("consumer metadata callback failed")
                for ev in self._loop_events.values():
                    ev.set()
            now = loop.time()
            needed: set[int] = set()
            unknown_leader: set[str] = set()
            for tp, st in self._sub.states().items():
                if st.position is None or st.awaiting_validation:
                    if tp not in self.position_errors:
                        self._resolve_event.set()  # retried each tick (e.g. leader was unknown)
                    continue
                if st.paused:
                    continue
                node = self._fetch_node(tp, cluster, now)
                if node is None:
                    unknown_leader.add(tp.topic)
                else:
                    needed.add(node)
            if self._sub.subscription_type is SubscriptionType.TOPICS:
                # Subscribed topics that do not exist (yet): look again every tick.
                unknown_leader.update(t for t in self._sub.subscribed_topics if t not in cluster.topics)
            if unknown_leader:
                self._refresh_metadata_soon(unknown_leader)
            for node in needed:
                if node not in self._loops:
                    self._loop_events[node] = _backend.event()
                    task = self._spawn(self._node_loop(node), f"aiokafka_lite.fetcher.node-{node}")
                    self._loops[node] = task
                    task.add_done_callback(self._loop_done)
            with contextlib.suppress(TimeoutError):
                async with _backend.timeout(_MANAGER_TICK_S):
                    await self._manager_event.wait()

    def _loop_done(self, task: asyncio.Task[None]) -> None:
        for node, t in list(self._loops.items()):
            if t is task:
                del self._loops[node]
                self._loop_events.pop(node, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("fetch loop crashed", exc_info=task.exception())
            self._manager_event.set()

    # ------------------------------------------------------------------ fetch loop
    def _wanted(self, node: int, version: int, now: float) -> dict[TopicPartition, PartitionFetch]:
        cluster = self._client.cluster
        use_ids = version >= 13
        max_bytes = self._cfg.max_partition_fetch_bytes
        out: dict[TopicPartition, PartitionFetch] = {}
        for tp, st in self._sub.states().items():
            if st.paused or st.position is None or st.awaiting_validation or tp in self.halted:
                continue
            if self._backoff_until.get(tp, 0.0) > now:
                continue
            if self._fetch_node(tp, cluster, now) != node:
                continue
            other = self._inflight.get(tp)
            if other is not None and other != node:
                continue
            part = cluster.partition(tp)
            leader_epoch = part.leader_epoch if part is not None else -1
            prev = self._leader_epochs.get(tp)
            self._leader_epochs[tp] = leader_epoch
            if prev is not None and leader_epoch > prev >= 0 and st.position_epoch is not None:
                # New leader: check our position is still on its log before fetching (KIP-320).
                self.buffer.drop((tp,))
                self._reset_fetch_state(tp)
                self._sub.hold_for_validation(tp)
                self._resolve_event.set()
                continue
            topic_id = ZERO_UUID
            if use_ids:
                tid = cluster.topic_id(tp.topic)
                if tid is None:
                    self._refresh_metadata_soon((tp.topic,))
                    continue
                topic_id = tid
            fp = self._fetch_pos.get(tp)
            if fp is None:
                fp = self._fetch_pos[tp] = (st.position, st.position_epoch)
            last_epoch = fp[1] if fp[1] is not None and version >= 12 else -1
            out[tp] = PartitionFetch(fp[0], max_bytes, leader_epoch, last_epoch, -1, topic_id)
        return out

    async def _wait(self, event: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with _backend.timeout(seconds):
                await event.wait()

    async def _node_loop(self, node: int) -> None:
        loop = _backend.loop()
        client = self._client
        cfg = self._cfg
        event = self._loop_events[node]
        session = self.sessions.get(node)
        if session is None or session.enabled != cfg.enable_fetch_sessions:
            session = self.sessions[node] = FetchSession(node, enabled=cfg.enable_fetch_sessions)
        timeout_ms = client.config.request_timeout_ms + cfg.fetch_max_wait_ms
        idle_since = loop.time()
        retry = Retry(self._backoff, clock=loop.time)
        while True:
            event.clear()
            if node not in client.cluster.brokers and loop.time() - idle_since > _LOOP_IDLE_EXIT_S:
                return
            try:
                version = await client.negotiated_version(node, FETCH_KEY)
            except E.KafkaError as exc:
                if not exc.retriable:
                    log.error("cannot fetch from node %s: %s", node, exc)
                client.request_metadata_refresh()
                await self._wait(event, _next_wait(retry))
                continue
            now = loop.time()
            wanted = self._wanted(node, version, now)
            if not wanted:
                if now - idle_since > _LOOP_IDLE_EXIT_S:
                    return  # the manager starts a new loop when this node is needed again
                await self._wait(event, 1.0)
                continue
            idle_since = now
            # A response cannot exceed the partitions' limits (KIP-74 aside), so that is
            # all this request needs to reserve: other brokers' loops share the budget.
            want_bytes = min(cfg.fetch_max_bytes, len(wanted) * cfg.max_partition_fetch_bytes)
            threshold = min(want_bytes, self._min_request_bytes)
            if self.buffer.available() < threshold:
                self._space.clear()  # before the re-check: a release right after still wakes us
                if self.buffer.available() < threshold and not self._evict_paused(threshold):
                    await self._wait_space(event)
                    continue
            max_bytes = min(want_bytes, max(self.buffer.available(), 1))
            plan = session.build(wanted)
            request = plan.to_request(
                max_wait_ms=cfg.fetch_max_wait_ms,
                min_bytes=cfg.fetch_min_bytes,
                max_bytes=max_bytes,
                isolation_level=self._isolation,
                rack_id=cfg.client_rack,
            )
            gens = {tp: self._gen.get(tp, 0) for tp in wanted}
            for tp in wanted:
                self._inflight[tp] = node
            self.buffer.reserve(max_bytes)
            try:
                response = await client.send(request, node_id=node, version=version, timeout_ms=timeout_ms)
            except _backend.cancelled_exc():
                session.handle_send_error()
                raise
            except E.KafkaError as exc:
                session.handle_send_error()
                if not self._closed:
                    client.note_error(exc)
                log.debug("fetch from node %s failed: %s", node, exc)
                if exc.retriable:
                    client.request_metadata_refresh()
                else:
                    log.warning("fetch from node %s failed: %s", node, exc)
                await self._wait(event, _next_wait(retry))
                continue
            finally:
                self.buffer.unreserve(max_bytes)
                self._space.set()
                for tp in wanted:
                    if self._inflight.get(tp) == node:
                        del self._inflight[tp]
            assert isinstance(response, FetchResponse)
            check = session.handle_response(plan, response, client.cluster.topic_name)
            if not check.ok:
                if check.error_code in SESSION_ERRORS:
                    log.info(
                        "fetch session %s on node %s reset by the broker (%s); sending a full fetch",
                        plan.session_id,
                        node,
                        E.for_code(check.error_code).__name__,
                    )
                    continue
                if check.error_code:
                    err = E.error_for(check.error_code, f"fetch from node {node}")
                    client.note_error(err)
                    log.warning("fetch from node %s failed: %s", node, err)
                    if err.invalidates_metadata:
                        client.request_metadata_refresh()
                else:
                    log.warning("node %s sent an inconsistent fetch response: %s", node, check.problem)
                await self._wait(event, _next_wait(retry))
                continue
            retry.succeeded()
            self._process(node, plan, response, gens, loop.time())

    async def _wait_space(self, event: asyncio.Event) -> None:
        """Until the consumer frees buffer space or the loop is woken, at most 1 s."""
        await _backend.wait_any((self._space, event), 1.0)

    def _evict_paused(self, needed: int) -> bool:
        """Under budget pressure, drop data buffered for paused partitions (refetched on resume)."""
        victims = [tp for tp in self.buffer.partitions() if (st := self._sub.get_state(tp)) and st.paused]
        if not victims:
            return False
        self.buffer.drop(victims)
        for tp in victims:
            self._reset_fetch_state(tp)
            self.halted.discard(tp)
        return self.buffer.available() >= needed

    # ------------------------------------------------------------------ responses
    def _process(
        self, node: int, plan: FetchPlan, response: FetchResponse, gens: dict[TopicPartition, int], now: float
    ) -> None:
        ids: dict[uuid.UUID, str] | None = None
        added = False
        # Records are zero-copy views of the response frame. With several partitions in
        # a response, one slowly consumed partition would pin the whole frame while the
        # budget counts only its part, so each partition then gets its own copy
        # (a memcpy: cheap next to decoding) and the accounting stays exact.
        shared = sum(1 for t in response.responses for p in t.partitions if p.records) > 1
        moved = self._apply_leader_hints(plan, response)
        for topic in response.responses:
            name = topic.topic
            if not name:
                if ids is None:
                    ids = {pf.topic_id: tp.topic for tp, pf in plan.session_after.items()}
                name = ids.get(topic.topic_id) or self._client.cluster.topic_name(topic.topic_id) or ""
            for pd in topic.partitions:
                tp = TopicPartition(name, pd.partition_index)
                sent = plan.session_after.get(tp)
                st = self._sub.get_state(tp)
                if sent is None or st is None or gens.get(tp) != self._gen.get(tp, 0):
                    continue  # revoked, seeked or reset while the fetch was in flight
                fp = self._fetch_pos.get(tp)
                if fp is None or fp[0] != sent.fetch_offset:
                    continue
                if pd.error_code:
                    self._partition_error(node, tp, st, sent, pd, now, leader_moved=tp in moved)
                elif self._partition_data(node, tp, st, sent, pd, now, shared):
                    added = True
        if added:
            self.data_ready.set()

    def _apply_leader_hints(self, plan: FetchPlan, response: FetchResponse) -> set[TopicPartition]:
        """Take the new leaders ``response`` names into the cluster view (KIP-951); the
        partitions whose leader moved."""
        if not self.use_leader_hints:
            return set()
        hints: dict[TopicPartition, LeaderHint] = {}
        ids: dict[uuid.UUID, str] | None = None
        for topic in response.responses:
            for pd in topic.partitions:
                leader = pd.current_leader
                if pd.error_code not in _LEADER_MOVED_ERRORS or leader.leader_id < 0:
                    continue
                name = topic.topic
                if not name:
                    if ids is None:
                        ids = {pf.topic_id: tp.topic for tp, pf in plan.session_after.items()}
                    name = ids.get(topic.topic_id) or self._client.cluster.topic_name(topic.topic_id) or ""
                if name:
                    hints[TopicPartition(name, pd.partition_index)] = LeaderHint(
                        leader.leader_id, leader.leader_epoch
                    )
        if not hints:
            return set()
        moved = self._client.apply_leader_hints(hints, hint_endpoints(response.node_endpoints))
        if moved:
            self.partitions_moved_by_leader_hint += len(moved)
            log.debug("fetch response moved leaders: %s", {str(tp): hints[tp] for tp in moved})
            self._manager_event.set()  # start a loop for the new leader now
        return moved

    def _partition_data(
        self,
        node: int,
        tp: TopicPartition,
        st: PartitionState,
        sent: PartitionFetch,
        pd: FetchResponse.PartitionData,
        now: float,
        copy: bool = False,
    ) -> bool:
        st.high_watermark = pd.high_watermark
        if pd.last_stable_offset >= 0:
            st.last_stable_offset = pd.last_stable_offset
        if pd.log_start_offset >= 0:
            st.log_start_offset = pd.log_start_offset
        div = pd.diverging_epoch
        if div.epoch >= 0 or div.end_offset >= 0:
            self._diverged(tp, st, div.end_offset, div.epoch)
            return False
        if pd.preferred_read_replica >= 0 and pd.preferred_read_replica != node:
            ttl = self._client.config.metadata_max_age_ms / 1000
            self._preferred[tp] = (pd.preferred_read_replica, now + ttl)
            self._manager_event.set()
        records = pd.records
        if not records:
            return False
        by_topic = self.bytes_by_topic
        by_topic[tp.topic] = by_topic.get(tp.topic, 0) + len(records)
        if copy:
            records = bytes(records)
        aborted = None
        if self._isolation and pd.aborted_transactions:
            aborted = [(a.producer_id, a.first_offset) for a in pd.aborted_transactions]
        cf = parse_partition(
            tp,
            sent.fetch_offset,
            records,
            check_crcs=self._cfg.check_crcs,
            aborted_transactions=aborted,
            read_committed=bool(self._isolation),
            high_watermark=pd.high_watermark,
            last_stable_offset=pd.last_stable_offset,
            log_start_offset=pd.log_start_offset,
        )
        if not cf.batches and cf.error is None:
            return False
        last_epoch = self._fetch_pos[tp][1]
        if cf.batches:
            epoch = cf.batches[-1].partition_leader_epoch
            last_epoch = epoch if epoch >= 0 else last_epoch
        self._fetch_pos[tp] = (cf.next_fetch_offset, last_epoch)
        if cf.error is not None:
            self.halted.add(tp)
        self.buffer.add(cf)
        return True

    def _partition_error(
        self,
        node: int,
        tp: TopicPartition,
        st: PartitionState,
        sent: PartitionFetch,
        pd: FetchResponse.PartitionData,
        now: float,
        *,
        leader_moved: bool = False,
    ) -> None:
        code = pd.error_code
        err = E.error_for(
            code, f"fetch {tp.topic}-{tp.partition} at offset {sent.fetch_offset} from node {node}"
        )
        self._client.note_error(err)
        if code == _OFFSET_OUT_OF_RANGE:
            if st.position == sent.fetch_offset:
                log.info(
                    "fetch offset %s is out of range for %s-%s; applying auto_offset_reset=%r",
                    sent.fetch_offset,
                    tp.topic,
                    tp.partition,
                    self._cfg.auto_offset_reset,
                )
                self._sub.request_reset(tp)
            else:
                # We fetched ahead of the consumer: re-check from its position.
                self.buffer.drop((tp,))
                self._reset_fetch_state(tp)
            return
        if err.retriable or err.invalidates_metadata:
            log.debug("%s; refreshing metadata", err)
            self._preferred.pop(tp, None)
            if not leader_moved:  # a new leader is known already: nothing to back off from
                self._backoff_until[tp] = now + self._client.config.retry_backoff_ms / 1000
            self._refresh_metadata_soon([tp.topic])
            return
        # Not retriable (e.g. authorization): the user sees it when reaching this position.
        log.warning("%s", err)
        self.buffer.add(CompletedFetch(tp, sent.fetch_offset, [], sent.fetch_offset, 0, error=err))
        self.halted.add(tp)
        self.data_ready.set()

    def _refresh_metadata_soon(self, topics: Iterable[str]) -> None:
        """Refresh metadata for ``topics`` in the background, then wake every task (one at a time)."""
        self._refresh_topics.update(topics)
        if self._refresh_task is not None and not self._refresh_task.done():
            return

        async def refresh() -> None:
            backoff_s = self._client.config.retry_backoff_ms / 1000
            while self._refresh_topics:
                topics, self._refresh_topics = self._refresh_topics, set()
                with contextlib.suppress(E.KafkaError):
                    await self._client.refresh_metadata(topics)
                self._wake()
                await _backend.sleep(backoff_s)  # rate limit: at most one refresh per backoff

        self._refresh_task = self._spawn(refresh())
        self._helpers.add(self._refresh_task)
        self._refresh_task.add_done_callback(self._helper_done)

    # ------------------------------------------------------------------ truncation (KIP-320)
    def _diverged(self, tp: TopicPartition, st: PartitionState, end_offset: int, epoch: int) -> None:
        """The leader says our fetch position's epoch ends at ``end_offset`` on its log."""
        self.buffer.drop((tp,))
        self._reset_fetch_state(tp)
        position = st.position
        if position is None:
            return
        if end_offset < 0 or epoch < 0:
            self._truncated(tp, st, None, None)
        elif end_offset < position:
            self._truncated(tp, st, end_offset, epoch)
        # else: only data we fetched ahead diverged; refetch from the consumer's position.
        self._wake()

    def _truncated(
        self, tp: TopicPartition, st: PartitionState, end_offset: int | None, epoch: int | None
    ) -> None:
        position = st.position
        if self._cfg.auto_offset_reset == "none":
            where = "an unknown offset" if end_offset is None else f"offset {end_offset}"
            self.position_errors[tp] = E.LogTruncationError(
                f"{tp.topic}-{tp.partition}: the leader's log was truncated at {where} (leader epoch {epoch}), "
                f"below the consumer position {position} (epoch {st.position_epoch}); records before the "
                "position may have been lost or replaced. Seek to resume.",
                {tp: end_offset if end_offset is not None else -1},
            )
            self._sub.hold_for_validation(tp)  # not fetchable until the user seeks
            self.data_ready.set()
            return
        if end_offset is None:
            log.warning(
                "log truncation detected for %s-%s at position %s but the divergence point is unknown; "
                "resetting with auto_offset_reset=%r",
                tp.topic,
                tp.partition,
                position,
                self._cfg.auto_offset_reset,
            )
            self._sub.request_reset(tp)
            return
        log.warning(
            "log truncation detected for %s-%s: position %s (epoch %s) is beyond the leader's log for that "
            "epoch, which ends at %s (epoch %s); resuming from %s",
            tp.topic,
            tp.partition,
            position,
            st.position_epoch,
            end_offset,
            epoch,
            end_offset,
        )
        self._sub.reset_position(tp, end_offset, epoch)

    # ------------------------------------------------------------------ positions
    async def _resolve_loop(self) -> None:
        retry = Retry(self._backoff, clock=_backend.loop().time)
        while True:
            await self._resolve_event.wait()
            self._resolve_event.clear()
            try:
                await self.resolve_positions()
                retry.succeeded()
            except _backend.cancelled_exc():
                raise
            except E.KafkaError as exc:
                log.debug("position lookup failed: %s", exc)
                await _backend.sleep(_next_wait(retry))
                self._resolve_event.set()
            except Exception:
                log.exception("position lookup crashed")
                await _backend.sleep(1.0)
                self._resolve_event.set()

    async def resolve_positions(self) -> None:
        """Resolve missing positions and pending validations (background; also awaited by ``position()``)."""
        sub = self._sub
        missing = {tp for tp in sub.missing_positions() if tp not in self.position_errors}
        if missing:
            await self._resolve_missing(missing)
        validate = {tp for tp in sub.awaiting_validation() if tp not in self.position_errors}
        if validate:
            await self._validate(validate)
        self._positions_changed.set()

    async def _resolve_missing(self, missing: set[TopicPartition]) -> None:
        sub = self._sub
        timeout_ms = self._cfg.default_api_timeout_ms
        if self._committed_lookup is not None:
            need = {tp for tp in missing if not sub.state(tp).reset_requested}
            if need:
                committed = await self._committed_lookup(need)
                for tp in need:
                    st = sub.get_state(tp)
                    if st is None or st.position is not None or st.reset_requested:
                        continue
                    om = committed.get(tp)
                    if om is not None and om.offset >= 0:
                        sub.seek(tp, om.offset, om.leader_epoch)
                    else:
                        sub.use_reset_policy(tp)
        else:
            for tp in missing:
                sub.use_reset_policy(tp)
        lookups: dict[TopicPartition, int] = {}
        for tp in missing:
            st = sub.get_state(tp)
            if st is None or st.position is not None or not st.reset_requested:
                continue
            strategy = st.reset_to or self._cfg.auto_offset_reset
            if strategy == "none":
                self.position_errors[tp] = E.OffsetOutOfRangeError(
                    f"{tp.topic}-{tp.partition} has no valid position (no committed offset or out of range) "
                    "and auto_offset_reset='none'; seek to a position to continue"
                )
                self.data_ready.set()
                continue
            if self._client.cluster.leader_for(tp) is None:
                # Unknown topic or no leader yet: do not hold up the others; the
                # refresh wakes us up again.
                self._refresh_metadata_soon((tp.topic,))
                continue
            lookups[tp] = EARLIEST if strategy == "earliest" else LATEST
        if not lookups:
            return
        found = await list_offsets(
            self._client, lookups, isolation_level=self._isolation, timeout_ms=timeout_ms
        )
        for tp, res in found.items():
            st = sub.get_state(tp)
            if st is None or st.position is not None or not st.reset_requested:
                continue  # the user seeked meanwhile
            if res is None:
                continue
            log.debug("reset position of %s-%s to %s", tp.topic, tp.partition, res.offset)
            sub.reset_position(tp, res.offset, res.leader_epoch)

    async def _validate(self, tps: set[TopicPartition]) -> None:
        sub = self._sub
        cluster = self._client.cluster
        epochs: dict[TopicPartition, tuple[int, int]] = {}
        snapshot: dict[TopicPartition, int | None] = {}
        for tp in tps:
            st = sub.get_state(tp)
            if st is None or st.position is None:
                continue
            if st.position_epoch is None:
                sub.complete_validation(tp)
                continue
            leader = cluster.leader_for(tp)
            if leader is None:
                self._refresh_metadata_soon((tp.topic,))
                continue
            try:
                version = await self._client.negotiated_version(leader, OFFSET_FOR_LEADER_EPOCH_KEY)
            except E.UnsupportedVersionError:
                version = -1
            except E.KafkaError as exc:
                if not exc.retriable:
                    raise
                # The leader we know is unreachable: it may have died after our last
                # metadata refresh, and nothing else may make us refresh (no partition of
                # ours fetches from it). Ask; the next round checks at the leader named.
                log.debug("position check of %s-%s at node %s: %s", tp.topic, tp.partition, leader, exc)
                self._refresh_metadata_soon((tp.topic,))
                continue
            if version < 3:
                sub.complete_validation(tp)  # broker too old for consumer validation
                continue
            epochs[tp] = (cluster.leader_epoch(tp), st.position_epoch)
            snapshot[tp] = st.position
        if not epochs:
            return
        results = await offsets_for_leader_epochs(
            self._client, epochs, timeout_ms=self._cfg.default_api_timeout_ms
        )
        for tp, res in results.items():
            st = sub.get_state(tp)
            if st is None or not st.awaiting_validation:
                continue
            if st.position != snapshot[tp]:
                self._resolve_event.set()  # moved meanwhile: validate the new position
                continue
            position = st.position
            assert position is not None
            if res.end_offset < 0 or res.leader_epoch < 0:
                self._truncated(tp, st, None, None)
            elif res.end_offset < position:
                self._truncated(tp, st, res.end_offset, res.leader_epoch)
            else:
                sub.complete_validation(tp)

    async def wait_for_position(self, tp: TopicPartition, timeout_ms: float) -> int:
        """The position of ``tp`` once known (resolving it now if needed)."""
        loop = _backend.loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            st = self._sub.state(tp)
            err = self.position_errors.get(tp)
            if err is not None:
                raise err
            if st.position is not None and not st.awaiting_validation:
                return st.position
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise E.KafkaTimeoutError(
                    f"position of {tp.topic}-{tp.partition} not resolved in {timeout_ms} ms"
                )
            self._positions_changed.clear()
            self._resolve_event.set()
            await self._wait(self._positions_changed, min(remaining, 1.0))


def _next_wait(retry: Retry) -> float:
    """Count a failure of a loop that never gives up (no deadline): the wait before its
    next attempt."""
    delay = retry.next_delay()
    assert delay is not None  # only a deadline makes Retry give up
    return delay
