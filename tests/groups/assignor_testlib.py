"""Checkers and reference computations shared by the assignor tests."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from hypothesis import strategies as st

from aiokafka_lite.consume.groups.assignors import MemberSubscription, TopicPartition

TP = TopicPartition


def tps(spec: str) -> list[TopicPartition]:
    """``"t0-0 t0-1 t1-2"`` -> [TP('t0', 0), ...] for readable expectations."""
    out = []
    for item in spec.split():
        topic, _, part = item.rpartition("-")
        out.append(TP(topic, int(part)))
    return out


def existing_subs(member: MemberSubscription, ppt: Mapping[str, int]) -> frozenset[str]:
    return frozenset(t for t in member.topics if ppt.get(t, 0) > 0)


def all_partitions(members: Mapping[str, MemberSubscription], ppt: Mapping[str, int]) -> set[TopicPartition]:
    topics = set().union(*(existing_subs(m, ppt) for m in members.values())) if members else set()
    return {TP(t, p) for t in topics for p in range(ppt[t])}


def check_valid(
    members: Mapping[str, MemberSubscription],
    ppt: Mapping[str, int],
    assignment: Mapping[str, list[TopicPartition]],
    *,
    complete: bool = True,
) -> None:
    """No partition twice, only subscribed existing topics, every member present, and
    (if ``complete``) every partition of a subscribed topic assigned."""
    assert set(assignment) == set(members)
    counts = Counter(tp for parts in assignment.values() for tp in parts)
    dupes = [tp for tp, c in counts.items() if c > 1]
    assert not dupes, f"assigned more than once: {dupes}"
    for member_id, parts in assignment.items():
        subs = existing_subs(members[member_id], ppt)
        for tp in parts:
            assert tp.topic in subs, f"{member_id} got {tp} without subscribing"
            assert 0 <= tp.partition < ppt[tp.topic], f"{tp} does not exist"
    if complete:
        missing = all_partitions(members, ppt) - set(counts)
        assert not missing, f"unassigned: {sorted(missing)}"


def loads(assignment: Mapping[str, list[TopicPartition]]) -> dict[str, int]:
    return {m: len(p) for m, p in assignment.items()}


def owner_map(assignment: Mapping[str, list[TopicPartition]]) -> dict[TopicPartition, str]:
    return {tp: m for m, parts in assignment.items() for tp in parts}


def kept_count(previous: Mapping[TopicPartition, str], assignment: Mapping[str, list[TopicPartition]]) -> int:
    """How many partitions stayed with their previous owner."""
    return sum(1 for m, parts in assignment.items() for tp in parts if previous.get(tp) == m)


def uniform_kept_upper_bound(
    members: Mapping[str, MemberSubscription], ppt: Mapping[str, int], previous: Mapping[TopicPartition, str]
) -> int:
    """Most partitions that can stay put when all subscriptions are equal.

    With n partitions and k members, a balanced assignment gives everyone n//k and
    exactly n%k members one more; a member can keep at most its own count, and only
    n%k members can keep n//k + 1.
    """
    n = len(all_partitions(members, ppt))
    k = len(members)
    base, extra = divmod(n, k)
    owned = Counter(
        m
        for tp, m in previous.items()
        if m in members and tp.topic in existing_subs(members[m], ppt) and tp.partition < ppt[tp.topic]
    )
    per_member = [owned.get(m, 0) for m in members]
    return sum(min(o, base) for o in per_member) + min(extra, sum(1 for o in per_member if o > base))


def optimal_by_brute_force(
    members: Mapping[str, MemberSubscription], ppt: Mapping[str, int], previous: Mapping[TopicPartition, str]
) -> tuple[int, int]:
    """(minimum sum of squared loads, maximum kept among assignments reaching it)."""
    parts = sorted(all_partitions(members, ppt))
    ids = sorted(members)
    choices = [[m for m in ids if tp.topic in existing_subs(members[m], ppt)] for tp in parts]
    best: tuple[int, int] | None = None
    for combo in itertools.product(*choices):
        load = Counter(combo)
        sq = sum(v * v for v in load.values())
        kept = sum(1 for tp, m in zip(parts, combo, strict=True) if previous.get(tp) == m)
        key = (sq, -kept)
        if best is None or key < best:
            best = key
    assert best is not None
    return best[0], -best[1]


def sum_squares(assignment: Mapping[str, list[TopicPartition]]) -> int:
    return sum(len(p) ** 2 for p in assignment.values())


def no_transfer_to_lighter(
    members: Mapping[str, MemberSubscription],
    ppt: Mapping[str, int],
    assignment: Mapping[str, list[TopicPartition]],
) -> bool:
    """Independent balance check for unequal subscriptions: there is no chain of
    hand-overs from a member to one at least two lighter (plain BFS over members)."""
    subs = {m: existing_subs(members[m], ppt) for m in members}
    load = loads(assignment)
    for source in members:
        seen = {source}
        frontier = [source]
        while frontier:
            nxt = []
            for u in frontier:
                held_topics = {tp.topic for tp in assignment[u]}
                for v in members:
                    if v not in seen and held_topics & subs[v]:
                        if load[v] <= load[source] - 2:
                            return False
                        seen.add(v)
                        nxt.append(v)
            frontier = nxt
    return True


# -- churn simulation ----------------------------------------------------------------


@dataclass
class Group:
    """Simulated group state: metadata, subscriptions and the last assignment."""

    ppt: dict[str, int]
    subs: dict[str, list[str]]
    assignment: dict[str, list[TopicPartition]] = field(default_factory=dict)
    generation: int = 0


@dataclass(frozen=True)
class Op:
    """One membership/metadata change between rebalances.

    kinds: join (name, topics), leave (n picks the member), resub (n, topics),
    resub_all (topics), grow (topic, n more partitions), drop_topic (topic).
    """

    kind: str
    name: str = ""
    topics: tuple[str, ...] = ()
    n: int = 0


TOPICS = ["t0", "t1", "t2", "t3", "t4"]


def topic_lists() -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True)


@st.composite
def churn(draw: st.DrawFn, uniform: bool, max_members: int = 7) -> tuple[Group, list[list[Op]]]:
    """An initial group plus 1-5 rounds of random changes. With ``uniform`` every
    member always has the same subscription."""
    ppt = {t: draw(st.integers(1, 8)) for t in TOPICS[: draw(st.integers(1, 4))]}
    shared = draw(topic_lists())

    def topics() -> list[str]:
        return list(shared) if uniform else draw(topic_lists())

    subs = {f"m{i}": topics() for i in range(draw(st.integers(1, max_members)))}
    rounds = []
    counter = len(subs)
    for _ in range(draw(st.integers(1, 5))):
        ops: list[Op] = []
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["join", "leave", "resub", "grow", "drop_topic"]))
            if kind == "join":
                ops.append(Op("join", name=f"m{counter}", topics=tuple(topics())))
                counter += 1
            elif kind == "leave":
                ops.append(Op("leave", n=draw(st.integers(0, 100))))
            elif kind == "resub" and uniform:
                shared = draw(topic_lists())
                ops.append(Op("resub_all", topics=tuple(shared)))
            elif kind == "resub":
                ops.append(Op("resub", n=draw(st.integers(0, 100)), topics=tuple(topics())))
            elif kind == "grow":
                ops.append(Op("grow", name=draw(st.sampled_from(TOPICS)), n=draw(st.integers(1, 5))))
            else:
                ops.append(Op("drop_topic", name=draw(st.sampled_from(TOPICS))))
        rounds.append(ops)
    return Group(ppt, subs), rounds


def apply_ops(group: Group, ops: list[Op]) -> None:
    """Apply membership/metadata changes (a leaving member's partitions vanish with it)."""
    for op in ops:
        names = sorted(group.subs)
        if op.kind == "join":
            group.subs[op.name] = list(op.topics)
        elif op.kind == "leave" and len(names) > 1:
            gone = names[op.n % len(names)]
            del group.subs[gone]
            group.assignment.pop(gone, None)
        elif op.kind == "resub":
            group.subs[names[op.n % len(names)]] = list(op.topics)
        elif op.kind == "resub_all":
            for name in names:
                group.subs[name] = list(op.topics)
        elif op.kind == "grow":
            group.ppt[op.name] = group.ppt.get(op.name, 0) + op.n
        elif op.kind == "drop_topic":
            group.ppt.pop(op.name, None)
