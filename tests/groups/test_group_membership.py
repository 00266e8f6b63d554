"""Direct unit tests of the pure membership state machine: one test per transition/error."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest

from aiokafka_lite.consume.groups.membership import (
    Action,
    AddPartitions,
    CommitOffsets,
    ComputeAssignment,
    FindCoordinator,
    FreezePartitions,
    GroupSettings,
    InvokeListener,
    Membership,
    MemberState,
    RemovePartitions,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    leave_group_request,
)
from aiokafka_lite.consume.groups.protocol import decode_subscription, encode_assignment, encode_subscription
from aiokafka_lite.core.errors import (
    CommitFailedError,
    ConfigError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    InconsistentGroupProtocolError,
    KafkaConnectionError,
    NotCoordinatorError,
)
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.wire.messages import JoinGroupResponse, SyncGroupResponse

T = [TP("t", p) for p in range(6)]

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_MAX_SIZE_REACHED = 81
GROUP_AUTHORIZATION_FAILED = 30


def settings(**kw: object) -> GroupSettings:
    kw.setdefault("group_id", "g")
    return GroupSettings(**kw)  # type: ignore[arg-type]


def eager(**kw: object) -> GroupSettings:
    from aiokafka_lite.consume.groups.assignors import get_assignor

    return settings(assignors=(get_assignor("range"),), **kw)


def kinds(actions: Sequence[Action]) -> list[str]:
    out = []
    for a in actions:
        if isinstance(a, InvokeListener):
            out.append(f"{a.kind}:{len(a.partitions)}")
        else:
            out.append(type(a).__name__)
    return out


def join_ok(
    m: Membership,
    *,
    member_id: str = "m1",
    generation: int = 1,
    leader: str = "other",
    protocol: str | None = None,
    members: Iterable[JoinGroupResponse.JoinGroupResponseMember] = (),
) -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=0,
        generation_id=generation,
        protocol_type="consumer",
        protocol_name=protocol or m.settings.assignors[0].name,
        leader=leader,
        member_id=member_id,
        members=list(members),
    )


def sync_ok(m: Membership, tps: Iterable[TP]) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=0,
        protocol_type="consumer",
        protocol_name=m.protocol_name,
        assignment=encode_assignment(tps),
    )


def start(m: Membership, now: float = 0.0, topics: Iterable[str] = ("t",)) -> SendJoinGroup:
    """UNJOINED -> coordinator found -> PREPARING with a SendJoinGroup."""
    m.update_subscription(topics)
    acts = m.tick(now)
    assert acts == [FindCoordinator(False)]
    assert m.tick(now) == []  # lookup in flight
    m.coordinator_found(1, now)
    acts = m.tick(now)
    assert isinstance(acts[-1], SendJoinGroup)
    assert m.state is MemberState.PREPARING
    return acts[-1]


def stable(
    m: Membership, tps: Iterable[TP], *, now: float = 0.0, generation: int = 1, topics: Iterable[str] = ("t",)
) -> list[Action]:
    """Drive a fresh machine to STABLE owning ``tps`` (as a follower)."""
    join = start(m, now, topics)
    assert m.join_request(join.attempt, now) is not None
    acts = m.join_response(join.attempt, join_ok(m, generation=generation), now)
    assert isinstance(acts[0], SendSyncGroup)
    acts = m.sync_response(join.attempt, sync_ok(m, tps), now)
    assert m.state is MemberState.STABLE
    return acts


def rejoin(m: Membership, now: float) -> tuple[list[Action], SendJoinGroup]:
    acts = m.tick(now)
    assert acts and isinstance(acts[-1], SendJoinGroup)
    return acts, acts[-1]


# ----------------------------------------------------------------------------- settings


def test_settings_defaults_and_validation() -> None:
    s = settings()
    assert s.session_timeout_ms == 45000 and s.heartbeat_interval_ms == 3000
    assert s.effective_rebalance_timeout_ms == 300000
    assert [a.name for a in s.assignors] == ["cooperative-sticky"]
    assert s.rebalance_protocol == "cooperative"
    with pytest.raises(ConfigError):
        settings(heartbeat_interval_ms=5000, session_timeout_ms=5000)
    with pytest.raises(ConfigError):
        settings(group_id="")
    with pytest.raises(ConfigError):
        settings(group_instance_id="")


def test_settings_from_consumer_config() -> None:
    from aiokafka_lite.consume.consumer_config import ConsumerConfig

    cfg = ConsumerConfig(group_id="grp", partition_assignment_strategy=["range", "cooperative-sticky"])
    s = GroupSettings.from_config(cfg)
    assert s.group_id == "grp"
    assert [a.name for a in s.assignors] == ["range", "cooperative-sticky"]
    # One eager assignor in the list makes the member eager (KIP-429 upgrade path).
    assert s.rebalance_protocol == "eager"
    with pytest.raises(ConfigError):
        GroupSettings.from_config(ConsumerConfig(group_id=None))
    with pytest.raises(ConfigError):
        GroupSettings.from_config(ConsumerConfig(group_id="g", partition_assignment_strategy=["nope"]))
    with pytest.raises(ConfigError):
        GroupSettings.from_config(ConsumerConfig(group_id="g", group_protocol="consumer"))


# ----------------------------------------------------------------------------- joining


def test_unsubscribed_member_does_nothing() -> None:
    m = Membership(settings())
    assert m.tick(0) == []
    assert m.commit_identity() == (-1, "", None)  # offsets-only use


def test_find_coordinator_failure_backs_off_and_invalidates() -> None:
    m = Membership(settings(retry_backoff_ms=100, retry_backoff_max_ms=400))
    m.update_subscription(["t"])
    assert m.tick(0) == [FindCoordinator(False)]
    m.coordinator_failed(KafkaConnectionError("x"), 0)
    assert m.tick(50) == []
    assert m.tick(100) == [FindCoordinator(True)]
    m.coordinator_failed(KafkaConnectionError("x"), 100)
    assert m.tick(250) == []  # doubled backoff
    assert m.tick(300) == [FindCoordinator(True)]


def test_find_coordinator_authorization_failure_is_fatal() -> None:
    m = Membership(settings())
    m.update_subscription(["t"])
    m.tick(0)
    m.coordinator_failed(GroupAuthorizationFailedError("no"), 0)
    assert m.state is MemberState.FAILED
    assert isinstance(m.fatal, GroupAuthorizationFailedError)
    assert m.tick(1000) == []


def test_join_request_contents() -> None:
    m = Membership(settings(group_instance_id="inst", rack="rack-a", session_timeout_ms=10000))
    join = start(m)
    req = m.join_request(join.attempt, 0)
    assert req is not None
    assert m.state is MemberState.JOINING
    assert req.group_id == "g" and req.member_id == "" and req.group_instance_id == "inst"
    assert req.session_timeout_ms == 10000 and req.rebalance_timeout_ms == 300000
    assert req.protocol_type == "consumer"
    assert [p.name for p in req.protocols] == ["cooperative-sticky"]
    sub = decode_subscription(req.protocols[0].metadata)
    assert sub.topics == ["t"] and sub.rack == "rack-a" and sub.generation == -1
    assert join.timeout_ms == 300000 + 5000
    # a second call for the same attempt is refused (already joining)
    assert m.join_request(join.attempt, 0) is None


def test_member_id_required_rejoins_immediately_with_given_id() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    acts = m.join_response(
        join.attempt, JoinGroupResponse(error_code=MEMBER_ID_REQUIRED, member_id="m-42"), 0
    )
    assert kinds(acts) == ["SendJoinGroup"]
    nxt = acts[0]
    assert isinstance(nxt, SendJoinGroup) and nxt.attempt != join.attempt
    req = m.join_request(nxt.attempt, 0)
    assert req is not None and req.member_id == "m-42"


def test_follower_join_then_sync_assigns_and_calls_listener() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    acts = m.join_response(join.attempt, join_ok(m, member_id="m1", generation=5), 0)
    assert m.state is MemberState.SYNCING and m.generation == 5 and m.member_id == "m1"
    (sync,) = acts
    assert isinstance(sync, SendSyncGroup)
    assert (
        sync.request.generation_id == 5 and sync.request.member_id == "m1" and sync.request.assignments == []
    )
    acts = m.sync_response(join.attempt, sync_ok(m, T[:3]), 0)
    assert acts == [AddPartitions(frozenset(T[:3])), InvokeListener("assigned", frozenset(T[:3]))]
    assert m.state is MemberState.STABLE and m.owned == set(T[:3])
    assert m.commit_identity() == (5, "m1", None)


def test_leader_computes_assignment_then_syncs_it() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    members = [
        JoinGroupResponse.JoinGroupResponseMember(member_id="m1", metadata=encode_subscription(["t"])),
        JoinGroupResponse.JoinGroupResponseMember(member_id="m2", metadata=encode_subscription(["t"])),
    ]
    acts = m.join_response(join.attempt, join_ok(m, member_id="m1", leader="m1", members=members), 0)
    (compute,) = acts
    assert isinstance(compute, ComputeAssignment)
    assert m.state is MemberState.ASSIGNING and m.is_leader
    assert [mm.member_id for mm in compute.members] == ["m1", "m2"]
    assert compute.assignor.name == "cooperative-sticky"
    acts = m.assignment_computed(join.attempt, {"m1": b"a1", "m2": b"a2"}, {"t": 6}, 0)
    (sync,) = acts
    assert isinstance(sync, SendSyncGroup)
    assert {(a.member_id, a.assignment) for a in sync.request.assignments} == {("m1", b"a1"), ("m2", b"a2")}
    assert m.assigned_topic_counts == {"t": 6}


def test_leader_with_skip_assignment_syncs_like_follower() -> None:
    m = Membership(settings(group_instance_id="s"))
    join = start(m)
    m.join_request(join.attempt, 0)
    resp = join_ok(m, member_id="m1", leader="m1")
    resp.skip_assignment = True
    acts = m.join_response(join.attempt, resp, 0)
    assert kinds(acts) == ["SendSyncGroup"]
    assert m.is_leader


def test_assignor_failure_is_fatal() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m, member_id="m1", leader="m1"), 0)
    assert m.assignment_failed(join.attempt, ValueError("bug"), 0) == []
    assert m.state is MemberState.FAILED and "bug" in str(m.fatal)


def test_leader_metadata_unavailable_rejoins_after_backoff() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m, member_id="m1", leader="m1"), 0)
    assert m.assignment_io_failed(join.attempt, KafkaConnectionError("x"), 0) == []
    assert m.state is MemberState.UNJOINED
    assert m.tick(1) == []
    assert kinds(m.tick(200)) == ["SendJoinGroup"]


def test_unknown_protocol_selected_is_fatal() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    assert m.join_response(join.attempt, join_ok(m, protocol="mystery"), 0) == []
    assert isinstance(m.fatal, InconsistentGroupProtocolError)


def test_stale_responses_are_ignored() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m), 0)
    # an answer for an older attempt changes nothing
    assert m.join_response(join.attempt - 1, join_ok(m, generation=99), 0) == []
    assert m.sync_response(join.attempt - 1, sync_ok(m, T), 0) == []
    assert m.state is MemberState.SYNCING and m.generation == 1


@pytest.mark.parametrize(
    ("code", "member_after", "generation_after"),
    [(UNKNOWN_MEMBER_ID, "", -1), (ILLEGAL_GENERATION, "m1", -1), (REBALANCE_IN_PROGRESS, "m1", 1)],
)
def test_join_errors_that_rejoin_immediately(code: int, member_after: str, generation_after: int) -> None:
    m = Membership(settings())
    stable(m, T[:2])
    m.request_rejoin("test")
    _, join = rejoin(m, 10)
    m.join_request(join.attempt, 10)
    acts = m.join_response(join.attempt, JoinGroupResponse(error_code=code), 10)
    assert isinstance(acts[-1], SendJoinGroup)
    assert m.member_id == member_after and m.generation == generation_after
    if generation_after < 0:
        # ownership is uncertain: partitions are lost, not revoked, and not committed
        assert kinds(acts) == ["FreezePartitions", "lost:2", "RemovePartitions", "SendJoinGroup"]
    else:
        assert kinds(acts) == ["CommitOffsets", "SendJoinGroup"]


@pytest.mark.parametrize("code", [COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR])
def test_join_coordinator_moved_rediscovers(code: int) -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    assert m.join_response(join.attempt, JoinGroupResponse(error_code=code), 0) == []
    assert m.coordinator is None and m.state is MemberState.UNJOINED
    assert m.tick(0) == []  # backoff
    assert m.tick(150) == [FindCoordinator(True)]
    m.coordinator_found(2, 150)
    assert kinds(m.tick(150)) == ["SendJoinGroup"]


def test_join_coordinator_loading_retries_after_backoff_keeping_coordinator() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    assert m.join_response(join.attempt, JoinGroupResponse(error_code=COORDINATOR_LOAD_IN_PROGRESS), 0) == []
    assert m.coordinator == 1
    assert m.tick(50) == []
    assert kinds(m.tick(100)) == ["SendJoinGroup"]


@pytest.mark.parametrize(
    ("code", "exc"),
    [
        (GROUP_MAX_SIZE_REACHED, GroupMaxSizeReachedError),
        (FENCED_INSTANCE_ID, FencedInstanceIdError),
        (23, InconsistentGroupProtocolError),
        (GROUP_AUTHORIZATION_FAILED, GroupAuthorizationFailedError),
    ],
)
def test_join_fatal_errors(code: int, exc: type[Exception]) -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    assert m.join_response(join.attempt, JoinGroupResponse(error_code=code), 0) == []
    assert m.state is MemberState.FAILED and isinstance(m.fatal, exc)
    assert m.tick(10_000) == []


def test_join_transport_failure_rediscovers() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    assert m.join_failed(join.attempt, KafkaConnectionError("reset"), 0) == []
    assert m.coordinator is None and m.rejoin_needed
    assert m.tick(200) == [FindCoordinator(True)]


# ----------------------------------------------------------------------------- sync errors


@pytest.mark.parametrize(
    ("code", "lost"), [(REBALANCE_IN_PROGRESS, False), (UNKNOWN_MEMBER_ID, True), (ILLEGAL_GENERATION, True)]
)
def test_sync_errors_rejoin(code: int, lost: bool) -> None:
    m = Membership(settings())
    stable(m, T[:2])
    m.request_rejoin("x")
    _, join = rejoin(m, 0)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m, generation=2), 0)
    acts = m.sync_response(join.attempt, SyncGroupResponse(error_code=code), 0)
    assert isinstance(acts[-1], SendJoinGroup)
    assert ("lost:2" in kinds(acts)) is lost


def test_sync_fenced_is_fatal() -> None:
    m = Membership(settings(group_instance_id="i"))
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m), 0)
    m.sync_response(join.attempt, SyncGroupResponse(error_code=FENCED_INSTANCE_ID), 0)
    assert isinstance(m.fatal, FencedInstanceIdError)


def test_sync_not_coordinator_and_transport_failure() -> None:
    for fail in ("code", "transport"):
        m = Membership(settings())
        join = start(m)
        m.join_request(join.attempt, 0)
        m.join_response(join.attempt, join_ok(m), 0)
        if fail == "code":
            acts = m.sync_response(join.attempt, SyncGroupResponse(error_code=NOT_COORDINATOR), 0)
        else:
            acts = m.sync_failed(join.attempt, KafkaConnectionError("x"), 0)
        assert acts == [] and m.coordinator is None and m.state is MemberState.UNJOINED
        assert m.generation == 1  # membership itself is not in doubt


def test_sync_unreadable_assignment_rejoins() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m), 0)
    bad = SyncGroupResponse(error_code=0, protocol_name=m.protocol_name, assignment=b"\x00\x00\xff")
    assert m.sync_response(join.attempt, bad, 0) == []
    assert m.state is MemberState.UNJOINED and m.owned == set()


def test_sync_protocol_mismatch_is_fatal() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m), 0)
    resp = sync_ok(m, T)
    resp.protocol_name = "range"
    m.sync_response(join.attempt, resp, 0)
    assert isinstance(m.fatal, InconsistentGroupProtocolError)


# ----------------------------------------------------------------------------- cooperative / eager


def test_cooperative_rebalance_revokes_only_moved_partitions_then_rejoins() -> None:
    m = Membership(settings())
    stable(m, T)
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, REBALANCE_IN_PROGRESS, 3001)
    assert m.rejoin_needed
    acts, join = rejoin(m, 3001)
    # cooperative: nothing revoked before joining; progress committed
    assert kinds(acts) == ["CommitOffsets", "SendJoinGroup"]
    assert m.owned == set(T)
    req = m.join_request(join.attempt, 3001)
    assert req is not None
    sub = decode_subscription(req.protocols[0].metadata)
    assert sub.owned_partitions == T and sub.generation == 1
    m.join_response(join.attempt, join_ok(m, generation=2), 3002)
    acts = m.sync_response(join.attempt, sync_ok(m, T[:3]), 3003)
    moved = frozenset(T[3:])
    assert acts == [
        FreezePartitions(moved),
        InvokeListener("revoked", moved),
        CommitOffsets(moved),
        RemovePartitions(moved),
        InvokeListener("assigned", frozenset()),
    ]
    assert m.owned == set(T[:3])
    # follow-up rebalance requested so the leader can hand the moved partitions over
    assert m.rejoin_needed and m.state is MemberState.STABLE
    acts, join = rejoin(m, 3004)
    m.join_request(join.attempt, 3004)
    m.join_response(join.attempt, join_ok(m, generation=3), 3005)
    acts = m.sync_response(join.attempt, sync_ok(m, T[:3]), 3006)
    assert acts == [InvokeListener("assigned", frozenset())]
    assert not m.rejoin_needed


def test_cooperative_gains_partitions_without_revoking() -> None:
    m = Membership(settings(enable_auto_commit=False))
    stable(m, T[:2])
    m.request_rejoin("x")
    acts, join = rejoin(m, 1)
    assert kinds(acts) == ["SendJoinGroup"]  # no auto-commit configured
    m.join_request(join.attempt, 1)
    m.join_response(join.attempt, join_ok(m, generation=2), 1)
    acts = m.sync_response(join.attempt, sync_ok(m, T[:4]), 1)
    assert acts == [AddPartitions(frozenset(T[2:4])), InvokeListener("assigned", frozenset(T[2:4]))]


def test_cooperative_revokes_unsubscribed_topics_before_joining() -> None:
    m = Membership(settings())
    stable(m, [TP("t", 0), TP("u", 0)], topics=["t", "u"])
    m.update_subscription(["t"])
    assert m.rejoin_needed
    acts, join = rejoin(m, 1)
    gone = frozenset({TP("u", 0)})
    assert acts[:4] == [
        FreezePartitions(gone),
        InvokeListener("revoked", gone),
        CommitOffsets(gone),
        RemovePartitions(gone),
    ]
    assert acts[4] == CommitOffsets(frozenset({TP("t", 0)}))
    req = m.join_request(join.attempt, 1)
    assert req is not None
    assert decode_subscription(req.protocols[0].metadata).owned_partitions == [TP("t", 0)]


def test_eager_revokes_everything_before_joining_and_remembers_for_sticky() -> None:
    from aiokafka_lite.consume.groups.assignors import decode_sticky_user_data, get_assignor

    m = Membership(settings(assignors=(get_assignor("sticky"),)))
    stable(m, T[:3])
    m.request_rejoin("x")
    acts, join = rejoin(m, 1)
    everything = frozenset(T[:3])
    assert acts == [
        FreezePartitions(everything),
        InvokeListener("revoked", everything),
        CommitOffsets(everything),
        RemovePartitions(everything),
        join,
    ]
    req = m.join_request(join.attempt, 1)
    assert req is not None
    sub = decode_subscription(req.protocols[0].metadata)
    assert sub.owned_partitions == []  # eager: owns nothing while joining
    assert sub.user_data is not None
    assert decode_sticky_user_data(sub.user_data).partitions == T[:3]  # but the assignor knows
    m.join_response(join.attempt, join_ok(m, generation=2), 1)
    acts = m.sync_response(join.attempt, sync_ok(m, T[:2]), 1)
    assert acts == [AddPartitions(frozenset(T[:2])), InvokeListener("assigned", frozenset(T[:2]))]


def test_eager_without_auto_commit_does_not_commit() -> None:
    m = Membership(eager(enable_auto_commit=False))
    stable(m, T[:1])
    m.request_rejoin("x")
    acts, _ = rejoin(m, 1)
    assert kinds(acts) == ["FreezePartitions", "revoked:1", "RemovePartitions", "SendJoinGroup"]


# ----------------------------------------------------------------------------- heartbeats


def test_heartbeat_schedule_and_contents() -> None:
    m = Membership(settings(group_instance_id="i"))
    assert m.heartbeat_request(0) is None  # not a member
    stable(m, T[:1], now=0)
    assert m.time_to_heartbeat(1000) == 2000
    assert m.heartbeat_request(1000) is None
    hb = m.heartbeat_request(3000)
    assert hb is not None and (hb.generation_id, hb.member_id, hb.group_instance_id) == (1, "m1", "i")
    assert m.heartbeat_request(3000) is None and m.time_to_heartbeat(3000) is None  # in flight
    m.heartbeat_response(hb, NONE, 3010)
    assert m.time_to_heartbeat(3010) == pytest.approx(2990)


def test_heartbeat_rebalance_in_progress_while_syncing_is_ignored() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m), 0)
    hb = m.heartbeat_request(3000)
    assert hb is not None  # heartbeats continue while waiting for SyncGroup
    m.heartbeat_response(hb, REBALANCE_IN_PROGRESS, 3000)
    assert not m.rejoin_needed and m.state is MemberState.SYNCING


@pytest.mark.parametrize(("code", "member_after"), [(UNKNOWN_MEMBER_ID, ""), (ILLEGAL_GENERATION, "m1")])
def test_heartbeat_fencing_loses_partitions(code: int, member_after: str) -> None:
    m = Membership(settings())
    stable(m, T[:2])
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, code, 3000)
    assert m.generation == -1 and m.member_id == member_after
    assert m.commit_identity() is None
    acts, _ = rejoin(m, 3000)
    assert kinds(acts) == ["FreezePartitions", "lost:2", "RemovePartitions", "SendJoinGroup"]


def test_heartbeat_fencing_abandons_in_flight_sync() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m), 0)
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, UNKNOWN_MEMBER_ID, 3000)
    assert m.state is MemberState.UNJOINED
    # the SyncGroup answer that arrives afterwards is ignored
    assert m.sync_response(join.attempt, sync_ok(m, T), 3001) == []
    assert m.owned == set()


def test_heartbeat_fenced_instance_is_fatal() -> None:
    m = Membership(settings(group_instance_id="i"))
    stable(m, T[:1])
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, FENCED_INSTANCE_ID, 3000)
    assert isinstance(m.fatal, FencedInstanceIdError) and m.state is MemberState.FAILED


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
def test_heartbeat_coordinator_moved_keeps_assignment(code: int) -> None:
    m = Membership(settings())
    stable(m, T[:2])
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, code, 3000)
    assert m.coordinator is None and m.owned == set(T[:2]) and m.generation == 1
    assert m.tick(3000) == [FindCoordinator(True)]
    m.coordinator_found(3, 3000)
    assert m.heartbeat_request(3000) is not None  # heartbeats resume with the new coordinator
    assert not m.rejoin_needed and m.tick(3000) == []  # and no rebalance: still generation 1


def test_heartbeat_transport_failure_while_stable_does_not_rejoin() -> None:
    """The coordinator's broker died: rediscover it and carry on with the generation."""
    m = Membership(settings())
    stable(m, T[:2])
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_failed(hb, KafkaConnectionError("connection refused"), 3000)
    assert m.state is MemberState.STABLE and not m.rejoin_needed
    assert m.tick(3000) == [FindCoordinator(True)]
    m.coordinator_found(2, 3000)
    assert m.tick(3000) == []
    hb = m.heartbeat_request(3000)
    assert hb is not None and (hb.generation_id, hb.member_id) == (1, "m1")


