"""Row-level commands run as writes (seed 002): DELETE FROM.

DELETE FROM t WHERE c, merge-on-read (the default), is the seed's

    INSERT INTO t.DELETE (file_path, pos) SELECT <file>, <position> FROM t WHERE c

1. The statement's read is planned on the table's current snapshot, pruned by c (a part of c
   that cannot be translated reads more, never less). Where c is a plain comparison of columns
   with constants, files whose partition or column metrics prove that every row matches are
   dropped whole without being read.
2. The other files are read with their deletes applied (rows already deleted are not matched
   again), each row with its file and position, and filtered by c, whatever Spark SQL c is
   (subqueries, correlated EXISTS): Spark evaluates it, Python only plans.
3. The matched (file, position) rows are counted per data file. A file whose every row matched
   (and that had no deletes) is dropped whole; the rest become position delete files, shuffled
   by the partition of the data file they point at and sorted by path then position, so each
   partition's deletes are one file written by one task. The path written is the data file's
   path in the manifest.
4. One snapshot commits the delete files and the dropped files, validated against what was
   committed since the read (commit.Validation): a data file removed meanwhile (say by a
   concurrent OPTIMIZE) is a conflict, never deleted rows coming back.

With ``write.delete.mode=copy-on-write`` (or a v1 table) the files with matched rows are
rewritten without them instead. No WHERE removes every data and delete file.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

from pyiceberg.expressions import (
    AlwaysTrue,
    BooleanExpression,
    Not,
    NotEqualTo,
    NotIn,
    NotStartsWith,
)
from pyiceberg.expressions.visitors import _StrictMetricsEvaluator, expression_evaluator, strict_projection
from pyiceberg.manifest import DataFileContent
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.typedef import KeyDefaultDict
from pyspark.sql import functions as F

from lakerules import commit, jvm as J, write
from lakerules.errors import LakeError
from lakerules.expressions import to_iceberg
from lakerules.plan import LakeScan
from lakerules.planning import ScanPlan, plan_scan
from lakerules.scan import FILE_COL, POS_COL, scan_dataframe, status_names

MODES = ("merge-on-read", "copy-on-write")
_CATALYST = "org.apache.spark.sql.catalyst"


def delete_mode(table) -> str:
    """The table's write.delete.mode (Iceberg's property); v1 tables can only copy on write."""
    mode = table.properties.get("write.delete.mode", "merge-on-read").lower()
    if mode not in MODES:
        raise LakeError(f"lakerules: table property write.delete.mode={mode!r} is not one of {list(MODES)}")
    if table.format_version < 2:
        return "copy-on-write"
    return mode


def run_delete(ctx, node):
    spark = ctx.spark
    t = node.table
    table = ctx.catalogs.load(t.catalog, t.namespace, t.name)  # the metadata the commit validates from
    snapshot = table.current_snapshot()
    if snapshot is None:
        return _affected(spark, 0)
    condition = node.condition
    if condition is not None and not condition.deterministic():
        raise LakeError(f"lakerules: DELETE FROM {t}: the condition {condition.sql()} is not deterministic")
    if condition is None:
        return _truncate(ctx, table, snapshot)

    columns = {a.jvm.exprId().id(): a.name for a in node.relation.output}
    expr, exact = to_iceberg(condition, columns)
    planned = plan_scan(table, snapshot.snapshot_id, expr)
    whole, partial = [], []
    proven = _all_rows_match(table, expr) if exact and not _has_subquery(spark, condition) else None
    for p in planned.files:
        (whole if proven is not None and proven(p.file) else partial).append(p)

    matched, counts, partitions = _matched_positions(ctx, node, table, snapshot, planned, partial)
    try:
        live = {p.file.file_path: p for p in partial}
        # a file whose every row matched (and that had no deletes) goes whole, with no delete file
        entire = [live[path] for path, n in counts.items()
                  if not live[path].position_deletes and not live[path].equality_deletes
                  and n == live[path].file.record_count]
        whole += entire
        touched = [live[path] for path in counts if live[path] not in entire]
        affected = _live_rows(ctx, table, snapshot, whole) + sum(counts[p.file.file_path] for p in touched)
        if not whole and not touched:
            return _affected(spark, 0)  # nothing matched: no snapshot
        if node.mode == "copy-on-write":
            _copy_on_write(ctx, node, table, snapshot, expr, whole, touched)
        else:
            _merge_on_read(ctx, table, expr, matched, partitions, whole, entire, touched)
    finally:
        if matched is not None:
            matched.unpersist()
    return _affected(spark, affected)


# ---- which files --------------------------------------------------------------------------------


def _all_rows_match(table, expr: BooleanExpression):
    """A test that proves a data file's every row matches expr, from its partition (strict
    projection) or its column metrics; None when expr has a negation, whose Iceberg meaning
    (NULL is not equal to 5) differs from SQL's (NULL != 5 is not true)."""
    if _has_negation(expr) or expr == AlwaysTrue():
        return None
    schema = table.schema()
    metrics = _StrictMetricsEvaluator(schema, expr)

    def partition_test(spec_id: int):
        spec = table.specs()[spec_id]
        projected = strict_projection(schema, spec)(expr)
        return expression_evaluator(Schema(*spec.partition_type(schema).fields), projected, True)

    tests = KeyDefaultDict(partition_test)
    return lambda f: bool(tests[f.spec_id](f.partition)) or metrics.eval(f) is True


