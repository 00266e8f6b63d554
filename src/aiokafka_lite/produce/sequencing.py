"""Idempotent-producer state: producer id/epoch and per-partition sequence numbers.

Pure bookkeeping (no I/O), consulted by the accumulator at drain time and by the
sender when responses arrive. The rules follow the Java client and KIP-360:

* A batch gets its base sequence when it is first drained, never at append time, and
  keeps it across retries (so a retry the broker already wrote is recognised as a
  duplicate). Sequences wrap at 2**31.
* Ordering with up to 5 requests in flight relies on the broker rejecting gaps: a
  batch arriving after a failed one gets OUT_OF_ORDER_SEQUENCE_NUMBER and is retried.
  Retried batches go out strictly in sequence order (one at a time until caught up).
  A broker holding no state for the producer accepts any first sequence, so until a
  partition's first batch (per producer id/epoch) is acknowledged, only that one batch
  is in flight; otherwise a failed first batch would leave a gap the broker accepted
  (a stricter rule than the Java client's, which can lose the first batch that way).
* When a partition's sequence state is broken (UNKNOWN_PRODUCER_ID: the broker lost
  our state, e.g. retention deleted it; OUT_OF_ORDER with no explanation; a batch that
  failed after a sequence was given to it), the producer *bumps its epoch locally*
  (KIP-360: an idempotent producer may) and renumbers that partition's unfinished
  batches from 0 under the new epoch. Other partitions switch to the new epoch (from
  sequence 0) once their in-flight batches are done. An exhausted epoch (32767) makes
  the producer fetch a new producer id instead.
* A batch that expired after being sent leaves the partition's state *unresolved*:
  the broker may or may not have written it. New batches wait until every in-flight
  batch of the partition has finished; if the acknowledged sequences then line up the
  state is resolved, otherwise the epoch is bumped.

Transactions (later) subclass :class:`IdempotenceManager`: ``is_send_allowed`` is the
"partition added to the transaction" gate and ``on_batch_created`` the hook that
registers a partition before its first send.
"""

from __future__ import annotations

import bisect
from typing import Final, NamedTuple

from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce.batch import ProducerBatch

__all__ = ["NO_PRODUCER", "IdempotenceManager", "ProducerIdAndEpoch", "increment_sequence"]

_MAX_EPOCH: Final = 32767
_SEQ_MASK: Final = 0x7FFFFFFF

# Error codes with sequence-specific handling.
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
DUPLICATE_SEQUENCE_NUMBER: Final = 46
UNKNOWN_PRODUCER_ID: Final = 59


def increment_sequence(sequence: int, increment: int) -> int:
    """Next sequence after ``increment`` records (sequences wrap from 2**31-1 to 0)."""
    return (sequence + increment) & _SEQ_MASK


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int = -1
    epoch: int = -1

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0


NO_PRODUCER: Final = ProducerIdAndEpoch()


class _PartitionState:
    __slots__ = ("in_flight", "last_acked_offset", "last_acked_sequence", "next_sequence", "producer")

    def __init__(self, producer: ProducerIdAndEpoch) -> None:
        #: The producer id/epoch these sequences belong to.
        self.producer = producer
        self.next_sequence = 0
        self.last_acked_sequence = -1
        self.last_acked_offset = -1
        #: Batches holding a sequence and not finished (sent, or queued for retry), by sequence.
        self.in_flight: list[ProducerBatch] = []

    def reset(self, producer: ProducerIdAndEpoch) -> None:
        self.producer = producer
        self.next_sequence = 0
        self.last_acked_sequence = -1
        self.last_acked_offset = -1


