"""Group configs (KIP-848/932 dynamic configs on GROUP resources) as Kafka 4.4 defines them.

Every name Kafka 4.4 accepts on a GROUP resource, its default, its type, the broker config
it falls back to (its *synonym*) and its validation: the ``ConfigDef`` check (type, lower
bound) first, then the range that broker configs (``group.share.min.*``/``max.*``...) allow.
A broker override of a bound or a default is read from the cluster's extra configs, as
Kafka reads its broker configs. Pure: no I/O, the caller passes the broker's configs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "GROUP_CONFIGS",
    "GROUP_CONFIG_DEFAULTS",
    "GroupConfigDef",
    "GroupConfigEntry",
    "group_config_entries",
    "group_config_value",
    "validate_group_config",
]

TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LIST = 1, 2, 3, 7
SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 4, 5, 8


_OUT_OF_RANGE: Final = "{name} must be in the range {lo} to {hi} inclusive."


@dataclass(frozen=True, slots=True)
class BrokerRange:
    """The range the broker configs allow a group config (``GroupConfig.validate``)."""

    #: The broker config of the minimum (None: the minimum is fixed).
    min_key: str | None
    min_default: int
    max_key: str
    max_default: int
    #: Kafka's message for a value out of the range (``{name}``, ``{lo}``, ``{hi}``).
    message: str = _OUT_OF_RANGE


def _ranged(family: str, setting: str, lo: int, hi: int) -> BrokerRange:
    """The range ``group.<family>.min.<setting>`` to ``group.<family>.max.<setting>``."""
    return BrokerRange(f"group.{family}.min.{setting}", lo, f"group.{family}.max.{setting}", hi)


def _at_most(max_key: str, hi: int, message: str = _OUT_OF_RANGE) -> BrokerRange:
    """The range 0 to broker config ``max_key``."""
    return BrokerRange(None, 0, max_key, hi, message)


_NOT_ONE_OF: Final = "Invalid value {value} for configuration {name}: String must be one of: {choices}"


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    default: str
    type: int
    #: The broker config that supplies the default (Kafka's synonym).
    synonym: str
    doc: str
    #: ``ConfigDef`` lower bound of an INT ("Value must be at least N"), checked first.
    at_least: int | None = None
    #: Then the range the broker configs allow an INT.
    allowed: BrokerRange | None = None
    #: The values a STRING may take (none: any) ...
    choices: tuple[str, ...] = ()
    #: ... or the check of a STRING's value,
    check: Callable[[str], bool] | None = None
    #: and Kafka's message when it fails (``{name}``, ``{value}``, ``{choices}``).
    invalid: str = _NOT_ONE_OF


def _int(
    name: str,
    default: int,
    synonym: str,
    doc: str,
    *,
    at_least: int | None = None,
    allowed: BrokerRange | None = None,
) -> GroupConfigDef:
    return GroupConfigDef(name, str(default), TYPE_INT, synonym, doc, at_least=at_least, allowed=allowed)


# java.time.Duration.parse: PnDTnHnMn.nS (no years or months), optionally signed.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as ``java.time.Duration.parse`` reads it, in ms; None if malformed."""
    m = _DURATION.fullmatch(text)
    if m is None:
        return None
    sign, days, t_part, hours, minutes, secs, frac = m.groups()
    if days is None and t_part is None:
        return None
    if t_part is not None and hours is None and minutes is None and secs is None:
        return None  # "PT" names no time unit
    total = int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
    if secs is not None:
        ms = int(secs) * 1000 + int((frac or "0").ljust(3, "0")[:3]) * (-1 if secs.startswith("-") else 1)
        total += ms
    return -total if sign == "-" else total


