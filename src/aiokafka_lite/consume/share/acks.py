"""Acknowledgement tracking for a share consumer, sans-I/O.

Per partition, the tracker follows every offset the broker acquired for this member:

    acquired (buffered) --deliver--> delivered --acknowledge--> pending --take--> sending
        |                                                                           |
        +--(no record at that offset: GAP) --> pending         completed(error) <--+

* ``acquire`` registers the ``AcquiredRecords`` ranges of a ShareFetch response, with
  their delivery counts and the time their acquisition lock runs out (the response's
  ``AcquisitionLockTimeoutMs`` after the request was sent: the broker starts the clock
  when it acquires, so counting from the send errs on the safe side).
* Offsets acquired without a record (the batch holds a transaction marker, or the
  record was compacted away) are acknowledged as ``GAP``, as the Java client does:
  the broker needs every acquired offset back.
* ``deliver`` marks records handed to the application; ``acknowledge`` records its
  decision (at most once per delivery); ``accept_delivered`` is implicit mode's
  "everything returned by the last poll is accepted".
* ``RENEW`` (KIP-1222) is pending like a decision, but the offset stays acquired: once
  the broker confirms, ``completed`` moves its lock deadline (the answer's
  ``AcquisitionLockTimeoutMs`` from the send) and the consumer hands the record out again;
  a failed renewal drops the offset (its lock is gone).
* ``take`` turns a partition's pending decisions into ``AcknowledgementBatch`` tuples
  (``acknowledgement_batches``) and marks them in flight; ``completed`` applies the
  broker's per-partition answer and reports which of the offsets' locks had expired,
  because then an ``INVALID_RECORD_STATE`` answer means "too late", not a bug.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.consume.share.record import AcknowledgeType
from aiokafka_lite.core.errors import IllegalStateError, InvalidRecordStateError, KafkaError
from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "AckBatch",
    "AckResult",
    "AckTracker",
    "AcquisitionLockTimeoutError",
    "PartitionAcks",
    "acknowledgement_batches",
]

_GAP: Final = AcknowledgeType.GAP
_RENEW: Final = AcknowledgeType.RENEW


class AcquisitionLockTimeoutError(InvalidRecordStateError):
    """Acknowledged too late: the records' acquisition lock had expired, so the broker
    had made them available again (and maybe delivered them to another member).

    An ``INVALID_RECORD_STATE`` answer for records whose lock ran out before the
    acknowledgement was sent; ``offsets`` lists them.
    """

    def __init__(self, message: str | None = None, offsets: Sequence[int] = ()) -> None:
        self.offsets = tuple(offsets)
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message, self.offsets))


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One ``AcknowledgementBatch``: a contiguous offset range and either one type for
    the whole range or one type per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


def acknowledgement_batches(acks: Mapping[int, AcknowledgeType]) -> list[AckBatch]:
    """Batches for a partition's acknowledgements: one per run of consecutive offsets,
    carrying a single type when the whole run shares it (the compact form the protocol
    allows) and the per-offset types otherwise."""
    out: list[AckBatch] = []
    run: list[int] = []  # types of the current run
    first = prev = -2
    for offset in sorted(acks):
        if offset != prev + 1 and run:
            out.append(_batch(first, prev, run))
            run = []
        if not run:
            first = offset
        run.append(int(acks[offset]))
        prev = offset
    if run:
        out.append(_batch(first, prev, run))
    return out


def _batch(first: int, last: int, types: list[int]) -> AckBatch:
    if all(t == types[0] for t in types):
        return AckBatch(first, last, (types[0],))
    return AckBatch(first, last, tuple(types))


@dataclass(frozen=True, slots=True)
class AckResult:
    """The broker's answer for one partition's acknowledgements."""

    tp: TopicPartition
    offsets: Mapping[int, AcknowledgeType]
    error: KafkaError | None


@dataclass(eq=False, slots=True)
class PartitionAcks:
    """One partition's acquired offsets and acknowledgement decisions."""

    tp: TopicPartition
    topic_id: uuid.UUID
    #: offset -> delivery count, for every acquired offset not yet acknowledged.
    acquired: dict[int, int] = field(default_factory=dict)
    #: offset -> monotonic ms at which its acquisition lock runs out.
    deadline: dict[int, float] = field(default_factory=dict)
    #: Offsets handed to the application and not acknowledged yet.
    delivered: set[int] = field(default_factory=set)
    #: Decisions waiting to be sent.
    pending: dict[int, AcknowledgeType] = field(default_factory=dict)
    #: Decisions sent, answer outstanding (with each offset's lock deadline at sending).
    sending: dict[int, AcknowledgeType] = field(default_factory=dict)
    sending_deadline: dict[int, float] = field(default_factory=dict)

    @property
    def idle(self) -> bool:
        return not (self.acquired or self.pending or self.sending)


