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
   in one write job by the data file they point at (``write.delete.granularity=file``, the
   default: one delete file per data file, its file_path bounds naming that file only) or by
   its partition (``partition``: one delete file per partition), sorted by path then position.
   The path written is the data file's path in the manifest.
4. One snapshot commits the delete files and the dropped files, validated against what was
   committed since the read (row_delta.Validation): a data file removed meanwhile (say by a
   concurrent OPTIMIZE) is a conflict, never deleted rows coming back.

With ``write.delete.mode=copy-on-write`` (or a v1 table) the files with matched rows are
rewritten without them instead. No WHERE removes every data and delete file.

UPDATE runs here too (section below), MERGE INTO in lakerules.rowlevel.merge, each by its own table properties:
``write.update.mode`` / ``write.merge.mode`` choose merge-on-read (position deletes + new rows)
or copy-on-write (the touched files rewritten, _rewrite_files, which DELETE's copy-on-write
shares), and ``write.<statement>.isolation-level`` the commit's validation
(row_delta.Validation.statement).
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.manifest import DataFileContent
from pyiceberg.table.snapshots import Operation
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from lakerules.write import deletion_vectors, files as write, position_deletes, row_delta
from lakerules.spark import jvm as J, progress
from lakerules.scan import lineage as row_lineage, row_files as row_plans
from lakerules.rowlevel import v3_rows
from lakerules.errors import LakeError
from lakerules.plan import nodes as P
from lakerules.plan.nodes import LakeScan
from lakerules.scan.planning import ScanPlan, plan_scan
from lakerules.scan.read import FILE_COL, POS_COL, scan_dataframe, status_names

_CATALYST = "org.apache.spark.sql.catalyst"


def run_delete(ctx, node):
    spark = ctx.spark
    t = node.table
    table = ctx.catalogs.load_for_write(t, ctx.conf)  # the metadata the commit validates from
    snapshot = table.current_snapshot()
    if snapshot is None:
        return _affected(spark, 0)
    condition = node.condition
    if condition is None:
        return _truncate(ctx, table, snapshot)
    files = node.files
    if files is None or files.snapshot_id != snapshot.snapshot_id:  # the table moved since planning
        files = row_plans.plan_files(spark, table, node.relation, condition, drop_whole=True)
    expr, planned, whole, partial = files.expr, files.scan, list(files.whole), list(files.read)

    matched, collected, counts, partitions = _matched_positions(ctx, node, table, snapshot, planned, partial)
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
            _merge_on_read(ctx, table, snapshot, expr, matched, collected, partitions, whole, entire, touched,
                           sum(counts[p.file.file_path] for p in touched))
    finally:
        if matched is not None:
            matched.unpersist()
    return _affected(spark, affected)


def _partial_scan(node, table, snapshot, planned: ScanPlan, files) -> LakeScan:
    return LakeScan(
        table=node.table,
        snapshot_id=snapshot.snapshot_id,
        output=node.relation.output,
        iceberg=table,
        schema=table.schema(),
        plan=dc_replace(planned, files=tuple(files)),
    )


def _target_rows(ctx, scan: LakeScan, row_ids: bool):
    """The scan's live rows with FILE_COL and POS_COL, and on a v3 table (``row_ids``) each row's
    lineage as v3_rows.ROW_COL and LAST_COL (the rows a statement writes again keep them)."""
    if not row_ids:
        return scan_dataframe(ctx, scan, positions=True)
    return v3_rows.with_lineage(scan_dataframe(ctx, scan, positions=True,
                                               lineage=v3_rows.read_columns(scan.output, scan.schema)))


def _row_id_cols(row_ids: bool) -> list[str]:
    """The lineage columns a v3 statement carries beside FILE_COL and POS_COL (none otherwise)."""
    return [v3_rows.ROW_COL, v3_rows.LAST_COL] if row_ids else []


def _rows_of(ctx, node, scan: LakeScan, keep_matching: bool, row_ids: bool = False):
    """The scan's live rows with FILE_COL and POS_COL, as a DataFrame over a JVM plan where the
    table's columns carry the exprIds the statement's condition refers to; filtered to rows
    where the condition is true (keep_matching) or to the others (copy-on-write's kept rows; no
    condition: every row). ``row_ids`` (v3): each row's _row_id too, as v3_rows.ROW_COL, before
    FILE_COL."""
    spark = ctx.spark
    df = _target_rows(ctx, scan, row_ids)
    names = [a.name for a in node.relation.output]
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise LakeError(
            f"lakerules: column(s) {missing} of {node.table} changed while the statement was planned; run it again"
        )
    plan = J.analyzed(J.select(df, [*names, *_row_id_cols(row_ids), FILE_COL, POS_COL]))
    plan = J.rename_project(spark, plan, [a.jvm for a in node.relation.output])
    condition = node.condition
    if condition is None:
        return J.dataframe(spark, plan)
    if not keep_matching:
        # a row stays unless the condition is TRUE for it (NULL keeps it, as SQL's WHERE does)
        condition = J.not_true(spark, condition)
    return J.dataframe(spark, J.filter_plan(spark, condition, plan))


