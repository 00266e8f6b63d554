"""Streams-group admin calls (KIP-1071) against the pass's broker: the embedded one, or
with ``--kafka=apache`` the session's Apache Kafka (4.4 finalizes ``streams.version=1`` by
default, so it serves StreamsGroupDescribe; the test reads the feature level rather than
assuming it). The embedded broker has no streams groups: it answers StreamsGroupDescribe
as Kafka does for an id that is unknown or held by a group of another type, so
``describe_streams_groups`` fails with the same typed error on both. Real streams groups
made by Kafka Streams are in tests/kafka4/test_streams_groups_apache.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from aiokafka_lite.admin import Admin, NewTopic, StreamsGroupDescription
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        yield a


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _serves_streams_groups(admin: Admin) -> bool:
    """Whether the cluster finalized ``streams.version`` >= 1 (the embedded broker lists
    no such feature: it serves the describe call all the same, for groups it never has)."""
    features = await admin.describe_features()
    level = features.finalized_features.get("streams.version")
    return level is not None and level.max_version_level >= 1


async def test_describe_unknown_streams_group_is_group_id_not_found(admin: Admin) -> None:
    group = _name("no-such-streams-group")
    serves = await _serves_streams_groups(admin)
    got = (await admin.describe_streams_groups([group]))[group]
    assert isinstance(got, StreamsGroupDescription)
    if serves or "streams.version" not in (await admin.describe_features()).supported_features:
        # Apache 4.4 with the feature, and the embedded broker (no streams groups at all).
        assert isinstance(got.error, E.GroupIdNotFoundError), got.error
        assert group in str(got.error)
    else:  # a cluster that supports the feature but left it at 0 does not serve the API
        assert isinstance(got.error, E.UnsupportedVersionError), got.error
    assert got.members == [] and got.subtopologies == []


async def test_describe_a_group_of_another_type_is_group_id_not_found(admin: Admin) -> None:
    topic, group = _name("sg-topic"), _name("sg-classic")
    (await admin.create_topics([NewTopic(topic, 1, 1)])).raise_errors()
    committed = await admin.alter_group_offsets(group, {TopicPartition(topic, 0): 0})
    committed.raise_errors()
    got = (await admin.describe_streams_groups([group]))[group]
    assert isinstance(got.error, E.GroupIdNotFoundError), got.error
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
