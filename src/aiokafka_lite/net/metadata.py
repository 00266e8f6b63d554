"""Cluster metadata snapshots and their (pure) update rules.

A ``ClusterMetadata`` is immutable and replaced wholesale on every refresh, so readers
never see a half-applied update. ``apply_metadata`` merges a ``MetadataResponse`` into
the previous snapshot:

* brokers, controller and cluster id always come from the newest response;
* a full refresh (all topics) replaces the topic set, a partial one merges;
* per partition, a response carrying an older leader epoch than the cached one is
  ignored (KIP-320): it came from a broker that has not caught up yet. A changed topic
  id means the topic was re-created, and then the new data wins regardless (KIP-516).

``apply_leader_hints`` applies what a Produce or Fetch error response says about a
partition's new leader (KIP-951: ``CurrentLeader`` plus the ``NodeEndpoints`` of the
leaders it names), as Java's ``Metadata.updatePartitionLeadership``: only for partitions
already cached, only when the hint's leader epoch is newer than the cached one, and only
when the new leader's address is known (from the hint's endpoints or the cached brokers).
Replicas and ISR stay as cached; the next full refresh replaces them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, Protocol

from aiokafka_lite.core.errors import BrokerResponseError, error_for
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages import MetadataResponse
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = [
    "BrokerInfo",
    "ClusterMetadata",
    "CoordinatorType",
    "LeaderHint",
    "PartitionInfo",
    "TopicInfo",
    "apply_leader_hints",
    "apply_metadata",
    "fatal_topic_error",
    "hint_endpoints",
    "topic_error",
]

_NONE: Final = 0
_UNKNOWN_TOPIC_OR_PARTITION: Final = 3
_INVALID_TOPIC: Final = 17
_TOPIC_AUTHORIZATION_FAILED: Final = 29

# Topic errors in a metadata response that waiting cannot fix, in the order the Java
# client reports them (TopicAuthorizationException before InvalidTopicException): its
# consumer raises them from poll(), its producer from send().
_FATAL_TOPIC_ERRORS: Final = (_TOPIC_AUTHORIZATION_FAILED, _INVALID_TOPIC)

_TOPIC_ERROR_HINTS: Final = {
    _INVALID_TOPIC: "not a valid topic name (1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-'; "
    "not '.' or '..')",
    _TOPIC_AUTHORIZATION_FAILED: "not authorized (the principal needs Describe on the topic)",
    _UNKNOWN_TOPIC_OR_PARTITION: "does not exist",
}


class CoordinatorType(IntEnum):
    GROUP = 0
    TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def id(self) -> int:
        return self.node_id

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo]
    is_internal: bool = False
    error_code: int = 0


@dataclass(frozen=True)
class ClusterMetadata:
    """One consistent view of the cluster. ``topic_errors`` holds topics the last
    response reported with an error and no partitions (unknown, unauthorized, being
    created), keyed by name."""

    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    topic_errors: dict[str, int] = field(default_factory=dict)
    _by_id: dict[uuid.UUID, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_id.update({t.topic_id: name for name, t in self.topics.items() if t.topic_id != ZERO_UUID})

    def partitions_for(self, topic: str) -> list[int]:
        info = self.topics.get(topic)
        return sorted(info.partitions) if info is not None else []

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        info = self.topics.get(tp.topic)
        return info.partitions.get(tp.partition) if info is not None else None

    def leader_for(self, tp: TopicPartition) -> int | None:
        p = self.partition(tp)
        if p is None or p.leader < 0:
            return None
        return p.leader

    def leader_epoch(self, tp: TopicPartition) -> int:
        p = self.partition(tp)
        return -1 if p is None else p.leader_epoch

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.topics.get(topic)
        if info is None or info.topic_id == ZERO_UUID:
            return None
        return info.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._by_id.get(topic_id)

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.brokers.get(node_id)

    def partitions_by_leader(
        self, tps: Iterable[TopicPartition]
    ) -> tuple[dict[int, list[TopicPartition]], list[TopicPartition]]:
        """Group partitions by leader; the second list holds partitions without a known leader."""
        grouped: dict[int, list[TopicPartition]] = {}
        missing: list[TopicPartition] = []
        for tp in tps:
            leader = self.leader_for(tp)
            if leader is None:
                missing.append(tp)
            else:
                grouped.setdefault(leader, []).append(tp)
        return grouped, missing


def topic_error(topics: str | Iterable[str], code: int) -> BrokerResponseError:
    """The exception for a metadata error ``code`` on ``topics``, saying what it means."""
    names = [topics] if isinstance(topics, str) else sorted(topics)
    subject = ("topic " if len(names) == 1 else "topics ") + ", ".join(repr(n) for n in names)
    hint = _TOPIC_ERROR_HINTS.get(code)
    return error_for(code, f"{subject}: {hint}" if hint else subject)


def fatal_topic_error(topic_errors: Mapping[str, int], topics: Iterable[str]) -> BrokerResponseError | None:
    """The error a client must raise rather than wait for ``topics``: a topic it may not
    access or whose name is invalid, per the last metadata; None when there is none."""
    if not topic_errors:
        return None
    found: dict[int, list[str]] = {}
    for topic in topics:
        code = topic_errors.get(topic, _NONE)
        if code in _FATAL_TOPIC_ERRORS:
            found.setdefault(code, []).append(topic)
    for code in _FATAL_TOPIC_ERRORS:
        if code in found:
            return topic_error(found[code], code)
    return None


def _partition(p: MetadataResponse.MetadataResponsePartition) -> PartitionInfo:
    return PartitionInfo(
        partition=p.partition_index,
        leader=p.leader_id,
        leader_epoch=p.leader_epoch,
        replicas=tuple(p.replica_nodes),
        isr=tuple(p.isr_nodes),
        offline=tuple(p.offline_replicas),
        error_code=p.error_code,
    )


def _merge_partitions(
    old: TopicInfo | None, new: dict[int, PartitionInfo], topic_id: uuid.UUID
) -> dict[int, PartitionInfo]:
    if old is None or (old.topic_id != topic_id and ZERO_UUID not in (old.topic_id, topic_id)):
        return new
    merged: dict[int, PartitionInfo] = {}
    for index, part in new.items():
        prev = old.partitions.get(index)
        if prev is not None and part.leader_epoch >= 0 and prev.leader_epoch > part.leader_epoch:
            merged[index] = prev  # stale response (KIP-320)
        else:
            merged[index] = part
    return merged


def apply_metadata(
    prev: ClusterMetadata, resp: MetadataResponse, *, full: bool, requested: Iterable[str] = ()
) -> ClusterMetadata:
    """The snapshot after ``resp``. ``full``: the request asked for all topics.

    Topics the response names with an error and no partitions move to ``topic_errors``;
    topics asked for but absent from a partial response are left as they were.
    """
    brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
    topics: dict[str, TopicInfo] = {} if full else dict(prev.topics)
    errors: dict[str, int] = {} if full else dict(prev.topic_errors)
    for t in resp.topics:
        name = t.name
        if name is None:  # topic-id-only response for a topic we cannot name: nothing to cache
            continue
        if t.error_code != _NONE and not t.partitions:
            errors[name] = t.error_code
            if t.error_code == _UNKNOWN_TOPIC_OR_PARTITION or name not in topics:
                topics.pop(name, None)
            continue
        errors.pop(name, None)
        parts = {p.partition_index: _partition(p) for p in t.partitions}
        old = prev.topics.get(name)
        topics[name] = TopicInfo(
            name=name,
            topic_id=t.topic_id,
            partitions=_merge_partitions(old, parts, t.topic_id),
            is_internal=t.is_internal,
            error_code=t.error_code,
        )
    return ClusterMetadata(
        brokers=brokers,
        topics=topics,
        controller_id=resp.controller_id,
        cluster_id=resp.cluster_id,
        topic_errors=errors,
    )


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """A response's word on a partition's leader (KIP-951 ``CurrentLeader``)."""

    leader_id: int
    leader_epoch: int


class NodeEndpoint(Protocol):
    """A ``NodeEndpoints`` entry of a Produce or Fetch response (KIP-951)."""

    @property
    def node_id(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def rack(self) -> str | None: ...


def hint_endpoints(node_endpoints: Iterable[NodeEndpoint]) -> list[BrokerInfo]:
    """The brokers a response's ``NodeEndpoints`` name, for :func:`apply_leader_hints`."""
    return [BrokerInfo(e.node_id, e.host, e.port, e.rack) for e in node_endpoints]


