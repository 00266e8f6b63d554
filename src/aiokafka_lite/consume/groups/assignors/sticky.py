"""``sticky`` (eager) and ``cooperative-sticky`` (KIP-429) assignors.

Both compute the same *target* assignment, which is

1. **complete** — every partition of every subscribed, existing topic goes to exactly
   one member subscribed to that topic;
2. **balanced** — with identical subscriptions, per-member counts differ by at most
   one. With differing subscriptions the load vector is made as even as the
   subscriptions allow: we stop only when no partition can be shifted, directly or
   through a chain of members, from a member to one holding at least two fewer. That is
   the optimality condition for "minimise the sum of squared loads" (equivalently, the
   most even sorted load vector), so no member is left needlessly idle or overloaded;
3. **sticky** — subject to 1 and 2, as many previously owned partitions as possible
   stay put, because every move costs the new owner a cold cache, a fetch-position
   lookup and (under eager rebalancing) a stop-the-world revocation.

Previous ownership comes from each member's subscription (``owned_partitions`` +
``generation``) or, for ``sticky``, from the legacy ``StickyAssignorUserData`` that
Java and librdkafka members send. When two members claim the same partition the
claim from the highest generation wins (the other member missed a rebalance and its
view is stale); two claims at the same, highest generation cannot be ordered, so the
partition counts as owned by nobody.

``cooperative-sticky`` then post-processes the target: a partition currently owned by
one member is never handed to another member in the same round. It is withheld; its
owner sees it missing from its assignment, revokes it and rejoins, and the follow-up
rebalance (where nobody owns it any more) gives it to the intended member.

Algorithm
---------
*Identical subscriptions* (the common case) use a direct construction that is provably
optimal: with ``n`` partitions and ``k`` members, everybody gets ``n // k`` and exactly
``n % k`` members get one more. Each member can keep at most its quota of owned
partitions, so letting the members that own the most take the ``+1`` slots and keeping
owned partitions up to quota moves the minimum possible number of partitions.

*Differing subscriptions* work on counts first: ``c[m][t]`` = how many partitions of
topic ``t`` member ``m`` gets. Start from "everyone keeps what it owns", place unowned
partitions on the least-loaded eligible member (most-constrained topics first), then
repeatedly shift one unit of load from the heaviest members to a member at least two
lighter along the cheapest chain ``m1 -t1-> m2 -t2-> ... -> mk`` (a multi-source 0-1
BFS over members and topics; a hop costs 1 only when it takes away a partition its
holder previously owned). Finally, per topic, every member keeps owned partitions up
to its count and the rest are dealt out. Working on a members x topics graph instead
of individual partitions keeps this fast: thousands of partitions are only counts.
On small groups the result matches an exhaustive search (most even loads, then most
partitions kept); on large ones stickiness is best-effort.

Differences from the Java assignors (same goals, independent algorithm)
-----------------------------------------------------------------------
* Conflicting claims are resolved per partition (highest generation wins) in every
  case; Java's identical-subscription path instead drops *all* claims of members
  below the group's highest generation.
* ``cooperative-sticky`` withholds a contested partition (same-generation double
  claim) from everybody for one round rather than assigning it immediately.
* Racks only decide which partitions a member receives among those it must receive
  anyway (and which owned ones it keeps when it must shed some): stickiness beats
  locality, whereas KIP-881 ranks locality above stickiness.
* Exact partition placement differs from Java's output; counts are balanced the same
  way and any member can read the assignment, so mixed-client groups work.
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from aiokafka_lite.consume.groups.assignors.base import (
    MemberSubscription,
    RebalanceProtocol,
    TopicPartition,
    member_sort_key,
    subscribed_existing_topics,
)
from aiokafka_lite.consume.groups.assignors.userdata import (
    decode_cooperative_generation,
    decode_sticky_user_data,
    encode_cooperative_generation,
    encode_sticky_user_data,
)

__all__ = [
    "Claim",
    "CooperativeStickyAssignor",
    "Ownership",
    "StickyAssignor",
    "resolve_ownership",
    "sticky_target",
]

log = logging.getLogger(__name__)

PartitionRacks = Mapping[TopicPartition, AbstractSet[str]]


@dataclass(slots=True)
class Claim:
    """A member's statement "I owned these partitions in generation ``generation``"."""

    partitions: Sequence[TopicPartition]
    generation: int = -1