def _matched_positions(ctx, node, table, snapshot, planned, partial):
    """(file_path, pos, partition index) of every live row the condition matches, cached when
    they may be read again (see below); the positions on the driver (merge-on-read, up to
    positionDeleteDriverRows: the delete files' or deletion vectors' rows) or only counted; and the
    number matched per data file (manifest path). One job, no shuffle.

    The matched rows are read again only by merge-on-read whose positions were too many for the
    driver (it then writes its delete files or deletion vectors from them). Otherwise (copy-on-write
    reads the files itself; partial files holding at most positionDeleteDriverRows rows in all, so
    that every position comes to the driver) they are not cached: a cache costs a job of its own
    (AQE materializes it) and took ~0.2 s of a 0.6-s point DELETE."""
    if not partial:
        return None, None, {}, []
    spark = ctx.spark
    progress.step(spark, "find matching rows")
    rows = _rows_of(ctx, node, _partial_scan(node, table, snapshot, planned, partial), True)
    files, partitions = _file_lookup(spark, table, partial, "file_path")
    matched = (
        rows.select(FILE_COL, POS_COL)
        .join(F.broadcast(files), F.col(FILE_COL) == F.col("__name"))
        .select("file_path", F.col(POS_COL).alias("pos"), write.PART_COL)
    )
    merge_on_read = node.mode != "copy-on-write"
    limit = position_deletes.driver_rows(spark) if merge_on_read else 0
    if merge_on_read and sum(p.file.record_count for p in partial) > limit:
        matched = matched.persist()
    collected = position_deletes.collect(spark, matched.withColumn("kind", F.lit("d")), limit)
    return matched, collected, _per_file(collected), partitions


def _per_file(collected) -> dict[str, int]:
    """Collected positions counted per data file (manifest path), whatever their kind and group."""
    counts: dict[str, int] = {}
    for (_, _, path), n in collected.counts.items():
        counts[path] = counts.get(path, 0) + n
    return counts


def _file_lookup(spark, table, planned_files, path_column: str):
    """A small LocalRelation from Spark's name of each file (``__name``, what FILE_COL holds) to
    its manifest path (``path_column``) and its delete group index (PART_COL), and the groups
    those indexes point into (see _delete_groups)."""
    names = status_names(spark, [p.file.file_path for p in planned_files])
    groups, index = _delete_groups(planned_files, row_plans.delete_granularity(table) == "file")
    schema = StructType([StructField("__name", StringType()), StructField(path_column, StringType()),
                         StructField(write.PART_COL, IntegerType())])
    frame = J.local_frame(
        spark,
        [(names[p.file.file_path], p.file.file_path, i) for p, i in zip(planned_files, index)],
        schema,
    )
    return frame, groups


def _live_rows(ctx, table, snapshot, planned_files) -> int:
    """Live rows of whole data files: record counts, or a count where deletes apply."""
    plain = sum(p.file.record_count for p in planned_files if not p.position_deletes and not p.equality_deletes)
    with_deletes = [p for p in planned_files if p.position_deletes or p.equality_deletes]
    if not with_deletes:
        return plain
    progress.step(ctx.spark, "count live rows of files dropped whole")
    scan = LakeScan(table=None, snapshot_id=snapshot.snapshot_id, output=(), iceberg=table, schema=table.schema(),
                    plan=ScanPlan(files=tuple(with_deletes)))
    return plain + scan_dataframe(ctx, scan).count()


# ---- commits ------------------------------------------------------------------------------------


