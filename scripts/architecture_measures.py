"""The measures of issue 25 for a source tree: non-blank lines of non-generated code,
import cycles (lazy imports included), the five largest classes, and the places that
ask which async library runs.

    .venv/bin/python scripts/architecture_measures.py [SRC_PACKAGE_DIR]

SRC_PACKAGE_DIR defaults to this checkout's ``src/aiokafka_lite``; pass another tree's
(say ``/tmp/before/src/aiokafka_lite``) to measure it with the same rules. The rules are
those of ``tests/architecture/import_graph.py`` (the test suite's checker).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from architecture import import_graph as ig  # noqa: E402


def non_blank_lines(graph: ig.Graph) -> int:
    return sum(
        1
        for m in graph.modules.values()
        for line in m.path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    )


def largest_classes(graph: ig.Graph, n: int = 5) -> list[tuple[int, str]]:
    sizes = [
        ((node.end_lineno or node.lineno) - node.lineno + 1, f"{m.name}.{node.name}")
        for m in graph.modules.values()
        for node in ast.walk(m.tree)
        if isinstance(node, ast.ClassDef)
    ]
    return sorted(sizes, reverse=True)[:n]


def main(argv: list[str]) -> int:
    package = Path(argv[1]) if len(argv) > 1 else HERE.parent / "src" / ig.ROOT
    graph = ig.build(package)
    print(f"tree: {package}")
    print(f"modules (non-generated): {len(graph.modules)}")
    print(f"non-blank lines of non-generated code: {non_blank_lines(graph)}")
    found = ig.cycles(graph)
    print(f"import cycles (lazy imports included): {len(found)}")
    for members, _edges in found:
        print(f"  {len(members)} modules: {', '.join(members)}")
    print("largest classes (lines):")
    for lines, name in largest_classes(graph):
        print(f"  {lines:5d}  {name}")
    checks = ig.backend_checks(graph)
    per_module = Counter(module for module, _line, _what in checks)
    print(
        f"places that check the running backend outside the concurrency core: {len(checks)} "
        f"in {len(per_module)} modules (+ the core itself)"
    )
    for module, count in sorted(per_module.items(), key=lambda kv: (-kv[1], kv[0])):
        kinds = Counter(
            what.split()[0] if what.startswith("def ") else what for m, _l, what in checks if m == module
        )
        print(f"  {count:3d}  {module}  ({', '.join(f'{k} x{v}' for k, v in sorted(kinds.items()))})")
    core = [m for m in graph.modules if m in (ig.CONCURRENCY_CORE, f"{ig.ROOT}._backend")]
    for name in core:
        calls = sum(
            1
            for node in ast.walk(graph.modules[name].tree)
            if isinstance(node, ast.Attribute) and node.attr == "_get_running_loop"
        )
        print(f"  core {name}: {calls} uses of asyncio._get_running_loop")
    structured = Counter(
        m.name
        for m in graph.modules.values()
        if m.name != ig.CONCURRENCY_CORE
        for node in ast.walk(m.tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "structured"
    )
    print(
        f"structured (trio) variants kept, via concurrency.structured(): {sum(structured.values())} "
        f"in {len(structured)} modules"
        + "".join(f"\n  {n:3d}  {name}" for name, n in sorted(structured.items()))
    )
    layering = ig.layering_violations(graph)
    print(f"imports against the layers (meaningful on the layered layout only): {len(layering)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
