"""Producer options: one declaration per option with type, default and documentation.

Defaults follow the Java producer (Kafka 4.x: ``acks=all``, idempotence on, ``linger_ms=5``).
Network options (client id, security, reconnect backoff...) belong to
``aiokafka_lite.net.ClientConfig``; ``Producer`` passes them through when it creates its
own client. ``request_timeout_ms``, ``retry_backoff_ms``, ``retry_backoff_max_ms`` and
``max_in_flight_requests_per_connection`` exist in both and are given to both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.options import Options, at_least, between, option
from aiokafka_lite.core.serialization import Serializer as ContextSerializer
from aiokafka_lite.core.serialization import context_serializer
from aiokafka_lite.wire.compression import Compression, validate_level

__all__ = ["ProducerConfig", "Serializer"]

#: Turns a user key/value into bytes (or None).
Serializer = Callable[[Any], bytes | bytearray | memoryview | None]

_MAX_INT32 = 2**31 - 1

_ACKS = {"all": -1, "-1": -1, -1: -1, "1": 1, 1: 1, "0": 0, 0: 0}
_CODECS = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def _acks(value: Any) -> str | None:
    if isinstance(value, bool) or value not in _ACKS:
        return "must be 'all', -1, 0 or 1"
    return None


def _compression(value: Any) -> str | None:
    if value is None or isinstance(value, Compression):
        return None
    if isinstance(value, str) and value.lower() in _CODECS:
        return None
    return "must be one of 'none', 'gzip', 'snappy', 'lz4', 'zstd' (or a Compression)"


def _partitioner(value: Any) -> str | None:
    if value in ("default", "round_robin") or callable(value):
        return None
    return "must be 'default', 'round_robin' or a callable (topic, key, partition_count) -> int"


@dataclass(frozen=True, kw_only=True)
class ProducerConfig(Options):
    """Options of :class:`aiokafka_lite.Producer`."""

    # -- delivery guarantees ----------------------------------------------------------
    acks: int | str = option(
        "all",
        "Acknowledgements the leader waits for: 'all'/-1 (every in-sync replica), 1 (leader only) "
        "or 0 (none: fire and forget, offsets unknown).",
        _acks,
    )
    enable_idempotence: bool | None = option(
        None,
        "Exactly-once per partition: the broker drops retried duplicates and rejects gaps, using a "
        "producer id and per-partition sequence numbers. None (default) means on, unless acks, retries "
        "or max_in_flight_requests_per_connection conflict with it, in which case it is quietly off "
        "(as in Java); True with a conflicting option is a ConfigError.",
    )
    retries: int = option(
        _MAX_INT32,
        "How many times a failed batch is retried (retriable errors only); delivery_timeout_ms "
        "usually ends retrying first.",
        between(0, _MAX_INT32),
    )
    retry_backoff_ms: float = option(
        100, "Wait before the first retry of a batch (doubles per attempt, 20% jitter).", at_least(0)
    )
    retry_backoff_max_ms: float = option(1000, "Upper bound of the retry backoff.", at_least(0))
    delivery_timeout_ms: float = option(
        120000,
        "Upper bound on the time from send/enqueue to success or failure of a record, retries "
        "included. Must be >= linger_ms + request_timeout_ms.",
        at_least(1),
    )
    request_timeout_ms: float = option(
        30000,
        "How long the broker may take to answer a produce request (also sent to the broker as the "
        "replication wait) before the request is failed and its batches retried.",
        at_least(1),
    )
    # -- batching ---------------------------------------------------------------------
    linger_ms: float = option(
        5,
        "How long a batch waits for more records before it is sent when it is not full; 0 sends as "
        "soon as the connection allows.",
        at_least(0),
    )
    batch_size: int = option(
        16384,
        "Target size in bytes of a per-partition batch (compressed size estimate when compressing). "
        "A record larger than this gets a batch of its own.",
        between(1, _MAX_INT32),
    )
    max_request_size: int = option(
        1048576,
        "Largest produce request, and so the largest record, this producer sends. Bigger records "
        "fail at once with MessageSizeTooLargeError.",
        between(1, _MAX_INT32),
    )
    max_in_flight_requests_per_connection: int = option(
        5,
        "Produce requests sent to one broker without a response yet. Ordering per partition survives "
        "retries with up to 5 when idempotence is on; with idempotence off, use 1 for strict ordering.",
        between(1, 1_000_000),
    )
    compression: str | Compression | None = option(
        "none", "Batch compression: 'none', 'gzip', 'snappy', 'lz4' or 'zstd'.", _compression
    )
    compression_level: int | None = option(
        None,
        "Codec level (gzip 1-9, lz4 1-17, zstd -131072..22); None uses the codec's default.",
    )
    # -- memory -----------------------------------------------------------------------
    buffer_memory: int = option(
        33554432,
        "Bytes of records buffered before send()/enqueue() block (counted per open batch, as in Java).",
        at_least(1),
    )
    max_block_ms: float = option(
        60000,
        "How long send()/enqueue() may wait for buffer space or for metadata of an unknown topic "
        "before raising KafkaTimeoutError / UnknownTopicOrPartitionError.",
        at_least(0),
    )
    # -- partitioning -----------------------------------------------------------------
    partitioner: Any = option(
        "default",
        "'default' (murmur2 of the key, Java-compatible; uniform sticky for keyless records), "
        "'round_robin', or a callable (topic, serialized_key, partition_count) -> partition.",
        _partitioner,
        type_check=False,
    )
    partitioner_ignore_keys: bool = option(
        False, "Default partitioner: treat keyed records like keyless ones (uniform sticky)."
    )
    partitioner_adaptive_partitioning_enable: bool = option(
        True,
        "Default partitioner: pick the next sticky partition weighted towards shorter queues, so "
        "slower brokers get less keyless data.",
    )
    partitioner_availability_timeout_ms: float = option(
        0,
        "Default partitioner with adaptive partitioning: a partition whose leader had data ready but "
        "could not be sent to for this long is skipped when choosing the next sticky partition; 0 "
        "disables the check.",
        at_least(0),
    )
    # -- serialization ----------------------------------------------------------------
    key_serializer: Serializer | ContextSerializer | None = option(
        None,
        "Turns every key into bytes: a callable f(key), or an object with serialize(key, ctx) that "
        "sees the topic, the field and the headers (aiokafka_lite.core.serialization); without it "
        "keys must be bytes-like or None.",
        type_check=False,
    )
    value_serializer: Serializer | ContextSerializer | None = option(
        None,
        "Turns every value into bytes: a callable f(value), or an object with serialize(value, ctx) "
        "(as key_serializer; it may append headers); without it values must be bytes-like or None.",
        type_check=False,
    )
    # -- transactions (see produce/transaction.py) ------------------------------------
    transactional_id: str | None = option(
        None,
        "Makes the producer transactional: records are sent between begin_transaction() and "
        "commit_transaction()/abort_transaction(). Starting the producer fences (and aborts the open "
        "transaction of) any older instance with the same id. Requires idempotence (acks='all').",
        lambda v: (
            "must be a non-empty string or None"
            if v is not None and (not isinstance(v, str) or not v)
            else None
        ),
    )
    transaction_timeout_ms: int = option(
        60000,
        "How long the transaction coordinator lets a transaction stay open before aborting it (and "
        "fencing this producer). Must not exceed the broker's transaction.max.timeout.ms.",
        between(1, _MAX_INT32),
    )

    # -- observability (see aiokafka_lite.integrations.otel) ---------------------------------------
    tracer_provider: Any = option(
        None,
        "An OpenTelemetry TracerProvider: trace this producer's sends with it (a span per record, "
        "its context in the record's headers). None: traced only while aiokafka_lite.integrations.otel.instrument() "
        "is in effect.",
        type_check=False,
    )

    enable_metrics_push: bool = option(
        True,
        "Push this client's metrics to the cluster when an operator has set a client-metrics "
        "subscription (KIP-714; GetTelemetrySubscriptions/PushTelemetry, OTLP payloads), as Java's "
        "enable.metrics.push. Brokers without the APIs or without a subscription get nothing.",
    )

    def validate(self) -> None:
        for name in ("key_serializer", "value_serializer"):
            value = getattr(self, name)
            if value is not None and not callable(value) and context_serializer(value) is None:
                raise ConfigError(
                    f"{name}: must be callable, or an object with a serialize(data, ctx) method (got {value!r})"
                )
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ConfigError("retry_backoff_max_ms must be >= retry_backoff_ms")
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ConfigError(
                f"delivery_timeout_ms ({self.delivery_timeout_ms}) must be >= linger_ms + request_timeout_ms "
                f"({self.linger_ms + self.request_timeout_ms})"
            )
        try:
            validate_level(self.codec, self.compression_level)
        except ConfigError as exc:
            raise ConfigError(f"compression_level: {exc}") from None
        if self.enable_idempotence:
            if self.acks_value != -1:
                raise ConfigError("enable_idempotence requires acks='all'")
            if self.max_in_flight_requests_per_connection > 5:
                raise ConfigError("enable_idempotence requires max_in_flight_requests_per_connection <= 5")
            if self.retries == 0:
                raise ConfigError("enable_idempotence requires retries > 0")

    # -- derived values ---------------------------------------------------------------
    @property
    def acks_value(self) -> int:
        """acks as the protocol integer (-1, 0 or 1)."""
        return _ACKS[self.acks]

    @property
    def codec(self) -> Compression:
        value = self.compression
        if value is None:
            return Compression.NONE
        if isinstance(value, Compression):
            return value
        return _CODECS[value.lower()]

    @property
    def idempotent(self) -> bool:
        """Whether idempotence is in effect (explicit, or the default without conflicts)."""
        if self.enable_idempotence is not None:
            return self.enable_idempotence
        return self.acks_value == -1 and self.max_in_flight_requests_per_connection <= 5 and self.retries > 0
