"""Consumer options: one declaration per option with type, default and documentation.

Defaults follow the Java consumer. Group options live here too because the group
coordinator is built from the consumer's configuration
(``GroupCoordinator(client, subscription, config)``); network options (timeouts,
security, client id...) belong to ``aiokafka_lite.net.ClientConfig`` and are passed
through by ``Consumer`` when it creates its own client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.options import Options, at_least, between, one_of, option
from aiokafka_lite.core.serialization import Deserializer as ContextDeserializer
from aiokafka_lite.core.serialization import context_deserializer

__all__ = ["ConsumerConfig"]

Deserializer = Callable[[bytes | None], Any]

_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, kw_only=True)
class ConsumerConfig(Options):
    """Options of :class:`aiokafka_lite.Consumer` (and of its group coordinator)."""

    # -- positions ------------------------------------------------------------------
    group_id: str | None = option(
        None, "Consumer group; None consumes without a group (manual/topic assignment, no commits)."
    )
    auto_offset_reset: str = option(
        "latest",
        "Where to start when there is no valid position: 'earliest', 'latest', or 'none' "
        "(raise OffsetOutOfRangeError).",
        one_of("earliest", "latest", "none"),
    )
    # -- fetching -------------------------------------------------------------------
    fetch_min_bytes: int = option(
        1, "Bytes the broker should accumulate before answering a fetch.", between(1, _MAX_INT32)
    )
    fetch_max_bytes: int = option(
        52428800,
        "Upper bound of one fetch response (the broker still returns one batch larger than this, KIP-74).",
        between(1, _MAX_INT32),
    )
    max_partition_fetch_bytes: int = option(
        1048576, "Upper bound of data returned per partition in one fetch.", between(1, _MAX_INT32)
    )
    fetch_max_wait_ms: int = option(
        500, "How long the broker may wait for fetch_min_bytes before answering.", between(0, _MAX_INT32)
    )
    max_buffered_bytes: int = option(
        67108864,
        "Cap on fetched-but-not-yet-consumed bytes held by the consumer; fetching pauses at the cap, "
        "so memory does not grow with topic size or a slow consumer.",
        at_least(1),
    )
    max_poll_records: int = option(500, "Default max_records of getmany().", at_least(1))
    check_crcs: bool = option(True, "Verify the CRC of every fetched batch.")
    isolation_level: str = option(
        "read_uncommitted",
        "'read_committed' hides aborted transactional records and stops at the last stable offset.",
        one_of("read_uncommitted", "read_committed"),
    )
    enable_fetch_sessions: bool = option(
        True, "Use incremental fetch sessions (KIP-227) to shrink fetch requests."
    )
    client_rack: str = option("", "Rack id sent with fetches (follower fetching, KIP-392).")
    key_deserializer: Deserializer | ContextDeserializer | None = option(
        None,
        "Applied to every record key: a callable f(key), or an object with deserialize(key, ctx) that "
        "sees the topic, the field and the record's headers (aiokafka_lite.core.serialization).",
        type_check=False,
    )
    value_deserializer: Deserializer | ContextDeserializer | None = option(
        None, "Applied to every record value (as key_deserializer).", type_check=False
    )
    exclude_internal_topics: bool = option(
        True, "Pattern subscriptions never match internal topics (e.g. __consumer_offsets)."
    )
    default_api_timeout_ms: int = option(
        60000,
        "Timeout of blocking calls without their own (offset lookups, position resolution, commits).",
        at_least(1),
    )
    tracer_provider: Any = option(
        None,
        "An OpenTelemetry TracerProvider: trace this consumer with it (process spans per record, poll "
        "spans per batch, continuing the producer's trace). None: traced only while "
        "aiokafka_lite.integrations.otel.instrument() is in effect.",
        type_check=False,
    )
    enable_metrics_push: bool = option(
        True,
        "Push this client's metrics to the cluster when an operator has set a client-metrics "
        "subscription (KIP-714; GetTelemetrySubscriptions/PushTelemetry, OTLP payloads), as Java's "
        "enable.metrics.push. Brokers without the APIs or without a subscription get nothing.",
    )
    # -- group membership (read by the group coordinator) ---------------------------
    group_instance_id: str | None = option(None, "Static membership id (KIP-345).")
    session_timeout_ms: int = option(
        45000, "Group session timeout: the member is removed after this without heartbeats.", at_least(1)
    )
    heartbeat_interval_ms: int = option(3000, "Interval between group heartbeats.", at_least(1))
    max_poll_interval_ms: int = option(
        300000, "Maximum time between polls before the member leaves the group.", at_least(1)
    )
    rebalance_timeout_ms: int | None = option(
        None, "Rebalance timeout sent in JoinGroup; None uses max_poll_interval_ms.", at_least(1)
    )
    enable_auto_commit: bool = option(True, "Commit consumed positions periodically (group only).")
    auto_commit_interval_ms: int = option(5000, "Interval of automatic commits.", at_least(1))
    partition_assignment_strategy: Sequence[Any] = option(
        ("cooperative-sticky",),
        "Assignors (names or instances) in preference order, classic group protocol; the default is "
        "cooperative-sticky, as in franz-go (Java's default ['range', 'cooperative-sticky'] also works).",
        type_check=False,
    )
    group_protocol: str = option(
        "classic",
        "Group protocol: 'classic' (JoinGroup/SyncGroup, client-side assignors) or 'consumer' "
        "(KIP-848: the broker assigns, members reconcile incrementally through ConsumerGroupHeartbeat; "
        "Kafka 4.0+). See docs/guide/consumer-protocol.md.",
        one_of("classic", "consumer"),
    )
    group_remote_assignor: str | None = option(
        None,
        "group_protocol='consumer' only: the broker-side assignor ('uniform' or 'range' on Apache Kafka); "
        "None uses the broker's default (group.consumer.assignors).",
    )

    def validate(self) -> None:
        if self.max_partition_fetch_bytes > self.max_buffered_bytes:
            raise ConfigError(
                f"max_partition_fetch_bytes ({self.max_partition_fetch_bytes}) must not exceed "
                f"max_buffered_bytes ({self.max_buffered_bytes})"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError("heartbeat_interval_ms must be lower than session_timeout_ms")
        if self.group_id is not None and not self.group_id:
            raise ConfigError("group_id must not be empty (use None for no group)")
        if self.group_id is None and self.group_instance_id is not None:
            raise ConfigError("group_instance_id needs a group_id")
        for name in ("key_deserializer", "value_deserializer"):
            value = getattr(self, name)
            if value is not None and not callable(value) and context_deserializer(value) is None:
                raise ConfigError(
                    f"{name}: must be callable, or an object with a deserialize(data, ctx) method (got {value!r})"
                )
        if self.group_protocol == "consumer":
            # As the Java client: with this protocol the broker owns these (group configs).
            owned_by_broker = {
                "session_timeout_ms": (self.session_timeout_ms, 45000, "group.consumer.session.timeout.ms"),
                "heartbeat_interval_ms": (
                    self.heartbeat_interval_ms,
                    3000,
                    "group.consumer.heartbeat.interval.ms",
                ),
            }
            for name, (value, default, broker_config) in owned_by_broker.items():
                if value != default:
                    raise ConfigError(
                        f"{name} cannot be set with group_protocol='consumer': the broker sets it for the "
                        f"whole group ({broker_config}, or the group config {broker_config.removeprefix('group.')})"
                    )
            if tuple(self.partition_assignment_strategy or ()) != ("cooperative-sticky",):
                raise ConfigError(
                    "partition_assignment_strategy cannot be set with group_protocol='consumer': the broker "
                    "assigns partitions; choose its assignor with group_remote_assignor ('uniform' or 'range')"
                )
        if self.group_remote_assignor is not None:
            if self.group_protocol != "consumer":
                raise ConfigError("group_remote_assignor needs group_protocol='consumer'")
            if not self.group_remote_assignor:
                raise ConfigError("group_remote_assignor must not be empty (None: the broker's default)")
        if isinstance(self.partition_assignment_strategy, str) or not self.partition_assignment_strategy:
            raise ConfigError("partition_assignment_strategy: must be a non-empty sequence")

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"
