"""ShareMembership transitions, driven directly (no broker, no clock)."""

from __future__ import annotations

import uuid

import pytest

from aiokafka_lite.consume.share.membership import ShareMembership, ShareMemberState
from aiokafka_lite.core.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)
from aiokafka_lite.wire.messages import ShareGroupHeartbeatResponse as R

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def answer(
    epoch: int = 1, interval: int = 5000, assignment: dict[uuid.UUID, list[int]] | None = None, error: int = 0
) -> R:
    return R(
        error_code=error,
        member_epoch=epoch,
        heartbeat_interval_ms=interval,
        assignment=None
        if assignment is None
        else R.Assignment(
            topic_partitions=[R.TopicPartitions(topic_id=t, partitions=ps) for t, ps in assignment.items()]
        ),
    )


def joined(now: float = 0.0) -> ShareMembership:
    m = ShareMembership("g", ("b", "a", "a"))
    m.coordinator_found()
    m.heartbeat_request(now)
    m.heartbeat_response(answer(epoch=3, assignment={T1: [0, 1]}), now)
    return m


def test_member_id_is_a_client_generated_uuid_kept_for_life() -> None:
    m = ShareMembership("g", ("t",))
    assert str(uuid.UUID(m.member_id)) == m.member_id
    assert ShareMembership("g", ("t",)).member_id != m.member_id


def test_join_sends_epoch_zero_with_subscription_and_rack() -> None:
    m = ShareMembership("g", ("b", "a", "a"), rack_id="r1")
    assert m.state is ShareMemberState.JOINING and m.heartbeat_due(0)
    req = m.heartbeat_request(0)
    assert (req.group_id, req.member_id, req.member_epoch) == ("g", m.member_id, 0)
    assert req.subscribed_topic_names == ["a", "b"] and req.rack_id == "r1"
    # One heartbeat at a time.
    assert not m.heartbeat_due(10_000)


def test_response_applies_epoch_interval_and_assignment() -> None:
    m = ShareMembership("g", ("t",))
    m.heartbeat_request(0)
    assert m.heartbeat_response(answer(epoch=3, interval=4000, assignment={T1: [0, 1], T2: [2]}), 100)
    assert m.state is ShareMemberState.STABLE and m.epoch == 3 and m.heartbeat_interval_ms == 4000
    assert m.assignment == {(T1, 0), (T1, 1), (T2, 2)}
    assert not m.heartbeat_due(4099) and m.heartbeat_due(4100)
    # Later heartbeats carry the epoch and leave unchanged fields null.
    req = m.heartbeat_request(4100)
    assert req.member_epoch == 3 and req.subscribed_topic_names is None and req.rack_id is None
    # A null assignment means unchanged; the same assignment is no change either.
    assert not m.heartbeat_response(answer(epoch=3, assignment=None), 4200)
    assert m.assignment == {(T1, 0), (T1, 1), (T2, 2)}
    m.heartbeat_request(9000)
    assert m.heartbeat_response(answer(epoch=4, assignment={T2: [2]}), 9000)
    assert m.assignment == {(T2, 2)} and m.epoch == 4


@pytest.mark.parametrize("code", [25, 110], ids=["UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH"])
def test_fencing_rejoins_at_once_with_epoch_zero_and_the_same_member_id(code: int) -> None:
    m = joined()
    member_id = m.member_id
    m.heartbeat_request(5000)
    assert m.heartbeat_response(answer(error=code), 5000)  # the assignment is gone
    assert m.state is ShareMemberState.JOINING and m.epoch == 0 and m.assignment == frozenset()
    assert m.heartbeat_due(5000)
    req = m.heartbeat_request(5000)
    assert req.member_id == member_id and req.member_epoch == 0 and req.subscribed_topic_names == ["a", "b"]


@pytest.mark.parametrize("code", [15, 16], ids=["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"])
def test_coordinator_moved_looks_it_up_again(code: int) -> None:
    m = joined()
    m.heartbeat_request(5000)
    assert not m.heartbeat_response(answer(error=code), 5000)
    assert m.coordinator_unknown and m.state is ShareMemberState.STABLE and m.epoch == 3
    assert m.assignment == {(T1, 0), (T1, 1)}
    # The next heartbeat repeats the subscription: the new coordinator may not have it.
    assert m.heartbeat_request(5000).subscribed_topic_names == ["a", "b"]


def test_coordinator_loading_retries_after_backoff() -> None:
    m = ShareMembership("g", ("t",), retry_backoff_ms=250)
    m.heartbeat_request(0)
    m.heartbeat_response(answer(error=14), 0)
    assert not m.heartbeat_due(249) and m.heartbeat_due(250) and m.state is ShareMemberState.JOINING


def test_lost_connection_retries_with_full_heartbeat() -> None:
    m = joined()
    m.heartbeat_request(5000)
    m.heartbeat_failed(KafkaConnectionError("gone"), 5000)
    assert m.coordinator_unknown and m.heartbeat_due(5000 + m.retry_backoff_ms)
    assert m.heartbeat_request(5100).subscribed_topic_names == ["a", "b"]


def test_topic_authorization_is_reported_and_heartbeats_go_on() -> None:
    m = joined()
    m.heartbeat_request(5000)
    m.heartbeat_response(answer(error=29), 5000)
    assert isinstance(m.reported, TopicAuthorizationFailedError)
    assert m.state is ShareMemberState.STABLE and m.fatal is None and m.heartbeat_due(10_000)


@pytest.mark.parametrize("code", [30, 42, 81, 35, 69])
def test_fatal_errors_fail_the_member(code: int) -> None:
    m = joined()
    m.heartbeat_request(5000)
    m.heartbeat_response(answer(error=code), 5000)
    assert m.state is ShareMemberState.FAILED and m.fatal is not None and m.fatal.code == code  # type: ignore[attr-defined]
    assert not m.heartbeat_due(10**9) and m.assignment == frozenset()
    if code == 30:
        assert isinstance(m.fatal, GroupAuthorizationFailedError)


def test_subscription_change_is_sent_at_once_and_after_a_change_in_flight() -> None:
    m = joined()
    m.subscribe(["a", "c"], 1000)
    assert m.heartbeat_due(1000)
    assert m.heartbeat_request(1000).subscribed_topic_names == ["a", "c"]
    m.subscribe(["d"], 1001)  # changed again while the heartbeat is in flight
    m.heartbeat_response(answer(epoch=4), 1002)
    assert m.heartbeat_due(1002)
    assert m.heartbeat_request(1002).subscribed_topic_names == ["d"]
    m.heartbeat_response(answer(epoch=5), 1003)
    assert not m.heartbeat_due(1004)


def test_leave_sends_epoch_minus_one_then_left() -> None:
    m = joined()
    req = m.leave_request()
    assert req is not None and req.member_epoch == -1 and req.member_id == m.member_id
    assert m.state is ShareMemberState.LEAVING and m.assignment == frozenset() and not m.heartbeat_due(10**9)
    assert m.leave_request() is None
    m.left()
    assert m.state is ShareMemberState.LEFT


def test_leave_before_joining_sends_nothing() -> None:
    m = ShareMembership("g", ("t",))
    assert m.leave_request() is None and m.state is ShareMemberState.LEFT
    with pytest.raises(RuntimeError):
        m.heartbeat_request(0)


def test_late_response_after_leaving_is_ignored() -> None:
    m = joined()
    m.heartbeat_request(5000)
    assert m.leave_request() is not None
    assert not m.heartbeat_response(answer(epoch=9, assignment={T2: [0]}), 5001)
    assert m.assignment == frozenset() and m.state is ShareMemberState.LEAVING
