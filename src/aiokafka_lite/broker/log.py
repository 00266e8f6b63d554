"""One partition's log: record batches stored exactly as produced.

Produce validates each v2 batch's header and CRC, copies the partition's record set
once, rewrites the base offset (and partition leader epoch, which the CRC does not
cover) in place and appends the batch views; fetch hands the stored views back. No
record is ever decoded.

Besides the batches the log keeps what Kafka keeps per partition: high watermark (one
replica in practice, so HW = log end offset), log start offset (DeleteRecords,
retention), the leader-epoch cache (OffsetForLeaderEpoch), idempotent producer state
(last five batches per producer id, to answer retries with their original offsets),
ongoing transactions (last stable offset) and the aborted-transaction index
(read_committed fetches).
"""

from __future__ import annotations

import asyncio
import struct
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Final

import crc32c

from aiokafka_lite.errors import (
    CorruptMessageError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaError,
    MessageSizeTooLargeError,
    OutOfOrderSequenceNumberError,
)

__all__ = [
    "AbortedTxn",
    "AppendResult",
    "BatchInfo",
    "PartitionLog",
    "ProducerBatchMeta",
    "build_control_batch",
    "parse_batch_header",
    "validate_record_set",
]

# RecordBatch v2 header (big-endian): baseOffset q, batchLength i, partitionLeaderEpoch i,
# magic b, crc I, attributes h, lastOffsetDelta i, baseTimestamp q, maxTimestamp q,
# producerId q, producerEpoch h, baseSequence i, recordsCount i.
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = _HEADER.size  # 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength precede what batchLength counts
_Q: Final = struct.Struct(">q")
_I: Final = struct.Struct(">i")
_MAX_TS: Final = struct.Struct(">q")
_CRC_U32: Final = struct.Struct(">I")
_ATTR: Final = struct.Struct(">h")
_CRC_START: Final = 21  # CRC-32C covers attributes .. end of batch
_ATTR_CODEC: Final = 0x07
_ATTR_LOG_APPEND_TIME: Final = 0x08
_ATTR_TXN: Final = 0x10
_ATTR_CONTROL: Final = 0x20
_MAX_SEQ: Final = 2**31 - 1
PRODUCER_BATCH_CACHE: Final = 5  # Kafka keeps the last five batches per producer


@dataclass(slots=True)
class BatchInfo:
    """Header facts of one v2 batch (what the log needs without decoding records)."""

    base_offset: int
    size: int  # bytes on the wire, header included
    leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _ATTR_TXN)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (_MAX_SEQ + 1)


def parse_batch_header(buf: bytes | bytearray | memoryview, pos: int, end: int) -> BatchInfo:
    """Parses and checks the v2 header of the batch at ``buf[pos:]`` (no CRC check).

    Raises ``CorruptMessageError`` for a truncated or inconsistent header and
    ``InvalidRecordError`` for message format v0/v1.
    """
    if end - pos < LOG_OVERHEAD + 5:
        raise CorruptMessageError(f"truncated record batch: {end - pos} bytes")
    length = _I.unpack_from(buf, pos + 8)[0]
    if length < 5 or length + LOG_OVERHEAD > end - pos:
        raise CorruptMessageError(f"record batch length {length} does not fit the {end - pos} bytes given")
    magic = buf[pos + 16]
    if magic != 2:
        # Produce v3+ may only carry v2 batches (Kafka answers INVALID_RECORD too).
        raise InvalidRecordError(f"record batch magic {magic} (only v2 batches are supported)")
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptMessageError(f"record batch length {length} is shorter than a v2 header")
    (base, length, epoch, _magic, _crc, attrs, lod, bts, mts, pid, pepoch, bseq, count) = _HEADER.unpack_from(
        buf, pos
    )
    size = length + LOG_OVERHEAD
    if count < 0 or lod < 0 or (count and lod != count - 1 and not attrs & _ATTR_CONTROL):
        raise CorruptMessageError(f"record batch count {count} disagrees with last offset delta {lod}")
    return BatchInfo(base, size, epoch, attrs, lod, bts, mts, pid, pepoch, bseq, count)


