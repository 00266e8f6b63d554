"""Generate the configuration reference from the option definitions in the code.

Every option is declared once, with ``aiokafka_lite.core.options.option(...)`` on an
``Options`` dataclass (type, default, documentation, validation). This tool renders
those declarations as markdown tables into:

* ``docs/configuration.md`` (the whole page), and
* ``README.md``, between the ``<!-- config-reference:start -->`` and
  ``<!-- config-reference:end -->`` markers.

    python tools/gen_config_reference.py          # rewrite both files
    python tools/gen_config_reference.py --check  # exit 1 if either is out of date

``tests/docs/test_config_reference.py`` runs ``--check`` logic, so CI fails when an
option changes without the reference being regenerated.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from aiokafka_lite.consume import ConsumerConfig  # noqa: E402
from aiokafka_lite.consume.share import ShareConsumerConfig  # noqa: E402
from aiokafka_lite.core.options import Options  # noqa: E402
from aiokafka_lite.net import ClientConfig  # noqa: E402
from aiokafka_lite.produce import ProducerConfig  # noqa: E402

DOCS_PAGE = ROOT / "docs" / "configuration.md"
README = ROOT / "README.md"
START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"


@dataclass(frozen=True)
class Section:
    title: str
    cls: type[Options]
    used_by: str


#: The documented classes, in reading order; any other ``Options`` subclass found in the
#: package is appended (so a new one cannot silently stay undocumented).
SECTIONS = [
    Section(
        "Producer",
        ProducerConfig,
        "`Producer(bootstrap, **options)`. A producer that creates its own client also accepts "
        "every [client option](#client).",
    ),
    Section(
        "Consumer",
        ConsumerConfig,
        "`Consumer(bootstrap, **options)`, including its consumer-group settings. A consumer "
        "that creates its own client also accepts every [client option](#client).",
    ),
    Section(
        "Share consumer",
        ShareConsumerConfig,
        "`ShareConsumer(bootstrap, group_id=..., topics=[...], **options)` (share groups, KIP-932). "
        "A share consumer that creates its own client also accepts every [client option](#client).",
    ),
    Section(
        "Client",
        ClientConfig,
        "`Client`, and through it `Producer`, `Consumer` and `Admin`: connections, metadata, security.",
    ),
]


def _all_subclasses(cls: type[Options]) -> Iterator[type[Options]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def sections() -> list[Section]:
    known = {s.cls for s in SECTIONS}
    extra = sorted(
        (
            c
            for c in set(_all_subclasses(Options))
            if c not in known and c.__module__.startswith("aiokafka_lite")
        ),
        key=lambda c: c.__qualname__,
    )
    first_line = lambda c: (c.__doc__ or c.__qualname__).strip().splitlines()[0]  # noqa: E731
    return SECTIONS + [Section(c.__qualname__, c, first_line(c)) for c in extra]


_DOC_PATH = re.compile(r"\bdocs/((?:[\w-]+/)*[\w-]+\.md)\b")


def _cell(text: str, docs_base: str = "") -> str:
    """A markdown table cell: pipes escaped, newlines folded, and a page of the docs named
    in an option's text (``docs/guide/x.md``) made a link, relative to the page at
    ``docs_base`` (``""`` for a page in docs/, ``"docs/"`` for the README)."""
    cell = " ".join(text.split()).replace("|", "\\|")
    return _DOC_PATH.sub(lambda m: f"[docs/{m.group(1)}]({docs_base}{m.group(1)})", cell)


def _code(text: str) -> str:
    """Inline code safe in a table cell on GitHub and in MkDocs alike: a pipe inside
    backticks is taken literally by one and split on by the other, so use HTML."""
    return "<code>" + html.escape(" ".join(text.split())).replace("|", "&#124;") + "</code>"


def _short_type(text: str) -> str:
    """``aiokafka_lite.wire.compression.Compression | None`` -> ``Compression | None``."""
    return re.sub(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Za-z_]\w*)", r"\1", text)


def _option_name(name: str, site: bool) -> str:
    """The option's name cell. On the site (``site=True``) the name may break after an
    underscore (``<wbr>``) and nowhere else, so a narrow column wraps
    ``partitioner_adaptive_partitioning_enable`` between its words, never inside one."""
    if not site:
        return f"`{name}`"
    return "<code>" + "_<wbr>".join(html.escape(part) for part in name.split("_")) + "</code>"


def table(cls: type[Options], docs_base: str = "", *, site: bool = True) -> str:
    rows = ["| option | type | default | description |", "| --- | --- | --- | --- |"]
    for opt in cls.describe():
        name = _option_name(opt.name, site)
        kind, default = _code(_short_type(opt.type)), _code(opt.default)
        rows.append(f"| {name} | {kind} | {default} | {_cell(opt.doc, docs_base)} |")
    return "\n".join(rows)


def _body(heading: str) -> str:
    parts = []
    for s in sections():
        count = len(s.cls.describe())
        where = f"`{s.cls.__module__}.{s.cls.__qualname__}`"
        parts.append(
            f"{heading} {s.title}\n\n{s.used_by}\n\n{count} options, defined in {where}.\n\n{table(s.cls)}\n"
        )
    return "\n".join(parts)


GENERATED = "<!-- generated by tools/gen_config_reference.py from the option definitions: do not edit -->"


def docs_page() -> str:
    return (
        f"{GENERATED}\n\n"
        "# Configuration reference\n\n"
        "Every option below is declared once in the code, with its type, default and "
        "documentation, and validated when the object is created: an unknown name or a bad "
        "value raises `ConfigError` naming the option (with a suggestion for misspelt names). "
        "Names and defaults follow the Java client, with dots written as underscores "
        "(`linger.ms` is `linger_ms`); the command-line tool accepts both spellings with `-X`.\n\n"
        "```python\n"
        "from aiokafka_lite import Producer\n\n"
        'Producer(bootstrap, acks="all", linger_ms=10, compression="zstd", client_id="billing")\n'
        "```\n\n" + _body("##")
    )


def readme_section() -> str:
    """The README's copy: the same tables, folded so the README stays readable."""
    parts = [
        GENERATED,
        "",
        "Options are keyword arguments, named and defaulted as in the Java client (`linger.ms` is "
        "`linger_ms`). Each table is generated from the option definitions in the code; see also "
        "[docs/configuration.md](docs/configuration.md).",
        "",
    ]
    for s in sections():
        parts += [
            f"<details><summary><b>{s.title}</b>: {len(s.cls.describe())} options</summary>",
            "",
            s.used_by,
            "",
            table(s.cls, "docs/", site=False),
            "",
            "</details>",
            "",
        ]
    return "\n".join(parts)


def render_readme(current: str) -> str:
    start = current.find(START)
    end = current.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{README}: markers {START} ... {END} not found")
    return current[: start + len(START)] + "\n" + readme_section() + current[end:]


def outputs() -> dict[Path, str]:
    return {DOCS_PAGE: docs_page(), README: render_readme(README.read_text())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check; exit 1 if a file is out of date")
    args = ap.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        old = path.read_text() if path.exists() else ""
        if old == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in stale:
        verb = "out of date" if args.check else "updated"
        print(f"{path.relative_to(ROOT)}: {verb}")
    if args.check and stale:
        print("run: python tools/gen_config_reference.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