@dataclass(slots=True)
class Ownership:
    """Who owns what, after resolving conflicting claims.

    ``owner`` maps a partition to its single legitimate owner. ``contested`` holds
    partitions claimed by several members at the same (highest) generation: none of
    them can be trusted, and under cooperative rebalancing all of them may still be
    consuming it.
    """

    owner: dict[TopicPartition, str] = field(default_factory=dict)
    contested: set[TopicPartition] = field(default_factory=set)


def resolve_ownership(claims: Mapping[str, Claim]) -> Ownership:
    """Pick one owner per claimed partition: the claimant with the highest generation.

    A member that missed a rebalance still reports what it owned back then; a newer
    generation's claim supersedes it. Equal top generations are a genuine conflict
    (it should not happen, but a zombie member can cause it) and leave the partition
    ``contested``.
    """
    best: dict[TopicPartition, tuple[int, str]] = {}
    contested: set[TopicPartition] = set()
    for member_id in sorted(claims):
        claim = claims[member_id]
        for tp in set(claim.partitions):
            current = best.get(tp)
            if current is None or claim.generation > current[0]:
                best[tp] = (claim.generation, member_id)
                contested.discard(tp)
            elif claim.generation == current[0] and current[1] != member_id:
                contested.add(tp)
    owner = {tp: member_id for tp, (_, member_id) in best.items() if tp not in contested}
    return Ownership(owner, contested)


# ---------------------------------------------------------------------------------------
# Target computation
# ---------------------------------------------------------------------------------------


def sticky_target(
    subscriptions: Sequence[AbstractSet[str]],
    owned: Sequence[Sequence[TopicPartition]],
    partitions_per_topic: Mapping[str, int],
    member_racks: Sequence[str | None] | None = None,
    partition_racks: PartitionRacks | None = None,
    *,
    force_general: bool = False,
) -> list[list[TopicPartition]]:
    """Compute the balanced, sticky target assignment.

    Members are positional (index ``i`` everywhere) and should be given in a stable
    order so the output is deterministic. ``subscriptions[i]`` must only name topics
    present in ``partitions_per_topic``; ``owned[i]`` must already be resolved (no
    partition owned twice) and limited to existing partitions of subscribed topics.
    Racks, if given, only influence *which* partition a member receives among those it
    has to receive anyway (KIP-881 style preference), never the counts.

    ``force_general`` runs the general algorithm even for identical subscriptions
    (used by tests to check it against the exact construction).
    """
    k = len(subscriptions)
    if k == 0:
        return []
    racks: Sequence[str | None] = member_racks if member_racks is not None else [None] * k
    dealer = _Dealer(racks, partition_racks)
    first = subscriptions[0]
    if not force_general and all(sub == first for sub in subscriptions):
        if not first:
            return [[] for _ in range(k)]
        return _assign_uniform(sorted(first), owned, partitions_per_topic, dealer)
    return _assign_general(subscriptions, owned, partitions_per_topic, dealer)


