"""Every ```python block of README.md and docs/**/*.md runs as written.

How a block runs depends on what it is:

* a *program* (it calls ``asyncio.run``, ``trio.run`` or ``anyio.run``): ``python -c``
  in an empty folder, with no ``$KAFKA_BOOTSTRAP``; it must exit 0;
* a *fragment* (anything else): the way the pages say their fragments run
  (getting-started, "About the snippets"): as typed into ``python -m asyncio``, with top-level
  ``await`` allowed and ``bootstrap`` naming a cluster, here a fresh embedded one;
* a block that only includes a file (``--8<-- "examples/x.py"``): that example is run by
  ``tests/examples``; this test checks that a test there names it.

An HTML comment on the line before the fence changes that, in plain sight of anyone
editing the page:

* ``<!-- snippet: continues -->``: a fragment that goes on from the previous block of the
  page, in the same session (the chain of blocks runs in one namespace, in order);
* ``<!-- snippet: runs-forever -->``: a fragment that loops until cancelled (a consumer
  loop); it must still be running, without an error, after a few seconds (then it is
  cancelled, and a block continuing it runs next);
* ``<!-- snippet: continues, runs-forever -->``: both;
* ``<!-- snippet: pytest-module -->``: a test module; pytest runs it (as a file in an
  empty folder, no configuration) and its tests must pass;
* ``<!-- snippet: not-runnable REASON -->``: not run. The reason must be given, and the
  page must say it in its text too (the test checks that the block is followed or
  preceded by prose, not just the comment).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
_MARKER = re.compile(r"<!--\s*snippet:\s*(?P<kind>[a-z-]+(?:,\s*[a-z-]+)*)\s*(?P<reason>.*?)\s*-->")
_PROGRAM = re.compile(r"^(asyncio|trio|anyio)\.run\(", re.M)
_INCLUDE = re.compile(r'^--8<-- "(?P<path>[^"]+)"$')
_KINDS = {"continues", "runs-forever", "not-runnable", "pytest-module"}

#: Fragments run as in ``python -m asyncio``: top-level await, ``bootstrap`` defined.
_FRAGMENT_HARNESS = textwrap.dedent(
    """
    import ast, asyncio, json, sys

    from aiokafka_lite.broker import EmbeddedCluster

    BLOCKS = json.loads(sys.argv[1])  # [source, runs forever?], in order


    async def run_blocks() -> None:
        async with EmbeddedCluster() as cluster:
            namespace = {"__name__": "__main__", "bootstrap": cluster.bootstrap}
            for source, forever in BLOCKS:
                code = compile(source, "<snippet>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                result = eval(code, namespace)
                if result is None:  # a coroutine when the block awaits at top level
                    continue
                if not forever:
                    await result
                    continue
                try:
                    await asyncio.wait_for(result, 3)
                except TimeoutError:
                    print("still running after 3 s, as it should")
                    continue
                raise SystemExit("a runs-forever snippet ended on its own")


    asyncio.run(run_blocks())
    """
)


@dataclass
class Block:
    page: Path
    line: int
    source: str
    kind: str  # program, fragment, include, or the marker's kinds: continues, runs-forever, not-runnable
    reason: str = ""
    forever: bool = False
    chain: list[tuple[str, bool]] = field(default_factory=list)  # earlier blocks a continuation runs after

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _marker_before(text: str, start: int) -> re.Match[str] | None:
    lines = text[:start].rstrip("\n").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return _MARKER.search(lines[-1]) if lines else None


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text()
    out: list[Block] = []
    for match in _FENCE.finditer(text):
        source = textwrap.dedent(match.group("body"))
        line = text.count("\n", 0, match.start()) + 1
        marker = _marker_before(text, match.start())
        marked = set(re.split(r",\s*", marker.group("kind"))) if marker else set()
        if not marked <= _KINDS or ("not-runnable" in marked and len(marked) > 1):
            raise AssertionError(f"{page}:{line}: unknown snippet marker {marker and marker.group(0)!r}")
        lines = [s for s in source.splitlines() if s.strip()]
        if lines and all(_INCLUDE.match(s.strip()) for s in lines):
            kind = "include"
        elif "not-runnable" in marked:
            kind = "not-runnable"
        elif "pytest-module" in marked:
            kind = "pytest-module"
        elif "continues" in marked:
            kind = "continues"
        elif marked:
            kind = "fragment"
        else:
            kind = "program" if _PROGRAM.search(source) else "fragment"
        block = Block(
            page, line, source, kind, marker.group("reason") if marker else "", "runs-forever" in marked
        )
        if block.forever and kind == "program":
            raise AssertionError(f"{block.id}: runs-forever applies to fragments only")
        if kind == "continues":
            previous = [b for b in out if b.kind not in ("include", "not-runnable")]
            assert previous, f"{block.id}: 'continues' but no earlier block on the page"
            assert previous[-1].kind in ("fragment", "continues"), f"{block.id}: continues a program"
            block.chain = [*previous[-1].chain, (previous[-1].source, previous[-1].forever)]
        out.append(block)
    return out


ALL_BLOCKS = [block for page in PAGES for block in blocks_of(page)]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, check=False, env=_env(), cwd=cwd
    )


def test_the_pages_have_snippets() -> None:
    kinds = {b.kind for b in ALL_BLOCKS}
    assert {"program", "fragment", "include"} <= kinds, kinds
    assert len(ALL_BLOCKS) > 40


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[b.id for b in ALL_BLOCKS])
def test_snippet_runs(block: Block, tmp_path: Path) -> None:
    if block.kind == "not-runnable":
        assert block.reason, f"{block.id}: a not-runnable snippet must say why"
        pytest.skip(f"marked not runnable on the page: {block.reason}")
    if block.kind == "include":
        tests = "\n".join(p.read_text() for p in (ROOT / "tests" / "examples").rglob("*.py"))
        for line in block.source.split("\n"):
            if match := _INCLUDE.match(line.strip()):
                path = ROOT / match.group("path")
                assert path.is_file(), f"{block.id}: {path} does not exist"
                if path.parent.name == "examples":
                    assert path.stem in tests, f"{block.id}: no test in tests/examples runs {path.name}"
        return
    if block.kind == "program":
        proc = _run(["-c", block.source], tmp_path)
    elif block.kind == "pytest-module":
        (tmp_path / "test_snippet.py").write_text(block.source)
        proc = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_snippet.py"], tmp_path)
        assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-4000:]
    else:
        blocks = [*block.chain, (block.source, block.forever)]
        proc = _run(["-c", _FRAGMENT_HARNESS, json.dumps(blocks)], tmp_path)
    assert proc.returncode == 0, (
        f"{block.id} failed:\n{block.source}\n--- stdout:\n{proc.stdout[-4000:]}\n--- stderr:\n{proc.stderr[-4000:]}"
    )


def test_not_runnable_snippets_say_why_in_the_text() -> None:
    for block in ALL_BLOCKS:
        if block.kind != "not-runnable":
            continue
        text = block.page.read_text()
        comment_line = text.splitlines()[block.line - 2 if block.line >= 2 else 0]
        assert len(block.reason) >= 10, f"{block.id}: the reason {block.reason!r} explains nothing"
        # The reason is repeated for readers: a sentence of the page mentions its key word.
        key = max(re.findall(r"[A-Za-z_]{5,}", block.reason), key=len)
        visible = _MARKER.sub("", text)
        assert key in visible, f"{block.id}: the page text does not say why ({comment_line!r})"
