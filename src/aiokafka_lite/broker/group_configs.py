"""Group configs (KIP-848/932 dynamic configs on GROUP resources) as Kafka 4.4 defines them.

Every name Kafka 4.4 accepts on a GROUP resource, its default, its type, the broker config
it falls back to (its *synonym*) and its validation: the ``ConfigDef`` check (type, lower
bound) first, then the range that broker configs (``group.share.min.*``/``max.*``...) allow.
A broker override of a bound or a default is read from the cluster's extra configs, as
Kafka reads its broker configs. Pure: no I/O, the caller passes the broker's configs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    default: str
    type: int
    #: The broker config that supplies the default (Kafka's synonym).
    synonym: str
    #: ``ConfigDef`` lower bound ("Value must be at least N").
    at_least: int | None = None
    #: (broker config of the minimum, default minimum, broker config of the maximum, default maximum).
    bounds: tuple[str | None, int, str, int] | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""


def _share(name: str, default: str, type_: int, **kw: object) -> GroupConfigDef:
    return GroupConfigDef(f"share.{name}", default, type_, f"group.share.{name}", **kw)  # type: ignore[arg-type]


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            "consumer.session.timeout.ms",
            "45000",
            TYPE_INT,
            "group.consumer.session.timeout.ms",
            bounds=(
                "group.consumer.min.session.timeout.ms",
                45000,
                "group.consumer.max.session.timeout.ms",
                60000,
            ),
            doc="The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigDef(
            "consumer.heartbeat.interval.ms",
            "5000",
            TYPE_INT,
            "group.consumer.heartbeat.interval.ms",
            bounds=(
                "group.consumer.min.heartbeat.interval.ms",
                5000,
                "group.consumer.max.heartbeat.interval.ms",
                15000,
            ),
            doc="The heartbeat interval given to the members of a consumer group.",
        ),
        GroupConfigDef(
            "consumer.assignment.interval.ms",
            "1000",
            TYPE_INT,
            "group.consumer.assignment.interval.ms",
            at_least=0,
            bounds=(None, 0, "group.consumer.max.assignment.interval.ms", 15000),
            doc="The interval between assignment computations of a consumer group.",
        ),
        _share(
            "session.timeout.ms",
            "45000",
            TYPE_INT,
            bounds=("group.share.min.session.timeout.ms", 45000, "group.share.max.session.timeout.ms", 60000),
            doc="The timeout to detect client failures when using the share group protocol.",
        ),
        _share(
            "heartbeat.interval.ms",
            "5000",
            TYPE_INT,
            bounds=(
                "group.share.min.heartbeat.interval.ms",
                5000,
                "group.share.max.heartbeat.interval.ms",
                15000,
            ),
            doc="The heartbeat interval given to the members of a share group.",
        ),
        _share(
            "record.lock.duration.ms",
            "30000",
            TYPE_INT,
            at_least=1000,
            bounds=(
                "group.share.min.record.lock.duration.ms",
                15000,
                "group.share.max.record.lock.duration.ms",
                60000,
            ),
            doc="The record acquisition lock duration in milliseconds for share groups.",
        ),
        _share(
            "delivery.count.limit",
            "5",
            TYPE_INT,
            at_least=2,
            bounds=(
                "group.share.min.delivery.count.limit",
                2,
                "group.share.max.delivery.count.limit",
                10,
            ),
            doc="The maximum number of delivery attempts for a record delivered to a share group.",
        ),
        _share(
            "partition.max.record.locks",
            "2000",
            TYPE_INT,
            at_least=100,
            bounds=(
                "group.share.min.partition.max.record.locks",
                100,
                "group.share.max.partition.max.record.locks",
                4000,
            ),
            doc="Share-group record lock limit per share-partition.",
        ),
        _share(
            "assignment.interval.ms",
            "1000",
            TYPE_INT,
            at_least=0,
            bounds=(None, 0, "group.share.max.assignment.interval.ms", 15000),
            doc="The interval between assignment computations of a share group.",
        ),
        GroupConfigDef(
            "share.auto.offset.reset",
            "latest",
            TYPE_STRING,
            "share.auto.offset.reset",
            doc="The strategy to initialize the share-partition start offset.",
        ),
        GroupConfigDef(
            "share.isolation.level",
            "read_uncommitted",
            TYPE_STRING,
            "share.isolation.level",
            choices=("read_committed", "read_uncommitted"),
            doc="Controls how to read records written transactionally.",
        ),
        GroupConfigDef(
            "share.renew.acknowledge.enable",
            "true",
            TYPE_BOOLEAN,
            "share.renew.acknowledge.enable",
            doc="Whether the renew acknowledge type is enabled for the share group.",
        ),
        GroupConfigDef(
            "streams.session.timeout.ms",
            "45000",
            TYPE_INT,
            "group.streams.session.timeout.ms",
            bounds=(
                "group.streams.min.session.timeout.ms",
                45000,
                "group.streams.max.session.timeout.ms",
                60000,
            ),
            doc="The timeout to detect client failures when using the streams group protocol.",
        ),
        GroupConfigDef(
            "streams.heartbeat.interval.ms",
            "5000",
            TYPE_INT,
            "group.streams.heartbeat.interval.ms",
            bounds=(
                "group.streams.min.heartbeat.interval.ms",
                5000,
                "group.streams.max.heartbeat.interval.ms",
                15000,
            ),
            doc="The heartbeat interval given to the members of a streams group.",
        ),
        GroupConfigDef(
            "streams.num.standby.replicas",
            "0",
            TYPE_INT,
            "group.streams.num.standby.replicas",
            at_least=0,
            bounds=(None, 0, "group.streams.max.standby.replicas", 2),
            doc="The number of standby replicas for each task.",
        ),
        GroupConfigDef(
            "streams.initial.rebalance.delay.ms",
            "3000",
            TYPE_INT,
            "group.streams.initial.rebalance.delay.ms",
            at_least=0,
            doc="The delay before the first rebalance of a streams group.",
        ),
        GroupConfigDef(
            "streams.assignor.name",
            "sticky",
            TYPE_STRING,
            "group.streams.assignors",
            choices=("sticky",),
            doc="The name of the task assignor of a streams group.",
        ),
        GroupConfigDef(
            "streams.rack.aware.assignment.tags",
            "",
            TYPE_LIST,
            "group.streams.rack.aware.assignment.tags",
            doc="The rack tags the streams task assignor spreads standby replicas over.",
        ),
        GroupConfigDef(
            "streams.assignment.interval.ms",
            "1000",
            TYPE_INT,
            "group.streams.assignment.interval.ms",
            at_least=0,
            bounds=(None, 0, "group.streams.max.assignment.interval.ms", 15000),
            doc="The interval between assignment computations of a streams group.",
        ),
        GroupConfigDef(
            "errors.deadletterqueue.topic.name",
            "",
            TYPE_STRING,
            "errors.deadletterqueue.topic.name",
            doc="The dead-letter queue topic of the group's rejected records.",
        ),
        GroupConfigDef(
            "errors.deadletterqueue.copy.record.enable",
            "false",
            TYPE_BOOLEAN,
            "errors.deadletterqueue.copy.record.enable",
            doc="Whether records copied to the dead-letter queue keep their key and value.",
        ),
    )
}

#: Every group config and Kafka 4.4's default (without broker overrides).
GROUP_CONFIG_DEFAULTS: dict[str, str] = {name: d.default for name, d in GROUP_CONFIGS.items()}

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
        if d.bounds is not None:
            min_key, min_default, max_key, max_default = d.bounds
            lo = _broker_int(broker, min_key, min_default)
            hi = _broker_int(broker, max_key, max_default)
            if name == "streams.num.standby.replicas" and n > hi:
                return f"{name} must be less than or equal to {hi}"
            if not lo <= n <= hi:
                return f"{name} must be in the range {lo} to {hi} inclusive."
    elif d.type == TYPE_BOOLEAN:
        if value.strip().lower() not in ("true", "false"):
            return (
                f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
            )
    elif name == "share.auto.offset.reset":
        if not _reset_strategy_ok(value):
            return (
                f"Invalid value {value} for configuration {name}: The value must be either 'earliest', "
                "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
            )
    elif name == "streams.assignor.name":
        if value not in d.choices:
            return f"{name} '{value}' is not a registered task assignor. Registered assignors are: [sticky]."
    elif d.choices and value not in d.choices:
        return (
            f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(d.choices)}"
        )
    elif name == "errors.deadletterqueue.topic.name" and value.startswith("__"):
        return f"{name}: DLQ topic name must not start with '__'"
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