def validate_record_set(data: bytes | bytearray | memoryview, max_batch_size: int) -> list[BatchInfo]:
    """Checks every batch of a produced record set (headers, sizes, CRCs).

    The checks are Kafka's produce-time ones that need no record decoding: v2 format,
    consistent lengths, CRC-32C, at least one record, no control batches from clients,
    a producer id on transactional batches, ``max.message.bytes`` per batch.
    """
    infos: list[BatchInfo] = []
    pos = 0
    end = len(data)
    if end == 0:
        raise InvalidRecordError("empty record set")
    view = data if isinstance(data, memoryview) else memoryview(data)
    while pos < end:
        info = parse_batch_header(view, pos, end)
        if info.size > max_batch_size:
            raise MessageSizeTooLargeError(
                f"record batch of {info.size} bytes exceeds max.message.bytes {max_batch_size}"
            )
        crc = _CRC_U32.unpack_from(view, pos + 17)[0]
        if crc32c.crc32c(view[pos + _CRC_START : pos + info.size]) != crc:
            raise CorruptMessageError("record batch CRC mismatch")
        if info.record_count == 0:
            raise InvalidRecordError("record batch without records")
        if info.is_control:
            raise InvalidRecordError("clients may not produce control batches")
        if info.is_transactional and info.producer_id < 0:
            raise InvalidRecordError("transactional batch without a producer id")
        infos.append(info)
        pos += info.size
    return infos


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
        self.log_append_time = False  # message.timestamp.type=LogAppendTime
        self.retention_bytes = -1
        self.max_message_bytes = 1048588
        self._waiters: set[asyncio.Future[None]] = set()
        self.on_append: AppendListener | None = None  # persistence hook, gets each stored batch
        self.on_log_start: Callable[[int], None] | None = None

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

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, its end offset) as OffsetForLeaderEpoch answers it."""
        if epoch == self.leader_epoch:
            return epoch, self.log_end_offset
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
    def append(
        self, data: bytes | bytearray | memoryview, infos: list[BatchInfo] | None = None
    ) -> AppendResult:
        """Appends a produced record set; validates it unless ``infos`` come from ``validate_record_set``.

        Raises a ``BrokerResponseError`` subclass (the produce error code) on rejection.
        """
        if infos is None:
            infos = validate_record_set(data, self.max_message_bytes)
        # Idempotence first: a retry of a cached batch is answered with its original offset.
        first = infos[0]
        pid = first.producer_id
        if pid >= 0:
            for info in infos:
                if info.producer_id != pid or info.producer_epoch != first.producer_epoch:
                    raise InvalidRecordError("record set mixes producer ids or epochs")
            dup = self._check_producer(infos)
            if dup is not None:
                return AppendResult(dup.base_offset, -1, self.log_start_offset, duplicate=True)
        buf = bytearray(data)
        now = -1
        if self.log_append_time:
            now = int(time.time() * 1000)
        pos = 0
        base_offset = self.log_end_offset
        offset = base_offset
        mv = memoryview(buf)
        epoch = self.leader_epoch
        for info in infos:
            size = info.size
            _Q.pack_into(buf, pos, offset)
            _I.pack_into(buf, pos + 12, epoch)
            max_ts = info.max_timestamp
            if now >= 0:
                _ATTR.pack_into(buf, pos + 21, info.attributes | _ATTR_LOG_APPEND_TIME)
                _MAX_TS.pack_into(buf, pos + 35, now)
                _CRC_U32.pack_into(buf, pos + 17, crc32c.crc32c(mv[pos + _CRC_START : pos + size]))
                max_ts = now
            last = offset + info.last_offset_delta
            self._store(
                _Stored(
                    offset, last, max_ts, mv[pos : pos + size], info.producer_id, info.is_transactional, False
                )
            )
            if info.producer_id >= 0:
                self._record_producer_batch(info, offset, last, max_ts)
            offset = last + 1
            pos += size
        self._after_append()
        return AppendResult(base_offset, now, self.log_start_offset)

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
        view = memoryview(buf)
        pos, end = 0, len(view)
        while pos < end:
            try:
                info = parse_batch_header(view, pos, end)
            except KafkaError:
                break
            chunk = view[pos : pos + info.size]
            last = info.base_offset + info.last_offset_delta
            if info.leader_epoch > self.leader_epoch:
                self.set_leader_epoch(info.leader_epoch)
            hook, self.on_append = self.on_append, None
            try:
                self._store(
                    _Stored(
                        info.base_offset,
                        last,
                        info.max_timestamp,
                        chunk,
                        info.producer_id,
                        info.is_transactional,
                        info.is_control,
                    )
                )
            finally:
                self.on_append = hook
            if info.is_control:
                self._apply_control(
                    info.producer_id, info.producer_epoch, _control_is_commit(chunk), info.base_offset
                )
            elif info.producer_id >= 0:
                self._record_producer_batch(info, info.base_offset, last, info.max_timestamp)
            pos += info.size
        return pos

    # -- idempotence -------------------------------------------------------------
    def _check_producer(self, infos: list[BatchInfo]) -> ProducerBatchMeta | None:
        """Kafka's sequence rules; returns the cached batch when this is a retry of it."""
        first = infos[0]
        pid, epoch = first.producer_id, first.producer_epoch
        state = self.producers.get(pid)
        if first.base_sequence < 0:
            if first.is_transactional:
                raise InvalidRecordError("transactional batch without a sequence number")
            return None  # transactional/plain producer id without idempotence
        if state is None:
            return None  # unknown producer: any sequence starts it (Kafka accepts after retention)
        if epoch < state.epoch:
            raise InvalidProducerEpochError(f"producer epoch {epoch} is older than the current {state.epoch}")
        if epoch == state.epoch and len(infos) == 1:
            for meta in state.batches:
                if meta.first_seq == first.base_sequence and meta.last_seq == first.last_sequence:
                    return meta
        if epoch == state.epoch:
            if state.batches and not _in_sequence(state.last_seq, first.base_sequence):
                if _seq_at_or_before(first.base_sequence, state.last_seq):
                    # A retry of a batch older than the cache: its offset is gone.
                    raise DuplicateSequenceNumberError(
                        f"sequence {first.base_sequence} was already written (last {state.last_seq})"
                    )
                raise OutOfOrderSequenceNumberError(
                    f"out of order sequence {first.base_sequence} (expected {_next_seq(state.last_seq)})"
                )
        elif first.base_sequence != 0:
            raise OutOfOrderSequenceNumberError(
                f"new producer epoch {epoch} must start at sequence 0, not {first.base_sequence}"
            )
        for prev, info in pairwise(infos):
            if not _in_sequence(prev.last_sequence, info.base_sequence):
                raise OutOfOrderSequenceNumberError("batches of one record set are not contiguous")
        return None

    def _record_producer_batch(self, info: BatchInfo, base: int, last: int, ts: int) -> None:
        pid = info.producer_id
        state = self.producers.get(pid)
        if state is None or info.producer_epoch > state.epoch:
            old_coord = state.coordinator_epoch if state is not None else -1
            state = ProducerState(info.producer_epoch, coordinator_epoch=old_coord)
            self.producers[pid] = state
        if info.base_sequence >= 0:
            state.batches.append(ProducerBatchMeta(info.base_sequence, info.last_sequence, base, last, ts))
        if info.is_transactional and pid not in self.ongoing_txns:
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
            leader_epoch=self.leader_epoch,
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
            if _log_append_time(b.buf):
                return max(b.base, self.log_start_offset), b.max_ts
            from aiokafka_lite.wire.records import decode_batches

            try:
                batch = decode_batches(b.buf, check_crc=False)[0]
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


