"""OPTIMIZE: compaction and z-order clustering of a lake table's data files (seed 001).

    OPTIMIZE lake.db.t [WHERE <partition predicate>] [ZORDER BY (c1, c2, ...) | HILBERT BY (c1, c2, ...)]

The statement is planned when Spark analyzes it (``plan``: from the table's metadata, nothing
written) and runs once, when Spark executes it (``run``: planning again only if the table moved
since), like lakerules' other statements; it returns one row as Delta's does: the table's location
and a struct of metrics.

1. Validate, before anything is read or written: the WHERE names only partition source columns
   and translates exactly into an Iceberg predicate; each ZORDER BY column exists (a top-level
   column, whose name may hold a dot, or a struct's field by its path, s.a; not inside an array
   or map), is primitive, is not an identity partition column (constant within a partition) and
   has min/max metrics (lakerules.write.metrics: struct fields have them, as in Iceberg's Java writers).
2. Plan the current snapshot's data files with their deletes (lakerules.scan.planning); keep the
   partitions the WHERE's inclusive projection selects; group the files by the partition of the
   current spec their rows go to (lakerules.optimize.select: files of an earlier partition spec
   are rewritten, whole, into the current spec, as Iceberg's rewrite does, unless
   rewriteOtherSpecs is false, together with the current files of their partitions).
3. Choose what to rewrite, per partition (lakerules.optimize.select); files above maxFileSize
   are split into files of the target:
   - without ZORDER BY, bin-packing: files smaller than minFileSize, or with deleteFileThreshold
     or more delete files, or whose deleted rows are at least deleteRatioThreshold (0.3, as
     Iceberg's delete-ratio-threshold: rows of the position delete files scoped to that one file)
     of its rows, sorted by size and packed into bins of at most targetFileSize; a bin of one file
     is rewritten only for its deletes. Files of z-order cubes are left alone unless they carry
     that many deletes.
   - with ZORDER BY, cubes (as Databricks' ZCubes): the files one OPTIMIZE ZORDER BY wrote in
     a partition form a cube, known by the snapshot that added them (its summary records the
     columns as field ids, ``lakerules.zorder.columns``). A partition's new files (in no cube of
     these columns, or with that many deletes) and its cubes are z-ordered together
     into one new cube of round(size / targetFileSize) files, except cubes that stay: those of
     at least minCubeSize, and the largest other one when the rest is at most incrementalRatio
     of it (new rows are then clustered on their own). A partition with nothing to rewrite but
     one cube is already clustered: running the same OPTIMIZE again is a no-op.
   HILBERT BY is the same with the Hilbert curve (its cubes are another clustering: a HILBERT BY
   after a ZORDER BY of the same columns rewrites the partition).
4. Rewrite with Spark: the scan applies the files' deletes (position deletes, deletion vectors,
   equality deletes); lakerules.optimize.curves clusters. On a format-version 3 table each row's
   ``_row_id`` and ``_last_updated_sequence_number`` are read as the spec defines them and written
   into the new files as their lineage columns, so compaction keeps both (lakerules.scan.lineage).
5. Commit one "replace" snapshot (lakerules.write.rewrites.rewrite_files): atomic, validated against commits
   made meanwhile, delete files that no longer apply to any live data file removed.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import defaultdict
from dataclasses import dataclass, field

from pyiceberg.exceptions import ValidationException
from pyiceberg.expressions.visitors import expression_evaluator, inclusive_projection
from pyiceberg.schema import Schema
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakerules.write import metrics as column_metrics, rewrites
from lakerules.sql import dialect
from lakerules.spark import jvm as J, progress
from lakerules.iceberg import partitioning
from lakerules.write import order as write_order
from lakerules.optimize import curves as zorder
from lakerules.optimize.select import CURVE, MAX_FILE_SIZE_RATIO, ZORDER_COLUMNS, Stats as _Stats, Unit as _Unit
from lakerules.optimize import clauses, select
from lakerules.errors import ConflictError, LakeError
from lakerules.plan.nodes import LakeScan, TableRef
from lakerules.scan import lineage
from lakerules.scan.planning import PlannedFile, ScanPlan, plan_scan
from lakerules.scan.read import POS_COL, scan_dataframe
from lakerules.write.files import delete_files, discard, write_files

_BIN = "__lakerules_bin"

# Settings: spark.lakerules.optimize.<name> for the session, lakerules.optimize.<name> as a table
# property (which wins). Defaults as Delta's (files) and Iceberg's (deletes); minCubeSize as
# Databricks' ZCube merge strategy.
SETTINGS = {
    "targetFileSize": 1 << 30,  # unless the table's write.target-file-size-bytes says otherwise
    "minFileSize": 1 << 30,
    "maxFileSize": None,  # MAX_FILE_SIZE_RATIO times the target
    "deleteFileThreshold": 2**31 - 1,
    "deleteRatioThreshold": 0.3,
    "zorder.numRanges": 1000,
    "zorder.addNoise": True,
    "zorder.minCubeSize": 100 << 30,
    "zorder.incrementalRatio": 0.1,
    "rewriteOtherSpecs": True,
}

# Run between the rewrite's writes and its commit; tests put a concurrent commit here.
_before_commit = None


@dataclass(frozen=True)
class Statement:
    table: str  # the table name, as Spark SQL
    where: str | None  # the WHERE predicate as written
    zorder: tuple[tuple[str, ...], ...]  # column paths
    text: str  # the statement, normalized
    curve: str = "zorder"  # "hilbert" for HILBERT BY
    # rewrite_data_files (lakerules.procedures.maintenance): settings that win over the table's and session's
    # (Settings field -> value), and what the result row is made of: fn(ctx, table, settings,
    # removed, written, dropped) -> DataFrame
    overrides: tuple = ()
    result: object = None
    # rewrite_data_files' plain sort order: sort fields (source field id, transform, descending,
    # nulls first), each partition's selected files range-partitioned and sorted by them, and the
    # table's sort order id when it is the table's order (recorded in the files written)
    sort: tuple = ()
    sort_order_id: int | None = None

    @property
    def clause(self) -> str:
        return "HILBERT BY" if self.curve == "hilbert" else "ZORDER BY"


def parse(sql_text: str) -> Statement:
    """The statement, or a LakeError giving the position of a syntax error."""
    tree = dialect.parse_optimize(sql_text)
    columns = tuple(tuple(p.name for p in c.parts) for c in tree.args.get("zorder") or ())
    return Statement(
        table=tree.this.sql(dialect=dialect.LakeSpark),
        where=tree.args.get("where_text"),
        zorder=columns,
        text=tree.sql(dialect=dialect.LakeSpark),
        curve=tree.args.get("curve") or "zorder",
    )


def statement_of(optimize) -> Statement:
    """The rewrite an OPTIMIZE statement (lakerules.plan.statements.Optimize) asks for."""
    return Statement(table=".".join(optimize.table), where=optimize.where, zorder=optimize.zorder, text=optimize.text,
                     curve=optimize.curve)


@dataclass(frozen=True)
class Settings:
    target_file_size: int
    min_file_size: int
    delete_file_threshold: int
    num_ranges: int
    add_noise: bool
    min_cube_size: int
    incremental_ratio: float
    rewrite_other_specs: bool = True  # files of an earlier partition spec are rewritten into the current one
    min_input_files: int = 2  # a bin of fewer files is rewritten only for its deletes
    rewrite_all: bool = False  # every selected file, cubes too (rewrite_data_files' rewrite-all)
    delete_ratio_threshold: float = 0.3  # a file whose deleted rows are this share of its rows is rewritten
    max_file_size: int | None = None  # larger files are split (None: MAX_FILE_SIZE_RATIO times the target)

    @classmethod
    def of(cls, ctx, table, overrides: tuple = ()) -> "Settings":
        def get(name: str):
            default = SETTINGS[name]
            raw = table.properties.get(f"lakerules.optimize.{name}")
            where = f"table property lakerules.optimize.{name}"
            if raw is None:
                raw = ctx.conf(f"spark.lakerules.optimize.{name}", None)
                where = f"spark.lakerules.optimize.{name}"
            if raw is None and name == "targetFileSize":
                # the table's Iceberg target, as Iceberg's rewrite_data_files takes it
                raw = table.properties.get("write.target-file-size-bytes")
                where = "table property write.target-file-size-bytes"
            if raw is None:
                return default
            raw = str(raw).strip()
            if isinstance(default, bool):
                if raw.lower() not in ("true", "false"):
                    raise LakeError(f"lakerules: {where}={raw!r}: expected true or false")
                return raw.lower() == "true"
            if isinstance(default, float):
                try:
                    ratio = float(raw)
                except ValueError:
                    ratio = -1.0
                if not 0 <= ratio < float("inf"):
                    raise LakeError(f"lakerules: {where}={raw!r}: expected a finite number >= 0")
                if name == "deleteRatioThreshold" and not 0 < ratio <= 1:
                    raise LakeError(f"lakerules: {where}={raw!r}: expected a number > 0 and <= 1")
                return ratio
            try:
                value = int(raw)
            except ValueError:
                value = 0
            if value < 1:
                raise LakeError(f"lakerules: {where}={raw!r}: expected a positive integer")
            return value

        s = cls(get("targetFileSize"), get("minFileSize"), get("deleteFileThreshold"), get("zorder.numRanges"),
                get("zorder.addNoise"), get("zorder.minCubeSize"), get("zorder.incrementalRatio"),
                get("rewriteOtherSpecs"), delete_ratio_threshold=get("deleteRatioThreshold"),
                max_file_size=get("maxFileSize"))
        if not 2 <= s.num_ranges <= zorder.MAX_RANGES:
            raise LakeError(f"lakerules: spark.lakerules.optimize.zorder.numRanges must be between 2 and {zorder.MAX_RANGES}")
        if overrides:
            s = dataclasses.replace(s, **dict(overrides))
        if s.max_file_size is None:
            return dataclasses.replace(s, max_file_size=int(s.target_file_size * MAX_FILE_SIZE_RATIO))
        if s.max_file_size <= s.target_file_size:
            # rewrite_data_files (the only caller with overrides) names them as Iceberg does
            what, target = (("CALL system.rewrite_data_files: max-file-size-bytes", "target-file-size-bytes")
                            if overrides else ("maxFileSize", "targetFileSize"))
            raise LakeError(f"lakerules: {what} ({s.max_file_size}) must be greater than {target} "
                            f"({s.target_file_size}): files above it are split into files of the target")
        return s


# ---- the statement ------------------------------------------------------------------------------


@dataclass
class Plan:
    """What OPTIMIZE will rewrite, decided from the table's metadata alone (steps 1-3 below):
    EXPLAIN shows it; running it is steps 4-5."""

    statement: Statement
    settings: Settings
    ref: TableRef
    columns: list  # z-order columns: (path, field)
    snapshot_id: int | None
    scan: object = None  # planning.ScanPlan of every live data file
    units: list = field(default_factory=list)  # _Unit: the bins (or cubes) rewritten
    stats: _Stats = field(default_factory=_Stats)
    spec_id: int = 0  # the table's current partition spec

    def describe(self) -> list[str]:
        if self.snapshot_id is None:
            return ["table has no snapshot: nothing to rewrite"]
        lines = [f"snapshot {self.snapshot_id}: {self.stats.considered} data files considered"
                 + (f", {self.stats.other_spec} under an earlier partition spec left alone" if self.stats.other_spec else "")]
        if self.stats.heavy:
            lines.append(f"{self.stats.heavy} data files with deletes past deleteFileThreshold "
                         f"({self.settings.delete_file_threshold} delete files) or deleteRatioThreshold "
                         f"({self.settings.delete_ratio_threshold:g} of their rows): rewritten whatever their size")
        if self.statement.sort:
            lines.append(f"range-partitioned sort by {len(self.statement.sort)} sort fields, into files of "
                         f"{self.settings.target_file_size} bytes")
        if self.columns:
            curve = "Hilbert curve (files: a k-d layout)" if self.statement.curve == "hilbert" else "z-order (files: a k-d layout)"
            lines.append(f"{curve} by ({', '.join(clauses.display(p) for p, _ in self.columns)}): "
                         f"{self.settings.num_ranges} ranges per column, from a sample of the rows")
        if not self.units:
            lines.append("nothing to rewrite: the files are already laid out")
            return lines
        per_partition = defaultdict(lambda: [0, 0, 0])
        for u in self.units:
            if u.by_partition:
                key = "(files of an earlier spec, with every partition they write into)"
            else:
                current = [p for p in u.files if p.file.spec_id == self.spec_id] or u.files
                key = _partition_text(current[0].file.partition) if current else ""
            entry = per_partition[key]
            entry[0] += 1
            entry[1] += len(u.files)
            entry[2] += u.num_files
        lines.append(f"bins: {len(self.units)}: {sum(len(u.files) for u in self.units)} files in, "
                     f"about {sum(u.num_files for u in self.units)} files out")
        for key, (bins, files_in, files_out) in list(per_partition.items())[:12]:
            lines.append(f"  partition {key or '(unpartitioned)'}: {bins} bins, {files_in} files in, about {files_out} out")
        if len(per_partition) > 12:
            lines.append(f"  and {len(per_partition) - 12} more partitions")
        return lines


def _partition_text(record) -> str:
    return "/".join("null" if v is None else str(v) for v in (list(record) if record is not None else []))


def plan(ctx, table, statement: Statement) -> Plan:
    """Steps 1-3: validate, plan the files, choose the bins. Reads metadata only; writes nothing."""
    settings = Settings.of(ctx, table, statement.overrides)
    ref = TableRef(table.catalog.name, tuple(table.name()[:-1]), table.name()[-1])
    schema, spec = table.schema(), table.spec()
    # 1. validate
    columns = clauses.zorder_columns(table, ref, statement.zorder, statement.clause)
    predicate = clauses.partition_predicate(ctx, table, ref, statement.where)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return Plan(statement, settings, ref, columns, None)
    # 2. plan: every live data file with its deletes; the partitions the WHERE selects
    scan = plan_scan(table, snapshot.snapshot_id)
    selectors = {}

    def selected(spec_id: int, partition) -> bool:
        """The WHERE's inclusive projection on a spec, for a partition of it: a file of an earlier
        spec is selected when it may hold matching rows (then rewritten whole, into the current
        spec), by the partition of the current spec its rows go to when that is known."""
        if spec_id not in selectors:
            file_spec = table.specs()[spec_id]
            # the WHERE's names as Spark resolved them: case-insensitively, as Spark does
            projected = inclusive_projection(schema, file_spec, case_sensitive=False)(predicate)
            selectors[spec_id] = expression_evaluator(Schema(*file_spec.partition_type(schema).fields), projected, True)
        return selectors[spec_id](partition)

    stats = _Stats()
    stats.other_spec = 0 if settings.rewrite_other_specs else sum(1 for p in scan.files if p.file.spec_id != spec.spec_id)
    # by the partition of the current spec their rows go to (lakerules.optimize.select)
    groups = select.groups(table, scan.files, selected, settings.rewrite_other_specs)
    stats.considered = sum(len(g.files) for g in groups)
    stats.heavy = sum(1 for g in groups for p in g.files if select.heavy(p, settings))
    # 3. choose
    cubes_of = select.cube_columns(table)
    ids = select.cube_id(statement.curve, columns) if columns else None
    units = []
    for g in groups:
        if g.spanning:
            units += select.spanning_unit(g.files, cubes_of, settings, stats, spec.spec_id, ids)
        elif columns:
            units += select.zorder_units(g.files, ids, cubes_of, settings, stats, spec.spec_id)
        elif statement.sort:
            # the files bin-packing would rewrite in a partition, sorted together into files of the target size
            chosen = [p for u in select.compaction_units(g.files, cubes_of, settings, stats, spec.spec_id) for p in u.files]
            if chosen:
                units.append(_Unit(chosen, max(1, round(select.size(chosen) / settings.target_file_size))))
        else:
            units += select.compaction_units(g.files, cubes_of, settings, stats, spec.spec_id)
    return Plan(statement, settings, ref, columns, snapshot.snapshot_id, scan, units, stats, spec.spec_id)


def run(ctx, table, statement: Statement, planned: Plan | None = None):
    """OPTIMIZE: its plan (made again if the table moved since it was planned), then steps 4-5."""
    started = int(time.time() * 1000)
    spark = ctx.spark
    snapshot = table.current_snapshot()
    current = snapshot.snapshot_id if snapshot is not None else None
    if planned is None or planned.snapshot_id != current:
        planned = plan(ctx, table, statement)
    settings, ref, columns, units, stats, scan = (planned.settings, planned.ref, planned.columns, planned.units,
                                                  planned.stats, planned.scan)
    if snapshot is None or not units:
        if statement.result is not None:
            return statement.result(ctx, table, settings, [], [], [])
        return _result(ctx, table, settings, statement, units, [], [], [], stats, started, columns)
    # 4. rewrite (on a v3 table every row keeps its row id and last-updated sequence number: both
    # read as the spec defines them and written as the new files' lineage columns)
    lineage.check(table, "OPTIMIZE")
    fields = lineage.write_fields(table, lineage.kept(table))
    read = functools.partial(_unit_rows, ctx, table, ref, snapshot.snapshot_id)
    if columns:
        progress.step(spark, f"sample z-order ranges of {len(units)} bins")
        groups = [zorder.Group(read(u), sum(p.file.record_count for p in u.files), u.num_files,
                               _partition_hash(table, ref) if u.by_partition else None) for u in units]
        df = zorder.cluster(spark, ref.catalog, groups, [(path, f.field_type) for path, f in columns],
                            settings.num_ranges, settings.add_noise, statement.curve)
        order_by = (zorder.ZKEY,)
    elif statement.sort:
        # a range-partitioned sort of each partition's files: its rows cut into num_files ranges of
        # the sort order (one task, one file each), each sorted; rows of several partitions (files
        # of an earlier spec) one task a partition
        sort = write_order.sort_columns(table, ref.catalog, statement.sort)
        frames = [read(u).repartition(u.num_files, _partition_hash(table, ref)) if u.by_partition
                  else read(u).repartitionByRange(u.num_files, *sort) for u in units]
        df = functools.reduce(DataFrame.unionByName, frames)
        progress.step(spark, f"sort {len(units)} partitions")
        written = write_files(spark, ref.catalog, table, df, fields=fields, distribute=False, sort=sort,
                              sort_order_id=statement.sort_order_id)
    else:
        # one task (one file) a bin; not coalesce(1) a bin: Spark would run a union of
        # single-partition children as one task
        frames, tasks = [], 0
        for u in units:
            frames.append(read(u, task=_task_of(table, ref, u, tasks)))
            tasks += u.num_files
        df = functools.reduce(DataFrame.unionByName, frames).repartitionById(tasks, F.col(_BIN)).drop(_BIN)
        order_by = ()
    if not statement.sort:
        progress.step(spark, f"rewrite {len(units)} bins")
        written = write_files(spark, ref.catalog, table, df, fields=fields, order_by=order_by,
                              distribute=False)  # one task a bin
    # 5. commit
    removed = [p.file for u in units for p in u.files]
    removed_paths = {f.file_path for f in removed}
    candidates = {d.file_path: d for u in units for p in u.files for d in (*p.position_deletes, *p.equality_deletes)}
    needed = {
        d.file_path for p in scan.files if p.file.file_path not in removed_paths
        for d in (*p.position_deletes, *p.equality_deletes)
    }
    summary = {"lakerules.operation": "optimize"}
    if columns:
        summary[ZORDER_COLUMNS] = ",".join(str(f.field_id) for _, f in columns)
        summary["lakerules.zorder.column-names"] = ",".join(clauses.display(path) for path, _ in columns)
        if statement.curve != "zorder":
            summary[CURVE] = statement.curve
    try:
        if _before_commit is not None:
            _before_commit(table)
        table.refresh()
    except BaseException:
        delete_files(table, written)
        raise
    try:
        dropped = rewrites.rewrite_files(table, snapshot.snapshot_id, removed, written, list(candidates.values()), needed, summary)
    except ValidationException as e:
        discard(table, written, e)
        raise ConflictError(
            f"lakerules: OPTIMIZE {ref} conflicts with a commit made while it ran, so nothing was committed "
            f"(run OPTIMIZE again): {e}"
        ) from None
    except BaseException as e:
        # the new files go unless the commit may have landed (then they stay: orphans at worst)
        discard(table, written, e)
        raise
    if statement.result is not None:
        return statement.result(ctx, table, settings, removed, written, dropped)
    return _result(ctx, table, settings, statement, units, removed, written, dropped, stats, started, columns)


def _read(ctx, table, ref: TableRef, snapshot_id: int, files: list[PlannedFile], positions: bool = False) -> DataFrame:
    """The rows of these files, their deletes applied (the table's current schema, then on a v3
    table each row's lineage as read: lakerules.scan.lineage.kept); with their position in their
    file (POS_COL) if asked."""
    plan = ScanPlan(files=tuple(files), total_data_files=len(files))
    scan = LakeScan(table=ref, snapshot_id=snapshot_id, output=(), iceberg=table, schema=table.schema(), plan=plan)
    return scan_dataframe(ctx, scan, positions=positions, lineage=lineage.kept(table))


def _unit_rows(ctx, table, ref: TableRef, snapshot_id: int, unit: _Unit, task=None) -> DataFrame:
    """A unit's rows; with ``task`` (a function of the rows with positions -> Column), also the
    task each row is written by, as _BIN."""
    if task is None:
        return _read(ctx, table, ref, snapshot_id, unit.files)
    names = [f.name for f in table.schema().fields] + list(lineage.kept(table))
    by_position = unit.num_files > 1 and not unit.by_partition  # a large file's pieces
    rows = _read(ctx, table, ref, snapshot_id, unit.files, positions=by_position)
    return rows.select(*[J.column(n) for n in names], task(rows).alias(_BIN))


def _task_of(table, ref: TableRef, unit: _Unit, first: int):
    """A bin's rows -> its task: the bin's one task; a large file's pieces by position (its rows
    in order, cut into num_files runs, as Iceberg's writer rolls files over); rows of several
    partitions by partition (one task each)."""
    n = unit.num_files
    if unit.by_partition:
        return lambda rows: F.lit(first) + F.pmod(_partition_hash(table, ref), F.lit(n))
    if n == 1:
        return lambda rows: F.lit(first)
    (only,) = unit.files  # only a bin of one file passes the target
    count = max(1, only.file.record_count)
    return lambda rows: F.lit(first) + F.least(F.floor(F.col(POS_COL) * n / count).cast("int"), F.lit(n - 1))


def _partition_hash(table, ref: TableRef):
    """A hash of a row's partition values in the current spec (the table's column names)."""
    names = {f.name for f in table.schema().fields}
    cols = partitioning.partition_columns(table.spec(), table.schema(), ref.catalog, set(names))
    return F.hash(*[c.expr for c in cols]) if cols else F.lit(0)


# ---- the result row -----------------------------------------------------------------------------

_SIZES = "STRUCT<min: BIGINT, max: BIGINT, avg: DOUBLE, totalFiles: BIGINT, totalSize: BIGINT>"
_FILES = "STRUCT<num: BIGINT, size: BIGINT>"
RESULT_SCHEMA = (
    "path STRING, metrics STRUCT<"
    f"numFilesAdded: BIGINT, numFilesRemoved: BIGINT, filesAdded: {_SIZES}, filesRemoved: {_SIZES}, "
    "partitionsOptimized: BIGINT, "
    f"zOrderStats: STRUCT<strategyName: STRING, inputCubeFiles: {_FILES}, inputOtherFiles: {_FILES}, "
    f"inputNumCubes: BIGINT, mergedFiles: {_FILES}, numOutputCubes: BIGINT, mergedNumCubes: BIGINT>, "
    "numBins: BIGINT, numBatches: BIGINT, totalConsideredFiles: BIGINT, totalFilesSkipped: BIGINT, "
    "preserveInsertionOrder: BOOLEAN, numFilesSkippedToReduceWriteAmplification: BIGINT, "
    "numBytesSkippedToReduceWriteAmplification: BIGINT, startTimeMs: BIGINT, endTimeMs: BIGINT, "
    "totalClusterParallelism: BIGINT, totalScheduledTasks: BIGINT, "
    "deleteFileStats: STRUCT<numDeleteFilesRemoved: BIGINT, numDeletedRowsRemoved: BIGINT>, "
    "numFilesInOtherPartitionSpecs: BIGINT, numTableColumns: BIGINT, numTableColumnsWithStats: BIGINT>"
)


def _sizes(files) -> tuple:
    sizes = [f.file_size_in_bytes for f in files]
    if not sizes:
        return (None, None, 0.0, 0, 0)
    return (min(sizes), max(sizes), sum(sizes) / len(sizes), len(sizes), sum(sizes))


def _files(files) -> tuple:
    return (len(files), sum(f.file_size_in_bytes for f in files))


def _result(ctx, table, settings: Settings, statement, units, removed, written, dropped, stats: _Stats,
            started: int, columns):
    partitions = {(p.file.spec_id, tuple(p.file.partition)) for u in units for p in u.files}
    zorder_stats = None
    if columns:
        merged = [p.file for u in units for p in u.files]
        zorder_stats = (
            f"minCubeSize({settings.min_cube_size})",
            _files(stats.cube_files), _files(stats.other_files), stats.cubes, _files(merged), len(units),
            sum(u.merged_cubes for u in units),
        )
    with_stats = sum(1 for c in column_metrics.statistics_plan(table.schema(), table.properties).values()
                     if column_metrics.has_bounds(c))
    skipped = stats.skipped_to_reduce_write
    metrics = (
        len(written), len(removed), _sizes(written), _sizes(removed), len(partitions), zorder_stats,
        len(units), 1 if removed or written else 0, stats.considered, stats.considered - len(removed),
        False, len(skipped), sum(f.file_size_in_bytes for f in skipped),
        started, int(time.time() * 1000), ctx.spark.sparkContext.defaultParallelism,
        sum(u.num_files for u in units),
        (len(dropped), sum(f.record_count for f in removed) - sum(f.record_count for f in written)),
        stats.other_spec, len(table.schema().columns), with_stats,
    )
    return J.result_rows(ctx.spark, [(table.location(), metrics)], RESULT_SCHEMA)
