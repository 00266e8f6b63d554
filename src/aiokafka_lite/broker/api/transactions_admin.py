"""DescribeProducers and WriteTxnMarkers: the partition-side transactions admin APIs.

ListTransactions and DescribeTransactions are the transaction coordinator's
(``broker/transactions.py``). These two are served by the partition's replicas, as in
Kafka 4.4:

* DescribeProducers v0: per partition, ``UNKNOWN_TOPIC_OR_PARTITION`` for a partition
  that does not exist, ``NOT_LEADER_OR_FOLLOWER`` on a broker that is not one of its
  replicas (Kafka answers from followers too), else its active producers
  (``broker/producer_states.py``).
* WriteTxnMarkers v1-v2: in Kafka the transaction coordinator's inter-broker request,
  which ``Admin.abort_transaction`` sends to a partition leader to end a hanging
  transaction. Per partition: unknown -> ``UNKNOWN_TOPIC_OR_PARTITION``, not the leader
  -> ``NOT_LEADER_OR_FOLLOWER``; the marker's producer epoch older than the partition's
  -> ``INVALID_PRODUCER_EPOCH``, its coordinator epoch older than the producer's last
  marker's -> ``TRANSACTION_COORDINATOR_FENCED``. The marker ends the producer's open
  transaction there, so the last stable offset advances and read_committed fetches
  move past it (aborted records skipped). The coordinator is not told, as in Kafka: if it
  still holds the transaction open, its own timeout writes a second (harmless) abort.

With an authorizer (``EmbeddedCluster(authorizer=True)``), as Kafka's ``KafkaApis``:
DescribeProducers needs READ on each topic (else ``TOPIC_AUTHORIZATION_FAILED`` for its
partitions, checked before existence), WriteTxnMarkers CLUSTER_ACTION on the cluster
(else ``CLUSTER_AUTHORIZATION_FAILED`` for every partition).

Deviation: a marker for a ``__consumer_offsets`` partition does not complete the group
coordinator's pending transactional offsets (Kafka's does).
"""

from __future__ import annotations

from aiokafka_lite.broker.api.common import NOT_LEADER
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.producer_states import active_producers, write_txn_marker
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.core.acls import AclOperation, ResourceType
from aiokafka_lite.core.errors import (
    ClusterAuthorizationFailedError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

__all__ = ["register"]

_UNKNOWN = UnknownTopicOrPartitionError.code


async def describe_producers(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeProducersRequest)
    auth = ctx.cluster.authorizer
    topics = []
    for t in req.topics:
        readable = auth is None or auth.authorize(
            ctx.kafka_principal, ctx.client_host, AclOperation.READ, ResourceType.TOPIC, t.name
        )
        parts = []
        for index in t.partition_indexes:
            pr = DescribeProducersResponse.PartitionResponse(partition_index=index)
            p = ctx.cluster.get_partition(t.name, index)
            if not readable:
                pr.error_code = TopicAuthorizationFailedError.code
            elif p is None:
                pr.error_code = _UNKNOWN
            elif ctx.broker_id not in p.replicas:
                pr.error_code = NOT_LEADER
            else:
                pr.active_producers = [
                    DescribeProducersResponse.ProducerState(
                        producer_id=a.producer_id,
                        producer_epoch=a.producer_epoch,
                        last_sequence=a.last_sequence,
                        last_timestamp=a.last_timestamp,
                        coordinator_epoch=a.coordinator_epoch,
                        current_txn_start_offset=a.current_txn_start_offset,
                    )
                    for a in active_producers(p.log)
                ]
            parts.append(pr)
        topics.append(DescribeProducersResponse.TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(topics=topics)


async def write_txn_markers(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, WriteTxnMarkersRequest)
    auth = ctx.cluster.authorizer
    allowed = auth is None or auth.authorize_cluster(
        ctx.kafka_principal, ctx.client_host, AclOperation.CLUSTER_ACTION
    )
    results = []
    for m in req.markers:
        topics = []
        for t in m.topics:
            parts = []
            for index in t.partition_indexes:
                p = ctx.cluster.get_partition(t.name, index)
                if not allowed:
                    code = ClusterAuthorizationFailedError.code
                elif p is None:
                    code = _UNKNOWN
                elif p.leader_id != ctx.broker_id:
                    code = NOT_LEADER
                else:
                    code = write_txn_marker(
                        p.log, m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result
                    )
                parts.append(
                    WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                        partition_index=index, error_code=code
                    )
                )
            topics.append(WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(
            WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics)
        )
    return WriteTxnMarkersResponse(markers=results)


def register(registry: HandlerRegistry, state: ClusterState) -> None:
    registry.register(DescribeProducersRequest.API_KEY, describe_producers, 0, 0)
    registry.register(WriteTxnMarkersRequest.API_KEY, write_txn_markers, 1, 2)
