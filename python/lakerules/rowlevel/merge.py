"""MERGE INTO, run when Spark executes it (planned by rules/rewrite_merge.py).

The target's rows (with their file and position) are joined with the source; each joined row's
first WHEN clause that holds decides what it becomes (update, delete, insert); merge-on-read
writes position deletes + new rows, copy-on-write rewrites the touched files; one snapshot.

Which target rows are read is decided here, at run time, from the source (issue 33; the source's
side: lakerules.rowlevel.merge_source), unless a WHEN NOT MATCHED BY SOURCE clause needs every
target row. A source Spark estimates small enough to broadcast is first computed once, into a
LocalRelation, which every later step reads:

1. **Key bounds.** For each ``t.k = <source expression>`` conjunct of the ON condition on a
   top-level integer, long or string column ``k``, one aggregate over the source gives the keys'
   minimum and maximum (NULL keys match nothing); the files the rule planned are planned again
   with ``k >= min AND k <= max`` added, so files (and partitions) whose manifest bounds lie
   outside the source's keys are not read. Source keys all NULL (or no source rows): no file is.
   For a small source (below), its distinct keys of the first such column are then collected
   (sorted) and a file is kept only if one of them lies within its bounds of that column: keys
   clustered in a few files, with new keys beyond every file, read those few files.
2. **Join strategy from sizes.** When the source is small (its rows times its row width at most
   ``spark.sql.autoBroadcastJoinThreshold``), the matches are found by an inner join of the
   remaining files' key and condition columns (with file and position; deletes applied) with the
   broadcast source: no shuffle of the target. The matches (about the source's size) are cached;
   the cardinality check (a target row matched by two source rows, when a WHEN MATCHED clause
   makes it matter) runs on them. Only if the WHEN MATCHED clauses need other target columns
   (a column an UPDATE keeps, one a clause condition reads) are those read, from the matched
   files only, joined on (file, position) with the matches. The source rows no target row
   matched (WHEN NOT MATCHED) are the source anti-joined with the matched target rows: a source
   row matching any target row matches one that is among the matches. A source whose keys are
   distinct (known when Spark's estimate let it come to the driver in step 1) needs no
   cardinality check; then (merge-on-read, v2) the changed rows' positions come to the driver,
   which counts them and writes the delete files (lakerules.write.position_deletes).
   A larger source (or ``autoBroadcastJoinThreshold`` -1) takes the outer join of the target's
   remaining files with the source, as before.

The snapshot summary says what was read: ``lakerules.merge.target-files-scanned`` (files whose
key and condition columns were read), ``lakerules.merge.target-files-matched`` (files holding a
matched row; on the outer-join path the files holding a changed one).
"""

from __future__ import annotations

from pyiceberg.table.snapshots import Operation
from pyspark.sql import functions as F

from lakerules.errors import LakeError
from lakerules.plan import nodes as P
from lakerules.plan.nodes import LakeScan
from lakerules.rowlevel import merge_source as source, v3_rows
from lakerules.rowlevel.run import (
    _as_written,
    _file_lookup,
    _partial_scan,
    _rewrite_files,
    _row_id_cols,
    _rows_of_all,
    _target_rows,
    _update_validation,
    dangling_deletes,
)
from lakerules.scan import lineage, row_files as row_plans
from lakerules.scan.planning import ScanPlan
from lakerules.scan.read import FILE_COL, POS_COL, status_names
from lakerules.spark import attributes, jvm as J, progress
from lakerules.write import files as write, position_deletes, row_delta

OP_COL = "__lakerules_op"
T_COL, S_COL = "__lakerules_t", "__lakerules_s"
KEEP, UPDATE, DELETE, INSERT = 0, 1, 2, 3


