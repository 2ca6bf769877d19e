"""The plan lakerules rules work on: frozen dataclasses over Spark's JVM logical plan.

``from_jvm`` turns the parts of a resolved Spark plan that touch lake tables into lakerules
nodes; everything else stays a ``SparkNode`` that wraps the JVM node (a subtree that touches no
lake table is kept whole, as one opaque leaf). Rules rewrite this tree; ``to_jvm`` turns it back,
running the commands (writes, commits) on the way and reusing every JVM node that did not change.

Nodes compare by identity: a rule that changes nothing returns the same object, and
``transform_up`` rebuilds a parent only when one of its children is a new object.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from lakerules import jvm as J


@dataclass(frozen=True, eq=False)
class Node:
    def children(self) -> tuple["Node", ...]:
        return ()

    def with_children(self, children: tuple["Node", ...]) -> "Node":
        return self

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class TableRef:
    catalog: str
    namespace: tuple[str, ...]
    name: str

    def __str__(self) -> str:
        return ".".join([self.catalog, *self.namespace, self.name])

    @property
    def identifier(self) -> tuple[str, ...]:
        return (*self.namespace, self.name)


@dataclass(frozen=True, eq=False)
class Attribute:
    """An output column of a Spark node: the name and the JVM attribute (with its exprId)."""

    name: str
    jvm: Any = field(repr=False)


@dataclass(frozen=True, eq=False)
class SparkNode(Node):
    """A Spark plan node lakerules does not interpret. ``kids`` is empty for an opaque subtree."""

    jvm: Any = field(repr=False)
    kids: tuple[Node, ...] = ()

    def children(self):
        return self.kids

    def with_children(self, children):
        return replace(self, kids=tuple(children))

    def describe(self) -> str:
        # an opaque subtree is shown whole; a node with lakerules children only by itself
        return self.jvm.treeString().rstrip() if not self.kids else self.jvm.simpleString(25)


@dataclass(frozen=True, eq=False)
class Filter(SparkNode):
    """Spark's Filter; ``conjuncts`` are the JVM expressions of its condition's AND parts."""

    conjuncts: tuple = field(default=(), repr=False)


@dataclass(frozen=True, eq=False)
class LakeRelation(Node):
    """A lake table as Spark resolved it (DataSourceV2Relation over io.lakerules.LakeTable).

    ``filters`` are conditions (JVM expressions) every row read must satisfy: what pruning may use.
    """

    table: TableRef
    snapshot_id: int | None
    time_travel: bool
    output: tuple[Attribute, ...]
    jvm: Any = field(repr=False)
    filters: tuple = field(default=(), repr=False)

    def describe(self) -> str:
        return f"LakeRelation {self.table} snapshot={self.snapshot_id} filters={len(self.filters)}"


@dataclass(frozen=True, eq=False)
class LakeScan(Node):
    """A planned read of a lake table: which data files, at which snapshot, with which schema,
    and the delete files that apply to them (see lakerules.planning)."""

    table: TableRef
    snapshot_id: int | None
    output: tuple[Attribute, ...]
    iceberg: Any = field(repr=False)  # pyiceberg Table (metadata) the scan was planned on
    schema: Any = field(repr=False)  # pyiceberg Schema the columns are read with
    plan: Any = field(repr=False)  # lakerules.planning.ScanPlan
    row_filter: Any = field(default=None, repr=False)  # pyiceberg expression pruning used

    @property
    def tasks(self) -> tuple:
        return self.plan.files

    def describe(self) -> str:
        p = self.plan
        return (
            f"LakeScan {self.table} snapshot={self.snapshot_id} files={len(p.files)}/{p.total_data_files} "
            f"position_deletes={len(p.position_delete_files)} equality_deletes={len(p.equality_delete_files)}"
        )


@dataclass(frozen=True, eq=False)
class Command(Node):
    """A node that does its work when the plan is turned back into Spark's (a write, a commit)."""

    def run(self, ctx, lower: Callable[[Node], Any]) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class WriteToLake(Command):
    """AppendData / OverwriteByExpression / OverwritePartitionsDynamic on a lake table.

    mode: 'append', 'overwrite' (rows matching ``delete_condition`` replaced) or 'dynamic'
    (the partitions written replace the same partitions).
    """

    table: TableRef
    mode: str
    query: Node
    delete_condition: Any = field(default=None, repr=False)  # JVM expression, for 'overwrite'
    jvm: Any = field(default=None, repr=False)

    def children(self):
        return (self.query,)

    def with_children(self, children):
        (query,) = children
        return replace(self, query=query)

    def describe(self) -> str:
        return f"WriteToLake {self.mode} {self.table}"

    def run(self, ctx, lower):
        from lakerules import write

        return write.run_write(ctx, self, lower(self.query))