def _merge_on_read(ctx, table, snapshot, expr, matched, collected, partitions, whole, entire, touched, deleted: int):
    spark = ctx.spark
    written, kept, replaced = [], [], []
    if touched:
        rows = matched
        skip = [p.file.file_path for p in entire]
        if skip:
            rows = rows.where(~F.col("file_path").isin(skip))
        if table.format_version >= 3:  # deletion vectors, one per data file (lakerules.write.deletion_vectors)
            written, kept, replaced = deletion_vectors.write(spark, table, snapshot, rows, touched, whole,
                                                             collected=collected, skip=skip)
        else:
            written = position_deletes.write(spark, table, rows, partitions, rows=deleted, collected=collected,
                                             skip=skip)
    try:
        row_delta.commit(
            table, [], written + kept,
            {"lakerules.operation": "delete"},
            removed_data_files=[p.file for p in whole],
            removed_delete_files=dangling_deletes(table, snapshot, whole) + replaced,
            validation=row_delta.Validation(
                must_exist=frozenset(p.file for p in whole + touched),
                # v3: one DV per data file; a DV that landed meanwhile on a touched file is a conflict
                no_new_deletes=frozenset(p.file for p in touched) if table.format_version >= 3 else frozenset(),
                conflict_filter=expr,
                statement="delete",
            ),
            operation=Operation.DELETE if written or whole else None,
        )
    except BaseException as e:
        write.discard(table, list({f.file_path: f for f in written}.values()), e)  # DVs share their Puffin file
        raise


def _delete_groups(planned_files, by_file: bool) -> tuple[list, list[int]]:
    """The groups position deletes are written in, one delete file each: one per data file
    (``by_file``, write.delete.granularity=file) or one per distinct (spec id, partition)
    (granularity partition). Returns each group's (spec id, partition), and each planned
    file's group index, which the matched rows carry in PART_COL."""
    if by_file:
        return [(p.file.spec_id, p.file.partition) for p in planned_files], list(range(len(planned_files)))
    keys: dict[tuple, int] = {}
    groups, index = [], []
    for p in planned_files:
        key = (p.file.spec_id, tuple(p.file.partition))
        if key not in keys:
            keys[key] = len(groups)
            groups.append((p.file.spec_id, p.file.partition))
        index.append(keys[key])
    return groups, index


def _copy_on_write(ctx, node, table, snapshot, expr, whole, touched):
    kept = None
    lineage = v3_rows.applies(table)  # v3: the kept rows keep their lineage
    row_lineage.check(table, "DELETE")
    if touched:
        planned = ScanPlan(files=tuple(touched))
        kept = _rows_of(ctx, node, _partial_scan(node, table, snapshot, planned, touched), False, row_ids=lineage)
        kept = _as_written(table, node, kept, lineage)
    _rewrite_files(
        ctx, node, table, kept, whole + touched,
        {"lakerules.operation": "delete", "lakerules.delete-mode": "copy-on-write"},
        row_delta.Validation(
            must_exist=frozenset(p.file for p in whole + touched),
            no_new_deletes=frozenset(p.file for p in touched),
            conflict_filter=expr,
            statement="delete",
        ),
        removed_deletes=dangling_deletes(table, snapshot, whole + touched),
    )


def _rewrite_files(ctx, node, table, rows, removed, summary: dict, validation: row_delta.Validation,
                   removed_deletes=()) -> None:
    """Copy-on-write's write and commit (DELETE, UPDATE, MERGE): ``rows`` (the table's columns, on
    a v3 table then its lineage columns: _as_written; None: no rows) become new data files, and one snapshot adds them and removes the data files
    ``removed`` (PlannedFiles) and the delete files ``removed_deletes``; no delete file is
    written. The new files are deleted again if the commit fails."""
    written = []
    try:
        if rows is not None:
            fields = row_lineage.write_fields(table, row_lineage.NAMES) if v3_rows.applies(table) else None
            written = write.write_data_files(ctx, node.table.catalog, table, rows, fields=fields)
        row_delta.commit(
            table, written, [], summary,
            removed_data_files=[p.file for p in removed],
            removed_delete_files=list(removed_deletes),
            validation=validation,
            operation=Operation.OVERWRITE if written else Operation.DELETE,
        )
    except BaseException as e:
        write.discard(table, written, e)
        raise


def _as_written(table, node, rows, lineage: bool):
    """Copy-on-write's ``rows`` (the relation's columns, on v3 then ROW_COL and LAST_COL) as
    _rewrite_files writes them: the table's columns (then, v3, the lineage columns)."""
    if lineage:
        return v3_rows.rewritten(rows, v3_rows.data_columns(table, node.relation.output))
    return rows.select(*[J.column(a.name) for a in node.relation.output])


def _truncate(ctx, table, snapshot):
    """DELETE without WHERE: one snapshot that removes every data file and every delete file."""
    data, deletes = [], []
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            (data if entry.data_file.content == DataFileContent.DATA else deletes).append(entry.data_file)
    planned = plan_scan(table, snapshot.snapshot_id)
    affected = _live_rows(ctx, table, snapshot, list(planned.files))
    if data or deletes:
        row_delta.commit(
            table, [], [], {"lakerules.operation": "delete"},
            removed_data_files=data, removed_delete_files=deletes,
            validation=row_delta.Validation(must_exist=frozenset(data), conflict_filter=AlwaysTrue(), statement="delete"),
            operation=Operation.DELETE,
        )
    return _affected(ctx.spark, affected)


