"""``cooperative-sticky`` (KIP-429): withholding, convergence, and churn properties."""

from __future__ import annotations

import random

from assignor_testlib import (
    TP,
    Group,
    Op,
    apply_ops,
    check_valid,
    churn,
    existing_subs,
    kept_count,
    no_transfer_to_lighter,
    owner_map,
    tps,
    uniform_kept_upper_bound,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.consume.groups.assignors import (
    CooperativeStickyAssignor,
    MemberSubscription,
    StickyAssignor,
    TopicPartition,
    cooperative_diff,
    encode_cooperative_generation,
)

M = MemberSubscription
COOP = CooperativeStickyAssignor()


def view(group: Group) -> dict[str, MemberSubscription]:
    """Cooperative members rejoin with what they own and their generation."""
    return {
        m: M(m, list(topics), list(group.assignment.get(m, [])), generation=group.generation)
        for m, topics in group.subs.items()
    }


def cooperative_round(group: Group) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition]]:
    """One rebalance: assign, check the KIP-429 rule, apply revocations/additions.

    Returns the assignment and the set of partitions members had to revoke.
    """
    members = view(group)
    ppt = group.ppt
    owned = owner_map(group.assignment)
    out = COOP.assign(members, ppt)
    check_valid(members, ppt, out, complete=False)
    # Same target as eager sticky, minus what someone else still owns.
    target = StickyAssignor().assign(members, ppt)
    for m, parts in out.items():
        assert parts == [tp for tp in target[m] if owned.get(tp, m) == m]
    revoked: set[TopicPartition] = set()
    for m, parts in out.items():
        to_revoke, to_add = cooperative_diff(group.assignment.get(m, []), parts)
        # KIP-429: nothing is handed over while another member still owns it.
        for tp in to_add:
            assert owned.get(tp, m) == m, f"{tp} given to {m} while {owned[tp]} owns it"
        revoked |= to_revoke
    group.assignment = out
    group.generation += 1
    return out, revoked


def settle(group: Group, uniform: bool) -> None:
    """Run the follow-up rebalance and check the group converged."""
    before = owner_map(group.assignment)
    out, revoked = cooperative_round(group)
    members = view(group)
    check_valid(members, group.ppt, out)  # complete after the follow-up round
    assert not revoked, f"follow-up round still revoked {revoked}"
    for tp, m in before.items():
        assert tp in out[m], "follow-up round moved an owned partition"
    if uniform:
        sizes = [len(p) for p in out.values()]
        assert max(sizes) - min(sizes) <= 1
    else:
        assert no_transfer_to_lighter(members, group.ppt, out)


# -- hand-written scenarios ----------------------------------------------------------


def test_first_round_assigns_everything() -> None:
    members = {m: M(m, ["t"]) for m in "abc"}
    out = COOP.assign(members, {"t": 7})
    check_valid(members, {"t": 7}, out)


def test_member_joins_two_phase_handover() -> None:
    group = Group({"t": 6}, {"a": ["t"], "b": ["t"]}, {"a": tps("t-0 t-1 t-2"), "b": tps("t-3 t-4 t-5")}, 4)
    group.subs["c"] = ["t"]
    first, revoked = cooperative_round(group)
    assert first["c"] == []  # everything c should get is still owned elsewhere
    assert len(first["a"]) == 2 and len(first["b"]) == 2
    assert len(revoked) == 2
    second, revoked2 = cooperative_round(group)
    assert not revoked2
    assert sorted(second["c"]) == sorted(revoked)
    assert second["a"] == first["a"] and second["b"] == first["b"]


def test_leaving_member_partitions_reassigned_immediately() -> None:
    group = Group(
        {"t": 6}, {"a": ["t"], "b": ["t"]}, {"a": tps("t-0 t-1"), "b": tps("t-2 t-3"), "c": tps("t-4 t-5")}, 2
    )
    group.assignment.pop("c")  # c left: nobody owns its partitions any more
    out, revoked = cooperative_round(group)
    assert not revoked
    check_valid(view(group), group.ppt, out)
    assert set(tps("t-0 t-1")) <= set(out["a"]) and set(tps("t-2 t-3")) <= set(out["b"])


def test_contested_partition_withheld_from_everyone_then_assigned() -> None:
    ppt = {"t": 3}
    members = {
        "a": M("a", ["t"], tps("t-0 t-2"), generation=3),
        "b": M("b", ["t"], tps("t-1 t-2"), generation=3),
    }
    out = COOP.assign(members, ppt)
    assert TP("t", 2) not in out["a"] + out["b"]
    assert out == {"a": tps("t-0"), "b": tps("t-1")}
    follow_up = {m: M(m, ["t"], out[m], generation=4) for m in members}
    final = COOP.assign(follow_up, ppt)
    check_valid(follow_up, ppt, final)


def test_higher_generation_claim_is_not_blocked_by_stale_one() -> None:
    ppt = {"t": 2}
    members = {
        "a": M("a", ["t"], tps("t-0"), generation=5),
        "b": M("b", ["t"], tps("t-0 t-1"), generation=4),  # missed generation 5
    }
    assert COOP.assign(members, ppt) == {"a": tps("t-0"), "b": tps("t-1")}