def run_merge(ctx, node):
    spark = ctx.spark
    t = node.table
    table = ctx.catalogs.load_for_write(t, ctx.conf)
    snapshot = table.current_snapshot()
    # the read of the target: pruned by the ON condition's target-only parts, unless rows that
    # match nothing must be seen (WHEN NOT MATCHED BY SOURCE); planned by the rule
    plan = node.files
    if plan is None or plan.snapshot_id != (snapshot.snapshot_id if snapshot is not None else None):
        plan = row_plans.plan_files(spark, table, node.relation, node.condition, drop_whole=False,
                                    prune=not node.not_matched_by_source)
    expr, planned, files = plan.expr, plan.scan, list(plan.read)
    if snapshot is not None and not node.not_matched_by_source:
        node = source.computed_once(spark, node)
        keys = source.Keys(spark, node)
        progress.step(spark, "read the source's keys")
        count, bounds = keys.stats()
        small = source.broadcastable(spark, node, count)
        files = source.within_bounds(spark, table, snapshot, expr, files, bounds, keys.first if small else None)
        if small:
            return _run_keyed(ctx, node, table, snapshot, expr, planned, files, keys.unique)
    return _run_outer(ctx, node, table, snapshot, expr, planned, files)


# ---- small source: inner join with the broadcast source, anti-join for the inserts ---------------


def _target_plan(ctx, node, table, snapshot, planned, files, attrs, row_ids: bool = False):
    """The live rows of ``files`` with the columns of ``attrs`` (relation attributes, carrying
    their exprIds), (``row_ids``: v3_rows.ROW_COL,) FILE_COL and POS_COL."""
    spark = ctx.spark
    df = _target_rows(ctx, _partial_scan(node, table, snapshot, planned, files), row_ids)
    plan = J.analyzed(df.select(*[J.column(a.name) for a in attrs], *_row_id_cols(row_ids), FILE_COL, POS_COL))
    return J.rename_project(spark, plan, [a.jvm for a in attrs])


def _run_keyed(ctx, node, table, snapshot, expr, planned, files, unique_keys: bool = False):
    spark = ctx.spark
    output = node.relation.output
    on_ids = J.reference_ids(node.condition)
    needed = set(on_ids)
    for a in node.matched:
        if a.condition is not None:
            needed |= J.reference_ids(a.condition)
        if a.kind == "update":
            for _, value in a.assignments:
                needed |= J.reference_ids(value)
    first = [a for a in output if a.expr_id in on_ids]
    later = [a for a in output if a.expr_id in needed and a.expr_id not in on_ids]
    check = _checks_cardinality(node.matched) and not unique_keys
    row_ids = v3_rows.applies(table)
    source = J.analyzed(F.broadcast(J.dataframe(spark, node.source)))
    matches = None
    # the matched files are known before the rows are written only where the other columns must be
    # read from them; otherwise the matches' count (and cardinality check) is the rows' (_apply)
    found_first = bool(later and node.matched)
    try:
        progress.step(spark, "find the target rows the source's keys match")
        matched_files = files
        if files:
            joined = J.join(spark, _target_plan(ctx, node, table, snapshot, planned, files, first, row_ids), source,
                            "inner", node.condition)
            matches = J.dataframe(spark, joined)
            if not check and not unique_keys:
                matches = matches.dropDuplicates([FILE_COL, POS_COL])  # deleted (or kept) once
            matches = matches.persist()
            if found_first:
                # one aggregate: the matched files, and (check) whether a target row matched twice
                per_file = matches.groupBy(FILE_COL).agg(
                    F.count(F.lit(1)).alias("rows"),
                    *([F.countDistinct(POS_COL).alias("positions")] if check else [])).collect()
                if check and any(r["rows"] != r["positions"] for r in per_file):
                    raise _cardinality_error(node.table)
                matched_names = {r[0] for r in per_file}
                names = status_names(spark, [p.file.file_path for p in files])
                matched_files = [p for p in files if names[p.file.file_path] in matched_names]
        rows = _inserted(spark, node, matches, first, row_ids)
        if matched_files and node.matched:
            plan = J.analyzed(matches)
            if later:
                progress.step(spark, "read the matched rows' other columns")
                plan = _with_later_columns(ctx, node, table, snapshot, planned, matched_files, later, matches)
            rows = _matched(spark, node, plan, row_ids, keep=not found_first).unionByName(rows)
        scanned = {"lakerules.merge.target-files-scanned": str(len(files))}
        if found_first:
            scanned["lakerules.merge.target-files-matched"] = str(len(matched_files))
        # rows come from the cached matches and the (small) source, unless the other columns were read
        return _apply(ctx, node, table, snapshot, expr, planned, matched_files, rows, scanned,
                      check=check and not found_first, matched_by="match", cache=bool(later and node.matched))
    finally:
        if matches is not None:
            matches.unpersist()


