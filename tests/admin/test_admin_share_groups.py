"""Share-group administration (KIP-932) through ``Admin``: list, describe and delete share
groups, list/alter/delete their offsets, and their group configs. Runs on the embedded
broker, and on Apache Kafka 4.4 with ``--kafka=apache``. Kafka 4.0 (``--kafka-version
4.0``) has no share groups: there the last test checks the admin's answer to that, and
the others do not apply.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from admin_testlib import has_share_groups

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.types import ConfigResource, ConfigSource
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume.share import AcknowledgeType, ShareConsumer, ShareRecord
from aiokafka_lite.core.errors import (
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidGroupIdError,
    NonEmptyGroupError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)

SHARE_APIS = (
    ShareGroupHeartbeatRequest,
    ShareGroupDescribeRequest,
    ShareFetchRequest,
    ShareAcknowledgeRequest,
    DescribeShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
)


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:10]
    return f"sga-t-{suffix}", f"sga-g-{suffix}"


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        if not await has_share_groups(a):
            pytest.skip(
                "this broker has no share groups (Kafka 4.0); "
                "test_admin_on_a_broker_without_share_groups checks the answer there"
            )
        yield a


async def prepare(
    cluster: EmbeddedCluster,
    admin: Admin,
    topic: str,
    group: str,
    records: int,
    partitions: int = 1,
    **configs: str,
) -> None:
    cluster.create_topic(topic, partitions=partitions)
    await set_group_configs(admin, group, {"share.auto.offset.reset": "earliest", **configs})
    await produce(cluster, topic, records, partitions)


async def set_group_configs(admin: Admin, group: str, configs: dict[str, str | None]) -> None:
    """Sets (None: deletes) group configs and waits until they are in force: Kafka applies
    them from its metadata log, a moment after answering the alter."""
    resource = ConfigResource.group(group)
    (await admin.incremental_alter_configs({resource: configs})).raise_errors()

    async def applied() -> bool:
        entries = (await admin.describe_configs([resource]))[resource].entries
        return all(
            (entries[n].source == ConfigSource.GROUP_CONFIG) == (v is not None)
            and (v is None or entries[n].value == v)
            for n, v in configs.items()
        )

    await until(applied, f"group configs {configs} to apply")


async def produce(
    cluster: EmbeddedCluster, topic: str, records: int, partitions: int = 1, first: int = 0
) -> None:
    async with Producer(cluster.bootstrap) as producer:
        for i in range(first, first + records):
            await producer.send(topic, value=b"job-%d" % i, partition=i % partitions)
        await producer.flush()


async def consume(consumer: ShareConsumer, want: int, within_s: float = 30.0) -> list[ShareRecord]:
    """Poll until ``want`` records came (implicit mode accepts them at the next poll or close)."""
    out: list[ShareRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while len(out) < want and loop.time() < deadline:
        out += await consumer.poll(timeout_ms=500)
    return out


async def until(check: Callable[[], Awaitable[bool]], what: str, within_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def test_list_describe_and_delete_a_share_group(kafka_cluster: EmbeddedCluster, admin: Admin) -> None:
    topic, group = names()
    await prepare(kafka_cluster, admin, topic, group, records=4, partitions=2)
    tps = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    async with ShareConsumer(
        kafka_cluster.bootstrap, group_id=group, topics=[topic], client_id="sga-worker"
    ) as c:
        assert len(await consume(c, 4)) == 4

        listed = {g.group_id: g for g in (await admin.list_share_groups()).groups}
        assert (listed[group].type, listed[group].protocol_type, listed[group].state) == (
            "share",
            "share",
            "Stable",
        )
        assert group in {
            g.group_id for g in (await admin.list_groups(types=["share"], states=["Stable"])).groups
        }
        assert group not in {g.group_id for g in (await admin.list_groups(types=["classic"])).groups}
        assert group not in {g.group_id for g in (await admin.list_share_groups(states=["Empty"])).groups}

        d = (await admin.describe_share_groups([group], include_authorized_operations=True))[group]
        assert d.error is None
        assert (d.state, d.assignor) == ("Stable", "simple")
        assert d.coordinator >= 0 and d.authorized_operations
        [member] = d.members
        assert member.member_id == c.member_id
        assert member.client_id == "sga-worker"
        assert member.subscribed_topics == (topic,)
        assert set(member.assignment) == tps
        assert member.member_epoch == d.assignment_epoch <= d.group_epoch

        # A group with a member can be neither deleted nor repositioned.
        assert isinstance((await admin.delete_share_groups([group]))[group].error, NonEmptyGroupError)
        altered = await admin.alter_share_group_offsets(group, {tp: 0 for tp in tps})
        assert set(altered) == tps and all(isinstance(r.error, NonEmptyGroupError) for r in altered.values())
        deleted = await admin.delete_share_group_offsets(group, [topic])
        assert isinstance(deleted[topic].error, NonEmptyGroupError)

    async def empty() -> bool:
        return (await admin.describe_share_groups([group]))[group].state == "Empty"

    await until(empty, "the share group to become empty after its member left")
    d = (await admin.describe_share_groups([group]))[group]
    assert d.members == [] and d.authorized_operations is None
    assert group in {g.group_id for g in (await admin.list_share_groups(states=["Empty"])).groups}

    assert (await admin.delete_share_groups([group]))[group].error is None
    assert isinstance((await admin.describe_share_groups([group]))[group].error, GroupIdNotFoundError)
    assert group not in {g.group_id for g in (await admin.list_share_groups()).groups}
    assert isinstance((await admin.delete_share_groups([group]))[group].error, GroupIdNotFoundError)


async def test_share_group_offsets_list_alter_delete(kafka_cluster: EmbeddedCluster, admin: Admin) -> None:
    topic, group = names()
    await prepare(kafka_cluster, admin, topic, group, records=10)
    tp = TopicPartition(topic, 0)
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as c:
        assert len(await consume(c, 10)) == 10
    # Every record was accepted (at close): nothing is left to deliver.
    offsets = await admin.list_share_group_offsets(group)
    assert set(offsets) == {tp}
    assert offsets[tp].error is None and offsets[tp].lag == 0
    await produce(kafka_cluster, topic, 5, first=10)
    assert (await admin.list_share_group_offsets(group, [tp]))[tp].lag == 5

    # Repositioned while empty: the next consumer gets the records from the new start on.
    altered = await admin.alter_share_group_offsets(group, {tp: 12})
    assert altered[tp].error is None
    after = (await admin.list_share_group_offsets(group))[tp]
    assert (after.start_offset, after.lag) == (12, 3)
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as c:
        got = await consume(c, 3)
        assert sorted(r.offset for r in got) == [12, 13, 14]
        assert not await c.poll(timeout_ms=500)

    bad = await admin.alter_share_group_offsets(
        group, {TopicPartition(topic, 7): 0, TopicPartition(f"{topic}-missing", 0): 0, tp: 0}
    )
    assert isinstance(bad[TopicPartition(topic, 7)].error, UnknownTopicOrPartitionError)
    assert isinstance(bad[TopicPartition(f"{topic}-missing", 0)].error, UnknownTopicOrPartitionError)
    assert bad[tp].error is None
    assert (await admin.list_share_group_offsets(group))[tp].start_offset == 0

    # Deleting the topic's state: the next consumer starts over at share.auto.offset.reset.
    deleted = await admin.delete_share_group_offsets(group, [topic, f"{topic}-missing"])
    assert deleted[topic].error is None
    assert isinstance(deleted[f"{topic}-missing"].error, UnknownTopicOrPartitionError)
    assert dict(await admin.list_share_group_offsets(group)) == {}
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as c:
        assert sorted(r.offset for r in await consume(c, 15)) == list(range(15))


async def test_unknown_empty_and_other_type_groups(kafka_cluster: EmbeddedCluster, admin: Admin) -> None:
    topic, group = names()
    kafka_cluster.create_topic(topic, partitions=1)
    assert isinstance((await admin.describe_share_groups([group]))[group].error, GroupIdNotFoundError)
    assert dict(await admin.list_share_group_offsets(group)) == {}
    assert isinstance(
        (await admin.delete_share_group_offsets(group, [topic]))[topic].error, GroupIdNotFoundError
    )
    with pytest.raises(InvalidGroupIdError):
        await admin.describe_share_groups([""])
    with pytest.raises(InvalidGroupIdError):
        await admin.list_share_group_offsets("")

    classic = f"{group}-classic"
    async with Consumer(kafka_cluster.bootstrap, topics=topic, group_id=classic) as consumer:

        async def joined() -> bool:
            await consumer.getmany(timeout_ms=200)
            return bool(consumer.assignment())

        await until(joined, "the classic consumer to join its group")
        d = (await admin.describe_share_groups([classic]))[classic]
        assert isinstance(d.error, GroupIdNotFoundError) and "not a share group" in str(d.error)
        altered = await admin.alter_share_group_offsets(classic, {TopicPartition(topic, 0): 0})
        assert isinstance(altered[TopicPartition(topic, 0)].error, GroupIdNotFoundError)
        assert classic not in {g.group_id for g in (await admin.list_share_groups()).groups}

    # Altering the offsets of a share group nobody joined yet creates it, empty.
    assert (await admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0}))[
        TopicPartition(topic, 0)
    ].error is None
    d = (await admin.describe_share_groups([group]))[group]
    assert (d.error, d.state, d.members) == (None, "Empty", [])
    assert (await admin.delete_share_groups([group]))[group].error is None


async def test_group_configs(kafka_cluster: EmbeddedCluster, admin: Admin) -> None:
    _, group = names()
    resource = ConfigResource.group(group)
    wanted = {
        "share.record.lock.duration.ms": "20000",
        "share.delivery.count.limit": "3",
        "share.isolation.level": "read_committed",
        "share.auto.offset.reset": "by_duration:PT1H",
    }
    await set_group_configs(admin, group, dict(wanted))
    described = (await admin.describe_configs([resource], include_synonyms=True))[resource]
    assert described.error is None
    for name, value in wanted.items():
        entry = described.entries[name]
        assert (entry.value, entry.source) == (value, ConfigSource.GROUP_CONFIG), name
        assert entry.synonyms[0] == (name, value, ConfigSource.GROUP_CONFIG)
    untouched = described.entries["share.session.timeout.ms"]
    assert (untouched.value, untouched.source, untouched.is_default) == (
        "45000",
        ConfigSource.DEFAULT_CONFIG,
        True,
    )

    for name, value in (
        ("share.record.lock.duration.ms", "60001"),
        ("share.record.lock.duration.ms", "999"),
        ("share.record.lock.duration.ms", "soon"),
        ("share.delivery.count.limit", "11"),
        ("share.delivery.count.limit", "1"),
        ("share.isolation.level", "READ_COMMITTED"),
        ("share.auto.offset.reset", "none"),
        ("share.auto.offset.reset", "by_duration:-PT1H"),
        ("share.no.such.config", "1"),
    ):
        result = (await admin.incremental_alter_configs({resource: {name: value}}))[resource]
        assert isinstance(result.error, InvalidConfigError), (name, value, result.error)
    # A refused change leaves the group's configs as they were.
    again = (await admin.describe_configs([resource]))[resource]
    assert {n: again.value(n) for n in wanted} == wanted

    await set_group_configs(admin, group, {"share.delivery.count.limit": None})
    reverted = (await admin.describe_configs([resource]))[resource].entries["share.delivery.count.limit"]
    assert (reverted.value, reverted.source) == ("5", ConfigSource.DEFAULT_CONFIG)


async def test_delivery_count_limit_config_archives_a_record(
    kafka_cluster: EmbeddedCluster, admin: Admin
) -> None:
    topic, group = names()
    await prepare(kafka_cluster, admin, topic, group, records=2, **{"share.delivery.count.limit": "2"})
    tp = TopicPartition(topic, 0)
    deliveries: list[tuple[int, int]] = []
    async with ShareConsumer(
        kafka_cluster.bootstrap, group_id=group, topics=[topic], acknowledgement_mode="explicit"
    ) as c:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        accepted = False
        while loop.time() < deadline and not (accepted and sum(1 for o, _ in deliveries if o == 0) >= 2):
            for record in await c.poll(timeout_ms=500):
                deliveries.append((record.offset, record.delivery_count))
                # The poison record (offset 0) is released every time; the other accepted.
                poison = record.offset == 0
                c.acknowledge(record, AcknowledgeType.RELEASE if poison else AcknowledgeType.ACCEPT)
                accepted |= not poison
            await c.commit()
        # Released twice with a limit of 2: archived, never delivered a third time.
        assert not [r for r in await c.poll(timeout_ms=1000) if r.offset == 0]
    assert sorted(d for o, d in deliveries if o == 0) == [1, 2]
    assert [d for o, d in deliveries if o == 1] == [1]
    assert (await admin.list_share_group_offsets(group))[tp].lag == 0


async def test_admin_on_a_broker_without_share_groups(kafka_cluster: EmbeddedCluster) -> None:
    """Kafka 4.0, or an embedded broker without the share-group APIs: each share-group
    method fails with UnsupportedVersionError naming the API, and no share group is listed."""
    async with Admin(kafka_cluster.bootstrap) as probe:
        supported = await has_share_groups(probe)
    if supported:
        if not isinstance(kafka_cluster, EmbeddedCluster):
            pytest.skip("this Kafka has share groups; the embedded pass removes them to check this")
        for api in SHARE_APIS:
            kafka_cluster.registry.unregister(api.API_KEY)
    topic, group = names()
    kafka_cluster.create_topic(topic, partitions=1)
    tp = TopicPartition(topic, 0)
    async with Admin(kafka_cluster.bootstrap) as admin:
        assert not (await admin.list_share_groups()).groups
        described = (await admin.describe_share_groups([group]))[group]
        assert isinstance(described.error, UnsupportedVersionError)
        assert "ShareGroupDescribe" in str(described.error)
        with pytest.raises(UnsupportedVersionError, match="DescribeShareGroupOffsets"):
            await admin.list_share_group_offsets(group)
        altered = await admin.alter_share_group_offsets(group, {tp: 0})
        assert isinstance(altered[tp].error, UnsupportedVersionError)
        deleted = await admin.delete_share_group_offsets(group, [topic])
        assert isinstance(deleted[topic].error, UnsupportedVersionError)


async def test_auto_offset_reset_by_duration_starts_at_recent_records(
    kafka_cluster: EmbeddedCluster, admin: Admin
) -> None:
    topic, group = names()
    kafka_cluster.create_topic(topic, partitions=1)
    await set_group_configs(admin, group, {"share.auto.offset.reset": "by_duration:PT1H"})
    now_ms = int(time.time() * 1000)
    async with Producer(kafka_cluster.bootstrap) as producer:
        for i in range(3):  # two hours old: before the group's window
            await producer.send(topic, value=b"old-%d" % i, timestamp_ms=now_ms - 7_200_000 + i)
        for i in range(2):
            await producer.send(topic, value=b"new-%d" % i, timestamp_ms=now_ms + i)
        await producer.flush()
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as c:
        got = await consume(c, 2)
        assert sorted((r.offset, r.value) for r in got) == [(3, b"new-0"), (4, b"new-1")]
        assert not await c.poll(timeout_ms=500)
