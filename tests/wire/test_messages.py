"""Generated message codecs: round trips at every version, gates, vectors, fuzzing."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.core.errors import CorruptFrameError, KafkaError, VersionError
from aiokafka_lite.wire import messages as m
from aiokafka_lite.wire.message import FieldSpec, Message, Struct

ALL: list[type[Message]] = [getattr(m, name) for name in m.__all__ if name not in ("REQUESTS", "RESPONSES")]
CASES = [(cls, v) for cls in ALL for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def _elem_strategy(owner: type[Struct], type_name: str, v: int, flexible: bool) -> st.SearchStrategy[Any]:
    if type_name in INT_RANGES:
        lo, hi = INT_RANGES[type_name]
        return st.integers(lo, hi)
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "bool":
        return st.booleans()
    if type_name == "uuid":
        return st.uuids()
    if type_name == "string":
        return TEXT
    if type_name in ("bytes", "records"):
        return st.binary(max_size=12)
    nested = getattr(owner, type_name)
    return struct_strategy(nested, v, flexible, owner)


def struct_strategy(
    cls: type[Struct], v: int, flexible: bool, top: type[Struct] | None = None
) -> st.SearchStrategy[Any]:
    top = top or cls
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls.FIELDS:
        present = _in(f.tagged_versions, v) if f.tag is not None else _in(f.versions, v)
        if not present:
            continue
        elem = f.type[2:] if f.type.startswith("[]") else f.type
        s = _elem_strategy(top, elem, v, flexible)
        if f.type.startswith("[]"):
            s = st.lists(s, max_size=3)
        if _in(f.nullable_versions, v):
            s = st.one_of(st.none(), s)
        kwargs[f.name] = s
    if flexible:
        kwargs["unknown_tags"] = st.one_of(
            st.none(), st.dictionaries(st.integers(1000, 1010), st.binary(max_size=4), min_size=1, max_size=2)
        )
    return st.builds(cls, **kwargs)


@pytest.mark.parametrize(("cls", "version"), CASES, ids=[f"{c.NAME}-v{v}" for c, v in CASES])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_version(cls: type[Message], version: int, data: st.DataObject) -> None:
    msg = data.draw(struct_strategy(cls, version, cls.is_flexible(version)))
    encoded = msg.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == msg
    # Decoding then encoding reproduces the exact bytes (tag order, compact forms).
    assert decoded.encode(version) == encoded


@pytest.mark.parametrize(("cls", "version"), CASES[::3], ids=[f"{c.NAME}-v{v}" for c, v in CASES[::3]])
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_truncations_and_garbage_raise_typed_errors(
    cls: type[Message], version: int, data: st.DataObject
) -> None:
    msg = data.draw(struct_strategy(cls, version, cls.is_flexible(version)))
    encoded = msg.encode(version)
    for cut in range(len(encoded)):
        with pytest.raises(CorruptFrameError):
            cls.decode(encoded[:cut], version)
    junk = data.draw(st.binary(max_size=64))
    try:
        cls.decode(junk, version)
    except KafkaError:
        pass


def test_registry_covers_every_api() -> None:
    assert set(m.REQUESTS) == set(m.RESPONSES)
    assert len(m.REQUESTS) >= 60
    for key, req in m.REQUESTS.items():
        assert req.API_KEY == key
        assert m.RESPONSES[key].API_KEY == key
    assert m.REQUESTS[0] is m.ProduceRequest
    assert m.RESPONSES[1] is m.FetchResponse
    # A renamed API keeps its key: ListClientMetricsResources became ListConfigResources (74).
    assert m.REQUESTS[74] is m.ListConfigResourcesRequest
    # The share-group APIs (KIP-932).
    share = {
        76: m.ShareGroupHeartbeatRequest,
        77: m.ShareGroupDescribeRequest,
        78: m.ShareFetchRequest,
        79: m.ShareAcknowledgeRequest,
        90: m.DescribeShareGroupOffsetsRequest,
        91: m.AlterShareGroupOffsetsRequest,
        92: m.DeleteShareGroupOffsetsRequest,
    }
    assert {key: m.REQUESTS[key] for key in share} == share
    # Kafka 4.4's remaining client-facing APIs: streams groups (KIP-1071), the KRaft
    # quorum's dynamic voters (KIP-853) and controller unregistration.
    newer = {
        80: (m.AddRaftVoterRequest, m.AddRaftVoterResponse),
        81: (m.RemoveRaftVoterRequest, m.RemoveRaftVoterResponse),
        88: (m.StreamsGroupHeartbeatRequest, m.StreamsGroupHeartbeatResponse),
        89: (m.StreamsGroupDescribeRequest, m.StreamsGroupDescribeResponse),
        93: (m.StreamsGroupTopologyDescriptionUpdateRequest, m.StreamsGroupTopologyDescriptionUpdateResponse),
        94: (m.UnregisterControllerRequest, m.UnregisterControllerResponse),
    }
    assert {key: (m.REQUESTS[key], m.RESPONSES[key]) for key in newer} == newer
    assert m.RequestHeader.MIN_VERSION == 0 and m.RequestHeader.MAX_VERSION == 2
    assert (m.ResponseHeader.MIN_VERSION, m.ResponseHeader.MAX_VERSION) == (0, 1)
    assert m.ConsumerProtocolSubscription.MAX_VERSION >= 3
    assert m.ConsumerProtocolAssignment.MAX_VERSION >= 3


def test_schema_defaults_are_applied() -> None:
    # Defaults come from the schema, not from the Python type.
    assert m.FetchRequest().replica_id == -1
    assert m.FetchRequest().max_bytes == 0x7FFFFFFF
    assert m.FetchRequest().session_epoch == -1
    assert m.JoinGroupRequest().rebalance_timeout_ms == -1
    assert m.JoinGroupRequest().group_instance_id is None
    assert m.ProduceRequest().transactional_id is None


def test_hand_checked_request_header_and_api_versions_v3() -> None:
    # ApiVersions v3 is flexible: header v2 (client id stays a non-compact string,
    # then an empty tag section), body of compact strings and a tag section.
    from aiokafka_lite.wire.framing import encode_request

    req = m.ApiVersionsRequest(client_software_name="x", client_software_version="1")
    frame = encode_request(req, 3, correlation_id=7, client_id="c")
    expected_body = (
        struct.pack(">hhi", 18, 3, 7)
        + b"\x00\x01c"  # client id: int16 length + bytes
        + b"\x00"  # header tags
        + b"\x02x"  # compact string "x"
        + b"\x021"  # compact string "1"
        + b"\x00"  # body tags
    )
    assert frame == struct.pack(">i", len(expected_body)) + expected_body


def test_hand_checked_non_flexible_metadata_v4() -> None:
    req = m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True
    )
    # v4: array(int32) of {string name}, then bool.
    assert req.encode(4) == b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x01"
    assert m.MetadataRequest(topics=None).encode(4) == b"\xff\xff\xff\xff\x01"  # schema default: true
    assert (
        m.MetadataRequest(topics=None, allow_auto_topic_creation=False).encode(4) == b"\xff\xff\xff\xff\x00"
    )


def test_hand_checked_tagged_field() -> None:
    # FetchResponse v12+: partition CurrentLeader is tagged (tag 1); unknown tags survive.
    leader = m.FetchResponse.LeaderIdAndEpoch(leader_id=5, leader_epoch=9)
    part = m.FetchResponse.PartitionData(partition_index=0, current_leader=leader, records=b"")
    resp = m.FetchResponse(
        responses=[m.FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])],
        unknown_tags={4000: b"\x01\x02"},
    )
    data = resp.encode(12)
    again = m.FetchResponse.decode(data, 12)
    assert again.responses[0].partitions[0].current_leader == leader
    assert again.unknown_tags == {4000: b"\x01\x02"}
    # The tagged leader is encoded as: tag 1, size 9 (int32 + int32 + empty tags), values.
    assert b"\x01\x09\x00\x00\x00\x05\x00\x00\x00\x09\x00" in data


def test_hand_checked_add_raft_voter_v0_and_v1() -> None:
    # AddRaftVoter (KIP-853): flexible from v0; v1 adds AckWhenCommitted (default true).
    dir_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    req = m.AddRaftVoterRequest(
        cluster_id="c",
        timeout_ms=1000,
        voter_id=3,
        voter_directory_id=dir_id,
        listeners=[m.AddRaftVoterRequest.Listener(name="L", host="h", port=9093)],
    )
    body = (
        b"\x02c"
        + struct.pack(">ii", 1000, 3)
        + dir_id.bytes
        + b"\x02"
        + b"\x02L\x02h"
        + struct.pack(">H", 9093)
        + b"\x00"
    )
    assert req.encode(0) == body + b"\x00"
    assert req.encode(1) == body + b"\x01\x00"
    assert m.AddRaftVoterRequest.decode(body + b"\x01\x00", 1) == req
    # v0 cannot say "acknowledge before the commit": the gate refuses a non-default value.
    with pytest.raises(VersionError):
        m.AddRaftVoterRequest(ack_when_committed=False).encode(0)


def test_version_gate_rejects_non_default_value() -> None:
    # JoinGroup's group_instance_id exists from v5; it cannot be silently dropped.
    req = m.JoinGroupRequest(group_id="g", group_instance_id="static-1")
    with pytest.raises(VersionError):
        req.encode(4)
    assert m.JoinGroupRequest.decode(req.encode(5), 5).group_instance_id == "static-1"


def test_ignorable_field_is_dropped_quietly() -> None:
    # ProduceRequest topic name is ignorable: v13 carries the topic id instead.
    topic = m.ProduceRequest.TopicProduceData(name="t", topic_id=uuid.uuid4())
    req = m.ProduceRequest(acks=-1, timeout_ms=1, topic_data=[topic])
    back = m.ProduceRequest.decode(req.encode(13), 13)
    assert back.topic_data[0].name == "" and back.topic_data[0].topic_id == topic.topic_id


def test_nullability_gate() -> None:
    with pytest.raises(VersionError):
        m.FindCoordinatorRequest(key=None).encode(1)  # type: ignore[arg-type]


def test_out_of_range_value_is_a_typed_error() -> None:
    with pytest.raises(VersionError):
        m.HeartbeatRequest(group_id="g", generation_id=2**40).encode(3)


def test_unknown_version_is_a_typed_error() -> None:
    with pytest.raises(VersionError):
        m.ProduceRequest().encode(2)
    with pytest.raises(VersionError):
        m.ProduceRequest.decode(b"", 99)


def test_trailing_bytes_rejected_in_strict_mode() -> None:
    data = m.HeartbeatResponse(error_code=0).encode(0) + b"\x00"
    with pytest.raises(CorruptFrameError):
        m.HeartbeatResponse.decode(data, 0)
    assert m.HeartbeatResponse.decode(data, 0, strict=False).error_code == 0


def test_claimed_lengths_do_not_allocate() -> None:
    # An array claiming 2**31-1 elements in a 10-byte body fails before allocating.
    body = struct.pack(">i", 2**31 - 1) + b"\x00" * 6
    with pytest.raises(CorruptFrameError, match="exceeds"):
        m.MetadataRequest.decode(body, 4)
    # A varint that never ends.
    with pytest.raises(CorruptFrameError, match="varint"):
        m.ApiVersionsRequest.decode(b"\xff" * 20, 3)


def test_records_are_zero_copy_views() -> None:
    part = m.ProduceRequest.PartitionProduceData(index=0, records=b"abc" * 10)
    req = m.ProduceRequest(
        acks=1, timeout_ms=5, topic_data=[m.ProduceRequest.TopicProduceData(name="t", partition_data=[part])]
    )
    data = req.encode(9)
    back = m.ProduceRequest.decode(data, 9)
    records = back.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and bytes(records) == b"abc" * 10


def test_secrets_are_not_in_repr() -> None:
    req = m.SaslAuthenticateRequest(auth_bytes=b"\x00user\x00hunter2")
    assert "hunter2" not in repr(req)


def test_field_specs_are_consistent() -> None:
    for cls in ALL:
        for f in cls.FIELDS:
            assert isinstance(f, FieldSpec)
            assert hasattr(cls(), f.name)


def test_records_absent_where_the_schema_forbids_null_are_sent_empty() -> None:
    """ShareFetchResponse's Records is nullable in v0 only (a version Kafka 4.4 no longer
    serves): a partition without records goes out as empty records in v1 and v2, since
    the Java client refuses a null there."""

    def response(records: bytes | None) -> m.ShareFetchResponse:
        part = m.ShareFetchResponse.PartitionData(partition_index=3, records=records)
        topic = m.ShareFetchResponse.ShareFetchableTopicResponse(topic_id=uuid.uuid4(), partitions=[part])
        return m.ShareFetchResponse(responses=[topic])

    absent, empty = response(None), response(b"")
    empty.responses[0].topic_id = absent.responses[0].topic_id
    assert absent.encode(1) == empty.encode(1)
    assert absent.encode(2) == empty.encode(2)
    decoded = m.ShareFetchResponse.decode(absent.encode(1), 1).responses[0].partitions[0].records
    assert decoded is not None and len(decoded) == 0