def _reset_strategy_ok(value: str) -> bool:
    if value in ("earliest", "latest"):
        return True
    if value.startswith("by_duration:"):
        ms = duration_ms(value.removeprefix("by_duration:"))
        return ms is not None and ms >= 0
    return False


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        # -- consumer groups (KIP-848)
        _int(
            "consumer.session.timeout.ms",
            45000,
            "group.consumer.session.timeout.ms",
            "The timeout to detect client failures when using the consumer group protocol.",
            allowed=_ranged("consumer", "session.timeout.ms", 45000, 60000),
        ),
        _int(
            "consumer.heartbeat.interval.ms",
            5000,
            "group.consumer.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a consumer group.",
            allowed=_ranged("consumer", "heartbeat.interval.ms", 5000, 15000),
        ),
        _int(
            "consumer.assignment.interval.ms",
            1000,
            "group.consumer.assignment.interval.ms",
            "The interval between assignment computations of a consumer group.",
            at_least=0,
            allowed=_at_most("group.consumer.max.assignment.interval.ms", 15000),
        ),
        # -- share groups (KIP-932)
        _int(
            "share.session.timeout.ms",
            45000,
            "group.share.session.timeout.ms",
            "The timeout to detect client failures when using the share group protocol.",
            allowed=_ranged("share", "session.timeout.ms", 45000, 60000),
        ),
        _int(
            "share.heartbeat.interval.ms",
            5000,
            "group.share.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a share group.",
            allowed=_ranged("share", "heartbeat.interval.ms", 5000, 15000),
        ),
        _int(
            "share.record.lock.duration.ms",
            30000,
            "group.share.record.lock.duration.ms",
            "The record acquisition lock duration in milliseconds for share groups.",
            at_least=1000,
            allowed=_ranged("share", "record.lock.duration.ms", 15000, 60000),
        ),
        _int(
            "share.delivery.count.limit",
            5,
            "group.share.delivery.count.limit",
            "The maximum number of delivery attempts for a record delivered to a share group.",
            at_least=2,
            allowed=_ranged("share", "delivery.count.limit", 2, 10),
        ),
        _int(
            "share.partition.max.record.locks",
            2000,
            "group.share.partition.max.record.locks",
            "Share-group record lock limit per share-partition.",
            at_least=100,
            allowed=_ranged("share", "partition.max.record.locks", 100, 4000),
        ),
        _int(
            "share.assignment.interval.ms",
            1000,
            "group.share.assignment.interval.ms",
            "The interval between assignment computations of a share group.",
            at_least=0,
            allowed=_at_most("group.share.max.assignment.interval.ms", 15000),
        ),
        GroupConfigDef(
            "share.auto.offset.reset",
            "latest",
            TYPE_STRING,
            "share.auto.offset.reset",
            "The strategy to initialize the share-partition start offset.",
            check=_reset_strategy_ok,
            invalid=(
                "Invalid value {value} for configuration {name}: The value must be either 'earliest', "
                "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
            ),
        ),
        GroupConfigDef(
            "share.isolation.level",
            "read_uncommitted",
            TYPE_STRING,
            "share.isolation.level",
            "Controls how to read records written transactionally.",
            choices=("read_committed", "read_uncommitted"),
        ),
        GroupConfigDef(
            "share.renew.acknowledge.enable",
            "true",
            TYPE_BOOLEAN,
            "share.renew.acknowledge.enable",
            "Whether the renew acknowledge type is enabled for the share group.",
        ),
        # -- streams groups (KIP-1071)
        _int(
            "streams.session.timeout.ms",
            45000,
            "group.streams.session.timeout.ms",
            "The timeout to detect client failures when using the streams group protocol.",
            allowed=_ranged("streams", "session.timeout.ms", 45000, 60000),
        ),
        _int(
            "streams.heartbeat.interval.ms",
            5000,
            "group.streams.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a streams group.",
            allowed=_ranged("streams", "heartbeat.interval.ms", 5000, 15000),
        ),
        _int(
            "streams.num.standby.replicas",
            0,
            "group.streams.num.standby.replicas",
            "The number of standby replicas for each task.",
            at_least=0,
            allowed=_at_most(
                "group.streams.max.standby.replicas", 2, "{name} must be less than or equal to {hi}"
            ),
        ),
        _int(
            "streams.initial.rebalance.delay.ms",
            3000,
            "group.streams.initial.rebalance.delay.ms",
            "The delay before the first rebalance of a streams group.",
            at_least=0,
        ),
        GroupConfigDef(
            "streams.assignor.name",
            "sticky",
            TYPE_STRING,
            "group.streams.assignors",
            "The name of the task assignor of a streams group.",
            choices=("sticky",),
            invalid="{name} '{value}' is not a registered task assignor. Registered assignors are: [{choices}].",
        ),
        GroupConfigDef(
            "streams.rack.aware.assignment.tags",
            "",
            TYPE_LIST,
            "group.streams.rack.aware.assignment.tags",
            "The rack tags the streams task assignor spreads standby replicas over.",
        ),
        _int(
            "streams.assignment.interval.ms",
            1000,
            "group.streams.assignment.interval.ms",
            "The interval between assignment computations of a streams group.",
            at_least=0,
            allowed=_at_most("group.streams.max.assignment.interval.ms", 15000),
        ),
        # -- dead-letter queue (KIP-1191)
        GroupConfigDef(
            "errors.deadletterqueue.topic.name",
            "",
            TYPE_STRING,
            "errors.deadletterqueue.topic.name",
            "The dead-letter queue topic of the group's rejected records.",
            check=lambda value: not value.startswith("__"),
            invalid="{name}: DLQ topic name must not start with '__'",
        ),
        GroupConfigDef(
            "errors.deadletterqueue.copy.record.enable",
            "false",
            TYPE_BOOLEAN,
            "errors.deadletterqueue.copy.record.enable",
            "Whether records copied to the dead-letter queue keep their key and value.",
        ),
    )
}

