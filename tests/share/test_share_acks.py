"""AckTracker, acknowledgement batching and share-session epochs, driven directly."""

from __future__ import annotations

import uuid

import pytest

from aiokafka_lite.consume.share.acks import (
    AckBatch,
    AckTracker,
    AcquisitionLockTimeoutError,
    acknowledgement_batches,
)
from aiokafka_lite.consume.share.record import AcknowledgeType as A
from aiokafka_lite.consume.share.session import FetchParams, ShareSession, next_epoch
from aiokafka_lite.core.errors import (
    IllegalStateError,
    InvalidRecordStateError,
    InvalidShareSessionEpochError,
)
from aiokafka_lite.core.structs import TopicPartition

TP = TopicPartition("t", 0)
TID = uuid.UUID(int=7)
PARAMS = FetchParams(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100)


def test_batches_are_runs_of_consecutive_offsets_compact_when_one_type() -> None:
    assert acknowledgement_batches({}) == []
    assert acknowledgement_batches({5: A.ACCEPT, 3: A.ACCEPT, 4: A.ACCEPT}) == [AckBatch(3, 5, (1,))]
    assert acknowledgement_batches({0: A.ACCEPT, 1: A.RELEASE, 2: A.GAP, 7: A.REJECT, 8: A.REJECT}) == [
        AckBatch(0, 2, (1, 2, 0)),
        AckBatch(7, 8, (3,)),
    ]


def test_acquire_deliver_acknowledge_take_complete() -> None:
    t = AckTracker()
    new = t.acquire(TP, TID, [(10, 12, 1), (14, 14, 2)], lock_deadline=30_000)
    assert new == {10: 1, 11: 1, 12: 1, 14: 2}
    t.deliver(TP, [10, 11, 12, 14])
    t.acknowledge(TP, 10, A.ACCEPT)
    t.acknowledge(TP, 11, A.RELEASE)
    with pytest.raises(IllegalStateError, match="already acknowledged"):
        t.acknowledge(TP, 11, A.ACCEPT)
    with pytest.raises(IllegalStateError, match="not a record this consumer delivered"):
        t.acknowledge(TP, 13, A.ACCEPT)
    with pytest.raises(ValueError, match="ACCEPT, RELEASE, REJECT or RENEW"):
        t.acknowledge(TP, 12, A.GAP)
    assert t.unacknowledged() == 2 and t.with_pending() == [TP]
    assert t.take(TP) == [AckBatch(10, 11, (1, 2))]
    # One exchange at a time: later decisions wait for the answer.
    t.acknowledge(TP, 12, A.REJECT)
    assert t.take(TP) == []
    result = t.completed(TP, None, sent_at=1000)
    assert (
        result is not None and result.error is None and dict(result.offsets) == {10: A.ACCEPT, 11: A.RELEASE}
    )
    assert t.take(TP) == [AckBatch(12, 12, (3,))]


def test_implicit_mode_accepts_what_was_delivered_only() -> None:
    t = AckTracker()
    t.acquire(TP, TID, [(0, 4, 1)], lock_deadline=30_000)
    t.deliver(TP, [0, 1])
    assert t.accept_delivered() == 2 and t.unacknowledged() == 0
    assert t.release_undelivered() == 3
    assert t.take(TP) == [AckBatch(0, 4, (1, 1, 2, 2, 2))]


def test_gaps_and_close_release() -> None:
    t = AckTracker()
    t.acquire(TP, TID, [(0, 5, 1)], lock_deadline=30_000)
    t.gap(TP, [2, 3])  # e.g. a transaction marker and a compacted record
    t.deliver(TP, [0, 1])
    t.acknowledge(TP, 0, A.ACCEPT)
    t.acknowledge(TP, 1, A.ACCEPT)
    assert t.release_undelivered() == 2  # 4 and 5 were never handed out
    assert t.take(TP) == [AckBatch(0, 5, (1, 1, 0, 0, 2, 2))]


def test_invalid_record_state_after_lock_expiry_names_the_expired_offsets() -> None:
    t = AckTracker()
    t.acquire(TP, TID, [(0, 1, 1)], lock_deadline=1000)
    t.acquire(TP, TID, [(2, 2, 1)], lock_deadline=9000)
    t.deliver(TP, [0, 1, 2])
    assert t.expired(999) == {} and t.expired(1000) == {TP: [0, 1]}
    for o in (0, 1, 2):
        t.acknowledge(TP, o, A.ACCEPT)
    t.take(TP)
    result = t.completed(TP, InvalidRecordStateError("not acquired"), sent_at=1500)
    assert result is not None and isinstance(result.error, AcquisitionLockTimeoutError)
    assert result.error.offsets == (0, 1) and "0-1" in str(result.error)
    # Before the deadline the broker's error is passed through as it is.
    t.acquire(TP, TID, [(3, 3, 1)], lock_deadline=9000)
    t.deliver(TP, [3])
    t.acknowledge(TP, 3, A.ACCEPT)
    t.take(TP)
    result = t.completed(TP, InvalidRecordStateError("x"), sent_at=1500)
    assert result is not None and type(result.error) is InvalidRecordStateError


def test_reacquired_record_starts_over_with_its_new_delivery_count() -> None:
    t = AckTracker()
    t.acquire(TP, TID, [(0, 0, 1)], lock_deadline=1000)
    t.deliver(TP, [0])
    assert t.acquire(TP, TID, [(0, 0, 2)], lock_deadline=5000) == {0: 2}
    assert t.unacknowledged() == 0 and t.partitions[TP].acquired == {0: 2}


