"""The session clock of both membership machines, with a fake clock (issue 24, item 3): a
member that has had no answer proving its session alive for longer than the session
timeout stops handing out records of its partitions at once and finds the coordinator
again; an answer saying it was expired makes them lost (no commit) and the member
rejoins, a normal answer (the coordinator kept the session) hands them out again. As long
as answers come, nothing happens."""

from __future__ import annotations

from test_consumer_membership import (
    FENCED_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    error,
    joined,
    ok,
    resolve,
    run_batch,
)
from test_consumer_membership import kinds as consumer_kinds
from test_group_membership import T, join_ok, kinds, settings, stable, start

from aiokafka_lite.consume.groups.consumer_membership import ConsumerMemberState, FindCoordinator
from aiokafka_lite.consume.groups.membership import FreezePartitions, Membership, MemberState, ThawPartitions

NONE = 0
REBALANCE_IN_PROGRESS = 27
SESSION = 10_000
INTERVAL = 1_000

# ----------------------------------------------------------------------------- classic


def classic(auto_commit: bool = True) -> Membership:
    m = Membership(
        settings(session_timeout_ms=SESSION, heartbeat_interval_ms=INTERVAL, enable_auto_commit=auto_commit)
    )
    stable(m, T[:2], now=0)
    return m


def beat(m: Membership, now: float, code: int = NONE) -> None:
    """A heartbeat sent and answered at ``now``."""
    req = m.heartbeat_request(now)
    assert req is not None
    m.heartbeat_response(req, code, now)


def test_classic_answered_heartbeats_keep_the_session() -> None:
    m = classic()
    for now in range(INTERVAL, 60 * INTERVAL, INTERVAL):
        beat(m, now)
        assert m.expire_session(now + SESSION) == []  # the deadline itself is not past it
        assert m.tick(now) == [] or m.state is MemberState.STABLE
    assert m.state is MemberState.STABLE and m.generation == 1 and m.sessions_expired == 0
    assert m.owned == set(T[:2])


def test_classic_no_answer_for_a_session_freezes_then_expired_answer_means_lost_without_commit() -> None:
    m = classic(auto_commit=True)
    beat(m, 3000)
    assert m.session_deadline() == 3000 + SESSION
    assert m.expire_session(3000 + SESSION) == []
    # The heartbeat loop notices first: stop handing out records of both partitions now,
    # and find the coordinator again.
    assert m.expire_session(3001 + SESSION) == [FreezePartitions(frozenset(T[:2]))]
    assert m.sessions_expired == 1 and m.session_expired
    assert m.coordinator is None and m.session_deadline() is None
    assert m.expire_session(3002 + SESSION) == []  # once
    assert m.tick(3002 + SESSION) == [FindCoordinator(True)]
    m.coordinator_found(1, 20_000)
    req = m.heartbeat_request(20_000)
    assert req is not None
    m.heartbeat_response(req, UNKNOWN_MEMBER_ID, 20_001)  # expired indeed
    assert not m.session_expired and m.generation == -1 and m.commit_identity() is None
    # Lost listener, removed; no commit (auto-commit is on); then the JoinGroup.
    assert kinds(m.tick(20_002)) == ["FreezePartitions", "lost:2", "RemovePartitions", "SendJoinGroup"]
    assert m.owned == set()


def test_classic_a_session_the_coordinator_kept_is_thawed() -> None:
    m = classic(auto_commit=False)
    m.expire_session(SESSION + 1)
    m.coordinator_found(2, SESSION + 5000)  # failed over: the new coordinator restarted the session
    beat(m, SESSION + 5000)
    assert not m.session_expired and m.generation == 1
    assert m.tick(SESSION + 5001) == [ThawPartitions(frozenset(T[:2]))]
    assert m.tick(SESSION + 5001) == []
    assert m.session_deadline() == 2 * SESSION + 5000


def test_classic_tick_alone_expires_the_session() -> None:
    m = classic(auto_commit=False)
    assert m.next_deadline(1) == SESSION + 1  # the main loop wakes up for it
    assert m.tick(SESSION + 1) == [FreezePartitions(frozenset(T[:2]))]
    assert m.sessions_expired == 1


def test_classic_rebalance_in_progress_answers_keep_the_session() -> None:
    m = classic()
    beat(m, 9000, REBALANCE_IN_PROGRESS)
    assert m.expire_session(9000 + SESSION) == []
    assert m.session_deadline() == 9000 + SESSION


def test_classic_finding_the_coordinator_again_proves_nothing() -> None:
    m = classic()
    req = m.heartbeat_request(2000)
    assert req is not None
    m.heartbeat_failed(req, ConnectionError("cut"), 4000)
    assert m.coordinator is None
    m.coordinator_found(1, SESSION)  # the lookup got through; the session was not renewed
    assert m.expire_session(SESSION + 1) == [FreezePartitions(frozenset(T[:2]))]
    assert m.generation == 1  # until the coordinator answers


def test_classic_a_late_answer_thaws() -> None:
    m = classic()
    req = m.heartbeat_request(1000)
    assert req is not None
    m.expire_session(SESSION + 1)
    m.heartbeat_response(req, NONE, SESSION + 2)  # a late answer: the session was kept after all
    assert not m.session_expired
    assert m.tick(SESSION + 3) == [ThawPartitions(frozenset(T[:2]))]


