"""The house's import rules, read from the source (AST, module and function level):
no import circle in service/ or sandboxes/, Ray imported only by the two Ray executor
modules, the pipeline on the executor contract only, and routes assembled by name."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("service", "sandboxes")


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports() -> dict[str, set[str]]:
    """Each module of service/ and sandboxes/ -> the modules of those packages it imports."""
    files = {_module(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "migrations" not in p.parts}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        found: set[str] = set()
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                candidates = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            for c in candidates:
                if c in files:
                    found.add(c)
                    break
        graph[name] = found - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package_of(module: str, graph: dict[str, set[str]]) -> bool:
    return any(m.startswith(module + ".") for m in graph)


def test_no_import_circle_between_modules():
    graph = _imports()
    # A package's __init__ importing its own submodules is how a package shows its surface, not a circle.
    flat = {m: {t for t in ts if not (_package_of(m, graph) and t.startswith(m + "."))} for m, ts in graph.items()}
    # The tables live in service/tables.py, so the store, the chain writer and the group-commit
    # writer import them without importing each other in a ring.
    assert _cycles(flat) == []
    assert "sandboxes.factory" not in graph["sandboxes.docker_backend"]
    assert not any(m.startswith("service.executors.ray") for m in graph["service.executors.local"])


def test_ray_is_imported_only_by_the_ray_executor_modules():
    importers = set()
    for pkg in ("service", "sandboxes", "verifiers"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n == "ray" or n.startswith("ray.") for n in names):
                    importers.add(_module(path))
    assert importers == {"service.executors.ray_replica", "service.executors.ray_node"}


def test_the_pipeline_knows_only_the_executor_contract():
    graph = _imports()
    for module, targets in graph.items():
        if module.startswith("service.pipeline"):
            executors = {t for t in targets if t.startswith("service.executors")}
            assert executors <= {"service.executors.base"}, module