def test_heartbeat_coordinator_lost_while_syncing_starts_the_join_over() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m), 0)
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, NOT_COORDINATOR, 3000)
    assert m.state is MemberState.UNJOINED and m.rejoin_needed
    assert m.sync_response(join.attempt, sync_ok(m, T), 3001) == []  # the abandoned exchange


def test_heartbeat_transport_failure_and_stale_answers() -> None:
    m = Membership(settings())
    stable(m, T[:2])
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_failed(hb, KafkaConnectionError("x"), 3000)
    assert m.coordinator is None
    m2 = Membership(settings())
    stable(m2, T[:2])
    old = m2.heartbeat_request(3000)
    assert old is not None
    old.generation_id = 0  # answer for an older generation
    m2.heartbeat_response(old, UNKNOWN_MEMBER_ID, 3000)
    assert m2.member_id == "m1" and m2.generation == 1


def test_heartbeat_loading_retries_after_backoff() -> None:
    m = Membership(settings(retry_backoff_ms=100))
    stable(m, T[:2])
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, COORDINATOR_LOAD_IN_PROGRESS, 3000)
    assert m.time_to_heartbeat(3000) == 100


def test_session_expiry_without_heartbeat_answers_marks_coordinator_unknown() -> None:
    m = Membership(settings(session_timeout_ms=10000))
    stable(m, T[:1])
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, COORDINATOR_LOAD_IN_PROGRESS, 3000)
    assert m.heartbeat_request(10_001) is None
    assert m.coordinator is None


