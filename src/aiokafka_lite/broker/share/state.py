"""Share-partition state (KIP-932): which records of one partition a share group has
handed out, to whom, how often, and until when. Pure: time comes in as arguments.

Records below ``start_offset`` are done (acknowledged or archived). Records from
``start_offset`` to ``next_offset`` are *in flight*, each AVAILABLE, ACQUIRED (by a member,
under an acquisition lock), ACKNOWLEDGED or ARCHIVED. Records from ``next_offset`` on
were never delivered.

``version`` counts the changes worth persisting, so the broker journals a partition's
state only when it moved.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka_lite.wire.records import read_batch_headers

if TYPE_CHECKING:
    from aiokafka_lite.broker.log import PartitionLog

__all__ = [
    "ACCEPT",
    "GAP",
    "REJECT",
    "RELEASE",
    "RENEW",
    "AcquiredRange",
    "InvalidAcknowledgement",
    "RecordState",
    "SharePartitionState",
    "aborted_ranges",
]

GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4  # RENEW: KIP-1222 (ShareFetch/ShareAcknowledge v2)


class RecordState(enum.Enum):
    AVAILABLE = "available"
    ACQUIRED = "acquired"
    ACKNOWLEDGED = "acknowledged"
    ARCHIVED = "archived"


class InvalidAcknowledgement(Exception):
    """An acknowledgement naming records the member does not hold (INVALID_RECORD_STATE),
    or with an unknown type / malformed range (INVALID_REQUEST when ``bad_request``)."""

    def __init__(self, message: str, *, bad_request: bool = False) -> None:
        super().__init__(message)
        self.bad_request = bad_request


@dataclass(slots=True)
class _InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass
class SharePartitionState:
    start_offset: int
    next_offset: int = -1  # -1: set to start_offset
    in_flight: dict[int, _InFlight] = field(default_factory=dict)
    version: int = 1  # bumped by every change a snapshot would show
    # Indexes, so that acquiring and expiring do not scan the in-flight window (up to
    # share.partition.max.record.locks records) on every ShareFetch: the AVAILABLE
    # offsets, and a time no acquisition lock runs out before (maybe earlier than the
    # true earliest: then one scan finds nothing and moves it on).
    _available: set[int] = field(default_factory=set, repr=False)
    _no_expiry_before: float = field(default=float("inf"), repr=False)

    def __post_init__(self) -> None:
        if self.next_offset < self.start_offset:
            self.next_offset = self.start_offset
        self._available = {o for o, r in self.in_flight.items() if r.state is RecordState.AVAILABLE}

    # -- persistence ------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """JSON-able state; acquired records are saved as available (locks do not survive a
        restart), with their delivery counts. Runs of consecutive offsets in the same state
        and count are saved as one ``[first, last, state, count]``."""
        runs: list[list[Any]] = []
        for o, r in sorted(self.in_flight.items()):
            state = (RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state).value
            if runs and runs[-1][1] == o - 1 and runs[-1][2] == state and runs[-1][3] == r.delivery_count:
                runs[-1][1] = o
            else:
                runs.append([o, o, state, r.delivery_count])
        return {"start": self.start_offset, "next": self.next_offset, "runs": runs}

    @classmethod
    def from_snapshot(cls, snap: dict[str, Any]) -> SharePartitionState:
        sp = cls(start_offset=int(snap["start"]), next_offset=int(snap["next"]))
        for first, last, state, count in snap.get("runs", ()):
            for o in range(int(first), int(last) + 1):
                sp.in_flight[o] = _InFlight(RecordState(state), int(count))
        for o, state, count in snap.get("records", ()):  # the one-entry-per-record form of 0.x
            sp.in_flight[int(o)] = _InFlight(RecordState(state), int(count))
        sp._available = {o for o, r in sp.in_flight.items() if r.state is RecordState.AVAILABLE}
        return sp

    # -- queries ------------------------------------------------------------------
    def state_of(self, offset: int) -> RecordState | None:
        """The state of an in-flight record; None below the start (done) or never delivered."""
        rec = self.in_flight.get(offset)
        return rec.state if rec is not None else None

    def delivery_count(self, offset: int) -> int:
        rec = self.in_flight.get(offset)
        return rec.delivery_count if rec is not None else 0

    def acquired_count(self) -> int:
        return sum(1 for r in self.in_flight.values() if r.state is RecordState.ACQUIRED)

    # -- transitions ---------------------------------------------------------------
    def skip_to(self, log_start_offset: int) -> None:
        """Records deleted from the log (retention, DeleteRecords) are gone for the group too."""
        if log_start_offset > self.start_offset:
            for o in range(self.start_offset, min(log_start_offset, self.next_offset)):
                self.in_flight.pop(o, None)
                self._available.discard(o)
            self.start_offset = log_start_offset
            self.next_offset = max(self.next_offset, log_start_offset)
            self.version += 1

    def expire_locks(self, now_ms: float, delivery_limit: int) -> None:
        """Acquired records whose lock ran out go back (or are archived at the delivery limit)."""
        if now_ms < self._no_expiry_before:
            return
        earliest = float("inf")
        for o, rec in self.in_flight.items():
            if rec.state is RecordState.ACQUIRED:
                if rec.lock_deadline_ms <= now_ms:
                    self._release(o, rec, delivery_limit)
                    self.version += 1
                else:
                    earliest = min(earliest, rec.lock_deadline_ms)
        self._no_expiry_before = earliest
        self._advance()

    def release_member(self, member_id: str, delivery_limit: int) -> None:
        """The member is gone (connection closed, session ended): its records go back."""
        for o, rec in self.in_flight.items():
            if rec.state is RecordState.ACQUIRED and rec.member_id == member_id:
                self._release(o, rec, delivery_limit)
                self.version += 1
        self._advance()

    def acquire(
        self,
        member_id: str,
        *,
        high_watermark: int,
        max_records: int,
        now_ms: float,
        lock_ms: int,
        max_in_flight: int,
        batch_end: int | None = None,
        aborted: Sequence[tuple[int, int]] = (),
    ) -> list[AcquiredRange]:
        """Acquires up to ``max_records`` records for ``member_id``: first available in-flight
        ones (redeliveries), then new ones below ``high_watermark`` (the last stable offset
        for read_committed) while fewer than ``max_in_flight`` records are in flight.
        ``batch_end`` (exclusive) lets new records be acquired up to the end of the last
        batch touched (batch-optimized acquisition). New offsets inside an ``aborted``
        range (first, last inclusive: records of aborted transactions, for read_committed)
        are archived instead, never delivered, as Kafka does; they count in the
        ``max_records`` of the acquisition that reaches them."""
        taken: list[int] = []
        deadline = now_ms + lock_ms
        for o in sorted(self._available)[:max_records]:
            self._take(o, self.in_flight[o], member_id, deadline)
            taken.append(o)
        room = max_in_flight - (self.next_offset - self.start_offset)
        want = min(max_records - len(taken), room)
        if want > 0 and self.next_offset < high_watermark:
            end = min(high_watermark, self.next_offset + want)
            if batch_end is not None and taken == []:
                end = max(end, min(batch_end, high_watermark))
            for o in range(self.next_offset, end):
                if any(first <= o <= last for first, last in aborted):
                    self.in_flight[o] = _InFlight(RecordState.ARCHIVED)
                    continue
                rec = _InFlight(RecordState.AVAILABLE)
                self.in_flight[o] = rec
                self._take(o, rec, member_id, deadline)
                taken.append(o)
            self.next_offset = end
            self.version += 1
            self._advance()  # archived aborted records at the start are done
        if taken:
            self.version += 1
        return self._ranges(taken)

    def acknowledge(
        self,
        member_id: str,
        first: int,
        last: int,
        types: list[int],
        delivery_limit: int,
        *,
        now_ms: float = 0.0,
        lock_ms: int = 0,
    ) -> None:
        """Applies one acknowledgement batch: one type for the whole range, or one per offset.
        All or nothing: raises InvalidAcknowledgement and changes nothing if any record of
        the range from the start offset on (other than a GAP) is not acquired by ``member_id``.
        RENEW keeps a record acquired by the member and restarts its lock (``lock_ms`` from
        ``now_ms``), without counting a delivery."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            raise InvalidAcknowledgement(f"malformed acknowledgement batch {first}..{last}", bad_request=True)
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
            raise InvalidAcknowledgement(f"unknown acknowledge type in {types}", bad_request=True)
        if last >= self.next_offset and self.next_offset > self.start_offset:
            # Kafka: records past the acquired ones are a malformed request, while with
            # nothing in flight any acknowledgement names records in the wrong state.
            raise InvalidAcknowledgement(f"offset {last} is past the acquired records", bad_request=True)
        plan: list[tuple[int, int]] = []
        for i, o in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            if o < self.start_offset:
                continue  # already done (acknowledged, archived or deleted): Kafka skips it silently
            rec = self.in_flight.get(o)
            if kind == GAP:
                if rec is not None and rec.state is RecordState.ACQUIRED and rec.member_id != member_id:
                    raise InvalidAcknowledgement(f"offset {o} is acquired by another member")
            elif rec is None or rec.state is not RecordState.ACQUIRED or rec.member_id != member_id:
                raise InvalidAcknowledgement(f"offset {o} is not acquired by member {member_id}")
            plan.append((o, kind))
        for o, kind in plan:
            rec = self.in_flight.get(o)
            if rec is None:
                continue  # a gap below the start or beyond what was delivered
            if kind == RENEW:
                rec.lock_deadline_ms = now_ms + lock_ms  # later than before: the index still holds
                continue
            if kind == ACCEPT:
                rec.state, rec.member_id = RecordState.ACKNOWLEDGED, None
            elif kind in (REJECT, GAP):
                rec.state, rec.member_id = RecordState.ARCHIVED, None
                self._available.discard(o)  # a GAP may name a record nobody holds
            else:
                self._release(o, rec, delivery_limit)
        if any(kind != RENEW for _, kind in plan):
            self.version += 1
        self._advance()

    # -- internals -----------------------------------------------------------------
    def _take(self, offset: int, rec: _InFlight, member_id: str, deadline: float) -> None:
        rec.state = RecordState.ACQUIRED
        rec.member_id = member_id
        rec.delivery_count += 1
        rec.lock_deadline_ms = deadline
        self._available.discard(offset)
        self._no_expiry_before = min(self._no_expiry_before, deadline)

    def _release(self, offset: int, rec: _InFlight, delivery_limit: int) -> None:
        # A record delivered delivery_limit times is not offered again (KIP-932 poison records).
        rec.member_id = None
        if rec.delivery_count >= delivery_limit:
            rec.state = RecordState.ARCHIVED
        else:
            rec.state = RecordState.AVAILABLE
            self._available.add(offset)

    def _advance(self) -> None:
        while self.start_offset < self.next_offset:
            rec = self.in_flight.get(self.start_offset)
            if rec is None or rec.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self.in_flight[self.start_offset]
            self.start_offset += 1
            self.version += 1

    def _ranges(self, offsets: list[int]) -> list[AcquiredRange]:
        out: list[AcquiredRange] = []
        for o in sorted(offsets):
            count = self.in_flight[o].delivery_count
            if out and out[-1].last_offset == o - 1 and out[-1].delivery_count == count:
                out[-1] = AcquiredRange(out[-1].first_offset, o, count)
            else:
                out.append(AcquiredRange(o, o, count))
        return out


def aborted_ranges(plog: PartitionLog, start: int, end: int) -> list[tuple[int, int]]:
    """Offsets (first, last inclusive) in ``[start, end)`` holding records of aborted
    transactions: the batches of a producer between the first offset of one of its
    aborted transactions and that transaction's abort marker (the read_committed rule
    of Fetch). Reads batch headers only, and only when the log knows of an abort there."""
    aborted = plog.aborted_in_range(start, end)
    if not aborted:
        return []
    parts, _, _ = plog.read(start, 2**62, end, min_one=True)
    out: list[tuple[int, int]] = []
    for buf in parts:
        for batch in read_batch_headers(buf):
            if batch.producer_id < 0 or not batch.is_transactional or batch.is_control:
                continue
            base, last = batch.base_offset, batch.last_offset
            if any(
                a.producer_id == batch.producer_id and a.first_offset <= base <= a.last_offset
                for a in aborted
            ):
                out.append((max(base, start), min(last, end - 1)))
    return out
