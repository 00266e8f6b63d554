"""Partitioners: Java-compatible murmur2, KIP-794 uniform sticky, round robin."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner import default as kafka_python_partitioner  # a required test dependency

from aiokafka_lite.produce.partitioner import (
    RoundRobinPartitioner,
    UniformStickyPartitioner,
    _group_by_key_partition_py,
    group_by_key_partition,
    key_partition,
    murmur2,
)

HERE = Path(__file__).parent
VECTORS = HERE / "murmur2_vectors.txt"
# Partition counts of the columns in murmur2_vectors.txt (see java/Murmur2Vectors.java).
COUNTS = [1, 2, 3, 6, 7, 10, 12, 16, 100, 1000, 2147483647]


def _vectors() -> list[tuple[bytes, int, list[int]]]:
    out = []
    for line in VECTORS.read_text().splitlines():
        hexkey, h, *parts = line.split()
        out.append((b"" if hexkey == "-" else bytes.fromhex(hexkey), int(h), [int(p) for p in parts]))
    return out


def test_vectors_computed_with_java_cover_many_keys() -> None:
    vectors = _vectors()
    assert len(vectors) > 400
    assert {len(k) % 4 for k, _, _ in vectors} == {0, 1, 2, 3}  # every tail length


@pytest.mark.parametrize(("key", "expected_hash", "partitions"), _vectors()[:40] + _vectors()[-40:])
def test_murmur2_matches_java_vectors(key: bytes, expected_hash: int, partitions: list[int]) -> None:
    assert murmur2(key) == expected_hash
    for count, expected in zip(COUNTS, partitions, strict=True):
        assert key_partition(key, count) == expected


def test_murmur2_all_java_vectors() -> None:
    mismatches = [
        (key.hex(), n)
        for key, h, parts in _vectors()
        for n, p in zip(COUNTS, parts, strict=True)
        if murmur2(key) != h or key_partition(key, n) != p
    ]
    assert mismatches == []


def test_murmur2_c_and_python_twins_agree_with_java() -> None:
    """The default partitioner uses the C twin when the extension is built; both twins
    must give Java's hash for every stored vector (and the pure one stays the fallback)."""
    from aiokafka_lite.produce import partitioner
    from aiokafka_lite.wire.records._c_extension import c_ext

    if os.environ.get("AIOKAFKA_LITE_REQUIRE_EXTENSIONS") == "1":
        assert c_ext is not None, "the C extension was not built"
    twins = [partitioner._murmur2_u32_py] + ([c_ext.murmur2_u32] if c_ext is not None else [])
    for twin in twins:
        signed = [h - (1 << 32) if h & 0x80000000 else h for h in (twin(k) for k, _, _ in _vectors())]
        assert signed == [h for _, h, _ in _vectors()], twin
        assert twin(bytearray(b"21")) == twin(memoryview(b"21")) == 3321034988