def _with_later_columns(ctx, node, table, snapshot, planned, files, later, matches):
    """The matches with the target columns ``later`` read from their files: those files' rows
    joined on (file, position) with the matches."""
    spark = ctx.spark
    target = _target_plan(ctx, node, table, snapshot, planned, files, later)
    found = J.analyzed(matches)
    t_out, m_out = J.from_seq(target.output()), J.from_seq(found.output())
    on = J.all_of(spark, [J.equal_to(spark, next(a for a in t_out if a.name() == c), next(a for a in m_out if a.name() == c))
                          for c in (FILE_COL, POS_COL)])
    return J.project(spark, J.join(spark, target, found, "inner", on),
                     [a for a in t_out if a.name() not in (FILE_COL, POS_COL)] + m_out)


def _matched(spark, node, plan, row_ids: bool = False, keep: bool = False):
    """The matched rows (each a target row and the source row it matched) as what the first
    WHEN MATCHED clause that holds makes of them: updated or deleted (no clause: dropped, unless
    ``keep``: then KEEP, for _apply's count and cardinality check)."""
    carried = (*_row_id_cols(row_ids), FILE_COL, POS_COL)
    branches = [(J.true_literal(spark) if a.condition is None else a.condition, a) for a in node.matched]
    true = J.literal(spark, True)
    rows = _actions_plan(spark, node, plan, branches, [a for a in J.from_seq(plan.output()) if a.name() in carried],
                         [(true, T_COL), (true, S_COL)])
    return J.dataframe(spark, rows if keep else _changing(spark, rows))


def _inserted(spark, node, matches, first, row_ids: bool = False):
    """The source rows no target row matched (the source anti-joined with the matched target
    rows on the ON condition), as the first WHEN NOT MATCHED clause that holds makes them."""
    source = node.source
    if matches is not None:
        # the matched target rows with their exprIds: what the ON condition refers to
        ids = {a.expr_id for a in first}
        found = J.analyzed(matches)
        matched = J.project(spark, found, [a for i, _, a in attributes.with_objects(found.output()) if i in ids])
        source = J.join(spark, source, matched, "leftanti", node.condition)
    branches = [(J.true_literal(spark) if a.condition is None else a.condition, a) for a in node.not_matched]
    # a new row: no target side, no file or position (v3: fresh ids from its file's first_row_id)
    null = {t: J.literal(spark, None, J.data_type(spark, f'"{t}"')) for t in ("boolean", "long", "string")}
    extra = [(null["boolean"], T_COL), (J.literal(spark, True), S_COL)]
    extra += [(null["long"], c) for c in _row_id_cols(row_ids)]
    extra += [(null["string"], FILE_COL), (null["long"], POS_COL)]
    return J.dataframe(spark, _changing(spark, _actions_plan(spark, node, source, branches, [], extra)))


def _changing(spark, plan):
    """The rows of ``plan`` (an _actions_plan) some clause acts on: OP_COL not KEEP."""
    op = next(a for a in J.from_seq(plan.output()) if a.name() == OP_COL)
    return J.filter_plan(spark, J.not_true(spark, J.equal_to(spark, op, J.literal(spark, KEEP))), plan)


def _actions(spark, node, plan, branches, carried):
    """_actions_plan as a DataFrame."""
    return J.dataframe(spark, _actions_plan(spark, node, plan, branches, carried))


