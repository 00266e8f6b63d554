"""Eager ``sticky`` assignor: examples, ownership resolution, and churn properties."""

from __future__ import annotations

import random
from collections.abc import Mapping

from assignor_testlib import (
    TP,
    Group,
    Op,
    apply_ops,
    check_valid,
    churn,
    existing_subs,
    kept_count,
    loads,
    no_transfer_to_lighter,
    optimal_by_brute_force,
    owner_map,
    sum_squares,
    tps,
    uniform_kept_upper_bound,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.consume.groups.assignors import MemberSubscription, StickyAssignor, TopicPartition
from aiokafka_lite.consume.groups.assignors.sticky import Claim, resolve_ownership, sticky_target

M = MemberSubscription
STICKY = StickyAssignor()


def spread(assignment: Mapping[str, list[TopicPartition]]) -> int:
    sizes = [len(p) for p in assignment.values()]
    return max(sizes) - min(sizes)


# -- hand-written scenarios ----------------------------------------------------------


def test_initial_assignment_balanced() -> None:
    members = {m: M(m, ["t0", "t1"]) for m in ("C0", "C1", "C2")}
    out = STICKY.assign(members, {"t0": 4, "t1": 3})
    check_valid(members, {"t0": 4, "t1": 3}, out)
    assert sorted(loads(out).values()) == [2, 2, 3]


def test_java_doc_member_leaves_everyone_keeps_their_partitions() -> None:
    # C0, C1, C2 subscribed to t0..t3 (2 partitions each); then C1 leaves.
    ppt = {f"t{i}": 2 for i in range(4)}
    before = {"C0": tps("t0-0 t1-1 t3-0"), "C1": tps("t0-1 t2-0 t3-1"), "C2": tps("t1-0 t2-1")}
    members = {m: M(m, list(ppt), before[m], generation=1) for m in ("C0", "C2")}
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    assert set(before["C0"]) <= set(out["C0"])
    assert set(before["C2"]) <= set(out["C2"])
    assert loads(out) == {"C0": 4, "C2": 4}


def test_java_doc_unequal_subscriptions() -> None:
    ppt = {"t0": 1, "t1": 2, "t2": 3}
    members = {"C0": M("C0", ["t0"]), "C1": M("C1", ["t0", "t1"]), "C2": M("C2", ["t0", "t1", "t2"])}
    first = STICKY.assign(members, ppt)
    assert first == {"C0": tps("t0-0"), "C1": tps("t1-0 t1-1"), "C2": tps("t2-0 t2-1 t2-2")}
    # C0 leaves: its partition goes to C1, nothing else moves.
    rest = {m: M(m, members[m].topics, first[m], generation=1) for m in ("C1", "C2")}
    second = STICKY.assign(rest, ppt)
    assert second == {"C1": tps("t0-0 t1-0 t1-1"), "C2": tps("t2-0 t2-1 t2-2")}


def test_member_joins_moves_minimum() -> None:
    ppt = {"t": 6}
    prev = {"a": tps("t-0 t-1 t-2"), "b": tps("t-3 t-4 t-5")}
    members = {m: M(m, ["t"], prev[m], generation=3) for m in prev}
    members["c"] = M("c", ["t"])
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    assert loads(out) == {"a": 2, "b": 2, "c": 2}
    assert set(out["a"]) < set(prev["a"]) and set(out["b"]) < set(prev["b"])


def test_topic_removed_and_partitions_added() -> None:
    prev = {"a": tps("x-0 y-0 y-2"), "b": tps("x-1 y-1")}
    members = {m: M(m, ["y"], prev[m], generation=2) for m in prev}  # x unsubscribed
    ppt = {"x": 2, "y": 5}  # y grew from 3 to 5 partitions
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    assert spread(out) <= 1
    assert {TP("y", 0), TP("y", 2)} <= set(out["a"]) and TP("y", 1) in out["b"]


def test_partitions_of_deleted_topic_or_shrunk_topic_ignored() -> None:
    prev = {"a": tps("gone-0 t-0 t-7"), "b": tps("t-1")}
    members = {m: M(m, ["t", "gone"], prev[m], generation=1) for m in prev}
    out = STICKY.assign(members, {"t": 4})
    check_valid(members, {"t": 4}, out)
    assert TP("t", 0) in out["a"] and TP("t", 1) in out["b"]


def test_uses_legacy_user_data_for_previous_ownership() -> None:
    # Eager members of other clients send empty owned_partitions but encode the
    # previous assignment in StickyAssignorUserData.
    ppt = {"t": 4}
    prev = {"a": tps("t-1 t-3"), "b": tps("t-0 t-2")}
    members = {m: M(m, ["t"], user_data=STICKY.metadata(["t"], prev[m], 7)) for m in prev}
    assert STICKY.assign(members, ppt) == prev


def test_malformed_user_data_falls_back_to_subscription() -> None:
    members = {
        "a": M("a", ["t"], tps("t-1"), generation=1, user_data=b"\x01"),
        "b": M("b", ["t"], tps("t-0"), generation=1),
    }
    assert STICKY.assign(members, {"t": 2}) == {"a": tps("t-1"), "b": tps("t-0")}


def test_higher_generation_wins_duplicate_claim() -> None:
    ppt = {"t": 4}
    members = {
        "a": M("a", ["t"], tps("t-0 t-1"), generation=5),
        "b": M("b", ["t"], tps("t-1 t-2"), generation=4),  # stale claim on t-1
        "c": M("c", ["t"]),
    }
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    # a keeps both (it may take the one +1 slot), b only its non-stale partition.
    assert out == {"a": tps("t-0 t-1"), "b": tps("t-2"), "c": tps("t-3")}


def test_resolve_ownership_rules() -> None:
    claims = {
        "a": Claim(tps("t-0 t-1 t-2"), 5),
        "b": Claim(tps("t-1 t-3"), 4),
        "c": Claim(tps("t-2 t-3"), 5),
        "d": Claim(tps("t-4"), 2),
    }
    res = resolve_ownership(claims)
    assert res.owner == {TP("t", 0): "a", TP("t", 1): "a", TP("t", 3): "c", TP("t", 4): "d"}
    assert res.contested == {TP("t", 2)}
    # A newer claim clears a contest between older ones, whatever the order.
    res2 = resolve_ownership(
        {"x": Claim(tps("t-9"), 1), "y": Claim(tps("t-9"), 1), "z": Claim(tps("t-9"), 2)}
    )
    assert res2.owner == {TP("t", 9): "z"} and not res2.contested


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from("abcde"),
        st.tuples(st.sets(st.integers(0, 5), max_size=4), st.integers(-1, 3)),
        max_size=5,
    )
)
def test_resolve_ownership_matches_naive(raw: dict[str, tuple[set[int], int]]) -> None:
    claims = {m: Claim([TP("t", p) for p in parts], gen) for m, (parts, gen) in raw.items()}
    res = resolve_ownership(claims)
    for p in range(6):
        gens = [(gen, m) for m, (parts, gen) in raw.items() if p in parts]
        tp = TP("t", p)
        if not gens:
            assert tp not in res.owner and tp not in res.contested
            continue
        top = max(g for g, _ in gens)
        top_members = [m for g, m in gens if g == top]
        if len(top_members) == 1:
            assert res.owner[tp] == top_members[0] and tp not in res.contested
        else:
            assert tp in res.contested and tp not in res.owner