def test_classic_a_join_in_flight_has_no_session_to_lose() -> None:
    m = Membership(settings(session_timeout_ms=SESSION, heartbeat_interval_ms=INTERVAL))
    stable(m, T[:2], now=0)
    m.request_rejoin("test")
    acts = m.tick(1000)
    join = acts[-1]
    assert m.join_request(join.attempt, 1000) is not None  # type: ignore[union-attr]
    assert m.state is MemberState.JOINING
    # The broker keeps a member waiting in a JoinGroup alive (rebalance timeout).
    assert m.session_deadline() is None and m.expire_session(10 * SESSION) == []
    m.join_response(join.attempt, join_ok(m, generation=2), 10 * SESSION)  # type: ignore[union-attr]
    assert m.session_deadline() == 11 * SESSION


def test_classic_unjoined_member_has_no_session() -> None:
    m = Membership(settings(session_timeout_ms=SESSION, heartbeat_interval_ms=INTERVAL))
    assert m.session_deadline() is None
    start(m)
    assert m.session_deadline() is None and m.expire_session(10 * SESSION) == []


# ----------------------------------------------------------------------------- consumer (KIP-848)


def test_consumer_protocol_assumes_kafkas_default_until_the_broker_says() -> None:
    m = joined(auto_commit_interval_ms=10**9)
    assert m.session_timeout_ms == 45_000 and m.session_deadline() == 45_000
    assert m.session_timeout_wanted() and not m.session_timeout_wanted()  # asked once
    m.session_timeout_learned(None)  # the broker could not say
    assert m.session_timeout_ms == 45_000
    m.session_timeout_learned(SESSION)
    assert m.session_deadline() == SESSION


def test_consumer_protocol_answered_heartbeats_keep_the_session() -> None:
    m = joined(auto_commit_interval_ms=10**9)
    m.session_timeout_learned(SESSION)
    for now in range(5000, 100_000, 5000):
        req = m.heartbeat_request(now)
        assert req is not None
        m.heartbeat_response(ok(1), now)
        assert m.expire_session(now + SESSION) == []
    assert m.state is ConsumerMemberState.STABLE and m.sessions_expired == 0


def test_consumer_protocol_no_answer_for_a_session_freezes_then_fenced_means_lost_without_commit() -> None:
    m = joined(auto_commit_interval_ms=1000)  # auto-commit due, yet no commit of lost partitions
    m.session_timeout_learned(SESSION)
    req = m.heartbeat_request(5000)
    assert req is not None  # in flight, never answered
    assert m.expire_session(SESSION) == []
    acts = m.expire_session(SESSION + 1)
    assert consumer_kinds(acts) == ["FreezePartitions:[0, 1, 2]"]
    assert m.session_expired and m.sessions_expired == 1 and m.coordinator is None
    assert m.tick(SESSION + 2, resolve()) == [FindCoordinator(True)]
    m.coordinator_found(1, SESSION + 3)
    again = m.heartbeat_request(SESSION + 3)
    assert again is not None and again.member_epoch == 1
    assert m.heartbeat_response(error(FENCED_MEMBER_EPOCH), SESSION + 4)
    assert m.state is ConsumerMemberState.FENCED and not m.session_expired
    acts = m.tick(SESSION + 5, resolve())
    assert consumer_kinds(acts)[:3] == [
        "FreezePartitions:[0, 1, 2]",
        "lost:[0, 1, 2]",
        "RemovePartitions:[0, 1, 2]",
    ]
    assert "CommitOffsets" not in consumer_kinds(acts)
    run_batch(m, acts, SESSION + 5)
    assert m.state is ConsumerMemberState.JOINING and m.owned == set()
    rejoin = m.heartbeat_request(SESSION + 6)
    assert rejoin is not None and rejoin.member_epoch == 0


def test_consumer_protocol_a_session_the_coordinator_kept_is_thawed() -> None:
    m = joined(auto_commit_interval_ms=10**9)
    m.session_timeout_learned(SESSION)
    m.expire_session(SESSION + 1)
    m.coordinator_found(2, SESSION + 2)
    req = m.heartbeat_request(SESSION + 2)
    assert req is not None
    m.heartbeat_response(ok(1), SESSION + 3)
    assert consumer_kinds(m.tick(SESSION + 4, resolve())) == ["ThawPartitions"]
    assert m.state is ConsumerMemberState.STABLE and m.session_deadline() == 2 * SESSION + 3


def test_consumer_protocol_tick_alone_expires_the_session() -> None:
    m = joined(auto_commit_interval_ms=10**9)
    m.session_timeout_learned(SESSION)
    assert consumer_kinds(m.tick(SESSION + 1, resolve())) == ["FreezePartitions:[0, 1, 2]"]


def test_consumer_protocol_joining_member_has_no_session() -> None:
    m = joined()
    assert m.heartbeat_request(6000) is not None
    assert m.heartbeat_response(error(UNKNOWN_MEMBER_ID), 6000)
    run_batch(m, m.tick(6001, resolve()), 6001)
    assert m.state is ConsumerMemberState.JOINING
    assert m.session_deadline() is None and m.expire_session(10**9) == []