def _actions_plan(spark, node, plan, branches, carried, extra=()):
    """Project over plan: each column of the target its value under the first branch whose
    condition holds (update: assigned or kept; insert: assigned or NULL; delete: NULL), OP_COL
    the branch's kind (KEEP: none), then ``extra`` (expression, name) pairs, then ``carried``
    attributes."""
    codes = {"update": UPDATE, "delete": DELETE, "insert": INSERT}
    conds = [c for c, _ in branches]
    exprs, names = [], []
    # each branch's assignments by the target column's exprId, read once (not again per column)
    assigned = [{k.exprId().id(): v for k, v in a.assignments} for _, a in branches]
    for attr in node.relation.output:
        ident = attr.expr_id
        null = J.literal(spark, None, attr.jvm.dataType())
        per_branch = []
        for (_, a), values in zip(branches, assigned):
            per_branch.append(values.get(ident, attr.jvm) if a.kind == "update" else values.get(ident, null))
        exprs.append(J.case_when(spark, conds, per_branch, null) if branches else null)
        names.append(attr.name)
    codes_of = [J.literal(spark, codes[a.kind]) for _, a in branches]
    exprs.append(J.case_when(spark, conds, codes_of, J.literal(spark, KEEP)) if branches else J.literal(spark, KEEP))
    names.append(OP_COL)
    for e, name in extra:
        exprs.append(e)
        names.append(name)
    return J.project_as(spark, plan, exprs + list(carried), names + [c.name() for c in carried])


# ---- a large source (or NOT MATCHED BY SOURCE): the outer join ------------------------------------


def _run_outer(ctx, node, table, snapshot, expr, planned, files):
    spark = ctx.spark
    t = node.table
    row_ids = v3_rows.applies(table)
    # target rows (relation exprIds) with (v3: the row id,) FILE_COL, POS_COL and a presence marker
    df = _target_rows(ctx, _partial_scan(node, table, snapshot, planned, files) if snapshot else
                      LakeScan(table=t, snapshot_id=None, output=node.relation.output, iceberg=table,
                               schema=table.schema(), plan=ScanPlan()), row_ids)
    names = [a.name for a in node.relation.output]
    target = J.analyzed(df.select(*[J.column(n) for n in names], *_row_id_cols(row_ids), FILE_COL, POS_COL,
                                  F.lit(True).alias(T_COL)))
    target = J.rename_project(spark, target, [a.jvm for a in node.relation.output])
    source = J.with_columns(spark, node.source, [J.literal(spark, True)], [S_COL])
    joined = J.join(spark, target, source, node.join_type(), node.condition)
    out = J.from_seq(joined.output())
    t_attr = next(a for a in out if a.name() == T_COL)
    s_attr = next(a for a in out if a.name() == S_COL)
    t_in, s_in = J.is_not_null(spark, t_attr), J.is_not_null(spark, s_attr)

    branches = []  # (condition, action)
    for clauses, when in ((node.matched, J.all_of(spark, (t_in, s_in))), (node.not_matched, J.is_null(spark, t_attr)),
                          (node.not_matched_by_source, J.is_null(spark, s_attr))):
        for a in clauses:
            branches.append((when if a.condition is None else J.all_of(spark, (when, a.condition)), a))
    carried = [t_attr, s_attr] + [a for a in out if a.name() in (*_row_id_cols(row_ids), FILE_COL, POS_COL)]
    rows = _actions(spark, node, joined, branches, carried).where(
        (F.col(OP_COL) != KEEP) | (F.col(T_COL).isNotNull() & F.col(S_COL).isNotNull())
    )
    check = _checks_cardinality(node.matched)
    if not check:
        # a target row matched by several source rows is deleted (or kept) once
        target_side = F.col(T_COL).isNotNull()
        rows = rows.where(target_side).dropDuplicates([FILE_COL, POS_COL]).unionByName(rows.where(~target_side))
    return _apply(ctx, node, table, snapshot, expr, planned, files, rows, {}, check=check)


# ---- the writes and the commit -------------------------------------------------------------------


