"""range / roundrobin: exact outputs (Java's documented examples) and the registry."""

from __future__ import annotations

import pytest
from assignor_testlib import TP, check_valid, tps
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.consume.groups.assignors import (
    ASSIGNORS,
    Assignor,
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    cooperative_diff,
    get_assignor,
    register_assignor,
)
from aiokafka_lite.core.errors import ConfigError

M = MemberSubscription


def subs(**topics: str) -> dict[str, MemberSubscription]:
    return {m: M(m, t.split()) for m, t in topics.items()}


# -- range ---------------------------------------------------------------------------


def test_range_java_doc_example() -> None:
    members = subs(C0="t0 t1", C1="t0 t1")
    out = RangeAssignor().assign(members, {"t0": 3, "t1": 3})
    assert out == {"C0": tps("t0-0 t0-1 t1-0 t1-1"), "C1": tps("t0-2 t1-2")}


def test_range_uneven_split_first_members_get_extra() -> None:
    members = subs(a="t", b="t", c="t")
    out = RangeAssignor().assign(members, {"t": 8})
    assert out == {"a": tps("t-0 t-1 t-2"), "b": tps("t-3 t-4 t-5"), "c": tps("t-6 t-7")}


def test_range_more_members_than_partitions() -> None:
    members = subs(a="t", b="t", c="t")
    out = RangeAssignor().assign(members, {"t": 2})
    assert out == {"a": tps("t-0"), "b": tps("t-1"), "c": []}


def test_range_per_topic_subscribers_only() -> None:
    members = subs(a="t0", b="t0 t1", c="t1")
    out = RangeAssignor().assign(members, {"t0": 3, "t1": 3})
    assert out == {"a": tps("t0-0 t0-1"), "b": tps("t0-2 t1-0 t1-1"), "c": tps("t1-2")}


def test_range_static_members_sort_by_instance_id() -> None:
    # Java doc: after a rolling bounce member ids change (C0->C3, C1->C2) but with
    # group.instance.id the assignment follows the instance ids, not the member ids.
    members = {
        "C3": M("C3", ["t0", "t1"], group_instance_id="I0"),
        "C2": M("C2", ["t0", "t1"], group_instance_id="I1"),
    }
    out = RangeAssignor().assign(members, {"t0": 3, "t1": 3})
    assert out == {"C3": tps("t0-0 t0-1 t1-0 t1-1"), "C2": tps("t0-2 t1-2")}


def test_range_static_members_before_dynamic() -> None:
    members = {
        "a": M("a", ["t"]),
        "z": M("z", ["t"], group_instance_id="inst"),
    }
    out = RangeAssignor().assign(members, {"t": 3})
    assert out == {"z": tps("t-0 t-1"), "a": tps("t-2")}


def test_range_skips_unknown_topics() -> None:
    members = subs(a="t missing", b="t")
    out = RangeAssignor().assign(members, {"t": 2})
    assert out == {"a": tps("t-0"), "b": tps("t-1")}


def test_empty_group() -> None:
    for assignor in ASSIGNORS.values():
        assert assignor.assign({}, {"t": 3}) == {}


# -- roundrobin ----------------------------------------------------------------------


def test_roundrobin_java_doc_example_identical_subscriptions() -> None:
    members = subs(C0="t0 t1", C1="t0 t1")
    out = RoundRobinAssignor().assign(members, {"t0": 3, "t1": 3})
    assert out == {"C0": tps("t0-0 t0-2 t1-1"), "C1": tps("t0-1 t1-0 t1-2")}


def test_roundrobin_java_doc_example_different_subscriptions() -> None:
    members = subs(C0="t0", C1="t0 t1", C2="t0 t1 t2")
    out = RoundRobinAssignor().assign(members, {"t0": 1, "t1": 2, "t2": 3})
    assert out == {"C0": tps("t0-0"), "C1": tps("t1-0"), "C2": tps("t1-1 t2-0 t2-1 t2-2")}


def test_roundrobin_static_members_follow_instance_ids() -> None:
    ppt = {"t0": 3, "t1": 3}
    before = {
        "C0": M("C0", ["t0", "t1"], group_instance_id="I0"),
        "C1": M("C1", ["t0", "t1"], group_instance_id="I1"),
        "C2": M("C2", ["t0", "t1"], group_instance_id="I2"),
    }
    # Rolling bounce: new member ids sort in the opposite order.
    after = {
        "C5": M("C5", ["t0", "t1"], group_instance_id="I0"),
        "C4": M("C4", ["t0", "t1"], group_instance_id="I1"),
        "C3": M("C3", ["t0", "t1"], group_instance_id="I2"),
    }
    first = RoundRobinAssignor().assign(before, ppt)
    second = RoundRobinAssignor().assign(after, ppt)
    assert first == {"C0": tps("t0-0 t1-0"), "C1": tps("t0-1 t1-1"), "C2": tps("t0-2 t1-2")}
    assert second == {"C5": first["C0"], "C4": first["C1"], "C3": first["C2"]}