def dangling_deletes(table, snapshot, removed: list) -> list:
    """The delete files that apply to none of the snapshot's data files once ``removed``
    (PlannedFiles) are gone: removed in the same commit, as Iceberg drops the delete files of a
    partition it deletes whole, so that no live delete file is left pointing only at removed
    data. Read from the snapshot's whole (cached) plan; planning associates delete files
    conservatively (a file it may apply to counts), so one kept is never one still needed."""
    candidates = {d.file_path: d for p in removed for d in (*p.position_deletes, *p.equality_deletes)}
    if not candidates:
        return []
    gone = {p.file.file_path for p in removed}
    for p in plan_scan(table, snapshot.snapshot_id).files:
        if p.file.file_path not in gone:
            for d in (*p.position_deletes, *p.equality_deletes):
                candidates.pop(d.file_path, None)
            if not candidates:
                break
    return list(candidates.values())


def _update_validation(touched: list, expr: BooleanExpression, statement: str) -> row_delta.Validation:
    """What an UPDATE or MERGE (``statement``), which deletes rows of the touched files and writes
    new ones, needs still true when it commits: the touched files exist, no delete landed on them
    meanwhile (a row deleted meanwhile stays deleted), and, under the statement's serializable
    isolation, no file added meanwhile may hold rows expr matches."""
    files = frozenset(p.file for p in touched)
    return row_delta.Validation(must_exist=files, no_new_deletes=files, conflict_filter=expr, statement=statement)


def _affected(spark, n: int):
    return J.result_rows(spark, [(int(n),)], P.DML_RESULT)


# ---- UPDATE -------------------------------------------------------------------------------------


def _new_values(spark, node, plan, keep_positions: bool):
    """Project over plan (the relation's columns, then FILE_COL, POS_COL, on v3 after the row id):
    each column its assigned value or itself, then the columns after them if asked."""
    values = {key.exprId().id(): value for key, value in node.assignments}
    exprs = [values.get(a.expr_id, a.jvm) for a in node.relation.output]
    names = [a.name for a in node.relation.output]
    if keep_positions:
        for attr in J.from_seq(plan.output())[len(node.relation.output):]:
            exprs.append(attr)
            names.append(attr.name())
    return J.project_as(spark, plan, exprs, names)


def run_update(ctx, node):
    spark = ctx.spark
    t = node.table
    table = ctx.catalogs.load_for_write(t, ctx.conf)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return _affected(spark, 0)
    plan = node.files
    if plan is None or plan.snapshot_id != snapshot.snapshot_id:  # the table moved since planning
        plan = row_plans.plan_files(spark, table, node.relation, node.condition, drop_whole=False)
    expr, planned, files = plan.expr, plan.scan, list(plan.read)
    if not files:
        return _affected(spark, 0)
    if node.condition is None and (node.mode == "copy-on-write" or not v3_rows.applies(table)):
        # the seed's edge case: every row changes, so the files are rewritten, no delete files
        # (v3 merge-on-read: the split below, which drops each file whole and writes its rows with their ids)
        return _update_rewrite(ctx, node, table, snapshot, expr, planned, files, everything=True)
    if node.mode == "copy-on-write":
        return _update_rewrite(ctx, node, table, snapshot, expr, planned, files, everything=False)
    return _update_split(ctx, node, table, snapshot, expr, planned, files)