def _apply(ctx, node, table, snapshot, expr, planned, files, rows, summary: dict, check: bool,
           matched_by: str = "change", cache: bool = True):
    """Write and commit what ``rows`` (the target's columns, OP_COL, T_COL, S_COL, FILE_COL,
    POS_COL; FILE_COL one of ``files``' or NULL) say: updated and inserted rows, the positions of
    updated and deleted ones (or, copy-on-write, the touched files rewritten). ``check``: fail
    if two matched rows (T_COL and S_COL set) are one target row. The summary's files matched
    (unless given) are those with a matched row (``matched_by`` "match") or a changed one."""
    spark = ctx.spark
    t = node.table
    lookup, partitions = _file_lookup(spark, table, files, "__lakerules_path")
    joined = rows
    rows = rows.join(F.broadcast(lookup), F.col(FILE_COL) == F.col("__name"), "left").drop("__name")
    if cache:  # read more than once; uncached, they are computed again from what they come from
        rows = rows.persist()
    # the rows written again need no data file's path: uncached, they skip the lookup's join (a
    # broadcast, and a job of its own under AQE)
    new_rows = rows if cache else joined
    written_data, written_deletes = [], []
    try:
        progress.step(spark, "join target rows with the source")
        if not check and node.mode != "copy-on-write":
            done = _apply_collected(ctx, node, table, snapshot, expr, files, rows, partitions, summary, matched_by,
                                    new_rows)
            if done is not None:
                return done
        # one aggregate per data file (NULL: inserted rows): rows per operation, matched rows and,
        # (check) their distinct positions: a target row matched by two source rows is an error
        matched = F.col(T_COL).isNotNull() & F.col(S_COL).isNotNull()
        aggs = [F.count(F.when(F.col(OP_COL) == op, 1)) for op in (UPDATE, DELETE, INSERT)]
        aggs.append(F.count(F.when(matched, 1)))
        if check:
            aggs.append(F.countDistinct(F.when(matched, F.col(POS_COL))))
        counts = [0, 0, 0]
        removed: dict = {}
        matched_paths = set()
        for r in rows.groupBy("__lakerules_path").agg(*aggs).collect():
            if check and r[4] != r[5]:
                raise _cardinality_error(t)
            counts = [c + n for c, n in zip(counts, r[1:4])]
            if r[0] is not None and r[1] + r[2]:
                removed[r[0]] = r[1] + r[2]
            if r[0] is not None and r[4]:
                matched_paths.add(r[0])
        updated, deleted, inserted = counts
        if updated + deleted + inserted == 0:
            return _merge_result(spark, 0, 0, 0)
        touched = [p for p in files if p.file.file_path in removed]
        summary = _summary(summary, files, matched_paths if matched_by == "match" else touched)
        if node.mode == "copy-on-write":
            _merge_rewrite(ctx, node, table, snapshot, expr, planned, rows, touched, summary)
            return _merge_result(spark, updated, deleted, inserted)
        if v3_rows.applies(table):  # deletion vectors, and the rows written again keep their ids
            _merge_v3(ctx, node, table, snapshot, expr, rows, new_rows, touched, removed, summary,
                      bool(updated or inserted))
            return _merge_result(spark, updated, deleted, inserted)
        if updated or inserted:
            written_data = _write_new_rows(spark, node, table, new_rows)
        if updated or deleted:
            deletes = rows.where(F.col(OP_COL).isin(UPDATE, DELETE)).select(
                F.col("__lakerules_path").alias("file_path"), F.col(POS_COL).alias("pos"), write.PART_COL)
            written_deletes = position_deletes.write(spark, table, deletes, partitions, rows=updated + deleted)
        _commit(table, written_data, written_deletes, summary, touched, expr)
    except BaseException as e:
        write.discard(table, written_data + written_deletes, e)
        raise
    finally:
        rows.unpersist()
    return _merge_result(spark, updated, deleted, inserted)


