"""The admin's public request/route API (admin/requests.py): one request to a route, and a
new operation written as a small function over ``Admin.requests``, on the embedded
cluster (injected errors) and on Apache Kafka (--kafka=apache)."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite import Admin, NewTopic
from aiokafka_lite.admin import Result, Results
from aiokafka_lite.admin.requests import AdminRequests, Outcome, error_of, results
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
)

FAST = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}


async def test_request_goes_to_its_route(kafka_cluster: EmbeddedCluster) -> None:
    async with Admin(kafka_cluster.bootstrap, **FAST) as admin:
        described = await admin.describe_cluster()
        resp: Any = await admin.request(lambda version: DescribeClusterRequest(), "controller")
        assert isinstance(resp, DescribeClusterResponse)
        assert resp.controller_id == described.controller_id
        assert sorted(b.broker_id for b in resp.brokers) == [b.node_id for b in described.brokers]
        # A node id is a route too; the request is built for the version that broker speaks.
        versions: list[int] = []

        def metadata(version: int) -> Request:
            versions.append(version)
            return MetadataRequest(topics=[], allow_auto_topic_creation=False)

        node = described.brokers[0].node_id
        md = await admin.request(metadata, node, timeout_ms=10_000)
        assert isinstance(md, MetadataResponse)
        assert versions[-1] == await admin.client.negotiated_version(node, MetadataRequest.API_KEY)


async def test_request_retries_a_dropped_connection_not_an_error_code(kafka_cluster: EmbeddedCluster) -> None:
    if not isinstance(kafka_cluster, EmbeddedCluster):
        pytest.skip("drops connections and injects errors in the embedded broker")
    cluster = kafka_cluster
    async with Admin(cluster.bootstrap, **FAST) as admin:
        recorded = cluster.record_requests(DescribeClusterRequest.API_KEY)
        # The connection drops under the first request: the request API retries it.
        cluster.drop_connection(DescribeClusterRequest.API_KEY, 1)
        resp: Any = await admin.request(lambda version: DescribeClusterRequest(), "any", timeout_ms=10_000)
        assert isinstance(resp, DescribeClusterResponse) and resp.error_code == 0
        assert len(recorded.requests) == 2
        # An error code inside an answer is the operation's to judge: returned, not retried.
        cluster.inject_error(DescribeClusterRequest.API_KEY, E.RequestTimedOutError.code, count=1)
        resp = await admin.request(lambda version: DescribeClusterRequest(), "any", timeout_ms=10_000)
        assert resp.error_code == E.RequestTimedOutError.code
        assert len(recorded.requests) == 3
        recorded.close()


async def _delete_groups(rq: AdminRequests, group_ids: list[str]) -> Results[str, Result]:
    """A new operation as the module docstring of admin/requests.py shows it."""
    deadline = rq.deadline(None)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        resp = await rq.request(lambda v: DeleteGroupsRequest(groups_names=batch), node, deadline)
        assert isinstance(resp, DeleteGroupsResponse)
        return {r.group_id: error_of(r.error_code) or Result() for r in resp.results}

    outcomes = await rq.by_coordinator(group_ids, send, deadline)
    return results(group_ids, outcomes, lambda g, e: Result(e))


async def test_an_operation_over_the_public_api(kafka_cluster: EmbeddedCluster) -> None:
    from aiokafka_lite.core.structs import TopicPartition as TP

    async with Admin(kafka_cluster.bootstrap, **FAST) as admin:
        await admin.create_topics([NewTopic("requests-api", 1)])
        assert (await admin.alter_group_offsets("doomed", {TP("requests-api", 0): 1})).ok
        deleted = await _delete_groups(admin.requests, ["doomed"])
        assert deleted.ok
        listed = await admin.list_groups()
        assert "doomed" not in {g.group_id for g in listed.groups}
        again = await _delete_groups(admin.requests, ["doomed"])
        assert isinstance(again["doomed"].error, E.GroupIdNotFoundError)
