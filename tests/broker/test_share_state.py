"""The share-partition state machine (pure): acquisition, acknowledgement, locks, limits."""

from __future__ import annotations

import random

import pytest

from aiokafka_lite.broker.share.state import (
    ACCEPT,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AcquiredRange,
    InvalidAcknowledgement,
    RecordState,
    SharePartitionState,
)

LOCK_MS = 1000
LIMIT = 3


def acquire(
    sp: SharePartitionState,
    member: str,
    *,
    hwm: int = 10,
    n: int = 100,
    now: float = 0.0,
    max_in_flight: int = 1000,
    batch_end: int | None = None,
) -> list[AcquiredRange]:
    return sp.acquire(
        member,
        high_watermark=hwm,
        max_records=n,
        now_ms=now,
        lock_ms=LOCK_MS,
        max_in_flight=max_in_flight,
        batch_end=batch_end,
    )


def test_new_records_are_acquired_once_then_accept_moves_the_start() -> None:
    sp = SharePartitionState(start_offset=2)
    assert acquire(sp, "a", hwm=6) == [AcquiredRange(2, 5, 1)]
    assert acquire(sp, "b", hwm=6) == []
    sp.acknowledge("a", 2, 3, [ACCEPT], LIMIT)
    assert sp.start_offset == 4 and sp.state_of(4) is RecordState.ACQUIRED
    sp.acknowledge("a", 4, 5, [ACCEPT, REJECT], LIMIT)
    assert sp.start_offset == 6 and sp.in_flight == {}


def test_max_records_and_max_in_flight_bound_acquisition() -> None:
    sp = SharePartitionState(start_offset=0)
    assert acquire(sp, "a", n=3) == [AcquiredRange(0, 2, 1)]
    assert acquire(sp, "a", max_in_flight=5) == [AcquiredRange(3, 4, 1)]
    assert sp.next_offset == 5


def test_batch_end_extends_new_records_to_the_batch_boundary() -> None:
    sp = SharePartitionState(start_offset=0)
    assert acquire(sp, "a", n=2, batch_end=4) == [AcquiredRange(0, 3, 1)]


def test_released_records_come_back_first_with_a_higher_delivery_count() -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=4)
    sp.acknowledge("a", 0, 3, [ACCEPT, RELEASE, RELEASE, ACCEPT], LIMIT)
    assert sp.start_offset == 1
    assert acquire(sp, "b", hwm=6) == [AcquiredRange(1, 2, 2), AcquiredRange(4, 5, 1)]


def test_delivery_count_limit_archives_on_release_and_on_lock_expiry() -> None:
    sp = SharePartitionState(start_offset=0)
    for delivery in range(1, LIMIT + 1):
        assert acquire(sp, "a", hwm=1) == [AcquiredRange(0, 0, delivery)]
        if delivery < LIMIT:
            sp.acknowledge("a", 0, 0, [RELEASE], LIMIT)
    sp.expire_locks(LOCK_MS, LIMIT)  # the third delivery's lock runs out: archived, not offered
    assert acquire(sp, "b", hwm=1) == [] and sp.start_offset == 1


def test_lock_expiry_frees_only_expired_records() -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=2, now=0)
    acquire(sp, "b", hwm=4, now=500)
    sp.expire_locks(LOCK_MS, LIMIT)
    assert [sp.state_of(o) for o in range(4)] == [RecordState.AVAILABLE] * 2 + [RecordState.ACQUIRED] * 2


def test_release_member_returns_its_records_only() -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=2)
    acquire(sp, "b", hwm=3)
    sp.release_member("a", LIMIT)
    assert [sp.state_of(o) for o in range(3)] == [RecordState.AVAILABLE] * 2 + [RecordState.ACQUIRED]
    assert sp.delivery_count(0) == 1


@pytest.mark.parametrize("first, last, types", [(0, 1, [ACCEPT]), (0, 0, [REJECT])])
def test_acknowledging_records_held_by_another_member_changes_nothing(
    first: int, last: int, types: list[int]
) -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=1)
    acquire(sp, "b", hwm=2)
    with pytest.raises(InvalidAcknowledgement) as info:
        sp.acknowledge("b", first, last, types, LIMIT)
    assert not info.value.bad_request
    assert [sp.state_of(o) for o in range(2)] == [RecordState.ACQUIRED] * 2


