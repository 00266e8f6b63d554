"""Concurrent record processing that keeps per-partition order and commits safely.

``OrderedWorkers`` pulls records from a group ``Consumer`` and runs a user handler on
them with N concurrent workers::

    async def handle(record):
        await save(record.value)

    consumer = Consumer(bootstrap, topics=["t"], group_id="g", enable_auto_commit=False)
    async with consumer:
        workers = OrderedWorkers(consumer, handle, concurrency=16, on_failure="retry")
        await workers.run()          # until workers.stop() or a failure with "stop"

Guarantees:

* never two records of one partition at the same time, and a partition's records in
  offset order (different partitions run in parallel);
* only offsets whose record *and every record before it* are done get committed
  (periodically, every ``commit_interval_ms``, and when partitions are revoked or the
  pool stops);
* on revocation the in-flight record of each revoked partition is awaited and its
  progress committed *before* the partition is given up (the pool registers itself as a
  rebalance listener that runs before the user's); records buffered but not started are
  dropped, so the next owner starts exactly after the last finished one;
* partitions whose buffer is full are paused, so memory stays bounded while the
  consumer keeps polling (and so keeps its group membership);
* leaving ``run`` in any way (``stop()``, a failure under ``"stop"``, cancelling the task
  that runs it, a timeout around it) commits only finished records and moves the
  consumer back to each partition's first unfinished record, so a later ``run`` on the
  same consumer (or the partition's next owner) starts there: nothing is skipped, and
  only records finished but not committed can repeat (at-least-once). ``stop()`` lets
  in-flight records finish; a cancellation cuts them short (they are not committed),
  commits what finished (shielded, within the consumer's ``default_api_timeout_ms``)
  and is re-raised.

Failure policy (what a handler exception does), as in go_kafka_client's worker manager:

* ``"stop"``: the pool stops; ``run`` raises ``WorkerFailedError``. The failed record is
  not committed, so a restart retries it.
* ``"skip"``: log it and carry on (the record counts as done).
* ``"retry"``: retry with exponential backoff (``retry_backoff_ms`` doubling up to
  ``retry_backoff_max_ms``), at most ``max_retries`` times (None: forever), then stop
  (or, with a ``dead_letter_topic``, dead-letter the record and carry on).
  A partition revoked while its record is being retried gives up the retries.

``handler_timeout_ms``: a coroutine handler still running after that long is cancelled
and the call fails with ``HandlerTimeoutError``, a failure of its own kind
(``stats.timeouts``) that the policy then treats like any other. A synchronous handler
cannot be interrupted.

Failure threshold (go_kafka_client's failure counter): with ``failure_threshold=N``,
more than N failed handler calls (errors and timeouts, every retry counts) of one
partition within ``failure_window_ms`` call ``on_failure_threshold(report)`` (a
``FailureReport``; sync or async) before the policy applies. It answers a
``FailureDecision``:

* ``"stop"`` (also the answer without a callback, or when the callback raises): the
  pool stops and ``run`` raises ``FailureThresholdError``; the record is not committed;
* ``"pause"``: the partition is paused with the failed record first in line, until
  ``resume_partition(tp)`` or, with ``failure_pause_ms``, that long; it is then retried;
* ``"continue"``: the failure policy applies as usual.

The count then starts afresh, so the next call needs another N + 1 failures.

Dead letters: with ``dead_letter_topic`` (and the ``producer`` that writes them), a
record that is finally skipped (``"skip"``, or ``"retry"`` out of retries) is first
produced there, with its key and value as the consumer returned them, its headers, and
``dlt.error``, ``dlt.error.type``, ``dlt.topic``, ``dlt.partition``, ``dlt.offset`` and
``dlt.attempts`` headers. Its offset counts as done only once the dead letter is
acknowledged; a dead letter that cannot be written stops the pool (``WorkerFailedError``),
so nothing is skipped without its copy.

Auto-commit must be disabled on the consumer: it would commit positions of records that
are fetched but not processed yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from aiokafka_lite.core import client_metrics as _obs
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import tracing_hook as _otel
from aiokafka_lite.core.client_metrics import track
from aiokafka_lite.core.errors import CommitFailedError, ConfigError, IllegalStateError, KafkaError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.hooks import LATENCY_BUCKETS_S, Histogram
from aiokafka_lite.processing.failures import (
    FailureCallback,
    FailureDecision,
    FailureReport,
    FailureThresholdError,
    FailureWindow,
    HandlerTimeoutError,
    call_handler,
    dead_letter_headers,
    decide,
    failure_kind,
)

__all__ = ["FailurePolicy", "OrderedWorkers", "WorkerFailedError", "WorkerStats"]

log = logging.getLogger(__name__)

FailurePolicy = Literal["stop", "skip", "retry"]
Handler = Callable[[Any], Awaitable[None] | None]


class WorkerFailedError(KafkaError):
    """A handler failed and the failure policy said stop. ``record`` is the failed record."""

    def __init__(self, record: Any, cause: BaseException) -> None:
        self.record = record
        self.cause = cause
        where = f"{getattr(record, 'topic', '?')}-{getattr(record, 'partition', '?')}@{getattr(record, 'offset', '?')}"
        super().__init__(f"handler failed on record {where}: {cause!r}")


class _GroupConsumer(Protocol):
    """What the pool needs from ``aiokafka_lite.Consumer``."""

    @property
    def coordinator(self) -> Any: ...

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Any]]: ...

    async def commit(self, offsets: Any = None) -> None: ...

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def assignment(self) -> set[TopicPartition]: ...


class _DeadLetterProducer(Protocol):
    async def send(self, topic: str, value: Any = None, key: Any = None, *, headers: Any = None) -> Any: ...


@dataclass(slots=True)
class WorkerStats:
    processed: int = 0
    skipped: int = 0
    retries: int = 0
    commits: int = 0
    timeouts: int = 0  # handler calls cancelled at handler_timeout_ms
    dead_lettered: int = 0
    threshold_reports: int = 0  # times the failure threshold was crossed
    #: Handler durations in seconds, successful or not (messaging.process.duration),
    #: while ``aiokafka_lite.core.client_metrics.handler_timing`` is on.
    process_seconds: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS_S))


@dataclass(slots=True)
class _Partition:
    queue: deque[Any] = field(default_factory=deque)
    scheduled: bool = False  # in the ready queue or being processed
    busy: bool = False
    done: int | None = None  # next offset to commit: last finished record + 1
    first: int | None = None  # offset of the first record received (where to rewind if none done)
    committed: int | None = None
    abandoned: bool = False  # revoked/lost/stopped: start nothing new, stop retrying
    idle: Any = field(default_factory=_backend.event)  # asyncio.Event, or the trio backend's
    failures: FailureWindow | None = None

    def __post_init__(self) -> None:
        self.idle.set()


class OrderedWorkers:
    """See the module docstring."""

    def __init__(
        self,
        consumer: _GroupConsumer,
        handler: Handler,
        *,
        concurrency: int = 8,
        on_failure: FailurePolicy = "stop",
        max_retries: int | None = 3,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 10_000,
        max_buffered_per_partition: int = 1000,
        commit_interval_ms: float = 1000,
        fetch_timeout_ms: float = 100,
        max_fetch_records: int = 500,
        handler_timeout_ms: float | None = None,
        failure_threshold: int | None = None,
        failure_window_ms: float = 60_000,
        on_failure_threshold: FailureCallback | None = None,
        failure_pause_ms: float | None = None,
        dead_letter_topic: str | None = None,
        producer: _DeadLetterProducer | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError("concurrency must be >= 1")
        if on_failure not in ("stop", "skip", "retry"):
            raise ConfigError(f"on_failure must be 'stop', 'skip' or 'retry', got {on_failure!r}")
        if max_retries is not None and max_retries < 0:
            raise ConfigError("max_retries must be >= 0 (or None for unlimited)")
        if max_buffered_per_partition < 1 or max_fetch_records < 1:
            raise ConfigError("max_buffered_per_partition and max_fetch_records must be >= 1")
        if retry_backoff_ms < 0 or retry_backoff_max_ms < retry_backoff_ms or commit_interval_ms <= 0:
            raise ConfigError("invalid retry backoff or commit interval")
        if handler_timeout_ms is not None and handler_timeout_ms <= 0:
            raise ConfigError(f"handler_timeout_ms must be > 0 (or None), got {handler_timeout_ms}")
        if failure_threshold is None and on_failure_threshold is not None:
            raise ConfigError("on_failure_threshold needs failure_threshold (failures allowed per window)")
        if failure_threshold is not None:
            FailureWindow(failure_threshold, failure_window_ms)  # checks both
        if failure_pause_ms is not None and failure_pause_ms <= 0:
            raise ConfigError(
                f"failure_pause_ms must be > 0 (or None: until resume_partition), got {failure_pause_ms}"
            )
        if (dead_letter_topic is None) != (producer is None):
            raise ConfigError(
                "dead_letter_topic and producer go together: the producer writes the dead letters"
            )
        if dead_letter_topic is not None and on_failure == "stop":
            raise ConfigError(
                "dead_letter_topic needs on_failure='skip' or 'retry': under 'stop' no record is ever skipped"
            )
        config = getattr(consumer, "config", None)
        if getattr(config, "enable_auto_commit", False) and getattr(config, "group_id", None):
            raise ConfigError(
                "OrderedWorkers commits only what its workers finished: create the consumer with "
                "enable_auto_commit=False"
            )
        self._consumer = consumer
        self._handler = handler
        self._concurrency = concurrency
        self._policy = on_failure
        self._max_retries = max_retries
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = retry_backoff_max_ms
        self._max_buffered = max_buffered_per_partition
        self._commit_interval = commit_interval_ms / 1000
        self._fetch_timeout_ms = fetch_timeout_ms
        self._max_fetch = max_fetch_records
        self._timeout_ms = handler_timeout_ms
        self._threshold = failure_threshold
        self._window_ms = failure_window_ms
        self._on_threshold = on_failure_threshold
        self._pause_s = None if failure_pause_ms is None else failure_pause_ms / 1000
        self._dead_letter_topic = dead_letter_topic
        self._producer = producer
        self._parts: dict[TopicPartition, _Partition] = {}
        self._ready: Any = asyncio.Queue()  # of TopicPartition; on trio a TrioQueue (made in run)
        self._paused_by_us: set[TopicPartition] = set()  # backpressure
        # Resume timers: asyncio.TimerHandle, or on trio the cancel scope of a sleeping task.
        self._paused_on_failure: dict[TopicPartition, Any] = {}
        self._stopping: Any = asyncio.Event()  # on trio, the backend's event (made in run)
        self._task_group: Any = None  # trio: run's task group (workers, resume timers)
        self._failure: WorkerFailedError | FailureThresholdError | None = None
        self._running = False
        self.stats = WorkerStats()
        track(self)

    def metrics(self) -> dict[str, Any]:
        """The worker counters (``stats``), the handler-duration histogram included."""
        st = self.stats
        return {
            "group_id": getattr(getattr(self._consumer, "config", None), "group_id", None),
            "processed": st.processed,
            "skipped": st.skipped,
            "retries": st.retries,
            "commits": st.commits,
            "timeouts": st.timeouts,
            "dead_lettered": st.dead_lettered,
            "process_duration": st.process_seconds.snapshot(),
        }

    # ------------------------------------------------------------------ public
    async def run(self) -> None:
        """Consume and process until ``stop()`` (returns) or a fatal failure (raises)."""
        if self._running:
            raise IllegalStateError("OrderedWorkers.run is already running")
        coordinator = self._consumer.coordinator
        if coordinator is None:
            raise ConfigError("OrderedWorkers needs a consumer with a group_id (it commits offsets)")
        self._running = True
        if _backend.structured():
            await self._run_structured(coordinator)
            return
        self._stopping.clear()
        self._failure = None  # a run after a failed one starts afresh (from the failed record)
        coordinator.add_listener(self)
        workers = [
            asyncio.create_task(self._worker(), name=f"ordered-worker-{i}") for i in range(self._concurrency)
        ]
        interrupted = False
        try:
            await self._feed()
        except asyncio.CancelledError:
            interrupted = True  # cancelled, or a timeout around run(): in-flight records are cut short
            raise
        finally:
            try:
                await self._shutdown(workers, interrupted=interrupted)
            finally:
                coordinator.remove_listener(self)
                self._running = False
        if self._failure is not None:
            raise self._failure

    async def _run_structured(self, coordinator: Any) -> None:
        """``run`` on trio: the workers and resume timers live in a task group of ``run``'s
        own; the feed loop's fetch is interrupted by ``stop()`` through a cancel scope."""
        import anyio

        self._stopping = _backend.event()
        self._ready = _backend.queue()
        self._failure = None
        coordinator.add_listener(self)
        failed: list[Exception] = []
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                for i in range(self._concurrency):
                    tg.start_soon(self._worker, name=f"ordered-worker-{i}")
                try:
                    interrupted = False
                    try:
                        await self._feed_structured(tg)
                    except anyio.get_cancelled_exc_class():
                        interrupted = True  # the workers, in the same cancelled scope, are cut short
                        raise
                    finally:
                        await self._shutdown([], interrupted=interrupted)
                except Exception as exc:  # raised as itself, not inside an exception group
                    failed.append(exc)
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._task_group = None
            coordinator.remove_listener(self)
            self._running = False
        if failed:
            raise failed[0]
        if self._failure is not None:
            raise self._failure

    async def _feed_structured(self, tg: Any) -> None:
        """``_feed`` on trio: ``stop()`` cancels a fetch in progress (the consumer keeps
        what it had buffered), never a commit."""
        import anyio

        fetching = anyio.CancelScope()

        async def watch_stop() -> None:
            await self._stopping.wait()
            fetching.cancel()

        watcher = anyio.CancelScope()

        async def watch() -> None:
            with watcher:
                await watch_stop()

        tg.start_soon(watch, name="ordered-workers-stop")
        next_commit = time.monotonic() + self._commit_interval
        try:
            while not self._stopping.is_set():
                batch = None
                with fetching:
                    batch = await self._consumer.getmany(
                        timeout_ms=self._fetch_timeout_ms, max_records=self._max_fetch
                    )
                if batch is None:
                    break
                fetching = anyio.CancelScope()
                self._enqueue(batch)
                self._backpressure()
                if time.monotonic() >= next_commit:
                    next_commit = time.monotonic() + self._commit_interval
                    await self._commit(self._parts)
        finally:
            watcher.cancel()

    def stop(self) -> None:
        """Ask ``run`` to finish: in-flight records complete, progress is committed."""
        self._stopping.set()

    def committable(self) -> dict[TopicPartition, int]:
        """Per partition, the offset a commit would store now (last finished + 1)."""
        return {tp: p.done for tp, p in self._parts.items() if p.done is not None}

    def in_flight(self) -> set[TopicPartition]:
        return {tp for tp, p in self._parts.items() if p.busy}

    def paused_partitions(self) -> set[TopicPartition]:
        """Partitions paused by a ``"pause"`` decision of the failure-threshold callback."""
        return set(self._paused_on_failure)

    def resume_partition(self, tp: TopicPartition) -> None:
        """Resume a partition paused on failures: its failed record is retried first."""
        if tp not in self._paused_on_failure:
            return
        timer = self._paused_on_failure.pop(tp)
        if timer is not None:
            timer.cancel()
        if tp in self._consumer.assignment():
            self._consumer.resume(tp)
        part = self._parts.get(tp)
        if part is not None and part.queue and not part.scheduled and not part.abandoned:
            part.scheduled = True
            self._ready.put_nowait(tp)
        log.info("resumed partition %s-%s paused on failures", tp.topic, tp.partition)

    def _pause_partition(self, tp: TopicPartition) -> None:
        self._paused_by_us.discard(tp)  # now held by the failure pause, not by the backpressure
        if tp in self._consumer.assignment():
            self._consumer.pause(tp)
        timer = None
        if self._pause_s is not None:
            timer = self._resume_later(self._pause_s, tp)
        self._paused_on_failure[tp] = timer

    def _resume_later(self, delay_s: float, tp: TopicPartition) -> Any:
        """Call ``resume_partition(tp)`` in ``delay_s``; returns what ``cancel()`` stops
        (on trio a task in ``run``'s task group)."""
        return _backend.call_later(
            delay_s,
            self.resume_partition,
            tp,
            task_group=self._task_group,
            name=f"ordered-workers-resume-{tp.topic}-{tp.partition}",
        )

    # ------------------------------------------------------------------ feeding
    async def _feed(self) -> None:
        next_commit = time.monotonic() + self._commit_interval
        stop_wait = asyncio.ensure_future(self._stopping.wait())
        fetch: asyncio.Future[Any] | None = None
        try:
            while not self._stopping.is_set():
                fetch = asyncio.ensure_future(
                    self._consumer.getmany(timeout_ms=self._fetch_timeout_ms, max_records=self._max_fetch)
                )
                await asyncio.wait({fetch, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if not fetch.done():
                    break  # stopping: the finally cancels the fetch (the consumer keeps its buffer)
                batch, fetch = fetch.result(), None
                self._enqueue(batch)
                self._backpressure()
                if time.monotonic() >= next_commit:
                    next_commit = time.monotonic() + self._commit_interval
                    await self._commit(self._parts)
        finally:
            # Also when run is cancelled while waiting: a fetch left running would take
            # records from the consumer that no worker ever sees.
            pending = [t for t in (fetch, stop_wait) if t is not None]
            for task in pending:
                task.cancel()
            await asyncio.wait(pending)  # (raises only when run itself is cancelled again)
            if fetch is not None and not fetch.cancelled():
                if fetch.exception() is None:  # fetched as run was cancelled: rewound at shutdown
                    self._enqueue(fetch.result())

    def _enqueue(self, batch: dict[TopicPartition, list[Any]]) -> None:
        for tp, records in batch.items():
            if not records:
                continue
            part = self._parts.get(tp)
            if part is None:
                part = self._parts[tp] = _Partition(first=records[0].offset)
            elif part.abandoned:
                continue  # being drained (revocation, failure): the next owner reads these
            part.queue.extend(records)
            if not part.scheduled and tp not in self._paused_on_failure:
                part.scheduled = True
                self._ready.put_nowait(tp)

    def _backpressure(self) -> None:
        assigned = self._consumer.assignment()
        full = [
            tp
            for tp, p in self._parts.items()
            if len(p.queue) >= self._max_buffered and tp in assigned and tp not in self._paused_on_failure
        ]
        pause = [tp for tp in full if tp not in self._paused_by_us]
        if pause:
            self._consumer.pause(*pause)
            self._paused_by_us.update(pause)
        low = self._max_buffered // 2
        resume = [
            tp
            for tp in self._paused_by_us
            if tp in assigned and (tp not in self._parts or len(self._parts[tp].queue) <= low)
        ]
        if resume:
            self._paused_by_us.difference_update(resume)
            self._consumer.resume(*resume)
        self._paused_by_us &= assigned

    # ------------------------------------------------------------------ workers
    async def _worker(self) -> None:
        while True:
            tp = await self._ready.get()
            part = self._parts.get(tp)
            if part is None:
                continue
            if part.abandoned or not part.queue or self._failure is not None or tp in self._paused_on_failure:
                part.scheduled = False
                continue
            record = part.queue.popleft()
            part.busy = True
            part.idle.clear()
            try:
                outcome = await self._process(record, tp, part)
                if outcome == "done":
                    part.done = record.offset + 1
                    self.stats.processed += 1
                elif outcome == "paused" and not part.abandoned:
                    part.queue.appendleft(record)  # first in line when the partition resumes
            except (WorkerFailedError, FailureThresholdError) as exc:
                part.abandoned = True
                if self._failure is None:
                    self._failure = exc
                    log.error("%s; stopping the workers", exc)
                self._stopping.set()
            finally:
                part.busy = False
                part.idle.set()
                if (
                    part.queue
                    and not part.abandoned
                    and self._failure is None
                    and tp not in self._paused_on_failure
                ):
                    self._ready.put_nowait(tp)  # next record of this partition, after the others waiting
                else:
                    part.scheduled = False

    async def _process(
        self, record: Any, tp: TopicPartition, part: _Partition
    ) -> Literal["done", "abandoned", "paused"]:
        """Run the handler under the failure policy and threshold: "done" when the record
        counts as done, "abandoned" when its partition went away meanwhile, "paused" when
        the threshold callback paused the partition (the record was not processed)."""
        retries = 0
        while True:
            started = time.perf_counter() if _obs.handler_timing else 0.0
            try:
                if _otel.enabled:  # the handler runs in the record's process span (its trace)
                    await _otel.in_process_span(
                        self._consumer, record, lambda: call_handler(self._handler, record, self._timeout_ms)
                    )
                else:
                    await call_handler(self._handler, record, self._timeout_ms)
                if started:
                    self.stats.process_seconds.record(time.perf_counter() - started)
                return "done"
            except (asyncio.CancelledError, _backend.cancelled_exc()):
                raise
            except Exception as exc:
                if started:
                    self.stats.process_seconds.record(time.perf_counter() - started)
                if isinstance(exc, HandlerTimeoutError):
                    self.stats.timeouts += 1
                decision = await self._check_threshold(tp, part, record, exc)
                if decision is FailureDecision.PAUSE:
                    if part.abandoned:
                        return "abandoned"
                    log.warning("pausing partition %s-%s on failures: %r", tp.topic, tp.partition, exc)
                    self._pause_partition(tp)
                    return "paused"
                if self._policy == "skip":
                    log.warning(
                        "skipping record %s-%s@%s: %r", record.topic, record.partition, record.offset, exc
                    )
                    await self._dead_letter(record, exc, retries + 1)
                    self.stats.skipped += 1
                    return "done"
                if self._policy == "retry" and (self._max_retries is None or retries < self._max_retries):
                    if part.abandoned:
                        return "abandoned"  # revoked meanwhile: the next owner will retry it
                    delay = min(self._backoff_ms * (2**retries), self._backoff_max_ms) / 1000
                    retries += 1
                    self.stats.retries += 1
                    log.info(
                        "retrying record %s-%s@%s in %.0f ms: %r",
                        record.topic,
                        record.partition,
                        record.offset,
                        delay * 1000,
                        exc,
                    )
                    await _backend.sleep(delay)
                    if part.abandoned:
                        return "abandoned"
                    continue
                if self._policy == "retry" and self._dead_letter_topic is not None:
                    log.warning(
                        "record %s-%s@%s failed %d times, dead-lettered: %r",
                        record.topic,
                        record.partition,
                        record.offset,
                        retries + 1,
                        exc,
                    )
                    await self._dead_letter(record, exc, retries + 1)
                    self.stats.skipped += 1
                    return "done"
                raise WorkerFailedError(record, exc) from exc

    async def _check_threshold(
        self, tp: TopicPartition, part: _Partition, record: Any, exc: Exception
    ) -> FailureDecision:
        """Count the failure; past the threshold, what the callback decides."""
        if self._threshold is None:
            return FailureDecision.CONTINUE
        if part.failures is None:
            part.failures = FailureWindow(self._threshold, self._window_ms)
        counts = part.failures.add(failure_kind(exc), time.monotonic() * 1000)
        if counts is None:
            return FailureDecision.CONTINUE
        self.stats.threshold_reports += 1
        report = FailureReport(tp, counts, self._threshold, self._window_ms, record, exc)
        if self._on_threshold is None:
            raise FailureThresholdError(report) from exc
        try:
            decision = await decide(self._on_threshold, report)
        except Exception as callback_exc:
            log.exception("the failure-threshold callback raised; stopping")
            raise FailureThresholdError(report) from callback_exc
        if decision is FailureDecision.STOP:
            raise FailureThresholdError(report) from exc
        return decision

    async def _dead_letter(self, record: Any, exc: Exception, attempts: int) -> None:
        """Write the dead letter of a record about to be skipped and wait for its ack."""
        if self._producer is None or self._dead_letter_topic is None:
            return
        headers = dead_letter_headers(
            headers=list(getattr(record, "headers", None) or ()),
            error=exc,
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            attempts=attempts,
        )
        try:
            await self._producer.send(
                self._dead_letter_topic,
                getattr(record, "value", None),
                getattr(record, "key", None),
                headers=headers,
            )
        except Exception as send_exc:  # (a serializer refusing the key or value too)
            raise WorkerFailedError(record, send_exc) from send_exc
        self.stats.dead_lettered += 1

    # ------------------------------------------------------------------ commits
    async def _commit(self, parts: Iterable[TopicPartition]) -> None:
        offsets = {}
        for tp in parts:
            p = self._parts.get(tp)
            if p is not None and p.done is not None and p.done != p.committed:
                offsets[tp] = p.done
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except CommitFailedError as exc:
            log.warning("commit of finished offsets rejected (%s); the next owner may redo some records", exc)
            return
        except KafkaError as exc:
            log.warning("commit of finished offsets failed: %s", exc)
            return
        self.stats.commits += 1
        for tp, offset in offsets.items():
            p = self._parts.get(tp)
            if p is not None:
                p.committed = offset

    async def _drain(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Drop what is queued for ``tps`` and wait for their in-flight records."""
        present = []
        for tp in tps:
            p = self._parts.get(tp)
            if p is None:
                continue
            present.append(tp)
            p.abandoned = True
            p.queue.clear()
        for tp in present:
            await self._parts[tp].idle.wait()
        return present

    # ------------------------------------------------------------------ rebalance listener (internal)
    def _forget_pauses(self, tps: Iterable[TopicPartition]) -> None:
        """The consumer gave these partitions up: nothing to resume later."""
        for tp in tps:
            self._paused_by_us.discard(tp)
            timer = self._paused_on_failure.pop(tp, None)
            if timer is not None:
                timer.cancel()

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._forget_pauses(revoked)
        present = await self._drain(revoked)
        await self._commit(present)
        for tp in present:
            self._parts.pop(tp, None)

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        # Another member may own them already: finish what runs, commit nothing.
        self._forget_pauses(lost)
        present = await self._drain(lost)
        for tp in present:
            self._parts.pop(tp, None)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None

    # ------------------------------------------------------------------ shutdown
    def _rewind(self) -> None:
        """Move the consumer back to the first unfinished record of each partition it
        still holds: the records dropped from the queues (and a failed or cut-short
        record) are fetched again by the next ``run`` on this consumer, never skipped."""
        assigned = self._consumer.assignment()
        for tp, p in self._parts.items():
            resume_at = p.done if p.done is not None else p.first
            if tp in assigned and resume_at is not None:
                self._consumer.seek(tp, resume_at)

    async def _shutdown(self, workers: list[Any], *, interrupted: bool = False) -> None:
        """Stop starting records, let the in-flight ones end, rewind, commit what finished.

        ``interrupted`` (run was cancelled, a timeout around it included): in-flight
        handlers are cancelled rather than awaited, so run ends promptly; their records
        are not done, so not committed, and are processed again. The rest of the cleanup
        (the wait for the cancelled workers, the commit of finished records) is shielded
        from the cancellation under way (trio's and anyio's cancel scopes cancel every
        later await), bounded by the consumer's ``default_api_timeout_ms``. Whatever
        happens to it, the consumer is rewound to the first unfinished record."""
        try:
            for p in self._parts.values():
                p.abandoned = True  # start nothing new, give up retries
                p.queue.clear()
            if interrupted:
                config = getattr(self._consumer, "config", None)
                limit_s = getattr(config, "default_api_timeout_ms", 60_000) / 1000
                with _backend.shielded(limit_s):
                    if workers:  # asyncio: cut the in-flight handlers short (trio: the scope did)
                        for w in workers:
                            w.cancel()
                        await _backend.gather(*workers, return_exceptions=True)
                    await self._finish_shutdown()
            else:
                await self._finish_shutdown()
        finally:
            self._rewind()  # (again: the commit may have been interrupted before it)
            for w in workers:
                w.cancel()
            for timer in self._paused_on_failure.values():
                if timer is not None:
                    timer.cancel()
            self._paused_by_us.update(self._paused_on_failure)
            self._paused_on_failure.clear()
            if self._paused_by_us:
                with contextlib.suppress(KafkaError):
                    self._consumer.resume(*(self._paused_by_us & self._consumer.assignment()))
                self._paused_by_us.clear()
            self._parts.clear()
            while not self._ready.empty():
                self._ready.get_nowait()
            if workers:  # (trio: none here, run's task group ends them)
                await asyncio.gather(*workers, return_exceptions=True)

    async def _finish_shutdown(self) -> None:
        await self._drain(list(self._parts))
        self._rewind()
        await self._commit(list(self._parts))