def _has_negation(expr) -> bool:
    if isinstance(expr, (Not, NotEqualTo, NotIn, NotStartsWith)):
        return True
    return any(_has_negation(getattr(expr, side)) for side in ("left", "right", "child") if hasattr(expr, side))


def _has_subquery(spark, condition) -> bool:
    return bool(spark._jvm.org.apache.spark.sql.catalyst.expressions.SubqueryExpression.hasSubquery(condition))


def _partial_scan(node, table, snapshot, planned: ScanPlan, files) -> LakeScan:
    return LakeScan(
        table=node.table,
        snapshot_id=snapshot.snapshot_id,
        output=node.relation.output,
        iceberg=table,
        schema=table.schema(),
        plan=dc_replace(planned, files=tuple(files)),
    )


def _rows_of(ctx, node, scan: LakeScan, keep_matching: bool):
    """The scan's live rows with FILE_COL and POS_COL, as a DataFrame over a JVM plan where the
    table's columns carry the exprIds the statement's condition refers to; filtered to rows
    where the condition is true (keep_matching) or to the others (copy-on-write's kept rows)."""
    spark = ctx.spark
    df = scan_dataframe(ctx, scan, positions=True)
    names = [a.name for a in node.relation.output]
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise LakeError(
            f"lakerules: column(s) {missing} of {node.table} changed while the statement was planned; run it again"
        )
    plan = J.analyzed(df.select(*[F.col(f"`{n}`") for n in names], FILE_COL, POS_COL))
    targets = spark._jvm.java.util.ArrayList()
    for a in node.relation.output:
        targets.add(a.jvm)
    plan = spark._jvm.io.lakerules.Bridge.renameProject(plan, targets)
    e = spark._jvm.org.apache.spark.sql.catalyst.expressions
    condition = node.condition
    if not keep_matching:
        # a row stays unless the condition is TRUE for it (NULL keeps it, as SQL's WHERE does)
        true = getattr(getattr(e, "Literal$"), "MODULE$").TrueLiteral()
        condition = e.Not(e.EqualNullSafe(condition, true))
    filtered = spark._jvm.org.apache.spark.sql.catalyst.plans.logical.Filter(condition, plan)
    return J.dataframe(spark, filtered)


def _matched_positions(ctx, node, table, snapshot, planned, partial):
    """(file_path, pos, partition index) of every live row the condition matches, cached, and
    the number matched per data file (manifest path)."""
    if not partial:
        return None, {}, []
    spark = ctx.spark
    rows = _rows_of(ctx, node, _partial_scan(node, table, snapshot, planned, partial), True)
    names = status_names(spark, [p.file.file_path for p in partial])
    partitions = _partitions(partial)
    keys = {(spec_id, tuple(values)): i for i, (spec_id, values) in enumerate(partitions)}
    files = spark.createDataFrame(
        [(names[p.file.file_path], p.file.file_path, keys[(p.file.spec_id, tuple(p.file.partition))]) for p in partial],
        f"__name string, file_path string, {write.PART_COL} int",
    )
    matched = (
        rows.select(FILE_COL, POS_COL)
        .join(F.broadcast(files), F.col(FILE_COL) == F.col("__name"))
        .select("file_path", F.col(POS_COL).alias("pos"), write.PART_COL)
        .persist()
    )
    counts = {r.file_path: r["count"] for r in matched.groupBy("file_path").count().collect()}
    return matched, counts, partitions


