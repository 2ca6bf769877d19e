"""CALL lake.system.rewrite_position_delete_files: Iceberg's compaction of position delete files.

    CALL lake.system.rewrite_position_delete_files(table => 'db.t' [, options => map('rewrite-all', 'true', ...)]
                                                   [, where => 'partition predicate'])

As Iceberg's action (RewritePositionDeleteFiles), per partition:

1. Plan the current snapshot from its metadata: every live position delete file, and which live
   data files each applies to (lakerules.scan.planning: partitions, sequence numbers, file_path
   bounds). ``where`` keeps the delete files of the partitions its inclusive projection selects.
2. A delete file that applies to no live data file (every entry dangling: its data files were
   rewritten or removed since) is removed, unread.
3. The others are chosen as Iceberg's size-based rewriter chooses them: files smaller than
   min-file-size-bytes or larger than max-file-size-bytes (every file with rewrite-all), packed
   per partition into groups of at most max-file-group-size-bytes; a group is rewritten when it
   has at least min-input-files files (and more than one), more than target-file-size-bytes
   (and more than one file), or more than max-file-size-bytes.
4. Spark reads the groups' delete files in one job and keeps the entries that apply to a live
   data file (a join with the planned (delete file, data file) pairs, built once and broadcast:
   no row goes through Python), each written with the data file's path as its manifest spells
   it; each group becomes round(size / target) files (at least one), sorted by path and position
   (lakerules.write.position_deletes.write), its data files split between them in path order.
5. One "replace" snapshot removes the rewritten and dangling delete files and adds the new ones,
   changing no data file (lakerules.write.rewrites.rewrite_deletes). The table's rows are unchanged.

On a format-version 3 table (where position delete files are left from before its upgrade, and
deletes are deletion vectors) the procedure turns the position delete files of the selected
partitions into deletion vectors, as a v3 writer merges them: every live data file they apply to
(and that has no DV yet: a file with one reads only its DV) gets one DV holding their positions,
all in one new Puffin file, and the position delete files go, in one "replace" snapshot. A
commit meanwhile that adds a DV for one of those data files conflicts with it (two DVs for one
file never land). Existing DVs are kept as they are (one per data file already). The size options
do not apply there and are refused; rewrite-all is accepted (every file is converted).
"""

from __future__ import annotations

from collections import defaultdict

from pyiceberg.exceptions import ValidationException
from pyiceberg.expressions.visitors import expression_evaluator, inclusive_projection
from pyiceberg.manifest import DataFileContent, FileFormat, ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakerules.write import deletion_vectors, rewrites
from lakerules.spark import jvm as J, progress
from lakerules.iceberg import names, v3
from lakerules.scan import deletion_vectors as read_dvs
from lakerules.errors import ConflictError, LakeError, NotSupported
from lakerules.optimize.clauses import partition_predicate as _partition_predicate
from lakerules.procedures.rewrite_data_files import options_of as _options
from lakerules.plan.nodes import TableRef
from lakerules.scan.planning import plan_scan
from lakerules.scan.read import FILE_COL, POSITION_DELETE_SCHEMA, normal_path, normal_path_col, read_files, status_names
from lakerules.write.files import PART_COL, discard
from lakerules.write.position_deletes import write as write_position_deletes

PROCEDURE = "rewrite_position_delete_files"

# Iceberg's options (its size-based rewriter's and its action's): name -> (field, kind), as
# lakerules.procedures.rewrite_data_files.options_of reads them; refused ones say why.
OPTIONS = {
    "target-file-size-bytes": ("target", "size"),
    "min-file-size-bytes": ("min", "count"),
    "max-file-size-bytes": ("max", "size"),
    "min-input-files": ("min_input_files", "count"),
    "max-file-group-size-bytes": ("max_group", "size"),
    "rewrite-all": ("rewrite_all", "bool"),
    "partial-progress.enabled": (None, "false"),  # one atomic commit
}
REFUSED = {
    "partial-progress.max-commits": "lakerules commits the rewrite once, atomically (partial-progress.enabled is false)",
    "max-concurrent-file-group-rewrites": "lakerules rewrites every file group in one Spark job",
    "rewrite-job-order": "lakerules rewrites every file group in one Spark job, in no order",
}
TARGET_DEFAULT = 512 * 1024 * 1024  # Iceberg's write.target-file-size-bytes default
MAX_GROUP_DEFAULT = 100 * 1024 * 1024 * 1024  # Iceberg's max-file-group-size-bytes default
MIN_INPUT_FILES_DEFAULT = 5


