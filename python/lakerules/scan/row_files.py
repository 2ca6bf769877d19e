"""What a row-level command will do, decided while it is planned (no Spark job, no write):
the table's write mode (write.<statement>.mode), its delete granularity, the checks on an
UPDATE's assignments, and the files it touches
(:class:`FilePlan`, which EXPLAIN shows). The rules
(rules/rewrite_delete.py, rules/rewrite_update.py) call these; lakerules.rowlevel.run runs the
planned commands."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pyiceberg.expressions import AlwaysTrue, BooleanExpression, Not, NotEqualTo, NotIn, NotStartsWith
from pyiceberg.expressions.visitors import (
    bind,
    expression_evaluator,
    extract_field_ids,
    strict_projection,
)
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import IsolationLevel
from pyiceberg.typedef import KeyDefaultDict

from lakerules.spark import jvm as J
from lakerules.iceberg import pyiceberg_edge as edge
from lakerules.scan import bloom_filters, lineage, manifest_columns, manifest_job, manifests
from lakerules.errors import LakeError
from lakerules.plan.expressions import to_iceberg
from lakerules.scan.planning import PlannedFile, ScanPlan, plan_scan

MODES = ("merge-on-read", "copy-on-write")


def _mode(table, statement: str) -> str:
    """The table's write.<statement>.mode (Iceberg's property); v1 tables can only copy on write."""
    name = f"write.{statement}.mode"
    mode = table.properties.get(name, "merge-on-read").lower()
    if mode not in MODES:
        raise LakeError(f"lakerules: table property {name}={mode!r} is not one of {list(MODES)}")
    return "copy-on-write" if table.format_version < 2 else mode


STATEMENTS = ("delete", "update", "merge")


def isolation_level(table, statement: str) -> IsolationLevel:
    """The table's ``write.<statement>.isolation-level`` (Iceberg's properties, one per row-level
    statement): ``serializable`` (the default) or ``snapshot``; any other value is an error.
    Statements read it while they are planned, so a bad value fails before anything is written."""
    if statement not in STATEMENTS:
        raise ValueError(f"no isolation level for statement {statement!r}")
    name = f"write.{statement}.isolation-level"
    value = table.properties.get(name, IsolationLevel.SERIALIZABLE.value)
    try:
        return IsolationLevel(value.strip().lower())
    except ValueError:
        raise LakeError(
            f"lakerules: table property {name}={value!r} is not one of "
            f"{[level.value for level in IsolationLevel]}; nothing was changed"
        ) from None


def statement_properties(table, statement: str) -> tuple[str, str | None]:
    """What the table's properties say for a row-level ``statement`` (delete, update, merge),
    read while it is planned so a bad value fails before anything is written: its write mode,
    and its delete granularity when it writes position deletes (merge-on-read; else None). The
    statement's isolation level (isolation_level) and the granularity are checked in
    either mode."""
    mode = _mode(table, statement)
    isolation_level(table, statement)
    granularity = delete_granularity(table)
    return mode, (granularity if mode == "merge-on-read" else None)


GRANULARITIES = ("file", "partition")


def delete_granularity(table) -> str:
    """The table's write.delete.granularity (Iceberg's property): ``file`` (the default, as in
    Iceberg), one position delete file per data file it deletes from, whose file_path bounds name
    that file only; ``partition``, one delete file per partition."""
    name = "write.delete.granularity"
    value = table.properties.get(name, "file").strip().lower()
    if value not in GRANULARITIES:
        raise LakeError(f"lakerules: table property {name}={value!r} is not one of {list(GRANULARITIES)}")
    return value


def resolve_assignments(spark, verb: str, table, relation, assignments, *, insert: bool = False) -> tuple:
    """An UPDATE's (or a MERGE action's) assignments resolved as Spark's own DML resolves them:
    one (column, value) pair per column of the relation, nested-field assignments folded into
    their struct, struct values matched to the column's fields by name (at every level), each
    value cast under spark.sql.storeAssignmentPolicy, NOT NULL checked;
    Spark's errors for duplicate or conflicting assignments and for a MERGE INSERT that leaves a
    column without a value (lakerules.spark.jvm.align_assignments). Values must be deterministic."""
    for key, value in assignments:
        if not value.deterministic():
            raise LakeError(f"lakerules: {verb} {table}: the value {value.sql()} for {key.sql()} is not deterministic")
    parts = [table.catalog, *table.namespace, table.name]
    return J.align_assignments(spark, parts, [a.jvm for a in relation.output], assignments, insert)


def check_condition(verb: str, table, condition, what: str = "condition") -> None:
    """A row-level command's conditions must be deterministic: the rows they match are read
    more than once (to count, to write deletes and new rows)."""
    if condition is not None and not condition.deterministic():
        raise LakeError(f"lakerules: {verb} {table}: the {what} {condition.sql()} is not deterministic")


# ---- which files ------------------------------------------------------------------------------


def has_negation(expr: BooleanExpression) -> bool:
    """Whether expr negates: Iceberg's NOT (and !=, NOT IN, NOT STARTS WITH) holds on NULL, SQL's
    does not (NULL != 5 is not true), so such a translation proves nothing about SQL's rows."""
    if isinstance(expr, (Not, NotEqualTo, NotIn, NotStartsWith)):
        return True
    return any(has_negation(getattr(expr, side)) for side in ("left", "right", "child") if hasattr(expr, side))


