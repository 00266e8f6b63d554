"""Produce: Kafka's checks in Kafka's order, then the append. Records are walked, never built.

Order (as a Kafka 4.x broker): transactional records without a transactional id fail
the whole request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); per partition, an unknown
topic/partition, then the request-level record checks (``check_request_records``);
then invalid ``acks`` fail what is left; then internal topics, leadership, the
transaction check (Produce v12+ adds the partition to its transaction; older versions
refuse a partition not added first), and finally the log's checks (``check_batch``) and producer state.
"""

from __future__ import annotations

import time
from typing import Final

from aiokafka_lite.broker.api.common import NOT_LEADER, CloseConnection
from aiokafka_lite.broker.api.fastpath import encode_produce_response
from aiokafka_lite.broker.context import EncodedResponse, HandlerRegistry, RequestContext
from aiokafka_lite.broker.state import ClusterState, Partition, Topic
from aiokafka_lite.broker.transactions import get_txn_coordinator
from aiokafka_lite.broker.validation import RecordErrors, check_batch, check_request_records, stored_form
from aiokafka_lite.core.errors import (
    BrokerResponseError,
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    InvalidTxnStateError,
    KafkaError,
    NotEnoughReplicasError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import ProduceRequest, ProduceResponse
from aiokafka_lite.wire.primitives import ZERO_UUID
from aiokafka_lite.wire.records import RecordBatch, as_byte_view, read_batch

__all__ = ["register"]

_VALID_ACKS: Final = (-1, 0, 1)
_INTERNAL: Final = frozenset({"__consumer_offsets", "__transaction_state"})
_ATTR_TRANSACTIONAL: Final = 0x10


def register(registry: HandlerRegistry) -> None:
    registry.register(ProduceRequest.API_KEY, produce, ProduceRequest.MIN_VERSION, ProduceRequest.MAX_VERSION)


def node_endpoints(state: ClusterState, leaders: set[int]) -> list[ProduceResponse.NodeEndpoint]:
    out = []
    for bid in sorted(leaders):
        b = state.brokers.get(bid)
        if b is not None and b.alive:
            out.append(ProduceResponse.NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack))
    return out


Checked = RecordBatch | BrokerResponseError | None  # None: null records


def _check_all(req: ProduceRequest, v: int) -> list[list[Checked]]:
    """``check_request_records`` of every partition's records, in request order (pure)."""
    out: list[list[Checked]] = []
    for td in req.topic_data:
        row: list[Checked] = []
        for pd in td.partition_data:
            if pd.records is None:
                row.append(None)
                continue
            try:
                row.append(check_request_records(pd.records, v))
            except BrokerResponseError as e:
                row.append(e)
        out.append(row)
    return out


def _has_transactional_records(req: ProduceRequest, checked: list[list[Checked]]) -> bool:
    """Kafka looks at the first batch of every partition's records, refused or not."""
    for td, row in zip(req.topic_data, checked, strict=True):
        for pd, result in zip(td.partition_data, row, strict=True):
            if isinstance(result, RecordBatch):
                if result.attributes & _ATTR_TRANSACTIONAL:
                    return True
            elif isinstance(result, BrokerResponseError) and pd.records is not None:
                try:  # a refused record set may still start with a transactional batch
                    first = read_batch(as_byte_view(pd.records))
                except KafkaError:
                    continue
                if isinstance(first, RecordBatch) and first.attributes & _ATTR_TRANSACTIONAL:
                    return True
    return False


