"""The plan lakerules rules work on: frozen dataclasses over Spark's JVM logical plan.

``from_jvm`` turns the parts of a resolved Spark plan that touch lake tables into lakerules
nodes; everything else stays a ``SparkNode`` that wraps the JVM node (a subtree that touches no
lake table is kept whole, as one opaque leaf). Rules rewrite this tree; ``to_jvm`` turns it back,
reusing every JVM node that did not change; a command becomes the JVM command node Spark runs
when it executes the statement (lakerules.execute.run), so lowering writes and commits nothing.

Nodes compare by identity: a rule that changes nothing returns the same object, and
``transform_up`` rebuilds a parent only when one of its children is a new object.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from lakerules.spark import jvm as J
from lakerules.plan import pending
from lakerules.errors import LakeError, NotSupported


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
    ref: str | None = None  # named at a branch or tag: "branch:b", "tag:v" (lakerules.iceberg.refs)

    def __str__(self) -> str:
        if self.ref:
            kind, _, ref = self.ref.partition(":")
            return ".".join([self.catalog, *self.namespace, self.name, f"{kind}_{ref}"])
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
    ``options``: the read options (lower-case key, value) it was read with (lakerules.iceberg.options).
    """

    table: TableRef
    snapshot_id: int | None
    time_travel: bool
    output: tuple[Attribute, ...]
    jvm: Any = field(repr=False)
    filters: tuple = field(default=(), repr=False)
    options: tuple = ()
    metadata_table: str | None = None  # a metadata table of ``table`` (lakerules.metadata.tables)

    def describe(self) -> str:
        if self.metadata_table is not None:
            return f"LakeRelation {self.table}.{self.metadata_table} snapshot={self.snapshot_id}"
        return f"LakeRelation {self.table} snapshot={self.snapshot_id} filters={len(self.filters)}"


@dataclass(frozen=True, eq=False)
class LakeScan(Node):
    """A planned read of a lake table: which data files, at which snapshot, with which schema,
    and the delete files that apply to them (see lakerules.scan.planning)."""

    table: TableRef
    snapshot_id: int | None
    output: tuple[Attribute, ...]
    iceberg: Any = field(repr=False)  # pyiceberg Table (metadata) the scan was planned on
    schema: Any = field(repr=False)  # pyiceberg Schema the columns are read with
    plan: Any = field(repr=False)  # lakerules.scan.planning.ScanPlan
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


# The result columns of row-level statements, as Spark's own DML gives them.
DML_RESULT = "num_affected_rows long"
MERGE_RESULT = "num_affected_rows long, num_updated_rows long, num_deleted_rows long, num_inserted_rows long"


@dataclass(frozen=True, eq=False)
class Command(Node):
    """A planned statement that writes or commits. Lowered to one JVM command node
    (io.lakerules.LakeCommand) that Spark runs once, when it executes the statement; what runs
    is in lakerules.execute. Planning it runs nothing."""

    # The columns of the statement's result (lakerules' own fixed DDL; "" for none).
    result_schema = ""
    # Whether running it may change the table (Spark's cached plans over it are then recomputed).
    changes_table = True


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
    options: tuple = ()  # write options, (key, value) pairs (lakerules.iceberg.options)

    def children(self):
        return (self.query,)

    def with_children(self, children):
        (query,) = children
        return replace(self, query=query)

    def describe(self) -> str:
        return f"WriteToLake {self.mode} {self.table}"


@dataclass(frozen=True, eq=False)
class StreamWriteToLake(Node):
    """One micro-batch of a streaming query written to a lake table (Spark's
    WriteToMicroBatchDataSource, from DataStreamWriter.toTable / start): lowered to a JVM node
    (io.lakerules.LakeStreamWrite) whose rows, when Spark executes the batch, are written and
    committed as one snapshot (lakerules.streaming.sink). ``mode``: 'append' or 'complete'."""

    table: TableRef
    query: Node
    query_id: str
    batch_id: int
    mode: str
    options: tuple = ()  # the stream's write options, (key, value) pairs
    jvm: Any = field(default=None, repr=False)

    def children(self):
        return (self.query,)

    def with_children(self, children):
        (query,) = children
        return replace(self, query=query)

    def describe(self) -> str:
        return f"StreamWriteToLake {self.mode} {self.table} query={self.query_id} batch={self.batch_id}"


