"""Exactly-once consume-transform-produce: ``TransactSession``.

A session owns a group ``Consumer`` (``read_committed``, no auto-commit) and a
transactional ``Producer``. Each batch of input is processed in one transaction that
also commits the input offsets, so output and progress are committed together or not
at all::

    async with TransactSession(bootstrap, group_id="g", topics=["in"],
                               transactional_id="g-worker-1") as session:
        while running:
            batch = await session.poll(timeout_ms=1000)   # begins a transaction
            for records in batch.values():
                for r in records:
                    await session.producer.enqueue("out", transform(r.value), key=r.key)
            if not await session.commit():
                ...  # aborted by a rebalance: this input will be consumed again

or ``await session.process(handler)`` for one poll/handle/commit round.

Leaving a round: ``process()`` aborts the round's transaction when its handler raises
(the error is re-raised) and when it is cancelled (a timeout around it included; the
abort is shielded from the cancellation, which is then re-raised), and moves the
consumer back to the round's first record, so the next round on this session (or the
partitions' next owner) processes that input again and its output is committed once.
In a hand-written ``poll``/``commit`` loop the session cannot tell a round left mid-way
from one still being built (a second ``poll`` joins the open transaction): call
``abort()`` when leaving it without ``commit()``, e.g. ``except BaseException: await
session.abort(); raise`` (on trio, inside ``anyio.CancelScope(shield=True)``: a
cancelled scope cancels every later await). A ``poll`` cancelled after its records
arrived hands them out again.

Rebalances: when partitions whose records are in the open transaction are revoked (or
lost), the session aborts the transaction inside the rebalance callback, *before* the
partitions are given up, and moves the partitions it keeps back to the start of the
aborted input. The new owner starts from the last committed offsets, and the aborted
output is invisible to ``read_committed`` readers, so no input is reflected twice in
the committed output. ``commit()`` then returns False; records still being produced
for the aborted transaction fail (``TransactionAbortedError``, or ``IllegalStateError``
for sends after the abort).

The transactional id identifies the instance (one per process or worker, stable across
restarts): starting a session fences a previous incarnation and aborts its open
transaction. With KIP-447 the offset commit carries the group generation, so zombies of
other members cannot commit either; one id per instance is enough.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from aiokafka_lite.consume import Consumer, Record
from aiokafka_lite.consume.subscription import OffsetAndMetadata
from aiokafka_lite.core import client_metrics as _obs
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core import tracing_hook as _otel
from aiokafka_lite.core.client_metrics import track
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.hooks import LATENCY_BUCKETS_S, Histogram
from aiokafka_lite.produce import Producer
from aiokafka_lite.produce.transaction import TxnState

__all__ = ["TransactSession"]

log = logging.getLogger(__name__)

Batch = dict[TopicPartition, list[Record]]
Handler = Callable[[Batch, Producer], Awaitable[None] | None]

_FORCED_CONSUMER_OPTIONS = {"isolation_level": "read_committed", "enable_auto_commit": False}


class TransactSession:
    """A group consumer and a transactional producer working in lockstep (see module doc).

    ``consumer_options``/``producer_options`` are passed to ``Consumer``/``Producer``
    (each creates its own client from ``bootstrap_servers``); ``isolation_level`` and
    ``enable_auto_commit`` are fixed. ``listener`` is the user's rebalance listener; it
    runs after the session has handled a revocation.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        group_id: str,
        transactional_id: str,
        topics: str | Iterable[str] | None = None,
        pattern: str | None = None,
        listener: object | None = None,
        consumer_options: Mapping[str, Any] | None = None,
        producer_options: Mapping[str, Any] | None = None,
    ) -> None:
        c_opts = dict(consumer_options or {})
        for name, value in _FORCED_CONSUMER_OPTIONS.items():
            if name in c_opts and c_opts[name] != value:
                raise E.ConfigError(f"TransactSession needs {name}={value!r}")
            c_opts[name] = value
        self.consumer = Consumer(
            bootstrap_servers, topics=topics, pattern=pattern, listener=listener, group_id=group_id, **c_opts
        )
        self.producer = Producer(
            bootstrap_servers, transactional_id=transactional_id, **dict(producer_options or {})
        )
        # Serialises the transaction's end (commit, abort, rebalance callbacks).
        self._lock: Any = asyncio.Lock()  # swapped at start for one of the running library
        self._open = False
        #: The open transaction was aborted by a rebalance (commit() reports False).
        self._doomed = False
        #: Per partition in the open transaction: first offset consumed (where to rewind
        #: to after an abort) and the offset to commit (next to read).
        self._starts: dict[TopicPartition, int] = {}
        self._next: dict[TopicPartition, OffsetAndMetadata] = {}
        self._started = False
        #: A ``process`` round was cancelled and its abort did not complete.
        self._must_abort = False
        #: Handler durations in seconds per ``process`` round, successful or not
        #: (messaging.process.duration), while ``observability.handler_timing`` is on.
        self.process_seconds = Histogram(LATENCY_BUCKETS_S)
        track(self)

    def metrics(self) -> dict[str, Any]:
        """The handler-duration histogram (the consumer's and the producer's metrics are
        their own ``metrics()``)."""
        return {
            "group_id": self.consumer.config.group_id,
            "process_duration": self.process_seconds.snapshot(),
        }

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        # The producer first: its InitProducerId aborts a previous incarnation's open
        # transaction, whose pending offsets would otherwise stall our offset fetches.
        self._lock = _backend.lock_for_run(self._lock)
        await self.producer.start()
        try:
            await self.consumer.start()
            coordinator = self.consumer.coordinator
            assert coordinator is not None
            coordinator.add_listener(self)  # runs before the user's listener
        except BaseException:
            await self.consumer.close()
            await self.producer.close(flush=False)
            raise
        self._started = True

    async def close(self) -> None:
        """Abort an open transaction, leave the group, close both clients."""
        try:
            async with self._lock:
                if self._open and self.producer.transaction_state in (
                    TxnState.IN_TRANSACTION,
                    TxnState.ABORTABLE_ERROR,
                ):
                    try:
                        await self._abort_locked(rewind=())
                    except E.KafkaError as exc:
                        log.warning("TransactSession: abort at close failed: %s", exc)
        finally:
            try:
                await self.consumer.close()
            finally:
                await self.producer.close()

    async def __aenter__(self) -> TransactSession:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def in_transaction(self) -> bool:
        return self._open

    # -- the loop ---------------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 1000, max_records: int | None = None) -> Batch:
        """Records from the consumer (``{}`` after ``timeout_ms``). Records begin a
        transaction unless one is open (then they join it)."""
        if not self._started:
            raise E.IllegalStateError("TransactSession is not started (use 'async with' or start())")
        if self._must_abort:  # a round was left mid-way and its abort did not complete
            await self.abort()
        elif self._open and self.producer.transaction_state is TxnState.COMMITTING:
            await self.commit()  # a commit cancelled mid-way: finish it before records join
        records = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        if not records:
            return records
        joined = False
        try:
            # No rebalance callback can run between getmany returning and the transaction
            # being marked open below (getmany waited for running callbacks); the
            # assignment check covers the rest.
            async with self._lock:
                assigned = self.consumer.assignment()
                records = {tp: recs for tp, recs in records.items() if tp in assigned and recs}
                if not records:
                    return records
                if not self._open:
                    await self.producer.begin_transaction()
                    self._open = True
                    self._doomed = False
                for tp, recs in records.items():
                    self._starts.setdefault(tp, recs[0].offset)
                    last = recs[-1]
                    self._next[tp] = OffsetAndMetadata(last.offset + 1, "", last.leader_epoch)
                joined = True
        finally:
            if not joined:
                # Cancelled (trio's lock checkpoints) or failed before the records joined
                # the transaction: hand them out again rather than skip them.
                assigned = self.consumer.assignment()
                for tp, recs in records.items():
                    if recs and tp in assigned:
                        self.consumer.seek(tp, recs[0].offset)
        return records

    async def commit(self) -> bool:
        """Commit the open transaction with the input offsets. True when committed (or
        nothing was open); False when it was aborted instead because the group moved on
        (a rebalance took its partitions, or the commit found the generation stale): its
        input is consumed again. Other errors are raised (after an abort, when the
        transaction could be aborted; the session stays usable unless the error is fatal)."""
        async with self._lock:
            if not self._open:
                doomed, self._doomed = self._doomed, False
                return not doomed
            producer = self.producer
            try:
                if producer.transaction_state is not TxnState.COMMITTING:  # else: a retried commit
                    await producer.send_offsets_to_transaction(self._next, self.consumer.group_metadata())
                await producer.commit_transaction()
            except E.KafkaError as exc:
                if producer.transaction_state is not TxnState.ABORTABLE_ERROR:
                    raise  # fatal, or a timeout (the commit goes on: call commit() again)
                await self._abort_locked(rewind=self.consumer.assignment())
                if isinstance(exc, E.CommitFailedError):
                    log.info("TransactSession: transaction aborted, the group moved on: %s", exc)
                    return False
                raise
            self._open = False
            self._starts.clear()
            self._next.clear()
            return True

    async def abort(self) -> None:
        """Abort the open transaction; its input will be consumed again."""
        async with self._lock:
            if self._open:
                await self._abort_locked(rewind=self.consumer.assignment())
            self._doomed = False
            self._must_abort = False

    async def process(
        self, handler: Handler, *, timeout_ms: float = 1000, max_records: int | None = None
    ) -> bool | None:
        """One round: poll, ``await handler(batch, producer)``, commit. None when there
        was no input; otherwise what ``commit()`` returns. A handler error aborts the
        transaction and is raised (unless a rebalance had aborted it already: False)."""
        batch = await self.poll(timeout_ms=timeout_ms, max_records=max_records)
        if not batch:
            return None
        started = time.perf_counter() if _obs.handler_timing else 0.0
        try:
            if _otel.enabled:  # the handler runs in a process span continuing the records' trace
                await _otel.in_batch_span(self.consumer, batch, lambda: handler(batch, self.producer))
            else:
                result = handler(batch, self.producer)
                if inspect.isawaitable(result):
                    await result
            if started:
                self.process_seconds.record(time.perf_counter() - started)
        except Exception:
            if started:
                self.process_seconds.record(time.perf_counter() - started)
            if self._doomed:
                async with self._lock:
                    self._doomed = False
                return False  # sends failed because the rebalance aborted the transaction
            await self.abort()
            raise
        except BaseException:  # cancelled, or a timeout around the round
            await self._abort_left_round()
            raise
        return await self.commit()

    async def _abort_left_round(self) -> None:
        """A round left mid-way by cancellation: its input must not be committed by a
        later round joining the same transaction. Abort it (rewinding the input), shielded
        from the cancellation under way and bounded by the consumer's
        ``default_api_timeout_ms``; if that does not complete, the next ``poll`` aborts first."""
        self._must_abort = True
        limit_s = self.consumer.config.default_api_timeout_ms / 1000
        with _backend.shielded(limit_s):
            try:
                await self.abort()
            except E.KafkaError as exc:
                log.warning("TransactSession: abort of a round left mid-way failed: %s", exc)

    # -- aborting ---------------------------------------------------------------------------

    async def _abort_locked(self, rewind: Iterable[TopicPartition]) -> None:
        try:
            await self.producer.abort_transaction()
        finally:
            # The aborted input must be consumed again by whoever keeps its partitions.
            for tp in rewind:
                start = self._starts.get(tp)
                if start is not None:
                    self.consumer.seek(tp, start)
            self._open = False
            self._starts.clear()
            self._next.clear()

    async def _on_taken(self, tps: set[TopicPartition], lost: bool) -> None:
        async with self._lock:
            if not self._open or not (lost or tps & self._starts.keys()):
                return  # nothing of the open transaction is affected
            log.info(
                "TransactSession: partitions %s %s mid-transaction: aborting it",
                sorted(tps),
                "lost" if lost else "revoked",
            )
            keep = self.consumer.assignment() - tps
            self._doomed = True
            state = self.producer.transaction_state
            if state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR) and not self.producer.closed:
                await self._abort_locked(rewind=keep)
            else:  # fatal or closed: nothing to abort with (the coordinator times it out)
                self._open = False
                self._starts.clear()
                self._next.clear()

    # Rebalance listener (registered on the group coordinator, before the user's).
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._on_taken(revoked, lost=False)

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        await self._on_taken(lost, lost=True)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None
