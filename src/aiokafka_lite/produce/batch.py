"""Producer batches and the per-record result handles built on them.

A :class:`ProducerBatch` is the unit of everything after ``append``: memory accounting,
sequencing, sending, retrying and completion. Records do not get their own asyncio
future: a record is ``(batch, index)``, and its :class:`RecordMetadata` is computed from
the batch's base offset only when somebody asks (``RecordFuture.result()``, ``await``).

:class:`RecordFuture` speaks asyncio's future protocol (``asyncio.isfuture`` is true), so
``gather``, ``wait``, ``as_completed``, ``wait_for`` and ``shield`` use it as it is instead
of wrapping each one in a Task. Its done-callbacks are kept per record but run per batch:
when a batch completes (or when callbacks are added to records already done), one
event-loop callback runs all of that batch's callbacks. Nothing is resolved record by
record, so records nobody waits for cost nothing at completion.
"""

from __future__ import annotations

import asyncio
import bisect
import contextvars
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, overload

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core.errors import DeliveryFailedError, IllegalStateError, RecordFailure
from aiokafka_lite.core.futures import on_asyncio, wait_for_callback
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce._handles import handle_functions
from aiokafka_lite.wire.records import BatchBuilder

__all__ = [
    "BatchResult",
    "DeliveryFailedError",
    "ProducerBatch",
    "RecordFailure",
    "RecordFuture",
    "RecordMetadata",
    "SendWakeup",
    "distinct_batches",
    "has_failures",
    "record_failures",
]

_NO_SEQUENCE = -1


class RecordMetadata(NamedTuple):
    """Where a record was written. ``offset`` is -1 when unknown (acks=0, or a duplicate
    the broker no longer had the offset for); ``timestamp_ms`` is the broker's
    LogAppendTime when the topic uses it, else the record's create time."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


#: ``RecordMetadata(...)`` without the Python-level ``__new__`` a NamedTuple has: results
#: are built per record, often for every record (gather).
_new_metadata = tuple.__new__


class ProducerBatch:
    """Records for one partition, sent and acknowledged together."""

    __slots__ = (
        "_callbacks",
        "_loop",
        "_pending_children",
        "_ready",
        "_senders_done",
        "_waiters",
        "_wakeups",
        "_watchers",
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
        #: Tasks in ``Producer.send`` waiting for this batch (see ``SendWakeup``).
        self._wakeups: list[SendWakeup] | None = None
        #: trio: one event all of the batch's waiting senders wait on (set when done).
        self._senders_done: Any = None
        #: Record handles with done-callbacks registered while the batch was pending.
        self._watchers: list[RecordFuture] | None = None
        #: Record-handle callbacks due to run in the next ``_run_ready`` (one loop callback),
        #: flat: context, function, handle, context, ... (a tuple per entry would be one more
        #: object per record for the garbage collector to count and trace: gather adds a
        #: callback to every record).
        self._ready: list[Any] | None = None
        #: The event loop the record handles of this batch belong to (set on first use).
        self._loop: asyncio.AbstractEventLoop | None = None

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
        watchers = self._watchers
        if watchers:
            self._watchers = None
            for handle in watchers:
                handle._fire()
        wakeups = self._wakeups
        if wakeups:
            self._wakeups = None
            self.event_loop().call_soon(self._wake, wakeups)
        senders_done = self._senders_done
        if senders_done is not None:
            self._senders_done = None
            senders_done.set()

    def _wake(self, wakeups: list[SendWakeup]) -> None:
        """Wake the Tasks waiting in ``send`` (one loop callback for all of them)."""
        for i, wakeup in enumerate(wakeups):
            callback, context = wakeup._callback, wakeup._context
            if wakeup._cancelled or callback is None or context is None:
                continue  # woken when it was cancelled, or its callback was removed
            try:
                context.run(callback, wakeup)
            except (SystemExit, KeyboardInterrupt):
                self.event_loop().call_soon(self._wake, wakeups[i + 1 :])  # the rest, later
                raise
            except BaseException as exc:
                self.event_loop().call_exception_handler(
                    {"message": "Exception waking a producer send", "exception": exc, "future": wakeup}
                )

    # -- record-handle callbacks (see RecordFuture) ----------------------------------------

    def event_loop(self) -> asyncio.AbstractEventLoop:
        """The loop this batch's record handles belong to: the running one, on first use."""
        loop = self._loop
        if loop is None:
            # asyncio's loop; on trio the backend, which has call_soon and
            # call_exception_handler too.
            loop = self._loop = _backend.loop()  # type: ignore[assignment]
        return loop  # type: ignore[return-value]

    def _schedule(
        self, fn: Callable[[RecordFuture], object], handle: RecordFuture, context: contextvars.Context
    ) -> None:
        """Run ``fn(handle)`` in ``context`` soon, from the event loop; every callback
        scheduled on this batch before that runs in the same loop callback."""
        ready = self._ready
        if ready is None:
            ready = self._ready = []
            self.event_loop().call_soon(self._run_ready)
        ready += (context, fn, handle)

    def _run_ready(self) -> None:
        ready = self._ready
        self._ready = None
        if not ready:
            return
        for i in range(0, len(ready), 3):
            context, fn, handle = ready[i : i + 3]
            try:
                context.run(fn, handle)
            except (SystemExit, KeyboardInterrupt):
                for j in range(i + 3, len(ready), 3):  # as asyncio would: the rest still run later
                    self._schedule(ready[j + 1], ready[j + 2], ready[j])
                raise
            except BaseException as exc:
                self.event_loop().call_exception_handler(
                    {"message": f"Exception in callback {fn!r}", "exception": exc, "future": handle}
                )

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
        fut: asyncio.Future[None] = _backend.loop().create_future()
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
        return _new_metadata(
            RecordMetadata,
            (
                tp.topic,
                tp.partition,
                base + index if base >= 0 else -1,
                lat if lat >= 0 else batch.timestamps[index],
            ),
        )