def test_contested_partition_is_still_assigned_by_eager_sticky() -> None:
    ppt = {"t": 2}
    members = {"a": M("a", ["t"], tps("t-0 t-1"), generation=1), "b": M("b", ["t"], tps("t-1"), generation=1)}
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    assert spread(out) == 0 and out["a"] == tps("t-0")


def test_rack_preference_when_dealing_new_partitions() -> None:
    ppt = {"t": 4}
    members = {"a": M("a", ["t"], rack="r1"), "b": M("b", ["t"], rack="r2")}
    racks = {TP("t", 0): {"r2"}, TP("t", 1): {"r2"}, TP("t", 2): {"r1"}, TP("t", 3): {"r1", "r3"}}
    out = STICKY.assign(members, ppt, racks)
    assert out == {"a": tps("t-2 t-3"), "b": tps("t-0 t-1")}
    # Stickiness still beats rack locality for partitions already owned.
    members = {
        "a": M("a", ["t"], tps("t-0 t-1"), 1, rack="r1"),
        "b": M("b", ["t"], tps("t-2 t-3"), 1, rack="r2"),
    }
    assert STICKY.assign(members, ppt, racks) == {"a": tps("t-0 t-1"), "b": tps("t-2 t-3")}


def test_member_shedding_partitions_keeps_rack_local_ones() -> None:
    racks = {TP("t", p): {"r1" if p % 2 else "r2"} for p in range(4)}
    racks[TP("u", 0)] = {"r1"}
    a_owned = tps("t-0 t-1 t-2 t-3")
    # Identical subscriptions (exact construction).
    members = {"a": M("a", ["t"], a_owned, 1, rack="r1"), "b": M("b", ["t"], rack="r2")}
    assert STICKY.assign(members, {"t": 4}, racks) == {"a": tps("t-1 t-3"), "b": tps("t-0 t-2")}
    # Different subscriptions (counts-first algorithm).
    members = {"a": M("a", ["t", "u"], a_owned, 1, rack="r1"), "b": M("b", ["t"], rack="r2")}
    out = STICKY.assign(members, {"t": 4, "u": 1}, racks)
    assert out == {"a": tps("t-1 t-3 u-0"), "b": tps("t-0 t-2")}


