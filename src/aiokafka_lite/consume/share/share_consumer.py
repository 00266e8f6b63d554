"""``ShareConsumer``: consuming from a share group (KIP-932), Kafka as a work queue.

::

    consumer = ShareConsumer("127.0.0.1:9092", group_id="jobs", topics=["jobs"])
    async with consumer:
        async for record in consumer:  # implicit mode: accepted once the next is taken
            await handle(record)

    async with ShareConsumer(..., acknowledgement_mode="explicit") as consumer:
        for record in await consumer.poll(max_records=100, timeout_ms=1000):
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)   # or RELEASE / REJECT
        failures = await consumer.commit()     # {TopicPartition: error or None}

Structure (the async shell around three pure parts):

* a *heartbeat task* drives :class:`~aiokafka_lite.consume.share.membership.ShareMembership`
  against the group coordinator (``Lane.COORDINATOR``);
* one *session task per broker* leading assigned partitions (or holding
  acknowledgements to send) owns that broker's
  :class:`~aiokafka_lite.consume.share.session.ShareSession`, with at most one request in
  flight: a ShareFetch when the consumer has no buffered records from that broker
  (carrying the pending acknowledgements of its partitions), else a ShareAcknowledge
  when acknowledgements wait (at once for ``commit()`` and close);
* the :class:`~aiokafka_lite.consume.share.acks.AckTracker` knows every acquired offset, what
  was delivered and what was decided.

Records are decoded with the consumer's decoder (``fetch.decode``) as responses
arrive, keeping only the offsets the broker acquired for this member (a response
carries whole batches); acquired offsets without a record are acknowledged as GAP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiokafka_lite.consume.fairness import TurnPacer
from aiokafka_lite.consume.fetch.decode import parse_partition
from aiokafka_lite.consume.share.acks import AckBatch, AckResult, AckTracker
from aiokafka_lite.consume.share.membership import ShareMembership, TopicIdPartition
from aiokafka_lite.consume.share.record import AcknowledgeType, ShareRecord
from aiokafka_lite.consume.share.session import SESSION_ERRORS, FetchParams, ShareSession
from aiokafka_lite.consume.share.share_config import ShareConsumerConfig
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core import tracing_hook as _otel
from aiokafka_lite.core.client_metrics import track
from aiokafka_lite.core.health import Health, build_health
from aiokafka_lite.core.serialization import context_deserializer, plain_call
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client, ClientConfig
from aiokafka_lite.net.client import Lane
from aiokafka_lite.wire.messages import (
    ShareAcknowledgeResponse,
    ShareFetchResponse,
    ShareGroupHeartbeatResponse,
)

__all__ = ["ShareConsumer"]

log = logging.getLogger(__name__)

_IDLE_RECHECK_S: Final = 1.0
_ACQUIRE_MODES: Final = {"batch_optimized": 0, "record_limit": 1}
_LEADER_ERRORS: Final = frozenset({3, 6, 100})  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER, UNKNOWN_TOPIC_ID
# Options of other clients that are group configs for a share group: (what it is, an example value).
_GROUP_CONFIG_OPTIONS: Final = {
    "auto_offset_reset": (
        "share.auto.offset.reset",
        "'latest' (the default: only records written after the group's first fetch), 'earliest', "
        "or 'by_duration:<ISO-8601 duration>' (e.g. 'by_duration:PT1H')",
        "earliest",
    ),
    "isolation_level": (
        "share.isolation.level",
        "'read_uncommitted' (the default) or 'read_committed'",
        "read_committed",
    ),
}

AcknowledgementCallback = Callable[[AckResult], None]


@dataclass(eq=False)
class _Node:
    """One broker's share session and the task serving it."""

    session: ShareSession
    wake: Any = field(default_factory=_backend.event)  # asyncio.Event, or the trio backend's
    task: Any = None  # asyncio.Task, or on trio a task in the client's task group
    buffered: int = 0  # records fetched from this broker and not handed out yet