def test_roundrobin_cursor_continues_across_topics() -> None:
    members = subs(a="x y", b="x y", c="x y")
    out = RoundRobinAssignor().assign(members, {"x": 2, "y": 2})
    assert out == {"a": tps("x-0 y-1"), "b": tps("x-1"), "c": tps("y-0")}


# -- properties common to range and roundrobin ---------------------------------------


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, MemberSubscription], dict[str, int]]:
    topics = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    ppt = {t: draw(st.integers(0, 7)) for t in topics}
    n_members = draw(st.integers(1, 6))
    members = {}
    for i in range(n_members):
        chosen = draw(st.lists(st.sampled_from([*topics, "ghost"]), min_size=1, max_size=4, unique=True))
        members[f"m{i}"] = M(f"m{i}", chosen)
    return members, ppt


@settings(max_examples=80, deadline=None)
@given(groups(), st.sampled_from(["range", "roundrobin"]))
def test_simple_assignors_complete_and_valid(
    group: tuple[dict[str, MemberSubscription], dict[str, int]], name: str
) -> None:
    members, ppt = group
    check_valid(members, ppt, get_assignor(name).assign(members, ppt))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 8), st.lists(st.integers(0, 9), min_size=1, max_size=4))
def test_roundrobin_balanced_with_equal_subscriptions(n_members: int, counts: list[int]) -> None:
    ppt = {f"t{i}": c for i, c in enumerate(counts)}
    members = {f"m{i}": M(f"m{i}", list(ppt)) for i in range(n_members)}
    sizes = [len(p) for p in RoundRobinAssignor().assign(members, ppt).values()]
    assert max(sizes) - min(sizes) <= 1


# -- registry ------------------------------------------------------------------------


def test_builtin_names_and_protocols() -> None:
    assert isinstance(get_assignor("range"), RangeAssignor)
    assert isinstance(get_assignor("roundrobin"), RoundRobinAssignor)
    assert isinstance(get_assignor("sticky"), StickyAssignor)
    assert isinstance(get_assignor("cooperative-sticky"), CooperativeStickyAssignor)
    assert {
        n: ASSIGNORS[n].rebalance_protocol for n in ("range", "roundrobin", "sticky", "cooperative-sticky")
    } == {
        "range": "eager",
        "roundrobin": "eager",
        "sticky": "eager",
        "cooperative-sticky": "cooperative",
    }
    for assignor in ASSIGNORS.values():
        assert isinstance(assignor, Assignor)


def test_unknown_name() -> None:
    with pytest.raises(ConfigError, match="unknown partition assignor 'nope'"):
        get_assignor("nope")


class _Everything:
    """A custom assignor: the first member (by id) gets everything."""

    name = "test-everything"
    rebalance_protocol: RebalanceProtocol = "eager"

    def metadata(self, topics: list[str], owned: list[TP], generation: int) -> bytes | None:
        return b"custom"

    def assign(
        self,
        members: dict[str, MemberSubscription],
        partitions_per_topic: dict[str, int],
        partition_racks: dict[TP, set[str]] | None = None,
    ) -> dict[str, list[TP]]:
        out: dict[str, list[TP]] = {m: [] for m in members}
        first = min(members)
        out[first] = [TP(t, p) for t in sorted(partitions_per_topic) for p in range(partitions_per_topic[t])]
        return out


def test_custom_assignor_instance_and_registration() -> None:
    custom = _Everything()
    assert get_assignor(custom) is custom
    register_assignor(custom)
    try:
        assert get_assignor("test-everything") is custom
        with pytest.raises(ConfigError, match="already registered"):
            register_assignor(_Everything())
        replacement = _Everything()
        register_assignor(replacement, replace=True)
        assert get_assignor("test-everything") is replacement
    finally:
        ASSIGNORS.pop("test-everything", None)


def test_custom_assignor_validation() -> None:
    class NoAssign:
        name = "x"
        rebalance_protocol = "eager"

    class BadProtocol(_Everything):
        rebalance_protocol = "incremental"  # type: ignore[assignment]

    with pytest.raises(ConfigError, match="not an assignor"):
        get_assignor(NoAssign())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="rebalance_protocol"):
        get_assignor(BadProtocol())  # type: ignore[arg-type]


# -- cooperative_diff ----------------------------------------------------------------


def test_cooperative_diff() -> None:
    owned = set(tps("t-0 t-1 t-2"))
    assigned = set(tps("t-1 t-2 t-3"))
    assert cooperative_diff(owned, assigned) == ({TP("t", 0)}, {TP("t", 3)})
    assert cooperative_diff(set(), assigned) == (set(), assigned)
    assert cooperative_diff(owned, owned) == (set(), set())
