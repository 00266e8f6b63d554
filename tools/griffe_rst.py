"""A griffe extension for the API reference: the reStructuredText habits of our docstrings,
rendered as Markdown.

The docstrings are written to read well as plain text and in ``help()``: literal blocks
introduced by ``::`` and Sphinx roles such as ``:class:`ProducerConfig```. mkdocstrings
renders docstrings as Markdown, where those show up verbatim; this extension rewrites
them while the API is loaded (``mkdocs.yml``: ``extensions: [tools/griffe_rst.py]``):

* ``Text::`` + an indented block -> ``Text:`` + a fenced code block;
* ``:role:`~pkg.mod.Name``` -> ```Name```, ``:role:`target``` -> ```target```.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(~?)([^`]+)`")
_SHELL_START = ("python ", "pip ", "$ ", "pytest ", "aiokafka-lite ", "bash ")


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    target = target.strip()
    if "<" in target and target.endswith(">"):  # :class:`title <target>`
        target = target.split("<", 1)[0].strip()
    elif tilde:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def rst_to_markdown(text: str) -> str:
    """Convert literal blocks and roles; everything else is left as it is."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            base = _indent(line)
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block: list[str] = []
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > base):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            if block:
                lead = line.rstrip()[:-2].rstrip()
                if lead.strip():
                    out.append(_ROLE.sub(_role, lead) + ":")
                code = textwrap.dedent("\n".join(block)).splitlines()
                lang = "bash" if code and code[0].lstrip().startswith(_SHELL_START) else "python"
                pad = " " * base
                out += ["", f"{pad}```{lang}", *(pad + c if c else c for c in code), f"{pad}```", ""]
                i = j
                continue
        out.append(_ROLE.sub(_role, line))
        i += 1
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    """Rewrites every docstring as it is loaded."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