def _update_split(ctx, node, table, snapshot, expr, planned, files):
    """Merge-on-read: one read of the matched rows, cached with their new values, file and
    position; the delete part and the new rows are written from it and committed together."""
    spark = ctx.spark
    lineage = v3_rows.applies(table)  # v3: deletion vectors, and the rows written again keep their ids
    row_lineage.check(table, "UPDATE")
    progress.step(spark, "read matching rows with their new values")
    matched_plan = J.analyzed(_rows_of(ctx, node, _partial_scan(node, table, snapshot, planned, files), True,
                                       row_ids=lineage))
    updated = J.dataframe(spark, _new_values(spark, node, matched_plan, keep_positions=True))
    lookup, partitions = _file_lookup(spark, table, files, "__lakerules_path")
    rows = (updated.join(F.broadcast(lookup), F.col(FILE_COL) == F.col("__name"))
            .drop("__name", FILE_COL)
            .persist())
    written_data, written_deletes, removal = [], [], None
    try:
        deletes = rows.select(F.col("__lakerules_path").alias("file_path"), F.col(POS_COL).alias("pos"), write.PART_COL)
        # one job, no shuffle: the positions on the driver (up to positionDeleteDriverRows), else their counts
        collected = position_deletes.collect(spark, deletes.withColumn("kind", F.lit("d")),
                                             position_deletes.driver_rows(spark))
        counts = _per_file(collected)
        if not counts:
            return _affected(spark, 0)
        live = {p.file.file_path: p for p in files}
        touched = [live[path] for path in counts]
        if lineage:
            columns = v3_rows.data_columns(table, node.relation.output)
            written_data = v3_rows.write_rows(spark, node.table.catalog, table, rows, columns)
            removal = v3_rows.Removal(spark, table, snapshot, deletes, touched, counts, collected)
            written_deletes = removal.discardable()
        else:
            new_columns = [J.column(a.name) for a in node.relation.output]
            written_data = write.write_files(spark, node.table.catalog, table, rows.select(*new_columns), cluster=True)
            written_deletes = position_deletes.write(spark, table, deletes, partitions,
                                                     rows=sum(counts.values()), collected=collected)
        row_delta.commit(
            table, written_data, removal.delete_files if removal else written_deletes, {"lakerules.operation": "update"},
            removed_data_files=removal.removed_data_files if removal else (),
            removed_delete_files=removal.replaced if removal else (),
            validation=_update_validation(touched, expr, "update"),
            operation=Operation.OVERWRITE,
        )
    except BaseException as e:
        write.discard(table, written_data + written_deletes, e)
        raise
    finally:
        rows.unpersist()
    return _affected(spark, sum(counts.values()))


def _update_rewrite(ctx, node, table, snapshot, expr, planned, files, everything: bool):
    """Copy-on-write: the files with matched rows are rewritten, matched rows with their new
    values and the others as they were; without WHERE every file is."""
    spark = ctx.spark
    lineage = v3_rows.applies(table)  # v3: updated rows keep their ids, kept rows their whole lineage
    row_lineage.check(table, "UPDATE")
    progress.step(spark, "find the files to rewrite")
    scan = _partial_scan(node, table, snapshot, planned, files)
    if everything:
        touched = files
        matched = _rows_of_all(ctx, node, scan, row_ids=lineage)
        affected = None
    else:
        matched_rows = _rows_of(ctx, node, scan, True)
        counts = {r[0]: r[1] for r in matched_rows.groupBy(FILE_COL).count().collect()}
        names = status_names(spark, [p.file.file_path for p in files])
        touched = [p for p in files if names[p.file.file_path] in counts]
        affected = sum(counts.values())
        if not touched:
            return _affected(spark, 0)
        scan = _partial_scan(node, table, snapshot, planned, touched)
        matched = _rows_of(ctx, node, scan, True, row_ids=lineage)
    new_rows = J.dataframe(spark, _new_values(spark, node, J.analyzed(matched), keep_positions=lineage))
    if lineage:
        new_rows = v3_rows.changed(new_rows)
    rows = _as_written(table, node, new_rows, lineage)
    if not everything:
        rows = rows.unionByName(_as_written(table, node, _rows_of(ctx, node, scan, False, row_ids=lineage), lineage))
    rows = rows.persist()
    try:
        if affected is None:
            affected = new_rows.count()
        _rewrite_files(
            ctx, node, table, rows, touched,
            {"lakerules.operation": "update", "lakerules.update-mode": "copy-on-write"},
            _update_validation(touched, expr, "update"),
            removed_deletes=_all_delete_files(table, snapshot) if everything else dangling_deletes(table, snapshot, touched),
        )
    finally:
        rows.unpersist()
    return _affected(spark, affected)


def _rows_of_all(ctx, node, scan: LakeScan, row_ids: bool = False):
    """Every live row of the scan over a plan whose columns carry the relation's exprIds (then,
    ``row_ids``, its lineage as _target_rows carries it), with FILE_COL and POS_COL."""
    spark = ctx.spark
    df = _target_rows(ctx, scan, row_ids)
    names = [a.name for a in node.relation.output]
    plan = J.analyzed(J.select(df, [*names, *_row_id_cols(row_ids), FILE_COL, POS_COL]))
    return J.dataframe(spark, J.rename_project(spark, plan, [a.jvm for a in node.relation.output]))


def _all_delete_files(table, snapshot) -> list:
    return [
        e.data_file
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
        if e.data_file.content != DataFileContent.DATA
    ]
