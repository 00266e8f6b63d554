"""Idempotence bookkeeping: sequences, retry decisions and KIP-360 epoch bumps."""

from __future__ import annotations

from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce.batch import ProducerBatch
from aiokafka_lite.produce.sequencing import (
    NO_PRODUCER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_PRODUCER_ID,
    IdempotenceManager,
    ProducerIdAndEpoch,
    increment_sequence,
)
from aiokafka_lite.wire.records import BatchBuilder, decode_batches

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
NOT_LEADER = 6


def batch(n: int, tp: TopicPartition = TP) -> ProducerBatch:
    builder = BatchBuilder(max_batch_size=1 << 20)
    b = ProducerBatch(tp, builder, 1 << 20, 0, 0.0)
    for i in range(n):
        builder.append(i, None, b"x", ())
        b.timestamps.append(i)
    return b


def sent(idem: IdempotenceManager, n: int, tp: TopicPartition = TP) -> ProducerBatch:
    """A batch drained (sequence assigned, built) as the accumulator would (the drain
    gate itself is tested separately)."""
    b = batch(n, tp)
    idem.assign_sequence(b)
    b.close()
    b.attempts += 1
    return b


def manager(pid: int = 100, epoch: int = 0) -> IdempotenceManager:
    idem = IdempotenceManager()
    idem.set_producer_id_and_epoch(pid, epoch)
    return idem


def header(b: ProducerBatch) -> tuple[int, int, int]:
    assert b.buffer is not None
    (d,) = decode_batches(b.buffer)
    return d.producer_id, d.producer_epoch, d.base_sequence


def test_increment_sequence_wraps() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 5) == 3


def test_no_drain_without_producer_id() -> None:
    idem = IdempotenceManager()
    assert idem.producer == NO_PRODUCER and not idem.has_producer_id
    assert idem.should_stop_drain(batch(1))


def test_sequences_assigned_per_partition_at_drain() -> None:
    idem = manager(100, 2)
    a = sent(idem, 3)
    b = sent(idem, 4)
    c = sent(idem, 2, OTHER)
    assert (a.base_sequence, b.base_sequence, c.base_sequence) == (0, 3, 0)
    assert header(b) == (100, 2, 3)
    assert idem.next_sequence(TP) == 7
    idem.on_success(a, 50)
    idem.on_success(b, 53)
    assert idem.last_acked_sequence(TP) == 6
    assert idem.in_flight_count(TP) == 0


def test_retry_goes_only_when_lowest_in_flight() -> None:
    idem = manager()
    a = sent(idem, 1)
    b = sent(idem, 1)
    # b failed first (NOT_LEADER) and was queued for retry; a is still out.
    assert idem.can_retry(b, NOT_LEADER, -1, retriable=True)
    assert idem.should_stop_drain(b)
    idem.on_success(a, 0)
    assert not idem.should_stop_drain(b)


def test_new_batches_flow_while_retry_pending_order_by_broker() -> None:
    idem = manager()
    first = sent(idem, 1)
    idem.on_success(first, 0)
    sent(idem, 1)
    fresh = batch(1)
    assert not idem.should_stop_drain(fresh)  # up to 5 in flight; the broker keeps order


def test_first_batch_of_a_partition_goes_alone() -> None:
    # A broker with no state for this producer accepts any first sequence, so the
    # second batch must not overtake a first one that might fail.
    idem = manager()
    first = sent(idem, 3)
    second = batch(1)
    assert idem.should_stop_drain(second)
    assert not idem.should_stop_drain(batch(1, OTHER))  # other partitions unaffected
    idem.on_success(first, 0)
    assert not idem.should_stop_drain(second)


def test_out_of_order_for_non_next_batch_retries_without_bump() -> None:
    idem = manager()
    a = sent(idem, 2)
    b = sent(idem, 2)
    # a is lost/failed retriably; the broker rejects b as out of order.
    assert idem.can_retry(b, OUT_OF_ORDER_SEQUENCE_NUMBER, 0, retriable=False)
    assert not idem.bump_required
    assert idem.can_retry(a, NOT_LEADER, -1, retriable=True)