@dataclass(frozen=True, eq=False)
class StatementCommand(Command):
    """A statement Spark's grammar lacks (see lakerules.sql.statements), on a resolved lake table."""

    @property
    def result_schema(self) -> str:
        return getattr(self.run_fn, "schema", "")

    table: TableRef
    run_fn: Callable = field(repr=False)
    planned: Any = field(default=None, repr=False)  # what run_fn.plan(ctx, table) decided, if it plans ahead

    def describe(self) -> str:
        head = getattr(self.run_fn, "description", None) or f"StatementCommand {self.table}"
        if self.planned is None:
            return head
        return "\n".join([head, *("  " + line for line in self.planned.describe())])


@dataclass(frozen=True, eq=False)
class CatalogCommand(Command):
    """A statement on a catalog rather than on a loaded table (CALL register_table): ``run_fn(ctx)``
    runs it; ``table`` is the table it names, which need not exist yet."""

    table: TableRef
    run_fn: Callable = field(repr=False)
    description: str = ""
    result_schema: str = ""

    def describe(self) -> str:
        return self.description or f"CatalogCommand {self.table}"


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
    options: tuple = ()  # write options, (key, value) pairs (lakerules.iceberg.options)

    def children(self):
        return (self.query,)

    def with_children(self, children):
        (query,) = children
        return replace(self, query=query)

    def describe(self) -> str:
        return f"CreateTableAsSelect {self.table}"


@dataclass(frozen=True, eq=False)
class DescribeLakeColumn(Command):
    """DESCRIBE EXTENDED of one column of a lake table: Spark's column rows, then statistics read
    from the manifests of ``snapshot_id`` (None: the table has no snapshot)."""

    result_schema = "info_name string, info_value string"
    changes_table = False

    table: TableRef
    column: str
    data_type: str
    comment: str | None
    snapshot_id: int | None
    metadata_table: str | None = None
    jvm: Any = field(default=None, repr=False)

    def describe(self) -> str:
        source = "no snapshot" if self.snapshot_id is None else f"the manifests of snapshot {self.snapshot_id}"
        return f"DescribeLakeColumn {self.table} {self.column}: statistics from {source}"


@dataclass(frozen=True, eq=False)
class DeleteFromLake(Node):
    """DELETE FROM a lake table, as Spark resolved it. Not runnable: the row-level batch
    rewrites it (rules/rewrite_delete.py); left alone it fails to lower."""

    table: TableRef
    relation: LakeRelation
    condition: Any = field(default=None, repr=False)  # JVM expression; None: no WHERE
    jvm: Any = field(default=None, repr=False)
    truncate: bool = False  # TRUNCATE TABLE (no WHERE, and no result rows)

    def describe(self) -> str:
        cond = self.condition.sql() if self.condition is not None else "true"
        return f"DeleteFromLake {self.table} WHERE {cond}"


