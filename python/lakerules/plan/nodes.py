"""The plan lakerules rules work on: frozen dataclasses over Spark's JVM logical plan.

lakerules.plan.convert turns the parts of a resolved Spark plan that touch lake tables into these
nodes (``from_jvm``); everything else stays a ``SparkNode`` that wraps the JVM node. Rules rewrite
this tree; ``to_jvm`` turns it back, lowering planned commands to JVM command nodes (which run
only when Spark executes them) and reusing every JVM node that did not change.

Nodes compare by identity: a rule that changes nothing returns the same object, and
``transform_up`` rebuilds a parent only when one of its children is a new object.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable



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
    """An output column of a Spark node: the name, the JVM attribute and its exprId's id (read
    with the name in one call for all of a node's columns: lakerules.spark.attributes)."""

    name: str
    jvm: Any = field(repr=False)
    expr_id: int = field(repr=False)


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
    """A statement Spark's grammar lacks (``statement``: its data, lakerules.plan.statements), on
    the lake table Spark resolved (``table``), or on a catalog (None: CALL, whose table is an
    argument). ``planned``: what its planner decided ahead (OPTIMIZE's files and bins), if any."""

    table: TableRef | None
    statement: Any
    planned: Any = field(default=None, repr=False)

    def describe(self) -> str:
        head = self.statement.describe()
        if self.planned is None:
            return head
        return "\n".join([head, *("  " + line for line in self.planned.describe())])


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
        if not self.not_matched_by_source:
            lines.append("  at run time: target files narrowed by the source's keys (manifest bounds); a source under "
                         "spark.sql.autoBroadcastJoinThreshold is broadcast and inner-joined with the key and condition "
                         "columns, inserts by an anti-join with the matches")
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
    """A command's description, then its planned files (row_plans.FilePlan), one per line."""
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
