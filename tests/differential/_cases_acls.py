"""Differential cases: the ACL calls and authorized operations on a broker without an
authorizer (the session's Apache Kafka has none, as the embedded broker by default).

CreateAcls, DescribeAcls and DeleteAcls answer SECURITY_DISABLED at every version, per
creation and per filter, whatever the bindings (valid or not); DescribeCluster and
Metadata report every supported operation as authorized when asked, and the
"not asked" sentinel otherwise. The answers with an authorizer are compared in
tests/kafka4/test_acls_apache.py (a cluster of its own).
"""

from __future__ import annotations

from _diffkit import Observation, Target, case

from aiokafka_lite.wire.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
)

_CREATIONS = [
    # valid: User:alice may read topic "orders"
    CreateAclsRequest.AclCreation(
        resource_type=2, resource_name="orders", resource_pattern_type=3, principal="User:alice", host="*",
        operation=3, permission_type=3,
    ),
    # invalid everywhere: a CLUSTER resource not named kafka-cluster, and ANY as operation
    CreateAclsRequest.AclCreation(
        resource_type=4, resource_name="other", resource_pattern_type=3, principal="User:alice", host="*",
        operation=1, permission_type=3,
    ),
]  # fmt: skip


@case("acls")
async def case_acl_calls_without_an_authorizer(t: Target) -> Observation:
    c = await t.client()
    out: Observation = {}
    for v in (1, 2, 3):
        created = await c.request(CreateAclsRequest(creations=_CREATIONS), v)
        assert isinstance(created, CreateAclsResponse)
        out[f"create_v{v}"] = [r.error_code for r in created.results]
        described = await c.request(
            DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1,
            ),
            v,
        )  # fmt: skip
        assert isinstance(described, DescribeAclsResponse)
        out[f"describe_v{v}"] = (described.error_code, len(described.resources))
        deleted = await c.request(
            DeleteAclsRequest(
                filters=[
                    DeleteAclsRequest.DeleteAclsFilter(
                        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                        principal_filter=None, host_filter=None, operation=1, permission_type=1,
                    ),
                    DeleteAclsRequest.DeleteAclsFilter(
                        resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=3,
                        principal_filter="User:alice", host_filter="*", operation=3, permission_type=3,
                    ),
                ]
            ),
            v,
        )  # fmt: skip
        assert isinstance(deleted, DeleteAclsResponse)
        out[f"delete_v{v}"] = [(r.error_code, len(r.matching_acls)) for r in deleted.filter_results]
    return out


@case("acls")
async def case_authorized_operations_without_an_authorizer(t: Target) -> Observation:
    c = await t.client()
    topic = await t.create_topic("authops", 1)
    out: Observation = {}
    for asked in (False, True):
        dc = await c.request(DescribeClusterRequest(include_cluster_authorized_operations=asked), 0)
        assert isinstance(dc, DescribeClusterResponse)
        out[f"describe_cluster_asked={asked}"] = (dc.error_code, dc.cluster_authorized_operations)
        md = await c.request(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=asked,
            ),
            12,
        )
        assert isinstance(md, MetadataResponse)
        out[f"metadata_topic_asked={asked}"] = [
            (x.error_code, x.topic_authorized_operations) for x in md.topics
        ]
    return out