class _Dealer:
    """Deals a pool of partitions to members with remaining quota.

    Round-robin over the receivers spreads each topic's partitions across members
    instead of giving one member a contiguous block; if racks are known, a member in a
    rack holding a replica of the partition is preferred (fetch-from-follower, KIP-392,
    then reads locally).
    """

    __slots__ = ("member_racks", "partition_racks", "rack_aware")

    def __init__(self, member_racks: Sequence[str | None], partition_racks: PartitionRacks | None) -> None:
        self.member_racks = member_racks
        self.partition_racks = partition_racks
        self.rack_aware = bool(partition_racks) and any(r is not None for r in member_racks)

    def local_first(self, member: int, parts: Sequence[TopicPartition]) -> list[TopicPartition]:
        """``parts`` (sorted) with the member's rack-local partitions first: when a member
        must give some owned partitions up, it keeps the ones it can read locally."""
        rack = self.member_racks[member]
        if not self.rack_aware or rack is None or self.partition_racks is None:
            return list(parts)
        racks = self.partition_racks
        return sorted(parts, key=lambda tp: rack not in racks.get(tp, ()))

    def deal(
        self, pool: Sequence[TopicPartition], needs: dict[int, int], out: list[list[TopicPartition]]
    ) -> None:
        """Append every partition of ``pool`` to ``out[i]`` for members with ``needs[i] > 0``."""
        active = [i for i in sorted(needs) if needs[i] > 0]
        cursor = 0
        for tp in pool:
            if not active:
                raise AssertionError("partition pool larger than the members' remaining quota")
            pos = -1
            if self.rack_aware and self.partition_racks is not None:
                replicas = self.partition_racks.get(tp)
                if replicas:
                    n = len(active)
                    for step in range(n):
                        cand = (cursor + step) % n
                        if self.member_racks[active[cand]] in replicas:
                            pos = cand
                            break
            if pos < 0:
                pos = cursor % len(active)
            member = active[pos]
            out[member].append(tp)
            needs[member] -= 1
            if needs[member] == 0:
                active.pop(pos)
                cursor = pos
            else:
                cursor = pos + 1
            if active:
                cursor %= len(active)


def _assign_uniform(
    topics: Sequence[str],
    owned: Sequence[Sequence[TopicPartition]],
    partitions_per_topic: Mapping[str, int],
    dealer: _Dealer,
) -> list[list[TopicPartition]]:
    """Exact construction for identical subscriptions (see module docstring)."""
    k = len(owned)
    total = sum(partitions_per_topic[t] for t in topics)
    base, extra = divmod(total, k)
    kept_sorted = [dealer.local_first(i, sorted(o)) for i, o in enumerate(owned)]
    # Only `extra` members may end with base+1. Each member that already owns more
    # than `base` and gets one of those slots keeps one more partition; members with
    # the most owned first makes the choice deterministic (any such choice is optimal).
    over = sorted(
        (i for i in range(k) if len(kept_sorted[i]) > base), key=lambda i: (-len(kept_sorted[i]), i)
    )
    big = set(over[:extra])
    caps = [base + 1 if i in big else base for i in range(k)]
    result = [kept_sorted[i][: caps[i]] for i in range(k)]
    needs = {i: caps[i] - len(result[i]) for i in range(k)}
    spare = extra - len(big)
    if spare:
        # Remaining +1 slots go to members that will receive new partitions anyway.
        for i in sorted((i for i in range(k) if i not in big), key=lambda i: (-len(result[i]), i))[:spare]:
            needs[i] += 1
    taken = {tp for part in result for tp in part}
    pool = [
        TopicPartition(t, p)
        for t in topics
        for p in range(partitions_per_topic[t])
        if TopicPartition(t, p) not in taken
    ]
    dealer.deal(pool, needs, result)
    for part in result:
        part.sort()
    return result