def every_row_matches(table: Table, expr: BooleanExpression):
    """A test that proves, in Iceberg's expression semantics, that every row of a data file
    matches expr: from its partition (the strict projection of expr holds on it) or from its
    column metrics. Metrics prove nothing for a field inside a struct (pyiceberg's strict
    evaluator reads top-level columns only): such a file is read, never dropped unread."""
    schema = table.schema()
    top_level = {f.field_id for f in schema.fields}
    bound = bind(schema, expr, case_sensitive=True)
    metrics = edge.strict_metrics(schema, expr) if extract_field_ids(bound) <= top_level else None

    def partition_test(spec_id: int):
        spec = table.specs()[spec_id]
        projected = strict_projection(schema, spec)(expr)
        return expression_evaluator(Schema(*spec.partition_type(schema).fields), projected, True)

    tests = KeyDefaultDict(partition_test)
    return lambda f: bool(tests[f.spec_id](f.partition)) or (metrics is not None and metrics(f) is True)


@dataclass(frozen=True)
class FilePlan:
    """The data files a DELETE, UPDATE or MERGE touches, planned at one snapshot.

    ``scan``: the live data files that may hold matching rows (with the delete files that
    apply to them); of those, ``whole`` are proven, from their partition or column metrics, to
    hold only matching rows (a DELETE drops them without reading them) and ``read`` are read
    to find the matching rows. ``granularity``: how the command's position deletes are
    grouped into files (delete_granularity); None: it writes none (copy-on-write)."""

    snapshot_id: int | None
    expr: BooleanExpression = field(default_factory=AlwaysTrue)
    scan: ScanPlan = field(default_factory=ScanPlan)
    whole: tuple[PlannedFile, ...] = ()
    read: tuple[PlannedFile, ...] = ()
    granularity: str | None = None

    def describe(self, drops_whole: bool) -> list[str]:
        """EXPLAIN's lines for this plan."""
        if self.snapshot_id is None:
            return ["table has no snapshot: nothing to change"]
        s = self.scan
        lines = [f"snapshot {self.snapshot_id}: {len(s.files)} of {s.total_data_files} data files may hold matching rows "
                 f"(pruned by {self.expr})"]
        if drops_whole:
            rows = sum(p.file.record_count for p in self.whole)
            lines.append(f"dropped whole, not read (every row matches, by partition or column metrics): "
                         f"{len(self.whole)} files, {rows} rows before deletes")
        with_deletes = sum(1 for p in self.read if p.position_deletes or p.equality_deletes)
        lines.append(f"read to find matching rows: {len(self.read)} files, {with_deletes} of them with delete files")
        parts = Counter((p.file.spec_id, _partition_text(p.file.partition)) for p in self.read)
        if self.granularity == "file" and self.read:
            lines.append(f"delete files (write.delete.granularity=file): at most one per data file read, "
                         f"{len(self.read)} files in {len(parts)} partitions")
        elif self.granularity == "partition" and parts:
            shown = ", ".join(f"{text or 'unpartitioned'} ({n} files)" for (_, text), n in list(parts.items())[:8])
            more = f", and {len(parts) - 8} more" if len(parts) > 8 else ""
            lines.append(f"partitions written to (at most one delete file each): {len(parts)}: {shown}{more}")
        return lines


def _partition_text(record) -> str:
    values = list(record) if record is not None else []
    return "/".join("null" if v is None else str(v) for v in values)


def plan_files(spark, table: Table, relation, condition, *, drop_whole: bool, prune: bool = True,
               granularity: str | None = None) -> FilePlan:
    """The files a row-level command on ``relation`` (a LakeRelation) with ``condition`` (a JVM
    expression, None: every row) touches at the table's current snapshot. ``drop_whole``: find
    the files every row of which matches (DELETE). ``prune``: False reads every file (a MERGE
    that must see the rows matching nothing). ``granularity``: the command's delete
    granularity, for EXPLAIN (None: it writes no delete files)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return FilePlan(None, granularity=granularity)
    expr, exact = AlwaysTrue(), True
    if condition is not None and prune:
        computed = lineage.requested(table, table.schema(), relation.output)  # v3's row lineage: no metrics
        columns = {a.expr_id: a.name for a in relation.output if a.name not in computed}
        expr, exact = to_iceberg(condition, columns)
    remote = manifest_job.remote_reader(spark, lambda key: spark.conf.get(key, None), table, table.schema(),
                                        manifests.CACHE)
    planned = plan_scan(table, snapshot.snapshot_id, expr, remote=remote, bulk=manifest_columns.reader(spark, table))
    # a key's row among many small files: only those whose bloom filters admit the key are read
    planned = bloom_filters.prune(spark, spark.conf.get, table, table.schema(), planned, expr)
    proven = None
    if drop_whole and exact and condition is not None and not _has_subquery(spark, condition):
        proven = _all_rows_match(table, expr)
    whole = tuple(p for p in planned.files if proven is not None and proven(p.file))
    read = tuple(p for p in planned.files if proven is None or not proven(p.file))
    return FilePlan(snapshot.snapshot_id, expr, planned, whole, read, granularity)


def _all_rows_match(table, expr: BooleanExpression):
    """A test that proves a data file's every row matches expr, from its partition (strict
    projection) or its column metrics; None when expr has a negation, whose Iceberg meaning
    (NULL is not equal to 5) differs from SQL's (NULL != 5 is not true)."""
    if has_negation(expr) or expr == AlwaysTrue():
        return None
    return every_row_matches(table, expr)


def _has_subquery(spark, condition) -> bool:
    return J.has_subquery(spark, condition)