class ShareConsumer:
    """A share-group consumer on asyncio or trio (see the module docstring).

    ``bootstrap_servers`` (or ``client=``, a shared ``Client``) says where Kafka is.
    Other keyword options are :class:`ShareConsumerConfig` fields, or ``ClientConfig``
    fields when the consumer creates its own client. ``on_acknowledgement`` is called
    with each partition's :class:`~aiokafka_lite.consume.share.acks.AckResult` as the broker
    answers (Java's acknowledgement commit callback); failures are logged otherwise.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        group_id: str,
        topics: str | Iterable[str],
        client: Client | None = None,
        config: ShareConsumerConfig | None = None,
        on_acknowledgement: AcknowledgementCallback | None = None,
        **options: Any,
    ) -> None:
        for name, (group_config, values, example) in _GROUP_CONFIG_OPTIONS.items():
            if name in options:
                raise E.ConfigError(
                    f"{name}: a share consumer has no such option; in a share group it is the group "
                    f"config {group_config}: {values}. Set it once for the group with the admin client: "
                    f"(await admin.incremental_alter_configs({{ConfigResource.group({group_id!r}): "
                    f"{{{group_config!r}: {example!r}}}}})).raise_errors()  "
                    "(from aiokafka_lite.admin import Admin, ConfigResource)"
                )
        own_names = set(ShareConsumerConfig.option_names())
        client_names = set(ClientConfig.option_names())
        share_opts = {k: v for k, v in options.items() if k in own_names or k not in client_names}
        client_opts = {k: v for k, v in options.items() if k in client_names and k not in own_names}
        self.config = ShareConsumerConfig.from_options(config, **share_opts)
        if not isinstance(group_id, str) or not group_id:
            raise E.ConfigError("group_id: a share consumer needs a non-empty group id")
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if not topic_list or not all(isinstance(t, str) and t for t in topic_list):
            raise E.ConfigError(f"topics: expected one or more topic names, got {topics!r}")
        if client is not None:
            if client_opts:
                raise E.ConfigError(
                    f"client options {sorted(client_opts)} cannot be used with client=; configure that client"
                )
            self._client = client
            self._own_client = False
        else:
            if bootstrap_servers is None:
                raise E.ConfigError("ShareConsumer needs bootstrap_servers or client=")
            self._client = Client(bootstrap_servers, **client_opts)
            self._own_client = True
        self.group_id = group_id
        #: Tracing of this consumer's own tracer_provider (else aiokafka_lite.integrations.otel's global one).
        self._tracing = _otel.client_tracing(self.config.tracer_provider)
        # Deserializers that see the topic, field and headers (decided once; see Consumer).
        self._kd: Any = self.config.key_deserializer
        self._vd: Any = self.config.value_deserializer
        kc, vc = context_deserializer(self._kd), context_deserializer(self._vd)
        self._contextual = kc is not None or vc is not None
        if self._contextual:
            self._kd = kc or plain_call(self._kd)
            self._vd = vc or plain_call(self._vd)
        self._membership = ShareMembership(
            group_id,
            tuple(topic_list),
            rack_id=self.config.client_rack,
            retry_backoff_ms=self._client.config.retry_backoff_ms,
        )
        self._on_ack = on_acknowledgement
        self._tracker = AckTracker()
        self._nodes: dict[int, _Node] = {}
        self._buffer: deque[tuple[int, list[ShareRecord]]] = deque()  # (node id, records)
        # Records acknowledged RENEW: handed out again once the broker renewed their lock.
        self._renewing: dict[tuple[TopicPartition, int], ShareRecord] = {}
        self._arrived: Any = asyncio.Event()  # records, an error, or an assignment change
        self._error: E.KafkaError | None = None
        self._assignment_changed: Any = asyncio.Event()
        self._heartbeat_task: Any = None  # asyncio.Task, or a task of the client's (trio)
        self._manager_task: Any = None
        self._commit_waiters: dict[TopicPartition, list[Any]] = {}  # futures of commit()
        self._flush = 0  # commit() calls waiting: send acknowledgements now
        self._fetch_params = FetchParams(
            max_wait_ms=self.config.fetch_max_wait_ms,
            min_bytes=self.config.fetch_min_bytes,
            max_bytes=self.config.fetch_max_bytes,
            max_records=self.config.max_poll_records,
            batch_size=self.config.max_poll_records,
            acquire_mode=_ACQUIRE_MODES[self.config.share_acquire_mode],
        )
        # ``async for``: records taken from the buffer; [_idx:] not handed out yet, and
        # [_settled:_idx] handed out but not yet marked delivered in the tracker (done in
        # bulk by _settle before anything reads the tracker), so the fast path only moves
        # an index. Below _stop no check is due (a fairness check point, or a crash).
        self._recs: list[ShareRecord] = []
        self._idx = 0
        self._stop = 0
        self._settled = 0
        self._pacer = TurnPacer()  # turns for other tasks while buffered records are served
        #: The first unexpected exception of a background task (a bug): raised by every
        #: poll and iteration step from then on, and reported by health().
        self._crash: E.KafkaError | None = None
        self._started = False
        self._closing = False
        self._closed = False
        # Observability counters: records handed out and record bytes received per topic,
        # acknowledged records by outcome (the broker's answer: ok or failed).
        self._delivered_by_topic: dict[str, int] = {}
        self._bytes_by_topic: dict[str, int] = {}
        self._records_acked = 0
        self._records_ack_failed = 0
        track(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "started" if self._started else "new"
        return (
            f"<ShareConsumer {state} group={self.group_id!r} member={self.member_id} "
            f"state={self._membership.state.value} epoch={self._membership.epoch}>"
        )

    # ------------------------------------------------------------------ properties

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    @property
    def member_epoch(self) -> int:
        return self._membership.epoch

    def assignment(self) -> set[TopicPartition]:
        """Partitions the coordinator assigned to this member, by name (those whose topic
        id the metadata does not resolve yet are left out)."""
        out = set()
        cluster = self._client.cluster
        for tid, p in self._membership.assignment:
            name = cluster.topic_name(tid)
            if name is not None:
                out.add(TopicPartition(name, p))
        return out

    def metrics(self) -> dict[str, Any]:
        """Delivery, acknowledgement and membership counters plus the client's metrics.

        ``records_consumed`` counts records handed to the application; ``bytes_fetched``
        record bytes received in ShareFetch answers; ``acknowledged``/``acknowledge_failed``
        records whose acknowledgement the broker accepted or refused."""
        self._settle()
        ms = self._membership
        delivered = dict(sorted(self._delivered_by_topic.items()))
        fetched = dict(sorted(self._bytes_by_topic.items()))
        return {
            "client": self._client.metrics(),
            "records_consumed": sum(delivered.values()),
            "consumed_by_topic": delivered,
            "bytes_fetched": sum(fetched.values()),
            "fetched_bytes_by_topic": fetched,
            "records_buffered": sum(len(recs) for _, recs in self._buffer) + len(self._recs) - self._idx,
            "acknowledged": self._records_acked,
            "acknowledge_failed": self._records_ack_failed,
            "assigned_partitions": len(ms.assignment),
            "group": {
                "group_id": self.group_id,
                "state": ms.state.value,
                "member_id": ms.member_id,
                "member_epoch": ms.epoch,
            },
        }

    def health(self) -> Health:
        """Readiness summary (rules in ``aiokafka_lite.core.health``): started, a broker
        reachable, a stable share-group member without a fatal error."""
        ms = self._membership
        return build_health(
            "share_consumer",
            self._client.metrics(),
            self._client.config.client_id,
            started=self._started,
            closed=self._closing or self._closed,
            fatal=self._crash if self._crash is not None else ms.fatal,
            group_id=self.group_id,
            group_state=ms.state.value,
            assigned=frozenset(self.assignment()),
        )

    @property
    def closed(self) -> bool:
        return self._closing or self._closed

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._closed or self._closing:
            raise E.ClosedError("share consumer is closed")
        if self._started:
            return
        await self._client.start()
        self._client.track_topics(self._membership.topics)
        # Events of this run (trio cannot wait on those made in __init__); tasks go in
        # the client's task group.
        self._arrived = _backend.event_for_run(self._arrived)
        self._assignment_changed = _backend.event_for_run(self._assignment_changed)
        self._started = True
        self._heartbeat_task = self._spawn(self._heartbeat_loop, "share-heartbeat", "heartbeat task")
        self._manager_task = self._spawn(self._manage_nodes, "share-nodes", "node manager task")

    def _spawn(self, loop: Callable[..., Coroutine[Any, Any, None]], name: str, what: str, *args: Any) -> Any:
        """Run ``loop(*args)`` as a task of the client's task owner (which cancels and
        awaits it when the client closes, if this consumer's ``close`` has not), its
        crash recorded (``_crashed``)."""
        owner = self._client._owner
        if owner is None:
            raise E.ClosedError("the share consumer's client is not started")
        return owner.spawn(self._guarded(loop, what, *args), name)

    async def _guarded(self, loop: Callable[..., Coroutine[Any, Any, None]], what: str, *args: Any) -> None:
        try:
            await loop(*args)
        except (asyncio.CancelledError, _backend.cancelled_exc()):
            raise
        except BaseException as exc:  # a bug: must not stop the task silently
            self._crashed(what, exc)
            raise

    def _crashed(self, what: str, exc: BaseException) -> None:
        """A background task died of an unexpected exception (a bug, not a Kafka error the
        protocol handles), as ``groups.coordinator``'s ``_crashed``: logged once, kept as
        the consumer's crash, which every ``poll`` and iteration step raises from now on
        and ``health()`` reports. Without it the member would go on without that task (no
        heartbeats, or no fetches) while the application polls in vain."""
        if self._crash is not None:  # the first crash is the one to report (and log)
            log.debug("share group %s: %s crashed too: %r", self.group_id, what, exc)
        else:
            log.error("share group %s: %s crashed", self.group_id, what, exc_info=exc)
            crash = (
                exc
                if isinstance(exc, E.KafkaError)
                else E.KafkaError(f"share consumer {what} crashed: {exc!r}")
            )
            if crash is not exc:
                crash.__cause__ = exc
            self._crash = crash
            self._client.note_error(crash)
        self._stop = self._idx  # the next iteration step takes the slow path, which raises it
        self._arrived.set()

    async def __aenter__(self) -> ShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout_ms: float | None = None) -> None:
        """Acknowledge what was delivered (implicit mode: accept it; explicit mode: what the
        application decided, releasing the rest), release what was fetched but never
        handed out (by ``poll`` or by ``async for``: the group delivers it again, to
        another member or a later one), close the share sessions, then leave the group.
        Idempotent; may be called from another task (on trio, a consumer that created its
        own client is closed by the task that started it)."""
        if _otel.enabled:
            _otel.end_iteration(self)  # the last record's process span (async for)
        if self._closed or self._closing:
            return
        owner = self._client._owner
        if self._own_client and owner is not None:
            owner.check_host()  # trio: IllegalStateError from another task, nothing closed
        self._closing = True
        self._arrived.set()  # a poll waiting in another task returns (empty)
        try:
            if self._started:
                limit = (self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms) / 1000
                self._settle()
                if not self.config.explicit:
                    self._tracker.accept_delivered()
                self._release_buffer()
                # Delivered records the application left undecided go back (explicit mode).
                for part in self._tracker.partitions.values():
                    for offset in list(part.delivered):
                        self._tracker.acknowledge(part.tp, offset, AcknowledgeType.RELEASE)
                for node in self._nodes.values():
                    node.wake.set()
                tasks = [n.task for n in self._nodes.values() if n.task is not None]
                if self._manager_task is not None:
                    self._manager_task.cancel()
                if tasks:
                    await _backend.wait_done(tasks, limit)
                    for task in tasks:
                        task.cancel()
                    await _gather_tasks(tasks)
                await self._leave(limit)
        finally:
            own = [t for t in (self._heartbeat_task, self._manager_task) if t is not None]
            own += [n.task for n in self._nodes.values() if n.task is not None]
            for own_task in own:
                own_task.cancel()
            await _gather_tasks(own)
            for waiters in self._commit_waiters.values():
                for fut in waiters:
                    if not fut.done():
                        fut.set_exception(E.ClosedError("share consumer closed"))
                        fut.exception()
            self._commit_waiters.clear()
            self._closed = True
            if self._own_client:
                await self._client.close()

    async def _leave(self, limit_s: float) -> None:
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            await _gather_tasks([self._heartbeat_task])
        request = self._membership.leave_request()
        if request is None:
            return
        try:
            node = await self._client.find_coordinator(self.group_id, timeout_ms=limit_s * 1000)
            await self._client.send(request, node_id=node, lane=Lane.COORDINATOR, timeout_ms=limit_s * 1000)
        except (E.KafkaError, TimeoutError) as exc:
            log.info(
                "share group %s: leaving failed (%s); the coordinator expires the member", self.group_id, exc
            )
        finally:
            self._membership.left()

    def _release_buffer(self) -> None:
        """Forget the records not handed out (the iterator's rest included); the tracker
        releases them (they are acquired and not delivered)."""
        self._drop_chunk()
        for node_id, records in self._buffer:
            node = self._nodes.get(node_id)
            if node is not None:
                node.buffered -= len(records)
        self._buffer.clear()
        self._tracker.release_undelivered()

    # ------------------------------------------------------------------ consuming

    def __aiter__(self) -> ShareConsumer:
        return self

    async def __anext__(self) -> ShareRecord:
        """The next record, one at a time from the records the consumer holds.

        A record counts as delivered once this returns it: in implicit mode it is then
        accepted when the iterator takes the next batch, or by ``poll``, ``commit`` or
        ``close``. Records taken but not handed out yet stay with the consumer: leaving
        the loop (``break``, an exception, a cancelled or timed-out step) hands them to
        the next ``async for`` or ``poll`` of this consumer, and ``close()`` releases them
        to the group; none is accepted unseen. A cancelled step takes nothing, and the
        iterator keeps working after it. Explicit mode: the records handed out must be
        acknowledged before the iterator takes the next batch (IllegalStateError).
        Buffered records are served with a turn for the event loop's other tasks every
        few milliseconds."""
        i = self._idx
        if i < self._stop and not _otel.enabled:
            self._idx = i + 1
            return self._recs[i]
        if _otel.enabled and (tracing := _otel.of(self)) is not None:
            return await tracing.next_record(self, self._next_record)
        return await self._next_record()

    async def _next_record(self) -> ShareRecord:
        """``__anext__`` without tracing: the slow path (a check point, a new batch)."""
        while True:
            if self._crash is not None:
                raise self._crash
            i = self._idx
            if i < len(self._recs):
                if i >= self._stop:  # a check point: yield *before* taking a record
                    if self._pacer.due(i):
                        await self._pacer.take_turn()
                        continue  # a close or a poll may have run meanwhile
                    self._stop = min(len(self._recs), i + self._pacer.every)
                self._idx = i + 1
                return self._recs[i]
            if self._closing or self._closed:
                raise StopAsyncIteration
            await self._refill()

    async def _refill(self) -> None:
        """The iterator's next batch: what the last batch handed out is settled (implicit
        mode: accepted), then records are waited for and taken, not delivered yet. A
        step cancelled while waiting has taken nothing."""
        self._settle()
        self._drop_chunk()
        await self._prepare_poll(check_acknowledged=True)
        started_ns = time.time_ns()
        await self._wait_records(None)
        if self._buffer and not self._closing:
            # Not delivered yet: each record is, once handed out. Index 0 is a check
            # point (_stop 0), so a new batch may give the other tasks a turn first.
            self._recs = self._take(self.config.max_poll_records, deliver=False)
            if _otel.enabled and (tracing := _otel.of(self)) is not None:
                tracing.received(self, self._recs, started_ns)  # the batch's poll span

    def _settle(self) -> None:
        """Mark the records the iterator handed out as delivered in the tracker."""
        i, s = self._idx, self._settled
        if i > s:
            self._settled = i
            self._deliver(self._recs[s:i])

    def _drop_chunk(self) -> None:
        """Forget the iterator's batch (settled first by the caller): records not handed
        out stay acquired and undelivered in the tracker, for close to release."""
        self._pacer.chunk_finished(self._idx)
        self._recs = []
        self._idx = self._stop = self._settled = 0

    async def poll(
        self, max_records: int | None = None, timeout_ms: float | None = None
    ) -> list[ShareRecord]:
        """Records acquired for this member, waiting up to ``timeout_ms`` (None: until
        some arrive). Implicit mode first accepts the records handed out before (by the
        previous poll or by ``async for``); explicit mode requires each of them to be
        acknowledged (IllegalStateError).

        Mixed with ``async for``: a poll first returns the records the iterator took but
        did not hand out yet (the rest of its batch), then new ones; a later ``async for``
        goes on with what the consumer holds. Each record is handed out once either way."""
        if _otel.enabled and (tracing := _otel.of(self)) is not None:
            return await tracing.poll(
                self, lambda: self._poll(max_records, timeout_ms, check_acknowledged=True)
            )
        return await self._poll(max_records, timeout_ms, check_acknowledged=True)

    async def _prepare_poll(self, *, check_acknowledged: bool) -> None:
        """What every poll and iterator batch does first: refuse on close or after a
        crash, start, and settle the records handed out before (implicit mode: accept
        them; explicit mode: each must be acknowledged, unless ``check_acknowledged`` is
        False: ShareWorkers pipelines records without Java's rule)."""
        if self._closing or self._closed:
            raise E.ClosedError("share consumer is closed")
        if self._crash is not None:
            raise self._crash
        if not self._started:
            await self.start()
        if self.config.explicit:
            left = self._tracker.unacknowledged() if check_acknowledged else 0
            if left:
                raise E.IllegalStateError(
                    f"{left} record(s) returned by the last poll are not acknowledged; explicit "
                    "acknowledgement mode needs a decision for each before the next poll"
                )
        elif self._tracker.accept_delivered():
            self._wake_all()

    async def _wait_records(self, deadline: float | None) -> None:
        """Wait until records are buffered, an error is due, the consumer closes, or
        ``deadline`` (loop time) passes; raises the error due."""
        loop = _backend.loop()
        while not self._buffer:
            self._raise_error()
            self._arrived.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return
            try:
                async with _backend.timeout(remaining):
                    await self._arrived.wait()
            except TimeoutError:
                return
            if self._closing:
                return

    async def _poll(
        self, max_records: int | None, timeout_ms: float | None, *, check_acknowledged: bool
    ) -> list[ShareRecord]:
        limit = self.config.max_poll_records if max_records is None else max_records
        if limit < 1:
            raise ValueError(f"max_records must be >= 1, got {max_records}")
        self._settle()
        await self._prepare_poll(check_acknowledged=check_acknowledged)
        i = self._idx
        if i < len(self._recs):  # the iterator's batch first: taken earlier, not handed out
            out = self._recs[i : i + limit]
            self._idx = self._settled = i + len(out)
            self._deliver(out)
            if self._idx >= len(self._recs):
                self._drop_chunk()
            return out
        loop = _backend.loop()
        deadline = None if timeout_ms is None else loop.time() + timeout_ms / 1000
        await self._wait_records(deadline)
        if self._buffer and not self._closing:
            return self._take(limit)
        return []

    def _take(self, limit: int, *, deliver: bool = True) -> list[ShareRecord]:
        """Up to ``limit`` buffered records, delivered (poll) or not yet (the iterator)."""
        out: list[ShareRecord] = []
        while self._buffer and len(out) < limit:
            node_id, records = self._buffer[0]
            n = limit - len(out)
            if len(records) > n:
                chunk, self._buffer[0] = records[:n], (node_id, records[n:])
            else:
                chunk = records
                self._buffer.popleft()
            out.extend(chunk)
            node = self._nodes.get(node_id)
            if node is not None:
                node.buffered -= len(chunk)
                if node.buffered <= 0:
                    node.wake.set()  # its next ShareFetch is due
        if deliver:
            self._deliver(out)
        return out

    def _deliver(self, records: Sequence[ShareRecord]) -> None:
        by_tp: dict[TopicPartition, list[int]] = {}
        for r in records:
            by_tp.setdefault(TopicPartition(r.topic, r.partition), []).append(r.offset)
        delivered = self._delivered_by_topic
        for tp, offsets in by_tp.items():
            self._tracker.deliver(tp, offsets)
            delivered[tp.topic] = delivered.get(tp.topic, 0) + len(offsets)

    def _raise_error(self) -> None:
        if self._crash is not None:
            raise self._crash
        err = self._error
        if err is None and self._membership.reported is not None:
            err, self._membership.reported = self._membership.reported, None
        if err is not None:
            if self._membership.fatal is None:
                self._error = None
            raise err

    # ------------------------------------------------------------------ acknowledging

    def acknowledge(self, record: ShareRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Decide what happens to a record ``poll`` returned: ``ACCEPT`` (done), ``RELEASE``
        (deliver again) or ``REJECT`` (never again). Explicit mode only, once per record;
        sent with the next ShareFetch to its broker, or by ``commit()``.

        ``RENEW`` (Kafka 4.2+, KIP-1222) asks for more time instead: the broker restarts the
        record's acquisition lock, and a later poll returns the record again (same
        ``delivery_count``) for its final acknowledgement. Renewals go in a
        ShareAcknowledge of their own; ``commit()`` sends them at once."""
        if not self.config.explicit:
            raise E.IllegalStateError(
                "acknowledge() needs acknowledgement_mode='explicit' (implicit mode accepts every "
                "record at the next poll)"
            )
        if self._closed:
            raise E.ClosedError("share consumer is closed")
        self._settle()  # records async for handed out are delivered
        tp = TopicPartition(record.topic, record.partition)
        kind = AcknowledgeType(type)
        self._tracker.acknowledge(tp, record.offset, kind)
        if kind == AcknowledgeType.RENEW:
            self._renewing[(tp, record.offset)] = record
        self._wake_all()

    async def commit(self, timeout_ms: float | None = None) -> dict[TopicPartition, E.KafkaError | None]:
        """Send every pending acknowledgement now and wait for the brokers' answers: per
        partition, None (applied) or the error (``AcquisitionLockTimeoutError`` when the
        records' lock had expired; ``KafkaTimeoutError`` when no answer came in time).
        In implicit mode, the records of the last poll are accepted first."""
        if self._closed:
            raise E.ClosedError("share consumer is closed")
        self._settle()
        if not self.config.explicit:
            self._tracker.accept_delivered()
        tps = self._tracker.with_pending()
        if not tps:
            return {}
        loop = _backend.loop()
        waiters: dict[TopicPartition, Any] = {}
        for tp in tps:
            fut = loop.create_future()
            self._commit_waiters.setdefault(tp, []).append(fut)
            waiters[tp] = fut
        self._flush += 1
        self._wake_all()
        limit = (self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        try:
            await _backend.wait_done(list(waiters.values()), limit)
        finally:
            self._flush -= 1
        out: dict[TopicPartition, E.KafkaError | None] = {}
        for tp, fut in waiters.items():
            if fut.done():
                out[tp] = fut.result().error if fut.exception() is None else _as_kafka_error(fut.exception())
            else:
                fut.cancel()
                with contextlib.suppress(ValueError):
                    self._commit_waiters.get(tp, []).remove(fut)
                out[tp] = E.KafkaTimeoutError(
                    f"{tp.topic}-{tp.partition}: no acknowledgement answer in {limit:.1f} s"
                )
        return out

    def _ack_done(self, result: AckResult) -> None:
        for fut in self._commit_waiters.pop(result.tp, []):
            if not fut.done():
                fut.set_result(result)
        if result.error is None:
            self._records_acked += len(result.offsets)
        else:
            self._records_ack_failed += len(result.offsets)
            self._client.note_error(result.error)
            log.warning(
                "share group %s: acknowledging %d record(s) of %s-%d failed: %s",
                self.group_id,
                len(result.offsets),
                result.tp.topic,
                result.tp.partition,
                result.error,
            )
        if self._on_ack is not None:
            try:
                self._on_ack(result)
            except Exception:
                log.exception("on_acknowledgement callback failed")

    def _wake_all(self) -> None:
        for node in self._nodes.values():
            node.wake.set()
        if self._manager_task is not None:
            self._assignment_changed.set()

    # ------------------------------------------------------------------ membership

    async def _heartbeat_loop(self) -> None:
        ms = self._membership
        loop = _backend.loop()
        client = self._client
        coordinator = -1
        while ms.active:
            now = loop.time() * 1000
            wait_ms = ms.ms_until_heartbeat(now)
            if wait_ms > 0:
                await _backend.sleep(wait_ms / 1000)
                continue
            try:
                if ms.coordinator_unknown:
                    if coordinator >= 0:
                        client.invalidate_coordinator(self.group_id)
                    coordinator = await client.find_coordinator(self.group_id)
                    ms.coordinator_found()
                request = ms.heartbeat_request(loop.time() * 1000)
                resp = await client.send(request, node_id=coordinator, lane=Lane.COORDINATOR)
            except E.KafkaError as exc:
                client.note_error(exc)
                ms.heartbeat_failed(exc, loop.time() * 1000)
                if ms.fatal is not None:
                    self._fail(ms.fatal)
                continue
            assert isinstance(resp, ShareGroupHeartbeatResponse)
            changed = ms.heartbeat_response(resp, loop.time() * 1000)
            if ms.fatal is not None:
                self._fail(ms.fatal)
            if ms.reported is not None:
                self._arrived.set()
            if changed:
                log.debug("share group %s: assignment %s", self.group_id, sorted(ms.assignment))
                unknown = [tid for tid, _ in ms.assignment if client.cluster.topic_name(tid) is None]
                if unknown:
                    client.request_metadata_refresh()
                self._assignment_changed.set()

    def _fail(self, err: E.KafkaError) -> None:
        self._error = err
        self._client.note_error(err)
        self._arrived.set()

    # ------------------------------------------------------------------ sessions

    def _leader(self, tp: TopicPartition) -> int | None:
        return self._client.cluster.leader_for(tp)

    def _wanted(self) -> dict[int, dict[TopicIdPartition, TopicPartition]]:
        """Assigned partitions with a known name and leader, by leader."""
        out: dict[int, dict[TopicIdPartition, TopicPartition]] = {}
        cluster = self._client.cluster
        for tid, p in self._membership.assignment:
            name = cluster.topic_name(tid)
            if name is None:
                continue
            tp = TopicPartition(name, p)
            leader = cluster.leader_for(tp)
            if leader is None or leader < 0:
                continue
            out.setdefault(leader, {})[(tid, p)] = tp
        return out

    async def _manage_nodes(self) -> None:
        """Start a session task for each broker that leads an assigned partition or holds
        acknowledgements to send; poke them when the assignment or metadata changes."""
        while True:
            nodes = set(self._wanted())
            for tp in self._tracker.with_pending():
                leader = self._leader(tp)
                if leader is not None and leader >= 0:
                    nodes.add(leader)
            for node_id in nodes if self._crash is None else ():  # no restarts after a crash
                node = self._nodes.get(node_id)
                if node is None:
                    node = self._nodes[node_id] = _Node(ShareSession(self.group_id, self.member_id, node_id))
                if node.task is None or node.task.done():
                    node.task = self._spawn(
                        self._session_loop,
                        f"share-session-{node_id}",
                        f"session task (broker {node_id})",
                        node_id,
                    )
                node.wake.set()
            self._assignment_changed.clear()
            with contextlib.suppress(TimeoutError):
                async with _backend.timeout(_IDLE_RECHECK_S):
                    await self._assignment_changed.wait()

    async def _session_loop(self, node_id: int) -> None:
        node = self._nodes[node_id]
        session = node.session
        loop = _backend.loop()
        attempt = 0
        while True:
            wanted = {} if self._closing else self._wanted().get(node_id, {})
            ack_tps = [tp for tp in self._tracker.with_pending() if self._leader(tp) == node_id]
            fetch_due = bool(wanted) and node.buffered <= 0 and self._membership.active
            node.wake.clear()
            try:
                if self._closing:
                    if not session.open:
                        if not ack_tps:
                            return
                        await self._share_fetch(node, {}, [], loop)  # opens the session
                        continue
                    await self._share_acknowledge(node, ack_tps, loop, close=True)
                    return
                if (
                    ack_tps
                    and session.open
                    and (
                        self._flush
                        or not fetch_due
                        or any(self._tracker.has_renewals(tp) for tp in ack_tps)
                        or any(
                            (self._client.cluster.topic_id(tp.topic), tp.partition) not in wanted
                            for tp in ack_tps
                        )
                    )
                ):
                    await self._share_acknowledge(node, ack_tps, loop)
                elif fetch_due:
                    piggyback = [tp for tp in ack_tps if session.open]
                    await self._share_fetch(node, wanted, piggyback, loop)
                elif ack_tps and not session.open:
                    await self._share_fetch(node, {}, [], loop)
                else:
                    with contextlib.suppress(TimeoutError):
                        async with _backend.timeout(_IDLE_RECHECK_S):
                            await node.wake.wait()
                    continue
                attempt = 0
            except asyncio.CancelledError:
                raise
            except E.KafkaError as exc:
                session.reset()
                if not exc.retriable:
                    log.warning("share session with broker %d failed: %s", node_id, exc)
                if isinstance(exc, E.KafkaConnectionError) or getattr(exc, "invalidates_metadata", False):
                    self._client.request_metadata_refresh()
                attempt += 1
                await _backend.sleep(self._client.retry_backoff.delay_s(attempt - 1))

    def _take_acks(
        self, tps: Iterable[TopicPartition]
    ) -> tuple[dict[TopicIdPartition, list[AckBatch]], dict[TopicIdPartition, TopicPartition]]:
        acks: dict[TopicIdPartition, list[AckBatch]] = {}
        names: dict[TopicIdPartition, TopicPartition] = {}
        for tp in tps:
            part = self._tracker.partitions.get(tp)
            if part is None:
                continue
            batches = self._tracker.take(tp)
            if batches:
                key = (part.topic_id, tp.partition)
                acks[key] = batches
                names[key] = tp
        return acks, names

    def _acks_answered(
        self,
        names: dict[TopicIdPartition, TopicPartition],
        errors: dict[TopicIdPartition, E.KafkaError | None],
        sent_at: float,
        lock_ms: int | None = None,
    ) -> None:
        for key, tp in names.items():
            result = self._tracker.completed(tp, errors.get(key), sent_at, lock_ms)
            if result is not None:
                self._renewed(result)
                self._ack_done(result)

    def _renewed(self, result: AckResult) -> None:
        """Records whose renewal the broker confirmed go back to the application."""
        part = self._tracker.partitions.get(result.tp)
        again = []
        for offset, kind in result.offsets.items():
            if kind != AcknowledgeType.RENEW:
                continue
            record = self._renewing.pop((result.tp, offset), None)
            held = part is not None and offset in part.acquired and offset not in part.pending
            if record is not None and result.error is None and held and not self._closing:
                again.append(record)
        if again:
            self._buffer.append((-1, sorted(again, key=lambda r: r.offset)))  # -1: no fetch owes them
            self._arrived.set()

    def _acks_failed(
        self, names: dict[TopicIdPartition, TopicPartition], exc: E.KafkaError, sent_at: float
    ) -> None:
        self._acks_answered(names, dict.fromkeys(names, exc), sent_at)

    async def _share_acknowledge(
        self, node: _Node, tps: list[TopicPartition], loop: _backend.Loop, *, close: bool = False
    ) -> None:
        session = node.session
        acks, names = self._take_acks(tps)
        if not acks and not close:
            return
        request = session.acknowledge_request(acks, close=close)
        sent_at = loop.time() * 1000
        try:
            resp = await self._client.send(request, node_id=session.node_id)
        except E.KafkaError as exc:
            self._acks_failed(names, exc, sent_at)
            raise
        assert isinstance(resp, ShareAcknowledgeResponse)
        if resp.error_code:
            err = E.error_for(resp.error_code, resp.error_message)
            self._acks_failed(names, err, sent_at)
            if resp.error_code in SESSION_ERRORS:
                session.reset()
                return
            raise err
        session.succeeded(closed=close)
        errors: dict[TopicIdPartition, E.KafkaError | None] = {}
        for topic in resp.responses:
            for p in topic.partitions:
                errors[(topic.topic_id, p.partition_index)] = (
                    E.error_for(p.error_code, p.error_message) if p.error_code else None
                )
                if p.error_code in _LEADER_ERRORS:
                    self._client.request_metadata_refresh()
        self._acks_answered(names, errors, sent_at, resp.acquisition_lock_timeout_ms)

    async def _share_fetch(
        self,
        node: _Node,
        wanted: dict[TopicIdPartition, TopicPartition],
        ack_tps: list[TopicPartition],
        loop: _backend.Loop,
    ) -> None:
        session = node.session
        acks, names = self._take_acks(tp for tp in ack_tps if session.open)
        params = self._fetch_params
        if not wanted:
            params = FetchParams(
                0, 1, params.max_bytes, params.max_records, params.batch_size, params.acquire_mode
            )
        request = session.fetch_request(wanted, acks, params)
        sent_at = loop.time() * 1000
        timeout_ms = self._client.config.request_timeout_ms + params.max_wait_ms
        try:
            resp = await self._client.send(request, node_id=session.node_id, timeout_ms=timeout_ms)
        except E.KafkaError as exc:
            self._acks_failed(names, exc, sent_at)
            raise
        assert isinstance(resp, ShareFetchResponse)
        if resp.error_code:
            err = E.error_for(resp.error_code, resp.error_message)
            self._acks_failed(names, err, sent_at)
            if resp.error_code in SESSION_ERRORS:
                session.reset()
                return
            raise err
        session.succeeded()
        lock_deadline = sent_at + resp.acquisition_lock_timeout_ms
        ack_errors: dict[TopicIdPartition, E.KafkaError | None] = {}
        arrived = 0
        for topic in resp.responses:
            for p in topic.partitions:
                key = (topic.topic_id, p.partition_index)
                if p.acknowledge_error_code:
                    ack_errors[key] = E.error_for(p.acknowledge_error_code, p.acknowledge_error_message)
                tp = wanted.get(key)
                if tp is None:
                    name = self._client.cluster.topic_name(topic.topic_id)
                    if name is None:
                        continue
                    tp = TopicPartition(name, p.partition_index)
                if p.error_code:
                    if p.error_code in _LEADER_ERRORS:
                        self._client.request_metadata_refresh()
                    log.debug(
                        "share fetch %s-%d: %s",
                        tp.topic,
                        tp.partition,
                        E.error_for(p.error_code, p.error_message),
                    )
                    continue
                if p.acquired_records:
                    arrived += await self._add_records(node, tp, topic.topic_id, p, lock_deadline)
        self._acks_answered(names, ack_errors, sent_at)
        if arrived:
            self._arrived.set()

    async def _add_records(
        self,
        node: _Node,
        tp: TopicPartition,
        topic_id: Any,
        p: ShareFetchResponse.PartitionData,
        lock_deadline: float,
    ) -> int:
        acquired = self._tracker.acquire(
            tp,
            topic_id,
            [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records],
            lock_deadline,
        )
        first = min(acquired)
        self._bytes_by_topic[tp.topic] = self._bytes_by_topic.get(tp.topic, 0) + len(p.records or b"")
        fetched = parse_partition(tp, first, p.records, check_crcs=self.config.check_crcs)
        kd, vd, contextual = self._kd, self._vd, self._contextual
        records: list[ShareRecord] = []
        error: E.KafkaError | None = fetched.error
        position = first
        while True:
            try:
                batch = fetched.next_records(position, kd, vd, contextual)
            except E.CorruptRecordError as exc:
                error = exc
                break
            if not batch:
                if fetched.unresolved is None:
                    break
                # A context deserializer needs I/O (a schema not cached): resolved here, in the
                # fetch task, before the records reach poll; a failure rejects that record.
                call, data, ctx, offset = fetched.unresolved
                fetched.unresolved = None
                try:
                    await call.resolve(data, ctx)
                except Exception as exc:
                    error = E.RecordDeserializationError(
                        f"{tp.topic}-{tp.partition}: cannot deserialize the record at offset {offset}: {exc!r}",
                        tp.topic,
                        tp.partition,
                        offset,
                    )
                    error.__cause__ = exc
                    break
                continue
            position = batch[-1].offset + 1
            for r in batch:
                count = acquired.get(r.offset)
                if count is not None:
                    records.append(ShareRecord(*r, count))
        if fetched.error is not None:
            error = fetched.error
        seen = {r.offset for r in records}
        if error is None:
            # Acquired offsets the batches hold no record for: GAP (markers, compaction).
            self._tracker.gap(tp, [o for o in acquired if o not in seen])
        else:
            # Records past the failure are unreadable here: reject the failing one (a
            # redelivery would fail the same way) and release the rest.
            bad = getattr(error, "offset", None)
            if not isinstance(bad, int) or bad not in acquired:
                bad = min((o for o in acquired if o not in seen), default=None)
            rest = [o for o in acquired if o not in seen]
            self._tracker.deliver(tp, [bad] if bad is not None else [])
            if bad is not None:
                self._tracker.acknowledge(tp, bad, AcknowledgeType.REJECT)
            for o in rest:
                if o != bad:
                    self._tracker.deliver(tp, [o])
                    self._tracker.acknowledge(tp, o, AcknowledgeType.RELEASE)
            self._error = error
        if records:
            records.sort(key=lambda r: r.offset)
            self._buffer.append((node.session.node_id, records))
            node.buffered += len(records)
        elif error is not None:
            self._arrived.set()
        return len(records)


async def _gather_tasks(tasks: Sequence[Any]) -> None:
    """Wait for (cancelled) tasks to end, their errors retrieved and dropped."""
    await _backend.gather(*tasks, return_exceptions=True)


def _as_kafka_error(exc: BaseException | None) -> E.KafkaError:
    return exc if isinstance(exc, E.KafkaError) else E.KafkaError(repr(exc))
