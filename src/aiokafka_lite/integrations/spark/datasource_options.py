"""Option parsing for the Spark data source: pure logic, no Spark, no I/O.

Spark hands a data source its options as strings (case-insensitive names). They are
parsed once, on the driver, into frozen dataclasses of plain values that pickle to the
Python workers; the workers build clients from them (an ``SSLContext`` is created in
the worker, from file paths, because it cannot be pickled).

Two kinds of options:

* source/sink options, named as in Spark's built-in Kafka source (``subscribe``,
  ``startingOffsets``, ``topic``...);
* ``kafka.``-prefixed client settings, named as in the Java client
  (``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ``kafka.fetch.max.bytes``,
  ``kafka.acks``...). A name maps to our option of the same name with ``.`` -> ``_``
  (``kafka.request.timeout.ms`` -> ``request_timeout_ms``), with a few Java aliases
  (``compression.type``, ``sasl.jaas.config``, ``ssl.*.location``). Unknown names are a
  ``ConfigError`` rather than silently ignored.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiokafka_lite.consume.consumer_config import ConsumerConfig
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.integrations.spark.offset_ranges import EARLIEST, LATEST, OffsetSpec, parse_partition_json
from aiokafka_lite.net.client_config import ClientConfig
from aiokafka_lite.produce.producer_config import ProducerConfig

__all__ = [
    "KafkaSettings",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
    "parse_sink_options",
    "parse_source_options",
]

# Options of the source/sink themselves (lower case: Spark's option maps are case-insensitive).
_SOURCE_KEYS = {
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "maxrecordsperpartition",
    "minpartitions",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "failondataloss",
    "kafkaconsumer.polltimeoutms",
    "isolation.level",
    "includeheaders",
}
_SINK_KEYS = {"topic"}
_COMMON_KEYS = {"bootstrap.servers", "path", "paths"}
# Options Spark itself adds or consumes (streaming queries); not ours, ignored.
_SPARK_KEYS = {"checkpointlocation", "queryname"}

# Client settings that cannot be given as strings, or are replaced by the ssl.* aliases.
_CLIENT_EXCLUDED = {"ssl_context", "sasl_oauth_token_provider", "max_versions"}
# Consumer settings the source owns: positions come from the offsets options, no group.
_CONSUMER_FORBIDDEN = {
    "group_id": "the source reads exact offset ranges without a consumer group",
    "group_instance_id": "the source reads without a consumer group",
    "auto_offset_reset": "use startingOffsets / failOnDataLoss",
    "enable_auto_commit": "the source never commits offsets (Spark checkpoints track progress)",
    "key_deserializer": "key and value are always returned as binary",
    "value_deserializer": "key and value are always returned as binary",
}
_CONSUMER_ALLOWED = {
    "fetch_min_bytes",
    "fetch_max_bytes",
    "max_partition_fetch_bytes",
    "fetch_max_wait_ms",
    "max_buffered_bytes",
    "max_poll_records",
    "check_crcs",
    "isolation_level",
    "enable_fetch_sessions",
    "client_rack",
    "default_api_timeout_ms",
}
_PRODUCER_FORBIDDEN = {
    "key_serializer": "cast key/value columns to binary (or string) in Spark instead",
    "value_serializer": "cast key/value columns to binary (or string) in Spark instead",
}
# Java names that differ from ours.
_ALIASES = {
    "compression_type": "compression",
    "client_dns_lookup": None,  # accepted and ignored: we resolve every address of a name
}
_SSL_KEYS = {
    "ssl_ca_location": "cafile",
    "ssl_truststore_location": "cafile",
    "ssl_certificate_location": "certfile",
    "ssl_keystore_location": "certfile",
    "ssl_key_location": "keyfile",
    "ssl_key_password": "password",
    "ssl_keystore_password": "password",
}


def _norm(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise ConfigError(f"option names must be strings, got {key!r}")
        out[key.lower()] = value if isinstance(value, str) else str(value)
    return out


def _unknown(key: str, known: set[str]) -> ConfigError:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown option {key!r}{hint}")


def _bool(key: str, text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ConfigError(f"{key}: expected true or false, got {text!r}")


def _int(key: str, text: str, minimum: int | None = None) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {text!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{key}: must be >= {minimum}, got {value}")
    return value


# Spark's time strings (JavaUtils.timeStringAsMs): a number and an optional unit, ms default.
_TIME_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_TIME_STRING = re.compile(r"(-?[0-9]+)([a-z]+)?")


def _duration_ms(key: str, text: str) -> int:
    match = _TIME_STRING.fullmatch(text.strip().lower())
    if match is None or (match.group(2) and match.group(2) not in _TIME_UNITS_MS):
        raise ConfigError(f"{key}: expected a duration such as 15m, 30s or 500ms, got {text!r}")
    value = int(int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"])
    if value < 0:
        raise ConfigError(f"{key}: must not be negative, got {text!r}")
    return value


def _coerce(key: str, text: str, tp: Any) -> Any:
    """A string option value as the type of the config field (``tp`` is its annotation)."""
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin is Literal:
        return text.strip().upper() if all(isinstance(a, str) and a.isupper() for a in args) else text
    if args and type(None) in args:
        if text.strip().lower() in ("", "none", "null"):
            return None
        rest = [a for a in args if a is not type(None)]
        return _coerce(key, text, rest[0] if len(rest) == 1 else typing.Union[tuple(rest)])  # noqa: UP007
    if tp is bool:
        return _bool(key, text)
    if tp is int:
        return _int(key, text)
    if tp is float:
        try:
            return float(text.strip())
        except ValueError:
            raise ConfigError(f"{key}: expected a number, got {text!r}") from None
    if tp is str:
        return text
    if args:  # a union such as int | str (acks) or str | Compression: first type that parses
        for arg in args:
            if arg in (int, float, str, bool):
                try:
                    return _coerce(key, text, arg)
                except ConfigError:
                    continue
        return text
    if tp is Any:
        return text
    raise ConfigError(f"{key}: cannot be set from a string option")


_JAAS_ARG = re.compile(r"""(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^\s;]+)""")


def _parse_jaas(key: str, text: str) -> dict[str, str]:
    """``username``/``password`` out of a Java JAAS line (PLAIN and SCRAM login modules)."""
    body = text.strip().rstrip(";")
    _, sep, rest = body.partition(" required")
    args = rest if sep else body
    out: dict[str, str] = {}
    for name, raw in _JAAS_ARG.findall(args):
        value = shlex.split(raw)[0] if raw[:1] in "\"'" else raw
        out[name.lower()] = value
    if "username" not in out or "password" not in out:
        raise ConfigError(
            f"{key}: username and password are required in the JAAS configuration "
            '(<LoginModule> required username="..." password="...";)'
        )
    return {"sasl_plain_username": out["username"], "sasl_plain_password": out["password"]}


@dataclass(frozen=True)
class KafkaSettings:
    """Where and how to connect: bootstrap servers, client settings, TLS file paths."""

    bootstrap: str
    client: Mapping[str, Any] = field(default_factory=dict)
    ssl: Mapping[str, Any] = field(default_factory=dict)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword options for ``Client``/``Consumer``/``Producer`` (builds the TLS context)."""
        out = dict(self.client)
        if self.ssl or out.get("security_protocol") in ("SSL", "SASL_SSL"):
            from aiokafka_lite.net.security import create_ssl_context

            out["ssl_context"] = create_ssl_context(**self.ssl)
        return out

    def __repr__(self) -> str:  # no passwords in logs and Spark plans
        return f"KafkaSettings(bootstrap={self.bootstrap!r}, client={sorted(self.client)}, ssl={sorted(self.ssl)})"


