"""Sans-I/O ConnectionProtocol: framing, correlation, ordering, ApiVersions fallback."""

from __future__ import annotations

import struct

import pytest

from aiokafka_lite.core.errors import CorruptFrameError, SecurityProtocolMismatchError
from aiokafka_lite.net.protocol import ConnectionProtocol, FrameAssembler, tls_record_type
from aiokafka_lite.wire.framing import FrameTooLargeError, decode_request, encode_response
from aiokafka_lite.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)


def _answer(frame: bytes, resp: object, version: int | None = None) -> bytes:
    req = decode_request(frame[4:])
    return encode_response(resp, req.api_version if version is None else version, req.correlation_id)  # type: ignore[arg-type]


def test_correlation_ids_increase_and_responses_match_in_order() -> None:
    proto = ConnectionProtocol("cid")
    frames = []
    for i in range(5):
        entry, frame = proto.send(FindCoordinatorRequest(key=f"k{i}"), 3)
        assert entry is not None and entry.correlation_id == i
        frames.append(frame)
    assert proto.in_flight == 5
    data = b"".join(_answer(f, FindCoordinatorResponse(host=f"h{i}")) for i, f in enumerate(frames))
    out, err = proto.receive(data)
    assert err is None
    assert [(e.correlation_id, r.host) for e, r, _ in out] == [(i, f"h{i}") for i in range(5)]  # type: ignore[attr-defined]
    assert proto.in_flight == 0
    assert proto.bytes_received == len(data)


def test_byte_by_byte_delivery() -> None:
    proto = ConnectionProtocol()
    _, frame = proto.send(MetadataRequest(topics=None), 12)
    data = _answer(frame, MetadataResponse(cluster_id="c", controller_id=2))
    got = []
    for i in range(len(data)):
        out, err = proto.receive(data[i : i + 1])
        assert err is None
        got.extend(out)
    assert len(got) == 1
    assert got[0][1].controller_id == 2  # type: ignore[attr-defined]
    assert got[0][2] == len(data)


def test_requests_without_response_are_not_tracked() -> None:
    proto = ConnectionProtocol()
    entry, frame = proto.send(ProduceRequest(acks=0), 9, expect_response=False)
    assert entry is None and proto.in_flight == 0
    assert decode_request(frame[4:]).body.acks == 0  # type: ignore[attr-defined]
    # The next tracked request still matches its response even though corr id 0 got none.
    entry2, frame2 = proto.send(FindCoordinatorRequest(key="x"), 3)
    assert entry2 is not None and entry2.correlation_id == 1
    out, err = proto.receive(_answer(frame2, FindCoordinatorResponse(node_id=7)))
    assert err is None and out[0][1].node_id == 7  # type: ignore[attr-defined]


def test_correlation_mismatch_is_corrupt() -> None:
    proto = ConnectionProtocol()
    _, _f0 = proto.send(FindCoordinatorRequest(key="a"), 3)
    _, f1 = proto.send(FindCoordinatorRequest(key="b"), 3)
    out, err = proto.receive(_answer(f1, FindCoordinatorResponse()))  # answer to the second first
    assert out == []
    assert isinstance(err, CorruptFrameError) and "correlation id mismatch" in str(err)
    assert proto.in_flight == 2


def test_good_responses_before_a_corrupt_one_are_delivered() -> None:
    proto = ConnectionProtocol()
    _, f0 = proto.send(FindCoordinatorRequest(key="a"), 3)
    _, _f1 = proto.send(FindCoordinatorRequest(key="b"), 3)
    good = _answer(f0, FindCoordinatorResponse(node_id=1))
    garbage = struct.pack(">ii", 4, 1)  # a frame with correlation id 1 and no body
    out, err = proto.receive(good + garbage)
    assert [r.node_id for _, r, _ in out] == [1]  # type: ignore[attr-defined]
    assert isinstance(err, CorruptFrameError)
    assert [e.correlation_id for e in proto.pending()] == [1]


def test_unsolicited_response_is_corrupt() -> None:
    proto = ConnectionProtocol()
    out, err = proto.receive(struct.pack(">ii", 4, 0))
    assert out == [] and isinstance(err, CorruptFrameError)


def test_oversized_response_refused_before_allocation() -> None:
    proto = ConnectionProtocol(max_response_size=1024)
    proto.send(FindCoordinatorRequest(key="a"), 3)
    _out, err = proto.receive(struct.pack(">i", 2**31 - 1))  # claims 2 GiB, we only sent 4 bytes
    assert isinstance(err, FrameTooLargeError) and err.size == 2**31 - 1


def test_api_versions_v0_fallback_decoding() -> None:
    proto = ConnectionProtocol()
    _, frame = proto.send(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 4)
    # A broker that only knows ApiVersions v0-2 answers UNSUPPORTED_VERSION in v0 format.
    resp = ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)]
    )
    out, err = proto.receive(_answer(frame, resp, version=0))
    assert err is None
    decoded = out[0][1]
    assert isinstance(decoded, ApiVersionsResponse)
    assert decoded.error_code == 35 and decoded.api_keys[0].max_version == 2