class SendWakeup:
    """What a Task in ``Producer.send`` awaits: the completion of the record's batch.

    A minimal object in asyncio's future protocol, awaited by that one Task only: the
    Task registers its wake-up callback, and when the batch completes one loop callback
    wakes every Task waiting on it (``ProducerBatch._wake``), where a per-Task
    ``asyncio.Future`` would schedule one loop callback each. Cancelling it (the Task
    was cancelled) wakes that Task alone. It has no result: ``send`` reads the record's
    outcome from the batch.
    """

    __slots__ = (
        "_asyncio_future_blocking",
        "_batch",
        "_callback",
        "_cancel_message",
        "_cancelled",
        "_context",
    )

    def __init__(self, batch: ProducerBatch) -> None:
        self._batch = batch
        self._callback: Callable[[SendWakeup], object] | None = None
        self._context: contextvars.Context | None = None
        self._cancelled = False
        self._cancel_message: str | None = None
        self._asyncio_future_blocking = False

    def done(self) -> bool:
        return self._batch.is_done or self._cancelled

    def cancelled(self) -> bool:
        return self._cancelled

    def result(self) -> None:
        if self._cancelled:
            raise asyncio.CancelledError("" if self._cancel_message is None else self._cancel_message)
        if not self._batch.is_done:
            raise asyncio.InvalidStateError("the batch is not complete yet")

    def exception(self) -> BaseException | None:
        self.result()
        return None

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._batch._loop or self._batch.event_loop()

    def add_done_callback(
        self, fn: Callable[[SendWakeup], object], *, context: contextvars.Context | None = None
    ) -> None:
        if self._callback is not None:
            raise IllegalStateError("a send's wake-up serves the one Task awaiting it")
        self._callback = fn
        self._context = context if context is not None else contextvars.copy_context()
        batch = self._batch
        if batch.is_done or self._cancelled:
            self.get_loop().call_soon(fn, self, context=self._context)
        elif batch._wakeups is None:
            batch._wakeups = [self]
        else:
            batch._wakeups.append(self)

    def remove_done_callback(self, fn: Callable[[SendWakeup], object]) -> int:
        if self._callback is None or self._callback != fn or self.done():
            return 0
        self._callback = None  # the batch skips it
        return 1

    def cancel(self, msg: str | None = None) -> bool:
        if self.done():
            return False
        self._cancelled = True
        self._cancel_message = msg
        if self._callback is not None:
            self.get_loop().call_soon(self._callback, self, context=self._context)
        return True

    def __await__(self) -> Generator[Any, None, None]:
        if not self.done():
            if on_asyncio() is None:  # trio: no Task to hand this to
                # The batch's senders share one event: a per-send future, closure and
                # batch callback cost trio's send from many tasks twice asyncio's CPU.
                batch = self._batch
                event = batch._senders_done
                if event is None:
                    event = batch._senders_done = _backend.event()
                yield from event.wait().__await__()
                return
            self._asyncio_future_blocking = True
            yield self
            if self._batch.is_done and not self._cancelled:
                return  # woken by the batch (the Task's wake-up already read result())
        self.result()


