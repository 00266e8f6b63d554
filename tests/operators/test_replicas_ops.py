"""Reassignments, leader elections, log dirs, features, config resources, broker
unregistration and consumer group offset deletion against the pass's broker (the
embedded one, or with ``--kafka=apache`` the session's one-node Apache Kafka), on asyncio
and trio. One broker: what needs several (a reassignment in flight, a preferred election
that moves a leader) is in test_replicas_embedded.py and tests/kafka4/test_replicas_apache.py."""

from __future__ import annotations

import uuid

import pytest
from _support.settle import settled

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import (
    Admin,
    ConfigResource,
    ConfigResourceType,
    ElectionType,
    FeatureUpdate,
    NewTopic,
    TopicPartitionReplica,
    UpgradeType,
)
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages import ListConfigResourcesRequest

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _broker_id(admin: Admin) -> int:
    (broker,) = (await admin.describe_cluster()).brokers
    return broker.node_id


async def test_reassignment_to_the_current_replica_and_its_errors(
    anyio_backend: str, kafka_bootstrap: str
) -> None:
    topic = _name("reassign")
    async with Admin(kafka_bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_errors()
        broker = await _broker_id(admin)
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        res = await admin.alter_partition_reassignments(
            {
                tp0: [broker],
                tp1: [],
                TopicPartition(topic, 7): [broker],
                TopicPartition(_name("missing"), 0): [broker],
            }
        )
        assert res[tp0].error is None
        assert isinstance(res[tp1].error, E.InvalidReplicaAssignmentError)
        assert isinstance(res[TopicPartition(topic, 7)].error, E.UnknownTopicOrPartitionError)
        assert sum(isinstance(r.error, E.UnknownTopicOrPartitionError) for r in res.values()) == 2
        bad = await admin.alter_partition_reassignments({tp1: [broker, broker], tp0: [broker + 1000]})
        assert isinstance(bad[tp1].error, E.InvalidReplicaAssignmentError)
        assert isinstance(bad[tp0].error, E.InvalidReplicaAssignmentError)
        # The replica is the one already there: nothing to catch up, nothing in flight.
        listed = await settled(lambda: admin.list_partition_reassignments([tp0, tp1]), lambda r: not r)
        assert listed == {}
        cancelled = await admin.alter_partition_reassignments({tp1: None})
        assert isinstance(cancelled[tp1].error, E.NoReassignmentInProgressError)
        desc = (await admin.describe_topics([topic]))[topic]
        assert [p.replicas for p in desc.partitions] == [(broker,), (broker,)]


async def test_elect_leaders_on_one_broker_needs_no_election(
    anyio_backend: str, kafka_bootstrap: str
) -> None:
    topic = _name("elect")
    async with Admin(kafka_bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_errors()
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        await settled(
            lambda: admin.describe_topics([topic]), lambda d: all(p.leader >= 0 for p in d[topic].partitions)
        )
        for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
            res = await admin.elect_leaders(kind, [*tps, TopicPartition(topic, 9)])
            assert all(isinstance(res[tp].error, E.ElectionNotNeededError) for tp in tps), res
            assert isinstance(res[TopicPartition(topic, 9)].error, E.UnknownTopicOrPartitionError)
        # Every partition: those that needed no election are left out of the answer.
        everything = await admin.elect_leaders(ElectionType.PREFERRED)
        assert not any(tp.topic == topic for tp in everything)
        with pytest.raises(E.ConfigError):
            await admin.elect_leaders(5, tps)


async def test_log_dirs_show_the_replicas_and_their_sizes(anyio_backend: str, kafka_bootstrap: str) -> None:
    topic = _name("logdirs")
    async with Admin(kafka_bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 1, 1)])).raise_errors()
        broker = await _broker_id(admin)
        async with Producer(kafka_bootstrap) as producer:
            for i in range(20):
                await producer.send(topic, b"x" * 100, key=str(i).encode(), partition=0)
        tp = TopicPartition(topic, 0)

        async def dirs() -> dict[str, object]:
            described = await admin.describe_log_dirs([broker])
            assert described[broker].error is None
            return dict(described[broker].dirs)

        found = await settled(
            dirs, lambda d: any(tp in ld.replicas and ld.replicas[tp].size > 0 for ld in d.values())
        )  # type: ignore[attr-defined]
        (path,) = [p for p, ld in found.items() if tp in ld.replicas]  # type: ignore[attr-defined]
        info = found[path].replicas[tp]  # type: ignore[attr-defined]
        assert info.size >= 20 * 100 and info.offset_lag == 0 and not info.is_future

        replica = TopicPartitionReplica(topic, 0, broker)
        where = await admin.describe_replica_log_dirs(
            [replica, TopicPartitionReplica(_name("missing"), 0, broker)]
        )
        assert where[replica].current_log_dir == path and where[replica].current_offset_lag == 0
        assert where[replica].future_log_dir is None

        moved = await admin.alter_replica_log_dirs(
            {replica: path + "-nowhere", TopicPartitionReplica(_name("missing"), 0, broker): path}
        )
        assert isinstance(moved[replica].error, E.LogDirNotFoundError)
        assert sum(isinstance(r.error, E.UnknownTopicOrPartitionError) for r in moved.values()) == 1
        # To the dir it is in: accepted, nothing moves.
        assert (await admin.alter_replica_log_dirs({replica: path}))[replica].error is None