def test_correlation_id_wraps() -> None:
    proto = ConnectionProtocol()
    proto._next_id = 2**31 - 1
    e1, _ = proto.send(FindCoordinatorRequest(key="a"), 3)
    e2, _ = proto.send(FindCoordinatorRequest(key="b"), 3)
    assert e1 is not None and e2 is not None
    assert (e1.correlation_id, e2.correlation_id) == (2**31 - 1, 0)


@pytest.mark.parametrize("client_id", [None, "", "x" * 300])
def test_client_id_in_header(client_id: str | None) -> None:
    proto = ConnectionProtocol(client_id)
    _, frame = proto.send(FindCoordinatorRequest(key="a"), 3)
    assert decode_request(frame[4:]).header.client_id == client_id


# ---------------------------------------------------------------------------- FrameAssembler


def _frames(sizes: list[int]) -> tuple[bytes, list[bytes]]:
    bodies = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies), bodies


@pytest.mark.parametrize("seed", range(5))
def test_assembler_any_chunking_yields_the_same_frames(seed: int) -> None:
    import random

    rng = random.Random(seed)
    sizes = [rng.choice([0, 1, 5, 100, 4000, 70_000, 200_000]) for _ in range(40)]
    stream, bodies = _frames(sizes)
    asm = FrameAssembler()
    got: list[bytes] = []
    pos = 0
    while pos < len(stream):
        if rng.random() < 0.5:  # BufferedProtocol path
            buf = asm.get_buffer(-1)
            n = min(len(buf), rng.randint(1, 100_000), len(stream) - pos)
            buf[:n] = stream[pos : pos + n]
            got.extend(bytes(f) for f in asm.buffer_updated(n))
        else:  # data_received path
            n = min(rng.randint(1, 100_000), len(stream) - pos)
            got.extend(bytes(f) for f in asm.feed(stream[pos : pos + n]))
        pos += n
    assert got == bodies
    assert asm.buffered == 0


def test_assembler_reads_large_frames_in_place() -> None:
    stream, bodies = _frames([300_000])
    asm = FrameAssembler()
    buf = asm.get_buffer(-1)
    buf[:1000] = stream[:1000]
    assert asm.buffer_updated(1000) == []
    target = asm.get_buffer(-1)
    assert len(target) == 300_000 - 996  # exactly the rest of the frame, no more
    target[:] = stream[1000:]
    (frame,) = asm.buffer_updated(len(target))
    assert isinstance(frame, bytearray) and frame == bodies[0]
    assert target.obj is frame  # the kernel wrote into the frame itself


def test_assembler_refuses_oversized_and_negative_sizes() -> None:
    asm = FrameAssembler(max_frame_size=1000)
    with pytest.raises(FrameTooLargeError):
        asm.feed(struct.pack(">i", 1001))
    with pytest.raises(CorruptFrameError):
        FrameAssembler().feed(struct.pack(">i", -5))


def test_protocol_buffer_interface_matches_receive() -> None:
    proto = ConnectionProtocol()
    _, frame = proto.send(MetadataRequest(topics=None), 12)
    data = _answer(frame, MetadataResponse(cluster_id="c" * 100_000, controller_id=4))
    got = []
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        n = min(len(buf), 7000, len(data) - pos)
        buf[:n] = data[pos : pos + n]
        out, err = proto.buffer_updated(n)
        assert err is None
        got.extend(out)
        pos += n
    assert len(got) == 1 and got[0][1].controller_id == 4  # type: ignore[attr-defined]
    assert proto.bytes_received == len(data)


# What Kafka's TLS listener (4.0.2 and 4.4.0, checked by hand) sends back to a plaintext
# ApiVersions request: a TLS alert record. As a size prefix it reads 352,518,912 bytes.
TLS_ALERT = bytes([21, 3, 3, 0, 2, 2, 10])


@pytest.mark.parametrize("max_response_size", [100 << 20, 1 << 30])
def test_tls_record_as_first_reply_is_a_security_protocol_mismatch(max_response_size: int) -> None:
    proto = ConnectionProtocol(max_response_size=max_response_size, peer="broker b:9093")
    proto.send(ApiVersionsRequest(), 3)
    out, err = proto.receive(TLS_ALERT)
    assert out == []
    assert isinstance(err, SecurityProtocolMismatchError)  # not FrameTooLargeError, whatever the limit
    assert "broker b:9093 answered with a TLS alert record" in str(err)
    assert "security_protocol='SSL'" in str(err)


def test_tls_record_split_across_reads_into_the_buffer() -> None:
    proto = ConnectionProtocol()
    proto.send(ApiVersionsRequest(), 3)
    for i, byte in enumerate(TLS_ALERT[:3]):
        buf = proto.get_buffer(-1)
        buf[0] = byte
        out, err = proto.buffer_updated(1)
        assert out == []
        if i < 2:
            assert err is None
    assert isinstance(err, SecurityProtocolMismatchError)


@pytest.mark.parametrize(
    ("head", "kind"),
    [(b"\x15\x03\x03", "alert"), (b"\x16\x03\x01", "handshake"), (b"\x17\x03\x04", "application_data"),
     (b"\x00\x00\x01", None), (b"\x15\x02\x03", None), (b"\x16\x03\x05", None), (b"\x16\x03", None)],
)  # fmt: skip
def test_tls_record_type(head: bytes, kind: str | None) -> None:
    assert tls_record_type(head) == kind