def test_generation_from_legacy_user_data() -> None:
    # Subscription v1 (no generation field): the generation travels in user data.
    ppt = {"t": 2}
    members = {
        "a": M("a", ["t"], tps("t-0"), user_data=encode_cooperative_generation(5)),
        "b": M("b", ["t"], tps("t-0 t-1"), user_data=encode_cooperative_generation(4)),
    }
    assert COOP.assign(members, ppt) == {"a": tps("t-0"), "b": tps("t-1")}
    # Without it both claims tie at -1: t-0 is contested and withheld.
    for sub in members.values():
        sub.user_data = None
    assert COOP.assign(members, ppt) == {"a": [], "b": tps("t-1")}


def test_unsubscribed_topic_still_withheld_until_revoked() -> None:
    # b dropped topic x but still reports owning x-0; handing x-0 to a right away
    # would let both consume it.
    ppt = {"x": 1, "y": 1}
    members = {
        "a": M("a", ["x", "y"], tps("y-0"), generation=2),
        "b": M("b", ["y"], tps("x-0"), generation=2),
    }
    out = COOP.assign(members, ppt)
    assert TP("x", 0) not in out["a"]
    follow_up = {
        "a": M("a", ["x", "y"], out["a"], generation=3),
        "b": M("b", ["y"], out["b"], generation=3),
    }
    final = COOP.assign(follow_up, ppt)
    check_valid(follow_up, ppt, final)


# -- churn properties ----------------------------------------------------------------


def run_churn(group: Group, rounds: list[list[Op]], uniform: bool) -> None:
    cooperative_round(group)
    settle(group, uniform)
    for ops in rounds:
        apply_ops(group, ops)
        start = owner_map(group.assignment)
        start_members = view(group)
        cooperative_round(group)
        settle(group, uniform)
        if uniform:
            # The two-phase hand-over moves no more than an eager sticky rebalance would.
            bound = uniform_kept_upper_bound(start_members, group.ppt, start)
            assert kept_count(start, group.assignment) == bound


@settings(max_examples=60, deadline=None)
@given(churn(uniform=True))
def test_churn_equal_subscriptions(scenario: tuple[Group, list[list[Op]]]) -> None:
    run_churn(*scenario, uniform=True)


@settings(max_examples=60, deadline=None)
@given(churn(uniform=False))
def test_churn_unequal_subscriptions(scenario: tuple[Group, list[list[Op]]]) -> None:
    run_churn(*scenario, uniform=False)


@settings(max_examples=60, deadline=None)
@given(churn(uniform=False), st.randoms(use_true_random=False))
def test_arbitrary_claims_never_double_assign(
    scenario: tuple[Group, list[list[Op]]], rnd: random.Random
) -> None:
    """Random (possibly conflicting, possibly stale) ownership claims: the result never
    hands a partition to one member while another current-generation owner keeps it."""
    group, _ = scenario
    ppt = group.ppt
    all_tps = [TP(t, p) for t, n in ppt.items() for p in range(n)]
    members = {
        m: M(m, topics, rnd.sample(all_tps, rnd.randint(0, len(all_tps))), generation=rnd.randint(-1, 2))
        for m, topics in group.subs.items()
    }
    out = COOP.assign(members, ppt)
    check_valid(members, ppt, out, complete=False)
    for m, parts in out.items():
        for tp in parts:
            rivals = [n for n, s in members.items() if n != m and tp in s.owned_partitions]
            mine = members[m].generation if tp in members[m].owned_partitions else None
            for n in rivals:
                # A rival claim may only be overridden by a strictly newer claim.
                assert mine is not None and members[n].generation < mine
    # Everyone applies the result; the follow-up round completes the assignment.
    follow_up = {m: M(m, s.topics, out[m], generation=3) for m, s in members.items()}
    final = COOP.assign(follow_up, ppt)
    check_valid(follow_up, ppt, final)
    for m in follow_up:
        subs = existing_subs(follow_up[m], ppt)
        assert all(tp.topic in subs for tp in final[m])


# -- performance sanity --------------------------------------------------------------


def test_large_group_converges_in_two_rounds() -> None:
    ppt = {f"topic-{i}": 20 for i in range(100)}  # 2000 partitions
    names = sorted(ppt)
    group = Group(ppt, {f"member-{i:03d}": names for i in range(100)})
    cooperative_round(group)
    settle(group, uniform=True)
    for i in range(0, 100, 7):
        del group.subs[f"member-{i:03d}"]
        group.assignment.pop(f"member-{i:03d}")
    for i in range(20):
        group.subs[f"new-{i:02d}"] = names
    start = owner_map(group.assignment)
    start_members = view(group)
    cooperative_round(group)
    settle(group, uniform=True)
    assert kept_count(start, group.assignment) == uniform_kept_upper_bound(start_members, ppt, start)


def test_large_group_unequal_converges() -> None:
    rnd = random.Random(7)
    ppt = {f"topic-{i}": rnd.randint(5, 35) for i in range(100)}
    names = sorted(ppt)
    group = Group(ppt, {f"member-{i:03d}": rnd.sample(names, rnd.randint(5, 60)) for i in range(100)})
    cooperative_round(group)
    settle(group, uniform=False)
    for i in range(0, 100, 3):
        group.subs[f"member-{i:03d}"] = rnd.sample(names, rnd.randint(5, 60))
    cooperative_round(group)
    settle(group, uniform=False)
