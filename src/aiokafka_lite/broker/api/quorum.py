"""The KRaft quorum APIs: DescribeQuorum, and AddRaftVoter/RemoveRaftVoter refused.

The embedded cluster keeps its metadata in memory, shared by its brokers; it has no
Raft metadata log and no controller listener. DescribeQuorum still answers, with what
is true of that arrangement, in Kafka's shape:

* one voter, the cluster's controller (the live broker with the lowest id, as
  Metadata and DescribeCluster report it), which leads the quorum; its leader epoch
  starts at 1 and rises by one each time the controller changes (a broker stopped or
  started), as a new election would;
* every other live broker is an observer, and every replica is caught up: the brokers
  read the one in-memory state, so their log end offsets equal the high watermark and
  their fetch and caught-up times are now;
* the "metadata log" offset counts the metadata changes (topics, partitions, brokers,
  leaders) since the cluster started: the high watermark grows as Kafka's does with
  each metadata record, without claiming Kafka's exact record counts;
* directory ids are the zero UUID, and ``Nodes`` (v2) is empty: a static quorum
  without controller endpoints (DescribeCluster for controllers says the same).

Voter changes need a dynamic quorum (KIP-853), which this cluster is not: AddRaftVoter
and RemoveRaftVoter are answered ``UNSUPPORTED_VERSION`` with the message Kafka gives
for a static quorum (``kraft.version`` 0).

Validation as Kafka's: a request for another topic or partition than
``__cluster_metadata``-0 gets ``UNKNOWN_TOPIC_OR_PARTITION`` for each partition asked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.core.errors import UnknownTopicOrPartitionError, UnsupportedVersionError
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["register"]

METADATA_TOPIC: Final = "__cluster_metadata"
_UNKNOWN_PARTITION_MESSAGE: Final = "This server does not host this topic-partition."
_STATIC_QUORUM: Final = (
    "Cluster doesn't support {} voter because the kraft.version feature is 0 "
    "(the embedded broker's quorum is static: one voter, its controller)"
)
_EXTENSION: Final = "metadata_quorum"


@dataclass(slots=True)
class _QuorumView:
    """What DescribeQuorum reports, kept current by a metadata listener."""

    leader_id: int
    leader_epoch: int = 1
    offset: int = 0  # metadata changes seen: the "metadata log" end offset

    def on_change(self, state: ClusterState) -> None:
        self.offset += 1
        controller = state.controller_id
        if controller != self.leader_id:
            if self.leader_id >= 0 and controller >= 0:  # the first controller is epoch 1's
                self.leader_epoch += 1
            self.leader_id = controller


def _view(state: ClusterState) -> _QuorumView:
    view = state.extensions.get(_EXTENSION)
    if not isinstance(view, _QuorumView):
        view = _QuorumView(leader_id=state.controller_id)
        state.extensions[_EXTENSION] = view
        state.add_listener(lambda: view.on_change(state))
    return view


def register(registry: HandlerRegistry, state: ClusterState) -> None:
    _view(state)
    registry.register(DescribeQuorumRequest.API_KEY, describe_quorum, 0, DescribeQuorumRequest.MAX_VERSION)
    registry.register(AddRaftVoterRequest.API_KEY, add_raft_voter, 0, AddRaftVoterRequest.MAX_VERSION)
    registry.register(
        RemoveRaftVoterRequest.API_KEY, remove_raft_voter, 0, RemoveRaftVoterRequest.MAX_VERSION
    )


async def describe_quorum(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeQuorumRequest)
    asked = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)]:
        return DescribeQuorumResponse(
            topics=[
                DescribeQuorumResponse.TopicData(
                    topic_name=t.topic_name,
                    partitions=[
                        DescribeQuorumResponse.PartitionData(
                            partition_index=p.partition_index,
                            error_code=UnknownTopicOrPartitionError.code,
                            error_message=_UNKNOWN_PARTITION_MESSAGE,
                        )
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ]
        )
    state = ctx.cluster
    view = _view(state)
    leader = state.controller_id
    if leader != view.leader_id:  # a change no listener saw (a broker registered quietly)
        view.on_change(state)
    now = int(time.time() * 1000)

    def replica(node_id: int) -> DescribeQuorumResponse.ReplicaState:
        return DescribeQuorumResponse.ReplicaState(
            replica_id=node_id,
            replica_directory_id=ZERO_UUID,
            log_end_offset=view.offset,
            last_fetch_timestamp=now,
            last_caught_up_timestamp=now,
        )

    observers = sorted(b.node_id for b in state.live_brokers() if b.node_id != leader)
    return DescribeQuorumResponse(
        topics=[
            DescribeQuorumResponse.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[
                    DescribeQuorumResponse.PartitionData(
                        partition_index=0,
                        leader_id=leader,
                        leader_epoch=view.leader_epoch,
                        high_watermark=view.offset,
                        current_voters=[replica(leader)] if leader >= 0 else [],
                        observers=[replica(b) for b in observers],
                    )
                ],
            )
        ],
        nodes=[],
    )


async def add_raft_voter(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, AddRaftVoterRequest)
    return AddRaftVoterResponse(
        error_code=UnsupportedVersionError.code, error_message=_STATIC_QUORUM.format("adding")
    )


async def remove_raft_voter(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, RemoveRaftVoterRequest)
    return RemoveRaftVoterResponse(
        error_code=UnsupportedVersionError.code, error_message=_STATIC_QUORUM.format("removing")
    )