def apply_leader_hints(
    prev: ClusterMetadata,
    hints: Mapping[TopicPartition, LeaderHint],
    endpoints: Iterable[BrokerInfo] = (),
) -> tuple[ClusterMetadata, set[TopicPartition]]:
    """The snapshot after the leader ``hints`` of a Produce or Fetch response (see the
    module doc) and the partitions whose leader it changed. ``prev`` itself comes back
    when no hint applies, so callers can tell nothing changed by identity."""
    known = dict(prev.brokers)
    offered = {b.node_id: b for b in endpoints}
    changed: set[TopicPartition] = set()
    topics = dict(prev.topics)
    used: set[int] = set()
    for tp, hint in hints.items():
        if hint.leader_id < 0 or hint.leader_epoch < 0:
            continue  # the broker does not know the leader either
        info = topics.get(tp.topic)
        part = info.partitions.get(tp.partition) if info is not None else None
        if info is None or part is None:
            continue  # not cached: a metadata refresh has to find it (as Java)
        if part.leader_epoch >= 0 and hint.leader_epoch <= part.leader_epoch:
            continue  # not newer than what we know (KIP-320 ordering)
        if hint.leader_id not in offered and hint.leader_id not in known:
            continue  # no address for the new leader
        partitions = dict(info.partitions)
        partitions[tp.partition] = PartitionInfo(
            partition=part.partition,
            leader=hint.leader_id,
            leader_epoch=hint.leader_epoch,
            replicas=part.replicas,
            isr=part.isr,
            offline=part.offline,
            error_code=0,
        )
        topics[tp.topic] = TopicInfo(
            name=info.name,
            topic_id=info.topic_id,
            partitions=partitions,
            is_internal=info.is_internal,
            error_code=info.error_code,
        )
        changed.add(tp)
        used.add(hint.leader_id)
    if not changed:
        return prev, changed
    for node_id in used:
        if node_id in offered:
            known[node_id] = offered[node_id]
    return (
        ClusterMetadata(
            brokers=known,
            topics=topics,
            controller_id=prev.controller_id,
            cluster_id=prev.cluster_id,
            topic_errors=dict(prev.topic_errors),
        ),
        changed,
    )


def metadata_from_brokers(brokers: Mapping[int, BrokerInfo]) -> ClusterMetadata:
    """A snapshot knowing only brokers (bootstrap)."""
    return ClusterMetadata(brokers=dict(brokers))
