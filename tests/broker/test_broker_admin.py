"""Topic administration and configs (CreateTopics ... IncrementalAlterConfigs, DescribeCluster)."""

from __future__ import annotations

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

CT = CreateTopicsRequest.CreatableTopic


async def test_create_topics(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster: EmbeddedCluster = await kafka_cluster_factory(brokers=3)
    async with await RawClient.connect(cluster.bootstrap) as c:
        resp = await c.request(
            CreateTopicsRequest(
                topics=[
                    CT(
                        name="a",
                        num_partitions=6,
                        replication_factor=3,
                        configs=[CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="1000")],
                    ),
                    CT(name="b", num_partitions=-1, replication_factor=-1),
                    CT(name="bad name", num_partitions=1, replication_factor=1),
                    CT(name="c", num_partitions=1, replication_factor=4),
                    CT(name="d", num_partitions=0, replication_factor=1),
                    CT(
                        name="e",
                        num_partitions=1,
                        replication_factor=1,
                        configs=[CreateTopicsRequest.CreatableTopicConfig(name="no.such.config", value="1")],
                    ),
                    CT(name="dup", num_partitions=1, replication_factor=1),
                    CT(name="dup", num_partitions=1, replication_factor=1),
                    CT(
                        name="f",
                        num_partitions=-1,
                        replication_factor=-1,
                        assignments=[
                            CreateTopicsRequest.CreatableReplicaAssignment(
                                partition_index=0, broker_ids=[3, 1]
                            ),
                            CreateTopicsRequest.CreatableReplicaAssignment(
                                partition_index=1, broker_ids=[2, 3]
                            ),
                        ],
                    ),
                ]
            ),
            7,
        )
        assert isinstance(resp, CreateTopicsResponse)
        codes = {t.name: t.error_code for t in resp.topics}
        assert codes == {
            "a": 0,
            "b": 0,
            "bad name": InvalidTopicError.code,
            "c": InvalidReplicationFactorError.code,
            "d": InvalidPartitionsError.code,
            "e": InvalidConfigError.code,
            "dup": InvalidRequestError.code,
            "f": 0,
        }
        a = next(t for t in resp.topics if t.name == "a")
        assert (a.num_partitions, a.replication_factor, a.topic_id) == (6, 3, cluster.topic("a").topic_id)
        assert {x.name: x.value for x in a.configs or []}["retention.ms"] == "1000"
        assert [p.replicas for p in cluster.topic("f").partitions] == [[3, 1], [2, 3]]
        assert [p.leader_id for p in cluster.topic("f").partitions] == [3, 2]
        assert len(cluster.topic("b").partitions) == 1
        # Already exists; validate_only creates nothing.
        resp = await c.request(
            CreateTopicsRequest(topics=[CT(name="a", num_partitions=1, replication_factor=1)]), 4
        )
        assert resp.topics[0].error_code == TopicAlreadyExistsError.code  # type: ignore[attr-defined]
        resp = await c.request(
            CreateTopicsRequest(
                validate_only=True, topics=[CT(name="g", num_partitions=2, replication_factor=1)]
            ),
            5,
        )
        assert resp.topics[0].error_code == 0 and "g" not in cluster.state.topics  # type: ignore[attr-defined]


async def test_delete_topics_by_name_and_id(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("x", 1)
    y = kafka_cluster.create_topic("y", 1)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        resp = await c.request(DeleteTopicsRequest(topic_names=["x", "missing"], timeout_ms=1000), 5)
        assert isinstance(resp, DeleteTopicsResponse)
        assert [(r.name, r.error_code) for r in resp.responses] == [
            ("x", 0),
            ("missing", UnknownTopicOrPartitionError.code),
        ]
        import uuid

        resp = await c.request(
            DeleteTopicsRequest(
                topics=[
                    DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=y.topic_id),
                    DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
                ],
                timeout_ms=1000,
            ),
            6,
        )
        assert [(r.name, r.error_code) for r in resp.responses] == [
            ("y", 0),
            (None, UnknownTopicIdError.code),
        ]  # type: ignore[attr-defined]
    assert kafka_cluster.state.topics == {}


async def test_create_partitions(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        resp = await c.request(
            CreatePartitionsRequest(
                timeout_ms=1000,
                topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=5, assignments=None),
                    CreatePartitionsRequest.CreatePartitionsTopic(name="missing", count=5, assignments=None),
                ],
            ),
            3,
        )
        assert isinstance(resp, CreatePartitionsResponse)
        assert [r.error_code for r in resp.results] == [0, UnknownTopicOrPartitionError.code]
        assert len(kafka_cluster.topic("t").partitions) == 5
        resp = await c.request(
            CreatePartitionsRequest(
                timeout_ms=1000,
                topics=[CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=3, assignments=None)],
            ),
            3,
        )
        assert resp.results[0].error_code == InvalidPartitionsError.code  # type: ignore[attr-defined]