def settings(table, options) -> dict:
    """The options with Iceberg's defaults, checked as Iceberg checks them."""
    where = f"CALL system.{PROCEDURE}"
    given = _options(where, options, OPTIONS, REFUSED)
    raw = table.properties.get("write.target-file-size-bytes")
    try:
        default_target = int(raw) if raw is not None else TARGET_DEFAULT
    except ValueError:
        raise LakeError(f"lakerules: {where}: table property write.target-file-size-bytes={raw!r} is not a number") from None
    s = {"target": given.get("target", default_target), "max_group": given.get("max_group", MAX_GROUP_DEFAULT),
         "min_input_files": given.get("min_input_files", MIN_INPUT_FILES_DEFAULT),
         "rewrite_all": given.get("rewrite_all", False)}
    s["min"] = given.get("min", int(s["target"] * 0.75))
    s["max"] = given.get("max", int(s["target"] * 1.8))
    if s["min_input_files"] < 1:
        raise LakeError(f"lakerules: {where}: option min-input-files={s['min_input_files']}: it must be positive")
    if not s["min"] < s["target"]:
        raise LakeError(f"lakerules: {where}: min-file-size-bytes ({s['min']}) must be less than "
                        f"target-file-size-bytes ({s['target']})")
    if not s["max"] > s["target"]:
        raise LakeError(f"lakerules: {where}: max-file-size-bytes ({s['max']}) must be greater than "
                        f"target-file-size-bytes ({s['target']})")
    return s


def _live_position_deletes(table, snapshot) -> list:
    """The live position delete files (not deletion vectors) of ``snapshot``."""
    out = []
    for m in snapshot.manifests(table.io):
        if m.content != ManifestContent.DELETES:
            continue
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
            f = e.data_file
            if f.file_format == FileFormat.PUFFIN:
                if table.format_version < 3:
                    raise LakeError(f"lakerules: table {names.table_name(table)} has format version "
                                    f"{table.format_version} but lists a deletion vector ({f.file_path}); "
                                    f"{PROCEDURE} does not rewrite it")
                continue
            if f.content == DataFileContent.POSITION_DELETES:
                out.append(f)
    return out


def _groups(files: list, s: dict) -> list[list]:
    """One partition's files to rewrite, in groups, as Iceberg's size-based rewriter picks them."""
    chosen = sorted((f for f in files if s["rewrite_all"] or f.file_size_in_bytes < s["min"]
                     or f.file_size_in_bytes > s["max"]), key=lambda f: (f.file_size_in_bytes, f.file_path))
    groups, current, size = [], [], 0
    for f in chosen:
        if current and size + f.file_size_in_bytes > s["max_group"]:
            groups.append(current)
            current, size = [], 0
        current.append(f)
        size += f.file_size_in_bytes
    if current:
        groups.append(current)

    def rewrite(group) -> bool:
        total = sum(f.file_size_in_bytes for f in group)
        many = len(group) > 1
        return s["rewrite_all"] or (many and len(group) >= s["min_input_files"]) or (many and total > s["target"]) \
            or total > s["max"]

    return [g for g in groups if rewrite(g)]