class IdempotenceManager:
    """Producer id/epoch holder and per-partition sequence state (see module doc)."""

    def __init__(self) -> None:
        self.producer: ProducerIdAndEpoch = NO_PRODUCER
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        #: Partition -> sequence expected after the batch whose fate is unknown.
        self._unresolved: dict[TopicPartition, int] = {}
        #: Partitions whose unfinished batches must be renumbered at the next bump.
        self._to_rewrite: set[TopicPartition] = set()
        self._bump_required = False
        #: Set on errors no retry can fix (e.g. not authorized to be idempotent).
        self.fatal_error: BaseException | None = None
        #: Number of local epoch bumps and producer id resets (observability, tests).
        self.epoch_bumps = 0
        self.producer_id_resets = 0

    # -- producer id ----------------------------------------------------------------------

    @property
    def has_producer_id(self) -> bool:
        return self.producer.producer_id >= 0

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """Result of InitProducerId."""
        self.producer = ProducerIdAndEpoch(producer_id, epoch)
        if self._to_rewrite and not self._bump_required:
            self._rewrite_pending()

    def _state(self, tp: TopicPartition) -> _PartitionState:
        st = self._partitions.get(tp)
        if st is None:
            st = self._partitions[tp] = _PartitionState(self.producer)
        return st

    # -- hooks for transactions -------------------------------------------------------------

    def is_send_allowed(self, tp: TopicPartition) -> bool:
        """Whether batches of ``tp`` may be sent now (transactions: partition added)."""
        return True

    def on_batch_created(self, batch: ProducerBatch) -> None:
        """A new batch was opened for ``batch.tp`` (transactions: register the partition)."""

    # -- drain time ---------------------------------------------------------------------------

    def should_stop_drain(self, batch: ProducerBatch) -> bool:
        """True if ``batch`` (first of its partition's queue) must not be sent yet."""
        tp = batch.tp
        if not self.is_send_allowed(tp) or not self.has_producer_id or self.fatal_error is not None:
            return True
        st = self._partitions.get(tp)
        if not batch.has_sequence:
            if st is not None and st.in_flight:
                if st.producer != self.producer:
                    # Old-epoch batches still in flight: a new-epoch batch at sequence 0
                    # could overtake them and make them fail as out of order.
                    return True
                if st.last_acked_sequence < 0:
                    # Nothing acknowledged yet under this producer id/epoch: a broker with
                    # no state for us accepts *any* first sequence, so if this partition's
                    # first batch failed, a pipelined successor would be written and the
                    # first could never be (a silent gap). One at a time until the first ack.
                    return True
            # Earlier batches' fate is unknown: wait until everything in flight finished.
            return tp in self._unresolved
        # A retry goes only when it is the lowest unfinished sequence: ordering.
        return (
            st is not None
            and bool(st.in_flight)
            and st.in_flight[0] is not batch
            and (st.in_flight[0].base_sequence != batch.base_sequence)
        )

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Give a never-sent batch its producer id, epoch and base sequence."""
        st = self._state(batch.tp)
        if st.producer != self.producer and not st.in_flight:
            st.reset(self.producer)  # epoch was bumped (or id reset) since: restart at 0
        batch.set_producer_state(st.producer.producer_id, st.producer.epoch, st.next_sequence)
        st.next_sequence = increment_sequence(st.next_sequence, batch.count)
        self._insert(st, batch)

    @staticmethod
    def _insert(st: _PartitionState, batch: ProducerBatch) -> None:
        in_flight = st.in_flight
        if not in_flight or in_flight[-1].base_sequence < batch.base_sequence:
            in_flight.append(batch)
        else:
            keys = [b.base_sequence for b in in_flight]
            in_flight.insert(bisect.bisect_right(keys, batch.base_sequence), batch)

    def _remove(self, batch: ProducerBatch) -> _PartitionState | None:
        st = self._partitions.get(batch.tp)
        if st is not None:
            try:
                st.in_flight.remove(batch)
            except ValueError:
                pass
        return st

    def on_split(self, parent: ProducerBatch, children: list[ProducerBatch]) -> None:
        """A too-large batch was re-packed; its children carry its sequence range."""
        st = self._remove(parent)
        if st is not None:
            for child in children:
                if child.has_sequence:
                    self._insert(st, child)

    # -- responses ------------------------------------------------------------------------------

    def on_success(self, batch: ProducerBatch, base_offset: int) -> None:
        st = self._remove(batch)
        if st is None or not batch.has_sequence:
            return
        if (batch.producer_id, batch.producer_epoch) != st.producer:
            return  # acknowledged under an epoch this partition has moved on from
        last = batch.last_sequence
        if last > st.last_acked_sequence:
            st.last_acked_sequence = last
        if base_offset >= 0:
            st.last_acked_offset = max(st.last_acked_offset, base_offset + batch.count - 1)

    def is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        st = self._partitions.get(tp)
        last = st.last_acked_sequence if st is not None else -1
        return sequence == increment_sequence(last, 1) if last >= 0 else sequence == 0

    def can_retry(
        self, batch: ProducerBatch, error_code: int, log_start_offset: int, retriable: bool
    ) -> bool:
        """Sequence-aware retry decision for a failed partition response (the caller has
        already checked attempts and delivery timeout). May request an epoch bump."""
        tp = batch.tp
        if error_code == UNKNOWN_PRODUCER_ID:
            if log_start_offset == -1 or batch.sequence_reset:
                # No log start offset to reason with, or this batch was already renumbered
                # by the bump an earlier failure triggered: just retry it.
                return True
            self.request_epoch_bump(tp)
            return True
        if error_code == OUT_OF_ORDER_SEQUENCE_NUMBER:
            unresolved = self._unresolved.get(tp)
            if unresolved is None and (
                batch.sequence_reset or not self.is_next_sequence(tp, batch.base_sequence)
            ):
                # Not the next expected batch: an earlier one failed; it goes first, then us.
                return True
            if unresolved is None or unresolved == batch.base_sequence:
                # A real gap in the sequence: renumber under a new epoch.
                self.request_epoch_bump(tp)
            return True
        return retriable

    def on_failed(self, batch: ProducerBatch, error_code: int, adjust_sequences: bool) -> None:
        """A batch failed for good. Its sequence range becomes a gap the broker will
        reject later batches for, so (if it ever had one) the partition is renumbered."""
        st = self._remove(batch)
        if st is None or not batch.has_sequence:
            return
        if error_code in (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID) or adjust_sequences:
            self.request_epoch_bump(batch.tp)

    def mark_unresolved(self, batch: ProducerBatch) -> None:
        """``batch`` expired after it was sent: the broker may or may not have it."""
        st = self._remove(batch)
        if st is None or not batch.has_sequence:
            return
        nxt = increment_sequence(batch.last_sequence, 1)
        prev = self._unresolved.get(batch.tp)
        self._unresolved[batch.tp] = nxt if prev is None else max(prev, nxt)

    def has_unresolved(self, tp: TopicPartition) -> bool:
        return tp in self._unresolved

    def in_flight_count(self, tp: TopicPartition) -> int:
        st = self._partitions.get(tp)
        return len(st.in_flight) if st is not None else 0

    def next_sequence(self, tp: TopicPartition) -> int:
        st = self._partitions.get(tp)
        return st.next_sequence if st is not None else 0

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        st = self._partitions.get(tp)
        return st.last_acked_sequence if st is not None else -1

    # -- sender loop ------------------------------------------------------------------------------

    def maybe_resolve_sequences(self) -> None:
        """Settle unresolved partitions whose in-flight batches have all finished."""
        for tp in list(self._unresolved):
            st = self._partitions.get(tp)
            if st is not None and st.in_flight:
                continue
            del self._unresolved[tp]
            if st is not None and not self.is_next_sequence(tp, st.next_sequence):
                self.request_epoch_bump(tp)  # the expired batches were never written

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        self._to_rewrite.add(tp)
        self._bump_required = True

    @property
    def bump_required(self) -> bool:
        return self._bump_required

    @property
    def needs_attention(self) -> bool:
        """An epoch bump or unresolved sequences wait for the sender's next pass."""
        return self._bump_required or bool(self._unresolved) or not self.has_producer_id

    def maybe_bump_epoch(self) -> bool:
        """Apply a requested bump. Returns True if the producer id must be re-fetched
        (epoch exhausted; ``has_producer_id`` is then False until it is)."""
        if not self._bump_required:
            return False
        self._bump_required = False
        pid, epoch = self.producer
        if pid < 0:
            return True  # InitProducerId pending; rewrite once it arrives
        if epoch >= _MAX_EPOCH:
            self.producer = NO_PRODUCER
            self.producer_id_resets += 1
            return True
        self.producer = ProducerIdAndEpoch(pid, epoch + 1)
        self.epoch_bumps += 1
        self._rewrite_pending()
        return False

    def _rewrite_pending(self) -> None:
        producer = self.producer
        for tp in self._to_rewrite:
            st = self._state(tp)
            seq = 0
            for batch in st.in_flight:
                batch.set_producer_state(producer.producer_id, producer.epoch, seq, reset=True)
                seq = increment_sequence(seq, batch.count)
            st.reset(producer)
            st.next_sequence = seq
            self._unresolved.pop(tp, None)
        self._to_rewrite.clear()