async def test_describe_and_alter_configs(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1, configs={"cleanup.policy": "delete"})
    RT = DescribeConfigsRequest.DescribeConfigsResource

    async def topic_configs(c: RawClient) -> dict[str, tuple[str | None, int]]:
        resp = await c.request(
            DescribeConfigsRequest(
                resources=[RT(resource_type=2, resource_name="t", configuration_keys=None)]
            ),
            4,
        )
        assert isinstance(resp, DescribeConfigsResponse)
        assert resp.results[0].error_code == 0
        return {e.name: (e.value, e.config_source) for e in resp.results[0].configs}

    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        cfg = await topic_configs(c)
        assert cfg["cleanup.policy"] == ("delete", 1)  # DYNAMIC_TOPIC_CONFIG
        assert cfg["max.message.bytes"] == ("1048588", 5)  # DEFAULT_CONFIG
        resp = await c.request(
            DescribeConfigsRequest(
                resources=[
                    RT(
                        resource_type=4,
                        resource_name="1",
                        configuration_keys=["message.max.bytes", "broker.id"],
                    ),
                    RT(resource_type=2, resource_name="missing", configuration_keys=None),
                ]
            ),
            4,
        )
        assert isinstance(resp, DescribeConfigsResponse)
        assert {e.name: e.value for e in resp.results[0].configs} == {
            "message.max.bytes": "1048588",
            "broker.id": "1",
        }
        assert resp.results[1].error_code == UnknownTopicOrPartitionError.code

        AC = IncrementalAlterConfigsRequest.AlterableConfig
        resp = await c.request(
            IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=2,
                        resource_name="t",
                        configs=[
                            AC(name="max.message.bytes", config_operation=0, value="5000"),
                            AC(name="cleanup.policy", config_operation=2, value="compact"),
                        ],
                    )
                ]
            ),
            1,
        )
        assert isinstance(resp, IncrementalAlterConfigsResponse) and resp.responses[0].error_code == 0
        cfg = await topic_configs(c)
        assert cfg["max.message.bytes"] == ("5000", 1) and cfg["cleanup.policy"][0] == "delete,compact"
        assert kafka_cluster.topic("t").partitions[0].log.max_message_bytes == 5000  # enforced
        resp = await c.request(
            IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=2,
                        resource_name="t",
                        configs=[
                            AC(name="max.message.bytes", config_operation=1, value=None),
                            AC(name="bogus.key", config_operation=0, value="1"),
                        ],
                    )
                ]
            ),
            1,
        )
        assert resp.responses[0].error_code == InvalidConfigError.code  # type: ignore[attr-defined]
        assert (await topic_configs(c))["max.message.bytes"][0] == "5000"  # nothing applied
        resp = await c.request(
            AlterConfigsRequest(
                resources=[
                    AlterConfigsRequest.AlterConfigsResource(
                        resource_type=2,
                        resource_name="t",
                        configs=[AlterConfigsRequest.AlterableConfig(name="retention.ms", value="60000")],
                    )
                ]
            ),
            2,
        )
        assert isinstance(resp, AlterConfigsResponse) and resp.responses[0].error_code == 0
        cfg = await topic_configs(c)
        assert cfg["retention.ms"] == ("60000", 1)
        assert cfg["max.message.bytes"] == ("1048588", 5)  # AlterConfigs replaces the whole set


async def test_describe_cluster(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(brokers=3, racks=["r1", "r2", None])
    await cluster.stop_broker(3)
    async with await RawClient.connect(cluster.bootstrap) as c:
        for v in (0, 1, 2):
            resp = await c.request(DescribeClusterRequest(include_fenced_brokers=v >= 2), v)
            assert isinstance(resp, DescribeClusterResponse)
            assert resp.error_code == 0 and resp.cluster_id == cluster.state.cluster_id
            brokers = {b.broker_id: (b.rack, b.is_fenced) for b in resp.brokers}
            if v >= 2:
                assert brokers == {1: ("r1", False), 2: ("r2", False), 3: (None, True)}
            else:
                assert brokers == {1: ("r1", False), 2: ("r2", False)}


def test_admin_client_roundtrip(kafka_threaded_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    tc = kafka_threaded_cluster_factory(brokers=3)
    admin = AdminClient({"bootstrap.servers": tc.bootstrap})
    for f in admin.create_topics([NewTopic("adm", 3, 2, config={"retention.ms": "5000"})]).values():
        f.result(10)
    for f in admin.create_partitions([NewPartitions("adm", 6)]).values():
        f.result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics["adm"].partitions) == 6
    (res,) = admin.describe_configs([ConfigResource("topic", "adm")]).values()
    assert res.result(10)["retention.ms"].value == "5000"
    for f in admin.delete_topics(["adm"]).values():
        f.result(10)
    assert "adm" not in admin.list_topics(timeout=10).topics
