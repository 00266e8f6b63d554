"""StickyAssignorUserData v0/v1 and the cooperative-sticky generation user data."""

from __future__ import annotations

import struct

import pytest
from assignor_testlib import TP
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.consume.groups.assignors import (
    CooperativeStickyAssignor,
    StickyAssignor,
    StickyUserData,
    decode_cooperative_generation,
    decode_sticky_user_data,
    encode_cooperative_generation,
    encode_sticky_user_data,
)

# Hand-built from the published schema: array of (int16-length string topic, array of
# int32 partitions), then (v1) int32 generation; arrays are int32-count prefixed.
V1_BYTES = (
    b"\x00\x00\x00\x02"  # 2 topics
    + b"\x00\x01a"  # "a"
    + b"\x00\x00\x00\x02"
    + b"\x00\x00\x00\x00\x00\x00\x00\x03"  # [0, 3]
    + b"\x00\x02bb"  # "bb"
    + b"\x00\x00\x00\x01"
    + b"\x00\x00\x00\x07"  # [7]
    + b"\x00\x00\x00\x05"  # generation 5
)


def test_encode_v1_layout() -> None:
    encoded = encode_sticky_user_data([TP("bb", 7), TP("a", 3), TP("a", 0)], 5)
    assert encoded == V1_BYTES


def test_decode_v1_and_v0() -> None:
    assert decode_sticky_user_data(V1_BYTES) == StickyUserData([TP("a", 0), TP("a", 3), TP("bb", 7)], 5)
    v0 = V1_BYTES[:-4]
    assert decode_sticky_user_data(v0) == StickyUserData([TP("a", 0), TP("a", 3), TP("bb", 7)], -1)
    assert encode_sticky_user_data([TP("bb", 7), TP("a", 0), TP("a", 3)], None) == v0


def test_empty_assignment() -> None:
    assert encode_sticky_user_data([], 3) == b"\x00\x00\x00\x00\x00\x00\x00\x03"
    assert decode_sticky_user_data(b"\x00\x00\x00\x00") == StickyUserData([], -1)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x00",
        b"\xff\xff\xff\xff",  # negative topic count
        b"\x00\x00\x00\x01\x00\x05ab",  # truncated name
        b"\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x02\x00\x00\x00\x00",  # truncated partitions
        b"\x00\x00\x00\x01\x00\x01a\x7f\xff\xff\xff",  # absurd partition count
        b"\x00\x00\x00\x00\x00\x00",  # 2 trailing bytes: neither v0 nor v1
        b"\x00\x00\x00\x01\xff\xff",  # null topic name
        b"\x00\x00\x00\x01\x00\x01\xff\x00\x00\x00\x00",  # invalid UTF-8
    ],
)
def test_decode_rejects_malformed(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_sticky_user_data(data)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.sets(st.integers(0, 2**31 - 1), max_size=5),
        max_size=5,
    ),
    st.one_of(st.none(), st.integers(-1, 2**31 - 1)),
)
def test_roundtrip(by_topic: dict[str, set[int]], generation: int | None) -> None:
    partitions = sorted(TP(t, p) for t, ps in by_topic.items() for p in ps)
    decoded = decode_sticky_user_data(encode_sticky_user_data(partitions, generation))
    assert sorted(decoded.partitions) == partitions
    assert decoded.generation == (-1 if generation is None else generation)


def test_cooperative_generation() -> None:
    assert encode_cooperative_generation(7) == b"\x00\x00\x00\x07"
    assert encode_cooperative_generation(-1) == b"\xff\xff\xff\xff"
    assert decode_cooperative_generation(struct.pack(">i", 123456)) == 123456
    with pytest.raises(ValueError):
        decode_cooperative_generation(b"\x00\x01")


def test_assignor_metadata() -> None:
    sticky = StickyAssignor()
    assert sticky.metadata(["t"], [], -1) is None
    data = sticky.metadata(["t"], [TP("t", 1)], 4)
    assert data is not None
    assert decode_sticky_user_data(data) == StickyUserData([TP("t", 1)], 4)
    assert CooperativeStickyAssignor().metadata(["t"], [TP("t", 1)], 9) == b"\x00\x00\x00\x09"