def _kafka_settings(
    opts: dict[str, str], role: str, extra_cls: type[ConsumerConfig] | type[ProducerConfig]
) -> tuple[KafkaSettings, dict[str, Any]]:
    """Split ``kafka.*`` options into client settings and consumer/producer settings."""
    bootstrap = opts.get("bootstrap.servers") or opts.get("kafka.bootstrap.servers")
    if not bootstrap or not bootstrap.strip():
        raise ConfigError("option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required")
    client_hints = typing.get_type_hints(ClientConfig)
    extra_hints = typing.get_type_hints(extra_cls)
    client_names = set(ClientConfig.option_names()) - _CLIENT_EXCLUDED
    if role == "source":
        extra_names = set(_CONSUMER_ALLOWED)
        forbidden = _CONSUMER_FORBIDDEN
    else:
        extra_names = set(ProducerConfig.option_names()) - set(_PRODUCER_FORBIDDEN)
        forbidden = _PRODUCER_FORBIDDEN
    client: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    ssl: dict[str, Any] = {}
    truststore_type = opts.get("kafka.ssl.truststore.type", "PEM").upper()
    keystore_type = opts.get("kafka.ssl.keystore.type", "PEM").upper()
    for key, text in opts.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka.") :].replace(".", "_")
        if name in _ALIASES:
            alias = _ALIASES[name]
            if alias is None:
                continue
            name = alias
        if name in forbidden:
            raise ConfigError(f"option {key!r} is not supported: {forbidden[name]}")
        if name in ("ssl_truststore_type", "ssl_keystore_type"):
            continue
        if name in _SSL_KEYS:
            if name.startswith("ssl_truststore") and truststore_type != "PEM":
                raise ConfigError(f"{key}: only PEM files are supported (kafka.ssl.truststore.type=PEM)")
            if name.startswith("ssl_keystore") and keystore_type != "PEM":
                raise ConfigError(f"{key}: only PEM files are supported (kafka.ssl.keystore.type=PEM)")
            ssl[_SSL_KEYS[name]] = text
            continue
        if name == "ssl_endpoint_identification_algorithm":
            ssl["check_hostname"] = bool(text.strip())
            continue
        if name == "sasl_jaas_config":
            client.update(_parse_jaas(key, text))
            continue
        matched = False
        if name in extra_names:
            extra[name] = _coerce(key, text, extra_hints[name])
            matched = True
        if name in client_names:
            client[name] = _coerce(key, text, client_hints[name])
            matched = True
        if not matched:
            known = {"kafka." + n.replace("_", ".") for n in client_names | extra_names}
            raise _unknown(key, known)
    if "isolation.level" in opts:
        extra["isolation_level"] = opts["isolation.level"].strip()
    # Validate now, on the driver, so bad settings fail the query before any task runs.
    ClientConfig.from_options(**client)
    extra_cls.from_options(**extra)
    return KafkaSettings(bootstrap.strip(), client, ssl), extra