async def produce(ctx: RequestContext, req: Request) -> Response | EncodedResponse | None:
    assert isinstance(req, ProduceRequest)
    state = ctx.cluster
    v = ctx.api_version
    acks = req.acks
    checked = _check_all(req, v)
    if req.transactional_id is None and _has_transactional_records(req, checked):
        if acks == 0:
            raise CloseConnection("transactional records without a transactional id (acks=0)")
        return _all_failed(req, v, TransactionalIdAuthorizationFailedError.code)
    failed = False
    moved_leaders: set[int] = set()
    responses = []
    accepted: list[tuple[Topic, Partition, ProduceResponse.PartitionProduceResponse, RecordBatch]] = []
    for td, row in zip(req.topic_data, checked, strict=True):
        topic: Topic | None
        if v >= 13:
            topic = state.topics_by_id.get(td.topic_id)
            missing = UnknownTopicIdError.code
        else:
            topic = state.topics.get(td.name)
            missing = UnknownTopicOrPartitionError.code
        parts = []
        for pd, batch in zip(td.partition_data, row, strict=True):
            pr = ProduceResponse.PartitionProduceResponse(index=pd.index, base_offset=-1)
            parts.append(pr)
            if topic is None or not 0 <= pd.index < len(topic.partitions):
                # Kafka's coordinator topics exist once used; the embedded coordinators keep
                # their state without them, and clients may never write there.
                pr.error_code = InvalidTopicError.code if topic is None and td.name in _INTERNAL else missing
                failed = True
                continue
            if batch is None:
                # Kafka's request handler fails on null records and never answers the
                # request; closing the connection is the prompt equivalent.
                raise CloseConnection(f"produce request with null records for {td.name}-{pd.index}")
            if isinstance(batch, BrokerResponseError):
                _refuse(pr, batch)
                failed = True
                continue
            accepted.append((topic, topic.partitions[pd.index], pr, batch))
        responses.append(
            ProduceResponse.TopicProduceResponse(
                name=td.name, topic_id=td.topic_id if v >= 13 else ZERO_UUID, partition_responses=parts
            )
        )
    if acks not in _VALID_ACKS:
        for _topic, _p, pr, _batch in accepted:
            pr.error_code = InvalidRequiredAcksError.code
        accepted = []
        failed = True
    now_ms = int(time.time() * 1000)
    for topic, p, pr, batch in accepted:
        plog = p.log
        pr.log_start_offset = plog.log_start_offset
        if topic.internal:
            _refuse(pr, InvalidTopicError(f"Cannot append to internal topic {topic.name}"))
            failed = True
            continue
        if p.leader_id != ctx.broker_id:
            pr.error_code = NOT_LEADER
            failed = True
            if v >= 10 and state.is_alive(p.leader_id):
                pr.current_leader = ProduceResponse.LeaderIdAndEpoch(
                    leader_id=p.leader_id, leader_epoch=p.leader_epoch
                )
                moved_leaders.add(p.leader_id)
            continue
        if acks == -1 and len(p.isr) < _min_insync_replicas(topic, p):
            # Kafka refuses acks=all writes before appending while too few replicas are
            # in sync (NotEnoughReplicasException, retriable).
            _refuse(
                pr,
                NotEnoughReplicasError(
                    f"The size of the current ISR {sorted(p.isr)} is insufficient to satisfy the "
                    f"min.isr requirement of {_min_insync_replicas(topic, p)} for partition "
                    f"{topic.name}-{p.index}"
                ),
            )
            failed = True
            continue
        try:
            if batch.is_transactional:
                _check_in_transaction(
                    state, req.transactional_id, TopicPartition(topic.name, p.index), batch, v
                )
            summary = check_batch(batch, plog.rules, now_ms)
            result = plog.append(stored_form(batch, plog.rules), summary.max_timestamp)
        except RecordErrors as e:
            _refuse(pr, e.error)
            pr.record_errors = [
                ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                for i, m in e.record_errors
            ]
            failed = True
            continue
        except BrokerResponseError as e:
            _refuse(pr, e)
            failed = True
            continue
        except Exception as e:  # a bug must not take the connection down with it
            _refuse(pr, UnknownServerError(str(e)))
            failed = True
            continue
        pr.base_offset = result.base_offset
        pr.log_append_time_ms = result.log_append_time
        pr.log_start_offset = result.log_start_offset
    if acks == 0:
        if failed:
            # Kafka closes the connection so that a fire-and-forget client notices.
            raise CloseConnection("produce with acks=0 failed")
        return None
    resp = ProduceResponse(responses=responses)
    if moved_leaders and v >= 10:
        resp.node_endpoints = node_endpoints(state, moved_leaders)
        return resp
    body = encode_produce_response(
        v,
        [
            (
                tr.name,
                tr.topic_id,
                [
                    (
                        pr.index,
                        pr.error_code,
                        pr.base_offset,
                        pr.log_append_time_ms,
                        pr.log_start_offset,
                        pr.error_message,
                        [(e.batch_index, e.batch_index_error_message) for e in pr.record_errors or ()],
                    )
                    for pr in tr.partition_responses
                ],
            )
            for tr in responses
        ],
    )
    return EncodedResponse([body], len(body))


