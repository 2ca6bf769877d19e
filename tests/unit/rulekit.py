"""Small plans for the rule unit layer (tests/unit): each rule is applied alone to a plan built
for the test, and its output compared with the plan expected.

Two ways to build a plan:

- by hand, with stand-ins (:class:`Jvm`) for the JVM parts a rule only asks its class name,
  SQL text, determinism or exprId of; with :class:`LocalCatalogs` over a pyiceberg SQL catalog
  on SQLite in a test's folder, no Spark at all;
- from SQL (:func:`planned`): the plan of a statement exactly as the registry receives it from
  Spark in a phase (``analysis``: a resolved statement; ``optimizer``: a query after Spark's
  operator optimization), before any lakerules rule ran on it in that phase.

:func:`shown` prints a plan as EXPLAIN's rule section does, with exprIds numbered in order of
appearance and snapshot ids named, so expected plans can be written down.
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lakerules.errors import LakeError
from lakerules.iceberg.catalogs import Catalogs, build
from lakerules.plan import nodes as P

# ---- stand-ins for JVM objects --------------------------------------------------------------------


class _Class:
    def __init__(self, simple: str):
        self._simple = simple

    def getSimpleName(self) -> str:  # noqa: N802 - the JVM's name
        return self._simple

    def getName(self) -> str:  # noqa: N802
        return f"stand.in.{self._simple}"


class _ExprId:
    def __init__(self, n: int):
        self._n = n

    def id(self) -> int:
        return self._n


class Jvm:
    """A Catalyst node or expression as far as a rule looks at it: its class's simple name, its
    SQL text (``simpleString`` for a plan node), whether it is deterministic, its exprId."""

    def __init__(self, kind: str, text: str = "", *, deterministic: bool = True, expr_id: int | None = None):
        self.kind, self.text, self._deterministic, self._expr_id = kind, text or kind, deterministic, expr_id

    def getClass(self):  # noqa: N802
        return _Class(self.kind)

    def sql(self) -> str:
        return self.text

    def deterministic(self) -> bool:
        return self._deterministic

    def exprId(self):  # noqa: N802
        if self._expr_id is None:
            raise AssertionError(f"the stand-in {self.kind} {self.text} has no exprId")
        return _ExprId(self._expr_id)

    def simpleString(self, _max_fields: int = 25) -> str:  # noqa: N802
        return f"{self.kind} {self.text}" if self.text != self.kind else self.kind

    def treeString(self) -> str:  # noqa: N802
        return self.simpleString()

    def __repr__(self) -> str:
        return f"Jvm({self.kind!r}, {self.text!r})"


def expr(text: str, *, deterministic: bool = True) -> Jvm:
    """A stand-in condition (its SQL text)."""
    return Jvm("Expression", text, deterministic=deterministic)


def alias(child: P.Node, name: str = "t") -> P.SparkNode:
    """Spark's SubqueryAlias over ``child``."""
    return P.SparkNode(Jvm("SubqueryAlias", name), (child,))


def spark_node(kind: str, *kids: P.Node, text: str = "") -> P.SparkNode:
    return P.SparkNode(Jvm(kind, text), tuple(kids))


def table_ref(name: str = "lake.db.t", ref: str | None = None) -> P.TableRef:
    catalog, *namespace, table = name.split(".")
    return P.TableRef(catalog, tuple(namespace), table, ref)


def relation(name: str | P.TableRef = "lake.db.t", columns=("id", "kind"), *, snapshot_id: int | None = None,
             time_travel: bool = False, options: dict | None = None, filters: tuple = (),
             metadata_table: str | None = None) -> P.LakeRelation:
    """A lake relation as from_jvm makes it; its attributes have exprIds 0, 1, ..."""
    ref = name if isinstance(name, P.TableRef) else table_ref(name)
    output = tuple(P.Attribute(c, Jvm("AttributeReference", c, expr_id=i), i) for i, c in enumerate(columns))
    return P.LakeRelation(table=ref, snapshot_id=snapshot_id, time_travel=time_travel, output=output,
                          jvm=Jvm("DataSourceV2Relation", str(ref)), filters=tuple(filters),
                          options=tuple(sorted((options or {}).items())), metadata_table=metadata_table)


# ---- what a rule may use besides the plan ---------------------------------------------------------


@dataclass
class Ctx:
    """A rule's context (lakerules.backend.context.Context) whose settings are the test's own:
    ``conf(key)`` is ``settings[key]``, None when unset, whatever the session holds."""

    spark: Any = None
    catalogs: Any = None
    settings: dict = field(default_factory=dict)
    lowerings: dict = field(default_factory=dict)
    planners: dict = field(default_factory=dict)

    def conf(self, key: str, default: str | None = None) -> str | None:
        return self.settings.get(key, default)


