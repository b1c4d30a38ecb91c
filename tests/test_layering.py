"""The package's layering, read from the source: the library never imports
``hqval.commands``, commands never import each other, and no two library modules import
each other (directly or round a loop), lazily inside a function or not."""

from __future__ import annotations

import ast
from pathlib import Path

import hqval

ROOT = Path(hqval.__file__).resolve().parent


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(runtime_only: bool = False) -> dict[str, set[str]]:
    """module -> the hqval modules it imports (with ``runtime_only``, leaving out those
    under ``if TYPE_CHECKING:``, which never run)."""
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        out: set[str] = set()
        todo: list[ast.AST] = [ast.parse(path.read_text())]
        while todo:
            node = todo.pop()
            if (runtime_only and isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                    and node.test.id == "TYPE_CHECKING"):
                todo += node.orelse
                continue
            todo += ast.iter_child_nodes(node)
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            out |= {t for t in targets if t in modules and t != name}
        graph[name] = out
    return graph


def test_library_never_imports_commands_and_commands_not_each_other() -> None:
    graph = _imports()
    bad = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                 if t.startswith("hqval.commands") and not m.startswith("hqval.commands")
                 and m != "hqval.cli")
    assert not bad, bad
    cross = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                   if m.startswith("hqval.commands.") and t.startswith("hqval.commands."))
    assert not cross, cross


def test_no_import_cycles() -> None:
    graph = _imports(runtime_only=True)
    # packages import their submodules' names; a package <-> its own module is no cycle
    for name, ts in graph.items():
        graph[name] = {t for t in ts if not (t.startswith(name + ".") or name.startswith(t + "."))}
    cycles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
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
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles
