"""The producer's background sender: drains ready batches into produce requests.

One task (owned by the ``Producer``) loops: apply new metadata, settle idempotence
state, expire old batches, ask the accumulator which brokers have sendable data,
drain one request per such broker (at most ``max_in_flight_requests_per_connection``
outstanding per broker) and sleep until the next linger deadline or a wake-up. Each
request runs in a child task that the sender owns; its response is handled per
partition by :meth:`Sender.complete_batch` following the Java client's rules
(success / split / retry / fail), and sequence bookkeeping goes through the
``IdempotenceManager``.

Leader discovery (KIP-951): a partition answered with NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH may carry the new leader (``CurrentLeader``, with its address in the
response's ``NodeEndpoints``). As Java's ``Sender``, that leader goes into the cluster
view at once when its epoch is newer than the cached one, and the batch is retried to it
without waiting out the retry backoff or a metadata refresh; the refresh is still
requested in the background. Likewise (as Java's ``RecordAccumulator``), a batch waiting
out its retry backoff is sent at once when metadata shows its partition under a newer
leader epoch than the one it was last sent under (a leader that crashed cannot answer
with a hint; the refresh finds its successor).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.net.client import error_type_name
from aiokafka_lite.net.hooks import BATCH_BYTES_BUCKETS, BATCH_RECORDS_BUCKETS, Histogram
from aiokafka_lite.net.metadata import LeaderHint, hint_endpoints
from aiokafka_lite.produce.accumulator import RecordAccumulator
from aiokafka_lite.produce.batch import ProducerBatch
from aiokafka_lite.produce.producer_config import ProducerConfig
from aiokafka_lite.produce.sequencing import DUPLICATE_SEQUENCE_NUMBER, IdempotenceManager
from aiokafka_lite.produce.topics import TopicRegistry
from aiokafka_lite.produce.transaction import TransactionManager
from aiokafka_lite.wire.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["Sender"]

log = logging.getLogger("aiokafka_lite.producer")

_MESSAGE_TOO_LARGE: Final = 10
#: The partition errors whose response may name the new leader (KIP-951).
_LEADER_MOVED_ERRORS: Final = (E.NotLeaderOrFollowerError.code, E.FencedLeaderEpochError.code)
_NETWORK_EXCEPTION: Final = 13
_REQUEST_TIMED_OUT: Final = 7
_TRANSACTIONAL_ID_MAX_TIMEOUT: Final = 2**31 - 1
#: Produce v13 identifies topics by id only (KIP-516).
_LAST_VERSION_WITH_TOPIC_NAMES: Final = 12


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Sender:
    """Background sending for one producer (see module doc)."""

    def __init__(
        self,
        client: Client,
        config: ProducerConfig,
        acc: RecordAccumulator,
        topics: TopicRegistry,
        idempotence: IdempotenceManager | None,
        *,
        transactional_id: str | None = None,
    ) -> None:
        self._client = client
        self._cfg = config
        self._acc = acc
        self._topics = topics
        self._idem = idempotence
        self._transactional_id = transactional_id
        self._acks = config.acks_value
        self._max_in_flight = config.max_in_flight_requests_per_connection
        self._in_flight: dict[int, int] = {}
        self._requests: set[asyncio.Task[None]] = set()
        self._pid_task: asyncio.Task[None] | None = None
        self._pid_retry_at = 0.0
        self._pid_attempts = 0
        self._wake_fut: asyncio.Future[None] | None = None
        self._woken = False
        self._sleep_until = 0.0
        self._kick_pending = False
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._load_update_at = 0.0
        #: Per broker, when data was last sent to it (partitioner availability timeout).
        self._last_drain: dict[int, float] = {}
        #: Set when the producer can no longer send (idempotence fatal error).
        self.fatal_error: BaseException | None = None
        #: Called once with the error when the producer can no longer send.
        self.on_fatal: Callable[[BaseException], None] | None = None
        #: Called with each batch that failed for good (after ``batch.fail``).
        self.on_batch_failed: Callable[[ProducerBatch], None] | None = None
        # Counters (observability and tests).
        self.requests_sent = 0
        self.batches_retried = 0
        self.batches_split = 0
        #: Records the broker acknowledged (or, with acks=0, that were written), per topic:
        #: ``[records, bytes, batches]``. Counted per batch, never per record.
        self.sent_by_topic: dict[str, list[int]] = {}
        #: Records whose delivery failed for good (errors, expiry, abort), per topic and
        #: error type name.
        self.failed_by_topic: dict[tuple[str, str], int] = {}
        self.records_retried = 0
        #: Batches retried to a new leader named by a produce response (KIP-951).
        self.batches_moved_by_leader_hint = 0
        #: False: ignore the leaders produce responses name and wait for metadata, as
        #: clients before KIP-951 do (for comparisons, e.g. bench/leader_failover.py).
        self.use_leader_hints = True
        #: Per partition, the leader epoch its last batch was sent under.
        self._sent_epoch: dict[TopicPartition, int] = {}
        #: Sizes of acknowledged batches on the wire (bytes, after compression) and in records.
        self.batch_bytes = Histogram(BATCH_BYTES_BUCKETS)
        self.batch_records = Histogram(BATCH_RECORDS_BUCKETS)

    # -- lifecycle ---------------------------------------------------------------------------

    #: trio: new tasks do not start in the order they were spawned (trio runs each batch
    #: forwards or backwards), but requests must reach the wire in the order they were
    #: made (sequence numbers). Request tasks take turns to start sending; asyncio runs
    #: tasks in FIFO order and needs none of this.
    _in_order: _Turns | None = None

    def start(self) -> None:
        if _backend.structured():  # tasks need not start in spawn order (trio)
            self._in_order = _Turns()
        self._task = self._spawn(self._run(), "aiokafka_lite.producer.sender")

    async def _produce_in_turn(
        self, ticket: int, node: int, req: ProduceRequest, batches: list[ProducerBatch], version: int | None
    ) -> None:
        turns = self._in_order
        assert turns is not None
        try:
            await turns.wait(ticket)
        except BaseException:
            turns.skip(ticket)
            raise
        # The turn passes on now; the next task runs only once this one suspends, which
        # client.send does after writing the request when a connection and slot are ready
        # (and otherwise in FIFO queues of the connection: slots, the connect task).
        turns.done(ticket)
        await self._produce(node, req, batches, version)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str | None = None) -> asyncio.Task[None]:
        """asyncio: a plain task, cancelled and awaited by ``stop()``; trio: a task in the
        client's task group (the client outlives the sender: the producer closes it last)."""
        task: asyncio.Task[None] | None = _backend.spawn(
            self._client._owner, coro, name or "producer-request"
        )
        if task is None:
            raise E.ClosedError("the producer's client is closed")
        return task

    def kick(self) -> None:
        """Linger 0: send what is ready at the end of this event-loop round, from a plain
        callback rather than a sender-task step. Records appended by other tasks in the
        same round (a burst) still ride in one request, and no task switch is paid."""
        if self._kick_pending:
            return
        self._kick_pending = True
        _backend.loop().call_soon(self._kick_now)

    def _kick_now(self) -> None:
        """One sending pass in a callback (everything in it is synchronous). The sender
        task is woken only if the pass found a deadline earlier than the one it sleeps
        until."""
        self._kick_pending = False
        idem = self._idem
        if (
            self._task is None
            or self._stopping
            or self._wake_fut is None
            or (idem is not None and idem.needs_attention)
        ):
            self.wake()  # not sleeping, or a full pass is due anyway
            return
        now = _now_ms()
        try:
            # Only the sending half of a pass: expiry, metadata and idempotence upkeep
            # stay with the sender task's own passes.
            self._update_metadata(now)
            delay, unknown_leader = self._send_ready(now)
        except Exception:
            log.exception("producer send pass failed")
            self.wake()
            return
        if unknown_leader or now + delay < self._sleep_until:
            self.wake()

    def wake(self) -> None:
        fut = self._wake_fut
        if fut is not None:
            if not fut.done():
                fut.set_result(None)
        else:
            self._woken = True

    async def stop(self) -> None:
        """Stop looping; cancel outstanding requests (the caller has failed their batches)."""
        self._stopping = True
        self.wake()
        tasks: list[asyncio.Task[None]] = list(self._requests)
        if self._pid_task is not None:
            tasks.append(self._pid_task)
        if self._task is not None:
            tasks.append(self._task)
        for task in tasks:
            task.cancel()
        await _backend.gather(*tasks, return_exceptions=True)
        self._requests.clear()

    @property
    def in_flight_requests(self) -> int:
        return sum(self._in_flight.values())

    # -- the loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                delay = self._run_once(_now_ms())
            except Exception:  # a bug must not silently stop all sending
                log.exception("producer sender iteration failed")
                delay = 100.0
            await self._sleep(delay)

    async def _sleep(self, delay_ms: float) -> None:
        if self._woken:
            self._woken = False
            await _backend.sleep(0)
            return
        fut = self._wake_fut = _backend.loop().create_future()
        self._sleep_until = _now_ms() + delay_ms
        try:
            await _backend.sleep_until_woken(fut, delay_ms / 1000.0)  # math.inf stays inf
        finally:
            self._wake_fut = None
            self._woken = False
            self._sleep_until = 0.0

    def _run_once(self, now: float) -> float:
        """One pass; returns how long to sleep (ms) unless woken earlier."""
        acc = self._acc
        self._update_metadata(now)
        delay = math.inf
        idem = self._idem
        if idem is not None:
            idem.maybe_resolve_sequences()
            idem.maybe_bump_epoch()
            if idem.fatal_error is not None and self.fatal_error is None:
                self._fatal(idem.fatal_error)
            # (A transactional producer's id comes from its TransactionManager.)
            if not idem.has_producer_id and self.fatal_error is None and self._transactional_id is None:
                if self._pid_task is None:
                    wait = self._pid_retry_at - now
                    if wait <= 0:
                        self._pid_task = self._spawn(self._init_producer_id(), "init-producer-id")
                    else:
                        delay = wait
        if isinstance(idem, TransactionManager) and idem.abort_error is not None:
            # Transactions: while aborting (or waiting for the abort), nothing more is
            # sent; queued batches fail now (see transaction.py).
            abort_error = idem.abort_error
            for batch in acc.drain_all():
                self._fail(batch, abort_error, sequence_gap=True)
        if self.fatal_error is not None:
            for batch in acc.drain_all():
                self._fail(batch, self.fatal_error)
        for batch in acc.expire(now):
            self._expire(batch, now, in_flight=False)
        for batch in acc.expired_in_flight(now):
            self._expire(batch, now, in_flight=True)
        if self._topics_need_load_update(now):
            self._update_partition_load(now)
        wait, unknown_leader = self._send_ready(now)
        delay = min(delay, wait)
        if unknown_leader:
            self._client.request_metadata_refresh()
            delay = min(delay, self._cfg.retry_backoff_ms)
        if acc.in_flight or acc.has_queued:
            delay = min(delay, max(acc.next_expiry_ms(now), 1.0))
        if acc.has_queued and self.use_leader_hints:
            # Nothing wakes the sender when a metadata refresh lands: look at least every
            # retry_backoff_ms, so a batch backing off from a lost leader goes to its
            # successor soon after metadata names it (see _update_metadata).
            delay = min(delay, self._cfg.retry_backoff_ms)
        return delay

    def _update_metadata(self, now: float) -> None:
        """Take a new cluster snapshot in; batches backing off from a partition whose
        leader epoch rose since they were sent retry now (KIP-951, as Java)."""
        if not self._topics.update(self._client.cluster) or not self.use_leader_hints:
            return
        cluster = self._client.cluster
        for tp, sent_epoch in self._sent_epoch.items():
            epoch = cluster.leader_epoch(tp)
            if epoch > sent_epoch:
                self._sent_epoch[tp] = epoch
                for batch in self._acc.queue(tp).batches:
                    if batch.in_retry and batch.retry_at_ms > now:
                        batch.retry_at_ms = now

    def _send_ready(self, now: float) -> tuple[float, bool]:
        """Drain and send whatever is sendable; ``(ms until more may be, unknown leader)``."""
        acc = self._acc
        idem = self._idem
        max_in_flight = self._max_in_flight
        in_flight = self._in_flight

        def has_room(node: int) -> bool:
            return in_flight.get(node, 0) < max_in_flight

        # Pipelining: keep draining while some broker has both sendable data and a free
        # in-flight slot (readiness is re-evaluated after each round).
        while True:
            nodes, wait, unknown_leader = acc.ready(now, has_room)
            sent = False
            for node in nodes:
                batches = acc.drain(node, self._cfg.max_request_size, now, idem)
                if batches:
                    self._send(node, batches, now)
                    self._last_drain[node] = now
                    sent = True
            if not sent:
                return wait, unknown_leader

    def _topics_need_load_update(self, now: float) -> bool:
        return self._cfg.partitioner_adaptive_partitioning_enable and now >= self._load_update_at

    def _update_partition_load(self, now: float) -> None:
        self._load_update_at = now + 50.0
        stuck = self._stuck_nodes(now)
        for name, state in self._topics.topics.items():
            if state.sticky is not None and len(state.available) > 1:
                unavailable = {q.tp.partition for q in state.queues if q.leader in stuck} if stuck else ()
                state.sticky.update_load(self._acc.queue_sizes(name), unavailable)

    def _stuck_nodes(self, now: float) -> set[int]:
        """Brokers with sendable data that could not be sent to for longer than
        ``partitioner_availability_timeout_ms`` (KIP-794)."""
        timeout = self._cfg.partitioner_availability_timeout_ms
        if timeout <= 0:
            return set()
        waiting, _, _ = self._acc.ready(now)
        last = self._last_drain
        for node in list(last):
            if node not in waiting:
                last[node] = now  # nothing waiting there: not stuck
        return {node for node in waiting if now - last.setdefault(node, now) > timeout}

    # -- producer id ----------------------------------------------------------------------------

    async def _init_producer_id(self) -> None:
        idem = self._idem
        assert idem is not None
        try:
            req = InitProducerIdRequest(
                transactional_id=self._transactional_id,
                transaction_timeout_ms=_TRANSACTIONAL_ID_MAX_TIMEOUT,
                producer_id=-1,
                producer_epoch=-1,
            )
            resp = await self._client.send(req, timeout_ms=self._cfg.request_timeout_ms)
            assert isinstance(resp, InitProducerIdResponse)
            if resp.error_code:
                raise E.error_for(
                    resp.error_code, _init_pid_message(resp.error_code, self._client.principal_hint)
                )
        except _backend.cancelled_exc():
            raise
        except E.KafkaError as exc:
            if exc.retriable or isinstance(exc, E.CoordinatorError):
                self._pid_attempts += 1
                delay = self._acc.backoff_ms(self._pid_attempts)
                self._pid_retry_at = _now_ms() + delay
                log.debug("InitProducerId failed (%s); retrying in %.0f ms", exc, delay)
            elif not self._stopping:
                log.error("idempotent producer cannot get a producer id: %s", exc)
                idem.fatal_error = exc
        else:
            self._pid_attempts = 0
            idem.set_producer_id_and_epoch(resp.producer_id, resp.producer_epoch)
            log.debug("producer id %d epoch %d", resp.producer_id, resp.producer_epoch)
        finally:
            self._pid_task = None
            self.wake()

    def _fatal(self, exc: BaseException) -> None:
        self.fatal_error = exc
        if self.on_fatal is not None:
            self.on_fatal(exc)
        for batch in list(self._acc.in_flight):
            self._fail(batch, exc)

    # -- requests ------------------------------------------------------------------------------

    def _send(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        by_topic: dict[str, ProduceRequest.TopicProduceData] = {}
        topics = self._topics.topics
        cluster = self._client.cluster
        version: int | None = None  # negotiated by the client
        for batch in batches:
            topic = batch.tp.topic
            td = by_topic.get(topic)
            if td is None:
                state = topics.get(topic)
                topic_id = state.topic_id if state is not None and state.topic_id is not None else ZERO_UUID
                if topic_id == ZERO_UUID:
                    version = _LAST_VERSION_WITH_TOPIC_NAMES  # no id known: name the topic
                td = by_topic[topic] = ProduceRequest.TopicProduceData(name=topic, topic_id=topic_id)
            self._sent_epoch[batch.tp] = cluster.leader_epoch(batch.tp)
            td.partition_data.append(
                ProduceRequest.PartitionProduceData(index=batch.tp.partition, records=batch.buffer)
            )
        req = ProduceRequest(
            transactional_id=self._transactional_id,
            acks=self._acks,
            timeout_ms=int(self._cfg.request_timeout_ms),
            topic_data=list(by_topic.values()),
        )
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        self.requests_sent += 1
        if version is not None:
            try:
                version = min(version, self._client.api_version(node, ProduceRequest.API_KEY))
            except KeyError:  # not connected yet: let the client negotiate (names still work <= 12)
                version = None
        if self._in_order is None:
            task = self._spawn(self._produce(node, req, batches, version))
        else:
            task = self._spawn(self._produce_in_turn(self._in_order.take(), node, req, batches, version))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _produce(
        self, node: int, req: ProduceRequest, batches: list[ProducerBatch], version: int | None = None
    ) -> None:
        try:
            try:
                resp = await self._client.send(
                    req,
                    node_id=node,
                    version=version,
                    timeout_ms=self._cfg.request_timeout_ms,
                    expect_response=self._acks != 0,
                )
            except _backend.cancelled_exc():
                raise
            except (E.KafkaConnectionError, E.KafkaTimeoutError) as exc:
                code = _REQUEST_TIMED_OUT if isinstance(exc, E.KafkaTimeoutError) else _NETWORK_EXCEPTION
                self._client.request_metadata_refresh()
                now = _now_ms()
                for batch in batches:
                    self.complete_batch(batch, code, now, cause=exc)
                return
            except E.UnsupportedVersionError as exc:
                self._client.note_error(exc)
                for batch in batches:
                    self._fail(batch, exc, sequence_gap=True)
                return
            except E.ClosedError as exc:
                for batch in batches:
                    self._fail(batch, E.ProducerClosedError(f"producer closed: {exc}"))
                return
            except Exception as exc:
                log.exception("produce request to node %s failed unexpectedly", node)
                self._client.note_error(exc)
                for batch in batches:
                    self._fail(
                        batch,
                        exc if isinstance(exc, E.KafkaError) else E.KafkaError(str(exc)),
                        sequence_gap=True,
                    )
                return
            now = _now_ms()
            if resp is None:  # acks=0: written is all we will ever know
                for batch in batches:
                    if self._idem is not None:
                        self._idem.on_success(batch, -1)
                    self._count_sent(batch)
                    batch.complete(-1, -1)
                    self._acc.complete(batch)
                return
            assert isinstance(resp, ProduceResponse)
            self._handle_response(resp, batches, now)
        finally:
            self._in_flight[node] -= 1
            # A freed slot matters only if something waits to be sent (retries included),
            # or idempotence bookkeeping needs a pass; otherwise let the sender sleep.
            idem = self._idem
            if self._acc.has_queued or (idem is not None and idem.needs_attention) or self._stopping:
                self.wake()

    def _apply_leader_hints(self, resp: ProduceResponse) -> set[TopicPartition]:
        """Take the new leaders ``resp`` names into the cluster view (KIP-951); the
        partitions whose leader moved."""
        if not self.use_leader_hints:
            return set()
        hints: dict[TopicPartition, LeaderHint] = {}
        for topic_resp in resp.responses:
            name = topic_resp.name
            if not name and topic_resp.topic_id != ZERO_UUID:
                name = self._topics.name_for(topic_resp.topic_id) or ""
            for part in topic_resp.partition_responses:
                leader = part.current_leader
                if part.error_code in _LEADER_MOVED_ERRORS and name and leader.leader_id >= 0:
                    hints[TopicPartition(name, part.index)] = LeaderHint(
                        leader.leader_id, leader.leader_epoch
                    )
        if not hints:
            return set()
        moved = self._client.apply_leader_hints(hints, hint_endpoints(resp.node_endpoints))
        if moved:
            self._topics.update(self._client.cluster)
            log.debug("produce response moved leaders: %s", {str(tp): hints[tp] for tp in moved})
        return moved

    def _handle_response(self, resp: ProduceResponse, batches: list[ProducerBatch], now: float) -> None:
        pending = {(b.tp.topic, b.tp.partition): b for b in batches}
        moved = self._apply_leader_hints(resp)
        for topic_resp in resp.responses:
            name = topic_resp.name
            if not name and topic_resp.topic_id != ZERO_UUID:
                name = self._topics.name_for(topic_resp.topic_id) or ""
            for part in topic_resp.partition_responses:
                batch = pending.pop((name, part.index), None)
                if batch is None:
                    continue
                code = part.error_code
                if code == 0 or code == DUPLICATE_SEQUENCE_NUMBER:
                    base = part.base_offset
                    if code:
                        # Written before, but too long ago for the broker to remember the
                        # offset (Java treats it as success too).
                        log.warning(
                            "%s-%d: broker reports batch (sequence %d) as an old duplicate; offset unknown",
                            name,
                            part.index,
                            batch.base_sequence,
                        )
                        base = -1
                    if self._idem is not None:
                        self._idem.on_success(batch, base)
                    if not batch.is_done:
                        self._count_sent(batch)
                    batch.complete(base, part.log_append_time_ms)  # no-op if it expired meanwhile
                    self._acc.complete(batch)
                else:
                    message = part.error_message
                    if part.record_errors:
                        details = "; ".join(
                            f"record {e.batch_index}: {e.batch_index_error_message}"
                            for e in part.record_errors
                        )
                        message = f"{message}; {details}" if message else details
                    self.complete_batch(
                        batch,
                        code,
                        now,
                        message=message,
                        log_start_offset=part.log_start_offset,
                        leader_moved=batch.tp in moved,
                    )
        for batch in pending.values():  # the broker left partitions out: retry them
            self.complete_batch(
                batch, _NETWORK_EXCEPTION, now, message="partition missing from produce response"
            )

    # -- per-batch outcome ---------------------------------------------------------------------

    def _count_sent(self, batch: ProducerBatch) -> None:
        n = batch.count
        size = len(batch.buffer) if batch.buffer is not None else 0
        counts = self.sent_by_topic.get(batch.tp.topic)
        if counts is None:
            counts = self.sent_by_topic[batch.tp.topic] = [0, 0, 0]
        counts[0] += n
        counts[1] += size
        counts[2] += 1
        self.batch_bytes.record(size)
        self.batch_records.record(n)

    def _count_failed(self, batch: ProducerBatch, error: BaseException) -> None:
        key = (batch.tp.topic, error_type_name(error))
        self.failed_by_topic[key] = self.failed_by_topic.get(key, 0) + batch.count

    def complete_batch(
        self,
        batch: ProducerBatch,
        code: int,
        now: float,
        *,
        message: str | None = None,
        log_start_offset: int = -1,
        cause: BaseException | None = None,
        leader_moved: bool = False,
    ) -> None:
        """Handle a failed partition response (``code`` != 0) for ``batch``.
        ``leader_moved``: the response named a newer leader, now in the cluster view; a
        retry goes there without backoff (KIP-951)."""
        tp = batch.tp
        if code == _MESSAGE_TOO_LARGE and batch.count > 1 and not batch.is_done and not self._stopping:
            children = self._acc.split(batch, now)
            if self._idem is not None:
                self._idem.on_split(batch, children)
            self.batches_split += 1
            log.debug(
                "%s-%d: batch too large for the broker, split into %d", tp.topic, tp.partition, len(children)
            )
            return
        if cause is not None:
            error: BaseException = cause
            retriable = True
            invalidates = True
        else:
            text = f"{tp.topic}-{tp.partition}" + (f": {message}" if message else "")
            if code == E.TopicAuthorizationFailedError.code:
                text += f"; no ACL allows {self._client.principal_hint} to Write topic {tp.topic!r}"
            error = E.error_for(code, text)
            retriable = error.retriable if isinstance(error, E.KafkaError) else False
            invalidates = getattr(error, "invalidates_metadata", False)
        self._client.note_error(error)
        if invalidates:
            self._client.request_metadata_refresh()
        can_retry = (
            not batch.is_done
            and not self._stopping
            and batch.attempts <= self._cfg.retries
            and now - batch.created_ms < self._cfg.delivery_timeout_ms
            and (
                self._idem.can_retry(batch, code, log_start_offset, retriable)
                if self._idem is not None
                else retriable
            )
        )
        if can_retry:
            log.debug(
                "%s-%d: retrying batch (attempt %d) after %s", tp.topic, tp.partition, batch.attempts, error
            )
            self.batches_retried += 1
            self.records_retried += batch.count
            batch.last_error = error
            self._acc.reenqueue(batch, now)
            if leader_moved:
                batch.retry_at_ms = now  # a new leader: nothing to back off from (as Java)
                self.batches_moved_by_leader_hint += 1
            return
        if cause is not None:
            # Disconnect/timeout: the broker may or may not have written it.
            if self._idem is not None and batch.has_sequence:
                self._idem.mark_unresolved(batch)
            self._fail(batch, error)
            return
        # The broker refused the batch, leaving a gap in the sequence that must be
        # renumbered away; with retries exhausted the gap is assumed too (as in Java).
        self._fail(batch, error, code=code, sequence_gap=batch.attempts <= self._cfg.retries)

    def _fail(
        self, batch: ProducerBatch, error: BaseException, *, code: int = -1, sequence_gap: bool = False
    ) -> None:
        if self._idem is not None and batch.has_sequence:
            self._idem.on_failed(batch, code, sequence_gap)
        if batch.fail(error):
            self._count_failed(batch, error)
            self._acc.complete(batch)
            if self.on_batch_failed is not None:
                self.on_batch_failed(batch)
        else:
            self._acc.complete(batch)

    def _expire(self, batch: ProducerBatch, now: float, *, in_flight: bool) -> None:
        tp = batch.tp
        where = "in flight" if in_flight else "queued"
        message = (
            f"expiring {batch.count} record(s) for {tp.topic}-{tp.partition} ({where}): "
            f"{now - batch.created_ms:.0f} ms has passed since batch creation (delivery_timeout_ms="
            f"{self._cfg.delivery_timeout_ms:g})"
        )
        last = batch.last_error
        if last is not None:
            # Retried until the deadline: say why (the broker's answer, e.g. NOT_ENOUGH_REPLICAS
            # while too few replicas are in sync), as the error's cause and in its message.
            described = (
                str(last) if isinstance(last, E.BrokerResponseError) else f"{type(last).__name__}: {last}"
            )
            message += f"; last error: {described}"
        err = E.KafkaTimeoutError(message)
        err.__cause__ = last
        self._client.note_error(err)
        if self._idem is not None and batch.has_sequence:
            # Sent at least once: the broker may have written it. Hold the partition
            # until everything in flight settles (see sequencing.py).
            self._idem.mark_unresolved(batch)
        if batch.fail(err):
            self._count_failed(batch, err)
            if self.on_batch_failed is not None:
                self.on_batch_failed(batch)
        self._acc.complete(batch)

    def fail_all(self, error: BaseException) -> None:
        """Fail every incomplete batch (abort / forced close)."""
        acc = self._acc
        acc.drain_all()
        for batch in list(acc.incomplete):
            if batch.fail(error):
                self._count_failed(batch, error)
                if self.on_batch_failed is not None:
                    self.on_batch_failed(batch)
            acc.complete(batch)

    def partitions_in_flight(self) -> set[TopicPartition]:
        return {b.tp for b in self._acc.in_flight}


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _Turns:
    """Tickets served in order (see ``Sender._in_order``); a skipped ticket is passed over."""

    def __init__(self) -> None:
        self._next_ticket = 0
        self._turn = 0
        self._skipped: set[int] = set()
        self._changed = _backend.event()

    def take(self) -> int:
        ticket = self._next_ticket
        self._next_ticket += 1
        return ticket

    async def wait(self, ticket: int) -> None:
        while self._turn != ticket:
            changed = self._changed
            await changed.wait()

    def done(self, ticket: int) -> None:
        if ticket == self._turn:
            self._turn += 1
            while self._turn in self._skipped:
                self._skipped.discard(self._turn)
                self._turn += 1
            changed, self._changed = self._changed, _backend.event()
            changed.set()

    def skip(self, ticket: int) -> None:
        if ticket == self._turn:
            self.done(ticket)
        elif ticket > self._turn:
            self._skipped.add(ticket)


def _init_pid_message(code: int, principal: str) -> str:
    """InitProducerId's error, with the ACL an authorization failure most likely lacks."""
    if code == E.ClusterAuthorizationFailedError.code:
        return (
            f"InitProducerId: no ACL allows {principal} IdempotentWrite on the cluster or Write on "
            "any topic (an idempotent producer needs one; enable_idempotence=False does without)"
        )
    if code == E.TransactionalIdAuthorizationFailedError.code:
        return f"InitProducerId: no ACL allows {principal} to Write its transactional id"
    return "InitProducerId"