def _apply_collected(ctx, node, table, snapshot, expr, files, rows, partitions, summary: dict, matched_by: str,
                     new_rows):
    """Merge-on-read with no cardinality check to make: the matched rows' positions come to the
    driver (with their operation, no shuffle) and are the counts of updated and deleted rows and
    the delete files (v2) or deletion vectors (v3), which the driver writes; the rows written are
    the updated and the inserted ones of ``new_rows`` (``rows``, or the same rows without the data
    files' lookup). None (nothing written) if more positions than
    spark.lakerules.write.positionDeleteDriverRows: then rows are counted by an aggregate."""
    spark = ctx.spark
    v3 = v3_rows.applies(table)  # deletion vectors, and the rows written again keep their ids
    if v3:
        lineage.check(table, "MERGE")
    # the target's rows that change (NOT MATCHED BY SOURCE ones too) or matched a source row
    target = F.col(T_COL).isNotNull() & ((F.col(OP_COL) != KEEP) | F.col(S_COL).isNotNull())
    positions = position_deletes.collect(spark, rows.where(target).select(
        F.col(OP_COL).cast("string").alias("kind"), write.PART_COL,
        F.col("__lakerules_path").alias("file_path"), F.col(POS_COL).alias("pos")), position_deletes.driver_rows(spark))
    if not positions.complete:
        return None
    removing = str(UPDATE) + str(DELETE)  # the kinds of the positions removed: updated and deleted rows
    by_kind = {kind: 0 for kind in removing}
    removed: dict = {}
    for (kind, _, path), n in positions.counts.items():
        if kind in by_kind:
            by_kind[kind] += n
            removed[path] = removed.get(path, 0) + n
    updated, deleted = by_kind[str(UPDATE)], by_kind[str(DELETE)]
    matched_paths = {path for _, _, path in positions.counts}  # matched_by "match": no NOT MATCHED BY SOURCE
    written_data, written_deletes, removal = [], [], None
    try:
        if updated or node.not_matched:
            written_data = (_write_v3_rows(spark, node, table, new_rows) if v3
                            else _write_new_rows(spark, node, table, new_rows))
        inserted = sum(f.record_count for f in written_data) - updated
        if updated + deleted + inserted == 0:
            return _merge_result(spark, 0, 0, 0)
        touched = [p for p in files if p.file.file_path in removed]
        summary = _summary(summary, files, matched_paths if matched_by == "match" else touched)
        if v3:
            if touched:
                removal = v3_rows.Removal(spark, table, snapshot, _removed_positions(rows), touched, removed,
                                          positions, kinds=removing)
            _commit_v3(table, written_data, removal, summary, touched, expr)
        else:
            if updated or deleted:
                progress.step(spark, "write delete files")
                written_deletes = position_deletes.write_collected(spark, table, positions, removing, partitions)
            _commit(table, written_data, written_deletes, summary, touched, expr)
    except BaseException as e:
        write.discard(table, written_data + written_deletes + (removal.discardable() if removal else []), e)
        raise
    return _merge_result(spark, updated, deleted, inserted)


def _summary(summary: dict, files: list, matched: list | set) -> dict:
    """The snapshot summary of a MERGE that read ``files``, ``matched`` (files or paths) the
    files with a matched (or changed) row, unless ``summary`` says them already."""
    summary = {"lakerules.operation": "merge", **summary}
    summary.setdefault("lakerules.merge.target-files-scanned", str(len(files)))
    summary.setdefault("lakerules.merge.target-files-matched", str(len(matched)))
    return summary


def _write_new_rows(spark, node, table, rows) -> list:
    """The updated and inserted rows of ``rows`` written as data files (merge-on-read, v2)."""
    new_rows = J.select(rows.where(F.col(OP_COL).isin(UPDATE, INSERT)), [a.name for a in node.relation.output])
    return write.write_files(spark, node.table.catalog, table, new_rows, cluster=True)


def _commit(table, written_data: list, written_deletes: list, summary: dict, touched: list, expr) -> None:
    """One snapshot adding a merge-on-read (v2) MERGE's data and delete files, validated against
    the files it read."""
    row_delta.commit(
        table, written_data, written_deletes, summary,
        validation=_update_validation(touched, expr, "merge"),
        operation=Operation.OVERWRITE if written_data else Operation.DELETE,
    )


def _merge_v3(ctx, node, table, snapshot, expr, rows, new_rows, touched: list, removed: dict, summary: dict,
              writes_rows: bool) -> None:
    """Merge-on-read on a v3 table (lakerules.rowlevel.v3_rows): updated and inserted rows (of
    ``new_rows``, as _apply chose them) written with their row ids (null for inserted ones),
    updated and deleted positions (of ``rows``) as deletion vectors."""
    spark = ctx.spark
    lineage.check(table, "MERGE")
    written, removal = [], None
    try:
        if writes_rows:
            written = _write_v3_rows(spark, node, table, new_rows)
        if touched:
            removal = v3_rows.Removal(spark, table, snapshot, _removed_positions(rows), touched, removed)
        _commit_v3(table, written, removal, summary, touched, expr)
    except BaseException as e:
        write.discard(table, written + (removal.discardable() if removal else []), e)
        raise