# ----------------------------------------------------------------------------- poll timeout / leave


def test_poll_timeout_leaves_then_rejoins_on_next_poll_with_partitions_lost() -> None:
    m = Membership(settings(max_poll_interval_ms=10000, enable_auto_commit=False))
    stable(m, T[:2])
    assert m.tick(9000) == []
    acts = m.tick(10_001)
    assert acts == [
        FreezePartitions(frozenset(T[:2])),
        SendLeaveGroup("m1", None, "consumer poll timeout has expired"),
    ]
    assert m.poll_timed_out and m.member_id == "" and m.generation == -1
    assert m.tick(20_000) == []  # waits for the application
    m.polled(20_000)
    acts, _ = rejoin(m, 20_000)
    assert kinds(acts) == ["FreezePartitions", "lost:2", "RemovePartitions", "SendJoinGroup"]


def test_static_member_does_not_send_leave_group() -> None:
    m = Membership(settings(group_instance_id="i", max_poll_interval_ms=10000))
    stable(m, T[:1])
    assert kinds(m.tick(10_001)) == ["FreezePartitions"]
    m2 = Membership(settings(group_instance_id="i"))
    stable(m2, T[:1])
    assert "SendLeaveGroup" not in kinds(m2.close(1))


def test_close_revokes_commits_and_leaves() -> None:
    m = Membership(settings())
    stable(m, T[:2])
    acts = m.close(5)
    both = frozenset(T[:2])
    assert acts == [
        FreezePartitions(both),
        InvokeListener("revoked", both),
        CommitOffsets(both),
        RemovePartitions(both),
        SendLeaveGroup("m1", None, "the consumer is being closed"),
    ]
    assert m.state is MemberState.CLOSED
    assert m.close(6) == [] and m.tick(7) == []


