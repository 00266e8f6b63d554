"""Streams-group admin calls (KIP-1071) against the pass's broker: the embedded one, or
with ``--kafka=apache`` the session's Apache Kafka (4.4 finalizes ``streams.version=1`` by
default, so it serves StreamsGroupDescribe; Kafka 4.0 does not: the tests read what the
broker advertises and check it against the feature level rather than assuming it). The embedded broker has no streams groups: it answers StreamsGroupDescribe
as Kafka does for an id that is unknown or held by a group of another type, so
``describe_streams_groups`` fails with the same typed error on both. Real streams groups
made by Kafka Streams are in tests/kafka4/test_streams_groups_apache.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from _support.settle import settled

from aiokafka_lite.admin import Admin, NewTopic, StreamsGroupDescription
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages import StreamsGroupDescribeRequest


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        yield a


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _expected_describe_error(admin: Admin, cluster: object) -> type[E.KafkaError]:
    """What describing a group that is not a streams group fails with on this broker:
    ``GroupIdNotFoundError`` where StreamsGroupDescribe is served (the embedded broker;
    Kafka 4.2+ with ``streams.version`` >= 1, 4.4's default), ``UnsupportedVersionError``
    where it is not (Kafka 4.0, or ``streams.version=0``)."""
    try:
        await admin.client.negotiated_version(None, StreamsGroupDescribeRequest.API_KEY)
        served = True
    except E.UnsupportedVersionError:
        served = False
    if isinstance(cluster, EmbeddedCluster):
        assert served, "the embedded broker must serve StreamsGroupDescribe"
    else:
        # Kafka advertises the API exactly when the cluster finalized the feature.
        level = (await admin.describe_features()).finalized_features.get("streams.version")
        assert served == (level is not None and level.max_version_level >= 1), level
    return E.GroupIdNotFoundError if served else E.UnsupportedVersionError


async def test_describe_unknown_streams_group_is_group_id_not_found(
    admin: Admin, kafka_cluster: EmbeddedCluster
) -> None:
    group = _name("no-such-streams-group")
    expected = await _expected_describe_error(admin, kafka_cluster)
    got = (await admin.describe_streams_groups([group]))[group]
    assert isinstance(got, StreamsGroupDescription)
    assert isinstance(got.error, expected), got.error
    if expected is E.GroupIdNotFoundError:
        assert group in str(got.error)
    assert got.members == [] and got.subtopologies == []


async def test_describe_a_group_of_another_type_is_group_id_not_found(
    admin: Admin, kafka_cluster: EmbeddedCluster
) -> None:
    topic, group = _name("sg-topic"), _name("sg-classic")
    (await admin.create_topics([NewTopic(topic, 1, 1)])).raise_errors()
    # A new topic reaches the group coordinator's metadata a moment after CreateTopics.
    committed = await settled(
        lambda: admin.alter_group_offsets(group, {TopicPartition(topic, 0): 0}), lambda r: r.ok, within_s=30
    )
    committed.raise_errors()
    expected = await _expected_describe_error(admin, kafka_cluster)
    got = (await admin.describe_streams_groups([group]))[group]
    assert isinstance(got.error, expected), got.error
    # It is still a group with offsets, which the streams offsets calls (OffsetFetch, as
    # Java's Admin) read whatever the group's type.
    offsets = await admin.list_streams_group_offsets(group)
    assert offsets[TopicPartition(topic, 0)].offset == 0


async def test_empty_group_id_is_refused_before_sending(admin: Admin) -> None:
    with pytest.raises(E.InvalidGroupIdError):
        await admin.describe_streams_groups([""])
    with pytest.raises(E.InvalidGroupIdError):
        await admin.delete_streams_groups([""])


async def test_unknown_streams_group_offsets_and_deletion(admin: Admin) -> None:
    group = _name("no-such-streams-group")
    assert dict(await admin.list_streams_group_offsets(group)) == {}
    deleted = (await admin.delete_streams_groups([group]))[group]
    assert isinstance(deleted.error, E.GroupIdNotFoundError), deleted.error
    listed = await admin.list_streams_groups()
    assert group not in {g.group_id for g in listed.groups}