def run(ctx, table, values: dict):
    from lakerules.procedures.maintenance import RESULTS

    spark = ctx.spark
    s = settings(table, values.get("options"))
    ref = TableRef(table.catalog.name, tuple(table.name()[:-1]), table.name()[-1])
    if table.format_version >= 3:
        _v3_options(ref, values.get("options"))
    predicate = _partition_predicate(ctx, table, ref, values.get("where"), f"CALL system.{PROCEDURE}")
    snapshot = table.current_snapshot()
    if snapshot is None:
        return J.result_rows(spark, [(0, 0, 0, 0)], RESULTS[PROCEDURE])
    # 1. plan: the live delete files of the selected partitions, and what each applies to
    schema = table.schema()
    evaluators = {}

    def selected(f) -> bool:
        if f.spec_id not in evaluators:
            spec = table.specs()[f.spec_id]
            evaluators[f.spec_id] = expression_evaluator(Schema(*spec.partition_type(schema).fields),
                                                         inclusive_projection(schema, spec)(predicate), True)
        return evaluators[f.spec_id](f.partition)

    deletes = [d for d in _live_position_deletes(table, snapshot) if selected(d)]
    if not deletes:
        return J.result_rows(spark, [(0, 0, 0, 0)], RESULTS[PROCEDURE])
    scan = plan_scan(table, snapshot.snapshot_id)
    if table.format_version >= 3:
        return _to_deletion_vectors(ctx, table, ref, snapshot, deletes, scan)
    applies: dict[str, set[str]] = defaultdict(set)  # delete file -> the live data files it applies to
    for p in scan.files:
        for d in p.position_deletes:
            applies[d.file_path].add(p.file.file_path)
    # 2. dangling files; 3. the groups
    dangling = [d for d in deletes if d.file_path not in applies]
    partitions = defaultdict(list)
    for d in deletes:
        if d.file_path in applies:
            partitions[(d.spec_id, tuple(d.partition or ()))].append(d)
    groups = [g for files in partitions.values() for g in _groups(files, s)]
    removed = dangling + [d for g in groups for d in g]
    if not removed:
        return J.result_rows(spark, [(0, 0, 0, 0)], RESULTS[PROCEDURE])
    # 4. rewrite: each output file is an index into `outputs`, (spec id, partition)
    written = []
    if groups:
        outputs, allowed = [], []
        read = [d for g in groups for d in g]
        names = status_names(spark, [d.file_path for d in read])
        for g in groups:
            data_paths = sorted({path for d in g for path in applies[d.file_path]})
            n = max(1, min(len(data_paths), round(sum(d.file_size_in_bytes for d in g) / s["target"])))
            first = len(outputs)
            outputs += [(g[0].spec_id, Record(*(g[0].partition or ())))] * n
            chunk = {path: first + i * n // len(data_paths) for i, path in enumerate(data_paths)}
            allowed += [(names[d.file_path], normal_path(path), path, chunk[path])
                        for d in g for path in sorted(applies[d.file_path])]
        progress.step(spark, f"rewrite {len(read)} position delete files in {len(groups)} groups")
        pairs = J.local_frame(spark, allowed, StructType.fromDDL(
            f"d_file STRING, d_path STRING, data_path STRING, {PART_COL} INT"))
        rows = (read_files(spark, POSITION_DELETE_SCHEMA, read, with_positions=True)
                .select(F.col(FILE_COL).alias("d_file"), normal_path_col(F.col("file_path")).alias("d_path"), "pos")
                .join(F.broadcast(pairs), ["d_file", "d_path"])
                .select(F.col("data_path").alias("file_path"), "pos", PART_COL))
        written = write_position_deletes(spark, table, rows, outputs)
    # 5. commit
    _commit(table, ref, snapshot, removed, written)
    row = (len(removed), len(written), sum(d.file_size_in_bytes for d in removed),
           sum(f.file_size_in_bytes for f in written))
    return J.result_rows(spark, [row], RESULTS[PROCEDURE])


def _commit(table, ref, snapshot, removed: list, written: list, discardable: list | None = None) -> None:
    """One "replace" snapshot: ``removed`` delete files out, ``written`` in; the new files
    (``discardable``, default ``written``) deleted again when nothing lands."""
    discardable = written if discardable is None else discardable
    try:
        rewrites.rewrite_deletes(table, snapshot.snapshot_id, removed, written, {"lakerules.operation": PROCEDURE})
    except ValidationException as e:
        discard(table, discardable, e)
        raise ConflictError(
            f"lakerules: {PROCEDURE} on {ref} conflicts with a commit made while it ran, so nothing was committed "
            f"(run it again): {e}"
        ) from None
    except BaseException as e:
        discard(table, discardable, e)
        raise


# the options that choose files by size: on a v3 table every selected position delete file is converted
_SIZE_OPTIONS = ("target-file-size-bytes", "min-file-size-bytes", "max-file-size-bytes", "min-input-files",
                 "max-file-group-size-bytes")


def _v3_options(ref, options) -> None:
    """On a v3 table the size options do not apply: refused."""
    given = [k for k in (options or {}) if k is not None and k.strip().lower() in _SIZE_OPTIONS]
    if given:
        raise NotSupported(f"lakerules: CALL system.{PROCEDURE} on {ref}: option {given[0]!r} does not apply to a "
                           "format-version 3 table, where every position delete file of the selected partitions is "
                           "turned into deletion vectors; nothing was changed")


def _to_deletion_vectors(ctx, table, ref, snapshot, deletes: list, scan):
    """A v3 table: the position delete files ``deletes`` turned into deletion vectors of the data
    files they apply to (see the module's text)."""
    from lakerules.procedures.maintenance import RESULTS

    spark = ctx.spark
    paths = {d.file_path for d in deletes}
    touched = [p for p in scan.files if read_dvs.kind(p) == read_dvs.POSITION_FILES
               and any(d.file_path in paths for d in p.position_deletes)]
    written, discardable = [], []
    if touched:
        progress.step(spark, f"turn {len(deletes)} position delete files into deletion vectors of {len(touched)} "
                             "data files")
        none = J.local_frame(spark, [], StructType.fromDDL("file_path STRING, pos BIGINT"))
        added, kept, replaced = deletion_vectors.write(spark, table, snapshot, none, touched, [])
        assert not kept and not replaced, "data files with a DV were not touched"
        written, discardable = added, list({f.file_path: f for f in added}.values())
    _commit(table, ref, snapshot, deletes, written, discardable)
    row = (len(deletes), len(written), sum(d.file_size_in_bytes for d in deletes),
           sum(v3.deletion_vector_of(f)[2] or 0 for f in written))  # a DV's bytes: its blob's (one Puffin file)
    return J.result_rows(spark, [row], RESULTS[PROCEDURE])

