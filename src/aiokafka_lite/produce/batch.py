"""Producer batches and the per-record result handles built on them.

A :class:`ProducerBatch` is the unit of everything after ``append``: memory accounting,
sequencing, sending, retrying and completion. Records do not get their own future:
a record is ``(batch, index)``, and its :class:`RecordMetadata` is computed from the
batch's base offset only when somebody asks (``RecordFuture.result()``, ``await``).
One asyncio future per batch is created lazily, the first time something waits.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, NamedTuple, overload

from aiokafka_lite.errors import IllegalStateError
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.wire.records import BatchBuilder

__all__ = ["BatchResult", "ProducerBatch", "RecordFuture", "RecordMetadata"]

_NO_SEQUENCE = -1


class RecordMetadata(NamedTuple):
    """Where a record was written. ``offset`` is -1 when unknown (acks=0, or a duplicate
    the broker no longer had the offset for); ``timestamp_ms`` is the broker's
    LogAppendTime when the topic uses it, else the record's create time."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


class ProducerBatch:
    """Records for one partition, sent and acknowledged together."""

    __slots__ = (
        "_callbacks",
        "_pending_children",
        "_waiters",
        "attempts",
        "base_offset",
        "base_sequence",
        "buffer",
        "builder",
        "children",
        "created_ms",
        "error",
        "full",
        "in_retry",
        "is_done",
        "is_transactional",
        "last_attempt_ms",
        "last_error",
        "limit",
        "log_append_time",
        "producer_epoch",
        "producer_id",
        "record_count",
        "reserved",
        "retry_at_ms",
        "sequence_reset",
        "timestamps",
        "tp",
        "uncompressed_size",
    )

    def __init__(
        self, tp: TopicPartition, builder: BatchBuilder, limit: int, reserved: int, now_ms: float
    ) -> None:
        self.tp = tp
        self.builder: BatchBuilder | None = builder
        #: Size bound given to the builder (uncompressed records + header).
        self.limit = limit
        #: Bytes of buffer_memory held by this batch until it completes.
        self.reserved = reserved
        self.created_ms = now_ms
        self.timestamps: list[int] = []
        self.full = False
        self.record_count = 0
        self.buffer: bytes | None = None
        self.uncompressed_size = 0
        self.attempts = 0
        self.last_attempt_ms = now_ms
        self.retry_at_ms = 0.0
        self.in_retry = False
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = _NO_SEQUENCE
        self.sequence_reset = False
        self.is_transactional = False
        self.is_done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        #: Why the last attempt failed, while the batch waits to be retried: the cause a
        #: delivery timeout reports.
        self.last_error: BaseException | None = None
        #: After a split: ``(child batch, index of its first record here)`` in order.
        self.children: list[tuple[ProducerBatch, int]] | None = None
        self._pending_children = 0
        self._waiters: list[asyncio.Future[None]] | None = None
        self._callbacks: list[Callable[[ProducerBatch], None]] | None = None

    # -- building ---------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Still accepting records (not full, not drained)."""
        return self.builder is not None and self.buffer is None and not self.full

    @property
    def count(self) -> int:
        """Records in the batch (also before it is closed)."""
        builder = self.builder
        if self.buffer is None and builder is not None:
            return builder.record_count
        return self.record_count

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != _NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == _NO_SEQUENCE:
            return _NO_SEQUENCE
        return (self.base_sequence + self.count - 1) & 0x7FFFFFFF

    def estimated_size(self) -> int:
        if self.buffer is not None:
            return len(self.buffer)
        assert self.builder is not None
        return self.builder.estimated_size()

    def close(self) -> bytes:
        """Stop appending and serialise (again, if producer fields changed since)."""
        builder = self.builder
        if builder is None:
            raise IllegalStateError("batch has no records to build")
        self.record_count = builder.record_count
        self.uncompressed_size = builder.estimated_size()
        self.full = True
        self.buffer = builder.build(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=self.base_sequence
        )
        return self.buffer

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, *, reset: bool = False
    ) -> None:
        """Give the batch its idempotence fields; a built batch is re-serialised (the
        compressed payload is cached by the builder, so only header and CRC change)."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        if reset:
            self.sequence_reset = True
        if self.buffer is not None:
            self.close()

    # -- completion -------------------------------------------------------------------

    def complete(self, base_offset: int, log_append_time: int) -> bool:
        """Success; False if the batch was already completed (e.g. expired meanwhile)."""
        if self.is_done:
            return False
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self._finish()
        return True

    def fail(self, error: BaseException) -> bool:
        """Failure of every record; False if already completed."""
        if self.is_done:
            return False
        self.error = error
        self._finish()
        return True

    def _finish(self) -> None:
        self.is_done = True
        self.builder = None  # drop the uncompressed records; the result needs only offsets
        self.buffer = None
        waiters = self._waiters
        if waiters:
            self._waiters = None
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
        callbacks = self._callbacks
        if callbacks:
            self._callbacks = None
            for cb in callbacks:
                cb(self)

    def add_done_callback(self, fn: Callable[[ProducerBatch], None]) -> None:
        """Call ``fn(batch)`` on completion (now if already done)."""
        if self.is_done:
            fn(self)
        elif self._callbacks is None:
            self._callbacks = [fn]
        else:
            self._callbacks.append(fn)

    def waiter(self) -> asyncio.Future[None]:
        """A new future resolved (with None, never an exception) when the batch completes.

        One per waiting caller, so cancelling one waiter never disturbs the others.
        """
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.is_done:
            fut.set_result(None)
        elif self._waiters is None:
            self._waiters = [fut]
        else:
            self._waiters.append(fut)
        return fut

    async def wait(self) -> None:
        """Wait for completion (of every child, after a split)."""
        if not self.is_done:
            await self.waiter()

    def split_into(self, children: list[tuple[ProducerBatch, int]]) -> None:
        """This batch's records now live in ``children`` (``(batch, first index)``, in
        order); it completes when they all have, and results are looked up through them."""
        self.children = children
        self.builder = None
        self.buffer = None
        self._pending_children = len(children)
        for child, _ in children:
            child.add_done_callback(self._child_done)

    def _child_done(self, _child: ProducerBatch) -> None:
        self._pending_children -= 1
        if self._pending_children == 0 and not self.is_done:
            self._finish()

    def locate(self, index: int) -> tuple[ProducerBatch, int]:
        """The batch really holding record ``index`` (follows splits)."""
        batch = self
        while batch.children is not None:
            children = batch.children
            pos = bisect.bisect_right(children, index, key=lambda c: c[1]) - 1
            child, start = children[pos]
            batch, index = child, index - start
        return batch, index

    def metadata(self, index: int) -> RecordMetadata:
        """Result of record ``index``; raises the batch's error if it failed."""
        batch, index = self.locate(index) if self.children is not None else (self, index)
        if batch.error is not None:
            raise batch.error
        if not batch.is_done:
            raise asyncio.InvalidStateError("record is not delivered yet")
        base = batch.base_offset
        lat = batch.log_append_time
        tp = batch.tp
        return RecordMetadata(
            tp.topic,
            tp.partition,
            base + index if base >= 0 else -1,
            lat if lat >= 0 else batch.timestamps[index],
        )


