"""Direct unit tests of the consumer-protocol (KIP-848) membership state machine: one test
per transition or error, as Apache Kafka's Java client handles them."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

import pytest

from aiokafka_lite.consume.consumer_config import ConsumerConfig
from aiokafka_lite.consume.groups.consumer_membership import (
    ConsumerAction,
    ConsumerGroupSettings,
    ConsumerMembership,
    ConsumerMemberState,
    Continue,
    ResolveTopics,
    SendLeaveHeartbeat,
    check_re2_pattern,
    re2_pattern_of,
)
from aiokafka_lite.consume.groups.membership import (
    AddPartitions,
    CommitOffsets,
    FindCoordinator,
    FreezePartitions,
    InvokeListener,
    RemovePartitions,
)
from aiokafka_lite.core.errors import (
    CommitFailedError,
    ConfigError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    KafkaConnectionError,
    StaleMemberEpochError,
    TopicAuthorizationFailedError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.wire.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

TID = uuid.UUID(int=1)
TID2 = uuid.UUID(int=2)
NAMES = {TID: "t", TID2: "u"}

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_REGULAR_EXPRESSION = 128


def settings(**kw: object) -> ConsumerGroupSettings:
    kw.setdefault("group_id", "g")
    return ConsumerGroupSettings(**kw)  # type: ignore[arg-type]


def resolve(names: dict[uuid.UUID, str] | None = None):  # type: ignore[no-untyped-def]
    table = NAMES if names is None else names
    return table.get


def kinds(actions: Sequence[ConsumerAction]) -> list[str]:
    out = []
    for a in actions:
        if isinstance(a, InvokeListener):
            out.append(f"{a.kind}:{sorted(tp.partition for tp in a.partitions)}")
        elif isinstance(a, FreezePartitions | RemovePartitions | AddPartitions):
            out.append(f"{type(a).__name__}:{sorted(tp.partition for tp in a.partitions)}")
        else:
            out.append(type(a).__name__)
    return out


def assignment(*parts: tuple[uuid.UUID, Sequence[int]]) -> ConsumerGroupHeartbeatResponse.Assignment:
    return ConsumerGroupHeartbeatResponse.Assignment(
        topic_partitions=[
            ConsumerGroupHeartbeatResponse.TopicPartitions(topic_id=t, partitions=list(ps)) for t, ps in parts
        ]
    )


def ok(
    epoch: int, assigned: ConsumerGroupHeartbeatResponse.Assignment | None = None, interval: int = 5000
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        member_epoch=epoch, heartbeat_interval_ms=interval, assignment=assigned, member_id=None
    )


def error(code: int) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=code, member_epoch=-1)


def owned_ids(req: ConsumerGroupHeartbeatRequest) -> set[tuple[uuid.UUID, int]] | None:
    if req.topic_partitions is None:
        return None
    return {(t.topic_id, p) for t in req.topic_partitions for p in t.partitions}


def run_batch(m: ConsumerMembership, actions: list[ConsumerAction], now: float) -> list[ConsumerAction]:
    """Execute a batch as the driver does: a Continue is replaced by what ``resume`` returns."""
    out: list[ConsumerAction] = []
    queue = list(actions)
    while queue:
        a = queue.pop(0)
        out.append(a)
        if isinstance(a, Continue):
            queue.extend(m.resume(a.attempt, a.step, now))
    return out


def joined(
    topics: Sequence[str] = ("t",), parts: Sequence[int] = (0, 1, 2), epoch: int = 1, **kw: object
) -> ConsumerMembership:
    """A member that joined, reconciled ``parts`` of topic t and had the ack answered."""
    m = ConsumerMembership(settings(**kw), now=0)
    m.update_subscription(topics, None, True, 0)
    assert m.tick(0, resolve()) == [FindCoordinator(False)]
    m.coordinator_found(1, 0)
    req = m.heartbeat_request(0)
    assert req is not None and req.member_epoch == 0
    assert m.heartbeat_response(ok(epoch, assignment((TID, parts))), 0)
    run_batch(m, m.tick(0, resolve()), 0)
    ack = m.heartbeat_request(0)
    assert ack is not None and owned_ids(ack) == {(TID, p) for p in parts}
    m.heartbeat_response(ok(epoch), 0)
    assert m.state is ConsumerMemberState.STABLE
    return m


# ----------------------------------------------------------------------------- joining


def test_join_heartbeat_carries_every_field_with_epoch_zero_and_a_client_made_member_id() -> None:
    m = ConsumerMembership(
        settings(group_instance_id="i1", rack="r1", remote_assignor="range", max_poll_interval_ms=1234), now=0
    )
    assert m.state is ConsumerMemberState.UNSUBSCRIBED
    assert m.heartbeat_request(0) is None  # not subscribed: not a member
    m.update_subscription(["b", "a"], None, True, 0)
    assert m.state is ConsumerMemberState.JOINING
    assert m.heartbeat_request(0) is None  # no coordinator yet
    assert m.tick(0, resolve()) == [FindCoordinator(False)]
    m.coordinator_found(7, 0)
    req = m.heartbeat_request(0)
    assert req is not None
    assert str(uuid.UUID(req.member_id)) == req.member_id  # KIP-1082: generated by the client
    assert req.member_epoch == 0
    assert req.subscribed_topic_names == ["a", "b"]
    assert req.subscribed_topic_regex is None
    assert req.rebalance_timeout_ms == 1234  # max_poll_interval_ms, as Java
    assert req.rack_id == "r1"
    assert req.server_assignor == "range"
    assert req.instance_id == "i1"
    assert req.topic_partitions == []  # must be empty (not null) when joining
    assert m.heartbeat_request(0) is None  # one heartbeat in flight at a time


def test_heartbeat_interval_comes_from_the_broker_and_unchanged_fields_are_not_repeated() -> None:
    m = joined()
    assert m.heartbeat_interval_ms == 5000
    assert m.time_to_heartbeat(100) == 4900
    assert m.heartbeat_request(4999) is None
    req = m.heartbeat_request(5000)
    assert req is not None and req.member_epoch == 1
    assert req.subscribed_topic_names is None  # null: unchanged
    assert req.topic_partitions is None
    assert req.rebalance_timeout_ms == -1
    assert req.rack_id is None
    m.heartbeat_response(ok(1, interval=2000), 5000)
    assert m.time_to_heartbeat(5000) == 2000


def test_a_new_subscription_goes_out_at_once_and_only_the_names() -> None:
    m = joined()
    m.heartbeat_request(5000)
    m.heartbeat_response(ok(1), 5000)
    m.update_subscription(["t", "u"], None, True, 6000)
    req = m.heartbeat_request(6000)
    assert req is not None and req.subscribed_topic_names == ["t", "u"]
    assert req.topic_partitions is None


def test_first_reconciliation_calls_the_assign_listener_even_for_nothing() -> None:
    m = ConsumerMembership(settings(), now=0)
    m.update_subscription(["t"], None, True, 0)
    m.tick(0, resolve())
    m.coordinator_found(1, 0)
    m.heartbeat_request(0)
    assert m.heartbeat_response(ok(3, assignment()), 0)
    assert m.state is ConsumerMemberState.RECONCILING
    assert kinds(run_batch(m, m.tick(0, resolve()), 0)) == ["Continue", "assigned:[]"]
    assert m.state is ConsumerMemberState.ACKNOWLEDGING
    assert m.epoch == 3


# ----------------------------------------------------------------------------- reconciliation


def test_incremental_reconciliation_order_revoke_commit_listener_ack_then_assign() -> None:
    m = joined(parts=(0, 1, 2))
    m.heartbeat_request(5000)
    assert m.heartbeat_response(ok(2, assignment((TID, [1, 2, 3]))), 5000)
    assert m.state is ConsumerMemberState.RECONCILING
    first = m.tick(5000, resolve())
    assert kinds(first) == [
        "FreezePartitions:[0]",
        "CommitOffsets",
        "revoked:[0]",
        "RemovePartitions:[0]",
        "Continue",
    ]
    assert first[1] == CommitOffsets(None)  # every consumed position, as Java before a revocation
    # While the revoke listener runs, heartbeats still report partition 0 as owned: the
    # coordinator must not give it to anyone else yet.
    during = m.heartbeat_request(10000)
    assert during is not None and during.topic_partitions is None  # unchanged: still 0, 1, 2
    m.heartbeat_response(ok(2), 10000)
    # The revocation is done: the second half acknowledges before taking the new partitions.
    cont = first[-1]
    assert isinstance(cont, Continue)
    second = m.resume(cont.attempt, cont.step, 10001)
    assert m.state is ConsumerMemberState.ACKNOWLEDGING
    ack = m.heartbeat_request(10001)  # due at once
    assert ack is not None and owned_ids(ack) == {(TID, 1), (TID, 2), (TID, 3)} and ack.member_epoch == 2
    assert kinds(second) == ["AddPartitions:[3]", "assigned:[3]"]
    assert m.owned == {TP("t", 1), TP("t", 2), TP("t", 3)}
    m.heartbeat_response(ok(2), 10002)
    assert m.state is ConsumerMemberState.STABLE


def test_an_acknowledgement_due_while_a_heartbeat_is_in_flight_goes_right_after_it() -> None:
    m = joined(parts=(0, 1))
    m.heartbeat_request(5000)
    m.heartbeat_response(ok(2, assignment((TID, [0]))), 5000)
    batch = m.tick(5000, resolve())
    m.heartbeat_request(10000)  # in flight while the reconciliation completes
    run_batch(m, batch[-1:], 10001)
    assert m.heartbeat_request(10001) is None  # one at a time
    m.heartbeat_response(ok(2), 10002)  # answers the heartbeat that still reported 0 and 1
    ack = m.heartbeat_request(10002)
    assert ack is not None and owned_ids(ack) == {(TID, 0)}


def test_rebalances_are_counted_from_the_assignment_to_the_answered_acknowledgement() -> None:
    m = joined(parts=(0, 1))  # joined at 0, stable at 0
    assert (m.rebalances, m.rebalance_started) == (1, None)
    m.heartbeat_request(5000)
    m.heartbeat_response(ok(2, assignment((TID, [0]))), 5000)
    assert m.rebalance_started == 5000
    run_batch(m, m.tick(5000, resolve()), 5300)
    m.heartbeat_request(5300)
    m.heartbeat_response(ok(2), 5400)
    assert m.state is ConsumerMemberState.STABLE
    assert (m.rebalances, m.last_rebalance_ms, m.rebalance_ms_total, m.rebalance_started) == (
        2,
        400,
        400,
        None,
    )


def test_no_commit_before_revocation_without_auto_commit() -> None:
    m = joined(parts=(0, 1), enable_auto_commit=False)
    m.heartbeat_request(5000)
    m.heartbeat_response(ok(2, assignment((TID, [1]))), 5000)
    assert kinds(m.tick(5000, resolve())) == [
        "FreezePartitions:[0]",
        "revoked:[0]",
        "RemovePartitions:[0]",
        "Continue",
    ]


def test_same_partitions_with_a_new_epoch_need_no_reconciliation() -> None:
    m = joined(parts=(0, 1), enable_auto_commit=False)
    m.heartbeat_request(5000)
    assert m.heartbeat_response(ok(4, assignment((TID, [0, 1]))), 5000) is False
    assert m.state is ConsumerMemberState.STABLE
    assert m.epoch == 4
    assert m.tick(5000, resolve()) == []


def test_topic_ids_not_in_metadata_wait_while_the_rest_is_reconciled() -> None:
    m = joined(parts=(0,))
    m.heartbeat_request(5000)
    m.heartbeat_response(ok(2, assignment((TID, [0]), (TID2, [0, 1]))), 5000)
    only_t = resolve({TID: "t"})
    acts = m.tick(5000, only_t)
    assert acts[0] == ResolveTopics(frozenset({TID2}))
    # Nothing of t changed: nothing to do until u is known; asked again only after a backoff.
    assert kinds(acts) == ["ResolveTopics"]
    assert m.state is ConsumerMemberState.RECONCILING
    assert m.tick(5001, only_t) == []
    assert m.tick(5000 + 1000, only_t) == [ResolveTopics(frozenset({TID2}))]
    # The metadata now knows u.
    done = run_batch(m, m.tick(6100, resolve()), 6100)
    assert kinds(done) == ["Continue", "AddPartitions:[0, 1]", "assigned:[0, 1]"]
    assert m.owned == {TP("t", 0), TP("u", 0), TP("u", 1)}
    ack = m.heartbeat_request(6100)
    assert ack is not None and owned_ids(ack) == {(TID, 0), (TID2, 0), (TID2, 1)}


def test_a_partial_reconciliation_reports_what_is_owned_and_stays_reconciling() -> None:
    m = ConsumerMembership(settings(), now=0)
    m.update_subscription(["t", "u"], None, True, 0)
    m.tick(0, resolve())
    m.coordinator_found(1, 0)
    m.heartbeat_request(0)
    m.heartbeat_response(ok(1, assignment((TID, [0]), (TID2, [0]))), 0)
    acts = run_batch(m, m.tick(0, resolve({TID: "t"})), 0)
    assert kinds(acts) == ["ResolveTopics", "Continue", "AddPartitions:[0]", "assigned:[0]"]
    assert m.state is ConsumerMemberState.RECONCILING
    ack = m.heartbeat_request(0)
    assert ack is not None and owned_ids(ack) == {(TID, 0)}


def test_a_fence_during_the_revoke_listener_voids_the_rest_of_the_reconciliation() -> None:
    m = joined(parts=(0, 1))
    m.heartbeat_request(5000)
    m.heartbeat_response(ok(2, assignment((TID, [1, 2]))), 5000)
    first = m.tick(5000, resolve())
    m.heartbeat_request(5000 + 5000)
    assert m.heartbeat_response(error(FENCED_MEMBER_EPOCH), 10000)  # while the listener runs
    cont = first[-1]
    assert isinstance(cont, Continue)
    assert m.resume(cont.attempt, cont.step, 10000) == []
    # What is left (partition 1) is lost, then the member rejoins.
    assert kinds(run_batch(m, m.tick(10000, resolve()), 10000)) == [
        "FreezePartitions:[1]",
        "lost:[1]",
        "RemovePartitions:[1]",
        "Continue",
    ]
    assert m.state is ConsumerMemberState.JOINING and m.owned == set()


# ----------------------------------------------------------------------------- fencing and errors


@pytest.mark.parametrize("code", [FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_its_partitions_then_rejoins_with_epoch_zero_and_the_same_id(code: int) -> None:
    m = joined(parts=(0, 1))
    member_id = m.member_id
    m.heartbeat_request(5000)
    assert m.heartbeat_response(error(code), 5000)
    assert m.state is ConsumerMemberState.FENCED
    assert m.commit_identity() is None
    assert m.heartbeat_request(5000) is None  # no heartbeat until the lost listener ran
    acts = m.tick(5000, resolve())
    assert kinds(acts) == ["FreezePartitions:[0, 1]", "lost:[0, 1]", "RemovePartitions:[0, 1]", "Continue"]
    assert m.heartbeat_request(5000) is None
    run_batch(m, acts, 5000)
    assert m.state is ConsumerMemberState.JOINING
    req = m.heartbeat_request(5000)
    assert req is not None and req.member_epoch == 0 and req.member_id == member_id
    assert req.subscribed_topic_names == ["t"] and req.topic_partitions == []


def test_an_answer_to_a_heartbeat_of_an_abandoned_membership_is_ignored() -> None:
    m = joined()
    stale = m.heartbeat_request(5000)
    assert stale is not None
    m.coordinator_lost(5000)  # the in-flight heartbeat is abandoned
    m.coordinator_found(2, 5001)
    assert m.heartbeat_request(5001) is not None
    m.heartbeat_response(error(FENCED_MEMBER_EPOCH), 5002)  # answer to the second one
    assert m.state is ConsumerMemberState.FENCED
    run_batch(m, m.tick(5002, resolve()), 5002)
    m.heartbeat_request(5002)
    assert m.heartbeat_response(ok(9, assignment((TID, [0]))), 5003)
    assert m.epoch == 9


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        (UNRELEASED_INSTANCE_ID, UnreleasedInstanceIdError),
        (FENCED_INSTANCE_ID, FencedInstanceIdError),
        (GROUP_MAX_SIZE_REACHED, GroupMaxSizeReachedError),
        (UNSUPPORTED_ASSIGNOR, UnsupportedAssignorError),
        (INVALID_REGULAR_EXPRESSION, InvalidRegularExpressionError),
        (GROUP_AUTHORIZATION_FAILED, GroupAuthorizationFailedError),
        (INVALID_REQUEST, InvalidRequestError),
        (UNSUPPORTED_VERSION, UnsupportedVersionError),
    ],
)
def test_fatal_heartbeat_errors(code: int, error_type: type[Exception]) -> None:
    m = ConsumerMembership(settings(group_instance_id="i"), now=0)
    m.update_subscription(["t"], None, True, 0)
    m.tick(0, resolve())
    m.coordinator_found(1, 0)
    m.heartbeat_request(0)
    assert m.heartbeat_response(error(code), 0)
    assert m.state is ConsumerMemberState.FAILED
    assert isinstance(m.fatal, error_type)
    assert m.heartbeat_request(10**6) is None
    assert m.tick(10**6, resolve()) == []


def test_unsupported_version_names_the_classic_protocol() -> None:
    m = ConsumerMembership(settings(), now=0)
    m.update_subscription(["t"], None, True, 0)
    m.tick(0, resolve())
    m.coordinator_found(1, 0)
    m.heartbeat_request(0)
    assert m.heartbeat_failed(UnsupportedVersionError("ConsumerGroupHeartbeat"), 0)
    assert m.state is ConsumerMemberState.FAILED
    assert "group_protocol='classic'" in str(m.fatal)


def test_a_regex_the_broker_cannot_take_is_fatal_with_the_reason() -> None:
    from aiokafka_lite.core.errors import VersionError

    m = ConsumerMembership(settings(), now=0)
    m.update_subscription([], "t.*", True, 0)
    m.tick(0, resolve())
    m.coordinator_found(1, 0)
    m.heartbeat_request(0)
    assert m.heartbeat_failed(VersionError("subscribed_topic_regex at version 0"), 0)
    assert isinstance(m.fatal, ConfigError) and "v1" in str(m.fatal)


def test_topic_authorization_failure_is_reported_and_the_member_stays() -> None:
    m = joined()
    m.heartbeat_request(5000)
    assert m.heartbeat_response(error(TOPIC_AUTHORIZATION_FAILED), 5000)
    assert isinstance(m.reported, TopicAuthorizationFailedError)
    assert m.state is ConsumerMemberState.STABLE and m.epoch == 1
    assert m.heartbeat_request(10000) is not None


def test_coordinator_moved_is_looked_up_again_and_every_field_resent() -> None:
    m = joined()
    m.heartbeat_request(5000)
    assert m.heartbeat_response(error(NOT_COORDINATOR), 5000)
    assert m.coordinator is None and m.state is ConsumerMemberState.STABLE
    assert m.tick(5000, resolve()) == [FindCoordinator(True)]
    m.coordinator_found(2, 5001)
    req = m.heartbeat_request(5001)
    assert req is not None and req.member_epoch == 1
    assert req.subscribed_topic_names == ["t"] and owned_ids(req) == {(TID, 0), (TID, 1), (TID, 2)}


def test_coordinator_loading_retries_after_a_backoff() -> None:
    m = joined(retry_backoff_ms=100)
    m.heartbeat_request(5000)
    assert not m.heartbeat_response(error(COORDINATOR_LOAD_IN_PROGRESS), 5000)
    assert m.heartbeat_request(5050) is None
    assert m.heartbeat_request(5100) is not None


def test_lost_connection_retries_at_a_new_coordinator_with_every_field() -> None:
    m = joined(retry_backoff_ms=100)
    m.heartbeat_request(5000)
    assert m.heartbeat_failed(KafkaConnectionError("reset"), 5000)
    assert m.state is ConsumerMemberState.STABLE and m.coordinator is None
    assert m.tick(5000, resolve()) == [FindCoordinator(True)]
    m.coordinator_found(1, 5001)
    req = m.heartbeat_request(5100)
    assert req is not None and req.rebalance_timeout_ms == 300000 and req.subscribed_topic_names == ["t"]


# ----------------------------------------------------------------------------- leaving


def test_close_commits_revokes_and_leaves_with_epoch_minus_one() -> None:
    m = joined(parts=(0, 1))
    acts = m.close(6000)
    assert kinds(acts) == [
        "FreezePartitions:[0, 1]",
        "CommitOffsets",
        "revoked:[0, 1]",
        "RemovePartitions:[0, 1]",
        "SendLeaveHeartbeat",
    ]
    assert m.commit_identity() == (1, m.member_id, None)  # the close commit still has the epoch
    leave = acts[-1]
    assert isinstance(leave, SendLeaveHeartbeat)
    req = m.leave_request(leave.attempt)
    assert req is not None and req.member_epoch == -1 and req.member_id == m.member_id
    m.left(leave.attempt)
    assert m.state is ConsumerMemberState.CLOSED


def test_static_member_leaves_with_epoch_minus_two() -> None:
    m = joined(group_instance_id="static-1")
    acts = m.close(6000)
    leave = acts[-1]
    assert isinstance(leave, SendLeaveHeartbeat)
    req = m.leave_request(leave.attempt)
    assert req is not None and req.member_epoch == -2 and req.instance_id == "static-1"


def test_closing_a_fenced_member_loses_instead_of_revoking_and_sends_nothing() -> None:
    m = joined(parts=(0,))
    m.heartbeat_request(5000)
    m.heartbeat_response(error(FENCED_MEMBER_EPOCH), 5000)
    assert kinds(m.close(5000)) == ["FreezePartitions:[0]", "lost:[0]", "RemovePartitions:[0]"]
    assert m.state is ConsumerMemberState.CLOSED


def test_unsubscribing_leaves_and_subscribing_again_joins_with_epoch_zero() -> None:
    m = joined(parts=(0,))
    m.update_subscription([], None, False, 6000)
    acts = m.tick(6000, resolve())
    assert kinds(acts) == [
        "FreezePartitions:[0]",
        "CommitOffsets",
        "revoked:[0]",
        "RemovePartitions:[0]",
        "SendLeaveHeartbeat",
    ]
    leave = acts[-1]
    assert isinstance(leave, SendLeaveHeartbeat)
    assert m.leave_request(leave.attempt) is not None
    m.left(leave.attempt)
    assert m.state is ConsumerMemberState.UNSUBSCRIBED
    assert m.commit_identity() == (-1, "", None)
    m.update_subscription(["t"], None, True, 7000)
    req = m.heartbeat_request(7000)
    assert req is not None and req.member_epoch == 0


def test_unsubscribing_while_joining_still_leaves_as_the_broker_may_have_added_the_member() -> None:
    m = ConsumerMembership(settings(), now=0)
    m.update_subscription(["t"], None, True, 0)
    m.tick(0, resolve())
    m.coordinator_found(1, 0)
    assert m.heartbeat_request(0) is not None  # the join is in flight
    m.update_subscription([], None, False, 1)
    acts = m.tick(1, resolve())
    assert kinds(acts) == ["SendLeaveHeartbeat"]
    leave = acts[0]
    assert isinstance(leave, SendLeaveHeartbeat)
    req = m.leave_request(leave.attempt)
    assert req is not None and req.member_epoch == -1
    m.heartbeat_response(ok(1, assignment((TID, [0]))), 2)  # the join's late answer: ignored
    m.left(leave.attempt)
    assert m.state is ConsumerMemberState.UNSUBSCRIBED and m.owned == set()


def test_poll_timeout_leaves_then_loses_and_rejoins_when_the_application_polls() -> None:
    m = joined(parts=(0, 1), max_poll_interval_ms=10000, group_instance_id="s", enable_auto_commit=False)
    m.polled(1000)
    m.heartbeat_request(5000)
    m.heartbeat_response(ok(1), 5000)
    assert m.tick(11000, resolve()) == []
    acts = m.tick(11001, resolve())
    assert kinds(acts) == ["FreezePartitions:[0, 1]", "SendLeaveHeartbeat"]  # listener waits for the app
    leave = acts[-1]
    assert isinstance(leave, SendLeaveHeartbeat)
    req = m.leave_request(leave.attempt)
    assert req is not None and req.member_epoch == -2  # static: as Java, the leave epoch of the member
    m.left(leave.attempt)
    assert m.state is ConsumerMemberState.STALE
    assert m.commit_identity() is None
    assert m.heartbeat_request(20000) is None
    assert m.tick(20000, resolve()) == []
    assert m.polled(30000)
    acts = run_batch(m, m.tick(30000, resolve()), 30000)
    assert kinds(acts) == ["FreezePartitions:[0, 1]", "lost:[0, 1]", "RemovePartitions:[0, 1]", "Continue"]
    req = m.heartbeat_request(30000)
    assert m.state is ConsumerMemberState.JOINING and req is not None and req.member_epoch == 0


# ----------------------------------------------------------------------------- commits


def test_commits_carry_the_member_epoch_and_wait_while_joining() -> None:
    m = ConsumerMembership(settings(group_instance_id="i"), now=0)
    m.update_subscription(["t"], None, True, 0)
    assert m.commit_identity() is None  # joining: no epoch yet
    m.tick(0, resolve())
    m.coordinator_found(1, 0)
    m.heartbeat_request(0)
    m.heartbeat_response(ok(5, assignment((TID, [0]))), 0)
    assert m.commit_identity() == (5, m.member_id, "i")


def test_stale_member_epoch_on_commit_heartbeats_at_once() -> None:
    m = joined()
    err = m.commit_failed(1, STALE_MEMBER_EPOCH, 1000)
    assert isinstance(err, StaleMemberEpochError)
    assert m.heartbeat_request(1000) is not None  # learn the new epoch now
    assert m.state is ConsumerMemberState.STABLE


def test_unknown_member_on_commit_fails_the_commit_and_fenced_instance_is_fatal() -> None:
    m = joined()
    assert isinstance(m.commit_failed(1, UNKNOWN_MEMBER_ID, 1000), CommitFailedError)
    assert m.state is ConsumerMemberState.STABLE  # the heartbeat decides about fencing
    assert isinstance(m.commit_failed(1, FENCED_INSTANCE_ID, 1000), FencedInstanceIdError)
    assert m.state is ConsumerMemberState.FAILED


def test_auto_commit_in_stable_state() -> None:
    m = joined(auto_commit_interval_ms=1000)
    assert m.tick(999, resolve()) == []
    assert m.tick(1000, resolve()) == [CommitOffsets(None)]
    assert m.tick(1500, resolve()) == []


# ----------------------------------------------------------------------------- regex subscriptions


def test_regex_subscription_sends_the_pattern_and_switching_back_clears_it() -> None:
    m = ConsumerMembership(settings(), now=0)
    m.update_subscription([], "orders-.*", True, 0)
    m.tick(0, resolve())
    m.coordinator_found(1, 0)
    req = m.heartbeat_request(0)
    assert req is not None and req.subscribed_topic_regex == "orders-.*" and req.subscribed_topic_names == []
    m.heartbeat_response(ok(1, assignment()), 0)
    run_batch(m, m.tick(0, resolve()), 0)
    m.heartbeat_request(0)
    m.heartbeat_response(ok(1), 0)
    m.update_subscription(["t"], None, True, 100)
    req = m.heartbeat_request(100)
    assert req is not None and req.subscribed_topic_regex == "" and req.subscribed_topic_names == ["t"]


@pytest.mark.parametrize(
    "pattern",
    ["(?=a)b.*", "a(?!b)", "(?<=x)y", "(a)\\1", "(?P<n>a)(?P=n)", "(?>ab)", "a*+", "(a)?(?(1)b|c)", "abc\\Z"],
)
def test_patterns_re2_cannot_run_are_refused(pattern: str) -> None:
    with pytest.raises(ConfigError, match="RE2/J"):
        check_re2_pattern(pattern)


@pytest.mark.parametrize("pattern", ["orders-.*", "a\\\\1", "(?i)Topic[0-9]+", "(?P<name>x)y", "x{2,3}"])
def test_patterns_re2_can_run_are_kept(pattern: str) -> None:
    assert check_re2_pattern(pattern) == pattern


def test_compiled_pattern_flags_become_inline_flags_or_are_refused() -> None:
    assert re2_pattern_of(re.compile("abc", re.IGNORECASE)) == "(?i)abc"
    assert re2_pattern_of(re.compile("a.c", re.DOTALL)) == "(?s)a.c"
    with pytest.raises(ConfigError, match="flags"):
        re2_pattern_of(re.compile("abc", re.VERBOSE))


# ----------------------------------------------------------------------------- settings


def test_options_the_broker_owns_are_refused() -> None:
    from types import SimpleNamespace

    for bad in ({"session_timeout_ms": 10000}, {"heartbeat_interval_ms": 1000}):
        with pytest.raises(ConfigError, match="broker"):  # at construction, as Java
            ConsumerConfig(group_id="g", group_protocol="consumer", **bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="broker"):  # any other config object
            ConsumerGroupSettings.from_config(SimpleNamespace(group_id="g", **bad))
    with pytest.raises(ConfigError, match="group_remote_assignor"):
        ConsumerConfig(group_id="g", group_protocol="consumer", partition_assignment_strategy=["range"])
    with pytest.raises(ConfigError, match="group_remote_assignor"):
        ConsumerGroupSettings.from_config(
            SimpleNamespace(group_id="g", partition_assignment_strategy=["range"])
        )
    # The classic protocol keeps them.
    ConsumerConfig(group_id="g", session_timeout_ms=10000, partition_assignment_strategy=["range"])
    cfg = ConsumerConfig(
        group_id="g", group_protocol="consumer", group_remote_assignor="uniform", client_rack="r"
    )
    s = ConsumerGroupSettings.from_config(cfg)
    assert (s.remote_assignor, s.rack, s.effective_rebalance_timeout_ms) == ("uniform", "r", 300000)


def test_remote_assignor_needs_the_consumer_protocol() -> None:
    with pytest.raises(ConfigError, match="group_protocol='consumer'"):
        ConsumerConfig(group_id="g", group_remote_assignor="uniform")