def _min_insync_replicas(topic: Topic, p: Partition) -> int:
    """The topic's ``min.insync.replicas``, capped at the replication factor as Kafka 4.x
    does (a topic can never require more replicas than it has)."""
    try:
        wanted = int(topic.config("min.insync.replicas") or 1)
    except ValueError:
        wanted = 1
    return min(wanted, max(1, len(p.replicas)))


def _refuse(pr: ProduceResponse.PartitionProduceResponse, error: BrokerResponseError) -> None:
    pr.error_code = error.code
    pr.error_message = error.message
    pr.base_offset = -1


def _check_in_transaction(
    state: ClusterState, transactional_id: str | None, tp: TopicPartition, batch: RecordBatch, version: int
) -> None:
    """Kafka 4.x asks the transaction coordinator about a transactional batch's partition
    before appending it (KIP-890). Produce v12+ adds the partition to the transaction
    there (Transactions V2's implicit AddPartitionsToTxn); older versions only verify that
    AddPartitionsToTxn came first. The coordinator's answer becomes the partition's error
    as Kafka maps it: a fenced epoch is INVALID_PRODUCER_EPOCH, markers still being
    written (CONCURRENT_TRANSACTIONS) the retriable NOT_ENOUGH_REPLICAS, a partition
    outside the transaction TRANSACTION_ABORTABLE (v11+) or INVALID_TXN_STATE (older
    clients, which do not know that error).
    """
    coordinator = get_txn_coordinator(state)
    if coordinator is None or transactional_id is None:
        return
    pid, epoch = batch.producer_id, batch.producer_epoch
    if version >= 12:
        code = coordinator.add_partitions(transactional_id, pid, epoch, [tp])
    else:
        code = coordinator.verify_partitions(transactional_id, pid, epoch, [tp])[tp]
    if code == 0:
        return
    if code == InvalidProducerIdMappingError.code:
        raise InvalidProducerIdMappingError(
            f"producer id {pid} is not the one of transactional id {transactional_id}"
        )
    if code == ProducerFencedError.code:
        raise InvalidProducerEpochError(f"producer epoch {epoch} is not the transaction's current epoch")
    if code == ConcurrentTransactionsError.code:
        raise NotEnoughReplicasError(
            "Unable to verify the partition has been added to the transaction. "
            "Underlying error: CONCURRENT_TRANSACTIONS"
        )
    if code == TransactionAbortableError.code and version >= 11:
        raise TransactionAbortableError(
            f"{tp.topic}-{tp.partition} is not part of the producer's ongoing transaction "
            "(AddPartitionsToTxn must come first)"
        )
    raise InvalidTxnStateError(f"{tp.topic}-{tp.partition}: the partition was not added to the transaction")


def _all_failed(req: ProduceRequest, v: int, code: int) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=td.name,
                topic_id=td.topic_id if v >= 13 else ZERO_UUID,
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(index=pd.index, error_code=code, base_offset=-1)
                    for pd in td.partition_data
                ],
            )
            for td in req.topic_data
        ]
    )
