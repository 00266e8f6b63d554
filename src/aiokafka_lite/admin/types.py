"""Typed inputs and results of the Admin client.

Every batch operation returns a ``Results`` mapping (item -> result); each result has
an ``error`` (``None`` on success), so one failing topic does not hide the others.
``Results.raise_errors()`` turns failures into an exception when that is what you want.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, Protocol, TypeVar

from aiokafka_lite.core.acls import AclOperation
from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.metadata import BrokerInfo

__all__ = [
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClusterDescription",
    "ConfigDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "CreateTopicResult",
    "DeleteRecordsResult",
    "GroupDescription",
    "GroupListing",
    "GroupOffset",
    "ListGroupsResult",
    "ListOffsetsResult",
    "MemberDescription",
    "NewTopic",
    "OffsetSpec",
    "PartitionDescription",
    "QuorumInfo",
    "QuorumNode",
    "QuorumReplicaState",
    "RaftVoterEndpoint",
    "Result",
    "Results",
    "TopicDescription",
    "TopicListing",
]


class _HasError(Protocol):
    @property
    def error(self) -> KafkaError | None: ...


K = TypeVar("K")
V = TypeVar("V", bound=_HasError)


class Results(dict[K, V], Generic[K, V]):
    """Per-item results of a batch operation (a dict), with error helpers."""

    @property
    def errors(self) -> dict[K, KafkaError]:
        return {k: v.error for k, v in self.items() if v.error is not None}

    @property
    def ok(self) -> bool:
        return all(v.error is None for v in self.values())

    def raise_errors(self) -> Results[K, V]:
        """Raise the first item's error (the message lists every failed item); else return self."""
        errors = self.errors
        if not errors:
            return self
        first_key, first = next(iter(errors.items()))
        if len(errors) > 1:
            first.add_note(
                "failed items: " + ", ".join(f"{k}: {type(e).__name__}" for k, e in errors.items())
            )
        else:
            first.add_note(f"failed item: {first_key}")
        raise first


@dataclass(frozen=True, slots=True)
class Result:
    """Outcome of an item that carries no data besides success or failure."""

    error: KafkaError | None = None


# ---------------------------------------------------------------------------- topics


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. ``partitions``/``replication_factor`` of -1 use the broker defaults;
    ``replica_assignment`` (partition -> broker ids) replaces both."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = field(default_factory=dict)
    replica_assignment: Mapping[int, list[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    topic_id: uuid.UUID | None = None
    partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str | None] = field(default_factory=dict)
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class TopicListing:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None = None
    is_internal: bool = False
    partitions: list[PartitionDescription] = field(default_factory=list)
    error: KafkaError | None = None
    #: Operations the principal may do on the topic (``describe_topics(include_authorized_operations=True)``).
    authorized_operations: frozenset[AclOperation] | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    brokers: list[BrokerInfo]
    controller_id: int
    cluster_id: str | None
    #: CLUSTER operations the principal may do (``describe_cluster(include_authorized_operations=True)``).
    authorized_operations: frozenset[AclOperation] | None = None


# ---------------------------------------------------------------------------- configs


class ConfigResourceType(IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int | str = "") -> ConfigResource:
        """A broker's configuration (``""``: the cluster-wide default)."""
        return cls(ConfigResourceType.BROKER, str(node_id))

    @classmethod
    def group(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.GROUP, name)

    def __str__(self) -> str:
        return f"{self.type.name.lower()}:{self.name}"


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource | int = ConfigSource.UNKNOWN
    read_only: bool = False
    is_default: bool = False
    is_sensitive: bool = False
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    type: int = 0
    documentation: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigDescription:
    resource: ConfigResource
    entries: dict[str, ConfigEntry] = field(default_factory=dict)
    error: KafkaError | None = None

    def value(self, name: str) -> str | None:
        entry = self.entries.get(name)
        return None if entry is None else entry.value


class AlterConfigOpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET


# ---------------------------------------------------------------------------- groups


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str = ""
    type: str = ""
    coordinator: int = -1


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    """Groups from every broker that answered; ``errors`` holds brokers that failed."""

    groups: list[GroupListing]
    errors: dict[int, KafkaError] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...] = ()
    metadata: bytes = b""
    raw_assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: list[MemberDescription] = field(default_factory=list)
    coordinator: int = -1
    authorized_operations: int | None = None
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class GroupOffset:
    """A committed offset; ``offset`` is -1 when the group has no commit for the partition."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    error: KafkaError | None = None


# ---------------------------------------------------------------------------- offsets & records


class OffsetSpec(IntEnum):
    """Special ListOffsets timestamps (any other int is a timestamp in ms)."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3
    EARLIEST_LOCAL = -4
    LATEST_TIERED = -5


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    low_watermark: int = -1
    error: KafkaError | None = None


# ---------------------------------------------------------------------------- KRaft quorum


@dataclass(frozen=True, slots=True)
class RaftVoterEndpoint:
    """One listener of a KRaft voter (Java's ``RaftVoterEndpoint``): the name of a
    controller listener (``controller.listener.names``), its host and port."""

    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class QuorumReplicaState:
    """A voter's or observer's replica of the metadata log (Java's ``QuorumInfo.ReplicaState``).

    ``replica_directory_id`` is the replica's metadata log directory id (KIP-853); the
    zero UUID from a static quorum (``controller.quorum.voters``) or a DescribeQuorum
    below v2. The timestamps are the leader's clock in ms, ``None`` where the leader
    has none (Java's empty ``OptionalLong``, -1 on the wire)."""

    replica_id: int
    replica_directory_id: uuid.UUID
    log_end_offset: int
    last_fetch_timestamp: int | None
    last_caught_up_timestamp: int | None


@dataclass(frozen=True, slots=True)
class QuorumNode:
    """A voter's endpoints (Java's ``QuorumInfo.Node``; DescribeQuorum v2+)."""

    node_id: int
    endpoints: tuple[RaftVoterEndpoint, ...]


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The KRaft metadata quorum as its leader sees it (Java's ``QuorumInfo``):
    ``Admin.describe_metadata_quorum``. ``nodes`` (node id -> endpoints) is filled by
    brokers answering DescribeQuorum v2 (Kafka 3.9+), empty otherwise."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplicaState, ...]
    observers: tuple[QuorumReplicaState, ...]
    nodes: dict[int, QuorumNode] = field(default_factory=dict)
