"""Produce: validate batch headers and CRCs, assign offsets, append. No record decoding."""

from __future__ import annotations

from typing import Final

from aiokafka_lite.broker.api.common import NOT_LEADER, CloseConnection
from aiokafka_lite.broker.api.fastpath import encode_produce_response
from aiokafka_lite.broker.context import EncodedResponse, HandlerRegistry, RequestContext
from aiokafka_lite.broker.log import validate_record_set
from aiokafka_lite.broker.state import ClusterState, Topic
from aiokafka_lite.errors import (
    BrokerResponseError,
    CorruptMessageError,
    InvalidRequiredAcksError,
    UnknownServerError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import ProduceRequest, ProduceResponse
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["register"]

_VALID_ACKS: Final = (-1, 0, 1)


def register(registry: HandlerRegistry) -> None:
    registry.register(ProduceRequest.API_KEY, produce, ProduceRequest.MIN_VERSION, ProduceRequest.MAX_VERSION)


def node_endpoints(state: ClusterState, leaders: set[int]) -> list[ProduceResponse.NodeEndpoint]:
    out = []
    for bid in sorted(leaders):
        b = state.brokers.get(bid)
        if b is not None and b.alive:
            out.append(ProduceResponse.NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack))
    return out


async def produce(ctx: RequestContext, req: Request) -> Response | EncodedResponse | None:
    assert isinstance(req, ProduceRequest)
    state = ctx.cluster
    v = ctx.api_version
    acks = req.acks
    if acks not in _VALID_ACKS:
        if acks == 0:
            raise CloseConnection("invalid acks")
        return _all_failed(req, v, InvalidRequiredAcksError.code)
    failed = False
    moved_leaders: set[int] = set()
    responses = []
    for td in req.topic_data:
        topic: Topic | None
        if v >= 13:
            topic = state.topics_by_id.get(td.topic_id)
            missing = UnknownTopicIdError.code
        else:
            topic = state.topics.get(td.name)
            missing = UnknownTopicOrPartitionError.code
        parts = []
        for pd in td.partition_data:
            pr = ProduceResponse.PartitionProduceResponse(index=pd.index, base_offset=-1)
            parts.append(pr)
            if topic is None or not 0 <= pd.index < len(topic.partitions):
                pr.error_code = missing
                failed = True
                continue
            p = topic.partitions[pd.index]
            plog = p.log
            if p.leader_id != ctx.broker_id:
                pr.error_code = NOT_LEADER
                failed = True
                if v >= 10 and state.is_alive(p.leader_id):
                    pr.current_leader = ProduceResponse.LeaderIdAndEpoch(
                        leader_id=p.leader_id, leader_epoch=p.leader_epoch
                    )
                    moved_leaders.add(p.leader_id)
                continue
            data = pd.records
            try:
                if data is None:
                    raise CorruptMessageError("null record set")
                infos = validate_record_set(data, plog.max_message_bytes)
                result = plog.append(data, infos)
            except BrokerResponseError as e:
                pr.error_code = e.code
                pr.error_message = e.message
                pr.log_start_offset = plog.log_start_offset
                failed = True
                continue
            except Exception as e:  # a bug must not take the connection down with it
                pr.error_code = UnknownServerError.code
                pr.error_message = str(e)
                failed = True
                continue
            pr.base_offset = result.base_offset
            pr.log_append_time_ms = result.log_append_time
            pr.log_start_offset = result.log_start_offset
        responses.append(
            ProduceResponse.TopicProduceResponse(
                name=td.name, topic_id=td.topic_id if v >= 13 else ZERO_UUID, partition_responses=parts
            )
        )
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
                    )
                    for pr in tr.partition_responses
                ],
            )
            for tr in responses
        ],
    )
    return EncodedResponse([body], len(body))


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