@pytest.mark.parametrize(
    "first, last, types", [(3, 2, [ACCEPT]), (0, 2, [ACCEPT, ACCEPT]), (0, 0, [7]), (0, 0, [])]
)
def test_malformed_acknowledgements_are_bad_requests(first: int, last: int, types: list[int]) -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=3)
    with pytest.raises(InvalidAcknowledgement) as info:
        sp.acknowledge("a", first, last, types, LIMIT)
    assert info.value.bad_request


def test_gap_archives_and_skip_to_drops_deleted_records() -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=4)
    sp.acknowledge("a", 0, 1, [GAP, ACCEPT], LIMIT)
    assert sp.start_offset == 2
    sp.skip_to(3)
    assert sp.start_offset == 3 and sp.state_of(2) is None and sp.state_of(3) is RecordState.ACQUIRED
    sp.skip_to(8)
    assert (
        sp.start_offset == 8 and sp.next_offset == 8 and acquire(sp, "a", hwm=9) == [AcquiredRange(8, 8, 1)]
    )


def test_acknowledgements_below_the_start_offset_are_ignored() -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=2)
    sp.acknowledge("a", 0, 0, [ACCEPT], LIMIT)
    sp.acknowledge("a", 0, 1, [REJECT], LIMIT)  # offset 0 is done already; 1 is rejected
    assert sp.start_offset == 2
    with pytest.raises(InvalidAcknowledgement) as nothing_in_flight:
        sp.acknowledge("a", 5, 5, [ACCEPT], LIMIT)
    assert not nothing_in_flight.value.bad_request
    acquire(sp, "a", hwm=4)
    with pytest.raises(InvalidAcknowledgement) as past_acquired:
        sp.acknowledge("a", 3, 5, [ACCEPT], LIMIT)
    assert past_acquired.value.bad_request and sp.state_of(3) is RecordState.ACQUIRED


def test_aborted_records_are_archived_not_delivered_and_count_in_max_records() -> None:
    sp = SharePartitionState(start_offset=0)
    got = sp.acquire(
        "a", high_watermark=10, max_records=6, now_ms=0, lock_ms=LOCK_MS, max_in_flight=100, aborted=[(2, 3)]
    )
    assert got == [AcquiredRange(0, 1, 1), AcquiredRange(4, 5, 1)]
    assert sp.state_of(2) is RecordState.ARCHIVED and sp.delivery_count(2) == 0
    sp.acknowledge("a", 0, 1, [ACCEPT], LIMIT)
    assert sp.start_offset == 4  # the archived aborted records are done too
    # Aborted records at the start of a new acquisition move the start offset at once.
    sp2 = SharePartitionState(start_offset=0)
    assert (
        sp2.acquire(
            "a",
            high_watermark=3,
            max_records=5,
            now_ms=0,
            lock_ms=LOCK_MS,
            max_in_flight=100,
            aborted=[(0, 2)],
        )
        == []
    )
    assert sp2.start_offset == sp2.next_offset == 3 and sp2.in_flight == {}


def test_snapshot_saves_runs_acquired_as_available_and_loads_back() -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=8)
    sp.acknowledge("a", 1, 2, [ACCEPT], LIMIT)
    sp.acknowledge("a", 3, 3, [RELEASE], LIMIT)
    sp.acknowledge("a", 4, 4, [REJECT], LIMIT)
    snap = sp.snapshot()
    assert snap == {
        "start": 0,
        "next": 8,
        "runs": [
            [0, 0, "available", 1],  # acquired: the lock does not survive a restart
            [1, 2, "acknowledged", 1],
            [3, 3, "available", 1],
            [4, 4, "archived", 1],
            [5, 7, "available", 1],
        ],
    }
    back = SharePartitionState.from_snapshot(snap)
    assert back.snapshot() == snap
    assert acquire(back, "b", hwm=8) == [
        AcquiredRange(0, 0, 2),
        AcquiredRange(3, 3, 2),
        AcquiredRange(5, 7, 2),
    ]