def test_close_after_fencing_reports_lost_and_does_not_commit() -> None:
    m = Membership(settings())
    stable(m, T[:2])
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, UNKNOWN_MEMBER_ID, 3000)
    assert kinds(m.close(3001)) == ["FreezePartitions", "lost:2", "RemovePartitions"]


def test_unsubscribe_leaves_the_group() -> None:
    m = Membership(settings())
    stable(m, T[:1])
    m.update_subscription([], subscribed=False)
    acts = m.tick(1)
    assert kinds(acts) == [
        "FreezePartitions",
        "revoked:1",
        "CommitOffsets",
        "RemovePartitions",
        "SendLeaveGroup",
    ]
    assert m.tick(2) == []


def test_leave_group_request_versions() -> None:
    old = leave_group_request("g", "m", None, "bye", 2)
    assert old.member_id == "m" and old.members == []
    new = leave_group_request("g", "m", None, "bye", 5)
    assert new.member_id == "" and [(x.member_id, x.reason) for x in new.members] == [("m", "bye")]


# ----------------------------------------------------------------------------- metadata / commits / timers


def test_leader_rejoins_when_partition_count_changes() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.join_response(join.attempt, join_ok(m, member_id="m1", leader="m1"), 0)
    m.assignment_computed(join.attempt, {"m1": encode_assignment(T)}, {"t": 6, "missing": 0}, 0)
    m.sync_response(join.attempt, sync_ok(m, T), 0)
    m.check_metadata({"t": 6})
    assert not m.rejoin_needed
    m.check_metadata({"t": 6, "missing": 2})  # a subscribed topic got created
    assert m.rejoin_needed


