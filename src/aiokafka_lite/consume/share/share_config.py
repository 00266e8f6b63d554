"""Share consumer options (KIP-932), one declaration per option.

Defaults follow the Java ``KafkaShareConsumer``. Where a share group behaves is mostly
the group's business, set on the broker as group configs through the admin client
(``share.auto.offset.reset``, ``share.record.lock.duration.ms``,
``share.delivery.count.limit``, ``share.isolation.level``); the options here are the
client's side: how it fetches, acknowledges and heartbeats. Network options
(timeouts, security, client id...) belong to ``aiokafka_lite.net.ClientConfig`` and are
passed through by ``ShareConsumer`` when it creates its own client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.options import Options, at_least, between, one_of, option
from aiokafka_lite.core.serialization import Deserializer as ContextDeserializer
from aiokafka_lite.core.serialization import context_deserializer

__all__ = ["ShareConsumerConfig"]

Deserializer = Callable[[bytes | None], Any]

_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, kw_only=True)
class ShareConsumerConfig(Options):
    """Options of :class:`aiokafka_lite.consume.share.ShareConsumer`."""

    acknowledgement_mode: str = option(
        "implicit",
        "'implicit': the records a poll returned are accepted by the next poll (or by close). "
        "'explicit': every record is acknowledged with acknowledge(record, type) before the next "
        "poll, and poll raises IllegalStateError otherwise (Java's share.acknowledgement.mode).",
        one_of("implicit", "explicit"),
    )
    max_poll_records: int = option(
        500,
        "Default max_records of poll(); also the MaxRecords and BatchSize of each ShareFetch, so "
        "the broker acquires about what one poll hands out.",
        between(1, _MAX_INT32),
    )
    fetch_min_bytes: int = option(
        1, "Bytes the broker should accumulate before answering a ShareFetch.", between(1, _MAX_INT32)
    )
    fetch_max_bytes: int = option(
        52428800,
        "Upper bound of one ShareFetch response (the broker still returns one batch larger than this).",
        between(1, _MAX_INT32),
    )
    fetch_max_wait_ms: int = option(
        500,
        "How long the broker may wait for fetch_min_bytes before answering a ShareFetch. "
        "Acknowledgements for a broker wait behind its outstanding ShareFetch, so this also bounds "
        "how late a commit() can start.",
        between(0, _MAX_INT32),
    )
    share_acquire_mode: str = option(
        "batch_optimized",
        "How the broker acquires records (KIP-1206, ShareFetch v2): 'batch_optimized' acquires whole "
        "batches (may exceed max_poll_records), 'record_limit' never acquires more than "
        "max_poll_records. Brokers without ShareFetch v2 always behave as 'batch_optimized'.",
        one_of("batch_optimized", "record_limit"),
    )
    check_crcs: bool = option(True, "Verify the CRC of every fetched batch.")
    key_deserializer: Deserializer | ContextDeserializer | None = option(
        None,
        "Applied to every record key: a callable f(key), or an object with deserialize(key, ctx) that "
        "sees the topic, the field and the record's headers (aiokafka_lite.core.serialization). A "
        "record it fails on is rejected and poll raises RecordDeserializationError after handing out "
        "the records before it.",
        type_check=False,
    )
    value_deserializer: Deserializer | ContextDeserializer | None = option(
        None,
        "Applied to every record value (as key_deserializer, failures too).",
        type_check=False,
    )
    client_rack: str | None = option(None, "Rack id sent when joining the share group.")
    default_api_timeout_ms: int = option(
        60000, "Timeout of commit() and of close()'s acknowledgements when none is given.", at_least(1)
    )
    tracer_provider: Any = option(
        None,
        "An OpenTelemetry TracerProvider: trace this share consumer with it (poll spans per batch; "
        "ShareWorkers: process spans per record, continuing the producer's trace). None: traced only "
        "while aiokafka_lite.integrations.otel.instrument() is in effect.",
        type_check=False,
    )

    def validate(self) -> None:
        for name in ("key_deserializer", "value_deserializer"):
            value = getattr(self, name)
            if value is not None and not callable(value) and context_deserializer(value) is None:
                raise ConfigError(
                    f"{name}: must be callable, or an object with a deserialize(data, ctx) method (got {value!r})"
                )

    @property
    def explicit(self) -> bool:
        return self.acknowledgement_mode == "explicit"
