"""ApiVersions (with the feature levels), UpdateFeatures, Metadata, DescribeCluster."""

from __future__ import annotations

import re
import uuid
from typing import Final

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.state import SUPPORTED_FEATURES, ClusterState, Topic
from aiokafka_lite.core.errors import (
    BrokerResponseError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    LeaderNotAvailableError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["register"]

# AclOperation codes (READ=3 ... IDEMPOTENT_WRITE=12) as authorized-operations bit sets:
# there is no authorizer, so everything applicable is allowed.
TOPIC_OPERATIONS: Final = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS: Final = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # as Kafka 4.4: no WRITE
OMITTED_OPERATIONS: Final = -(2**31)
_SOFTWARE: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def register(registry: HandlerRegistry) -> None:
    async def api_versions(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ApiVersionsRequest)
        name, version = req.client_software_name, req.client_software_version
        if (
            ctx.api_version >= 3
            and (name or version)
            and not (_SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version))
        ):
            # KIP-511: Kafka rejects client software names/versions outside this pattern.
            # (Deviation: both empty is accepted, as from a hand-built test request.)
            return ApiVersionsResponse(error_code=InvalidRequestError.code)
        resp = ApiVersionsResponse(
            error_code=0,
            api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in registry.version_ranges()
            ],
        )
        if ctx.api_version >= 3:
            _add_features(resp, ctx.cluster, ctx.api_version)
        return resp

    # Pinned, not the codec's MAX_VERSION: v5 (cluster/node id check, KIP-1242) is not implemented.
    registry.register(ApiVersionsRequest.API_KEY, api_versions, 0, 4)
    registry.register(MetadataRequest.API_KEY, metadata, 0, MetadataRequest.MAX_VERSION)
    registry.register(DescribeClusterRequest.API_KEY, describe_cluster, 0, DescribeClusterRequest.MAX_VERSION)
    registry.register(UpdateFeaturesRequest.API_KEY, update_features, 0, 2)


def _add_features(resp: ApiVersionsResponse, state: ClusterState, version: int) -> None:
    """Supported and finalized feature levels (KIP-584), as Kafka 4.4 reports them:
    finalized levels of 0 are not listed, and a v3 request (whose clients cannot read a
    minimum level of 0) is not told the supported features that start at 0."""
    config = state.config
    resp.supported_features = [
        ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
        for name, (lo, hi) in sorted(SUPPORTED_FEATURES.items())
        if version >= 4 or lo > 0
    ]
    resp.finalized_features_epoch = config.features_epoch
    resp.finalized_features = [
        ApiVersionsResponse.FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
        for name, level in sorted(config.features.items())
        if level > 0
    ]


_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3


def _feature_update_error(state: ClusterState, name: str, level: int, upgrade_type: int) -> str | None:
    """Why Kafka's controller refuses this update (its wording), or None."""
    prefix = f"Invalid update version {level} for feature {name}."
    supported = SUPPORTED_FEATURES.get(name)
    if supported is None:
        return f"{prefix} Local controller {state.controller_id} does not support this feature."
    if upgrade_type not in (_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE):
        return f"{prefix} The controller does not support the given upgrade type."
    if not supported[0] <= level <= supported[1]:
        return (
            f"{prefix} Local controller {state.controller_id} only supports versions "
            f"{supported[0]}-{supported[1]}"
        )
    if upgrade_type == _UPGRADE and level < state.config.features.get(name, 0):
        return (
            f"{prefix} Can't downgrade the version of this feature without setting the upgrade "
            "type to either safe or unsafe downgrade."
        )
    return None


async def update_features(ctx: RequestContext, req: Request) -> Response:
    """UpdateFeatures (``kafka-features.sh upgrade/downgrade``): all updates or none."""
    assert isinstance(req, UpdateFeaturesRequest)
    state = ctx.cluster
    v = ctx.api_version
    updates = [
        (u.feature, u.max_version_level, u.upgrade_type if v >= 1 else (2 if u.allow_downgrade else 1))
        for u in req.feature_updates
    ]
    for name, level, upgrade_type in updates:
        why = _feature_update_error(state, name, level, upgrade_type)
        if why is not None:
            return UpdateFeaturesResponse(
                error_code=InvalidUpdateVersionError.code,
                error_message=f"The update failed for all features since the following feature had an error: {why}",
            )
    if not (v >= 1 and req.validate_only):
        for name, level, _ in updates:
            state.config.features[name] = level
        if updates:
            state.config.features_epoch += 1
    return UpdateFeaturesResponse(
        error_code=0,
        error_message=None,
        results=[
            UpdateFeaturesResponse.UpdatableFeatureResult(feature=name, error_code=0, error_message="NONE")
            for name, _, _ in updates
        ]
        if v < 2
        else [],
    )