def _assign_general(
    subscriptions: Sequence[AbstractSet[str]],
    owned: Sequence[Sequence[TopicPartition]],
    partitions_per_topic: Mapping[str, int],
    dealer: _Dealer,
) -> list[list[TopicPartition]]:
    """Counts-first algorithm for differing subscriptions (see module docstring)."""
    k = len(subscriptions)
    topics = sorted(set().union(*subscriptions))
    tindex = {t: j for j, t in enumerate(topics)}
    subscribers: list[list[int]] = [[] for _ in topics]
    for i, sub in enumerate(subscriptions):
        for t in sub:
            subscribers[tindex[t]].append(i)
    for members in subscribers:
        members.sort()

    # owned_by[i][j]: partitions of topic j owned by member i (sorted).
    owned_by: list[dict[int, list[TopicPartition]]] = [{} for _ in range(k)]
    owned_total = [0] * len(topics)
    for i, parts in enumerate(owned):
        for tp in sorted(parts):
            j = tindex[tp.topic]
            owned_by[i].setdefault(j, []).append(tp)
            owned_total[j] += 1
    own_cnt: list[dict[int, int]] = [{j: len(v) for j, v in d.items()} for d in owned_by]
    cnt: list[dict[int, int]] = [dict(d) for d in own_cnt]
    load = [sum(d.values()) for d in cnt]

    # Place unowned partitions greedily: most constrained topics first, each unit on
    # the least-loaded subscriber. Usually this is already (nearly) balanced.
    for j in sorted(range(len(topics)), key=lambda j: (len(subscribers[j]), topics[j])):
        missing = partitions_per_topic[topics[j]] - owned_total[j]
        if missing <= 0:
            continue
        heap = [(load[i], i) for i in subscribers[j]]
        heapq.heapify(heap)
        for _ in range(missing):
            current, i = heapq.heappop(heap)
            cnt[i][j] = cnt[i].get(j, 0) + 1
            load[i] = current + 1
            heapq.heappush(heap, (current + 1, i))

    _rebalance(cnt, own_cnt, load, subscribers, [i for i in range(k) if subscriptions[i]])

    # Materialise counts: keep owned partitions up to the count, deal out the rest.
    result: list[list[TopicPartition]] = [[] for _ in range(k)]
    for j, topic in enumerate(topics):
        needs: dict[int, int] = {}
        taken: set[int] = set()
        for i in subscribers[j]:
            want = cnt[i].get(j, 0)
            if want == 0:
                continue
            keep = dealer.local_first(i, owned_by[i].get(j, []))[:want]
            result[i].extend(keep)
            taken.update(tp.partition for tp in keep)
            if want > len(keep):
                needs[i] = want - len(keep)
        pool = [TopicPartition(topic, p) for p in range(partitions_per_topic[topic]) if p not in taken]
        dealer.deal(pool, needs, result)
    for part in result:
        part.sort()
    return result


def _rebalance(
    cnt: list[dict[int, int]],
    own_cnt: list[dict[int, int]],
    load: list[int],
    subscribers: list[list[int]],
    active: list[int],
) -> None:
    """Shift load until no member can pass a partition (via any chain) to a member at
    least two lighter. Each shift lowers the sum of squared loads, so this terminates.

    Sources are always the heaviest members that can shed, searched together so the
    cheapest chain among them wins: draining one member before touching the others
    would push it below members that own less, and every partition shed below a fair
    share is a needless move.
    """
    if not active:
        return
    # Members known to have no transfer, with the members reachable from them. A
    # transfer only changes the edges and loads of members on its path, so an entry
    # stays valid until a path touches its reachable set.
    blocked: list[tuple[set[int], set[int]]] = []
    while True:
        floor = min(load[i] for i in active)
        dead = set().union(*(sources for sources, _ in blocked))
        levels = sorted({load[i] for i in active if i not in dead and load[i] - floor >= 2}, reverse=True)
        for level in levels:
            sources = [i for i in active if load[i] == level and i not in dead]
            path, reached = _find_transfer(sources, floor, cnt, own_cnt, load, subscribers)
            if path is None:
                blocked.append((set(sources), reached))
                continue
            source = path[0][0]
            touched = {source}
            for giver, j, taker in path:
                left = cnt[giver][j] - 1
                if left:
                    cnt[giver][j] = left
                else:
                    del cnt[giver][j]
                cnt[taker][j] = cnt[taker].get(j, 0) + 1
                touched.add(taker)
            load[source] -= 1
            load[path[-1][2]] += 1
            blocked = [(srcs, reach) for srcs, reach in blocked if not (reach & touched)]
            break
        else:
            return