def _write_v3_rows(spark, node, table, new_rows) -> list:
    """The updated and inserted rows of ``new_rows`` written with their row ids (null for inserted ones)."""
    return v3_rows.write_rows(spark, node.table.catalog, table, new_rows.where(F.col(OP_COL).isin(UPDATE, INSERT)),
                              v3_rows.data_columns(table, node.relation.output))


def _removed_positions(rows):
    """(file_path, pos) of the updated and deleted target rows of ``rows``."""
    return rows.where(F.col(OP_COL).isin(UPDATE, DELETE)).select(
        F.col("__lakerules_path").alias("file_path"), F.col(POS_COL).alias("pos"))


def _commit_v3(table, written: list, removal, summary: dict, touched: list, expr) -> None:
    """One snapshot adding a v3 MERGE's data files and deletion vectors (and dropping the data
    files it removes whole), validated against the files it read."""
    row_delta.commit(
        table, written, removal.delete_files if removal else [], summary,
        removed_data_files=removal.removed_data_files if removal else (),
        removed_delete_files=removal.replaced if removal else (),
        validation=_update_validation(touched, expr, "merge"),
        operation=Operation.OVERWRITE if written else Operation.DELETE,
    )


def _cardinality_error(t) -> LakeError:
    return LakeError(
        f"lakerules: MERGE INTO {t}: a target row matched more than one source row "
        "(MERGE_CARDINALITY_VIOLATION); make the ON condition match each target row at most once"
    )


def _checks_cardinality(matched: tuple) -> bool:
    """Whether a target row matched by several source rows is an error, as in Spark and Iceberg:
    only when a WHEN MATCHED clause could update it, or delete it under a condition (which
    source row decides would then matter). No WHEN MATCHED clause, or a single unconditional
    DELETE, gives the same result whichever source row matched."""
    if not matched:
        return False
    return not (len(matched) == 1 and matched[0].kind == "delete" and matched[0].condition is None)


def _merge_rewrite(ctx, node, table, snapshot, expr, planned, rows, touched, summary: dict) -> None:
    """MERGE copy-on-write: every data file with a target row updated or deleted is rewritten;
    the new files hold its other live rows as they were (its rows read again at the same
    snapshot, less the updated and deleted positions, by an anti-join), the updated rows with
    their new values and the inserted rows; one snapshot removes the touched files."""
    row_ids = v3_rows.applies(table)  # v3: updated rows keep their ids, kept rows their whole lineage
    lineage.check(table, "MERGE")
    new_rows = rows.where(F.col(OP_COL).isin(UPDATE, INSERT))
    new_rows = _as_written(table, node, v3_rows.changed(new_rows) if row_ids else new_rows, row_ids)
    if touched:
        changed = rows.where(F.col(OP_COL).isin(UPDATE, DELETE)).select(
            F.col(FILE_COL).alias("__lakerules_f"), F.col(POS_COL).alias("__lakerules_p"))
        scanned = _rows_of_all(ctx, node, _partial_scan(node, table, snapshot, planned, touched), row_ids)
        kept = scanned.join(
            changed, (scanned[FILE_COL] == changed["__lakerules_f"]) & (scanned[POS_COL] == changed["__lakerules_p"]),
            "left_anti",
        )
        new_rows = new_rows.unionByName(_as_written(table, node, kept, row_ids))
    _rewrite_files(
        ctx, node, table, new_rows, touched,
        {**summary, "lakerules.merge-mode": "copy-on-write"},
        _update_validation(touched, expr, "merge"),
        removed_deletes=dangling_deletes(table, snapshot, touched),
    )


def _merge_result(spark, updated: int, deleted: int, inserted: int):
    return J.result_rows(
        spark, [(updated + deleted + inserted, updated, deleted, inserted)],
        P.MERGE_RESULT,
    )