@dataclass(frozen=True, eq=False)
class WriteDeletes(Command):
    """DELETE as a write (seed 002): ``INSERT INTO t.DELETE (file_path, pos) SELECT <file>,
    <position> FROM t WHERE <condition>`` (merge-on-read), or, with ``mode`` copy-on-write,
    the affected data files rewritten without the matched rows. Files whose every row matches
    are dropped whole; no WHERE drops every file."""

    result_schema = DML_RESULT

    table: TableRef
    relation: LakeRelation
    condition: Any = field(default=None, repr=False)
    mode: str = "merge-on-read"
    jvm: Any = field(default=None, repr=False)
    files: Any = field(default=None, repr=False)  # lakerules.scan.row_files.FilePlan; None: truncate

    def describe(self) -> str:
        cond = self.condition.sql() if self.condition is not None else "true"
        if self.condition is None:
            return f"WriteDeletes {self.table}: truncate (every data and delete file removed)"
        if self.mode == "copy-on-write":
            head = (f"WriteDeletes {self.table} copy-on-write: rewrite files with rows WHERE {cond}, "
                    f"keeping rows WHERE NOT ({cond}) <=> true")
        else:
            head = (f"WriteDeletes {self.table} merge-on-read: INSERT INTO {self.table}.DELETE (file_path, pos) "
                    f"SELECT <file>, <position> FROM {self.table} WHERE {cond}")
        return _with_files(head, self.files, drops_whole=True)


@dataclass(frozen=True, eq=False)
class TruncateLake(WriteDeletes):
    """TRUNCATE TABLE: DELETE without WHERE (one snapshot removing every data and delete file),
    with no result rows, as Spark's TRUNCATE TABLE."""

    result_schema = ""

    def describe(self) -> str:
        return f"TruncateLake {self.table}: every data and delete file removed"


@dataclass(frozen=True, eq=False)
class UpdateLake(Node):
    """UPDATE a lake table, as Spark resolved it (assignments cast to the column types). Not
    runnable: the row-level batch rewrites it (rules/rewrite_update.py)."""

    table: TableRef
    relation: LakeRelation
    assignments: tuple = field(default=(), repr=False)  # (JVM key expression, JVM value expression)
    condition: Any = field(default=None, repr=False)
    jvm: Any = field(default=None, repr=False)

    def describe(self) -> str:
        cond = self.condition.sql() if self.condition is not None else "true"
        return f"UpdateLake {self.table} SET {_assignments_sql(self.assignments)} WHERE {cond}"


@dataclass(frozen=True, eq=False)
class WriteUpdate(Command):
    """UPDATE as the seed's split write: ``INSERT INTO t.UPDATE (file_path, pos, <new columns>)
    SELECT <file>, <position>, <new values> FROM t WHERE <condition>``: one read; each matched
    row becomes a position delete and a new row, committed together. With ``mode``
    copy-on-write, or without WHERE, the affected files are rewritten instead."""

    result_schema = DML_RESULT

    table: TableRef
    relation: LakeRelation
    assignments: tuple = field(default=(), repr=False)
    condition: Any = field(default=None, repr=False)
    mode: str = "merge-on-read"
    jvm: Any = field(default=None, repr=False)
    files: Any = field(default=None, repr=False)  # lakerules.scan.row_files.FilePlan

    def describe(self) -> str:
        return _with_files(self._head(), self.files, drops_whole=False)

    def _head(self) -> str:
        cond = self.condition.sql() if self.condition is not None else "true"
        sets = _assignments_sql(self.assignments)
        if self.mode == "copy-on-write" or self.condition is None:
            return (f"WriteUpdate {self.table} copy-on-write: rewrite the files holding rows WHERE {cond}, "
                    f"with SET {sets} applied to them")
        return (f"WriteUpdate {self.table} merge-on-read: INSERT INTO {self.table}.UPDATE (file_path, pos, <new columns>) "
                f"SELECT <file>, <position>, <row with SET {sets}> FROM {self.table} WHERE {cond}; "
                "delete part clustered by data file partition, new rows by their new partition")


@dataclass(frozen=True)
class MergeAction:
    """One WHEN clause: kind 'update', 'delete' or 'insert'; its condition (None: always) and
    its assignments ((JVM key, JVM value) pairs)."""

    kind: str
    condition: Any = None
    assignments: tuple = ()

    def sql(self) -> str:
        cond = f" AND {self.condition.sql()}" if self.condition is not None else ""
        if self.kind == "delete":
            return f"{cond} THEN DELETE"
        return f"{cond} THEN {self.kind.upper()} {_assignments_sql(self.assignments)}"


@dataclass(frozen=True, eq=False)
class MergeIntoLake(Node):
    """MERGE INTO a lake table, as Spark resolved it. Not runnable: the row-level batch
    rewrites it (rules/rewrite_merge.py)."""

    table: TableRef
    relation: LakeRelation
    source: Any = field(repr=False)  # JVM plan of the source
    condition: Any = field(repr=False)
    matched: tuple = ()
    not_matched: tuple = ()
    not_matched_by_source: tuple = ()
    jvm: Any = field(default=None, repr=False)

    def describe(self) -> str:
        return f"MergeIntoLake {self.table} ON {self.condition.sql()}"


@dataclass(frozen=True, eq=False)
class WriteMerge(Command):
    """MERGE INTO on the split write: target rows (with file and position) joined with the
    source; each joined row's first WHEN clause that holds decides: update (a position delete
    and a new row), delete (a position delete), insert (a new row). One snapshot. With ``mode``
    copy-on-write (write.merge.mode), the target files holding updated or deleted rows are
    rewritten instead (their other rows carried over), and no delete file is written."""

    result_schema = MERGE_RESULT

    table: TableRef
    relation: LakeRelation
    source: Any = field(repr=False)
    condition: Any = field(repr=False)
    matched: tuple = ()
    not_matched: tuple = ()
    not_matched_by_source: tuple = ()
    mode: str = "merge-on-read"
    jvm: Any = field(default=None, repr=False)
    files: Any = field(default=None, repr=False)  # lakerules.scan.row_files.FilePlan of the target

    def describe(self) -> str:
        lines = [f"WriteMerge {self.table} {self.mode}: target rows with <file>, <position> "
                 f"{self.join_type().upper()} JOIN source ON {self.condition.sql()}"]
        lines += [f"  WHEN MATCHED{a.sql()}" for a in self.matched]
        lines += [f"  WHEN NOT MATCHED{a.sql()}" for a in self.not_matched]
        lines += [f"  WHEN NOT MATCHED BY SOURCE{a.sql()}" for a in self.not_matched_by_source]
        if self.mode == "copy-on-write":
            lines.append("  -> the target files holding updated or deleted rows rewritten (their other rows kept) "
                         "+ new rows (updated and inserted), one snapshot, no delete files")
        else:
            lines.append("  -> position deletes (updated and deleted rows) + new rows (updated and inserted), one snapshot")
        if self.files is not None:
            lines += ["  target " + line for line in self.files.describe(drops_whole=False)]
        return "\n".join(lines) + "\nsource:\n" + self.source.treeString().rstrip()

    def join_type(self) -> str:
        if self.not_matched and self.not_matched_by_source:
            return "fullouter"
        if self.not_matched:
            return "rightouter"
        if self.not_matched_by_source:
            return "leftouter"
        return "inner"


def _with_files(head: str, files, drops_whole: bool) -> str:
    """A command's description, then its planned files (lakerules.scan.row_files.FilePlan), one per line."""
    if files is None:
        return head
    return "\n".join([head, *("  " + line for line in files.describe(drops_whole))])


