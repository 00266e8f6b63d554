"""StreamsGroupDescribe on the embedded broker, which has no streams groups (KIP-1071).

The embedded broker has no streams-group coordinator: StreamsGroupHeartbeat is not
advertised, so a Kafka Streams application with ``group.protocol=streams`` is told the
broker does not support it (as by a Kafka 4.4 cluster without the ``streams.version``
feature), and no streams group can ever exist here. StreamsGroupDescribe is served, as
Kafka 4.4 (``streams.version=1``, its default) serves it for a group that is not a
streams group: every group fails with GROUP_ID_NOT_FOUND, "Group X not found." or
"Group X is not a streams group." when a group of another type holds the id; an empty id
gets INVALID_GROUP_ID and a group of another broker NOT_COORDINATOR. So
``Admin.describe_streams_groups`` reports ``GroupIdNotFoundError`` on both brokers.
The offsets calls of streams groups are the consumer-group requests (OffsetFetch,
OffsetCommit, OffsetDelete, DeleteGroups) the group coordinator already serves.
"""

from __future__ import annotations

from typing import Any

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.groups.codes import GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NONE
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse

__all__ = ["register"]

# What Kafka sends for authorized_operations when they were not asked for.
_NO_OPERATIONS = -(2**31)


def register(registry: HandlerRegistry, state: ClusterState) -> None:
    async def describe(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, StreamsGroupDescribeRequest)
        return StreamsGroupDescribeResponse(
            groups=[_described(state, g, ctx.broker_id) for g in req.group_ids]
        )

    R = StreamsGroupDescribeRequest
    registry.register(R.API_KEY, describe, R.MIN_VERSION, R.MAX_VERSION)


def _described(
    state: ClusterState, group_id: str, broker_id: int
) -> StreamsGroupDescribeResponse.DescribedGroup:
    d = StreamsGroupDescribeResponse.DescribedGroup(group_id=group_id, authorized_operations=_NO_OPERATIONS)
    if not group_id:
        d.error_code = INVALID_GROUP_ID
        return d
    coordinator: Any = state.services.get("groups")
    if coordinator is not None and hasattr(coordinator, "coordinator_error"):
        err = int(coordinator.coordinator_error(group_id, broker_id))
        if err != NONE:
            d.error_code = err
            return d
    d.error_code = GROUP_ID_NOT_FOUND
    if _other_group_type(state, group_id):
        d.error_message = f"Group {group_id} is not a streams group."
    else:
        d.error_message = f"Group {group_id} not found."
    return d


def _other_group_type(state: ClusterState, group_id: str) -> bool:
    """A classic, consumer or share group holds the id."""
    coordinator: Any = state.services.get("groups")
    if group_id in getattr(coordinator, "consumer_groups", {}):
        return True
    group = getattr(coordinator, "groups", {}).get(group_id)
    if group is not None and str(getattr(group, "state", "")) != "Dead":
        return True
    share: Any = state.services.get("share_groups")
    return group_id in getattr(share, "groups", {})