class AckTracker:
    """Acquired offsets and acknowledgements of every partition (see module docstring)."""

    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, PartitionAcks] = {}

    def _get(self, tp: TopicPartition) -> PartitionAcks:
        part = self.partitions.get(tp)
        if part is None:
            raise IllegalStateError(f"{tp.topic}-{tp.partition}: no records acquired from this partition")
        return part

    # ------------------------------------------------------------------ from the broker

    def acquire(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        ranges: Iterable[tuple[int, int, int]],
        lock_deadline: float,
    ) -> dict[int, int]:
        """Register ``(first_offset, last_offset, delivery_count)`` ranges; returns the
        newly acquired offsets with their delivery counts."""
        part = self.partitions.get(tp)
        if part is None or part.topic_id != topic_id:
            part = self.partitions[tp] = PartitionAcks(tp, topic_id)
        new: dict[int, int] = {}
        for first, last, count in ranges:
            for offset in range(first, last + 1):
                new[offset] = count
        part.acquired.update(new)
        for offset in new:
            part.deadline[offset] = lock_deadline
            # A record acquired again (lock expired, we had not acknowledged it in
            # time) starts over as undelivered.
            part.delivered.discard(offset)
            part.pending.pop(offset, None)
        return new

    def gap(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Acquired offsets without a record: acknowledged as GAP with the next batch."""
        part = self._get(tp)
        for offset in offsets:
            if offset in part.acquired:
                part.pending[offset] = _GAP
                del part.acquired[offset]

    # ------------------------------------------------------------------ from the application

    def deliver(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        part = self._get(tp)
        part.delivered.update(o for o in offsets if o in part.acquired)

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> None:
        """The application's decision for a delivered record (or RENEW: keep it, locked)."""
        if kind == _GAP or not isinstance(kind, AcknowledgeType):
            raise ValueError(f"acknowledge type must be ACCEPT, RELEASE, REJECT or RENEW, got {kind!r}")
        part = self.partitions.get(tp)
        if part is None or offset not in part.delivered:
            if part is not None and (offset in part.pending or offset in part.sending):
                raise IllegalStateError(f"{tp.topic}-{tp.partition} offset {offset}: already acknowledged")
            raise IllegalStateError(
                f"{tp.topic}-{tp.partition} offset {offset}: not a record this consumer delivered "
                "and still holds (records can be acknowledged once, after poll returned them)"
            )
        part.delivered.discard(offset)
        if kind != _RENEW:  # a renewed record stays acquired, to be delivered again
            del part.acquired[offset]
        part.pending[offset] = kind

    def has_renewals(self, tp: TopicPartition) -> bool:
        """Pending RENEWs: they go in a ShareAcknowledge (IsRenewAck), never on a ShareFetch
        that fetches (Kafka refuses those)."""
        part = self.partitions.get(tp)
        return part is not None and _RENEW in part.pending.values()

    def accept_delivered(self) -> int:
        """Implicit mode: accept every delivered, unacknowledged record. Returns how many."""
        n = 0
        for part in self.partitions.values():
            for offset in part.delivered:
                del part.acquired[offset]
                part.pending[offset] = AcknowledgeType.ACCEPT
            n += len(part.delivered)
            part.delivered.clear()
        return n

    def unacknowledged(self) -> int:
        """Delivered records still waiting for the application's decision."""
        return sum(len(p.delivered) for p in self.partitions.values())

    def release_undelivered(self, tps: Iterable[TopicPartition] | None = None) -> int:
        """Give back acquired records the application never saw (close, or records
        buffered for a partition whose fetch failed). Returns how many."""
        n = 0
        for tp in list(self.partitions) if tps is None else tps:
            part = self.partitions.get(tp)
            if part is None:
                continue
            for offset in [o for o in part.acquired if o not in part.delivered]:
                if offset in part.sending:
                    continue  # a renewal in flight: its answer drops or redelivers it
                del part.acquired[offset]
                part.pending[offset] = AcknowledgeType.RELEASE
                n += 1
        return n

    def forget(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Drop acquired offsets without acknowledging them (their records were thrown
        away; the broker's lock will expire)."""
        part = self.partitions.get(tp)
        if part is None:
            return
        for offset in offsets:
            part.acquired.pop(offset, None)
            part.deadline.pop(offset, None)
            part.delivered.discard(offset)

    # ------------------------------------------------------------------ sending

    def with_pending(self) -> list[TopicPartition]:
        return [tp for tp, p in self.partitions.items() if p.pending]

    def take(self, tp: TopicPartition) -> list[AckBatch]:
        """The partition's pending decisions as batches, now in flight (one exchange at a
        time per partition: nothing is taken while an answer is outstanding)."""
        part = self.partitions.get(tp)
        if part is None or not part.pending or part.sending:
            return []
        part.sending, part.pending = part.pending, {}
        part.sending_deadline = {
            o: part.deadline.get(o, float("inf")) if kind == _RENEW else part.deadline.pop(o, float("inf"))
            for o, kind in part.sending.items()
        }
        return acknowledgement_batches(part.sending)

    def completed(
        self, tp: TopicPartition, error: KafkaError | None, sent_at: float, lock_ms: int | None = None
    ) -> AckResult | None:
        """The broker answered the in-flight acknowledgements of ``tp`` (``error`` None:
        applied). ``sent_at`` is when the request left: an ``INVALID_RECORD_STATE``
        for offsets whose lock had run out by then becomes ``AcquisitionLockTimeoutError``.
        Renewed offsets get the lock deadline ``sent_at + lock_ms`` (the answer's
        ``AcquisitionLockTimeoutMs``), or are dropped when the renewal failed."""
        part = self.partitions.get(tp)
        if part is None or not part.sending:
            return None
        offsets = part.sending
        for o, kind in offsets.items():
            if kind != _RENEW or o not in part.acquired or o in part.pending:
                continue  # decided meanwhile (close released it): that decision stands
            if error is None:
                if lock_ms is not None and lock_ms > 0:
                    part.deadline[o] = sent_at + lock_ms
            else:
                del part.acquired[o]
                part.deadline.pop(o, None)
        if isinstance(error, InvalidRecordStateError) and not isinstance(error, AcquisitionLockTimeoutError):
            expired = sorted(
                o for o, d in part.sending_deadline.items() if d <= sent_at and offsets[o] != _GAP
            )
            if expired:
                error = AcquisitionLockTimeoutError(
                    f"{tp.topic}-{tp.partition}: acquisition lock of offsets {_ranges(expired)} had "
                    f"expired when they were acknowledged ({error.message or 'INVALID_RECORD_STATE'})",
                    expired,
                )
        part.sending = {}
        part.sending_deadline = {}
        if part.idle:
            del self.partitions[tp]
        return AckResult(tp, offsets, error)

    def expired(self, now: float) -> dict[TopicPartition, list[int]]:
        """Delivered-or-buffered offsets whose acquisition lock has run out by ``now``."""
        out: dict[TopicPartition, list[int]] = {}
        for tp, part in self.partitions.items():
            late = sorted(o for o in part.acquired if part.deadline.get(o, float("inf")) <= now)
            if late:
                out[tp] = late
        return out


def _ranges(offsets: Sequence[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"`` (messages stay short for big batches)."""
    parts: list[str] = []
    start = prev = offsets[0]
    for o in [*offsets[1:], None]:
        if o is not None and o == prev + 1:
            prev = o
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if o is not None:
            start = prev = o
    return ", ".join(parts)
