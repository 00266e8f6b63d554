"""Subscription regular expressions (``SubscribedTopicRegex``), which Kafka evaluates with
RE2/J, checked and run with Python's ``re``.

The common subset (literals, classes, ``. * + ? {m,n}``, alternation, groups, anchors,
``\\d \\w \\s``, non-greedy quantifiers, ``(?i)`` flags, ``(?P<name>...)``) means the same in
both. RE2/J spellings Python lacks are translated: ``\\Q...\\E`` quoting, ``\\z``, and the
Unicode classes ``\\pL \\pN \\p{L} \\p{N}`` (and their ``\\P`` negations; other Unicode
classes and scripts are refused). Constructs RE2/J refuses and Python accepts are refused
too, so a pattern valid on the embedded broker is valid on Kafka: lookarounds,
backreferences, atomic groups, possessive quantifiers and conditionals. A topic matches
when the whole name matches (``Matcher.matches()``), never a part of it.
"""

from __future__ import annotations

import functools
import re

__all__ = ["RegexError", "compile_topic_regex", "translate"]

_UNSUPPORTED = [
    (re.compile(r"\(\?<?[=!]"), "lookaround assertions are not supported"),
    (re.compile(r"\(\?>"), "atomic groups are not supported"),
    (re.compile(r"\(\?\("), "conditional groups are not supported"),
    (re.compile(r"\(\?P[=>]"), "backreferences are not supported"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]"), "backreferences are not supported"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\k<"), "backreferences are not supported"),
    (re.compile(r"(?:^|[^\\])(?:\\\\)*[*+?}]\+"), "possessive quantifiers are not supported"),
]

# Unicode general categories ``re`` can express: letters and decimal digits.
_UNICODE_CLASSES = {"L": r"[^\W\d_]", "N": r"\d"}
_NEGATED_UNICODE_CLASSES = {"L": r"[\W\d_]", "N": r"\D"}


class RegexError(ValueError):
    """The pattern is not a valid RE2/J regular expression (as far as we can tell)."""


def translate(pattern: str) -> str:
    """The pattern in Python's syntax (RE2/J-only escapes rewritten)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q" and not in_class:
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if nxt == "z" and not in_class:
                out.append(r"\Z")
                i += 2
                continue
            if nxt in "pP":
                name, width = _unicode_class_name(pattern, i + 2)
                table = _UNICODE_CLASSES if nxt == "p" else _NEGATED_UNICODE_CLASSES
                if name not in table:
                    raise RegexError(f"unsupported Unicode class \\{nxt}{pattern[i + 2 : i + 2 + width]}")
                if in_class:
                    raise RegexError("Unicode classes inside [...] are not supported")
                out.append(table[name])
                i += 2 + width
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
            out.append(ch)
            i += 1
            # A ']' right after '[' or '[^' is a literal.
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append(r"\]")
                i += 1
            continue
        if ch == "]" and in_class:
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


def _unicode_class_name(pattern: str, start: int) -> tuple[str, int]:
    if start < len(pattern) and pattern[start] == "{":
        end = pattern.find("}", start)
        if end < 0:
            raise RegexError("missing closing }")
        return pattern[start + 1 : end], end - start + 1
    return pattern[start : start + 1], 1


@functools.lru_cache(maxsize=256)
def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """The compiled pattern, or ``RegexError`` saying why RE2/J would refuse it."""
    translated = translate(pattern)
    for bad, why in _UNSUPPORTED:
        if bad.search(translated):
            raise RegexError(why)
    try:
        return re.compile(translated)
    except re.error as e:
        raise RegexError(str(e)) from None