def test_member_without_existing_topics_gets_nothing() -> None:
    members = {"a": M("a", ["t"]), "b": M("b", ["missing"]), "c": M("c", ["t"])}
    out = STICKY.assign(members, {"t": 3})
    check_valid(members, {"t": 3}, out)
    assert out["b"] == []


# -- churn simulation ----------------------------------------------------------------


def member_view(group: Group, use_user_data: bool) -> dict[str, MemberSubscription]:
    """Subscriptions as the leader sees them: previous ownership either in the
    subscription fields or (like Java's eager sticky members) only in user data."""
    out = {}
    for m, topics in group.subs.items():
        owned = group.assignment.get(m)
        if owned is None:
            out[m] = M(m, list(topics))
        elif use_user_data:
            out[m] = M(m, list(topics), user_data=STICKY.metadata(topics, owned, group.generation))
        else:
            out[m] = M(m, list(topics), list(owned), generation=group.generation)
    return out


def run_round(group: Group, use_user_data: bool, uniform: bool) -> None:
    members = member_view(group, use_user_data)
    ppt = group.ppt
    previous = owner_map(group.assignment)
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    if uniform or len({existing_subs(m, ppt) for m in members.values()}) == 1:
        assert spread(out) <= 1
        assert kept_count(previous, out) == uniform_kept_upper_bound(members, ppt, previous)
    else:
        assert no_transfer_to_lighter(members, ppt, out)
    group.assignment = out
    group.generation += 1
    # Nothing changed -> nothing moves.
    again = STICKY.assign(member_view(group, use_user_data), ppt)
    assert again == out


@settings(max_examples=60, deadline=None)
@given(churn(uniform=True), st.booleans())
def test_churn_equal_subscriptions(scenario: tuple[Group, list[list[Op]]], user_data: bool) -> None:
    group, rounds = scenario
    run_round(group, user_data, uniform=True)
    for ops in rounds:
        apply_ops(group, ops)
        run_round(group, user_data, uniform=True)


@settings(max_examples=60, deadline=None)
@given(churn(uniform=False), st.booleans())
def test_churn_unequal_subscriptions(scenario: tuple[Group, list[list[Op]]], user_data: bool) -> None:
    group, rounds = scenario
    run_round(group, user_data, uniform=False)
    for ops in rounds:
        apply_ops(group, ops)
        run_round(group, user_data, uniform=False)


# -- optimality against exhaustive search on tiny groups -------------------------------


@st.composite
def tiny_group(draw: st.DrawFn) -> tuple[dict[str, MemberSubscription], dict[str, int]]:
    ppt = {t: draw(st.integers(1, 3)) for t in ["a", "b", "c"][: draw(st.integers(1, 3))]}
    ids = [f"m{i}" for i in range(draw(st.integers(1, 3)))]
    members = {}
    all_tps = [TP(t, p) for t, n in ppt.items() for p in range(n)]
    all_tps = all_tps[:7]
    ppt = {t: sum(1 for tp in all_tps if tp.topic == t) for t in ppt}
    owners = draw(st.lists(st.sampled_from([*ids, None]), min_size=len(all_tps), max_size=len(all_tps)))
    for m in ids:
        topics = draw(st.lists(st.sampled_from(sorted(ppt)), min_size=1, max_size=3, unique=True))
        owned = [tp for tp, o in zip(all_tps, owners, strict=True) if o == m]
        members[m] = M(m, topics, owned, generation=1)
    return members, ppt


