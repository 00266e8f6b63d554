"""State shared by all brokers of one embedded cluster.

There is one copy of every partition log; brokers differ only in which partitions they
lead. Replicas and ISR are metadata: with ``replication_factor`` > 1 the metadata
lists several replicas (so clients see a realistic layout), but the data lives once.
When a broker stops, the partitions it led move to a live broker (preferring listed
replicas) with a bumped leader epoch, as after a Kafka leader election.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from aiokafka_lite.broker.log import PartitionLog
from aiokafka_lite.broker.validation import TopicRules
from aiokafka_lite.core.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from aiokafka_lite.wire.records import Compression

if TYPE_CHECKING:
    from aiokafka_lite.broker.authorizer import Authorizer
    from aiokafka_lite.broker.context import Service
    from aiokafka_lite.broker.storage import Storage

__all__ = [
    "BROKER_CONFIG_DEFAULTS",
    "DEFAULT_FEATURES",
    "SUPPORTED_FEATURES",
    "TOPIC_CONFIG_DEFAULTS",
    "BrokerConfig",
    "BrokerInfo",
    "ClusterState",
    "Partition",
    "Topic",
]

log = logging.getLogger("aiokafka_lite.broker")

_TOPIC_NAME: Final = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME: Final = 249

# Topic-level configs the broker understands, with Kafka's defaults. Only the ones
# marked in ``_ENFORCED_TOPIC_CONFIGS`` change behaviour; the rest are stored and
# described so admin tools round-trip them.
TOPIC_CONFIG_DEFAULTS: Final[dict[str, str]] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "index.interval.bytes": "4096",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",  # Kafka 4.0 lowered it from Long.MAX to an hour
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}
_ENFORCED_TOPIC_CONFIGS: Final = frozenset(
    {
        "cleanup.policy",
        "max.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.type",
        "retention.bytes",
    }
)

# compression.type -> the codec the log stores batches with (None: as produced).
_STORED_CODEC: Final[dict[str, Compression | None]] = {
    "producer": None,
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}

_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1
_LONG_MIN: Final = -(2**63)
_LONG_MAX: Final = 2**63 - 1


def _number(kind: str, lo: float, hi: float) -> Callable[[str], str | None]:
    """A validator of Kafka's INT/LONG/DOUBLE configs in ``[lo, hi]`` (the problem, or None)."""

    def check(value: str) -> str | None:
        text = value.strip()
        try:
            number: float = float(text) if kind == "double" else int(text)
        except ValueError:
            return f"value must be a {kind}"
        if (kind == "int" and not _INT_MIN <= number <= _INT_MAX) or not _LONG_MIN <= number <= _LONG_MAX:
            return f"value is out of range for a {kind}"
        if not lo <= number <= hi:
            return (
                f"value must be at least {lo:g}"
                if hi in (_INT_MAX, _LONG_MAX)
                else f"value must be in [{lo:g}, {hi:g}]"
            )
        return None

    return check


