"""Fault injection control methods of EmbeddedCluster, and generic error responses."""

from __future__ import annotations

import time

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.broker.api.common import error_response
from aiokafka_lite.core.errors import (
    CoordinatorNotAvailableError,
    FetchSessionIdNotFoundError,
    IllegalStateError,
    KafkaConnectionError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    REQUESTS,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from aiokafka_lite.wire.records import encode_batch


def produce_req(topic: str = "t", partition: int = 0) -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(
                        index=partition, records=encode_batch([(1, None, b"v", [])])
                    )
                ],
            )
        ],
    )


async def produce_code(c: RawClient) -> int:
    resp = await c.request(produce_req(), 9)
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0].error_code


async def test_inject_error_counts_and_skips_execution(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    kafka_cluster.inject_error(ProduceRequest, NotLeaderOrFollowerError.code, count=2)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        assert await produce_code(c) == NotLeaderOrFollowerError.code
        assert await produce_code(c) == NotLeaderOrFollowerError.code
        assert kafka_cluster.high_watermark("t", 0) == 0
        assert await produce_code(c) == 0
        assert kafka_cluster.high_watermark("t", 0) == 1
        # Until cleared, on one broker only.
        kafka_cluster.inject_error(0, RequestTimedOutError.code, count=None, broker_id=1)
        for _ in range(3):
            assert await produce_code(c) == RequestTimedOutError.code
        kafka_cluster.clear_faults()
        assert await produce_code(c) == 0


async def test_inject_error_shapes_for_other_apis(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        kafka_cluster.inject_error(FetchRequest, NotLeaderOrFollowerError.code)
        resp = await c.request(
            FetchRequest(
                max_wait_ms=0,
                topics=[
                    FetchRequest.FetchTopic(
                        topic="t",
                        partitions=[
                            FetchRequest.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=100)
                        ],
                    )
                ],
            ),
            12,
        )
        assert isinstance(resp, FetchResponse)
        assert resp.error_code == 0
        (p,) = resp.responses[0].partitions
        assert (resp.responses[0].topic, p.partition_index, p.error_code) == (
            "t",
            1,
            NotLeaderOrFollowerError.code,
        )
        kafka_cluster.inject_error(FetchRequest, FetchSessionIdNotFoundError.code)
        resp = await c.request(FetchRequest(session_id=5, session_epoch=3), 12)
        assert resp.error_code == FetchSessionIdNotFoundError.code and resp.responses == []  # type: ignore[attr-defined]
        kafka_cluster.inject_error(MetadataRequest, NotLeaderOrFollowerError.code)
        md = await c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]), 12)
        assert isinstance(md, MetadataResponse)
        assert [(t.name, t.error_code) for t in md.topics] == [("t", NotLeaderOrFollowerError.code)]
        kafka_cluster.inject_error(FindCoordinatorRequest, CoordinatorNotAvailableError.code)
        fc = await c.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"]), 4)
        assert isinstance(fc, FindCoordinatorResponse)
        assert [(x.key, x.error_code) for x in fc.coordinators] == [
            ("g1", CoordinatorNotAvailableError.code),
            ("g2", CoordinatorNotAvailableError.code),
        ]


@pytest.mark.parametrize("api_key", sorted(REQUESTS))
def test_error_response_encodes_for_every_api_and_version(api_key: int) -> None:
    cls = REQUESTS[api_key]
    for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
        resp = error_response(cls(), v, 42)
        resp.encode(v)  # must never raise: a fault must always produce a valid frame


def test_error_response_mirrors_nested_requests() -> None:
    req = OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="g",
                topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 3])],
            )
        ]
    )
    resp = error_response(req, 8, 15)
    assert isinstance(resp, OffsetFetchResponse)
    g = resp.groups[0]
    assert g.group_id == "g" and g.error_code == 15
    assert [(p.partition_index, p.error_code, p.committed_offset) for p in g.topics[0].partitions] == [
        (0, 15, -1),
        (3, 15, -1),
    ]


def test_error_response_names_each_group() -> None:
    # DescribeGroups/DeleteGroups ask with plain group ids; each answer must name its group.
    from aiokafka_lite.wire.messages import DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest

    described = error_response(DescribeGroupsRequest(groups=["a", "b"]), 5, 15)
    assert [(g.group_id, g.error_code) for g in described.groups] == [("a", 15), ("b", 15)]  # type: ignore[attr-defined]
    deleted = error_response(DeleteGroupsRequest(groups_names=["a"]), 2, 15)
    assert isinstance(deleted, DeleteGroupsResponse)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("a", 15)]


async def test_latency_and_drops(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    kafka_cluster.add_latency(MetadataRequest, 0.3, count=1)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        t0 = time.monotonic()
        await c.request(MetadataRequest(topics=None), 12)
        assert time.monotonic() - t0 >= 0.3
        kafka_cluster.drop_connection(ProduceRequest, when="before")
        await c.send(produce_req(), 9)
        with pytest.raises(KafkaConnectionError):
            await c.read_frame()
    assert kafka_cluster.high_watermark("t", 0) == 0
    kafka_cluster.drop_connection(ProduceRequest, when="after")
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        await c.send(produce_req(), 9)
        with pytest.raises(KafkaConnectionError):
            await c.read_frame()
    assert kafka_cluster.high_watermark("t", 0) == 1  # executed, response lost
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        assert await produce_code(c) == 0


async def test_close_connections(kafka_cluster: EmbeddedCluster) -> None:
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        await c.request(MetadataRequest(topics=None), 12)
        kafka_cluster.close_connections()
        assert await c.is_closed_by_peer()


async def test_expire_group_member_without_coordinator_is_an_error(kafka_cluster: EmbeddedCluster) -> None:
    svc = kafka_cluster.state.services.pop("groups", None)
    try:
        with pytest.raises(IllegalStateError, match="group coordinator"):
            kafka_cluster.expire_group_member("g", "m")
    finally:
        if svc is not None:
            kafka_cluster.state.services["groups"] = svc
    if svc is not None:
        assert kafka_cluster.expire_group_member("no-such-group", "m") is False
