"""Creating the target topics: the source's partition count and its topic-level configs.

Only configs set on the source topic itself are copied (DescribeConfigs source
``DYNAMIC_TOPIC_CONFIG``): defaults and broker-wide settings belong to each cluster. A
config the target refuses (a policy, a value its version does not know) is dropped
with a warning naming it, and the topic is created with the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from aiokafka_lite.admin import (
    Admin,
    ConfigDescription,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    NewTopic,
)
from aiokafka_lite.core import errors as E

__all__ = ["TargetTopic", "copied_configs", "ensure_target_topic"]

log = logging.getLogger("aiokafka_lite.integrations.mirror")

# Refusals of one config value at creation time: try the others without it.
_CONFIG_REFUSALS = (E.InvalidConfigError, E.PolicyViolationError, E.InvalidRequestError)


@dataclass(frozen=True)
class TargetTopic:
    """A target topic as the mirror uses it."""

    name: str
    partitions: int
    created: bool
    configs: Mapping[str, str]
    refused_configs: Mapping[str, str]


def copied_configs(description: ConfigDescription) -> dict[str, str]:
    """The configs of a source topic that the target topic gets: those set on the topic
    (not defaults, not broker settings), never sensitive ones (their values are hidden)."""
    out: dict[str, str] = {}
    for name, entry in description.entries.items():
        if entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG or entry.is_sensitive or entry.value is None:
            continue
        out[name] = entry.value
    return out


async def _create(target: Admin, topic: NewTopic) -> E.KafkaError | None:
    result = (await target.create_topics([topic]))[topic.name]
    return result.error


async def ensure_target_topic(
    source: Admin,
    target: Admin,
    source_topic: str,
    target_topic: str,
    partitions: int,
    *,
    replication_factor: int = -1,
    copy_configs: bool = True,
) -> TargetTopic:
    """Create ``target_topic`` like ``source_topic`` unless it exists; returns its shape.

    An existing target topic is used as it is (its partition count may differ: then
    records are placed by key hash, see ``naming.target_partition``)."""
    existing = (await target.describe_topics([target_topic]))[target_topic]
    if existing.error is None:
        count = len(existing.partitions)
        if count != partitions:
            log.warning(
                "target topic %r exists with %d partitions, source topic %r has %d: records are placed by "
                "key hash (keyless ones by source partition modulo the count), not by source partition",
                target_topic,
                count,
                source_topic,
                partitions,
            )
        return TargetTopic(target_topic, count, False, {}, {})
    if not isinstance(existing.error, E.UnknownTopicOrPartitionError):
        raise existing.error
    configs: dict[str, str] = {}
    if copy_configs:
        resource = ConfigResource(ConfigResourceType.TOPIC, source_topic)
        described = (await source.describe_configs([resource]))[resource]
        if described.error is not None:
            raise described.error
        configs = copied_configs(described)
    refused: dict[str, str] = {}
    err = await _create(target, NewTopic(target_topic, partitions, replication_factor, configs))
    if isinstance(err, _CONFIG_REFUSALS) and configs:
        # Find the configs the target refuses, one by one (validate_only creates nothing).
        for name, value in configs.items():
            probe = NewTopic(target_topic, partitions, replication_factor, {name: value})
            result = (await target.create_topics([probe], validate_only=True))[target_topic]
            if isinstance(result.error, _CONFIG_REFUSALS):
                refused[name] = value
                log.warning(
                    "target cluster refuses config %s=%s of source topic %r (%s); creating %r without it",
                    name,
                    value,
                    source_topic,
                    result.error,
                    target_topic,
                )
        kept = {k: v for k, v in configs.items() if k not in refused}
        configs = kept
        err = await _create(target, NewTopic(target_topic, partitions, replication_factor, kept))
    if isinstance(err, E.TopicAlreadyExistsError):
        # Another mirror instance created it meanwhile.
        again = (await target.describe_topics([target_topic]))[target_topic]
        if again.error is not None:
            raise again.error
        return TargetTopic(target_topic, len(again.partitions), False, {}, {})
    if err is not None:
        raise err
    log.info(
        "created target topic %r (%d partitions%s) for source topic %r",
        target_topic,
        partitions,
        f", configs {configs}" if configs else "",
        source_topic,
    )
    return TargetTopic(target_topic, partitions, True, configs, refused)
