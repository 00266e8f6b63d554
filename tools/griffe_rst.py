"""A griffe extension for the API reference: the reStructuredText habits of our docstrings,
rendered as Markdown.

The docstrings are written to read well as plain text and in ``help()``: literal blocks
introduced by ``::`` and Sphinx roles such as ``:class:`ProducerConfig```. mkdocstrings
renders docstrings as Markdown, where those show up verbatim; this extension rewrites
them while the API is loaded (``mkdocs.yml``: ``extensions: [tools/griffe_rst.py]``):

* ``Text::`` + an indented block -> ``Text:`` + a fenced code block;
* ``:role:`~pkg.mod.Name``` -> ```Name```, ``:role:`target``` -> ```target```.

It also shows options declared with ``aiokafka_lite.core.options.option(default, doc, ...)`` as
what they are: an attribute whose value is the default and whose docstring is ``doc``.
Without that, the option classes' signatures showed every ``option(...)`` call in full
(validators and all), screens of source instead of a list of options.
"""

from __future__ import annotations

import ast
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


def _option_call(value: Any) -> griffe.ExprCall | None:
    if isinstance(value, griffe.ExprCall) and str(value.function) == "option":
        return value
    return None


def _unquote(text: str) -> str:
    try:
        literal = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return literal if isinstance(literal, str) else text


class RstToMarkdown(griffe.Extension):
    """Rewrites every docstring as it is loaded, and option declarations as attributes."""

    def on_attribute_instance(self, *, node: Any, attr: griffe.Attribute, agent: Any, **kwargs: Any) -> None:
        call = _option_call(attr.value)
        if call is None:
            return
        positional = [arg for arg in call.arguments if not isinstance(arg, griffe.ExprKeyword)]
        keywords = {arg.name: arg.value for arg in call.arguments if isinstance(arg, griffe.ExprKeyword)}
        if "default_factory" in keywords:
            attr.value = f"{keywords['default_factory']}()"
        elif positional:
            attr.value = positional[0]
        else:
            attr.value = None  # required: no default
        doc = positional[1] if len(positional) > 1 else keywords.get("doc")
        if doc is not None:
            attr.docstring = griffe.Docstring(
                rst_to_markdown(_unquote(str(doc))), parent=attr, lineno=attr.lineno
            )

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