def test_follower_ignores_metadata_changes() -> None:
    m = Membership(settings())
    stable(m, T)
    m.check_metadata({"t": 12})
    assert not m.rejoin_needed


def test_auto_commit_timer() -> None:
    m = Membership(settings(auto_commit_interval_ms=5000))
    stable(m, T[:1], now=0)
    assert m.tick(4999) == []
    assert m.tick(5000) == [CommitOffsets(None)]
    assert m.tick(5001) == []
    assert m.next_deadline(5001) == 10_000
    m2 = Membership(settings(enable_auto_commit=False))
    stable(m2, T[:1])
    assert m2.tick(40_000) == []  # (within the session: at 45 s without a heartbeat it is lost)


@pytest.mark.parametrize(
    ("code", "fenced"),
    [(UNKNOWN_MEMBER_ID, True), (ILLEGAL_GENERATION, True), (REBALANCE_IN_PROGRESS, False)],
)
def test_commit_rejections_become_commit_failed(code: int, fenced: bool) -> None:
    m = Membership(settings())
    stable(m, T[:1])
    err = m.commit_failed(1, code, 0)
    assert isinstance(err, CommitFailedError)
    assert m.rejoin_needed
    assert (m.generation == -1) is fenced


def test_late_commit_rejection_for_old_generation_does_not_fence() -> None:
    m = Membership(settings())
    stable(m, T[:1], generation=4)
    err = m.commit_failed(3, ILLEGAL_GENERATION, 0)
    assert isinstance(err, CommitFailedError)
    assert m.generation == 4 and not m.rejoin_needed