@dataclass(frozen=True, eq=False)
class StatementCommand(Command):
    """A statement Spark's grammar lacks (see lakerules.statements), on a resolved lake table."""

    table: TableRef
    run_fn: Callable = field(repr=False)

    def describe(self) -> str:
        return getattr(self.run_fn, "description", None) or f"StatementCommand {self.table}"

    def run(self, ctx, lower):
        table = ctx.catalogs.load(self.table.catalog, self.table.namespace, self.table.name)
        return self.run_fn(ctx, table)


@dataclass(frozen=True, eq=False)
class CreateTableAsSelect(Command):
    """CREATE [OR REPLACE] TABLE lake... AS SELECT: create (or replace) the table, then write."""

    table: TableRef
    partitioning: tuple = ()
    properties: tuple = ()  # (key, value) pairs
    query: Node = None
    if_not_exists: bool = False
    replace: bool = False
    or_create: bool = False
    jvm: Any = field(default=None, repr=False)

    def children(self):
        return (self.query,)

    def with_children(self, children):
        (query,) = children
        return replace(self, query=query)

    def describe(self) -> str:
        return f"CreateTableAsSelect {self.table}"

    def run(self, ctx, lower):
        from lakerules import write

        return write.run_ctas(ctx, self, lower(self.query))


# ---- the one tree walk --------------------------------------------------------------------


def transform_up(node: Node, fn: Callable[[Node], Node]) -> Node:
    """Apply fn to every node, children first; parents are rebuilt only when a child changed."""
    kids = node.children()
    if kids:
        new_kids = tuple(transform_up(k, fn) for k in kids)
        if any(a is not b for a, b in zip(kids, new_kids)):
            node = node.with_children(new_kids)
    return fn(node)


def collect(node: Node, kind: type) -> list:
    out = [node] if isinstance(node, kind) else []
    for k in node.children():
        out.extend(collect(k, kind))
    return out


def explain(node: Node, indent: int = 0) -> str:
    lines = ["  " * indent + line for line in node.describe().splitlines()]
    for k in node.children():
        lines.append(explain(k, indent + 1))
    return "\n".join(lines)


# ---- JVM -> lakerules ---------------------------------------------------------------------

_WRITE_MODES = {"AppendData": "append", "OverwriteByExpression": "overwrite", "OverwritePartitionsDynamic": "dynamic"}


def from_jvm(spark, plan) -> Node:
    """The lakerules view of a resolved JVM plan."""
    bridge = spark._jvm.io.lakerules.Bridge
    if not bridge.touchesLake(plan):
        return SparkNode(plan)
    name = J.simple_name(plan)
    if name == "Project" and J.simple_name(plan.child()) == "SubqueryAlias":
        command = _statement(plan.child())
        if command is not None:
            return command
    if name == "DataSourceV2Relation" and _is_lake_table(plan.table()):
        return _relation(plan)
    if name == "Filter":
        return Filter(plan, (from_jvm(spark, plan.child()),), conjuncts=tuple(split_conjuncts(plan.condition())))
    if name in _WRITE_MODES and _is_lake_relation(plan.table()):
        target = _relation(plan.table())
        return WriteToLake(
            table=target.table,
            mode=_WRITE_MODES[name],
            query=from_jvm(spark, plan.query()),
            delete_condition=plan.deleteExpr() if name == "OverwriteByExpression" else None,
            jvm=plan,
        )
    if name in ("CreateTableAsSelect", "ReplaceTableAsSelect") and _is_lake_catalog(plan.name()):
        return _ctas(spark, plan, name == "ReplaceTableAsSelect")
    kids = tuple(from_jvm(spark, c) for c in J.from_seq(plan.children()))
    return SparkNode(plan, kids)


