"""Turning one fetched partition into consumable records, sans-I/O.

Two steps with different timing:

* :func:`parse_partition` runs in the fetcher as soon as a response arrives: it frames
  the records blob into batches (zero-copy views), checks CRCs, drops batches that are
  entirely before the fetch offset or (read_committed) at/after the last stable
  offset, and remembers the aborted-transaction list. The result is a
  :class:`CompletedFetch` that costs only its raw bytes in memory.
* :meth:`CompletedFetch.next_records` runs when the consumer needs more records: it
  decodes the next batch (decompressing it if needed), skipping control batches and
  aborted transactional batches, and turns it into :class:`Record` objects in one
  comprehension. Decoding batch by batch keeps memory near the raw size of the
  buffered data, whatever the consumer's speed.

Errors are positional: a corrupt batch (or a failing deserializer) ends the
completed fetch with an error that the consumer raises once it has handed out every
record before it, so the position then names the offending offset.

Context deserializers (``deserialize(data, ctx)``, see ``core/serialization``) get the topic, the
field and the record's headers. One that needs I/O for a record (a schema not cached yet) raises
``SerializerNotReadyError``: the records before it are handed out, the batch stays current and
``unresolved`` names the call to await; once the consumer has awaited it, the batch is decoded
again from that record.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable, Sequence
from typing import Any, Final

from aiokafka_lite.consume.record import Record
from aiokafka_lite.core.errors import (
    CorruptRecordError,
    KafkaError,
    RecordDeserializationError,
    SerializerNotReadyError,
)
from aiokafka_lite.core.serialization import ContextCall, MessageField, SerializationContext
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.records import (
    AnyBatch,
    ControlRecordType,
    RecordBatch,
    TimestampType,
    as_byte_view,
    as_records,
    parse_batches,
)

__all__ = ["CompletedFetch", "parse_partition"]

Deserializer = Callable[[Any], Any]

_CONTROL_KEY: Final = struct.Struct(">hh")
_LOG_OVERHEAD: Final = 12
_ATTR_CONTROL: Final = 0x20
_ATTR_TRANSACTIONAL: Final = 0x10
_ATTR_TIMESTAMP_TYPE: Final = 0x08
_new = tuple.__new__
_TS_TYPES: Final = (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)
_EMPTY: Final[list[Record]] = []


class CompletedFetch:
    """Data fetched for one partition in one response, consumed batch by batch."""

    __slots__ = (
        "_aborted",
        "_aborted_index",
        "_aborted_pids",
        "batch_index",
        "batches",
        "error",
        "fetch_offset",
        "high_watermark",
        "last_epoch",
        "last_stable_offset",
        "leftover",
        "log_start_offset",
        "next_fetch_offset",
        "size",
        "tp",
        "unresolved",
    )

    def __init__(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        batches: list[AnyBatch],
        next_fetch_offset: int,
        size: int,
        *,
        error: KafkaError | None = None,
        aborted: Sequence[tuple[int, int]] | None = None,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
    ) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.batches = batches
        self.batch_index = 0
        self.next_fetch_offset = next_fetch_offset
        self.size = size
        # Raised by the consumer once everything before it was handed out.
        self.error = error
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        # Epoch of the last batch processed (position epoch after exhaustion).
        self.last_epoch: int | None = None
        # Decoded records handed back unconsumed (getmany's max_records, pause): served first.
        self.leftover: list[Record] | None = None
        # read_committed: aborted transactions as (first_offset, producer_id), sorted;
        # None in read_uncommitted mode.
        self._aborted: list[tuple[int, int]] | None = sorted(aborted) if aborted is not None else None
        self._aborted_index = 0
        self._aborted_pids: set[int] = set()
        #: A context deserializer needs I/O for the record at this offset: (call, data, ctx, offset)
        #: for the consumer to await (``ContextCall.resolve``) before decoding on from there.
        self.unresolved: tuple[ContextCall, Any, SerializationContext, int] | None = None

    def __repr__(self) -> str:
        return (
            f"CompletedFetch({self.tp.topic}-{self.tp.partition}, offsets {self.fetch_offset}.."
            f"{self.next_fetch_offset}, batches {self.batch_index}/{len(self.batches)}, "
            f"size {self.size}, error={self.error!r})"
        )

    @property
    def exhausted(self) -> bool:
        return self.batch_index >= len(self.batches) and not self.leftover

    def give_back(self, records: list[Record]) -> None:
        """Return decoded but unconsumed records; the next ``next_records`` starts with them."""
        if records:
            self.leftover = records + self.leftover if self.leftover else records

    def next_records(
        self,
        position: int,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        contextual: bool = False,
    ) -> list[Record]:
        """Decode batches until one yields records at or after ``position``.

        Returns an empty list once every batch is consumed (check ``error`` then).
        Raises ``CorruptRecordError`` for a batch that cannot be decoded; the batch
        stays current, so a retry raises again until the consumer seeks past it.
        ``contextual``: the deserializers are ``ContextCall`` objects (see ``unresolved``).
        """
        leftover = self.leftover
        if leftover is not None:
            self.leftover = None
            if leftover[0].offset < position:
                leftover = [r for r in leftover if r.offset >= position]
            if leftover:
                return leftover
        if not gc.isenabled():
            return self._decode_next(position, key_deserializer, value_deserializer, contextual)
        # Decoding a batch allocates three tracked objects per record that all stay
        # alive until handed out; with the collector running, each batch triggers
        # several collections that rescan them (measured: ~4x slower decoding). One
        # collection after the batch does the same job.
        gc.disable()
        try:
            return self._decode_next(position, key_deserializer, value_deserializer, contextual)
        finally:
            gc.enable()

    def _decode_next(
        self,
        position: int,
        key_deserializer: Any,
        value_deserializer: Any,
        contextual: bool = False,
    ) -> list[Record]:
        batches = self.batches
        tp = self.tp
        while self.batch_index < len(batches):
            batch = batches[self.batch_index]
            attrs = batch.attributes
            epoch = batch.partition_leader_epoch
            if attrs & _ATTR_CONTROL:
                if self._aborted is not None:
                    self._handle_control(batch)
                self.batch_index += 1
                self.last_epoch = epoch if epoch >= 0 else None
                continue
            if self._aborted is not None and attrs & _ATTR_TRANSACTIONAL and self._is_aborted(batch):
                self.batch_index += 1
                self.last_epoch = epoch if epoch >= 0 else None
                continue
            if batch.last_offset < position:
                self.batch_index += 1
                continue
            leader_epoch = epoch if epoch >= 0 else None
            v2 = isinstance(batch, RecordBatch)
            if v2:
                ts_type = _TS_TYPES[1 if attrs & _ATTR_TIMESTAMP_TYPE else 0]
            else:
                ts_type = batch.timestamp_type
            plain = key_deserializer is None and value_deserializer is None
            try:
                if plain and v2:
                    # Records built by the decoder itself, as Records (with the C extension:
                    # one allocation each, untracked by the garbage collector).
                    raw = batch.records_as((Record, tp.topic, tp.partition, ts_type, leader_epoch))  # type: ignore[union-attr]
                else:
                    raw = batch.records()
            except CorruptRecordError as exc:
                raise CorruptRecordError(
                    f"{tp.topic}-{tp.partition}: cannot decode batch at offset "
                    f"{max(position, _base_offset(batch))}: {exc}"
                ) from None
            self.batch_index += 1
            self.last_epoch = leader_epoch
            if raw and raw[0].offset < position:
                raw = [r for r in raw if r.offset >= position]
            if not raw:
                continue
            if plain and v2:
                return raw
            topic = tp.topic
            partition = tp.partition
            if plain:
                # Headers become tuples (the empty one is shared): one tracked object
                # less per record makes garbage collections cheaper.
                return as_records(raw, Record, topic, partition, ts_type, leader_epoch)
            if contextual:
                return self._deserialize_in_context(
                    raw, ts_type, leader_epoch, key_deserializer, value_deserializer
                )
            return self._deserialize(raw, ts_type, leader_epoch, key_deserializer, value_deserializer)
        return _EMPTY

    def _deserialize(
        self,
        raw: list[Any],
        ts_type: TimestampType,
        leader_epoch: int | None,
        kd: Deserializer | None,
        vd: Deserializer | None,
    ) -> list[Record]:
        topic = self.tp.topic
        partition = self.tp.partition
        out: list[Record] = []
        for r in raw:
            try:
                key = r.key if kd is None else kd(r.key)
                value = r.value if vd is None else vd(r.value)
            except Exception as exc:
                self._fail_at(r.offset, exc)
                break
            headers = tuple(r.headers) if r.headers else ()
            out.append(
                _new(
                    Record,
                    (topic, partition, r.offset, key, value, headers, r.timestamp, ts_type, leader_epoch),
                )
            )
        return out

    def _fail_at(self, offset: int, exc: Exception) -> None:
        """Hand out what precedes the failing record, then raise with the position at it;
        everything after it is dropped (refetched after a seek)."""
        topic = self.tp.topic
        partition = self.tp.partition
        self.error = RecordDeserializationError(
            f"{topic}-{partition}: cannot deserialize the record at offset {offset}: {exc!r}. "
            "The position stays at this record and every later call raises this error; "
            f"to skip the record: consumer.seek(TopicPartition({topic!r}, {partition}), {offset + 1})",
            topic,
            partition,
            offset,
        )
        self.error.__cause__ = exc
        del self.batches[self.batch_index :]
        self.next_fetch_offset = offset

    def _deserialize_in_context(
        self,
        raw: list[Any],
        ts_type: TimestampType,
        leader_epoch: int | None,
        kc: ContextCall | None,
        vc: ContextCall | None,
    ) -> list[Record]:
        """``_deserialize`` with deserializers that see the topic, the field and the headers."""
        topic = self.tp.topic
        partition = self.tp.partition
        key_field, value_field = MessageField.KEY, MessageField.VALUE
        out: list[Record] = []
        for r in raw:
            headers = tuple(r.headers) if r.headers else ()
            pending: tuple[ContextCall, Any, SerializationContext] | None = None
            try:
                key = r.key
                if kc is not None:
                    ctx = SerializationContext(topic, key_field, headers)
                    pending = (kc, key, ctx)
                    key = kc.sync(key, ctx)
                value = r.value
                if vc is not None:
                    ctx = SerializationContext(topic, value_field, headers)
                    pending = (vc, value, ctx)
                    value = vc.sync(value, ctx)
            except Exception as exc:
                if isinstance(exc, SerializerNotReadyError) and pending is not None and pending[0].resolve:
                    # Not a failure: the batch stays current and is decoded again from this
                    # record once the consumer has awaited the deserializer's async path.
                    self.unresolved = (*pending, r.offset)
                    self.batch_index -= 1
                    break
                self._fail_at(r.offset, exc)
                break
            out.append(
                _new(
                    Record,
                    (topic, partition, r.offset, key, value, headers, r.timestamp, ts_type, leader_epoch),
                )
            )
        return out

    # -- read_committed -------------------------------------------------------------
    def _advance_aborted(self, last_offset: int) -> None:
        # Every aborted transaction that started at or before this batch is active now.
        aborted = self._aborted
        assert aborted is not None
        i = self._aborted_index
        while i < len(aborted) and aborted[i][0] <= last_offset:
            self._aborted_pids.add(aborted[i][1])
            i += 1
        self._aborted_index = i

    def _is_aborted(self, batch: AnyBatch) -> bool:
        self._advance_aborted(batch.last_offset)
        return batch.producer_id in self._aborted_pids

    def _handle_control(self, batch: AnyBatch) -> None:
        # An ABORT marker ends the aborted transaction of its producer.
        if not isinstance(batch, RecordBatch):
            return
        self._advance_aborted(batch.last_offset)
        try:
            records = batch.records()
        except CorruptRecordError:
            return
        for r in records:
            key = r.key
            if key is not None and len(key) >= 4:
                _, kind = _CONTROL_KEY.unpack_from(key)
                if kind == ControlRecordType.ABORT:
                    self._aborted_pids.discard(batch.producer_id)


def _base_offset(batch: AnyBatch) -> int:
    try:
        return batch.base_offset
    except KafkaError:
        return batch.last_offset


def parse_partition(
    tp: TopicPartition,
    fetch_offset: int,
    records: bytes | bytearray | memoryview | None,
    *,
    check_crcs: bool = True,
    aborted_transactions: Sequence[tuple[int, int]] | None = None,
    read_committed: bool = False,
    high_watermark: int = -1,
    last_stable_offset: int = -1,
    log_start_offset: int = -1,
) -> CompletedFetch:
    """Frame a fetched records blob into a :class:`CompletedFetch` (no record decoding).

    ``aborted_transactions`` holds ``(producer_id, first_offset)`` pairs from the
    response; it is only used with ``read_committed``.
    """
    view = as_byte_view(records if records is not None else b"")
    n = len(view)
    batches: list[AnyBatch] = []
    next_offset = fetch_offset
    error: KafkaError | None = None
    lso = last_stable_offset if read_committed else -1
    framed = False  # whether any complete batch was seen
    try:
        for batch in parse_batches(view, 0, check_crcs):
            framed = True
            if batch.last_offset < next_offset:
                continue  # already consumed (e.g. a compressed batch starting earlier)
            if lso >= 0 and _base_offset(batch) >= lso:
                break  # not stable yet: never hand out data at/after the LSO
            if check_crcs:
                batch.validate_crc()
            batches.append(batch)
            next_offset = batch.next_offset
    except CorruptRecordError as exc:
        error = _corrupt(tp, next_offset, str(exc))
    # A partial trailing batch is normal when a response is cut at max bytes.
    if not framed and error is None and n >= _LOG_OVERHEAD:
        # Only a partial batch: cannot happen with Fetch v4+ brokers (KIP-74 returns
        # the first batch whole), so the response is broken.
        error = _corrupt(tp, fetch_offset, f"response holds only an incomplete batch ({n} bytes)")
    aborted: list[tuple[int, int]] | None = None
    if read_committed:
        aborted = [(first, pid) for pid, first in (aborted_transactions or ())]
    return CompletedFetch(
        tp,
        fetch_offset,
        batches,
        next_offset,
        n,
        error=error,
        aborted=aborted,
        high_watermark=high_watermark,
        last_stable_offset=last_stable_offset,
        log_start_offset=log_start_offset,
    )


def _corrupt(tp: TopicPartition, offset: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(f"{tp.topic}-{tp.partition}: corrupt record batch at offset {offset}: {what}")