def _topic_metadata(
    state: ClusterState, topic: Topic, include_ops: bool
) -> MetadataResponse.MetadataResponseTopic:
    parts = []
    for p in topic.partitions:
        alive = state.is_alive(p.leader_id)
        parts.append(
            MetadataResponse.MetadataResponsePartition(
                error_code=0 if alive else LeaderNotAvailableError.code,
                partition_index=p.index,
                leader_id=p.leader_id if alive else -1,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=[r for r in p.isr if state.is_alive(r)] or ([p.leader_id] if alive else []),
                offline_replicas=[r for r in p.replicas if not state.is_alive(r)],
            )
        )
    return MetadataResponse.MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=parts,
        topic_authorized_operations=TOPIC_OPERATIONS if include_ops else OMITTED_OPERATIONS,
    )


def _error_topic(
    name: str | None, topic_id: uuid.UUID, err: type[BrokerResponseError]
) -> MetadataResponse.MetadataResponseTopic:
    return MetadataResponse.MetadataResponseTopic(error_code=err.code, name=name, topic_id=topic_id)


async def metadata(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, MetadataRequest)
    state = ctx.cluster
    v = ctx.api_version
    include_ops = req.include_topic_authorized_operations
    topics: list[MetadataResponse.MetadataResponseTopic] = []
    want_all = req.topics is None or (v == 0 and not req.topics)
    if (
        not want_all
        and v in (10, 11)
        and any(rt.name is None or rt.topic_id != ZERO_UUID for rt in req.topics or [])
    ):
        # v10/v11 carry a topic id field but Kafka does not serve ids before v12: it rejects the
        # whole request, every requested topic with INVALID_REQUEST (a null name answered as "").
        return MetadataResponse(
            topics=[
                MetadataResponse.MetadataResponseTopic(
                    error_code=InvalidRequestError.code, name=rt.name or "", topic_id=rt.topic_id
                )
                for rt in req.topics or []
            ]
        )
    if want_all:
        topics = [_topic_metadata(state, t, include_ops) for t in state.visible_topics()]
    else:
        auto = state.config.auto_create_topics and (req.allow_auto_topic_creation or v < 4)
        for rt in req.topics or []:
            if rt.name is None or (v >= 10 and rt.topic_id != ZERO_UUID and not rt.name):
                t = state.topics_by_id.get(rt.topic_id)
                if t is None:
                    topics.append(_error_topic(None, rt.topic_id, UnknownTopicIdError))
                else:
                    topics.append(_topic_metadata(state, t, include_ops))
                continue
            name = rt.name
            t = state.get_topic(name)
            if t is None:
                try:
                    state.validate_topic_name(name)
                except InvalidTopicError:
                    topics.append(_error_topic(name, ZERO_UUID, InvalidTopicError))
                    continue
                if not auto:
                    topics.append(_error_topic(name, ZERO_UUID, UnknownTopicOrPartitionError))
                    continue
                try:
                    state.create_topic(name, -1, -1)
                except BrokerResponseError as e:
                    topics.append(_error_topic(name, ZERO_UUID, type(e)))
                    continue
                # Kafka answers the request that triggers the creation before the topic
                # is served (KRaft: UNKNOWN_TOPIC_OR_PARTITION); the client asks again.
                topics.append(_error_topic(name, ZERO_UUID, UnknownTopicOrPartitionError))
                continue
            topics.append(_topic_metadata(state, t, include_ops))
    return MetadataResponse(
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in sorted(state.live_brokers(), key=lambda b: b.node_id)
        ],
        cluster_id=state.cluster_id,
        controller_id=state.controller_id,
        topics=topics,
        cluster_authorized_operations=CLUSTER_OPERATIONS
        if req.include_cluster_authorized_operations
        else OMITTED_OPERATIONS,
    )


async def describe_cluster(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeClusterRequest)
    state = ctx.cluster
    if req.endpoint_type not in (1, 2):
        return DescribeClusterResponse(
            error_code=InvalidRequestError.code, error_message=f"unknown endpoint type {req.endpoint_type}"
        )
    if req.endpoint_type == 2:
        # Controllers: the embedded cluster has no separate controller quorum.
        return DescribeClusterResponse(
            error_code=UnsupportedVersionError.code,
            error_message="this cluster has no controller endpoints",
            endpoint_type=2,
            cluster_id=state.cluster_id,
        )
    brokers = sorted(state.brokers.values(), key=lambda b: b.node_id)
    v = ctx.api_version
    return DescribeClusterResponse(
        error_code=0,
        endpoint_type=1,
        cluster_id=state.cluster_id,
        controller_id=state.controller_id,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=not b.alive and v >= 2
            )
            for b in brokers
            if b.alive or req.include_fenced_brokers
        ],
        cluster_authorized_operations=CLUSTER_OPERATIONS
        if req.include_cluster_authorized_operations
        else OMITTED_OPERATIONS,
    )
