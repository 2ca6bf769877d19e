"""The package's shape: no import circle inside python/lakerules, counting every import
(module level or inside a function: a lazy import is still a dependency), and the planner
apart from the executor (the plan model and the rules import nothing that writes)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "lakerules"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """module -> the lakerules modules it imports, anywhere in its body."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name and t != "lakerules":
                    graph[name].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_package():
    graph = _imports()
    assert "lakerules.plan.nodes" in graph and graph["lakerules.backend.bridge"], "the import graph was not read"
    assert _cycles(graph) == []


def test_the_planner_imports_nothing_that_runs():
    """plan.py is data and the tree walk; the rules plan. Neither reaches the modules that
    write or commit, however indirectly: only lakerules.execute.run (and what calls it) does."""
    graph = _imports()
    runs = {"lakerules.write.files", "lakerules.write.commit", "lakerules.write.row_delta", "lakerules.write.rewrites",
            "lakerules.write.history", "lakerules.rowlevel.run", "lakerules.execute.run"}

    def reach(m, seen):
        for n in graph[m]:
            if n not in seen:
                seen.add(n)
                reach(n, seen)
        return seen

    for planner in ["lakerules.plan.nodes", "lakerules.rules.registry", *(m for m in graph if m.startswith("lakerules.rules."))]:
        assert not reach(planner, set()) & runs, (planner, sorted(reach(planner, set()) & runs))
