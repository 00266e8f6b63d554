"""Partition reassignments in flight on an embedded cluster (KIP-455's model).

A reassignment of a partition from its original replicas to a target set first adds
the target replicas (the partition's replicas are the target followed by the leaving
ones), then, once every adding replica is in the ISR (caught up), drops the leaving
ones: the replicas become the target, the ISR the live target replicas, and a leader
that left hands over to the first target replica in the ISR (new leader epoch).

The data exists once in the embedded cluster, so a replica on a live broker is caught
up at once: only an adding replica on a stopped broker keeps a reassignment in flight,
until that broker starts (it then joins the ISR: ``ClusterState.set_brokers_alive``,
whose change notification settles the reassignment here). Cancelling restores the
original replicas (and ISR, leader as needed), as Kafka's cancellation does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aiokafka_lite.broker.state import ClusterState, Partition

__all__ = ["Reassignment", "Reassignments", "reassignments_of"]

_EXTENSION: Final = "partition_reassignments"


@dataclass(slots=True)
class Reassignment:
    partition: Partition
    original: list[int]
    target: list[int]

    def adding(self) -> list[int]:
        return [r for r in self.target if r not in self.original]

    def removing(self) -> list[int]:
        return [r for r in self.original if r not in self.target]


class Reassignments:
    """The reassignments in flight of one cluster (one per ``ClusterState``)."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state
        self._moves: dict[tuple[str, int], Reassignment] = {}
        self._settling = False
        state.add_listener(self.settle)

    def ongoing(self) -> list[Reassignment]:
        """Reassignments still in flight, by topic and partition."""
        self._forget_deleted()
        return [self._moves[k] for k in sorted(self._moves)]

    def original(self, p: Partition) -> list[int]:
        """The replicas ``p`` had before its reassignment in flight (its replicas if none)."""
        move = self._moves.get((p.topic, p.index))
        return list(move.original if move is not None else p.replicas)

    def start(self, p: Partition, target: list[int]) -> None:
        """Start (or replace) the reassignment of ``p`` to ``target``; ``settle`` completes it
        when every adding replica is caught up."""
        key = (p.topic, p.index)
        original = self.original(p)
        if target == original:
            self._moves.pop(key, None)
            self._apply(p, original, original)
            return
        self._moves[key] = Reassignment(p, original, list(target))
        merged = list(target) + [r for r in original if r not in target]
        p.replicas[:] = merged
        # An adding replica joins the ISR only once it is caught up (settle).
        p.isr[:] = [r for r in p.isr if r in original] or p.isr[:1]
        self._persist()

    def cancel(self, p: Partition) -> bool:
        """Revert the reassignment in flight of ``p`` (False: there is none)."""
        move = self._moves.pop((p.topic, p.index), None)
        if move is None:
            return False
        self._apply(p, move.original, move.original)
        self._state.changed()
        return True

    def settle(self) -> None:
        """Complete every reassignment whose adding replicas are caught up (a metadata
        listener: runs after each broker/topic change)."""
        if self._settling:
            return
        self._settling = True
        try:
            self._forget_deleted()
            done = []
            for key, move in self._moves.items():
                p = move.partition
                for r in move.adding():
                    if self._state.is_alive(r) and r not in p.isr:
                        p.isr.append(r)  # a live replica of the one shared log is caught up
                if all(r in p.isr for r in move.adding()):
                    done.append(key)
            for key in done:
                move = self._moves.pop(key)
                self._apply(move.partition, move.target, move.original)
            if done:
                self._state.changed()
        finally:
            self._settling = False

    def _apply(self, p: Partition, replicas: list[int], previous: list[int]) -> None:
        """Make ``replicas`` the replica set of ``p``: ISR the live ones, leader kept if it
        stays, else the first replica in the ISR (a new leader epoch)."""
        state = self._state
        p.replicas[:] = replicas
        isr = [r for r in replicas if state.is_alive(r) and (r in p.isr or r not in previous)]
        p.isr[:] = isr or [r for r in replicas if state.is_alive(r)][:1] or replicas[:1]
        if p.leader_id not in replicas or not state.is_alive(p.leader_id):
            leader = next((r for r in replicas if r in p.isr and state.is_alive(r)), None)
            if leader is not None:
                state.set_leader(p, leader, persist=False)
        self._persist()

    def _forget_deleted(self) -> None:
        for key, move in list(self._moves.items()):
            if self._state.get_partition(*key) is not move.partition:
                del self._moves[key]

    def _persist(self) -> None:
        if self._state.storage is not None:
            self._state.storage.save_metadata(self._state)


def reassignments_of(state: ClusterState) -> Reassignments:
    """The cluster's reassignments (created, and listening to changes, on first use)."""
    moves = state.extensions.get(_EXTENSION)
    if not isinstance(moves, Reassignments):
        moves = Reassignments(state)
        state.extensions[_EXTENSION] = moves
    return moves