#: Every group config and Kafka 4.4's default (without broker overrides).
GROUP_CONFIG_DEFAULTS: dict[str, str] = {name: d.default for name, d in GROUP_CONFIGS.items()}


def _broker_int(broker: Mapping[str, str], key: str | None, default: int) -> int:
    if key is None or key not in broker:
        return default
    try:
        return int(broker[key].strip())
    except ValueError:
        return default


def validate_group_config(
    name: str, value: str | None, broker: Mapping[str, str] | None = None
) -> str | None:
    """Why Kafka refuses ``name=value`` on a GROUP resource (INVALID_CONFIG), or None.

    ``value`` None is a DELETE, which Kafka accepts for any name. ``broker`` holds the
    broker configs that may move the bounds (``group.share.max.record.lock.duration.ms``...).
    """
    if value is None:
        return None
    d = GROUP_CONFIGS.get(name)
    if d is None:
        return f"Unknown group config name: {name}"
    broker = broker or {}
    if d.type == TYPE_INT:
        try:
            n = int(value.strip())
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type INT"
        if d.at_least is not None and n < d.at_least:
            return f"Invalid value {value} for configuration {name}: Value must be at least {d.at_least}"
        if d.allowed is not None:
            allowed = d.allowed
            lo = _broker_int(broker, allowed.min_key, allowed.min_default)
            hi = _broker_int(broker, allowed.max_key, allowed.max_default)
            if not lo <= n <= hi:
                return allowed.message.format(name=name, lo=lo, hi=hi)
    elif d.type == TYPE_BOOLEAN:
        if value.strip().lower() not in ("true", "false"):
            return (
                f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
            )
    elif not (d.check(value) if d.check is not None else not d.choices or value in d.choices):
        return d.invalid.format(name=name, value=value, choices=", ".join(d.choices))
    return None


@dataclass(frozen=True, slots=True)
class GroupConfigEntry:
    name: str
    value: str
    source: int
    type: int
    #: (name, value, source), most specific first, as Kafka lists them.
    synonyms: tuple[tuple[str, str, int], ...]
    doc: str


def group_config_value(
    name: str, group_configs: Mapping[str, str], broker: Mapping[str, str]
) -> tuple[str, int]:
    """The value of ``name`` for a group and where it comes from: the group's own config,
    else the broker's (its synonym), else Kafka's default."""
    d = GROUP_CONFIGS[name]
    if name in group_configs:
        return group_configs[name], SOURCE_GROUP
    if d.synonym in broker:
        return broker[d.synonym], SOURCE_STATIC_BROKER
    return d.default, SOURCE_DEFAULT


def group_config_entries(
    group_configs: Mapping[str, str], broker: Mapping[str, str]
) -> list[GroupConfigEntry]:
    """Every group config of one group, as DescribeConfigs on its GROUP resource lists them."""
    out = []
    for name in sorted(GROUP_CONFIGS):
        d = GROUP_CONFIGS[name]
        value, source = group_config_value(name, group_configs, broker)
        synonyms: list[tuple[str, str, int]] = []
        if source == SOURCE_GROUP:
            synonyms.append((name, value, SOURCE_GROUP))
        if d.synonym in broker:
            synonyms.append((d.synonym, broker[d.synonym], SOURCE_STATIC_BROKER))
        synonyms.append((d.synonym, d.default, SOURCE_DEFAULT))
        out.append(GroupConfigEntry(name, value, source, d.type, tuple(synonyms), d.doc))
    return out