# Plans scan manifests on the driver: no Spark job, and no session needed to decide so.
LOCAL_PLANNING = {"spark.sql.iceberg.data-planning-mode": "local", "spark.sql.iceberg.delete-planning-mode": "local"}


class LocalCatalogs(Catalogs):
    """The session's Catalogs (load, load_for_write, ...) over catalogs built here, by name,
    without asking Spark for their settings."""

    def __init__(self, **catalogs):
        self._spark = None
        self._catalogs = dict(catalogs)
        self._lock = threading.Lock()

    def get(self, name: str):
        if name not in self._catalogs:
            raise LakeError(f"lakerules: catalog {name!r} is not a lake catalog")
        return self._catalogs[name]


class NoCatalogs:
    """A context's catalogs for a rule that must not look any table up."""

    def __getattr__(self, name):
        raise AssertionError(f"the rule looked a table up (catalogs.{name})")


def local_catalog(folder, name: str = "lake"):
    """The embedded default catalog (pyiceberg's SQL catalog on SQLite) in ``folder``, built as
    the session builds it (lakerules.iceberg.catalogs.build), with namespace ``db``."""
    import lakerules

    catalog = build(name, lakerules.embedded_catalog(folder))
    catalog.create_namespace("db")
    return catalog


def ids_schema():
    import pyarrow as pa

    return pa.schema([pa.field("id", pa.int64()), pa.field("kind", pa.string())])


def rows(ids, kinds):
    import pyarrow as pa

    return pa.table({"id": list(ids), "kind": list(kinds)}, schema=ids_schema())


# ---- plans Spark made ------------------------------------------------------------------------------


class _Captured(LakeError):
    """Raised in the analysis callback once its plan is captured: the statement stops there."""


@contextmanager
def _capturing(phase: str, seen: list):
    from lakerules.rules import registry

    real = registry.apply_rules

    def capture(tree, ctx, ph):
        if ph != phase:
            return real(tree, ctx, ph)
        if phase == "optimizer":
            seen.append(tree)
            return tree  # optimized on, its lake relations left unplanned
        if isinstance(tree, (P.SparkNode, P.LakeRelation)):  # a query (a subquery of the statement)
            return real(tree, ctx, ph)
        seen.append(tree)  # a command: nothing more to do, and it must never run
        raise _Captured("lakerules: plan captured for a unit test")

    registry.apply_rules = capture
    try:
        yield
    finally:
        registry.apply_rules = real


def planned(spark, sql: str, phase: str = "optimizer") -> P.Node:
    """The lakerules plan of ``sql`` as the registry receives it in ``phase``: ``analysis``, a
    resolved command (DELETE, UPDATE, MERGE, INSERT: the statement is stopped there and never
    runs); ``optimizer``, a query as Spark's operator optimization first hands it over (for a
    query with subqueries, a subquery's plan comes first: use plans without them)."""
    jsession = spark._jsparkSession
    state = jsession.sessionState()
    seen: list = []
    with _capturing(phase, seen):
        skip = spark._jvm.org.apache.spark.sql.execution.CommandExecutionMode.SKIP()
        qe = state.executePlan(state.sqlParser().parsePlan(sql), skip)
        try:
            qe.optimizedPlan() if phase == "optimizer" else qe.analyzed()
        except Exception as e:  # noqa: BLE001 - the capture's own stop, any other error raised again
            if not seen or "plan captured for a unit test" not in str(e):
                raise
    assert seen, f"Spark never handed the registry a plan of {sql!r} in the {phase} phase"
    return seen[0]


def shown(node: P.Node, **snapshots: int) -> str:
    """``lakerules.plan.nodes.explain(node)``, each lake relation followed by its filters, with
    exprIds renumbered from 0 in order of appearance and each snapshot id given by keyword shown
    as its name: ``shown(plan, S1=t.current_snapshot().snapshot_id)``."""
    lines = []

    def walk(n: P.Node, depth: int) -> None:
        lines.extend("  " * depth + line for line in n.describe().splitlines())
        if isinstance(n, P.LakeRelation):
            lines.extend("  " * depth + "  filter " + c.sql() for c in n.filters)
        for k in n.children():
            walk(k, depth + 1)

    walk(node, 0)
    text = "\n".join(lines)
    for label, snapshot_id in snapshots.items():
        text = text.replace(str(snapshot_id), label)
    numbers: dict[str, int] = {}
    return re.sub(r"#(\d+)", lambda m: f"#{numbers.setdefault(m.group(1), len(numbers))}", text)