def test_murmur2_published_kafka_values() -> None:
    # Values asserted by Apache Kafka's own unit tests for Utils.murmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_stored_vectors_are_what_java_computes(tmp_path: Path) -> None:
    # A JDK is a required test tool (Apache Kafka runs on it too): without javac the stored
    # vectors would go unchecked against Java, so that is a failure, not a skip.
    javac = shutil.which("javac")
    if javac is None:
        pytest.fail(
            "javac is not installed, and the murmur2 vectors are checked against Java with it: "
            "install a JDK 17+ (apt-get install openjdk-17-jdk-headless)",
            pytrace=False,
        )
    subprocess.run(
        [javac, "-d", str(tmp_path), str(HERE / "java" / "Murmur2Vectors.java")], check=True, timeout=120
    )
    out = subprocess.run(
        ["java", "-cp", str(tmp_path), "Murmur2Vectors"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert out == VECTORS.read_text()


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python(key: bytes) -> None:
    theirs = kafka_python_partitioner.murmur2(key)  # unsigned
    assert murmur2(key) & 0xFFFFFFFF == theirs
    assert key_partition(key, 12) == (theirs & 0x7FFFFFFF) % 12


def test_key_partition_accepts_any_buffer() -> None:
    key = b"user-12345"
    expected = key_partition(key, 7)
    assert key_partition(bytearray(key), 7) == expected
    assert key_partition(memoryview(key), 7) == expected


# -- uniform sticky ---------------------------------------------------------------------


def test_sticky_stays_until_batch_size_bytes() -> None:
    sp = UniformStickyPartitioner(6, sticky_bytes=1000, rng=random.Random(1))
    first = sp.current
    for _ in range(9):
        sp.on_append(100, allow_switch=True)
        assert sp.current == first
    sp.on_append(100, allow_switch=True)  # 1000 bytes reached
    assert sp.produced == 0


def test_sticky_waits_for_full_batch_until_twice_the_threshold() -> None:
    rng = random.Random(7)
    sp = UniformStickyPartitioner(50, sticky_bytes=1000, rng=rng)
    first = sp.current
    sp.on_append(1500, allow_switch=False)
    assert sp.current == first and sp.produced == 1500
    sp.on_append(499, allow_switch=False)
    assert sp.current == first
    sp.on_append(1, allow_switch=False)  # 2000: switch regardless
    assert sp.produced == 0


def test_sticky_distribution_is_uniform() -> None:
    sp = UniformStickyPartitioner(6, sticky_bytes=100, rng=random.Random(3))
    counts: Counter[int] = Counter()
    for _ in range(60000):
        counts[sp.current] += 10
        sp.on_append(10, allow_switch=True)
    assert set(counts) == set(range(6))
    mean = sum(counts.values()) / 6
    assert all(abs(c - mean) / mean < 0.1 for c in counts.values()), counts


def test_sticky_only_picks_available_partitions() -> None:
    sp = UniformStickyPartitioner(6, [1, 4], sticky_bytes=10, rng=random.Random(5))
    seen = set()
    for _ in range(200):
        seen.add(sp.current)
        sp.on_append(10, allow_switch=True)
    assert seen == {1, 4}


def test_sticky_adaptive_weights_avoid_long_queues() -> None:
    sp = UniformStickyPartitioner(3, sticky_bytes=10, rng=random.Random(11))
    sp.update_load({0: 10, 1: 0, 2: 0})  # partition 0's broker is slow
    counts: Counter[int] = Counter()
    for _ in range(3000):
        sp.on_append(10, allow_switch=True)
        counts[sp.current] += 1
    # weights 1 : 11 : 11
    assert counts[0] < 0.1 * 3000
    assert counts[1] > 0.4 * 3000 and counts[2] > 0.4 * 3000
    sp.update_load({0: 2, 1: 2, 2: 2})  # equal queues: back to uniform
    counts.clear()
    for _ in range(3000):
        sp.on_append(10, allow_switch=True)
        counts[sp.current] += 1
    assert counts[0] > 0.25 * 3000


def test_sticky_metadata_update_moves_off_vanished_partition() -> None:
    sp = UniformStickyPartitioner(6, sticky_bytes=10, rng=random.Random(2))
    while sp.current < 3:
        sp.on_append(10, allow_switch=True)
    sp.update_metadata(3, [0, 1, 2])
    assert sp.current in (0, 1, 2)


def test_round_robin_cycles_available_then_all() -> None:
    rr = RoundRobinPartitioner()
    assert [rr.partition(4, [0, 2]) for _ in range(4)] == [0, 2, 0, 2]
    rr2 = RoundRobinPartitioner()
    assert [rr2.partition(3, []) for _ in range(4)] == [0, 1, 2, 0]


def test_sticky_skips_unavailable_partitions_unless_nothing_else() -> None:
    sp = UniformStickyPartitioner(4, sticky_bytes=10, rng=random.Random(9))
    sp.update_load({}, unavailable={0, 1})
    seen = set()
    for _ in range(200):
        sp.on_append(10, allow_switch=True)
        seen.add(sp.current)
    assert seen == {2, 3}
    sp.update_load({}, unavailable={0, 1, 2, 3})  # all stuck: fall back to all
    seen.clear()
    for _ in range(200):
        sp.on_append(10, allow_switch=True)
        seen.add(sp.current)
    assert seen == {0, 1, 2, 3}


def test_group_by_key_partition_matches_key_partition_and_keeps_input_order() -> None:
    rng = random.Random(7)
    for count in (1, 3, 12):
        keys = [rng.randbytes(rng.randint(0, 24)) for _ in range(500)]
        order, ends = group_by_key_partition(keys, count)
        assert sorted(order) == list(range(500)) and len(ends) == count and ends[-1] == 500
        start = 0
        for partition, end in enumerate(ends):
            group = order[start:end]
            assert group == sorted(group)  # input order within a partition
            assert all(key_partition(keys[i], count) == partition for i in group)
            start = end
        assert _group_by_key_partition_py(keys, count) == (order, ends)
    with pytest.raises(TypeError, match="key 1 is str"):
        group_by_key_partition([b"a", "b"], 3)  # type: ignore[list-item]
