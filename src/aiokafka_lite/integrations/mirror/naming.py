"""Pure rules of a mirror: which topics are copied, what they are called on the target,
and which target partition a record goes to.

Nothing here does I/O, so the rules are validated (with typed errors naming the bad
input) when a ``Mirror`` is built, long before a connection is made.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.produce.partitioner import key_partition

__all__ = [
    "MirrorConfigError",
    "TopicFilter",
    "TopicRenamer",
    "check_topic_name",
    "target_partition",
]

# Kafka's topic name rules (org.apache.kafka.common.internals.Topic): legal characters,
# at most 249 of them, and not "." or "..".
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_LENGTH = 249
_PLACEHOLDER = "topic"


class MirrorConfigError(ConfigError):
    """A mirror option is invalid (a regex that does not compile, a rename template
    without ``{topic}``, conflicting options...). The message names the option."""


def check_topic_name(name: str, what: str) -> None:
    """Raise ``MirrorConfigError`` unless ``name`` is a legal Kafka topic name."""
    if not name or name in (".", ".."):
        raise MirrorConfigError(f"{what}: {name!r} is not a legal topic name")
    if len(name) > _MAX_TOPIC_LENGTH:
        raise MirrorConfigError(f"{what}: {name!r} is longer than {_MAX_TOPIC_LENGTH} characters")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise MirrorConfigError(
            f"{what}: {name!r} has characters Kafka does not allow in topic names "
            "(only ASCII letters, digits, '.', '_' and '-')"
        )


def _compile(option: str, pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str):
        raise MirrorConfigError(f"{option}: expected a regex string, got {type(pattern).__name__}")
    if not pattern:
        raise MirrorConfigError(f"{option}: the regex is empty (use '.*' to copy every topic)")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise MirrorConfigError(f"{option}: {pattern!r} is not a valid regular expression: {exc}") from None


@dataclass(frozen=True)
class TopicFilter:
    """Which source topics are copied: those the ``include`` regex matches in full and
    the ``exclude`` regex (if any) does not. Internal topics (``__consumer_offsets``,
    ``__transaction_state``...) are never copied."""

    include: re.Pattern[str]
    exclude: re.Pattern[str] | None = None

    @classmethod
    def of(cls, include: str | re.Pattern[str], exclude: str | re.Pattern[str] | None = None) -> TopicFilter:
        return cls(_compile("include", include), None if exclude is None else _compile("exclude", exclude))

    def matches(self, topic: str) -> bool:
        if topic.startswith("__"):
            return False
        if not self.include.fullmatch(topic):
            return False
        return self.exclude is None or not self.exclude.fullmatch(topic)


@dataclass(frozen=True)
class TopicRenamer:
    """Source topic name -> target topic name: unchanged, or ``template`` with
    ``{topic}`` replaced by the source name (``"{topic}.mirror"``, ``"dc1.{topic}"``).
    A prefix is the template ``prefix + "{topic}"``. The template must contain
    ``{topic}`` so that two source topics never land in one target topic."""

    template: str | None = None

    @classmethod
    def of(cls, rename: str | None = None, prefix: str | None = None) -> TopicRenamer:
        if rename is not None and prefix is not None:
            raise MirrorConfigError(
                "rename and prefix: give one of them (a prefix is the template 'PREFIX{topic}')"
            )
        if prefix is not None:
            if not isinstance(prefix, str) or not prefix:
                raise MirrorConfigError("prefix: must be a non-empty string")
            literal = prefix
            template = prefix.replace("{", "{{").replace("}", "}}") + "{topic}"
        elif rename is not None:
            if not isinstance(rename, str):
                raise MirrorConfigError(f"rename: expected a template string, got {type(rename).__name__}")
            literal = _check_template(rename)
            template = rename
        else:
            return cls(None)
        if literal and not _LEGAL_TOPIC.fullmatch(literal):
            raise MirrorConfigError(
                f"{'prefix' if prefix is not None else 'rename'}: {literal!r} would put characters in "
                "target topic names that Kafka does not allow (only ASCII letters, digits, '.', '_' and '-')"
            )
        return cls(template)

    def __call__(self, topic: str) -> str:
        if self.template is None:
            return topic
        name = self.template.format(topic=topic)
        check_topic_name(name, f"target name of topic {topic!r}")
        return name


def _check_template(template: str) -> str:
    """The template's literal text; raises unless ``{topic}`` is its one and only field."""
    literal: list[str] = []
    fields = 0
    try:
        for text, field, spec, conversion in string.Formatter().parse(template):
            literal.append(text)
            if field is None:
                continue
            if field != _PLACEHOLDER or spec or conversion:
                raise MirrorConfigError(
                    f"rename: {template!r} has the field {{{field}}}; the only field allowed is {{topic}}"
                )
            fields += 1
    except ValueError as exc:  # unbalanced braces
        raise MirrorConfigError(f"rename: {template!r} is not a valid template: {exc}") from None
    if fields == 0:
        raise MirrorConfigError(
            f"rename: {template!r} has no {{topic}} placeholder, so every topic would be copied into "
            "one target topic; use e.g. '{topic}.mirror' or 'dc1.{topic}'"
        )
    return "".join(literal)


def target_partition(
    key: bytes | None, source_partition: int, source_partitions: int, target_partitions: int
) -> int:
    """The target partition of a record.

    Same partition count: the source partition, so partition-based consumers see the
    same layout. Otherwise a keyed record goes where Kafka's default partitioner puts
    its key (murmur2, as the Java producer), and a keyless one to
    ``source_partition % target_partitions``; either way all records of one source
    partition with one key stay in order in one target partition."""
    if source_partitions == target_partitions:
        return source_partition
    if key is not None:
        return key_partition(key, target_partitions)
    return source_partition % target_partitions
