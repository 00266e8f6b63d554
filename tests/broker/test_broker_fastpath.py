"""The hand-written produce codecs agree with the generated ones at every version."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.broker.api.fastpath import (
    decode_produce_request,
    encode_produce_response,
    parse_request_header,
)
from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.wire.framing import encode_request, request_header_version
from aiokafka_lite.wire.messages import ProduceRequest, ProduceResponse, RequestHeader
from aiokafka_lite.wire.primitives import Reader

VERSIONS = range(ProduceRequest.MIN_VERSION, ProduceRequest.MAX_VERSION + 1)
TID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def sample(v: int, txn: str | None, client_id: str | None) -> bytes:
    req = ProduceRequest(
        transactional_id=txn,
        acks=-1,
        timeout_ms=1234,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="" if v >= 13 else "tópic",
                topic_id=TID if v >= 13 else uuid.UUID(int=0),
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=b"\x01" * 70),
                    ProduceRequest.PartitionProduceData(index=5, records=None),
                ],
            ),
            ProduceRequest.TopicProduceData(
                name="" if v >= 13 else "b", topic_id=TID if v >= 13 else uuid.UUID(int=0), partition_data=[]
            ),
        ],
    )
    return encode_request(req, v, 77, client_id)[4:]


def generated(frame: bytes, v: int) -> tuple[str | None, ProduceRequest]:
    r = Reader(frame)
    header = RequestHeader.decode_from(r, request_header_version(0, v), strict=False)
    body = ProduceRequest.decode_from(r, v, strict=False)
    return header.client_id, body


@pytest.mark.parametrize("v", VERSIONS)
@pytest.mark.parametrize("txn", [None, "tx-1"])
@pytest.mark.parametrize("client_id", [None, "", "rdkafka"])
def test_decode_matches_generated(v: int, txn: str | None, client_id: str | None) -> None:
    frame = sample(v, txn, client_id)
    cid, pos = parse_request_header(frame, request_header_version(0, v))
    fast = decode_produce_request(frame, pos, v)
    gen_cid, gen = generated(frame, v)
    assert cid == gen_cid
    assert fast.to_dict() == gen.to_dict()


@pytest.mark.parametrize("v", VERSIONS)
def test_encode_matches_generated(v: int) -> None:
    record_errors = [(1, "Compacted topic cannot accept message without key"), (4, None)] if v >= 8 else []
    topics = [
        (
            "t1",
            TID,
            [
                (0, 0, 42, -1, 0, None, []),
                (3, 10, -1, -1, 7, "too large" if v >= 8 else None, []),
                (4, 87, -1, -1, 0, "rejected" if v >= 8 else None, record_errors),
            ],
        ),
        ("t2", TID, []),
    ]
    resp = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=name if v < 13 else "",
                topic_id=tid if v >= 13 else uuid.UUID(int=0),
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(
                        index=i,
                        error_code=e,
                        base_offset=b,
                        log_append_time_ms=t,
                        log_start_offset=s,
                        error_message=m,
                        record_errors=[
                            ProduceResponse.BatchIndexAndErrorMessage(
                                batch_index=bi, batch_index_error_message=bm
                            )
                            for bi, bm in r
                        ],
                    )
                    for i, e, b, t, s, m, r in parts
                ],
            )
            for name, tid, parts in topics
        ]
    )
    assert encode_produce_response(v, topics) == resp.encode(v)


@settings(max_examples=300, deadline=None)
@given(
    v=st.sampled_from(list(VERSIONS)),
    flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 40),
)
def test_mutated_frames_agree_or_raise(v: int, flips: list[tuple[int, int]], cut: int) -> None:
    frame = bytearray(sample(v, "tx", "c"))
    for pos, val in flips:
        if pos < len(frame):
            frame[pos] = val
    data = bytes(frame[: len(frame) - cut])
    try:
        cid, pos = parse_request_header(data, request_header_version(0, v))
        fast = decode_produce_request(data, pos, v)
    except (KafkaError, struct.error, IndexError, ValueError):
        # Exactly what the server catches before falling back to the generated codec
        # (server.py): anything else would crash the connection, so it fails here.
        return
    try:
        gen_cid, gen = generated(data, v)
    except KafkaError:
        return  # the fast path is at most more lenient about garbage after what it needs
    assert (cid, fast.to_dict()) == (gen_cid, gen.to_dict())
