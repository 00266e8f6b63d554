"""``Admin.remove_members_from_consumer_group`` (Java's ``removeMembersFromConsumerGroup``)
against the pass's broker: the embedded one, or with ``--kafka=apache`` the session's
Apache Kafka. A static member that stopped without leaving is still in its group (its
partitions wait for the session timeout); the operator removes it by instance id, or
removes every member. Each test uses a group and topic of its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from _support.settle import settled

from aiokafka_lite import Consumer
from aiokafka_lite.admin import Admin, ConsumerGroupDescription, NewTopic
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core import errors as E


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        yield a


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _members(admin: Admin, group: str) -> set[str | None]:
    desc: ConsumerGroupDescription = (await admin.describe_consumer_groups([group]))[group]
    return {m.group_instance_id for m in desc.members} if desc.error is None else set()


async def _join_and_stop(
    bootstrap: str, topic: str, group: str, instances: list[str], protocol: str = "classic"
) -> None:
    """Members that join together, each get a partition, and stop (static ones stay in
    the group: they do not leave on close)."""
    consumers = [
        Consumer(
            bootstrap,
            topics=[topic],
            group_id=group,
            group_instance_id=inst,
            group_protocol=protocol,
            auto_offset_reset="earliest",
        )
        for inst in instances
    ]
    try:
        for c in consumers:
            await c.start()
        for c in consumers:
            got = await settled(lambda c=c: _assigned(c), bool, within_s=60)
            assert got, "a member never got its partition"
    finally:
        for c in consumers:
            await c.close()


async def _assigned(consumer: Consumer) -> set[object]:
    await consumer.getmany(timeout_ms=200)
    return set(consumer.assignment())


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_stopped_static_member_is_removed_by_its_instance_id(
    admin: Admin, kafka_cluster: EmbeddedCluster, protocol: str
) -> None:
    topic, group, instance = _name("rm"), _name("g"), _name("static")
    (await admin.create_topics([NewTopic(topic, 1, 1)])).raise_errors()
    await _join_and_stop(kafka_cluster.bootstrap, topic, group, [instance], protocol)
    # The static member did not leave: the group still has it.
    assert await _members(admin, group) == {instance}

    removed = await admin.remove_members_from_consumer_group(group, [instance], reason="decommissioned")
    assert list(removed) == [instance]
    assert removed.ok, removed.errors
    assert await settled(lambda: _members(admin, group), lambda m: not m) == set()

    # Removing it again: that member is unknown now, reported for the item, not raised.
    again = await admin.remove_members_from_consumer_group(group, [instance])
    assert isinstance(again[instance].error, E.UnknownMemberIdError)


async def test_removing_every_member_names_each_and_empties_the_group(
    admin: Admin, kafka_cluster: EmbeddedCluster
) -> None:
    topic, group = _name("rm"), _name("g")
    (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_errors()
    instances = [_name("s1"), _name("s2")]
    await _join_and_stop(kafka_cluster.bootstrap, topic, group, instances)
    assert await settled(lambda: _members(admin, group), lambda m: m == set(instances)) == set(instances)

    removed = await admin.remove_members_from_consumer_group(group)
    assert set(removed) == set(instances)
    assert removed.ok, removed.errors
    assert await settled(lambda: _members(admin, group), lambda m: not m) == set()


async def test_bad_arguments_are_refused_before_anything_is_sent(admin: Admin) -> None:
    with pytest.raises(E.InvalidGroupIdError):
        await admin.remove_members_from_consumer_group("", ["x"])
    with pytest.raises(E.InvalidRequestError, match="at least one"):
        await admin.remove_members_from_consumer_group("g", [])
    with pytest.raises(E.InvalidRequestError, match="non-empty"):
        await admin.remove_members_from_consumer_group("g", [""])
