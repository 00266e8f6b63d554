"""The package's structure, read from its source: no import cycles (lazy imports inside
functions included), imports only downwards through the layers, and only the
concurrency core asking which async library runs. See ``import_graph.py``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from architecture import import_graph as ig

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "aiokafka_lite"


@pytest.fixture(scope="module")
def graph() -> ig.Graph:
    return ig.build(PACKAGE)


def test_no_import_cycles(graph: ig.Graph) -> None:
    found = ig.cycles(graph)
    report = "\n\n".join(
        f"cycle of {len(members)} modules: {', '.join(members)}\n" + "\n".join(f"  {e}" for e in edges)
        for members, edges in found
    )
    assert not found, f"{len(found)} import cycles:\n{report}"


def test_imports_go_down_the_layers(graph: ig.Graph) -> None:
    problems = ig.layering_violations(graph)
    assert not problems, f"{len(problems)} imports against the layers:\n" + "\n".join(problems)


def test_only_the_concurrency_core_asks_which_library_runs(graph: ig.Graph) -> None:
    found = ig.backend_checks(graph)
    listed = "\n".join(f"{module}:{line}: {what}" for module, line, what in found)
    assert not found, f"{len(found)} backend checks outside core/concurrency.py:\n{listed}"


# ---------------------------------------------------------------------------- the checker itself


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / ig.ROOT
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_checker_sees_lazy_imports_and_parent_packages_but_not_type_checking(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "from aiokafka_lite.core.a import A\n",
            "core/__init__.py": "",
            "core/a.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from aiokafka_lite.net.b import B
                def f():
                    from aiokafka_lite.net import b
                class A: ...
            """,
            "net/__init__.py": "",
            "net/b.py": "from aiokafka_lite.core import a\nfrom aiokafka_lite.net import c\n",
            "net/c.py": "",
        },
    )
    graph = ig.build(root)
    edges = {(e.source, e.target): e for e in graph.edges}
    lazy = edges[("aiokafka_lite.core.a", "aiokafka_lite.net.b")]
    assert lazy.lazy and not lazy.implied
    assert edges[("aiokafka_lite.core.a", "aiokafka_lite.net")].implied
    assert ("aiokafka_lite.net.b", "aiokafka_lite.net") not in edges  # its own package
    assert ("aiokafka_lite.net.b", "aiokafka_lite.core") in edges  # a parent package
    assert not any(e.target == ig.ROOT for e in graph.edges)  # the façade is no parent edge
    [(members, cycle_edges)] = ig.cycles(graph)
    assert members == ["aiokafka_lite.core.a", "aiokafka_lite.net.b"]
    assert {(e.source, e.target) for e in cycle_edges} == {
        ("aiokafka_lite.core.a", "aiokafka_lite.net.b"),
        ("aiokafka_lite.net.b", "aiokafka_lite.core.a"),
    }
    assert ig.layering_violations(graph) == [
        "aiokafka_lite.core.a:6 -> aiokafka_lite.net.b (lazy): core/ (layer 0) imports net/ (layer 2)"
    ]


def test_checker_finds_backend_checks(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/concurrency.py": "import asyncio\nx = asyncio._get_running_loop()\n",
            "net/__init__.py": "",
            "net/c.py": """
                import asyncio
                import trio
                from aiokafka_lite.core import concurrency
                async def _sleep_trio(): ...
                def f():
                    if asyncio._get_running_loop() is None: ...
                    if concurrency.current() is concurrency.ASYNCIO: ...
                    if concurrency.current().name == "trio": ...
            """,
        },
    )
    found = ig.backend_checks(ig.build(root))
    assert [(m, what) for m, _line, what in found] == [
        ("aiokafka_lite.net.c", "module-level import trio"),
        ("aiokafka_lite.net.c", "def _sleep_trio"),
        ("aiokafka_lite.net.c", "asyncio._get_running_loop()"),
        ("aiokafka_lite.net.c", "is ASYNCIO"),
        ("aiokafka_lite.net.c", "backend name compared"),
    ]