def _statement(alias_plan) -> StatementCommand | None:
    """SELECT * FROM t AS __lakerules_command_N, as lakerules.statements parsed it."""
    from lakerules import statements
    from lakerules.errors import LakeError

    alias = alias_plan.alias()
    if not alias.startswith(statements.MARKER):
        return None
    run = statements.take_command(alias)
    child = alias_plan.child()
    while J.simple_name(child) == "SubqueryAlias":  # Spark names the resolved relation too
        child = child.child()
    if not _is_lake_relation(child):
        raise LakeError(f"lakerules: this statement needs a lake table; {child.simpleString(1)} is not one")
    if run is None:
        raise LakeError("lakerules: this statement was already run; run the SQL text again")
    return StatementCommand(table=_relation(child).table, run_fn=run)


def split_conjuncts(expr) -> list:
    if J.simple_name(expr) == "And":
        return split_conjuncts(expr.left()) + split_conjuncts(expr.right())
    return [expr]


def _is_lake_table(table) -> bool:
    return J.class_name(table) == "io.lakerules.LakeTable"


def _is_lake_relation(plan) -> bool:
    return J.simple_name(plan) == "DataSourceV2Relation" and _is_lake_table(plan.table())


def _is_lake_catalog(ident_plan) -> bool:
    return J.simple_name(ident_plan) == "ResolvedIdentifier" and J.class_name(ident_plan.catalog()) == "io.lakerules.LakeCatalog"


def _relation(plan) -> LakeRelation:
    t = plan.table()
    snapshot = t.snapshotId()
    return LakeRelation(
        table=TableRef(t.catalogName(), tuple(t.namespace()), t.tableName()),
        snapshot_id=None if snapshot < 0 else snapshot,
        time_travel=bool(plan.timeTravelSpec().isDefined()),
        output=tuple(Attribute(a.name(), a) for a in J.from_seq(plan.output())),
        jvm=plan,
    )


def _ctas(spark, plan, is_replace: bool) -> CreateTableAsSelect:
    ident = plan.name().identifier()
    spec = plan.tableSpec()
    props = {t._1(): t._2() for t in J.from_seq(spec.properties().toList())}
    provider = J.option_value(spec.provider())
    if provider is not None:
        props["provider"] = provider
    location = J.option_value(spec.location())
    if location is not None:
        props["location"] = location
    comment = J.option_value(spec.comment())
    if comment is not None:
        props["comment"] = comment
    transforms = tuple(_transform_json(t) for t in J.from_seq(plan.partitioning()))
    return CreateTableAsSelect(
        table=TableRef(plan.name().catalog().name(), tuple(ident.namespace()), ident.name()),
        partitioning=transforms,
        properties=tuple(sorted(props.items())),
        query=from_jvm(spark, plan.query()),
        if_not_exists=bool(plan.ignoreIfExists()) if not is_replace else False,
        replace=is_replace,
        or_create=bool(plan.orCreate()) if is_replace else False,
        jvm=plan,
    )


def _transform_json(t) -> dict:
    args = []
    for e in t.arguments():
        cls = J.class_name(e)
        if hasattr(e, "fieldNames") and "Reference" in cls:
            args.append({"ref": list(e.fieldNames())})
        elif "Literal" in cls:
            args.append({"lit": str(e.value())})
        else:
            args.append({"expr": e.describe()})
    return {"name": t.name(), "args": args}


# ---- lakerules -> JVM ---------------------------------------------------------------------


def to_jvm(ctx, node: Node):
    """The JVM plan for a lakerules plan; commands run here, in plan order (children first)."""

    def lower(n: Node):
        match n:
            case SparkNode(kids=()):
                return n.jvm
            case SparkNode():
                new = [lower(k) for k in n.kids]
                # Unchanged children lower to the very JVM proxies from_jvm took them from.
                if all(j is getattr(k, "jvm", None) for j, k in zip(new, n.kids)):
                    return n.jvm
                return n.jvm.withNewChildren(J.to_seq(ctx.spark, new))
            case LakeRelation():
                return n.jvm
            case Command():
                return n.run(ctx, lower)
            case _:
                lowering = ctx.lowerings.get(type(n))
                if lowering is None:
                    raise TypeError(f"lakerules: no lowering for plan node {type(n).__name__}")
                return lowering(ctx, n, lower)

    return lower(node)

