"""``describe_consumer_groups`` / ``list_consumer_groups``: how answers of both group
protocols become descriptions (the end-to-end test with live groups of both protocols
is tests/groups/test_consumer_protocol_e2e.py)."""

from __future__ import annotations

import uuid

import pytest

from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.consumer_groups import _description, _from_classic
from aiokafka_lite.admin.types import GroupDescription, MemberDescription
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import (
    ConfigError,
    GroupIdNotFoundError,
    InvalidGroupIdError,
    UnsupportedVersionError,
)
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.wire.messages import ConsumerGroupDescribeRequest
from aiokafka_lite.wire.messages import ConsumerGroupDescribeResponse as R

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def assignment(*parts: tuple[uuid.UUID, str, list[int]]) -> R.Assignment:
    return R.Assignment(
        topic_partitions=[R.TopicPartitions(topic_id=t, topic_name=n, partitions=ps) for t, n, ps in parts]
    )


def test_a_consumer_protocol_group_keeps_epochs_assignments_and_target() -> None:
    group = R.DescribedGroup(
        group_id="g",
        group_state="Reconciling",
        group_epoch=7,
        assignment_epoch=7,
        assignor_name="uniform",
        authorized_operations=-(2**31),
        members=[
            R.Member(
                member_id="m1",
                instance_id="static-1",
                rack_id="r1",
                member_epoch=6,
                client_id="c1",
                client_host="/10.0.0.1",
                subscribed_topic_names=["a", "b"],
                subscribed_topic_regex=None,
                assignment=assignment((T1, "a", [1, 0]), (T2, "b", [0])),
                target_assignment=assignment((T1, "a", [0])),
                member_type=1,
            ),
            R.Member(
                member_id="m2",
                member_epoch=7,
                client_id="c2",
                client_host="/10.0.0.2",
                subscribed_topic_names=[],
                subscribed_topic_regex="a|b",
                assignment=assignment(),
                target_assignment=assignment((T1, "a", [1])),
                member_type=0,
            ),
        ],
    )
    d = _description(group, 3)
    assert (d.type, d.state, d.assignor, d.group_epoch, d.target_assignment_epoch) == (
        "consumer",
        "Reconciling",
        "uniform",
        7,
        7,
    )
    assert d.coordinator == 3 and d.authorized_operations is None
    m1, m2 = d.members
    assert m1.assignment == (TP("a", 0), TP("a", 1), TP("b", 0))
    assert m1.target_assignment == (TP("a", 0),)  # still revoking a-1 and b-0
    assert (m1.member_epoch, m1.group_instance_id, m1.rack_id, m1.member_type) == (
        6,
        "static-1",
        "r1",
        "consumer",
    )
    assert m1.subscribed_topics == ("a", "b") and m1.subscribed_topic_regex is None
    assert m2.subscribed_topic_regex == "a|b" and m2.member_type == "classic"
    assert m2.assignment == () and m2.target_assignment == (TP("a", 1),)


def test_a_classic_group_has_no_epochs_and_other_protocol_types_are_not_consumer_groups() -> None:
    classic = GroupDescription(
        group_id="g",
        state="Stable",
        protocol_type="consumer",
        protocol="cooperative-sticky",
        members=[MemberDescription("m", None, "c", "h", assignment=(TP("t", 1), TP("t", 0)))],
        coordinator=2,
    )
    d = _from_classic(classic)
    assert not isinstance(d, Exception)
    assert (d.type, d.state, d.assignor, d.group_epoch, d.coordinator) == (
        "classic",
        "Stable",
        "cooperative-sticky",
        None,
        2,
    )
    assert d.members[0].assignment == (TP("t", 0), TP("t", 1))
    assert d.members[0].target_assignment is None and d.members[0].member_epoch is None
    connect = GroupDescription(group_id="w", state="Stable", protocol_type="connect")
    assert isinstance(_from_classic(connect), GroupIdNotFoundError)


async def test_bad_arguments_are_refused_before_asking_the_broker() -> None:
    admin = Admin("127.0.0.1:1")  # never started: nothing is sent
    with pytest.raises(InvalidGroupIdError):
        await admin.describe_consumer_groups([""])
    with pytest.raises(ConfigError, match="'share'"):
        await admin.list_consumer_groups(types=["share"])


async def test_unknown_group_is_reported_per_item(kafka_cluster: EmbeddedCluster) -> None:
    async with Admin(kafka_cluster.bootstrap) as admin:
        missing = f"missing-{uuid.uuid4().hex[:8]}"
        result = await admin.describe_consumer_groups([missing])
    d = result[missing]
    # Kafka 4's DescribeGroups answers GROUP_ID_NOT_FOUND; older brokers a "Dead" group.
    assert isinstance(d.error, GroupIdNotFoundError) or (d.state == "Dead" and not d.members)


@pytest.mark.kafka_embedded
async def test_a_broker_without_consumer_group_describe_is_asked_with_describe_groups(
    kafka_cluster: EmbeddedCluster,
) -> None:
    """A broker before KIP-848 has no ConsumerGroupDescribe: every group is described with
    the classic DescribeGroups (an unknown one fails as DescribeGroups says), not failed
    with UnsupportedVersionError."""
    kafka_cluster.registry.unregister(ConsumerGroupDescribeRequest.API_KEY)
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    async with Admin(kafka_cluster.bootstrap) as admin:
        d = (await admin.describe_consumer_groups([missing]))[missing]
    assert not isinstance(d.error, UnsupportedVersionError)
    assert isinstance(d.error, GroupIdNotFoundError) or (d.state == "Dead" and d.type == "classic")