@dataclass(frozen=True)
class Subscription:
    """What to read: topics, a topic regex, or explicit partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    @property
    def kind(self) -> str:
        if self.pattern is not None:
            return "subscribePattern"
        return "assign" if self.partitions else "subscribe"

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        if self.partitions:
            return any(tp.topic == topic for tp in self.partitions)
        return topic in self.topics


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise ConfigError(
            "exactly one of 'subscribe', 'subscribePattern' or 'assign' is required"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind = given[0]
    text = opts[kind]
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise ConfigError("subscribe: expected a comma-separated list of topics")
        return Subscription(topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(text)
        except re.error as exc:
            raise ConfigError(f"subscribePattern: invalid regular expression {text!r}: {exc}") from None
        return Subscription(pattern=text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"assign: invalid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f'assign: expected a JSON object like {{"topic": [0, 1]}}, got {text!r}')
    tps: list[TopicPartition] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise ConfigError(f"assign: partitions of {topic!r} must be a list of non-negative integers")
        tps.extend(TopicPartition(topic, p) for p in parts)
    if not tps:
        raise ConfigError("assign: no partitions given")
    return Subscription(partitions=tuple(sorted(set(tps))))


def _offset_spec(opts: dict[str, str], which: str, default: int, streaming: bool) -> OffsetSpec:
    """startingOffsets/endingOffsets with their timestamp variants."""
    key = f"{which}offsets"
    label = f"{which}Offsets"
    offsets: dict[TopicPartition, int] = {}
    text = opts.get(key)
    if text is not None:
        low = text.strip().lower()
        if low == "earliest":
            default = EARLIEST
        elif low == "latest":
            default = LATEST
        else:
            offsets = parse_partition_json(text, label)
            for tp, off in offsets.items():
                if off < EARLIEST:
                    raise ConfigError(f"{label}: invalid offset {off} for {tp.topic}-{tp.partition}")
    if which == "starting" and not streaming and (default == LATEST or LATEST in offsets.values()):
        raise ConfigError("startingOffsets: 'latest' (-1) is not allowed in batch queries")
    if which == "ending" and (default == EARLIEST or EARLIEST in offsets.values()):
        raise ConfigError("endingOffsets: 'earliest' (-2) is not allowed")
    timestamp = None
    ts_text = opts.get(f"{which}timestamp")
    if ts_text is not None:
        timestamp = _int(f"{which}Timestamp", ts_text, minimum=0)
    timestamps: dict[TopicPartition, int] = {}
    by_ts = opts.get(f"{which}offsetsbytimestamp")
    if by_ts is not None:
        timestamps = parse_partition_json(by_ts, f"{which}OffsetsByTimestamp")
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ConfigError(
                    f"{which}OffsetsByTimestamp: negative timestamp for {tp.topic}-{tp.partition}"
                )
    fallback = opts.get(f"{which}offsetsbytimestampstrategy", "error").strip().lower()
    if fallback not in ("error", "latest"):
        raise ConfigError(
            f"{which}OffsetsByTimestampStrategy: expected 'error' or 'latest', got {fallback!r}"
        )
    return OffsetSpec(default, offsets, timestamp, timestamps, fallback)


@dataclass(frozen=True)
class SourceOptions:
    """Everything the reader needs, as plain picklable data."""

    kafka: KafkaSettings
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None = None  # batch only
    consumer: Mapping[str, Any] = field(default_factory=dict)
    max_records_per_partition: int | None = None
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120000

    @property
    def read_committed(self) -> bool:
        return self.consumer.get("isolation_level") == "read_committed"

    @property
    def timeout_ms(self) -> float:
        """Timeout of driver-side lookups (metadata, ListOffsets)."""
        return float(self.consumer.get("default_api_timeout_ms", 60000))


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate and parse reader options; ``ConfigError`` names the bad option."""
    opts = _norm(options)
    for key in opts:
        if not key.startswith("kafka.") and key not in _SOURCE_KEYS | _COMMON_KEYS | _SPARK_KEYS:
            raise _unknown(key, _SOURCE_KEYS | _COMMON_KEYS)
    if "path" in opts or "paths" in opts:
        raise ConfigError("the aiokafka_lite source takes no path: use load() without arguments")
    if "includeheaders" in opts and not _bool("includeHeaders", opts["includeheaders"]):
        raise ConfigError("includeHeaders=false is not supported: the headers column is always present")
    kafka, consumer = _kafka_settings(opts, "source", ConsumerConfig)
    subscription = _subscription(opts)
    starting = _offset_spec(opts, "starting", LATEST if streaming else EARLIEST, streaming)
    ending: OffsetSpec | None = None
    if streaming:
        for key in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if key in opts:
                raise ConfigError(f"option {key!r} is for batch queries only")
    else:
        ending = _offset_spec(opts, "ending", LATEST, streaming)
    max_records = opts.get("maxrecordsperpartition")
    min_parts = opts.get("minpartitions")
    max_trigger = opts.get("maxoffsetspertrigger")
    min_trigger = opts.get("minoffsetspertrigger")
    max_per_trigger = _int("maxOffsetsPerTrigger", max_trigger, 1) if max_trigger else None
    min_per_trigger = _int("minOffsetsPerTrigger", min_trigger, 1) if min_trigger else None
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise ConfigError(
            f"minOffsetsPerTrigger ({min_per_trigger}) must not exceed maxOffsetsPerTrigger ({max_per_trigger})"
        )
    return SourceOptions(
        kafka=kafka,
        subscription=subscription,
        starting=starting,
        ending=ending,
        consumer=consumer,
        max_records_per_partition=_int("maxRecordsPerPartition", max_records, 1) if max_records else None,
        min_partitions=_int("minPartitions", min_parts, 1) if min_parts else None,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms("maxTriggerDelay", opts.get("maxtriggerdelay", "15m")),
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        poll_timeout_ms=_int(
            "kafkaConsumer.pollTimeoutMs", opts.get("kafkaconsumer.polltimeoutms", "120000"), 1
        ),
    )


@dataclass(frozen=True)
class SinkOptions:
    """Everything the writer needs, as plain picklable data."""

    kafka: KafkaSettings
    topic: str | None = None
    producer: Mapping[str, Any] = field(default_factory=dict)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate and parse writer options. Idempotence is on unless ``kafka.enable.idempotence`` says otherwise."""
    opts = _norm(options)
    for key in opts:
        if not key.startswith("kafka.") and key not in _SINK_KEYS | _COMMON_KEYS | _SPARK_KEYS:
            raise _unknown(key, _SINK_KEYS | _COMMON_KEYS)
    if "path" in opts or "paths" in opts:
        raise ConfigError("the aiokafka_lite sink takes no path: use save() without arguments")
    kafka, producer = _kafka_settings(opts, "sink", ProducerConfig)
    producer.setdefault("enable_idempotence", True)
    ProducerConfig.from_options(**producer)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise ConfigError("topic: must not be empty")
    return SinkOptions(kafka, topic.strip() if topic else None, producer)