async def test_features_describe_and_validate_only_updates(anyio_backend: str, kafka_bootstrap: str) -> None:
    async with Admin(kafka_bootstrap) as admin:
        meta = await admin.describe_features()
        tv = meta.supported_features["transaction.version"]
        assert (tv.min_version, tv.max_version) == (0, 2)
        level = meta.finalized_features["transaction.version"].max_version_level
        assert level == 2 and meta.finalized_features_epoch is not None
        dry = await admin.update_features(
            {"transaction.version": FeatureUpdate(1, UpgradeType.SAFE_DOWNGRADE)}, validate_only=True
        )
        assert dry["transaction.version"].error is None
        again = await admin.describe_features()
        assert again.finalized_features["transaction.version"].max_version_level == level
        refused = await admin.update_features(
            {"transaction.version": FeatureUpdate(1, UpgradeType.UPGRADE)}, validate_only=True
        )
        assert isinstance(refused["transaction.version"].error, E.InvalidUpdateVersionError)
        unknown = await admin.update_features({"no.such.version": FeatureUpdate(1)}, validate_only=True)
        assert isinstance(unknown["no.such.version"].error, E.InvalidUpdateVersionError)
        with pytest.raises(E.ConfigError):
            await admin.update_features({})


async def test_config_resources_and_unregister_broker(anyio_backend: str, kafka_bootstrap: str) -> None:
    topic = _name("resources")
    async with Admin(kafka_bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 1, 1)])).raise_errors()
        broker = await _broker_id(admin)
        with pytest.raises(E.BrokerIdNotRegisteredError):
            await admin.unregister_broker(broker + 1000)
        version = await admin.client.negotiated_version(None, ListConfigResourcesRequest.API_KEY)
        if version < 1:
            # Kafka 4.0 has only ListClientMetricsResources (v0): client metrics, nothing else.
            with pytest.raises(E.UnsupportedVersionError, match=r"Kafka 4\.1"):
                await admin.list_config_resources([ConfigResourceType.TOPIC])
            assert all(
                r.type is ConfigResourceType.CLIENT_METRICS for r in await admin.list_config_resources()
            )
            return
        topics = await settled(
            lambda: admin.list_config_resources([ConfigResourceType.TOPIC]),
            lambda rs: ConfigResource(ConfigResourceType.TOPIC, topic) in rs,
        )
        assert ConfigResource(ConfigResourceType.TOPIC, topic) in topics
        assert {r.type for r in topics} == {ConfigResourceType.TOPIC}
        everything = await admin.list_config_resources()
        assert ConfigResource(ConfigResourceType.BROKER, str(broker)) in everything
        assert ConfigResource(ConfigResourceType.BROKER_LOGGER, str(broker)) in everything
        with pytest.raises(E.UnsupportedVersionError):
            await admin.list_config_resources([ConfigResourceType.UNKNOWN])


async def test_delete_consumer_group_offsets(anyio_backend: str, kafka_bootstrap: str) -> None:
    topic, group = _name("odel"), _name("odel-g")
    async with Admin(kafka_bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_errors()
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        (await admin.alter_group_offsets(group, {tp0: 0, tp1: 0})).raise_errors()
        deleted = await admin.delete_consumer_group_offsets(group, [tp0, TopicPartition(topic, 5)])
        assert deleted[tp0].error is None
        assert isinstance(deleted[TopicPartition(topic, 5)].error, E.UnknownTopicOrPartitionError)
        left = await admin.list_group_offsets(group)
        assert tp0 not in left and tp1 in left
        missing = await admin.delete_consumer_group_offsets(_name("nogroup"), [tp0])
        assert isinstance(missing[tp0].error, E.GroupIdNotFoundError)


async def test_offsets_of_a_subscribed_topic_stay(anyio_backend: str, kafka_bootstrap: str) -> None:
    topic, other, group = _name("odel-sub"), _name("odel-other"), _name("odel-sub-g")
    async with Admin(kafka_bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 1, 1), NewTopic(other, 1, 1)])).raise_errors()
        tp, other_tp = TopicPartition(topic, 0), TopicPartition(other, 0)
        (await admin.alter_group_offsets(group, {other_tp: 0})).raise_errors()
        consumer = Consumer(kafka_bootstrap, topics=[topic], group_id=group, auto_offset_reset="earliest")
        await consumer.start()
        try:

            async def assigned() -> set[TopicPartition]:
                await consumer.getmany(timeout_ms=200)
                return set(consumer.assignment())

            assert await settled(assigned, bool, within_s=60) == {tp}
            await consumer.commit({tp: 0})
            res = await admin.delete_consumer_group_offsets(group, [tp, other_tp])
            # The member's topic stays; the one nobody subscribes to goes (a per-partition
            # error, as Kafka answers it).
            assert isinstance(res[tp].error, E.GroupSubscribedToTopicError)
            assert res[other_tp].error is None
            left = await admin.list_group_offsets(group)
            assert tp in left and other_tp not in left
        finally:
            await consumer.close()