def _seq_at_or_before(seq: int, last_seq: int) -> bool:
    return 0 <= seq <= last_seq


def _log_append_time(batch: memoryview | bytes) -> bool:
    return bool(_ATTR.unpack_from(batch, 21)[0] & _ATTR_LOG_APPEND_TIME)


def _control_is_commit(batch: memoryview | bytes) -> bool:
    # The single control record's key is (version int16, type int16); find it after the
    # record's length/attributes/deltas varints: parse minimally.
    pos = HEADER_SIZE
    pos = _skip_varint(batch, pos)  # length
    pos += 1  # attributes
    pos = _skip_varint(batch, pos)  # timestamp delta
    pos = _skip_varint(batch, pos)  # offset delta
    pos = _skip_varint(batch, pos)  # key length
    if pos + 4 > len(batch):
        return False
    return int.from_bytes(batch[pos + 2 : pos + 4], "big") == 1


def _skip_varint(buf: memoryview | bytes, pos: int) -> int:
    while pos < len(buf) and buf[pos] & 0x80:
        pos += 1
    return pos + 1


def _varint(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def build_control_batch(
    *,
    base_offset: int,
    leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
) -> bytes:
    """A transaction marker batch: one control record, key (0, type), value (0, coordinator epoch)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = (
        b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key + _varint(len(value)) + value + _varint(0)
    )
    record = _varint(len(body)) + body
    attrs = _ATTR_TXN | _ATTR_CONTROL
    after_crc = (
        struct.pack(">hiqqqhii", attrs, 0, timestamp, timestamp, producer_id, producer_epoch, -1, 1) + record
    )
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch + magic + crc + rest
    return struct.pack(">qiibI", base_offset, length, leader_epoch, 2, crc) + after_crc
