"""The package's shape, as tests: no import circle inside python/lakerules (counting every
import, at module level or inside a function: a lazy import is still a dependency), the
subpackages layered (a package imports only the packages below it, so every arrow runs down),
the planner apart from the executor (the plan model and the rules import nothing that writes),
and the edges kept (Py4J internals only in lakerules.spark)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "lakerules"

# Bottom to top: a package may import only the packages before it. The top is the public face
# (lakerules/__init__.py, __main__.py); each package's __init__ says what it owns.
LAYERS = ["errors", "spark", "iceberg", "plan", "sql", "scan", "metadata", "write", "rules", "rowlevel", "optimize",
          "procedures", "streaming", "execute", "backend"]
PUBLIC = {"lakerules", "lakerules.__main__", "lakerules.jvm_driver", "lakerules.jvm_archive"}


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
                if t and t != name:  # the package root too: `import lakerules` is a dependency on its face
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


def _layer(module: str) -> str:
    return module.split(".")[1] if module not in PUBLIC else "public"


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_package():
    graph = _imports()
    assert "lakerules.plan.nodes" in graph and graph["lakerules.backend.bridge"], "the import graph was not read"
    assert _cycles(graph) == []


def test_every_module_lives_in_a_layer():
    """Top level: the public face and errors only; every other module in a subpackage of LAYERS."""
    graph = _imports()
    stray = sorted(m for m in graph if m not in PUBLIC and _layer(m) not in LAYERS)
    assert stray == [], f"modules outside the layers {LAYERS}: {stray}"


def test_every_import_runs_down_the_layers():
    graph = _imports()
    order = {name: i for i, name in enumerate(LAYERS)}
    up = []
    for module, deps in graph.items():
        if module in PUBLIC:
            continue
        for dep in deps:
            if dep not in PUBLIC and order[_layer(dep)] > order[_layer(module)]:
                up.append(f"{module} -> {dep}")
            elif dep in PUBLIC:
                up.append(f"{module} -> {dep} (the public face)")
    assert up == [], "imports that run up the layers:\n" + "\n".join(sorted(up))


def test_the_planner_imports_nothing_that_runs():
    """The plan model is data and the tree walk; the rules plan. Neither reaches the modules that
    write or commit, however indirectly: only lakerules.execute (and what calls it) does."""
    graph = _imports()
    runs = {m for m in graph if _layer(m) in ("write", "rowlevel", "execute", "optimize", "procedures")}

    def reach(m, seen):
        for n in graph[m]:
            if n not in seen:
                seen.add(n)
                reach(n, seen)
        return seen

    for planner in (m for m in graph if _layer(m) in ("plan", "rules")):
        assert not reach(planner, set()) & runs, (planner, sorted(reach(planner, set()) & runs))


# Py4J's internals: the JVM gateway, the Java session, a DataFrame's and a SparkContext's Java twins.
_PY4J = re.compile(r"\._jvm\b|\._jsparkSession\b|\._jdf\b|\._jsc\b")


def test_py4j_internals_only_in_the_spark_package():
    found = []
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        if module in PUBLIC or _layer(module) == "spark":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _PY4J.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}")
    assert found == [], "Py4J internals outside lakerules.spark:\n" + "\n".join(found)


def test_no_module_over_600_lines():
    big = sorted((len(p.read_text().splitlines()), str(p.relative_to(PACKAGE.parent))) for p in PACKAGE.rglob("*.py"))
    assert [b for b in big if b[0] > 600] == []