class RecordFuture:
    """The outcome of one enqueued record: ``await`` it for its :class:`RecordMetadata`
    (or the delivery error).

    It follows asyncio's future protocol, so ``asyncio.isfuture()`` is true and
    ``asyncio.gather``, ``wait``, ``as_completed``, ``wait_for`` and ``shield`` take it as
    it is (no Task per record). Unlike an ``asyncio.Future`` it holds no result of its
    own: it is a view of the record in its batch, and costs nothing when the batch
    completes unless callbacks were added. ``cancel()`` cancels this handle (as for any
    asyncio future: the awaiting code gets ``CancelledError``), never the record, which
    is still delivered. ``Producer.wait_all`` waits for many at once.
    """

    __slots__ = (
        "_asyncio_future_blocking",
        "_batch",
        "_callbacks",
        "_cancel_message",
        "_cancelled",
        "_index",
    )

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index
        #: Done-callbacks while pending, flat: function, context, function, context, ...
        self._callbacks: list[Any] | None = None
        self._cancelled = False
        self._cancel_message: str | None = None
        #: asyncio's protocol flag: True while ``__await__`` has yielded this handle to the
        #: Task that waits on it.
        self._asyncio_future_blocking = False

    @classmethod
    def of(cls, batch: ProducerBatch, index: int) -> RecordFuture:
        """The handle of record ``index`` of ``batch`` (what ``RecordFuture(batch, index)``
        builds, without the type-call overhead, and untracked by the garbage collector
        while it has no callbacks: see ``_handles``)."""
        return new_handle(cls, batch, index)

    def another_handle(self) -> RecordFuture:
        """Public hook (tracing): a new handle of the same record, whose done-callbacks
        run when the record completes however this handle is cancelled."""
        return RecordFuture.of(self._batch, self._index)

    @property
    def topic(self) -> str:
        return self._batch.tp.topic

    @property
    def partition(self) -> int:
        return self._batch.tp.partition

    def done(self) -> bool:
        return self._batch.is_done or self._cancelled

    def cancelled(self) -> bool:
        return self._cancelled

    def result(self) -> RecordMetadata:
        """The metadata; raises the delivery error, ``CancelledError`` if this handle was
        cancelled, or ``InvalidStateError`` if the record is pending."""
        batch = self._batch
        if batch.is_done and batch.error is None and batch.children is None and not self._cancelled:
            # Delivered (the common case, e.g. gather collecting every result): inline.
            index = self._index
            base = batch.base_offset
            lat = batch.log_append_time
            tp = batch.tp
            return _new_metadata(
                RecordMetadata,
                (
                    tp.topic,
                    tp.partition,
                    base + index if base >= 0 else -1,
                    lat if lat >= 0 else batch.timestamps[index],
                ),
            )
        if self._cancelled:
            raise self._make_cancelled_error()
        return batch.metadata(self._index)

    def exception(self) -> BaseException | None:
        """The delivery error, or None if delivered (raises like ``asyncio.Future``)."""
        batch = self._batch
        if batch.is_done and batch.children is None and not self._cancelled:
            return batch.error
        if self._cancelled:
            raise self._make_cancelled_error()
        if not batch.is_done:
            raise asyncio.InvalidStateError("record is not delivered yet")
        return batch.locate(self._index)[0].error

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._batch._loop or self._batch.event_loop()

    def add_done_callback(
        self, fn: Callable[[RecordFuture], object], *, context: contextvars.Context | None = None
    ) -> None:
        """Schedule ``fn(self)`` once the record is delivered or failed (or this handle
        cancelled). As with asyncio futures, callbacks run from the event loop, in
        ``context`` (default: a copy of the current one), never inside the producer's
        own code, so they may freely call the producer again."""
        if context is None:
            context = contextvars.copy_context()
        batch = self._batch
        if batch.is_done or self._cancelled:
            track_handle(self)  # the batch's ready list references it until that runs
            # batch._schedule(), inlined: gather/wait add one callback to every record
            ready = batch._ready
            if ready is None:
                ready = batch._ready = []
                batch.event_loop().call_soon(batch._run_ready)
            ready += (context, fn, self)
            return
        callbacks = self._callbacks
        if callbacks is None:
            track_handle(self)  # from here on the batch references it: a cycle is possible
            self._callbacks = [fn, context]
            watchers = batch._watchers
            if watchers is None:
                batch._watchers = [self]
            else:
                watchers.append(self)
        else:
            callbacks += (fn, context)

    def remove_done_callback(self, fn: Callable[[RecordFuture], object]) -> int:
        """Remove every pending registration of ``fn``; returns how many were removed."""
        callbacks = self._callbacks
        if not callbacks:
            return 0
        kept: list[Any] = []
        for i in range(0, len(callbacks), 2):
            if callbacks[i] != fn:
                kept += callbacks[i : i + 2]
        removed = (len(callbacks) - len(kept)) // 2
        if removed:
            self._callbacks = kept
        return removed

    def cancel(self, msg: str | None = None) -> bool:
        """Stop waiting through this handle: it becomes cancelled and its callbacks run.
        The record itself is not withdrawn. False if the record's outcome is known."""
        if self.done():
            return False
        self._cancelled = True
        self._cancel_message = msg
        self._fire()
        return True

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        return asyncio.CancelledError("" if self._cancel_message is None else self._cancel_message)

    def _fire(self) -> None:
        """Hand this handle's callbacks to its batch to run (it is done or cancelled)."""
        callbacks = self._callbacks
        if callbacks:
            self._callbacks = None
            batch = self._batch
            ready = batch._ready  # batch._schedule(), inlined: called for every record waited on
            if ready is None:
                ready = batch._ready = []
                batch.event_loop().call_soon(batch._run_ready)
            for i in range(0, len(callbacks), 2):
                ready += (callbacks[i + 1], callbacks[i], self)

    def as_future(self) -> asyncio.Future[RecordMetadata]:
        """A real ``asyncio.Future`` with the same outcome (for APIs that need one)."""
        fut: asyncio.Future[RecordMetadata] = self.get_loop().create_future()

        def resolve(rf: RecordFuture) -> None:
            if fut.done():
                return
            if rf.cancelled():
                fut.cancel(rf._cancel_message)
                return
            exc = rf.exception()
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(rf.result())

        self.add_done_callback(resolve)
        return fut

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not (self._batch.is_done or self._cancelled):
            if on_asyncio() is None:  # trio: no Task to hand this to
                yield from wait_for_callback(self.add_done_callback, self.remove_done_callback).__await__()
                return self.result()
            self._asyncio_future_blocking = True
            yield self  # the Task waits for it (add_done_callback), as for asyncio futures
            if not self.done():
                raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__

    def __repr__(self) -> str:
        batch = self._batch
        if self._cancelled:
            state = "cancelled"
        elif not batch.is_done:
            state = "pending"
        else:
            state = "failed" if self.exception() is not None else "done"
        return f"<RecordFuture {batch.tp.topic}-{batch.tp.partition} #{self._index} {state}>"