def _assignments_sql(assignments) -> str:
    return ", ".join(f"{k.sql()} = {v.sql()}" for k, v in assignments)


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
        target = _writable(_relation(plan.table()))
        return WriteToLake(
            table=target.table,
            mode=_WRITE_MODES[name],
            query=from_jvm(spark, plan.query()),
            delete_condition=plan.deleteExpr() if name == "OverwriteByExpression" else None,
            jvm=plan,
            options=tuple(sorted(J.scala_map(plan.writeOptions()).items())),
        )
    if name == "WriteToMicroBatchDataSource" and _is_lake_relation(plan.relation()):
        batch = J.option_value(plan.batchId())
        if batch is not None:  # Spark sets it on each batch's plan, before running it
            return StreamWriteToLake(
                table=_relation(plan.relation()).table,
                query=from_jvm(spark, plan.query()),
                query_id=str(plan.queryId()),
                batch_id=int(batch),
                mode=str(plan.outputMode().toString()).lower(),
                options=tuple(sorted(J.scala_map(plan.writeOptions()).items())),
                jvm=plan,
            )
    if name == "UpdateTable":
        target = _unaliased(plan.table())
        if _is_lake_relation(target):
            rel = _writable(_relation(target))
            cond = plan.condition()
            cond = J.option_value(cond) if hasattr(cond, "isDefined") else cond
            if cond is not None and J.simple_name(cond) == "Literal" and cond.sql() == "true":
                cond = None
            assignments = tuple((a.key(), a.value()) for a in J.from_seq(plan.assignments()))
            return UpdateLake(table=rel.table, relation=rel, assignments=assignments, condition=cond, jvm=plan)
    if name == "MergeIntoTable":
        target = _unaliased(plan.targetTable())
        if _is_lake_relation(target):
            rel = _writable(_relation(target))
            return MergeIntoLake(
                table=rel.table, relation=rel, source=plan.sourceTable(), condition=plan.mergeCondition(),
                matched=_merge_actions(plan.matchedActions()),
                not_matched=_merge_actions(plan.notMatchedActions()),
                not_matched_by_source=_merge_actions(plan.notMatchedBySourceActions()),
                jvm=plan,
            )
    if name == "DeleteFromTable":
        target = _unaliased(plan.table())
        if _is_lake_relation(target):
            rel = _writable(_relation(target))
            cond = plan.condition()
            is_true = J.simple_name(cond) == "Literal" and cond.sql() == "true"
            return DeleteFromLake(table=rel.table, relation=rel, condition=None if is_true else cond, jvm=plan)
    if name == "TruncateTable" and _is_resolved_lake_table(plan.table()):
        rel = _writable(_relation(bridge.relationOf(plan.table())))
        return DeleteFromLake(table=rel.table, relation=rel, condition=None, jvm=plan, truncate=True)
    if name == "DescribeColumn" and _is_resolved_lake_table(plan.relation()):
        rel = _relation(bridge.relationOf(plan.relation()))
        node = _describe_column(plan, rel.table)
        if node is not None:
            return node
    if name in ("CreateTableAsSelect", "ReplaceTableAsSelect") and _is_lake_catalog(plan.name()):
        return _ctas(spark, plan, name == "ReplaceTableAsSelect")
    kids = tuple(from_jvm(spark, c) for c in J.from_seq(plan.children()))
    return SparkNode(plan, kids)


def _describe_column(plan, table_ref: TableRef) -> DescribeLakeColumn | None:
    """Spark's DescribeColumn EXTENDED over a lake table, or None (another column form: Spark's)."""
    column = plan.column()
    if not plan.isExtended() or J.simple_name(column) != "AttributeReference":
        return None
    lake_table = plan.relation().table()
    metadata = column.metadata()
    snapshot = lake_table.snapshotId()
    return DescribeLakeColumn(
        table=table_ref,
        column=column.name(),
        data_type=column.dataType().catalogString(),
        comment=metadata.getString("comment") if metadata.contains("comment") else None,
        snapshot_id=None if snapshot < 0 else snapshot,
        metadata_table=lake_table.properties().get("lakerules.metadata-table"),
        jvm=plan,
    )


def _statement(alias_plan) -> StatementCommand | None:
    """SELECT * FROM t AS __lakerules_command_N, as lakerules.sql.statements parsed it."""
    alias = alias_plan.alias()
    if not pending.is_marker(alias):
        return None
    run = pending.get(alias)
    child = alias_plan.child()
    while J.simple_name(child) == "SubqueryAlias":  # Spark names the resolved relation too
        child = child.child()
    if not _is_lake_relation(child):
        raise LakeError(f"lakerules: this statement needs a lake table; {child.simpleString(1)} is not one")
    if run is None:
        raise LakeError("lakerules: this statement's plan is no longer held (many statements were parsed "
                        "since); run its SQL text again")
    return StatementCommand(table=_writable(_relation(child)).table, run_fn=run)