class RecordFuture:
    """Future-like handle of one enqueued record: ``await`` it for its
    :class:`RecordMetadata` (or the delivery error). Cheap: two references, no task."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.is_done

    def cancelled(self) -> bool:
        return False

    def result(self) -> RecordMetadata:
        """The metadata; raises the delivery error, or ``InvalidStateError`` if pending."""
        return self._batch.metadata(self._index)

    def exception(self) -> BaseException | None:
        batch = self._batch
        if not batch.is_done:
            raise asyncio.InvalidStateError("record is not delivered yet")
        if batch.children is not None:
            batch = batch.locate(self._index)[0]
        return batch.error

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """Schedule ``fn(self)`` once the record is delivered or failed. Like asyncio
        futures, callbacks run from the event loop (``call_soon``), never inside the
        producer's own code, so they may freely call the producer again."""
        loop = asyncio.get_running_loop()

        def schedule(_batch: ProducerBatch) -> None:
            loop.call_soon(fn, self)

        self._batch.add_done_callback(schedule)

    def as_future(self) -> asyncio.Future[RecordMetadata]:
        """A real ``asyncio.Future`` with the same outcome (for APIs that need one)."""
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()

        def resolve(rf: RecordFuture) -> None:
            if fut.done():
                return
            exc = rf.exception()
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(rf.result())

        self.add_done_callback(resolve)
        return fut

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        batch = self._batch
        if not batch.is_done:
            yield from batch.waiter().__await__()
        return batch.metadata(self._index)

    def __repr__(self) -> str:
        batch = self._batch
        state = "pending" if not batch.is_done else ("failed" if self.exception() else "done")
        return f"<RecordFuture {batch.tp.topic}-{batch.tp.partition} #{self._index} {state}>"


