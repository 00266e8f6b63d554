"""One partition's log: record batches stored exactly as produced.

Produce checks each batch first (``broker.validation``: Kafka's checks, headers and
records), then ``append`` applies the producer-state rules, copies the batch once and
rewrites its base offset, partition leader epoch and, when Kafka would, its max
timestamp in place; fetch hands the stored views back. Batch headers are read through
``wire.records`` (the one batch parser), records only where Kafka reads them too.

Besides the batches the log keeps what Kafka keeps per partition: high watermark (one
replica in practice, so HW = log end offset), log start offset (DeleteRecords,
retention), the leader-epoch cache (OffsetForLeaderEpoch), idempotent producer state
(last five batches per producer id, to answer retries with their original offsets),
ongoing transactions (last stable offset) and the aborted-transaction index
(read_committed fetches).
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.broker.validation import TopicRules
from aiokafka_lite.core.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    KafkaError,
    OutOfOrderSequenceNumberError,
)
from aiokafka_lite.wire.records import (
    ControlRecordType,
    RecordBatch,
    as_byte_view,
    build_control_batch,
    parse_batches,
    parse_control_record,
    read_batch,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)

__all__ = [
    "AbortedTxn",
    "AppendResult",
    "PartitionLog",
    "ProducerBatchMeta",
]

_MAX_SEQ: Final = 2**31 - 1
PRODUCER_BATCH_CACHE: Final = 5  # Kafka keeps the last five batches per producer


@dataclass(slots=True)
class ProducerBatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerState:
    epoch: int
    batches: deque[ProducerBatchMeta] = field(default_factory=lambda: deque(maxlen=PRODUCER_BATCH_CACHE))
    coordinator_epoch: int = -1
    # Max timestamp of its last batch, or the time of its last marker (DescribeProducers).
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the abort marker


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False


class _Stored:
    """One stored batch: a view of the bytes plus the header facts fetch needs."""

    __slots__ = ("base", "buf", "is_control", "is_txn", "last", "max_ts", "pid", "size")

    def __init__(
        self,
        base: int,
        last: int,
        max_ts: int,
        buf: memoryview | bytes,
        pid: int,
        is_txn: bool,
        is_control: bool,
    ) -> None:
        self.base = base
        self.last = last
        self.max_ts = max_ts
        self.buf = buf
        self.size = len(buf)
        self.pid = pid
        self.is_txn = is_txn
        self.is_control = is_control


AppendListener = Callable[[bytes | bytearray | memoryview], None]


class PartitionLog:
    """Batches of one partition plus the state Kafka derives from them."""

    def __init__(self, *, leader_epoch: int = 0) -> None:
        self._batches: list[_Stored] = []
        self._bases: list[int] = []  # parallel to _batches, for bisect
        self._first = 0  # index of the first live batch (retention/DeleteRecords drop lazily)
        self.log_end_offset = 0
        self.log_start_offset = 0
        self.size_bytes = 0
        self.producers: dict[int, ProducerState] = {}
        self.ongoing_txns: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []  # ordered by last_offset
        self._aborted_lasts: list[int] = []
        self.epoch_starts: list[tuple[int, int]] = [(leader_epoch, 0)]  # (leader epoch, start offset)
        self.leader_epoch = leader_epoch
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.rules = TopicRules()  # the topic configs produce validation applies
        self.retention_bytes = -1
        self._waiters: set[asyncio.Future[None]] = set()
        self.on_append: AppendListener | None = None  # persistence hook, gets each stored batch
        self.on_log_start: Callable[[int], None] | None = None

    @property
    def max_message_bytes(self) -> int:
        return self.rules.max_message_bytes

    @property
    def log_append_time(self) -> bool:
        """message.timestamp.type=LogAppendTime."""
        return self.rules.log_append_time

    # -- offsets -----------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        if self.ongoing_txns:
            return min(self.ongoing_txns.values())
        return self.log_end_offset

    def set_leader_epoch(self, epoch: int) -> None:
        """Records a new leader epoch starting at the current log end (leadership moved)."""
        if epoch <= self.leader_epoch:
            return
        self.leader_epoch = epoch
        if self.epoch_starts and self.epoch_starts[-1][1] == self.log_end_offset:
            self.epoch_starts[-1] = (epoch, self.log_end_offset)
        else:
            self.epoch_starts.append((epoch, self.log_end_offset))

    def epoch_for_offset(self, offset: int) -> int:
        """Leader epoch in which ``offset`` was written (-1 before the log's first epoch)."""
        found = -1
        for epoch, start in self.epoch_starts:
            if start > offset:
                break
            found = epoch
        return found

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, its end offset) as OffsetForLeaderEpoch answers it;
        (-1, -1) for an epoch above the current one, which this log has never seen."""
        if epoch == self.leader_epoch:
            return epoch, self.log_end_offset
        if epoch > self.leader_epoch:
            return -1, -1
        found = -1
        for i, (e, _start) in enumerate(self.epoch_starts):
            if e <= epoch:
                found = i
        if found < 0:
            return -1, -1
        e = self.epoch_starts[found][0]
        if found + 1 < len(self.epoch_starts):
            return e, self.epoch_starts[found + 1][1]
        return e, self.log_end_offset

    # -- append ------------------------------------------------------------------
    def append(self, batch: RecordBatch, max_timestamp: int | None = None) -> AppendResult:
        """Appends one produced batch that passed ``validation.check_batch``.

        Applies Kafka's producer-state rules first (a retry of a cached batch is answered
        with its original offset; stale epochs and sequence gaps raise the produce error).
        ``max_timestamp`` is the true max of the record timestamps (the summary's), which
        Kafka stores in place of whatever the producer wrote.
        """
        pid = batch.producer_id
        if pid >= 0:
            dup = self._check_producer(batch)
            if dup is not None:
                return AppendResult(dup.base_offset, -1, self.log_start_offset, duplicate=True)
        buf = bytearray(batch.buffer)
        offset = self.log_end_offset
        set_base_offset(buf, 0, offset)
        set_partition_leader_epoch(buf, 0, self.leader_epoch)
        now = -1
        max_ts = batch.max_timestamp
        if self.log_append_time:
            now = max_ts = int(time.time() * 1000)
            set_max_timestamp(buf, 0, now, log_append_time=True)
        elif batch.attributes & _ATTR_LOG_APPEND_TIME or (
            max_timestamp is not None and max_timestamp != max_ts
        ):
            max_ts = max_ts if max_timestamp is None else max_timestamp
            set_max_timestamp(buf, 0, max_ts, log_append_time=False)
        last = offset + batch.last_offset_delta
        self._store(_Stored(offset, last, max_ts, memoryview(buf), pid, batch.is_transactional, False))
        if pid >= 0:
            self._record_producer_batch(batch, offset, last, max_ts)
        self._after_append()
        return AppendResult(offset, now, self.log_start_offset)

    def _store(self, s: _Stored) -> None:
        self._batches.append(s)
        self._bases.append(s.base)
        self.log_end_offset = s.last + 1
        self.size_bytes += s.size
        if s.max_ts > self.max_timestamp:
            self.max_timestamp = s.max_ts
            self.max_timestamp_offset = s.last
        if self.on_append is not None:
            self.on_append(s.buf)

    def _after_append(self) -> None:
        if self.retention_bytes >= 0:
            self._enforce_retention()
        self.notify()

    def notify(self) -> None:
        """Wakes long-polling fetches waiting on this partition."""
        if self._waiters:
            for w in self._waiters:
                if not w.done():
                    w.set_result(None)
            self._waiters.clear()

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def append_stored(self, buf: bytes | bytearray | memoryview) -> int:
        """Re-appends batches that already carry offsets (loading a persisted log).

        Rebuilds producer, transaction and epoch state from the headers; a truncated
        tail (a crash mid-write) is ignored; returns the length of the valid prefix.
        """
        view = as_byte_view(buf)
        pos = 0
        try:
            for batch in parse_batches(view):
                if not isinstance(batch, RecordBatch):
                    break  # this log only ever stores v2 batches
                self._restore(batch)
                pos = batch.position + batch.size_in_bytes
        except CorruptRecordError:
            pass  # a torn tail: the valid prefix is what counts
        return pos

    def _restore(self, batch: RecordBatch) -> None:
        base = batch.base_offset
        last = batch.last_offset
        if batch.partition_leader_epoch > self.leader_epoch:
            self.set_leader_epoch(batch.partition_leader_epoch)
        hook, self.on_append = self.on_append, None
        try:
            self._store(
                _Stored(
                    base,
                    last,
                    batch.max_timestamp,
                    batch.buffer,
                    batch.producer_id,
                    batch.is_transactional,
                    batch.is_control,
                )
            )
        finally:
            self.on_append = hook
        if batch.is_control:
            self._apply_control(batch.producer_id, batch.producer_epoch, _is_commit_marker(batch), base)
        elif batch.producer_id >= 0:
            self._record_producer_batch(batch, base, last, batch.max_timestamp)

    # -- idempotence -------------------------------------------------------------
    def _check_producer(self, batch: RecordBatch) -> ProducerBatchMeta | None:
        """Kafka's producer-state rules for a batch with a producer id; returns the cached
        batch when this is a retry of one (answered with its original offsets)."""
        pid, epoch = batch.producer_id, batch.producer_epoch
        state = self.producers.get(pid)
        if state is None:
            return None  # unknown producer (or one whose state expired): any sequence starts it
        if epoch == state.epoch:
            for meta in state.batches:
                if meta.first_seq == batch.base_sequence and meta.last_seq == batch.last_sequence:
                    return meta
        if epoch < state.epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {pid} is {epoch}, which is smaller than the last seen epoch {state.epoch}"
            )
        first_seq = batch.base_sequence
        if epoch != state.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceNumberError(
                    f"Invalid sequence number for new epoch of producer {pid}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {state.epoch} (current producer epoch)"
                )
        elif not _in_sequence(state.last_seq, first_seq):
            # Also a retry of a batch older than the five cached ones: Kafka cannot tell
            # it from a gap and refuses it the same way.
            raise OutOfOrderSequenceNumberError(
                f"Out of order sequence number for producer {pid}: {first_seq} (incoming seq. number), "
                f"{state.last_seq} (current end sequence number)"
            )
        return None

    def _record_producer_batch(self, batch: RecordBatch, base: int, last: int, ts: int) -> None:
        pid = batch.producer_id
        state = self.producers.get(pid)
        if state is None or batch.producer_epoch > state.epoch:
            old_coord = state.coordinator_epoch if state is not None else -1
            state = ProducerState(batch.producer_epoch, coordinator_epoch=old_coord)
            self.producers[pid] = state
        if batch.base_sequence >= 0:
            state.batches.append(ProducerBatchMeta(batch.base_sequence, batch.last_sequence, base, last, ts))
        state.last_timestamp = ts
        if batch.is_transactional and pid not in self.ongoing_txns:
            self.ongoing_txns[pid] = base

    # -- transactions ------------------------------------------------------------
    def write_control_batch(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        timestamp: int | None = None,
    ) -> int:
        """Writes a COMMIT/ABORT marker for ``producer_id`` and ends its open transaction.

        Called by the transaction coordinator. Returns the marker's offset. A stale
        producer epoch raises ``InvalidProducerEpochError``.
        """
        state = self.producers.get(producer_id)
        if state is not None and producer_epoch < state.epoch:
            raise InvalidProducerEpochError(
                f"marker epoch {producer_epoch} is older than producer epoch {state.epoch}"
            )
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        offset = self.log_end_offset
        data = build_control_batch(
            base_offset=offset,
            partition_leader_epoch=self.leader_epoch,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            timestamp=ts,
        )
        self._store(_Stored(offset, offset, ts, memoryview(data), producer_id, True, True))
        self._apply_control(producer_id, producer_epoch, commit, offset)
        if state is None:
            state = ProducerState(producer_epoch)
            self.producers[producer_id] = state
        state.coordinator_epoch = coordinator_epoch
        state.last_timestamp = ts
        self._after_append()
        return offset

    def _apply_control(self, producer_id: int, producer_epoch: int, commit: bool, offset: int) -> None:
        first = self.ongoing_txns.pop(producer_id, None)
        if not commit and first is not None:
            self.aborted.append(AbortedTxn(producer_id, first, offset))
            self._aborted_lasts.append(offset)
        state = self.producers.get(producer_id)
        if state is not None and producer_epoch > state.epoch:
            state.epoch = producer_epoch
            state.batches.clear()

    def aborted_in_range(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start, end)`` (for read_committed fetches)."""
        i = bisect_left(self._aborted_lasts, start)
        return [a for a in self.aborted[i:] if a.first_offset < end]

    # -- read --------------------------------------------------------------------
    def read(
        self, offset: int, max_bytes: int, upper: int, *, min_one: bool
    ) -> tuple[list[bytes | bytearray | memoryview], int, int]:
        """Whole stored batches from the one containing ``offset``, below ``upper``.

        Returns (buffers, total size, offset after the last returned batch). Stops
        before exceeding ``max_bytes`` unless ``min_one`` and nothing was taken yet
        (KIP-74: the first batch is returned even if larger, so consumers never stall).
        """
        if offset >= upper:
            return [], 0, offset
        bases = self._bases
        i = bisect_right(bases, offset, lo=self._first) - 1
        if i < self._first:
            i = self._first
        batches = self._batches
        n = len(batches)
        parts: list[bytes | bytearray | memoryview] = []
        total = 0
        nxt = offset
        while i < n:
            b = batches[i]
            if b.base >= upper:
                break
            if b.last < offset:
                i += 1
                continue
            if total + b.size > max_bytes and (total or not min_one):
                break
            parts.append(b.buf)
            total += b.size
            nxt = b.last + 1
            i += 1
        return parts, total, nxt

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``ts`` (ListOffsets).

        Batches are skipped by their max timestamp; only the one batch that holds the
        answer is decoded (CreateTime batches hold per-record timestamps).
        """
        for b in self._batches[self._first :]:
            if b.max_ts < ts or b.is_control:
                continue
            try:
                batch = read_batch(as_byte_view(b.buf))
                assert isinstance(batch, RecordBatch)
                if batch.attributes & _ATTR_LOG_APPEND_TIME:
                    return max(b.base, self.log_start_offset), b.max_ts
                for rec in batch.records():
                    if rec.timestamp >= ts and rec.offset >= self.log_start_offset:
                        return rec.offset, rec.timestamp
            except KafkaError:
                return max(b.base, self.log_start_offset), b.max_ts
        return None

    def batch_count(self) -> int:
        return len(self._batches) - self._first

    def iter_batches(self) -> Iterable[memoryview | bytes]:
        for b in self._batches[self._first :]:
            yield b.buf

    # -- truncation from the front -----------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """Advances the log start offset to ``offset`` (DeleteRecords); returns the new start."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._drop_before(offset)
            if self.on_log_start is not None:
                self.on_log_start(offset)
            self.notify()
        return self.log_start_offset

    def _drop_before(self, offset: int) -> None:
        batches = self._batches
        first = self._first
        while first < len(batches) and batches[first].last < offset:
            self.size_bytes -= batches[first].size
            first += 1
        self._first = first
        if first > 1024 and first * 2 > len(batches):
            del batches[:first]
            del self._bases[:first]
            self._first = 0
        # Aborted entries wholly below the start are no longer needed.
        while self.aborted and self.aborted[0].last_offset < offset:
            self.aborted.pop(0)
            self._aborted_lasts.pop(0)

    def _enforce_retention(self) -> None:
        start = self.log_start_offset
        batches = self._batches
        while self.size_bytes > self.retention_bytes and len(batches) - self._first > 1:
            b = batches[self._first]
            if b.last + 1 > self.last_stable_offset:
                break
            self.log_start_offset = b.last + 1
            self._drop_before(self.log_start_offset)
        if self.on_log_start is not None and self.log_start_offset != start:
            self.on_log_start(self.log_start_offset)


def _next_seq(last_seq: int) -> int:
    return 0 if last_seq == _MAX_SEQ else last_seq + 1


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == _next_seq(last_seq)


def _is_commit_marker(batch: RecordBatch) -> bool:
    try:
        records = batch.records()
        return bool(records) and parse_control_record(records[0])[0] == ControlRecordType.COMMIT
    except KafkaError:
        return False


_ATTR_LOG_APPEND_TIME: Final = 0x08
