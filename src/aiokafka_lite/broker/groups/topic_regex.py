"""Subscription regular expressions (``SubscribedTopicRegex``), which Kafka evaluates with
RE2/J, checked and run with Python's ``re``.

The common subset (literals, classes, ``. * + ? {m,n}``, alternation, groups, anchors,
``\\d \\w \\s``, non-greedy quantifiers, ``(?i)`` flags, ``(?P<name>...)``) means the same in
both. Constructs RE2/J refuses and Python accepts are refused here too, so a pattern
valid on the embedded broker is valid on Kafka: lookarounds, backreferences, atomic groups,
possessive quantifiers and conditionals. A topic matches when the whole name matches
(``Matcher.matches()``), never a part of it.
"""

from __future__ import annotations

import functools
import re

__all__ = ["RegexError", "compile_topic_regex"]

_UNSUPPORTED = [
    (re.compile(r"\(\?<?[=!]"), "lookaround assertions are not supported"),
    (re.compile(r"\(\?>"), "atomic groups are not supported"),
    (re.compile(r"\(\?\("), "conditional groups are not supported"),
    (re.compile(r"\(\?P[=>]"), "backreferences are not supported"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]"), "backreferences are not supported"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\k<"), "backreferences are not supported"),
    (re.compile(r"(?:[*+?}])\+"), "possessive quantifiers are not supported"),
]


class RegexError(ValueError):
    """The pattern is not a valid RE2/J regular expression (as far as we can tell)."""


@functools.lru_cache(maxsize=256)
def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """The compiled pattern, or ``RegexError`` saying why RE2/J would refuse it."""
    for bad, why in _UNSUPPORTED:
        if bad.search(pattern):
            raise RegexError(why)
    try:
        return re.compile(pattern)
    except re.error as e:
        raise RegexError(str(e)) from None
