"""Record accumulator: per-partition queues of batches, and the rules deciding what to send.

Pure state (the caller passes the clock, ``now_ms``, to everything), driven by the
producer's ``append`` path and its sender task:

* ``append`` puts a record into the partition's open batch (the producer's one
  per-record fast path, for ``enqueue`` and ``send``); when there is none (or it is
  full) the caller opens one with ``append_new``, its memory from the
  :class:`BufferPool` (waiting through ``reserve`` when short). ``append_run`` is the
  bulk form for ``send_batch``.
* ``ready(now)`` answers "which brokers have something to send, and when should I look
  again": a partition's first batch is sendable when it is full, or has lingered
  ``linger_ms``, or a flush/close is in progress, or writers are blocked on memory; a
  retried batch waits out its backoff first.
* ``drain(node, max_bytes)`` takes at most one batch per partition led by ``node`` (as
  the Java client does), rotating the starting partition for fairness, and closes them
  (assigning idempotence sequence numbers through the ``Sequencer`` at that moment).
* ``reenqueue`` puts a batch to retry back at the front, keeping sequence order.
* ``expire(now)`` removes batches whose ``delivery_timeout_ms`` has passed.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Protocol

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core.errors import KafkaTimeoutError, ProducerClosedError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.retry import Backoff
from aiokafka_lite.produce.batch import ProducerBatch
from aiokafka_lite.produce.partitioner import UniformStickyPartitioner
from aiokafka_lite.wire.compression import Compression
from aiokafka_lite.wire.records import BatchBuilder

#: :meth:`RecordAccumulator.append_run`'s answer when every record was appended.
RUN_END: Final = object()

#: What a record's key and value may be once serialized, and its headers.
Bytes = bytes | bytearray | memoryview
Headers = Sequence[tuple[str, Bytes | None]]

__all__ = [
    "BATCH_OVERHEAD",
    "BufferPool",
    "CompressionRatioEstimator",
    "PartitionQueue",
    "RecordAccumulator",
    "Sequencer",
    "record_size_upper_bound",
]

#: v2 batch header size: added to every batch's size estimate.
BATCH_OVERHEAD = 61
#: Upper bound of a record's framing (length, attributes, deltas, key/value lengths,
#: header count varints) on top of the key, value and header bytes.
RECORD_OVERHEAD = 21


def record_size_upper_bound(
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    headers: Iterable[tuple[str | bytes, bytes | bytearray | memoryview | None]] | None,
) -> int:
    """Encoded size bound of one record (without the batch header)."""
    size = RECORD_OVERHEAD
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    if headers:
        for hkey, hval in headers:
            size += 10 + (len(hkey.encode()) if isinstance(hkey, str) else len(hkey))
            if hval is not None:
                size += len(hval)
    return size


class BufferPool:
    """Bounds the bytes held by batches (``buffer_memory``), with FIFO waiters.

    Each batch reserves its size limit when created and gives it back when it
    completes, as in the Java client. Waiters are served strictly in order so a large
    request is not starved by a stream of small ones.
    """

    __slots__ = ("_closed", "_waiters", "available", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.available = total
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._closed = False

    @property
    def used(self) -> int:
        return self.total - self.available

    @property
    def has_waiters(self) -> bool:
        return bool(self._waiters)

    def try_allocate(self, size: int) -> bool:
        if self._waiters or size > self.available:
            return False
        self.available -= size
        return True

    async def allocate(self, size: int, timeout_ms: float) -> None:
        """Reserve ``size`` bytes, waiting up to ``timeout_ms`` (``KafkaTimeoutError``)."""
        if self._closed:
            raise ProducerClosedError("producer is closed")
        if size > self.total:
            raise ValueError(f"cannot reserve {size} bytes out of a {self.total}-byte buffer")
        if self.try_allocate(size):
            return
        fut: asyncio.Future[None] = _backend.loop().create_future()
        entry = (size, fut)
        self._waiters.append(entry)
        try:
            async with _backend.timeout(timeout_ms / 1000):
                await fut
        except TimeoutError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(size)  # granted at the last moment: give it back
            raise KafkaTimeoutError(
                f"failed to allocate {size} bytes of buffer memory within max_block_ms={timeout_ms:g} "
                f"({self.available} of {self.total} bytes free)"
            ) from None
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(size)
            raise
        finally:
            try:
                self._waiters.remove(entry)
            except ValueError:
                pass
            self._serve()

    def release(self, size: int) -> None:
        self.available += size
        if self._waiters:
            self._serve()

    def _serve(self) -> None:
        waiters = self._waiters
        while waiters:
            size, fut = waiters[0]
            if fut.done():
                waiters.popleft()
                continue
            if size > self.available:
                return
            self.available -= size
            waiters.popleft()
            fut.set_result(None)

    def close(self) -> None:
        """Fail every waiter with ``ProducerClosedError``; later allocations fail too."""
        self._closed = True
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(ProducerClosedError("producer closed while waiting for buffer memory"))


class CompressionRatioEstimator:
    """Per-topic estimate of compressed/uncompressed size, to fill compressed batches
    up to ``batch_size`` *on the wire*: worsening ratios are adopted quickly, improving
    ones slowly, so batches rarely overshoot."""

    __slots__ = ("_ratios",)

    WORSEN_STEP = 0.05
    IMPROVE_STEP = 0.005
    SAFETY = 1.05

    def __init__(self) -> None:
        self._ratios: dict[str, float] = {}

    def estimate(self, topic: str) -> float:
        return self._ratios.get(topic, 1.0)

    def observe(self, topic: str, observed: float) -> float:
        current = self._ratios.get(topic, 1.0)
        if observed > current:
            current = max(current + self.WORSEN_STEP, observed)
        elif observed < current:
            current = max(current - self.IMPROVE_STEP, observed)
        current = min(max(current, 0.01), 1.0)
        self._ratios[topic] = current
        return current


class Sequencer(Protocol):
    """What the accumulator needs from idempotence state (see ``sequencing.py``)."""

    def should_stop_drain(self, batch: ProducerBatch) -> bool: ...
    def assign_sequence(self, batch: ProducerBatch) -> None: ...


class PartitionQueue:
    """Batches of one partition waiting to be sent (retries first, in sequence order)."""

    __slots__ = ("add", "batches", "leader", "open", "sticky", "tp")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.batches: deque[ProducerBatch] = deque()
        #: The batch accepting appends (the last of ``batches``), or None. ``add`` is its
        #: builder's bound ``add`` (None without an open batch): the per-record fast path,
        #: ``add(ts, key, value, headers)`` appends the record and its timestamp and returns
        #: the record's index in the batch, or -1 when the batch is full. One C call, so
        #: the producer's per-record paths (``enqueue``, ``send``) call it directly
        #: rather than through :meth:`RecordAccumulator.append`.
        self.open: ProducerBatch | None = None
        self.add: Callable[[int, Bytes | None, Bytes | None, Headers], int] | None = None
        #: Leader node id from the latest metadata, -1 when unknown.
        self.leader = -1
        #: The topic's keyless partitioner, credited with the bytes of each closed batch.
        self.sticky: UniformStickyPartitioner | None = None

    def close_open(self) -> ProducerBatch | None:
        """Stop appending to the open batch (full, or being sent); returns it."""
        batch = self.open
        if batch is not None:
            batch.full = True
            self.open = None
            self.add = None
            sticky = self.sticky
            if sticky is not None and sticky.current == self.tp.partition and batch.builder is not None:
                # KIP-794: switch partitions after ~batch_size bytes, at a batch boundary.
                sticky.on_append(batch.builder.records_size, True)
        return batch

    def __repr__(self) -> str:
        return f"PartitionQueue({self.tp}, batches={len(self.batches)}, leader={self.leader})"


class RecordAccumulator:
    """Per-partition batch queues and the ready/drain/expire decisions (see module doc)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        delivery_timeout_ms: float,
        compression: Compression = Compression.NONE,
        compression_level: int | None = None,
        max_request_size: int = 1048576,
        pool: BufferPool | None = None,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        transactional: bool = False,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.compression = Compression(compression)
        self.compression_level = compression_level
        self.max_request_size = max_request_size
        self.pool = pool if pool is not None else BufferPool(32 * 1024 * 1024)
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        #: The shared policy (net/retry): exponential, capped, 20% jitter (KIP-580).
        self._retry_backoff = Backoff(retry_backoff_ms, retry_backoff_max_ms)
        self.transactional = transactional
        self.ratios = CompressionRatioEstimator()
        self.queues: dict[TopicPartition, PartitionQueue] = {}
        #: Queues holding at least one batch (insertion-ordered dict used as a set).
        self._active: dict[TopicPartition, PartitionQueue] = {}
        #: Every batch not yet completed (queued or in flight), for flush and abort.
        self.incomplete: dict[ProducerBatch, None] = {}
        #: Batches sent and awaiting a response, for in-flight delivery timeouts.
        self.in_flight: dict[ProducerBatch, None] = {}
        self._drain_start: dict[int, int] = {}
        #: Number of flush() calls in progress: everything is sendable immediately.
        self.flushing = 0
        self.closing = False
        #: Called with a batch when it becomes sendable before its linger ends.
        self.on_ready: Callable[[], None] | None = None
        #: Called with each batch :meth:`append_new` opens, before its first record
        #: (idempotence/transactions register the partition).
        self.on_batch_created: Callable[[ProducerBatch], None] | None = None

    # -- appending ------------------------------------------------------------------------

    def queue(self, tp: TopicPartition) -> PartitionQueue:
        q = self.queues.get(tp)
        if q is None:
            q = self.queues[tp] = PartitionQueue(tp)
        return q

    def batch_limit(self, topic: str, record_size: int) -> int:
        """Size limit (uncompressed) for a new batch whose first record is ``record_size``."""
        limit = self.batch_size
        if self.compression is not Compression.NONE:
            ratio = self.ratios.estimate(topic) * CompressionRatioEstimator.SAFETY
            limit = int(limit / ratio)
        return max(min(limit, self.max_request_size, self.pool.total), record_size + BATCH_OVERHEAD)

    def append(
        self, q: PartitionQueue, ts: int, key: Bytes | None, value: Bytes | None, headers: Headers
    ) -> tuple[ProducerBatch, int] | None:
        """Append one record to ``q``'s open batch and return ``(batch, index)``, or None
        when there is no open batch or it is full (the caller opens one:
        :meth:`append_new`). ``headers`` is a sequence, ``()`` for none. The work is
        ``q.add``'s (one C call); the producer's per-record paths call that directly,
        since a Python call in between cost 7% of ``send`` from many tasks
        (instructions per record, bench/trees.py --instructions)."""
        add = q.add
        if add is not None and (index := add(ts, key, value, headers)) >= 0:
            return q.open, index  # type: ignore[return-value]  # set while add is
        return None

    def try_append(
        self,
        q: PartitionQueue,
        ts: int,
        key: Bytes | None,
        value: Bytes | None,
        headers: Headers | None,
        reserved: int = 0,
    ) -> tuple[ProducerBatch, int] | None:
        """:meth:`append` for the slow paths: ``reserved`` is buffer memory the caller
        holds for a new batch, given back when the record fits the open one."""
        done = self.append(q, ts, key, value, headers or ())
        if done is not None and reserved:
            self.pool.release(reserved)
        return done

    def close_open(self, q: PartitionQueue) -> bool:
        """Close ``q``'s open batch to appends, if it has one (full: it is sendable now,
        and the keyless partitioner may move on, KIP-794); whether it had one."""
        if q.open is None:
            return False
        self.mark_full(q)
        return True

    def append_new(
        self,
        q: PartitionQueue,
        ts: int,
        key: Bytes | None,
        value: Bytes | None,
        headers: Headers | None,
        size: int,
        reserved: int,
        now_ms: float,
    ) -> tuple[ProducerBatch, int] | None:
        """Open a new batch on ``q`` for a record of (bounded) ``size`` and append it as the
        batch's first record: ``(batch, 0)``. The memory comes from ``reserved`` (what the
        caller already holds, at least the batch limit) or from the pool without waiting;
        None (and ``reserved`` given back) when the pool is short: the caller waits with
        :meth:`reserve` and tries again."""
        limit = self.batch_limit(q.tp.topic, size)
        if reserved:
            if reserved < limit:
                self.pool.release(reserved)
                return None
            limit = reserved
        elif not self.pool.try_allocate(limit):
            return None
        batch = self.new_batch(q, limit, limit, now_ms)
        on_created = self.on_batch_created
        if on_created is not None:
            on_created(batch)
        add = q.add
        assert add is not None
        add(ts, key, value, headers or ())  # the first record always fits
        return batch, 0

    def append_run(
        self,
        q: PartitionQueue,
        ts: int,
        keys: Sequence[Bytes | None] | None,
        values: Any,
        items: Iterator[Any],
        on_run: Callable[[ProducerBatch, int, int], object],
        on_type_error: Callable[[Bytes | None, Any], object],
    ) -> Any:
        """The bulk append: records from ``items`` into ``q``'s open batch, in order, until
        one does not fit. Without ``keys``, ``items`` yields the values themselves (keyless
        records); with them, indexes into ``keys`` and ``values``. ``on_run(batch, first,
        n)`` hears of the records appended (also when a bad record raises); returns the
        item that did not fit (it starts a new batch: :meth:`append_new`), or
        :data:`RUN_END` when ``items`` ran out. A record of a type the builder refuses goes
        to ``on_type_error(key, value)``, which raises the descriptive error."""
        batch = q.open
        if batch is None or batch.builder is None:
            return next(items, RUN_END)
        app = batch.builder.append
        tss = batch.timestamps
        first = len(tss)
        n = 0
        item: Any = RUN_END
        carry: Any = RUN_END
        try:
            if keys is None:
                for item in items:
                    if not app(ts, None, item, ()):
                        carry = item
                        break
                    n += 1
            else:
                for item in items:
                    if not app(ts, keys[item], values[item], ()):
                        carry = item
                        break
                    n += 1
        except TypeError:
            if keys is None:
                on_type_error(None, item)
            else:
                on_type_error(keys[item], values[item])
            raise
        finally:
            if n:
                tss.extend([ts] * n)
                on_run(batch, first, n)
        return carry

    async def reserve(self, topic: str, size: int, timeout_ms: float) -> int:
        """Wait up to ``timeout_ms`` for the buffer memory of a new batch whose first record
        is ``size``; returns the bytes reserved (hand them to :meth:`append_new` or
        :meth:`try_append`, which use or give them back)."""
        reserved = self.batch_limit(topic, size)
        await self.pool.allocate(reserved, timeout_ms)
        return reserved

    def new_batch(self, q: PartitionQueue, limit: int, reserved: int, now_ms: float) -> ProducerBatch:
        """Open a new batch on ``q`` (memory already reserved by the caller)."""
        builder = BatchBuilder(
            compression=self.compression,
            compression_level=self.compression_level,
            max_batch_size=limit,
            is_transactional=self.transactional,
        )
        batch = ProducerBatch(q.tp, builder, limit, reserved, now_ms)
        batch.is_transactional = self.transactional
        self.mark_full(q)
        q.open = batch
        builder.track_timestamps(batch.timestamps)
        q.add = builder.add
        if not q.batches:
            self._active[q.tp] = q
        q.batches.append(batch)
        self.incomplete[batch] = None
        return batch

    def mark_full(self, q: PartitionQueue) -> None:
        """The open batch takes no more records (it is sendable now).

        A compressed batch is compressed right away: the observed ratio then sizes the
        next batches (filling them to ~batch_size on the wire), and the drain only has
        to write the header. Uncompressed batches are serialised at drain time.
        """
        batch = q.close_open()
        if batch is not None and self.compression is not Compression.NONE:
            self._seal(batch)

    def _seal(self, batch: ProducerBatch) -> None:
        batch.close()
        if self.compression is not Compression.NONE and batch.uncompressed_size:
            assert batch.buffer is not None
            self.ratios.observe(batch.tp.topic, len(batch.buffer) / batch.uncompressed_size)

    # -- sending decisions --------------------------------------------------------------

    def backoff_ms(self, attempts: int) -> float:
        """Retry backoff after ``attempts`` sends: exponential, capped, 20% jitter (KIP-580)."""
        return self._retry_backoff.delay_ms(attempts - 1)

    def ready(
        self, now_ms: float, node_ready: Callable[[int], bool] | None = None
    ) -> tuple[set[int], float, bool]:
        """``(nodes with a sendable batch, ms until the next batch may become sendable,
        whether some partition with data has no known leader)``.

        ``node_ready(node)`` (optional) lets the caller skip brokers it cannot send to
        right now (in-flight limit): their batches do not shorten the delay.
        """
        nodes: set[int] = set()
        delay = math.inf
        unknown_leader = False
        hurry = self.flushing > 0 or self.closing or self.pool.has_waiters
        linger = self.linger_ms
        for q in self._active.values():
            leader = q.leader
            if leader < 0:
                unknown_leader = True
                continue
            if leader in nodes:
                continue
            first = q.batches[0]
            if first.in_retry:
                wait = first.retry_at_ms - now_ms
                if wait > 0:
                    delay = min(delay, wait)
                    continue
                sendable = True
            else:
                sendable = hurry or first.full or len(q.batches) > 1
                if not sendable:
                    wait = first.created_ms + linger - now_ms
                    if wait <= 0:
                        sendable = True
                    else:
                        delay = min(delay, wait)
            if sendable:
                if node_ready is None or node_ready(leader):
                    nodes.add(leader)
        return nodes, delay, unknown_leader

    def drain(
        self, node: int, max_bytes: int, now_ms: float, sequencer: Sequencer | None = None
    ) -> list[ProducerBatch]:
        """Close and remove at most one batch per partition led by ``node``."""
        queues = [q for q in self._active.values() if q.leader == node]
        if not queues:
            return []
        start = self._drain_start.get(node, 0) % len(queues)
        self._drain_start[node] = start + 1
        out: list[ProducerBatch] = []
        size = 0
        for i in range(len(queues)):
            q = queues[(start + i) % len(queues)]
            first = q.batches[0]
            if first.in_retry and first.retry_at_ms > now_ms:
                continue
            estimate = first.estimated_size()
            if out and size + estimate > max_bytes:
                break
            if sequencer is not None and sequencer.should_stop_drain(first):
                continue
            if first is q.open:
                q.close_open()
            q.batches.popleft()
            if not q.batches:
                del self._active[q.tp]
            if sequencer is not None and not first.has_sequence:
                sequencer.assign_sequence(first)
            if first.buffer is None:
                self._seal(first)
            assert first.buffer is not None
            size += len(first.buffer)
            first.attempts += 1
            first.last_attempt_ms = now_ms
            self.in_flight[first] = None
            out.append(first)
        return out

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a batch back for a retry: at the front, after retries with lower sequences."""
        self.in_flight.pop(batch, None)
        batch.in_retry = True
        batch.retry_at_ms = now_ms + self.backoff_ms(batch.attempts)
        q = self.queue(batch.tp)
        batches = q.batches
        if not batches:
            self._active[q.tp] = q
        if batch.has_sequence:
            # Retries keep sequence order; non-retry batches (no sequence yet) come after.
            i = 0
            while (
                i < len(batches)
                and batches[i].has_sequence
                and batches[i].base_sequence < batch.base_sequence
            ):
                i += 1
            batches.insert(i, batch)
        else:
            batches.appendleft(batch)

    def split(self, batch: ProducerBatch, now_ms: float) -> list[ProducerBatch]:
        """Re-pack a batch the broker found too large into ``batch_size`` batches, queued
        at the front in order. Idempotence fields (if any) continue from the big batch's
        base sequence so the partition's sequence stays gapless."""
        from aiokafka_lite.wire.records import decode_batches

        assert batch.buffer is not None or batch.builder is not None
        data = batch.buffer if batch.buffer is not None else batch.close()
        (decoded,) = decode_batches(data)
        records = decoded.records()
        self.in_flight.pop(batch, None)
        self.incomplete.pop(batch, None)
        limit = max(self.batch_size, BATCH_OVERHEAD + 1)
        children: list[tuple[ProducerBatch, int]] = []
        current: ProducerBatch | None = None
        for index, rec in enumerate(records):
            headers = rec.headers
            if (
                current is None
                or current.builder is None
                or not current.builder.append(rec.timestamp, rec.key, rec.value, headers)
            ):
                size = record_size_upper_bound(rec.key, rec.value, headers) + BATCH_OVERHEAD
                current = ProducerBatch(
                    batch.tp,
                    BatchBuilder(
                        compression=self.compression,
                        compression_level=self.compression_level,
                        max_batch_size=max(limit, size),
                        is_transactional=batch.is_transactional,
                    ),
                    max(limit, size),
                    0,
                    batch.created_ms,
                )
                current.is_transactional = batch.is_transactional
                assert current.builder is not None
                current.builder.append(rec.timestamp, rec.key, rec.value, headers)
                children.append((current, index))
            current.timestamps.append(batch.timestamps[index])
        # The big batch's reservation moves to the first child (released when it completes).
        children[0][0].reserved = batch.reserved
        batch.reserved = 0
        seq = batch.base_sequence
        new = [child for child, _ in children]
        for child in new:
            child.full = True
            child.attempts = batch.attempts
            child.record_count = child.builder.record_count if child.builder else 0
            if seq >= 0:
                child.set_producer_state(batch.producer_id, batch.producer_epoch, seq)
                seq = (seq + child.record_count) & 0x7FFFFFFF
            self.incomplete[child] = None
        batch.split_into(children)
        q = self.queue(batch.tp)
        if not q.batches:
            self._active[q.tp] = q
        for child in reversed(new):
            q.batches.appendleft(child)
        return new

    def complete(self, batch: ProducerBatch) -> None:
        """Forget a finished batch and return its memory."""
        self.in_flight.pop(batch, None)
        if batch in self.incomplete:
            del self.incomplete[batch]
            if batch.reserved:
                self.pool.release(batch.reserved)
                batch.reserved = 0

    # -- expiry and abort ------------------------------------------------------------------

    def expire(self, now_ms: float) -> list[ProducerBatch]:
        """Remove queued batches older than ``delivery_timeout_ms`` (caller fails them)."""
        deadline = now_ms - self.delivery_timeout_ms
        expired: list[ProducerBatch] = []
        for q in list(self._active.values()):
            batches = q.batches
            while batches and batches[0].created_ms <= deadline:
                batch = batches.popleft()
                if batch is q.open:
                    q.close_open()
                expired.append(batch)
            if not batches:
                del self._active[q.tp]
        return expired

    def expired_in_flight(self, now_ms: float) -> list[ProducerBatch]:
        """In-flight batches past their delivery timeout (their response may still come)."""
        deadline = now_ms - self.delivery_timeout_ms
        return [b for b in self.in_flight if b.created_ms <= deadline]

    def next_expiry_ms(self, now_ms: float) -> float:
        """Milliseconds until the oldest queued or in-flight batch expires."""
        oldest = math.inf
        for q in self._active.values():
            oldest = min(oldest, q.batches[0].created_ms)
        for b in self.in_flight:
            oldest = min(oldest, b.created_ms)
            break  # insertion order: the first is (about) the oldest
        return oldest + self.delivery_timeout_ms - now_ms

    def drain_all(self) -> list[ProducerBatch]:
        """Remove every queued batch (abort)."""
        out: list[ProducerBatch] = []
        for q in self._active.values():
            out.extend(q.batches)
            q.batches.clear()
            q.open = None
            q.add = None
        self._active.clear()
        return out

    def queued_batches(self) -> Iterator[ProducerBatch]:
        for q in self._active.values():
            yield from q.batches

    def queue_sizes(self, topic: str) -> dict[int, int]:
        """Batches waiting per partition of ``topic`` (for adaptive partitioning)."""
        return {tp.partition: len(q.batches) for tp, q in self._active.items() if tp.topic == topic}

    @property
    def has_queued(self) -> bool:
        return bool(self._active)