class BatchResult(Sequence[RecordMetadata]):
    """Results of ``send_batch`` / ``enqueue_batch``: ``await`` it (or iterate, once done).

    Records are remembered as runs of consecutive records in the same producer batch,
    so a million keyless records cost a few hundred entries, and ``RecordMetadata``
    objects are only built for the records you look at.
    """

    __slots__ = ("_batches", "_count", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []  # index (in this result) of each run's first record
        self._batches: list[tuple[ProducerBatch, int]] = []  # run -> (batch, index in batch)
        self._count = 0

    def _add(self, batch: ProducerBatch, index: int) -> None:
        """Record number ``len(self)`` is ``batch``'s record ``index``."""
        self._add_run(batch, index, 1)

    def _add_run(self, batch: ProducerBatch, index: int, n: int) -> None:
        """The next ``n`` records are ``batch``'s records ``index``, ``index + 1``, ..."""
        runs = self._batches
        if runs:
            last, first = runs[-1]
            if last is batch and first + self._count - self._starts[-1] == index:
                self._count += n
                return
        self._starts.append(self._count)
        runs.append((batch, index))
        self._count += n

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> RecordMetadata: ...
    @overload
    def __getitem__(self, i: slice) -> list[RecordMetadata]: ...
    def __getitem__(self, i: int | slice) -> RecordMetadata | list[RecordMetadata]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("BatchResult index out of range")
        run = bisect.bisect_right(self._starts, i) - 1
        batch, first = self._batches[run]
        return batch.metadata(first + i - self._starts[run])

    def __iter__(self) -> Iterator[RecordMetadata]:
        for start, (batch, first), end in zip(
            self._starts, self._batches, [*self._starts[1:], self._count], strict=True
        ):
            for j in range(end - start):
                yield batch.metadata(first + j)

    def done(self) -> bool:
        return all(b.is_done for b, _ in self._distinct())

    def _distinct(self) -> list[tuple[ProducerBatch, int]]:
        seen: set[int] = set()
        out = []
        for batch, first in self._batches:
            if id(batch) not in seen:
                seen.add(id(batch))
                out.append((batch, first))
        return out

    def errors(self) -> list[BaseException]:
        """Distinct delivery errors among completed records (empty when all succeeded)."""
        out: list[BaseException] = []
        for start, (batch, first), end in zip(
            self._starts, self._batches, [*self._starts[1:], self._count], strict=True
        ):
            for j in range(end - start):
                b, _ = batch.locate(first + j) if batch.children is not None else (batch, 0)
                if b.is_done and b.error is not None and not any(e is b.error for e in out):
                    out.append(b.error)
                if batch.children is None:
                    break  # every record of an unsplit run shares the batch's outcome
        return out

    async def wait(self) -> None:
        """Wait until every record is delivered or failed (never raises delivery errors)."""
        for batch, _ in self._distinct():
            if not batch.is_done:
                await batch.waiter()

    def __await__(self) -> Generator[Any, None, BatchResult]:
        yield from self.wait().__await__()
        return self

    def __repr__(self) -> str:
        return f"<BatchResult {self._count} records>"
