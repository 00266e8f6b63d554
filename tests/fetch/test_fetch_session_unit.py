"""FetchSession (KIP-227 client state machine), without a broker."""

from __future__ import annotations

import uuid

from aiokafka_lite.consume.fetch.session import FINAL_EPOCH, FetchSession, PartitionFetch
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages.fetch_request import FetchRequest
from aiokafka_lite.wire.messages.fetch_response import FetchResponse

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)
ID_A = uuid.uuid4()
ID_B = uuid.uuid4()


def pf(offset: int, topic_id: uuid.UUID = ID_A) -> PartitionFetch:
    return PartitionFetch(fetch_offset=offset, max_bytes=1000, current_leader_epoch=3, topic_id=topic_id)


def response(session_id: int, parts: list[TopicPartition] = (), error: int = 0) -> FetchResponse:  # type: ignore[assignment]
    topics: dict[str, FetchResponse.FetchableTopicResponse] = {}
    for tp in parts:
        t = topics.setdefault(tp.topic, FetchResponse.FetchableTopicResponse(topic=tp.topic))
        t.partitions.append(FetchResponse.PartitionData(partition_index=tp.partition))
    return FetchResponse(error_code=error, session_id=session_id, responses=list(topics.values()))


def established(wanted: dict[TopicPartition, PartitionFetch]) -> FetchSession:
    s = FetchSession(1)
    plan = s.build(wanted)
    assert s.handle_response(plan, response(77, list(wanted))).ok
    return s


def test_disabled_sessions_always_send_full_sessionless_requests() -> None:
    s = FetchSession(1, enabled=False)
    for _ in range(3):
        plan = s.build({A0: pf(0)})
        assert plan.full and plan.session_id == 0 and plan.epoch == FINAL_EPOCH
        assert plan.to_send == {A0: pf(0)}
        assert s.handle_response(plan, response(0, [A0])).ok
    assert s.incremental_requests == 0


def test_full_then_incremental_with_changes_and_forgotten() -> None:
    s = FetchSession(1)
    first = s.build({A0: pf(0), A1: pf(0), B0: pf(5, ID_B)})
    assert first.full and first.session_id == 0 and first.epoch == 0
    assert s.handle_response(first, response(77, [A0])).ok
    assert s.session_id == 77 and s.epoch == 1

    # Nothing changed: an incremental request with no partitions.
    plan = s.build({A0: pf(0), A1: pf(0), B0: pf(5, ID_B)})
    assert not plan.full and plan.session_id == 77 and plan.epoch == 1
    assert plan.to_send == {} and plan.to_forget == []
    assert s.handle_response(plan, response(77)).ok
    assert s.epoch == 2

    # A0 advanced, B0 is no longer wanted, A1 unchanged.
    plan = s.build({A0: pf(10), A1: pf(0)})
    assert plan.to_send == {A0: pf(10)}
    assert plan.to_forget == [(B0, ID_B)]
    req = plan.to_request(max_wait_ms=500, min_bytes=1, max_bytes=100, isolation_level=0)
    assert [t.topic for t in req.topics] == ["a"] and req.topics[0].partitions[0].fetch_offset == 10
    assert [(f.topic, f.partitions) for f in req.forgotten_topics_data] == [("b", [0])]
    assert s.handle_response(plan, response(77, [A0, A1])).ok
    assert set(s.partitions) == {A0, A1} and s.epoch == 3


def test_session_id_not_found_starts_over() -> None:
    s = established({A0: pf(0)})
    plan = s.build({A0: pf(1)})
    check = s.handle_response(plan, response(0, error=70))
    assert not check.ok and check.error_code == 70
    nxt = s.build({A0: pf(1)})
    assert nxt.full and nxt.session_id == 0 and nxt.epoch == 0


def test_invalid_epoch_closes_existing_and_asks_new() -> None:
    s = established({A0: pf(0)})
    plan = s.build({A0: pf(1)})
    assert not s.handle_response(plan, response(0, error=71)).ok
    nxt = s.build({A0: pf(1)})
    assert nxt.full and nxt.session_id == 77 and nxt.epoch == 0 and nxt.to_send == {A0: pf(1)}
    assert s.resets == 1


def test_unexpected_partition_in_incremental_response_is_rejected() -> None:
    s = established({A0: pf(0)})
    plan = s.build({A0: pf(1)})
    check = s.handle_response(plan, response(77, [B0]))
    assert not check.ok and "b-0" in check.problem
    assert s.build({A0: pf(1)}).full


def test_broker_declining_session_keeps_full_requests() -> None:
    s = FetchSession(1)
    plan = s.build({A0: pf(0)})
    assert s.handle_response(plan, response(0, [A0])).ok
    assert s.build({A0: pf(0)}).full


def test_send_error_resets_and_server_closing_session() -> None:
    s = established({A0: pf(0)})
    s.build({A0: pf(1)})
    s.handle_send_error()
    assert s.build({A0: pf(1)}).full
    s = established({A0: pf(0)})
    plan = s.build({A0: pf(1)})
    assert s.handle_response(plan, response(0, [A0])).ok  # data valid, session gone
    assert s.build({A0: pf(1)}).full


def test_topic_id_change_forgets_old_id() -> None:
    s = established({A0: pf(0)})
    new_id = uuid.uuid4()
    plan = s.build({A0: pf(0, new_id)})
    assert plan.to_send == {A0: pf(0, new_id)}
    assert plan.to_forget == [(A0, ID_A)]


def test_epoch_wraps_to_one() -> None:
    s = established({A0: pf(0)})
    s.epoch = 2**31 - 1
    plan = s.build({A0: pf(0)})
    assert s.handle_response(plan, response(77)).ok
    assert s.epoch == 1


def test_responses_by_topic_id_are_resolved() -> None:
    s = established({A0: pf(0)})
    plan = s.build({A0: pf(3)})
    resp = FetchResponse(
        session_id=77,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic_id=ID_A, partitions=[FetchResponse.PartitionData(partition_index=0)]
            )
        ],
    )
    assert s.handle_response(plan, resp).ok


def test_request_round_trips_with_names_and_ids() -> None:
    s = established({A0: pf(0), B0: pf(0, ID_B)})
    plan = s.build({A0: pf(4)})
    req = plan.to_request(max_wait_ms=100, min_bytes=1, max_bytes=1000, isolation_level=1)
    for version in (7, 12, 13, FetchRequest.MAX_VERSION):
        back = FetchRequest.decode(req.encode(version), version)
        assert back.session_id == 77 and back.session_epoch == 1 and back.isolation_level == 1
        assert back.topics[0].partitions[0].fetch_offset == 4
        if version >= 13:
            assert back.topics[0].topic_id == ID_A
            assert back.forgotten_topics_data[0].topic_id == ID_B
        else:
            assert back.topics[0].topic == "a"
            assert back.forgotten_topics_data[0].topic == "b"