def test_version_moves_on_every_change_a_snapshot_shows_only() -> None:
    sp = SharePartitionState(start_offset=0)
    v = sp.version
    acquire(sp, "a", hwm=0)
    assert sp.version == v  # nothing to acquire
    acquire(sp, "a", hwm=3)
    assert sp.version > v
    v = sp.version
    sp.expire_locks(0, LIMIT)  # locks run to LOCK_MS
    assert sp.version == v
    sp.expire_locks(LOCK_MS, LIMIT)
    assert sp.version > v
    v = sp.version
    sp.release_member("a", LIMIT)  # holds nothing any more
    assert sp.version == v
    acquire(sp, "b", hwm=3, now=LOCK_MS)
    v = sp.version
    sp.acknowledge("b", 0, 2, [ACCEPT], LIMIT)
    assert sp.version > v


def test_renew_restarts_the_lock_of_held_records_without_a_delivery() -> None:
    sp = SharePartitionState(start_offset=0)
    acquire(sp, "a", hwm=2, now=0)
    v = sp.version
    sp.acknowledge("a", 0, 0, [RENEW], LIMIT, now_ms=800, lock_ms=LOCK_MS)
    assert sp.version == v  # nothing a snapshot shows changed
    sp.expire_locks(LOCK_MS, LIMIT)  # the first lock's end: only the unrenewed record goes back
    assert sp.state_of(0) is RecordState.ACQUIRED and sp.state_of(1) is RecordState.AVAILABLE
    assert sp.delivery_count(0) == 1
    with pytest.raises(InvalidAcknowledgement):
        sp.acknowledge("a", 1, 1, [RENEW], LIMIT, now_ms=LOCK_MS, lock_ms=LOCK_MS)  # no longer held
    with pytest.raises(InvalidAcknowledgement):
        sp.acknowledge("b", 0, 0, [RENEW], LIMIT, now_ms=LOCK_MS, lock_ms=LOCK_MS)  # someone else's
    sp.expire_locks(800 + LOCK_MS, LIMIT)
    assert sp.state_of(0) is RecordState.AVAILABLE


def test_indexes_match_the_records_under_random_operations() -> None:
    """The available-offset index and the no-expiry-before time are shortcuts: after any
    sequence of operations they must agree with a scan of the records."""
    rng = random.Random(932)
    sp = SharePartitionState(start_offset=0)
    hwm, now = 0, 0.0
    for _ in range(3000):
        op = rng.randrange(6)
        now += rng.choice((0, 10, 400))
        if op == 0:
            hwm += rng.randrange(1, 6)
        elif op == 1:
            sp.acquire(
                rng.choice("ab"),
                high_watermark=hwm,
                max_records=rng.randrange(1, 5),
                now_ms=now,
                lock_ms=LOCK_MS,
                max_in_flight=50,
            )
        elif op == 2:
            sp.expire_locks(now, LIMIT)
            held = [r for r in sp.in_flight.values() if r.state is RecordState.ACQUIRED]
            assert all(r.lock_deadline_ms > now for r in held)
        elif op == 3:
            sp.release_member(rng.choice("ab"), LIMIT)
        elif op == 4 and sp.in_flight:
            o = rng.choice(list(sp.in_flight))
            rec = sp.in_flight[o]
            kind = rng.choice([ACCEPT, RELEASE, REJECT, RENEW, GAP])
            if rec.member_id is not None:
                sp.acknowledge(rec.member_id, o, o, [kind], LIMIT, now_ms=now, lock_ms=LOCK_MS)
        elif op == 5 and rng.random() < 0.05:
            sp.skip_to(sp.start_offset + rng.randrange(0, 3))
        scanned = {o for o, r in sp.in_flight.items() if r.state is RecordState.AVAILABLE}
        assert sp._available == scanned
        held_deadlines = [
            r.lock_deadline_ms for r in sp.in_flight.values() if r.state is RecordState.ACQUIRED
        ]
        assert all(sp._no_expiry_before <= d for d in held_deadlines)
    restored = SharePartitionState.from_snapshot(sp.snapshot())
    assert restored._available == {
        o for o, r in restored.in_flight.items() if r.state is RecordState.AVAILABLE
    }
