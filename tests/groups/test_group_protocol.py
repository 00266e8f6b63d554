"""Consumer embedded protocol: version-prefixed subscription/assignment bytes."""

from __future__ import annotations

import struct

import pytest

from aiokafka_lite.consume.groups.assignors import get_assignor
from aiokafka_lite.consume.groups.protocol import (
    JoinedMember,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    run_assignor,
)
from aiokafka_lite.core.errors import CorruptFrameError
from aiokafka_lite.core.structs import TopicPartition as TP


def test_subscription_roundtrip_v3() -> None:
    data = encode_subscription(
        ["b", "a"], user_data=b"ud", owned=[TP("a", 1), TP("a", 0), TP("b", 2)], generation=7, rack="r1"
    )
    assert data[:2] == b"\x00\x03"
    d = decode_subscription(data)
    assert d.version == 3
    assert d.topics == ["a", "b"]
    assert d.user_data == b"ud"
    assert d.owned_partitions == [TP("a", 0), TP("a", 1), TP("b", 2)]
    assert d.generation == 7
    assert d.rack == "r1"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_subscription_old_versions_drop_newer_fields(version: int) -> None:
    data = encode_subscription(["t"], owned=[TP("t", 0)], generation=3, rack="r", version=version)
    d = decode_subscription(data)
    assert d.version == version
    assert d.topics == ["t"]
    assert d.owned_partitions == ([TP("t", 0)] if version >= 1 else [])
    assert d.generation == (3 if version >= 2 else -1)
    assert d.rack is None


def test_subscription_newer_version_read_with_ours_ignoring_tail() -> None:
    body = encode_subscription(["t"], owned=[TP("t", 1)], generation=4, rack="x")[2:]
    future = struct.pack(">h", 9) + body + b"\x01\x02\x03 future fields"
    d = decode_subscription(future)
    assert d.version == 9
    assert d.topics == ["t"]
    assert d.owned_partitions == [TP("t", 1)]
    assert d.generation == 4
    assert d.rack == "x"


def test_subscription_written_by_v0_client_parses() -> None:
    # int16 version 0, array of 1 string "topic", null user data
    raw = struct.pack(">hih5si", 0, 1, 5, b"topic", -1)
    d = decode_subscription(raw)
    assert (d.version, d.topics, d.user_data, d.owned_partitions) == (0, ["topic"], None, [])


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\xff\xff\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x05ab"])
def test_subscription_corrupt(raw: bytes) -> None:
    with pytest.raises(CorruptFrameError):
        decode_subscription(raw)


def test_assignment_roundtrip_and_versions() -> None:
    tps = [TP("b", 0), TP("a", 2), TP("a", 1)]
    for version in range(4):
        data = encode_assignment(tps, user_data=b"u", version=version)
        assert struct.unpack(">h", data[:2])[0] == version
        got, ud = decode_assignment(data)
        assert got == [TP("a", 1), TP("a", 2), TP("b", 0)]
        assert ud == b"u"


def test_assignment_empty_bytes_mean_nothing() -> None:
    assert decode_assignment(b"") == ([], None)


def test_assignment_newer_version_tolerated() -> None:
    body = encode_assignment([TP("t", 3)])[2:]
    got, _ = decode_assignment(struct.pack(">h", 5) + body + b"tail")
    assert got == [TP("t", 3)]


def test_assignment_corrupt() -> None:
    with pytest.raises(CorruptFrameError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x09")


def test_run_assignor_encodes_per_member_version_and_tolerates_garbage() -> None:
    members = [
        JoinedMember("m1", None, encode_subscription(["t"], version=3)),
        JoinedMember("m2", None, encode_subscription(["t"], version=0)),
        JoinedMember("m3", None, b"garbage!"),
    ]
    out = run_assignor(get_assignor("range"), members, {"t": 4})
    assert set(out) == {"m1", "m2", "m3"}
    assert struct.unpack(">h", out["m1"][:2])[0] == 3
    assert struct.unpack(">h", out["m2"][:2])[0] == 0
    a1, _ = decode_assignment(out["m1"])
    a2, _ = decode_assignment(out["m2"])
    a3, _ = decode_assignment(out["m3"])
    assert sorted(a1 + a2) == [TP("t", p) for p in range(4)]
    assert a1 and a2 and a3 == []


def test_run_assignor_passes_owned_partitions_to_cooperative_sticky() -> None:
    owned = [TP("t", p) for p in range(6)]
    members = [
        JoinedMember("a", None, encode_subscription(["t"], owned=owned, generation=1)),
        JoinedMember("b", None, encode_subscription(["t"])),
    ]
    out = run_assignor(get_assignor("cooperative-sticky"), members, {"t": 6})
    a, _ = decode_assignment(out["a"])
    b, _ = decode_assignment(out["b"])
    # First phase of KIP-429: "a" keeps a subset of what it owned, "b" gets nothing that
    # "a" still owns (so nothing at all in this round).
    assert set(a) < set(owned) and len(a) == 3
    assert b == []