def _one_of(*allowed: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value.strip() in allowed else f"value must be one of {', '.join(allowed)}"

    return check


def _list_of(*allowed: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in allowed]
        return f"{', '.join(bad)} not in {', '.join(allowed)}" if bad else None

    return check


def _boolean(value: str) -> str | None:
    return None if value.strip().lower() in ("true", "false") else "value must be true or false"


# Kafka 4.x LogConfig's types and validators for the topic configs this broker knows.
_TOPIC_CONFIG_CHECKS: Final[dict[str, Callable[[str], str | None]]] = {
    "cleanup.policy": _list_of("compact", "delete"),
    "compression.type": _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "delete.retention.ms": _number("long", 0, _LONG_MAX),
    "file.delete.delay.ms": _number("long", 0, _LONG_MAX),
    "flush.messages": _number("long", 1, _LONG_MAX),
    "flush.ms": _number("long", 0, _LONG_MAX),
    "index.interval.bytes": _number("int", 0, _INT_MAX),
    "max.compaction.lag.ms": _number("long", 1, _LONG_MAX),
    "max.message.bytes": _number("int", 0, _INT_MAX),
    "message.timestamp.after.max.ms": _number("long", 0, _LONG_MAX),
    "message.timestamp.before.max.ms": _number("long", 0, _LONG_MAX),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "min.cleanable.dirty.ratio": _number("double", 0, 1),
    "min.compaction.lag.ms": _number("long", 0, _LONG_MAX),
    "min.insync.replicas": _number("int", 1, _INT_MAX),
    "preallocate": _boolean,
    "retention.bytes": _number("long", _LONG_MIN, _LONG_MAX),
    "retention.ms": _number("long", -1, _LONG_MAX),
    # Kafka 4.1 raised the minimum from 14 bytes to 1 MiB (4.0 still accepts smaller).
    "segment.bytes": _number("int", 1024 * 1024, _INT_MAX),
    "segment.index.bytes": _number("int", 4, _INT_MAX),
    "segment.jitter.ms": _number("long", 0, _LONG_MAX),
    "segment.ms": _number("long", 1, _LONG_MAX),
    "unclean.leader.election.enable": _boolean,
}

BROKER_CONFIG_DEFAULTS: Final[dict[str, str]] = {
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "message.max.bytes": "1048588",
    "socket.request.max.bytes": "104857600",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.segment.bytes": "1073741824",
    "log.message.timestamp.type": "CreateTime",
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "max.incremental.fetch.session.cache.slots": "1000",
    "delete.topic.enable": "true",
}


#: Feature flags the embedded broker supports (name -> (min, max) level), as
#: ApiVersions' ``supported_features`` reports them, and the levels a new cluster
#: finalizes (Kafka 4.4's defaults for the features the embedded broker implements).
SUPPORTED_FEATURES: Final[Mapping[str, tuple[int, int]]] = {"transaction.version": (0, 2)}
DEFAULT_FEATURES: Final[Mapping[str, int]] = {"transaction.version": 2}


@dataclass(slots=True)
class BrokerConfig:
    """Cluster-wide settings (the embedded analogue of server.properties)."""

    auto_create_topics: bool = True
    default_partitions: int = 1
    default_replication_factor: int = 1
    message_max_bytes: int = 1048588
    max_request_size: int = 100 * 1024 * 1024  # socket.request.max.bytes
    fetch_session_cache_slots: int = 1000
    fetch_session_min_evict_ms: int = 0  # sessions idle this long may be evicted when the cache is full
    max_connections: int = 1000  # per broker; more are closed at accept
    extra: dict[str, str] = field(default_factory=dict)  # anything else, reported by DescribeConfigs
    # Finalized feature levels (ApiVersions' finalized_features; see SUPPORTED_FEATURES).
    features: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_FEATURES))
    features_epoch: int = 1  # ApiVersions' finalized_features_epoch, bumped on every change

    def as_configs(self, broker_id: int) -> dict[str, str]:
        configs = dict(BROKER_CONFIG_DEFAULTS)
        configs.update(
            {
                "broker.id": str(broker_id),
                "node.id": str(broker_id),
                "auto.create.topics.enable": str(self.auto_create_topics).lower(),
                "num.partitions": str(self.default_partitions),
                "default.replication.factor": str(self.default_replication_factor),
                "message.max.bytes": str(self.message_max_bytes),
                "socket.request.max.bytes": str(self.max_request_size),
                "max.incremental.fetch.session.cache.slots": str(self.fetch_session_cache_slots),
            }
        )
        configs.update(self.extra)
        return configs