def _writable(rel: LakeRelation) -> LakeRelation:
    """The target of a write; a metadata table is refused."""
    if rel.metadata_table is not None:
        raise NotSupported(f"lakerules: metadata table {rel.table}.{rel.metadata_table} is read-only")
    return rel


def _unaliased(plan):
    """The relation under a row-level command's target alias (DELETE FROM t AS x)."""
    while J.simple_name(plan) == "SubqueryAlias":
        plan = plan.child()
    return plan


def _merge_actions(seq) -> tuple:
    out = []
    for a in J.from_seq(seq):
        kind = {"UpdateAction": "update", "DeleteAction": "delete", "InsertAction": "insert"}.get(J.simple_name(a))
        if kind is None:
            raise NotSupported(f"lakerules: MERGE action {a.simpleString(5)} is not supported")
        assignments = () if kind == "delete" else tuple((x.key(), x.value()) for x in J.from_seq(a.assignments()))
        out.append(MergeAction(kind, J.option_value(a.condition()), assignments))
    return tuple(out)


def split_conjuncts(expr) -> list:
    if J.simple_name(expr) == "And":
        return split_conjuncts(expr.left()) + split_conjuncts(expr.right())
    return [expr]


def _is_lake_table(table) -> bool:
    return J.class_name(table) == "io.lakerules.LakeTable"


def _is_resolved_lake_table(plan) -> bool:
    """A command's target table (ResolvedTable) that is a lake table."""
    return J.simple_name(plan) == "ResolvedTable" and _is_lake_table(plan.table())


def _is_lake_relation(plan) -> bool:
    return J.simple_name(plan) == "DataSourceV2Relation" and _is_lake_table(plan.table())


def _is_lake_catalog(ident_plan) -> bool:
    return J.simple_name(ident_plan) == "ResolvedIdentifier" and J.class_name(ident_plan.catalog()) == "io.lakerules.LakeCatalog"


def _relation(plan) -> LakeRelation:
    t = plan.table()
    snapshot = t.snapshotId()
    meta = t.properties().get("lakerules.metadata-table")
    ref = TableRef(t.catalogName(), tuple(t.namespace()), t.tableName(), t.ref())
    if meta is not None:  # a metadata table: the relation names its base table
        import json

        base = json.loads(t.properties().get("lakerules.metadata-table.base"))
        ref = TableRef(t.catalogName(), tuple(base[:-1]), base[-1])
    return LakeRelation(
        table=ref,
        metadata_table=meta,
        snapshot_id=None if snapshot < 0 else snapshot,
        time_travel=bool(plan.timeTravelSpec().isDefined()),
        output=tuple(Attribute(a.name(), a) for a in J.from_seq(plan.output())),
        jvm=plan,
        options=_options(plan.options()),
    )


def _options(options) -> tuple:
    """A relation's read options (a CaseInsensitiveStringMap) as sorted (lower-case key, value)
    pairs; one JVM call when there are none (a Py4J map is read entry by entry)."""
    if options.isEmpty():
        return ()
    return tuple(sorted((str(k).lower(), str(v)) for k, v in options.asCaseSensitiveMap().items()))


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
        options=tuple(sorted(J.scala_map(plan.writeOptions()).items())),
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
    """The JVM plan for a lakerules plan. Nodes lakerules planned lower through
    ``ctx.lowerings`` (by node type, the nearest base class that has one): a scan becomes a
    file read, a command one JVM command node that runs when Spark executes it. Lowering runs
    nothing."""

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
            case _:
                lowering = next((ctx.lowerings[c] for c in type(n).__mro__ if c in ctx.lowerings), None)
                if lowering is None:
                    raise TypeError(f"lakerules: no lowering for plan node {type(n).__name__}")
                return lowering(ctx, n, lower)

    return lower(node)