def test_commits_wait_while_join_or_sync_is_in_flight() -> None:
    m = Membership(settings(enable_auto_commit=False))
    stable(m, T[:2], generation=2)
    m.request_rejoin("test")
    _, join = rejoin(m, 10)
    assert m.state is MemberState.PREPARING
    assert m.commit_identity() == (2, "m1", None)  # revocation callbacks may still commit
    m.join_request(join.attempt, 10)
    assert m.commit_identity() is None  # JoinGroup in flight: the generation is being replaced
    m.join_response(join.attempt, join_ok(m, generation=3), 20)
    assert m.state is MemberState.SYNCING and m.commit_identity() is None
    m.sync_response(join.attempt, sync_ok(m, T[:2]), 30)
    assert m.commit_identity() == (3, "m1", None)


@pytest.mark.parametrize("code", [ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID])
def test_commit_rejected_while_rejoining_does_not_start_another_rebalance(code: int) -> None:
    """A commit sent before the JoinGroup is answered after it (same connection, broker
    order): the rejection must not reset the member, or it rejoins again right after this
    rebalance, and again after the next one (a storm while commits keep coming)."""
    m = Membership(settings(enable_auto_commit=False))
    stable(m, T[:2], generation=2)
    hb = m.heartbeat_request(3000)
    assert hb is not None
    m.heartbeat_response(hb, REBALANCE_IN_PROGRESS, 3000)
    _, join = rejoin(m, 3000)
    m.join_request(join.attempt, 3000)
    err = m.commit_failed(2, code, 3001)
    assert isinstance(err, CommitFailedError)
    assert m.state is MemberState.JOINING and m.generation == 2 and m.member_id == "m1"
    assert not m.rejoin_needed
    acts = m.join_response(join.attempt, join_ok(m, generation=3), 3002)
    assert isinstance(acts[0], SendSyncGroup)
    m.sync_response(join.attempt, sync_ok(m, T[:2]), 3003)
    assert m.state is MemberState.STABLE and m.generation == 3
    assert not m.rejoin_needed and m.tick(3004) == []


def test_commit_not_coordinator_marks_unknown() -> None:
    m = Membership(settings())
    stable(m, T[:1])
    err = m.commit_failed(1, NOT_COORDINATOR, 0)
    assert isinstance(err, NotCoordinatorError) and m.coordinator is None


def test_commit_fenced_instance_is_fatal() -> None:
    m = Membership(settings(group_instance_id="i"))
    stable(m, T[:1])
    assert isinstance(m.commit_failed(1, FENCED_INSTANCE_ID, 0), FencedInstanceIdError)
    assert m.state is MemberState.FAILED


def test_subscription_change_while_joining_triggers_another_round() -> None:
    m = Membership(settings())
    join = start(m)
    m.join_request(join.attempt, 0)
    m.update_subscription(["t", "u"])
    m.join_response(join.attempt, join_ok(m), 0)
    m.sync_response(join.attempt, sync_ok(m, T[:1]), 0)
    assert m.rejoin_needed
    _, join2 = rejoin(m, 1)
    req = m.join_request(join2.attempt, 1)
    assert req is not None and decode_subscription(req.protocols[0].metadata).topics == ["t", "u"]