def test_epochs_count_from_one_and_wrap_past_int32_max() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(2**31 - 1) == 1


def test_session_opens_with_a_full_fetch_without_acks_then_goes_incremental() -> None:
    s = ShareSession("g", "m", node_id=1)
    p0, p1, p2 = (TID, 0), (TID, 1), (TID, 2)
    batches = [AckBatch(0, 3, (1,))]
    with pytest.raises(ValueError, match="opening a share session cannot carry"):
        s.fetch_request({p0}, {p0: batches}, PARAMS)
    req = s.fetch_request({p0, p1}, {}, PARAMS)
    assert req.share_session_epoch == 0 and req.member_id == "m" and req.group_id == "g"
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in req.topics] == [(TID, [0, 1])]
    assert (req.max_records, req.batch_size, req.max_wait_ms) == (100, 100, 500)
    s.succeeded()
    assert s.epoch == 1 and s.partitions == {p0, p1}
    # Incremental: only new partitions and those with acknowledgements; removed ones forgotten.
    req = s.fetch_request({p0, p2}, {p0: batches}, PARAMS)
    assert req.share_session_epoch == 1
    sent = {
        (t.topic_id, p.partition_index): p.acknowledgement_batches for t in req.topics for p in t.partitions
    }
    assert set(sent) == {p0, p2}
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in sent[p0]] == [(0, 3, [1])]
    assert [(f.topic_id, f.partitions) for f in req.forgotten_topics_data] == [(TID, [1])]
    with pytest.raises(ValueError, match="not fetched"):
        s.fetch_request({p0}, {p1: batches}, PARAMS)


def test_acknowledge_needs_an_open_session_and_close_uses_epoch_minus_one() -> None:
    s = ShareSession("g", "m", node_id=1)
    with pytest.raises(ValueError, match="needs an open share session"):
        s.acknowledge_request({(TID, 0): [AckBatch(0, 0, (1,))]})
    s.fetch_request({(TID, 0)}, {}, PARAMS)
    s.succeeded()
    req = s.acknowledge_request({(TID, 0): [AckBatch(0, 0, (1,))]})
    assert req.share_session_epoch == 1
    s.succeeded()
    assert s.epoch == 2 and s.partitions == {(TID, 0)}  # acknowledging keeps the partitions
    req = s.acknowledge_request({}, close=True)
    assert req.share_session_epoch == -1
    s.succeeded(closed=True)
    assert s.closed and not s.open
    with pytest.raises(RuntimeError):
        s.fetch_request(set(), {}, PARAMS)


def test_session_reset_reopens_with_epoch_zero() -> None:
    s = ShareSession("g", "m", node_id=1)
    s.fetch_request({(TID, 0)}, {}, PARAMS)
    s.succeeded()
    assert InvalidShareSessionEpochError.retriable
    s.reset()
    req = s.fetch_request({(TID, 0)}, {}, PARAMS)
    assert req.share_session_epoch == 0 and req.forgotten_topics_data == []


def test_renew_keeps_the_record_acquired_and_moves_its_deadline_on_success() -> None:
    t = AckTracker()
    t.acquire(TP, TID, [(0, 2, 1)], lock_deadline=15_000)
    t.deliver(TP, [0, 1, 2])
    t.acknowledge(TP, 0, A.RENEW)
    t.acknowledge(TP, 1, A.ACCEPT)
    assert t.unacknowledged() == 1  # a renewal counts as acknowledged for the poll rule
    assert t.has_renewals(TP)
    with pytest.raises(IllegalStateError, match="already acknowledged"):
        t.acknowledge(TP, 0, A.ACCEPT)  # renewing: not the application's until it comes back
    assert t.take(TP) == [AckBatch(0, 1, (4, 1))]
    assert not t.has_renewals(TP)
    result = t.completed(TP, None, sent_at=10_000, lock_ms=15_000)
    assert result is not None and result.error is None and dict(result.offsets) == {0: A.RENEW, 1: A.ACCEPT}
    part = t.partitions[TP]
    assert part.acquired == {0: 1, 2: 1} and part.deadline[0] == 25_000
    assert t.expired(20_000) == {TP: [2]}  # the renewed one no longer expires at 15 s
    t.deliver(TP, [0])  # handed out again
    t.acknowledge(TP, 0, A.ACCEPT)
    assert t.take(TP) == [AckBatch(0, 0, (1,))]


def test_failed_renewal_drops_the_record_and_close_releases_an_unsent_one() -> None:
    t = AckTracker()
    t.acquire(TP, TID, [(0, 1, 1)], lock_deadline=15_000)
    t.deliver(TP, [0, 1])
    t.acknowledge(TP, 0, A.RENEW)
    t.take(TP)
    result = t.completed(TP, InvalidRecordStateError("gone"), sent_at=16_000, lock_ms=15_000)
    assert result is not None and isinstance(result.error, AcquisitionLockTimeoutError)
    assert 0 not in t.partitions[TP].acquired
    t.acknowledge(TP, 1, A.RENEW)
    assert t.release_undelivered() == 1  # closing before the renewal went out: released
    assert t.take(TP) == [AckBatch(1, 1, (2,))]


def test_acknowledge_request_flags_renewals() -> None:
    s = ShareSession("g", "m", node_id=1)
    s.fetch_request([(TID, 0)], {}, PARAMS)
    s.succeeded()
    plain = s.acknowledge_request({(TID, 0): [AckBatch(0, 1, (1,))]})
    assert plain.is_renew_ack is False
    renew = s.acknowledge_request({(TID, 0): [AckBatch(0, 1, (1, 4))]})
    assert renew.is_renew_ack is True