@dataclass(slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    alive: bool = False


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    log: PartitionLog
    leader_id: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    configs: dict[str, str]  # explicitly set configs only; defaults come from TOPIC_CONFIG_DEFAULTS
    internal: bool = False

    def config(self, name: str) -> str:
        return self.configs.get(name, TOPIC_CONFIG_DEFAULTS.get(name, ""))


MetadataListener = Callable[[], None]


class ClusterState:
    """Topics, brokers and cluster-wide allocators, shared by every broker of a cluster."""

    def __init__(self, config: BrokerConfig | None = None, *, cluster_id: str | None = None) -> None:
        self.config = config or BrokerConfig()
        self.cluster_id = cluster_id or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        # Long-lived parts registered by optional modules (group/transaction coordinators).
        self.services: dict[str, Service] = {}
        self.storage: Storage | None = None
        # Per-cluster state of core handlers (e.g. "fetch_sessions": broker id -> cache).
        self.extensions: dict[str, Any] = {}
        # Group configs set through IncrementalAlterConfigs on GROUP resources: group -> name -> value.
        self.group_configs: dict[str, dict[str, str]] = {}
        # Called with a connection's id when it closes (share sessions release their records).
        self.connection_listeners: list[Callable[[str], None]] = []
        # ACLs and their enforcement (broker/authorizer.py); None: no authorizer, as Kafka
        # without authorizer.class.name (everything allowed, ACL calls SECURITY_DISABLED).
        self.authorizer: Authorizer | None = None
        self._next_producer_id = 1000
        self._listeners: list[MetadataListener] = []
        self._rr = 0  # round-robin start for new partitions' leaders

    # -- brokers -----------------------------------------------------------------
    def live_brokers(self) -> list[BrokerInfo]:
        return [b for b in self.brokers.values() if b.alive]

    @property
    def controller_id(self) -> int:
        live = self.live_brokers()
        return min(b.node_id for b in live) if live else -1

    def is_alive(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and b.alive

    def set_broker_alive(self, broker_id: int, alive: bool) -> None:
        """Marks a broker up or down; leaders of a downed broker move to live brokers."""
        self.set_brokers_alive([broker_id], alive)

    def set_brokers_alive(self, broker_ids: Iterable[int], alive: bool) -> None:
        ids = set(broker_ids)
        for bid in ids:
            self.brokers[bid].alive = alive
        moved = False
        for p in self.iter_partitions():
            if alive:
                for bid in ids:
                    if bid in p.replicas and bid not in p.isr:
                        p.isr.append(bid)
            else:
                p.isr[:] = [r for r in p.isr if r not in ids] or p.isr[:1]
            if not self.is_alive(p.leader_id):
                moved = self._elect(p) or moved
        if moved and self.storage is not None:
            self.storage.save_metadata(self)
        self.changed()

    def _elect(self, p: Partition) -> bool:
        candidates = [r for r in p.replicas if self.is_alive(r)] or sorted(
            b.node_id for b in self.live_brokers()
        )
        if not candidates:
            return False  # whole cluster down: keep the old leader, nobody can reach it anyway
        self.set_leader(p, candidates[p.index % len(candidates)], persist=False)
        return True

    def set_leader(self, p: Partition, broker_id: int, *, persist: bool = True) -> None:
        """Moves leadership (bumping the leader epoch), as a Kafka leader election does."""
        if broker_id not in self.brokers:
            raise InvalidRequestError(f"no broker {broker_id}")
        p.leader_id = broker_id
        p.leader_epoch += 1
        p.log.set_leader_epoch(p.leader_epoch)
        if broker_id not in p.replicas:
            p.replicas.append(broker_id)
        if broker_id not in p.isr:
            p.isr.append(broker_id)
        if persist and self.storage is not None:
            self.storage.save_metadata(self)

    # -- change notification -------------------------------------------------------
    def add_listener(self, fn: MetadataListener) -> None:
        """``fn()`` runs after every topic/broker/leadership change (cheap callbacks only)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: MetadataListener) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def changed(self) -> None:
        for fn in list(self._listeners):
            try:
                fn()
            except Exception:
                log.exception("metadata listener failed")

    # -- producer ids ------------------------------------------------------------
    def allocate_producer_id(self) -> int:
        """A cluster-unique producer id (used by InitProducerId); never reused across restarts."""
        pid = self._next_producer_id
        self._next_producer_id += 1
        if self.storage is not None:
            self.storage.producer_id_allocated(self, pid)
        return pid

    # -- topics ------------------------------------------------------------------
    def iter_partitions(self) -> Iterator[Partition]:
        for t in self.topics.values():
            yield from t.partitions

    def get_topic(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def require_partition(self, topic: str, index: int) -> Partition:
        p = self.get_partition(topic, index)
        if p is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{index}")
        return p

    @staticmethod
    def validate_topic_name(name: str) -> None:
        if not name or name in (".", ".."):
            raise InvalidTopicError(f"illegal topic name {name!r}")
        if len(name) > MAX_TOPIC_NAME:
            raise InvalidTopicError(f"topic name longer than {MAX_TOPIC_NAME} characters")
        if not _TOPIC_NAME.match(name):
            raise InvalidTopicError(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")

    @staticmethod
    def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
        """INVALID_CONFIG for an unknown topic config or a value Kafka's validators refuse."""
        for k, v in configs.items():
            if k not in TOPIC_CONFIG_DEFAULTS:
                raise InvalidConfigError(f"unknown topic config {k!r}")
            if v is None:
                raise InvalidConfigError(f"null value for topic config {k}")
            check = _TOPIC_CONFIG_CHECKS.get(k)
            problem = check(v) if check is not None else None
            if problem is not None:
                raise InvalidConfigError(f"Invalid value {v} for configuration {k}: {problem}")

    def _assign_replicas(self, num_partitions: int, replication_factor: int, start: int) -> list[list[int]]:
        ids = sorted(b.node_id for b in self.live_brokers()) or sorted(self.brokers)
        if not ids:
            raise InvalidReplicationFactorError("no brokers")
        if replication_factor > len(ids):
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the {len(ids)} available brokers"
            )
        out = []
        for i in range(num_partitions):
            first = (start + i) % len(ids)
            out.append([ids[(first + k) % len(ids)] for k in range(replication_factor)])
        return out

    def check_new_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> tuple[int, int]:
        """Validates a CreateTopics entry; returns the effective (partitions, replication factor)."""
        self.validate_topic_name(name)
        if name in self.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError(
                    "replica assignment given together with partitions/replication factor"
                )
            if sorted(assignments) != list(range(len(assignments))):
                raise InvalidReplicaAssignmentError("partition indexes of the assignment are not 0..n-1")
            for replicas in assignments.values():
                if (
                    not replicas
                    or len(set(replicas)) != len(replicas)
                    or any(r not in self.brokers for r in replicas)
                ):
                    raise InvalidReplicaAssignmentError(f"bad replica list {replicas}")
            num_partitions = len(assignments)
            replication_factor = len(next(iter(assignments.values())))
        if num_partitions == -1:
            num_partitions = self.config.default_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        if num_partitions <= 0:
            raise InvalidPartitionsError(f"number of partitions must be positive, not {num_partitions}")
        if num_partitions > 100_000:
            raise InvalidPartitionsError(
                f"{num_partitions} partitions is more than this broker allows (100000)"
            )
        if replication_factor <= 0:
            raise InvalidReplicationFactorError(
                f"replication factor must be positive, not {replication_factor}"
            )
        if not assignments and replication_factor > max(len(self.live_brokers()), 1):
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the {len(self.live_brokers())} available brokers"
            )
        self.validate_topic_configs(configs or {})
        return num_partitions, replication_factor

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        *,
        assignments: dict[int, list[int]] | None = None,
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> Topic:
        """Creates a topic (raises the CreateTopics error as a ``BrokerResponseError``)."""
        num_partitions, replication_factor = self.check_new_topic(
            name, num_partitions, replication_factor, configs, assignments
        )
        topic = Topic(name, topic_id or uuid.uuid4(), [], dict(configs or {}), internal)
        if assignments:
            layout = [assignments[i] for i in range(num_partitions)]
        else:
            layout = self._assign_replicas(num_partitions, replication_factor, self._rr)
            self._rr += 1
        for i, replicas in enumerate(layout):
            topic.partitions.append(self._new_partition(topic, i, list(replicas)))
        self.topics[name] = topic
        self.topics_by_id[topic.topic_id] = topic
        if self.storage is not None:
            self.storage.topic_created(self, topic)
        self.changed()
        return topic

    def _new_partition(self, topic: Topic, index: int, replicas: list[int]) -> Partition:
        leader = next((r for r in replicas if self.is_alive(r)), replicas[0])
        plog = PartitionLog(leader_epoch=0)
        p = Partition(
            topic.name,
            index,
            plog,
            leader,
            0,
            replicas,
            [r for r in replicas if self.is_alive(r)] or [leader],
        )
        self.apply_topic_configs(topic, plog)
        return p

    def apply_topic_configs(self, topic: Topic, plog: PartitionLog | None = None) -> None:
        """Pushes the enforced topic configs into the partition logs."""
        logs = [plog] if plog is not None else [p.log for p in topic.partitions]
        rules = TopicRules(
            max_message_bytes=int(topic.configs.get("max.message.bytes", self.config.message_max_bytes)),
            compacted="compact" in (p.strip() for p in topic.config("cleanup.policy").split(",")),
            log_append_time=topic.config("message.timestamp.type").strip() == "LogAppendTime",
            timestamp_before_max_ms=int(topic.config("message.timestamp.before.max.ms")),
            timestamp_after_max_ms=int(topic.config("message.timestamp.after.max.ms")),
            compression=_STORED_CODEC[topic.config("compression.type").strip()],
        )
        retention = int(topic.config("retention.bytes"))
        for lg in logs:
            lg.rules = rules
            lg.retention_bytes = retention

    def set_topic_configs(self, topic: Topic, configs: dict[str, str | None], *, incremental: bool) -> None:
        """AlterConfigs (replace all) or IncrementalAlterConfigs (``None`` deletes a key)."""
        new = dict(topic.configs) if incremental else {}
        for k, v in configs.items():
            if v is None:
                new.pop(k, None)
            else:
                new[k] = v
        self.validate_topic_configs(new)
        topic.configs = new
        self.apply_topic_configs(topic)
        if self.storage is not None:
            self.storage.save_metadata(self)

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        self.topics_by_id.pop(topic.topic_id, None)
        for p in topic.partitions:
            p.log.notify()
        if self.storage is not None:
            self.storage.topic_deleted(self, topic)
        self.changed()
        return topic

    def add_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        current = len(topic.partitions)
        if total < current:
            raise InvalidPartitionsError(f"topic has {current} partitions; cannot shrink to {total}")
        if total == current:
            raise InvalidPartitionsError(f"topic already has {current} partitions")
        rf = len(topic.partitions[0].replicas) if topic.partitions else 1
        if assignments is not None:
            if len(assignments) != total - current:
                raise InvalidReplicaAssignmentError(
                    "assignment count differs from the number of new partitions"
                )
            for replicas in assignments:
                if not replicas or any(r not in self.brokers for r in replicas):
                    raise InvalidReplicaAssignmentError(f"bad replica list {replicas}")
            layout = assignments
        else:
            layout = self._assign_replicas(
                total - current, min(rf, max(len(self.live_brokers()), 1)), current
            )
        for i, replicas in enumerate(layout, start=current):
            topic.partitions.append(self._new_partition(topic, i, list(replicas)))
        if self.storage is not None:
            self.storage.save_metadata(self)
        self.changed()

    def visible_topics(self) -> Iterable[Topic]:
        return self.topics.values()

    def snapshot(self) -> dict[str, Any]:
        """Plain-data description of topics (for persistence and debugging)."""
        return {
            "cluster_id": self.cluster_id,
            "next_producer_id": self._next_producer_id,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "internal": t.internal,
                    "configs": t.configs,
                    "partitions": [
                        {"replicas": p.replicas, "leader": p.leader_id, "leader_epoch": p.leader_epoch}
                        for p in t.partitions
                    ],
                }
                for t in self.topics.values()
            ],
        }