def _find_transfer(
    sources: list[int],
    floor: int,
    cnt: list[dict[int, int]],
    own_cnt: list[dict[int, int]],
    load: list[int],
    subscribers: list[list[int]],
) -> tuple[list[tuple[int, int, int]] | None, set[int]]:
    """Cheapest chain of single-partition hand-overs from one of ``sources`` (all of
    the same load) to a member at least two lighter, as ``[(giver, topic_index, taker),
    ...]``, plus the set of members reachable from ``sources``.

    Nodes are members (``0..k-1``) and topics (``k + j``). Member -> topic edges exist
    where the member holds a partition of the topic and cost 1 if giving one away
    breaks stickiness (the member holds no more than it owned), else 0; topic -> member
    edges go to every subscriber at cost 0. A multi-source 0-1 BFS finds the cheapest
    chains; among equally cheap targets the lightest wins (it is furthest below a fair
    share), and a target at the group's ``floor`` load ends the search at once.
    """
    k = len(load)
    limit = load[sources[0]] - 2
    inf = 1 << 60
    dist = [inf] * (k + len(subscribers))
    parent = [-1] * (k + len(subscribers))
    queue: deque[tuple[int, int]] = deque()
    for source in sources:
        dist[source] = 0
        queue.append((0, source))
    reached: set[int] = set()
    best: tuple[int, int, int] | None = None  # (dist, load, member)
    while queue:
        d, node = queue.popleft()
        if d != dist[node]:
            continue
        if best is not None and d > best[0]:
            break
        if node < k:
            reached.add(node)
            if load[node] <= limit:
                cand = (d, load[node], node)
                if best is None or cand < best:
                    best = cand
                    if cand[1] == floor:
                        break
            owned_here = own_cnt[node]
            for j, held in cnt[node].items():
                cost = 0 if held > owned_here.get(j, 0) else 1
                target = k + j
                nd = d + cost
                if nd < dist[target]:
                    dist[target] = nd
                    parent[target] = node
                    if cost:
                        queue.append((nd, target))
                    else:
                        queue.appendleft((nd, target))
        else:
            for member in subscribers[node - k]:
                if d < dist[member]:
                    dist[member] = d
                    parent[member] = node
                    queue.appendleft((d, member))
    if best is None:
        return None, reached
    return _unwind(best[2], parent, k), reached


def _unwind(end: int, parent: list[int], k: int) -> list[tuple[int, int, int]]:
    """Turn BFS parent pointers into the list of hand-overs, source first."""
    path: list[tuple[int, int, int]] = []
    member = end
    while parent[member] != -1:
        topic_node = parent[member]
        giver = parent[topic_node]
        path.append((giver, topic_node - k, member))
        member = giver
    path.reverse()
    return path


# ---------------------------------------------------------------------------------------
# Assignor classes
# ---------------------------------------------------------------------------------------


class _StickyBase:
    """Shared driver: decode claims, resolve them, compute the target."""

    name: str
    rebalance_protocol: RebalanceProtocol

    def _claim(self, member: MemberSubscription) -> Claim:
        raise NotImplementedError

    def _target(
        self,
        members: Mapping[str, MemberSubscription],
        partitions_per_topic: Mapping[str, int],
        partition_racks: PartitionRacks | None,
    ) -> tuple[dict[str, list[TopicPartition]], Ownership]:
        ownership = resolve_ownership({member_id: self._claim(sub) for member_id, sub in members.items()})
        ids = sorted(members, key=lambda m: (member_sort_key(members[m]), m))
        subscriptions = [frozenset(subscribed_existing_topics(members[m], partitions_per_topic)) for m in ids]
        owned_lists: dict[str, list[TopicPartition]] = {m: [] for m in ids}
        for tp, member_id in ownership.owner.items():
            owned_lists[member_id].append(tp)
        owned: list[list[TopicPartition]] = []
        for m, sub in zip(ids, subscriptions, strict=True):
            # Only what the member may still consume counts as keepable: topics it
            # still subscribes to and partitions that still exist.
            owned.append(
                [
                    tp
                    for tp in owned_lists[m]
                    if tp.topic in sub and tp.partition < partitions_per_topic[tp.topic]
                ]
            )
        racks = [members[m].rack for m in ids]
        target = sticky_target(subscriptions, owned, partitions_per_topic, racks, partition_racks)
        return dict(zip(ids, target, strict=True)), ownership