@settings(max_examples=150, deadline=None)
@given(tiny_group())
def test_matches_exhaustive_optimum(group: tuple[dict[str, MemberSubscription], dict[str, int]]) -> None:
    members, ppt = group
    previous = {
        tp: m
        for m, sub in members.items()
        for tp in sub.owned_partitions
        if tp.topic in existing_subs(sub, ppt)
    }
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    best_squares, best_kept = optimal_by_brute_force(members, ppt, previous)
    assert sum_squares(out) == best_squares
    assert kept_count(previous, out) == best_kept


# -- the general algorithm on equal subscriptions (cross-check of the two paths) -----


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 8),
    st.lists(st.integers(1, 9), min_size=1, max_size=4),
    st.randoms(use_true_random=False),
)
def test_general_path_agrees_with_exact_construction(
    n_members: int, counts: list[int], rnd: random.Random
) -> None:
    ppt = {f"t{i}": c for i, c in enumerate(counts)}
    all_tps = [TP(t, p) for t, c in ppt.items() for p in range(c)]
    owned: list[list[TopicPartition]] = [[] for _ in range(n_members)]
    for tp in all_tps:
        who = rnd.randrange(n_members + 1)
        if who < n_members:
            owned[who].append(tp)
    subs = [frozenset(ppt)] * n_members
    exact = sticky_target(subs, owned, ppt)
    general = sticky_target(subs, owned, ppt, force_general=True)
    for result in (exact, general):
        assert sorted(tp for part in result for tp in part) == sorted(all_tps)
        sizes = [len(p) for p in result]
        assert max(sizes) - min(sizes) <= 1
    kept = [
        sum(1 for i, part in enumerate(r) for tp in part if tp in set(owned[i])) for r in (exact, general)
    ]
    assert kept[0] == kept[1]


# -- performance sanity (correctness only, no timing assertions) -----------------------


def test_large_group_equal_subscriptions() -> None:
    ppt = {f"topic-{i}": 20 for i in range(100)}  # 2000 partitions
    members = {f"member-{i:03d}": M(f"member-{i:03d}", list(ppt)) for i in range(100)}
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    assert spread(out) == 0
    # 10 leave, 10 join.
    survivors = {m: M(m, list(ppt), out[m], generation=1) for m in list(members)[10:]}
    survivors.update({f"new-{i}": M(f"new-{i}", list(ppt)) for i in range(10)})
    out2 = STICKY.assign(survivors, ppt)
    check_valid(survivors, ppt, out2)
    assert spread(out2) == 0
    previous = owner_map(out)
    assert kept_count(previous, out2) == uniform_kept_upper_bound(survivors, ppt, previous)


def test_large_group_unequal_subscriptions() -> None:
    rnd = random.Random(42)
    ppt = {f"topic-{i}": rnd.randint(5, 35) for i in range(100)}
    names = sorted(ppt)
    members = {
        f"member-{i:03d}": M(f"member-{i:03d}", rnd.sample(names, rnd.randint(5, 60))) for i in range(100)
    }
    out = STICKY.assign(members, ppt)
    check_valid(members, ppt, out)
    assert no_transfer_to_lighter(members, ppt, out)
    # Churn: a third of the members leave, new ones with other subscriptions join.
    survivors = {m: M(m, s.topics, out[m], generation=1) for m, s in list(members.items())[::3]}
    survivors.update({f"new-{i}": M(f"new-{i}", rnd.sample(names, rnd.randint(5, 60))) for i in range(60)})
    out2 = STICKY.assign(survivors, ppt)
    check_valid(survivors, ppt, out2)
    assert no_transfer_to_lighter(survivors, ppt, out2)
    again = STICKY.assign({m: M(m, s.topics, out2[m], generation=2) for m, s in survivors.items()}, ppt)
    assert again == out2