class BatchResult(Sequence[RecordMetadata]):
    """Results of ``send_batch`` / ``enqueue_batch``: ``await`` it (or iterate, once done).

    Records are remembered as runs of consecutive records in the same producer batch,
    so a million keyless records cost a few hundred entries, and ``RecordMetadata``
    objects are only built for the records you look at.
    """

    __slots__ = ("_batches", "_count", "_input_order", "_position", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []  # index (in this result) of each run's first record
        self._batches: list[tuple[ProducerBatch, int]] = []  # run -> (batch, index in batch)
        self._count = 0
        # When the records were appended grouped by partition (keyed bulk path), not in
        # input order: append position -> input index, and (built when first indexed) its
        # inverse. None when append order is input order.
        self._input_order: list[int] | None = None
        self._position: list[int] | None = None

    def _grouped(self, input_order: list[int]) -> None:
        """The runs hold the records in this order of input indexes (a permutation)."""
        self._input_order = input_order
        self._position = None

    def _append_position(self, i: int) -> int:
        if self._input_order is None:
            return i
        position = self._position
        if position is None:
            position = [0] * len(self._input_order)
            for at, index in enumerate(self._input_order):
                position[index] = at
            self._position = position
        return position[i]

    def _add(self, batch: ProducerBatch, index: int) -> None:
        """Record number ``len(self)`` is ``batch``'s record ``index``."""
        self._add_run(batch, index, 1)

    def add(self, fut: RecordFuture) -> None:
        """Public hook (tracing): the next record of this result is ``fut``'s."""
        self._add_run(fut._batch, fut._index, 1)

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
        i = self._append_position(i)
        run = bisect.bisect_right(self._starts, i) - 1
        batch, first = self._batches[run]
        return batch.metadata(first + i - self._starts[run])

    def __iter__(self) -> Iterator[RecordMetadata]:
        if self._input_order is not None:
            for i in range(self._count):
                yield self[i]
            return
        for start, (batch, first), end in zip(
            self._starts, self._batches, [*self._starts[1:], self._count], strict=True
        ):
            for j in range(end - start):
                yield batch.metadata(first + j)

    def done(self) -> bool:
        return all(b.is_done for b, _ in self._distinct())

    def counts_by_partition(self) -> dict[TopicPartition, int]:
        """How many of the records went to each partition, without building a
        ``RecordMetadata`` per record (a batch split on retry keeps its partition)."""
        counts: dict[TopicPartition, int] = {}
        starts = self._starts
        for (batch, _first), start, end in zip(
            self._batches, starts, [*starts[1:], self._count], strict=True
        ):
            counts[batch.tp] = counts.get(batch.tp, 0) + (end - start)
        return counts

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


# -- waiting for many records ---------------------------------------------------------------


def distinct_batches(handles: Iterable[RecordFuture]) -> list[ProducerBatch]:
    """The distinct batches holding ``handles``' records (``TypeError`` for anything
    that is not a RecordFuture)."""
    seen: dict[ProducerBatch, None] = {}
    last = None
    for handle in handles:
        if type(handle) is not RecordFuture:
            raise TypeError(
                f"expected the RecordFuture returned by Producer.enqueue(), got {type(handle).__name__}"
            )
        batch = handle._batch
        if batch is not last:  # consecutive records mostly share a batch: few dict updates
            last = batch
            seen[batch] = None
    return list(seen)


def has_failures(batches: Iterable[ProducerBatch]) -> bool:
    """Whether a record of these (completed) batches failed."""
    for batch in batches:
        if batch.error is not None:
            return True
        if batch.children is not None and has_failures(child for child, _ in batch.children):
            return True
    return False


def record_failures(handles: Iterable[RecordFuture]) -> list[RecordFailure]:
    """Every failed record among ``handles`` (all done), in order. A handle's own
    cancellation does not count: this looks at the records."""
    failures: list[RecordFailure] = []
    last = None
    may_fail = False
    for i, handle in enumerate(handles):
        batch = handle._batch
        if batch is not last:
            last = batch
            may_fail = batch.error is not None or batch.children is not None
        if may_fail:
            holder = batch.locate(handle._index)[0] if batch.children is not None else batch
            error = holder.error
            if error is not None:
                failures.append(RecordFailure(i, holder.tp.topic, holder.tp.partition, error))
    return failures


#: ``new_handle(cls, batch, index)``: a pending handle (``cls`` is RecordFuture or a
#: subclass without slots of its own); ``track_handle(handle)``: before its first callback.
new_handle, track_handle = handle_functions(RecordFuture)
