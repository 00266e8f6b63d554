"""Server-side assignors of consumer groups (KIP-848): ``uniform`` and ``range``.

Pure functions: the members' subscriptions (topic ids), the partition count of every
subscribed topic and the previous target assignment in, the new target out. Like Kafka's
assignors they are deterministic and sticky where they can be; which member gets which
partition may differ from Kafka's (only the balance and the stickiness rules are the same).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ASSIGNORS", "Assignment", "AssignmentSpec", "MemberSpec", "range_assign", "uniform_assign"]

#: topic id -> partitions
Assignment = dict[uuid.UUID, set[int]]


@dataclass(slots=True)
class MemberSpec:
    subscribed: set[uuid.UUID]
    rack: str | None = None


@dataclass(slots=True)
class AssignmentSpec:
    members: dict[str, MemberSpec]
    #: topic id -> number of partitions, for every topic some member subscribes to and that exists
    topics: dict[uuid.UUID, int]
    previous: Mapping[str, Assignment] = field(default_factory=dict)


def _empty(spec: AssignmentSpec) -> dict[str, Assignment]:
    return {m: {} for m in spec.members}


def uniform_assign(spec: AssignmentSpec) -> dict[str, Assignment]:
    """Kafka's ``uniform`` assignor: partitions spread evenly over the members subscribed to
    them, each member keeping as much of its previous target as the balance allows."""
    out = _empty(spec)
    counts = dict.fromkeys(spec.members, 0)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    eligible: dict[uuid.UUID, list[str]] = {
        t: sorted(m for m, s in spec.members.items() if t in s.subscribed) for t in spec.topics
    }
    total = sum(spec.topics[t] for t in spec.topics if eligible[t])
    homogeneous = len({frozenset(s.subscribed & spec.topics.keys()) for s in spec.members.values()}) <= 1
    quota = -(-total // len(spec.members)) if spec.members and homogeneous else total
    # 1. Stickiness: previous partitions stay (lowest partitions first), up to the quota.
    for m in sorted(spec.members):
        prev = spec.previous.get(m, {})
        for t in sorted(prev, key=str):
            if t not in spec.topics or t not in spec.members[m].subscribed:
                continue
            for p in sorted(prev[t]):
                if p < spec.topics[t] and (t, p) not in owner and counts[m] < quota:
                    owner[(t, p)] = m
                    out[m].setdefault(t, set()).add(p)
                    counts[m] += 1
    # 2. Partitions without an owner go to the least loaded member subscribed to them.
    for t in sorted(spec.topics, key=str):
        members = eligible[t]
        if not members:
            continue
        for p in range(spec.topics[t]):
            if (t, p) in owner:
                continue
            m = min(members, key=lambda x: (counts[x], x))
            owner[(t, p)] = m
            out[m].setdefault(t, set()).add(p)
            counts[m] += 1
    # 3. Balance: move partitions from the most to the least loaded eligible member until
    #    no move narrows the gap (heterogeneous subscriptions may stay uneven).
    moved = True
    while moved:
        moved = False
        for m in sorted(spec.members, key=lambda x: (-counts[x], x)):
            best: tuple[int, str, uuid.UUID, int] | None = None
            for t in sorted(out[m], key=str):
                for p in sorted(out[m][t], reverse=True):
                    for other in eligible[t]:
                        if counts[other] + 1 < counts[m] and (best is None or counts[other] < best[0]):
                            best = (counts[other], other, t, p)
                    break  # the highest partition of each topic is the one to move
            if best is not None:
                _, other, t, p = best
                out[m][t].discard(p)
                if not out[m][t]:
                    del out[m][t]
                out[other].setdefault(t, set()).add(p)
                counts[m] -= 1
                counts[other] += 1
                moved = True
                break
    return out


def range_assign(spec: AssignmentSpec) -> dict[str, Assignment]:
    """Kafka's ``range`` assignor: per topic, contiguous ranges over the subscribed members
    in member id order, the first ``partitions % members`` getting one more (so topics
    with the same partition count are co-partitioned)."""
    out = _empty(spec)
    for t in sorted(spec.topics, key=str):
        members = sorted(m for m, s in spec.members.items() if t in s.subscribed)
        if not members:
            continue
        n = spec.topics[t]
        base, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            size = base + (1 if i < extra else 0)
            if size:
                out[m][t] = set(range(start, start + size))
            start += size
    return out


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
