"""The package's module import graph, read from the source with ``ast`` (nothing is
imported): used by ``test_import_graph.py`` and by ``scripts/architecture_measures.py``.

Edges: every ``import``/``from ... import`` of a module of the package, those inside
functions (lazy imports) included, those under ``if TYPE_CHECKING:`` excluded (they never
run). Importing ``a.b.c`` runs ``a/b/__init__`` first, so it is also an edge to each
parent package, except the root façade and the importer's own packages (already being
imported when it runs). The generated protocol (``wire/messages``) is left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = "aiokafka_lite"
GENERATED = (f"{ROOT}.wire.messages",)

#: The layers, lowest first; a module may import from lower layers and its own package.
#: Packages of one rank are peers that must not import each other.
LAYERS: dict[str, int] = {
    "core": 0,
    "wire": 1,
    "net": 2,
    "produce": 3,
    "consume": 3,
    "admin": 3,
    "processing": 4,
    "integrations": 5,
    "compat": 5,
    "cli": 6,
}
#: Outside the layers: the embedded broker (a server beside the client) and the test
#: helpers; the client layers must not import them (the cli, an application, may start
#: an embedded broker or an Apache Kafka for its demo).
ASIDE = ("broker", "testing")
ASIDE_IMPORTERS = {"broker": ("cli", "testing"), "testing": ("cli",)}

CONCURRENCY_CORE = f"{ROOT}.core.concurrency"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    lazy: bool  # inside a function
    implied: bool  # the parent package of an imported module

    def __str__(self) -> str:
        how = " (implied parent)" if self.implied else " (lazy)" if self.lazy else ""
        return f"{self.source}:{self.line} -> {self.target}{how}"


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    is_package: bool


@dataclass
class Graph:
    modules: dict[str, Module]
    edges: list[Edge] = field(default_factory=list)
    extensions: set[str] = field(default_factory=set)  # compiled modules (no source to read)

    def targets(self, source: str) -> set[str]:
        return {e.target for e in self.edges if e.source == source}


def load_modules(package_dir: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        if any(name == g or name.startswith(g + ".") for g in GENERATED):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        modules[name] = Module(name, path, tree, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that can run, with whether it is inside a function."""

    def walk(node: ast.AST, lazy: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    yield from walk_one(other, lazy)
                continue
            yield from walk_one(child, lazy)

    def walk_one(node: ast.AST, lazy: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, lazy
            return
        inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for other in node.orelse:
                yield from walk_one(other, inner)
            return
        yield from walk(node, inner)

    yield from walk(tree, False)


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _nearest_module(name: str, modules: dict[str, Module]) -> str | None:
    while name:
        if name in modules:
            return name
        if any(name == g or name.startswith(g + ".") for g in GENERATED):
            return None
        name = name.rpartition(".")[0]
    return None


def load_extensions(package_dir: Path) -> set[str]:
    """Compiled modules: the built ones (``.so``/``.pyd``) and the C sources they are
    built from, so the graph is the same whether or not the extension was built (a
    plain checkout has only ``_crecords.c``)."""
    found = set()
    for path in [*package_dir.rglob("*.so"), *package_dir.rglob("*.pyd"), *package_dir.rglob("*.c")]:
        parts = list(path.relative_to(package_dir.parent).parts)
        parts[-1] = parts[-1].split(".")[0]
        found.add(".".join(parts))
    return found


def build(package_dir: Path) -> Graph:
    modules = load_modules(package_dir)
    graph = Graph(modules, extensions=load_extensions(package_dir))
    seen: set[tuple[str, str]] = set()
    for module in modules.values():
        own_packages = _ancestors(module.name) | {module.name}
        for node, lazy in _imports(module.tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(module, node)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules or full in graph.extensions else base)
            for raw in targets:
                if raw != ROOT and not raw.startswith(ROOT + "."):
                    continue
                if raw in graph.extensions:  # compiled: only its parent packages run
                    target, found = raw, []
                else:
                    target = _nearest_module(raw, modules) or ""
                    if not target or target == module.name:
                        continue
                    found = [(target, False)]
                found += [(p, True) for p in _ancestors(target) if p != ROOT and p not in own_packages]
                for name, implied in found:
                    if name in modules and (module.name, name) not in seen:
                        seen.add((module.name, name))
                        graph.edges.append(Edge(module.name, name, node.lineno, lazy, implied))
    return graph


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def cycles(graph: Graph) -> list[tuple[list[str], list[Edge]]]:
    """Each strongly connected set of more than one module (Tarjan), with its edges."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: dict[str, list[str]] = {m: [] for m in graph.modules}
    for e in graph.edges:
        out[e.source].append(e.target)
    found: list[list[str]] = []
    counter = 0

    def strongconnect(root: str) -> None:
        nonlocal counter
        work = [(root, iter(out[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(out[nxt])))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for m in sorted(graph.modules):
        if m not in index:
            strongconnect(m)
    result = []
    for component in sorted(found):
        members = set(component)
        edges = [e for e in graph.edges if e.source in members and e.target in members]
        result.append((component, sorted(edges, key=lambda e: (e.source, e.line, e.target))))
    return result


def layer_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == ROOT else None


def layering_violations(graph: Graph) -> list[str]:
    """Imports that go up (or sideways between peers) in ``LAYERS``, and client imports
    of the broker or the test helpers. Implied parent edges add nothing here."""
    problems: list[str] = []
    for e in graph.edges:
        if e.implied:
            continue
        src, dst = layer_of(e.source), layer_of(e.target)
        if src is None or dst is None or src == dst:
            continue
        if dst in ASIDE:
            if src not in ASIDE and src not in ASIDE_IMPORTERS[dst]:
                problems.append(f"{e}: {src}/ must not import {dst}/")
            continue
        if src in ASIDE or src not in LAYERS or dst not in LAYERS:
            continue
        if LAYERS[dst] > LAYERS[src]:
            problems.append(f"{e}: {src}/ (layer {LAYERS[src]}) imports {dst}/ (layer {LAYERS[dst]})")
        elif LAYERS[dst] == LAYERS[src]:
            problems.append(f"{e}: {src}/ and {dst}/ are peers and must not import each other")
    return problems


def _backend_comparison(node: ast.Compare) -> str | None:
    """``x is ASYNCIO`` / ``is not ASYNCIO``, or ``x.name == "trio"`` (and the like)."""
    operands = [node.left, *node.comparators]
    if any(isinstance(op, ast.Is | ast.IsNot) for op in node.ops) and any(
        (isinstance(n, ast.Attribute) and n.attr == "ASYNCIO")
        or (isinstance(n, ast.Name) and n.id == "ASYNCIO")
        for n in operands
    ):
        return "is ASYNCIO"
    if any(isinstance(n, ast.Attribute) and n.attr == "name" for n in operands) and any(
        isinstance(n, ast.Constant) and n.value in ("asyncio", "trio") for n in operands
    ):
        return "backend name compared"
    return None


def backend_checks(graph: Graph) -> list[tuple[str, int, str]]:
    """Places outside the concurrency core that ask which async library runs: calls of
    ``asyncio._get_running_loop`` (or the core's ``running_asyncio_loop`` outside core/),
    comparisons with the core's ``ASYNCIO`` backend or of a backend's ``name`` with
    "asyncio"/"trio", ``sniffio.current_async_library()``, trio-only twins (``def *_trio``) and
    module-level imports of ``trio``/``sniffio``."""
    found: list[tuple[str, int, str]] = []
    for module in graph.modules.values():
        if module.name == CONCURRENCY_CORE or module.name == f"{ROOT}._backend":
            continue
        in_core = layer_of(module.name) == "core"
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute) and node.attr == "_get_running_loop":
                found.append((module.name, node.lineno, "asyncio._get_running_loop()"))
            elif isinstance(node, ast.Attribute | ast.Name) and not in_core:
                name = node.attr if isinstance(node, ast.Attribute) else node.id
                if name == "running_asyncio_loop":
                    found.append((module.name, node.lineno, "running_asyncio_loop"))
            if isinstance(node, ast.Compare):
                what = _backend_comparison(node)
                if what:
                    found.append((module.name, node.lineno, what))
            if isinstance(node, ast.Attribute) and node.attr == "current_async_library":
                found.append((module.name, node.lineno, "sniffio.current_async_library()"))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.endswith("_trio"):
                found.append((module.name, node.lineno, f"def {node.name}"))
        for node in module.tree.body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            for n in names:
                if n.split(".")[0] in ("trio", "sniffio"):
                    found.append((module.name, node.lineno, f"module-level import {n}"))
    return sorted(found)
