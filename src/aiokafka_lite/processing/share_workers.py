"""``ShareWorkers``: N concurrent handlers fed by a share consumer, a job queue on Kafka.

::

    async def handle(record):
        await send_email(record.value)

    async with ShareConsumer(bootstrap, group_id="mail", topics=["mail"],
                             acknowledgement_mode="explicit") as consumer, Producer(bootstrap) as producer:
        workers = ShareWorkers(consumer, handle, concurrency=16, max_attempts=5,
                               dead_letter_topic="mail.dlt", producer=producer)
        await workers.run()      # until workers.stop()

Unlike ``OrderedWorkers`` there is no per-partition order: a share group hands each
record to one member under a lock and takes its fate record by record, so any worker
takes any record.

* a handler that returns accepts its record (ACCEPT);
* a handler that raises releases it (RELEASE: the broker delivers it again, to any
  member, with ``delivery_count`` + 1), until the record has been delivered
  ``max_attempts`` times: then it is rejected (REJECT: never delivered again), after
  being copied to ``dead_letter_topic`` when one is given, with the error and its
  origin in headers (``dlt.error``, ``dlt.error.type``, ``dlt.topic``,
  ``dlt.partition``, ``dlt.offset``, ``dlt.attempts`` and ``dlt.delivery.count``, both
  the delivery count). A failing copy releases the record instead, so nothing is
  rejected without its dead letter;
* ``handler_timeout_ms``: a handler still running after that long is cancelled; the
  call fails with ``HandlerTimeoutError`` (a failure of its own kind, ``stats.timeouts``)
  and the record is released or rejected as for any failure;
* at most ``max_in_flight`` records are held (polled, not yet acknowledged): the
  bound of the backpressure and of the records whose locks run while they wait.

Stopping never accepts a record whose handler did not complete:

* ``stop()`` (or a ``"stop"`` failure decision) ends polling; handlers already running
  finish (and accept their record), records polled but not started are processed too
  (``stop``) or released (failure stop);
* cancelling the task running ``run()``, or a timeout around it, cancels the running
  handlers and releases their records and every record polled but not started;
* ``consumer.close()`` from another task releases what the pool holds (the consumer
  releases every record not acknowledged); ``run()`` then returns once the handlers
  already running are done (what they decide can no longer be sent: their records come
  back, which is the one case where a completed record is delivered again). When the
  broker is unreachable, a release cannot be sent either: the record's acquisition lock
  expires and the broker delivers it again.

Failure threshold (go_kafka_client's failure counter): with ``failure_threshold=N``,
more than N failed handler calls (errors and timeouts) in the pool within
``failure_window_ms`` call ``on_failure_threshold(report)`` (a ``FailureReport`` whose
``partition`` is None; sync or async), which answers a ``FailureDecision``:

* ``"stop"`` (also the answer without a callback, or when the callback raises): the
  failed record is released, polling stops, ``run`` raises ``FailureThresholdError``
  once the records in flight are finished;
* ``"pause"``: a share group has no partitions of its own to pause, so the pool pauses:
  the failed record and those polled but not started are released (other members take
  them), and polling stops until ``resume()`` or, with ``failure_pause_ms``, that long.
  Records the consumer had already fetched stay acquired until their locks expire;
* ``"continue"``: the record is released or rejected as usual.

The count then starts afresh, so the next call needs another N + 1 failures.

The broker's own limit (``share.delivery.count.limit``, 5 by default) still applies:
with ``max_attempts`` above it the broker archives the record first, without a dead
letter. The consumer must use ``acknowledgement_mode="explicit"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka_lite.consume.share.record import AcknowledgeType, ShareRecord
from aiokafka_lite.consume.share.share_consumer import ShareConsumer
from aiokafka_lite.core import client_metrics as _obs
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import tracing_hook as _otel
from aiokafka_lite.core.client_metrics import track
from aiokafka_lite.core.errors import ClosedError, ConfigError, KafkaError
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

__all__ = ["ShareWorkerStats", "ShareWorkers"]

log = logging.getLogger(__name__)

Handler = Callable[[ShareRecord], Awaitable[Any]]


class _Producer(Protocol):
    async def send(self, topic: str, value: Any = None, key: Any = None, *, headers: Any = None) -> Any: ...


@dataclass
class ShareWorkerStats:
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    dead_lettered: int = 0
    timeouts: int = 0  # handler calls cancelled at handler_timeout_ms
    threshold_reports: int = 0  # times the failure threshold was crossed
    #: Handler durations in seconds, successful or not (messaging.process.duration),
    #: while ``aiokafka_lite.core.client_metrics.handler_timing`` is on.
    process_seconds: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS_S))


class ShareWorkers:
    """Runs ``handler`` on a share consumer's records with ``concurrency`` workers."""

    def __init__(
        self,
        consumer: ShareConsumer,
        handler: Handler,
        *,
        concurrency: int = 8,
        max_in_flight: int | None = None,
        max_attempts: int | None = None,
        dead_letter_topic: str | None = None,
        producer: _Producer | None = None,
        poll_timeout_ms: float = 500,
        handler_timeout_ms: float | None = None,
        failure_threshold: int | None = None,
        failure_window_ms: float = 60_000,
        on_failure_threshold: FailureCallback | None = None,
        failure_pause_ms: float | None = None,
    ) -> None:
        if not consumer.config.explicit:
            raise ConfigError(
                "ShareWorkers needs a consumer with acknowledgement_mode='explicit' "
                "(each record is acknowledged when its handler finishes)"
            )
        if concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
        in_flight = 2 * concurrency if max_in_flight is None else max_in_flight
        if in_flight < concurrency:
            raise ConfigError(f"max_in_flight ({in_flight}) must be >= concurrency ({concurrency})")
        if max_attempts is not None and max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1, got {max_attempts}")
        if (dead_letter_topic is None) != (producer is None):
            raise ConfigError(
                "dead_letter_topic and producer go together: the producer writes the dead letters"
            )
        if handler_timeout_ms is not None and handler_timeout_ms <= 0:
            raise ConfigError(f"handler_timeout_ms must be > 0 (or None), got {handler_timeout_ms}")
        if failure_threshold is None and on_failure_threshold is not None:
            raise ConfigError("on_failure_threshold needs failure_threshold (failures allowed per window)")
        if failure_pause_ms is not None and failure_pause_ms <= 0:
            raise ConfigError(f"failure_pause_ms must be > 0 (or None: until resume), got {failure_pause_ms}")
        self._failures = (
            None if failure_threshold is None else FailureWindow(failure_threshold, failure_window_ms)
        )
        self.consumer = consumer
        self.handler = handler
        self.concurrency = concurrency
        self.max_in_flight = in_flight
        self.max_attempts = max_attempts
        self.dead_letter_topic = dead_letter_topic
        self.producer = producer
        self.poll_timeout_ms = poll_timeout_ms
        self.handler_timeout_ms = handler_timeout_ms
        self.on_failure_threshold = on_failure_threshold
        self.failure_pause_ms = failure_pause_ms
        self.stats = ShareWorkerStats()
        self._queue: Any = asyncio.Queue()  # of ShareRecord; on trio a TrioQueue (made in run)
        self._held = 0  # polled and not acknowledged yet
        self._room: Any = asyncio.Event()  # on trio, the backend's event (made in run)
        self._stopping = False
        self._paused = False
        # asyncio.TimerHandle; on trio the cancel scope of a sleeping task in run's task group
        self._resume_timer: Any = None
        self._task_group: Any = None  # trio: run's task group (workers, resume timer)
        self._failure: FailureThresholdError | None = None
        track(self)

    def metrics(self) -> dict[str, Any]:
        """The worker counters (``stats``), the handler-duration histogram included."""
        st = self.stats
        return {
            "group_id": self.consumer.group_id,
            "accepted": st.accepted,
            "released": st.released,
            "rejected": st.rejected,
            "timeouts": st.timeouts,
            "dead_lettered": st.dead_lettered,
            "process_duration": st.process_seconds.snapshot(),
        }

    @property
    def in_flight(self) -> int:
        return self._held

    @property
    def paused(self) -> bool:
        """Paused by a ``"pause"`` decision of the failure-threshold callback."""
        return self._paused

    def stop(self) -> None:
        """Stop polling; ``run`` returns once the records held are finished (handlers
        running complete; records polled but not started yet are processed too)."""
        self._stopping = True
        self._room.set()

    def resume(self) -> None:
        """Poll again after a ``"pause"`` decision."""
        if self._resume_timer is not None:
            self._resume_timer.cancel()
            self._resume_timer = None
        if self._paused:
            self._paused = False
            self._room.set()
            log.info("share workers resumed")

    async def run(self) -> None:
        """Poll and process until ``stop()``; in-flight records finish before it returns.

        Raises ``FailureThresholdError`` when the failure-threshold callback said stop.
        """
        self._failure = None
        if _backend.structured():
            await self._run_structured()
            return
        workers = [
            asyncio.create_task(self._worker(), name=f"share-worker-{i}") for i in range(self.concurrency)
        ]
        try:
            await self._feed()
            await self._queue.join()
        finally:
            for w in workers:
                w.cancel()
            self._release_queued()  # before any await: a cancel scope may cut those short
            await _wait_cancelled(workers)
            if self._resume_timer is not None:
                self._resume_timer.cancel()
                self._resume_timer = None
            self._paused = False
        if self._failure is not None:
            raise self._failure

    async def _run_structured(self) -> None:
        """``run`` on trio: the workers and the resume timer live in a task group of
        ``run``'s own, cancelled once the held records are finished."""
        import anyio

        room_was_set = self._room.is_set()
        self._room = _backend.event()
        if room_was_set:
            self._room.set()
        self._queue = _backend.queue()
        failed: list[Exception] = []
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                for i in range(self.concurrency):
                    tg.start_soon(self._worker, name=f"share-worker-{i}")
                try:
                    await self._feed()
                    await self._queue.join()
                except Exception as exc:  # raised as itself, not inside an exception group
                    failed.append(exc)
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._task_group = None
            self._release_queued()
            if self._resume_timer is not None:
                self._resume_timer.cancel()
                self._resume_timer = None
            self._paused = False
        if failed:
            raise failed[0]
        if self._failure is not None:
            raise self._failure

    def _resume_later(self, delay_s: float) -> Any:
        """Call ``resume`` in ``delay_s``; returns what ``cancel()`` stops (on trio a
        task in ``run``'s task group)."""
        return _backend.call_later(
            delay_s, self.resume, task_group=self._task_group, name="share-workers-resume"
        )

    def _release_queued(self) -> None:
        """``run`` is left (cancelled, or failed): records polled but never started go
        back to the group (a pool run again on this consumer must not find them stuck)."""
        while not self._queue.empty():
            record = self._queue.get_nowait()
            self._ack(record, AcknowledgeType.RELEASE)
            self._held -= 1
            self._queue.task_done()
        self._room.set()

    async def _feed(self) -> None:
        while not self._stopping:
            free = self.max_in_flight - self._held
            if free <= 0 or self._paused:
                self._room.clear()
                await self._room.wait()
                continue
            if self.consumer.closed:
                return  # closed from another task: it released what the pool holds
            try:
                records = await self.consumer._poll(free, self.poll_timeout_ms, check_acknowledged=False)
            except ClosedError:
                if self.consumer.closed:
                    return
                raise
            self._held += len(records)
            for record in records:
                self._queue.put_nowait(record)

    async def _worker(self) -> None:
        while True:
            record = await self._queue.get()
            try:
                await self._process(record)
            except (asyncio.CancelledError, _backend.cancelled_exc()):
                # Cancelled before the record was decided (in the handler, the failure
                # callback or the dead-letter send): it goes back. A decided record
                # keeps its decision (acknowledging twice is refused, and ignored here).
                self._ack(record, AcknowledgeType.RELEASE)
                raise
            finally:
                self._held -= 1
                self._room.set()
                self._queue.task_done()

    async def _process(self, record: ShareRecord) -> None:
        if self._paused or self._failure is not None or self.consumer.closed:
            # Polled before a pause, a failure stop or a close: others take it.
            self._ack(record, AcknowledgeType.RELEASE)
            return
        started = time.perf_counter() if _obs.handler_timing else 0.0
        try:
            if _otel.enabled:  # the handler runs in the record's process span (its trace)
                await _otel.in_process_span(
                    self.consumer, record, lambda: call_handler(self.handler, record, self.handler_timeout_ms)
                )
            else:
                await call_handler(self.handler, record, self.handler_timeout_ms)
            if started:
                self.stats.process_seconds.record(time.perf_counter() - started)
        except Exception as exc:
            if started:
                self.stats.process_seconds.record(time.perf_counter() - started)
            if isinstance(exc, HandlerTimeoutError):
                self.stats.timeouts += 1
            decision = await self._check_threshold(record, exc)
            if decision is not FailureDecision.CONTINUE:
                self._ack(record, AcknowledgeType.RELEASE)
                return
            if self.max_attempts is not None and record.delivery_count >= self.max_attempts:
                if await self._dead_letter(record, exc):
                    self._ack(record, AcknowledgeType.REJECT)
                    return
            else:
                log.info(
                    "handler failed on %s-%d@%d (delivery %d), released: %r",
                    record.topic,
                    record.partition,
                    record.offset,
                    record.delivery_count,
                    exc,
                )
            self._ack(record, AcknowledgeType.RELEASE)
            return
        self._ack(record, AcknowledgeType.ACCEPT)

    async def _check_threshold(self, record: ShareRecord, exc: Exception) -> FailureDecision:
        """Count the failure; past the threshold, ask the callback and carry out a stop or
        a pause (the caller then releases the record)."""
        window = self._failures
        if window is None:
            return FailureDecision.CONTINUE
        counts = window.add(failure_kind(exc), _backend.loop().time() * 1000)
        if counts is None:
            return FailureDecision.CONTINUE
        self.stats.threshold_reports += 1
        report = FailureReport(None, counts, window.threshold, window.window_ms, record, exc)
        if self.on_failure_threshold is None:
            decision = FailureDecision.STOP
            cause: BaseException = exc
        else:
            try:
                decision = await decide(self.on_failure_threshold, report)
                cause = exc
            except Exception as callback_exc:
                log.exception("the failure-threshold callback raised; stopping")
                decision, cause = FailureDecision.STOP, callback_exc
        if decision is FailureDecision.STOP:
            if self._failure is None:
                self._failure = FailureThresholdError(report)
                self._failure.__cause__ = cause
                log.error("%s; stopping the share workers", self._failure)
            self.stop()
        elif decision is FailureDecision.PAUSE and not self._stopping:
            log.warning("pausing the share workers on failures: %s", FailureThresholdError(report))
            self._paused = True
            if self._resume_timer is not None:
                self._resume_timer.cancel()
                self._resume_timer = None
            if self.failure_pause_ms is not None:
                self._resume_timer = self._resume_later(self.failure_pause_ms / 1000)
        return decision

    async def _dead_letter(self, record: ShareRecord, exc: Exception) -> bool:
        """Copy a record that used up its attempts; False when the copy failed."""
        if self.producer is None or self.dead_letter_topic is None:
            log.warning(
                "rejecting %s-%d@%d after %d deliveries: %r",
                record.topic,
                record.partition,
                record.offset,
                record.delivery_count,
                exc,
            )
            return True
        headers = dead_letter_headers(
            headers=record.headers,
            error=exc,
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            attempts=record.delivery_count,
        )
        headers.append(("dlt.delivery.count", str(record.delivery_count).encode()))
        try:
            await self.producer.send(self.dead_letter_topic, record.value, record.key, headers=headers)
        except Exception as send_exc:  # (a serializer refusing the key or value too)
            log.error(
                "dead letter for %s-%d@%d failed, released: %r",
                record.topic,
                record.partition,
                record.offset,
                send_exc,
            )
            return False
        self.stats.dead_lettered += 1
        return True

    def _ack(self, record: ShareRecord, kind: AcknowledgeType) -> None:
        # Closed consumer: close released the record. Already decided: that decision stands.
        with contextlib.suppress(KafkaError):
            self.consumer.acknowledge(record, kind)
            if kind == AcknowledgeType.ACCEPT:
                self.stats.accepted += 1
            elif kind == AcknowledgeType.RELEASE:
                self.stats.released += 1
            else:
                self.stats.rejected += 1


async def _wait_cancelled(tasks: list[asyncio.Task[None]]) -> None:
    """Wait until cancelled tasks have ended (each releases its record on the way), even
    if the caller is cancelled again meanwhile, as anyio's cancel scopes do on asyncio at
    every await; that cancellation is raised afterwards."""
    again: asyncio.CancelledError | None = None
    # Checked before each wait: a cancel scope cancels every wait, even one whose tasks
    # are done (their completion callbacks run after its cancellation).
    while not all(task.done() for task in tasks):
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError as exc:
            again = exc  # itself: anyio knows its scope's cancellation by the message
    if again is not None:
        raise again