def _live_rows(ctx, table, snapshot, planned_files) -> int:
    """Live rows of whole data files: record counts, or a count where deletes apply."""
    plain = sum(p.file.record_count for p in planned_files if not p.position_deletes and not p.equality_deletes)
    with_deletes = [p for p in planned_files if p.position_deletes or p.equality_deletes]
    if not with_deletes:
        return plain
    scan = LakeScan(table=None, snapshot_id=snapshot.snapshot_id, output=(), iceberg=table, schema=table.schema(),
                    plan=ScanPlan(files=tuple(with_deletes)))
    return plain + scan_dataframe(ctx, scan).count()


# ---- commits ------------------------------------------------------------------------------------


def _merge_on_read(ctx, table, expr, matched, partitions, whole, entire, touched):
    spark = ctx.spark
    written = []
    if touched:
        rows = matched
        if entire:
            rows = rows.where(~F.col("file_path").isin([p.file.file_path for p in entire]))
        written = write.write_position_deletes(spark, table, rows, partitions)
    try:
        commit.row_delta(
            table, [], written,
            {"lakerules.operation": "delete"},
            removed_data_files=[p.file for p in whole],
            validation=commit.Validation(
                must_exist=frozenset(p.file for p in whole + touched),
                conflict_filter=expr,
                operation=Operation.DELETE,
            ),
            operation=Operation.DELETE if written or whole else None,
        )
    except BaseException:
        write.delete_files(table, written)
        raise


def _partitions(planned_files) -> list:
    """Every distinct (spec id, partition) of the planned files, in their order: the partition
    indexes of the matched rows."""
    keys: dict[tuple, tuple] = {}
    for p in planned_files:
        keys.setdefault((p.file.spec_id, tuple(p.file.partition)), (p.file.spec_id, p.file.partition))
    return list(keys.values())


def _copy_on_write(ctx, node, table, snapshot, expr, whole, touched):
    spark = ctx.spark
    written = []
    if touched:
        planned = ScanPlan(files=tuple(touched))
        kept = _rows_of(ctx, node, _partial_scan(node, table, snapshot, planned, touched), False)
        names = [a.name for a in node.relation.output]
        written = write.write_data_files(ctx, node.table.catalog, table, kept.select(*[F.col(f"`{n}`") for n in names]))
    try:
        commit.row_delta(
            table, written, [],
            {"lakerules.operation": "delete", "lakerules.delete-mode": "copy-on-write"},
            removed_data_files=[p.file for p in whole + touched],
            validation=commit.Validation(
                must_exist=frozenset(p.file for p in whole + touched),
                no_new_deletes=frozenset(p.file for p in touched),
                conflict_filter=expr,
                operation=Operation.DELETE,
            ),
            operation=Operation.OVERWRITE if written else Operation.DELETE,
        )
    except BaseException:
        write.delete_files(table, written)
        raise


def _truncate(ctx, table, snapshot):
    """DELETE without WHERE: one snapshot that removes every data file and every delete file."""
    data, deletes = [], []
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            (data if entry.data_file.content == DataFileContent.DATA else deletes).append(entry.data_file)
    planned = plan_scan(table, snapshot.snapshot_id)
    affected = _live_rows(ctx, table, snapshot, list(planned.files))
    if data or deletes:
        commit.row_delta(
            table, [], [], {"lakerules.operation": "delete"},
            removed_data_files=data, removed_delete_files=deletes,
            validation=commit.Validation(must_exist=frozenset(data), conflict_filter=AlwaysTrue()),
            operation=Operation.DELETE,
        )
    return _affected(ctx.spark, affected)


def _affected(spark, n: int):
    return J.result_rows(spark, [(int(n),)], "num_affected_rows long")