class StickyAssignor(_StickyBase):
    """Eager sticky assignor (protocol name ``sticky``).

    Members revoke everything before rejoining, so previous ownership travels in the
    legacy StickyAssignorUserData (which is also what Java/librdkafka members send).
    """

    name: str = "sticky"
    rebalance_protocol: RebalanceProtocol = "eager"

    def metadata(self, topics: list[str], owned: list[TopicPartition], generation: int) -> bytes | None:
        """Encode StickyAssignorUserData v1 (owned partitions + generation).

        Returns None for a member that never had an assignment, like Java does.
        """
        if not owned and generation < 0:
            return None
        return encode_sticky_user_data(owned, generation)

    def _claim(self, member: MemberSubscription) -> Claim:
        """Prefer user data (the eager protocol empties ``owned_partitions`` before
        rejoining in other clients); fall back to the subscription fields."""
        if member.user_data:
            try:
                data = decode_sticky_user_data(member.user_data)
            except ValueError as exc:
                log.warning("ignoring malformed sticky user data from member %s: %s", member.member_id, exc)
            else:
                generation = data.generation if data.generation >= 0 else member.generation
                return Claim(data.partitions, generation)
        return Claim(member.owned_partitions, member.generation)

    def assign(
        self,
        members: Mapping[str, MemberSubscription],
        partitions_per_topic: Mapping[str, int],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, list[TopicPartition]]:
        """Return the balanced, sticky target assignment."""
        target, _ = self._target(members, partitions_per_topic, partition_racks)
        return target


class CooperativeStickyAssignor(_StickyBase):
    """Cooperative sticky assignor (protocol name ``cooperative-sticky``, KIP-429).

    Same target as ``sticky``, but partitions owned by another member this round are
    withheld so their owner revokes them before anyone else starts consuming; the
    follow-up rebalance completes the move. Use ``cooperative_diff`` on each member to
    split its result into partitions to revoke and to add.
    """

    name: str = "cooperative-sticky"
    rebalance_protocol: RebalanceProtocol = "cooperative"

    def metadata(self, topics: list[str], owned: list[TopicPartition], generation: int) -> bytes | None:
        """Encode the generation as user data, for leaders that predate KIP-792
        (subscription v2 carries it natively)."""
        return encode_cooperative_generation(generation)

    def _claim(self, member: MemberSubscription) -> Claim:
        """Owned partitions come from the subscription; the generation from the
        subscription if set, else from the legacy user data."""
        generation = member.generation
        if generation < 0 and member.user_data:
            try:
                generation = decode_cooperative_generation(member.user_data)
            except ValueError as exc:
                log.warning(
                    "ignoring malformed cooperative user data from member %s: %s", member.member_id, exc
                )
        return Claim(member.owned_partitions, generation)

    def assign(
        self,
        members: Mapping[str, MemberSubscription],
        partitions_per_topic: Mapping[str, int],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, list[TopicPartition]]:
        """Return the target minus partitions another member still owns."""
        target, ownership = self._target(members, partitions_per_topic, partition_racks)
        owner = ownership.owner
        contested = ownership.contested
        return {
            member_id: [tp for tp in parts if tp not in contested and owner.get(tp, member_id) == member_id]
            for member_id, parts in target.items()
        }
