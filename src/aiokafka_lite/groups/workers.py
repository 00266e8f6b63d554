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
  consumer keeps polling (and so keeps its group membership).

Failure policy (what a handler exception does), as in go_kafka_client's worker manager:

* ``"stop"``: the pool stops; ``run`` raises ``WorkerFailedError``. The failed record is
  not committed, so a restart retries it.
* ``"skip"``: log it and carry on (the record counts as done).
* ``"retry"``: retry with exponential backoff (``retry_backoff_ms`` doubling up to
  ``retry_backoff_max_ms``), at most ``max_retries`` times (None: forever), then stop.
  A partition revoked while its record is being retried gives up the retries.

Auto-commit must be disabled on the consumer: it would commit positions of records that
are fetched but not processed yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from aiokafka_lite.errors import CommitFailedError, ConfigError, IllegalStateError, KafkaError
from aiokafka_lite.structs import TopicPartition

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

    def assignment(self) -> set[TopicPartition]: ...


@dataclass(slots=True)
class WorkerStats:
    processed: int = 0
    skipped: int = 0
    retries: int = 0
    commits: int = 0


@dataclass(slots=True)
class _Partition:
    queue: deque[Any] = field(default_factory=deque)
    scheduled: bool = False  # in the ready queue or being processed
    busy: bool = False
    done: int | None = None  # next offset to commit: last finished record + 1
    committed: int | None = None
    abandoned: bool = False  # revoked/lost/stopped: start nothing new, stop retrying
    idle: asyncio.Event = field(default_factory=asyncio.Event)

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
        self._parts: dict[TopicPartition, _Partition] = {}
        self._ready: asyncio.Queue[TopicPartition] = asyncio.Queue()
        self._paused_by_us: set[TopicPartition] = set()
        self._stopping = asyncio.Event()
        self._failure: WorkerFailedError | None = None
        self._running = False
        self.stats = WorkerStats()

    # ------------------------------------------------------------------ public
    async def run(self) -> None:
        """Consume and process until ``stop()`` (returns) or a fatal failure (raises)."""
        if self._running:
            raise IllegalStateError("OrderedWorkers.run is already running")
        coordinator = self._consumer.coordinator
        if coordinator is None:
            raise ConfigError("OrderedWorkers needs a consumer with a group_id (it commits offsets)")
        self._running = True
        self._stopping.clear()
        coordinator.add_listener(self)
        workers = [
            asyncio.create_task(self._worker(), name=f"ordered-worker-{i}") for i in range(self._concurrency)
        ]
        try:
            await self._feed()
        finally:
            try:
                await self._shutdown(workers)
            finally:
                coordinator.remove_listener(self)
                self._running = False
        if self._failure is not None:
            raise self._failure

    def stop(self) -> None:
        """Ask ``run`` to finish: in-flight records complete, progress is committed."""
        self._stopping.set()

    def committable(self) -> dict[TopicPartition, int]:
        """Per partition, the offset a commit would store now (last finished + 1)."""
        return {tp: p.done for tp, p in self._parts.items() if p.done is not None}

    def in_flight(self) -> set[TopicPartition]:
        return {tp for tp, p in self._parts.items() if p.busy}

    # ------------------------------------------------------------------ feeding
    async def _feed(self) -> None:
        next_commit = time.monotonic() + self._commit_interval
        stop_wait = asyncio.ensure_future(self._stopping.wait())
        try:
            while not self._stopping.is_set():
                fetch = asyncio.ensure_future(
                    self._consumer.getmany(timeout_ms=self._fetch_timeout_ms, max_records=self._max_fetch)
                )
                await asyncio.wait({fetch, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if not fetch.done():
                    fetch.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await fetch
                    break
                self._enqueue(fetch.result())
                self._backpressure()
                if time.monotonic() >= next_commit:
                    next_commit = time.monotonic() + self._commit_interval
                    await self._commit(self._parts)
        finally:
            stop_wait.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stop_wait

    def _enqueue(self, batch: dict[TopicPartition, list[Any]]) -> None:
        for tp, records in batch.items():
            if not records:
                continue
            part = self._parts.get(tp)
            if part is None:
                part = self._parts[tp] = _Partition()
            elif part.abandoned:
                continue  # being drained (revocation, failure): the next owner reads these
            part.queue.extend(records)
            if not part.scheduled:
                part.scheduled = True
                self._ready.put_nowait(tp)

    def _backpressure(self) -> None:
        assigned = self._consumer.assignment()
        full = [tp for tp, p in self._parts.items() if len(p.queue) >= self._max_buffered and tp in assigned]
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
            if part.abandoned or not part.queue or self._failure is not None:
                part.scheduled = False
                continue
            record = part.queue.popleft()
            part.busy = True
            part.idle.clear()
            try:
                if await self._process(record, part):
                    part.done = record.offset + 1
                    self.stats.processed += 1
            except WorkerFailedError as exc:
                part.abandoned = True
                if self._failure is None:
                    self._failure = exc
                    log.error("%s; stopping the workers", exc)
                self._stopping.set()
            finally:
                part.busy = False
                part.idle.set()
                if part.queue and not part.abandoned and self._failure is None:
                    self._ready.put_nowait(tp)  # next record of this partition, after the others waiting
                else:
                    part.scheduled = False

    async def _process(self, record: Any, part: _Partition) -> bool:
        """Run the handler under the failure policy; True when the record counts as done."""
        attempt = 0
        while True:
            try:
                result = self._handler(record)
                if inspect.isawaitable(result):
                    await result
                return True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._policy == "skip":
                    log.warning(
                        "skipping record %s-%s@%s: %r", record.topic, record.partition, record.offset, exc
                    )
                    self.stats.skipped += 1
                    return True
                if self._policy == "retry" and (self._max_retries is None or attempt < self._max_retries):
                    if part.abandoned:
                        return False  # revoked meanwhile: the next owner will retry it
                    delay = min(self._backoff_ms * (2**attempt), self._backoff_max_ms) / 1000
                    attempt += 1
                    self.stats.retries += 1
                    log.info(
                        "retrying record %s-%s@%s in %.0f ms: %r",
                        record.topic,
                        record.partition,
                        record.offset,
                        delay * 1000,
                        exc,
                    )
                    await asyncio.sleep(delay)
                    if part.abandoned:
                        return False
                    continue
                raise WorkerFailedError(record, exc) from exc

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
            self._paused_by_us.discard(tp)
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
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        present = await self._drain(revoked)
        await self._commit(present)
        for tp in present:
            self._parts.pop(tp, None)

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        # Another member may own them already: finish what runs, commit nothing.
        present = await self._drain(lost)
        for tp in present:
            self._parts.pop(tp, None)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None

    # ------------------------------------------------------------------ shutdown
    async def _shutdown(self, workers: list[asyncio.Task[None]]) -> None:
        try:
            await self._drain(list(self._parts))
            await self._commit(list(self._parts))
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if self._paused_by_us:
                with contextlib.suppress(KafkaError):
                    self._consumer.resume(*(self._paused_by_us & self._consumer.assignment()))
                self._paused_by_us.clear()
            self._parts.clear()
            while not self._ready.empty():
                self._ready.get_nowait()
