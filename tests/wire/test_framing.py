"""Frames and headers: size prefixes, header versions, the sans-I/O frame splitter."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.core.errors import CorruptFrameError
from aiokafka_lite.wire import messages as m
from aiokafka_lite.wire.framing import (
    FrameReader,
    FrameTooLargeError,
    UnsupportedRequestError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)


def test_header_versions_follow_flexibility() -> None:
    assert request_header_version(m.MetadataRequest.API_KEY, 8) == 1
    assert request_header_version(m.MetadataRequest.API_KEY, 9) == 2
    assert response_header_version(m.MetadataRequest.API_KEY, 8) == 0
    assert response_header_version(m.MetadataRequest.API_KEY, 9) == 1
    # ApiVersions responses always use header v0, even when the body is flexible.
    assert response_header_version(m.ApiVersionsRequest.API_KEY, 3) == 0
    assert request_header_version(m.ApiVersionsRequest.API_KEY, 3) == 2


@pytest.mark.parametrize("version", [4, 9, 12])
def test_request_round_trip_through_frame(version: int) -> None:
    req = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="events")])
    frame = encode_request(req, version, correlation_id=42, client_id="me")
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    decoded = decode_request(frame[4:])
    assert decoded.api_key == m.MetadataRequest.API_KEY
    assert decoded.api_version == version
    assert decoded.correlation_id == 42
    assert decoded.header.client_id == "me"
    assert decoded.body == req


@pytest.mark.parametrize("version", [0, 3])
def test_response_round_trip_through_frame(version: int) -> None:
    resp = m.ApiVersionsResponse(
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=11)]
    )
    frame = encode_response(resp, version, correlation_id=9)
    corr, decoded = decode_response(frame[4:], m.ApiVersionsRequest.API_KEY, version)
    assert corr == 9
    assert decoded == resp


def test_unknown_api_key_and_version_carry_the_correlation_id() -> None:
    frame = struct.pack(">hhi", 999, 0, 77) + b"\x00\x00"
    with pytest.raises(UnsupportedRequestError) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.correlation_id) == (999, 77)
    frame = struct.pack(">hhi", m.ProduceRequest.API_KEY, 1, 78) + b"\x00\x00"
    with pytest.raises(UnsupportedRequestError):
        decode_request(frame)
    with pytest.raises(CorruptFrameError):
        decode_request(b"\x00\x01")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8), st.integers(1, 17))
def test_frame_reader_reassembles_any_chunking(bodies: list[bytes], chunk: int) -> None:
    stream = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    reader = FrameReader()
    out: list[bytes] = []
    for i in range(0, len(stream), chunk):
        out += reader.feed(stream[i : i + chunk])
    assert out == bodies
    assert reader.buffered == 0


def test_frame_reader_refuses_oversized_without_allocating() -> None:
    reader = FrameReader(max_frame_size=1024)
    with pytest.raises(FrameTooLargeError) as info:
        reader.feed(struct.pack(">i", 2**31 - 1))
    assert info.value.size == 2**31 - 1
    assert reader.buffered == 4  # only the prefix was held


def test_frame_reader_rejects_negative_size() -> None:
    with pytest.raises(CorruptFrameError):
        FrameReader().feed(struct.pack(">i", -5))