def test_out_of_order_for_next_batch_bumps_epoch_and_renumbers() -> None:
    idem = manager(100, 4)
    a = sent(idem, 2)
    b = sent(idem, 3)
    c = sent(idem, 1)
    idem.on_success(a, 10)
    # b is the next expected batch, yet the broker says out of order: real gap.
    assert idem.can_retry(b, OUT_OF_ORDER_SEQUENCE_NUMBER, 0, retriable=False)
    assert idem.bump_required
    assert idem.maybe_bump_epoch() is False
    assert idem.producer == ProducerIdAndEpoch(100, 5)
    assert (b.base_sequence, c.base_sequence) == (0, 3)
    assert b.sequence_reset and c.sequence_reset
    assert header(b) == (100, 5, 0) and header(c) == (100, 5, 3)
    assert idem.next_sequence(TP) == 4 and idem.last_acked_sequence(TP) == -1
    assert idem.epoch_bumps == 1
    # c's response (old numbering) comes back as out of order too: it was reset, retry quietly.
    assert idem.can_retry(c, OUT_OF_ORDER_SEQUENCE_NUMBER, 0, retriable=False)
    assert not idem.bump_required


def test_unknown_producer_id_rules() -> None:
    idem = manager()
    a = sent(idem, 1)
    # no log start offset known: plain retry
    assert idem.can_retry(a, UNKNOWN_PRODUCER_ID, -1, retriable=False)
    assert not idem.bump_required
    # with a log start offset: the broker lost our state, bump
    assert idem.can_retry(a, UNKNOWN_PRODUCER_ID, 5, retriable=False)
    assert idem.bump_required
    idem.maybe_bump_epoch()
    assert a.sequence_reset and a.base_sequence == 0
    # after the reset the same error just retries
    assert idem.can_retry(a, UNKNOWN_PRODUCER_ID, 5, retriable=False)
    assert not idem.bump_required


def test_other_partitions_move_to_new_epoch_after_in_flight_done() -> None:
    idem = manager(100, 0)
    x = sent(idem, 2, OTHER)  # in flight on OTHER, old epoch
    a = sent(idem, 1)
    idem.request_epoch_bump(TP)
    idem.maybe_bump_epoch()
    assert header(a)[:2] == (100, 1)
    fresh_other = batch(1, OTHER)
    assert idem.should_stop_drain(fresh_other)  # old-epoch batch still in flight there
    idem.on_success(x, 0)
    assert not idem.should_stop_drain(fresh_other)
    idem.assign_sequence(fresh_other)
    fresh_other.close()
    assert header(fresh_other) == (100, 1, 0)


def test_unresolved_sequence_blocks_then_resolves_when_acks_line_up() -> None:
    idem = manager()
    a = sent(idem, 2)
    b = sent(idem, 2)
    idem.mark_unresolved(a)  # a expired while in flight: written or not?
    assert idem.has_unresolved(TP)
    assert idem.should_stop_drain(batch(1))
    idem.on_success(b, 12)  # b accepted => a was written too
    idem.maybe_resolve_sequences()
    assert not idem.has_unresolved(TP) and not idem.bump_required
    assert not idem.should_stop_drain(batch(1))


def test_unresolved_sequence_bumps_when_gap_remains() -> None:
    idem = manager()
    a = sent(idem, 2)
    idem.mark_unresolved(a)
    idem.maybe_resolve_sequences()  # nothing in flight, last acked -1, next 2: gap
    assert idem.bump_required
    idem.maybe_bump_epoch()
    assert idem.producer.epoch == 1
    nxt = batch(1)
    assert not idem.should_stop_drain(nxt)
    idem.assign_sequence(nxt)
    assert nxt.base_sequence == 0


def test_failed_batch_with_gap_bumps_epoch() -> None:
    idem = manager()
    a = sent(idem, 1)
    b = sent(idem, 1)
    idem.on_failed(a, 87, adjust_sequences=True)  # e.g. INVALID_RECORD: never written
    idem.maybe_bump_epoch()
    assert b.base_sequence == 0 and b.producer_epoch == 1


def test_epoch_exhaustion_resets_producer_id() -> None:
    idem = manager(100, 32767)
    a = sent(idem, 1)
    idem.request_epoch_bump(TP)
    assert idem.maybe_bump_epoch() is True
    assert not idem.has_producer_id
    assert idem.should_stop_drain(a)
    idem.set_producer_id_and_epoch(200, 0)
    assert header(a) == (200, 0, 0)
    assert not idem.should_stop_drain(a)


def test_split_children_take_over_sequence_range() -> None:
    idem = manager()
    big = sent(idem, 10)
    c1 = batch(4)
    c2 = batch(6)
    c1.set_producer_state(100, 0, 0)
    c2.set_producer_state(100, 0, 4)
    idem.on_split(big, [c1, c2])
    assert idem.in_flight_count(TP) == 2
    assert not idem.should_stop_drain(c1) and idem.should_stop_drain(c2)
