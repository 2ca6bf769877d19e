"""Reading lake tables: the Spark plan that reads a planned scan, with its deletes applied.

Columns are matched by Iceberg field id (``parquet.field.id`` in the read schema), so renamed,
added and dropped columns read right whatever schema a file was written with.

Deletes (see lakerules.scan.planning for which apply to which data file):

- position deletes: the rows of the applicable delete files, restricted to the (delete file,
  data file) pairs planning allowed, are anti-joined with the data rows on (file, row index).
  Paths are compared in one normal form on both sides, whatever URI form the writer used
  (``file:/x``, ``file:///x``, ``/x``) and however Spark reports the file it read.
- equality deletes (seed 000): data files are grouped by the set of equality delete files that
  apply to them. For each group the delete rows are read once (cached per delete file) and
  compiled: a single-column set becomes ``col IS NULL OR col NOT IN (...)`` (NULLs handled
  apart: a NULL delete value deletes NULL rows), which Spark pushes into the Parquet reader;
  multi-column sets become one disjunctive filter of null-safe equalities, without the rows a
  single-column set already deletes; sets over the same columns are merged across files. A set
  larger than ``spark.lakerules.read.equalityDeleteFilterThreshold`` rows becomes a null-safe
  anti-join instead, which Spark broadcasts while the key rows (rows x width, read_files' size
  estimate) fit its autoBroadcastJoinThreshold, and sort-merges beyond.
- equality deletes past that filter (or with data files whose delete sets differ, as CDC batches
  make them): a hash set of keys per scope in the JVM, probed per row by data file (sequence
  number, partition), while its tables fit spark.lakerules.read.equalityDeleteSetBytes
  (lakerules.scan.equality_deletes); past that, the anti-joins below.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import OrderedDict, defaultdict
from functools import reduce

from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F, types as T
from pyspark.sql.types import StructField, StructType

from lakerules.spark import delete_sets, jvm as J, settings, shared
from lakerules.errors import LakeError
from lakerules.scan import deletion_vectors, equality_deletes, lineage as row_lineage
from lakerules.scan.explain import remember
from lakerules.scan.kept import Kept
from lakerules.plan.nodes import LakeScan
from lakerules.iceberg.schema import iceberg_to_spark

FILE_COL, POS_COL, SIZE_COL = "__lakerules_file", "__lakerules_pos", "__lakerules_size"
POSITION_DELETE_SCHEMA = Schema(
    NestedField(2147483546, "file_path", StringType(), required=True),
    NestedField(2147483545, "pos", LongType(), required=True),
)
POS_BROADCAST_KEY = "spark.lakerules.read.positionDeleteBroadcastRows"
POS_BROADCAST_DEFAULT = 5_000_000
POS_DRIVER_KEY = "spark.lakerules.read.positionDeleteDriverRows"
POS_DRIVER_DEFAULT = 20_000
EQ_FILTER_THRESHOLD_KEY = "spark.lakerules.read.equalityDeleteFilterThreshold"
EQ_FILTER_THRESHOLD_DEFAULT = 10_000


def normal_path(path: str) -> str:
    """One form for a local path however written: file:/x, file:///x and /x all become /x."""
    return re.sub(r"^file:/*", "/", path)


def normal_path_col(col: Column) -> Column:
    return F.regexp_replace(col, r"^file:/*", "/")


TASKS_BY_ROWS_KEY = "spark.lakerules.read.tasksByRows"


def _listing(files, by_rows: bool = True) -> str:
    """DataFiles as io.lakerules.LakeFileIndex takes them: length, rows, path, length, rows, path,
    ... (rows -1, unknown, when the read tasks are to stay Spark's: io.lakerules.LakeScanExec)."""
    return J.nul_joined(text for f in files
                        for text in (str(f.file_size_in_bytes), str(f.record_count if by_rows else -1), f.file_path))


def read_files(spark, schema: Schema, files: list, with_positions: bool = False, *,
               row_groups: str | None = None, deletes=None, lineage: list | None = None) -> DataFrame:
    """A DataFrame reading Parquet data files with an Iceberg schema (columns by field id);
    with_positions adds each row's file, as Spark names it (see status_names), its row index
    and the file's length. ``files`` are DataFiles (their lengths come from the manifests). They reach Spark in one call as an io.lakerules.LakeFileIndex: no listing, no status
    call and no Spark job per file. ``row_groups`` (late materialization) restricts the read to
    the row groups it lists (io.lakerules.RowGroupParquetFormat). ``deletes``, a JVM
    PositionDeleteSet (by Spark's names of the files): the rows it deletes are dropped inside the
    reader, batch by batch (io.lakerules.PositionDeletesParquetFormat). ``lineage``: each file's
    (first_row_id, data sequence number), in ``files``' order: then each row has its file's as
    row_lineage.CONSTANTS (constant _metadata fields the reader appends, lakerules.scan.lineage)."""
    read_schema = iceberg_to_spark(schema, with_ids=True)
    if not files:
        df = J.local_frame(spark, [], read_schema)
        if with_positions:
            df = df.select(
                "*",
                F.lit(None).cast("string").alias(FILE_COL),
                F.lit(None).cast("long").alias(POS_COL),
                F.lit(None).cast("long").alias(SIZE_COL),
            )
        if lineage is not None:
            df = df.select("*", *[F.lit(None).cast("long").alias(c) for c in row_lineage.CONSTANTS])
        return df
    jschema = J.data_type(spark, read_schema.json())
    options = J.nul_joined([shared.ROW_GROUPS_OPTION, row_groups]) if row_groups is not None else ""
    # what Spark's planner sees (a join's broadcast side): the rows in memory, as Iceberg's scans
    # report them (rows x the schema's default width), not the files' compressed bytes: 10M
    # sequential ids compress below the 10 MiB broadcast threshold
    rows = sum(f.record_count for f in files)
    estimate = min(rows * max(jschema.defaultSize(), 1), (1 << 63) - 1)
    by_rows = settings.flag(TASKS_BY_ROWS_KEY, spark.conf.get(TASKS_BY_ROWS_KEY, None), True)
    constants = None
    if lineage is not None:
        constants = J.nul_joined(text for first, seq in lineage for text in ("" if first is None else str(first), str(seq)))
    plan = J.file_index_read(spark, _listing(files, by_rows), jschema, options, estimate, deletes, constants)
    df = J.dataframe(spark, plan)
    if with_positions:
        df = df.select(
            "*",
            F.col("_metadata.file_path").alias(FILE_COL),
            F.col("_metadata.row_index").alias(POS_COL),
            F.col("_metadata.file_size").alias(SIZE_COL),
        )
    if lineage is not None:
        fields = (shared.FIRST_ROW_ID_FIELD, shared.DATA_SEQUENCE_FIELD)
        df = df.select("*", *[F.col(f"_metadata.{f}").alias(c) for f, c in zip(fields, row_lineage.CONSTANTS)])
    return df


_names: dict = {}  # (application, path) -> Spark's name of the file
_NAMES_KEPT = 200_000


def status_names(spark, paths: list[str]) -> dict[str, str]:
    """path -> the name Spark's reader gives the file in _metadata.file_path: qualified in one
    JVM call for the paths not named before in this application (a path's name never changes)."""
    app = spark.sparkContext.applicationId
    with _cache_lock:
        known = {p: _names[(app, p)] for p in paths if (app, p) in _names}
    missing = [p for p in dict.fromkeys(paths) if p not in known]
    if missing:
        joined = J.file_names(spark, J.nul_joined(missing))
        named = dict(zip(missing, joined.split("\0")))
        known.update(named)
        with _cache_lock:
            if len(_names) + len(named) > _NAMES_KEPT:
                _names.clear()
            _names.update(((app, p), n) for p, n in named.items())
    return known


def spark_file_path(column: str = "_metadata.file_path") -> Column:
    """The file Spark read a row from, in normal_path form. Spark names files by URI, URL-encoded
    (a '+' stays '+'), in a form that depends on the file system (file:/x for local files)."""
    decoded = F.url_decode(F.replace(F.col(column), F.lit("+"), F.lit("%2B")))
    return normal_path_col(decoded)


def scan_dataframe(ctx, scan: LakeScan, positions: bool = False, lineage: tuple[str, ...] | None = None) -> DataFrame:
    """The rows of a planned scan: its data files with every applicable delete applied. With
    ``positions``, each row also carries its file (Spark's name, see status_names) and row index
    (FILE_COL, POS_COL): what a row-level command needs to delete it. ``lineage``: the row lineage
    columns of a v3 table to add after the table's columns (lakerules.scan.lineage; None: those
    the scan's output names)."""
    spark, schema = ctx.spark, scan.schema
    if lineage is None:
        lineage = row_lineage.requested(scan.iceberg, schema, scan.output)
    out = [f.name for f in schema.as_struct().fields] + list(lineage) + ([FILE_COL, POS_COL] if positions else [])
    if lineage:  # read with each row's file and position, and the stored lineage columns
        positions, schema = True, row_lineage.read_schema(schema, lineage)
    columns = [f.name for f in schema.as_struct().fields]
    if positions:
        columns += [FILE_COL, POS_COL]
    constants = {}  # a lineage read: each file's (first_row_id, data sequence number), read by the reader
    if lineage:
        columns += list(row_lineage.CONSTANTS)
        constants = row_lineage.constants(scan.iceberg, scan.snapshot_id, scan.plan.files)
    threshold = settings.count(EQ_FILTER_THRESHOLD_KEY, ctx.conf(EQ_FILTER_THRESHOLD_KEY, None),
                               EQ_FILTER_THRESHOLD_DEFAULT, "rows")
    hashed = equality_deletes.plan(ctx, scan, threshold)  # per-file hash sets in the JVM
    # or, once found, the positions those sets delete from each file, dropped in the reader
    by_positions = settings.flag(equality_deletes.POSITIONS_KEY, ctx.conf(equality_deletes.POSITIONS_KEY, None), True)
    resolved = None
    if by_positions and hashed is not None:
        resolved = equality_deletes.positions(ctx, scan, hashed, sys.modules[__name__])
    if resolved is not None:
        hashed = None
    joined = hashed is not None or (resolved is None and _equality_by_join(scan))
    groups: dict[tuple, list] = defaultdict(list)
    for planned in scan.plan.files:
        # Grouped by their deletes' kind, each group one read (files without any: see below)
        eq = () if joined or resolved is not None else tuple(d.file_path for d in planned.equality_deletes)
        groups[(eq, deletion_vectors.kind(planned))].append(planned)
    if not groups:
        df = read_files(spark, schema, [], positions)
        return J.select(df.select("*", *[F.lit(None).cast("long").alias(n) for n in lineage]), out)
    parts = []
    # Files without deletes of their own join the read of files whose deletes its reader drops (the
    # same equality deletes): one scan, its tasks dealt by rows together. A scan of their own was
    # a small task waiting for a core (a table changed in batches: its newest file, 26 ms on the
    # critical path of a 0.8 s full scan on 2 cores).
    plain = {eq: files for (eq, kind), files in groups.items() if kind == deletion_vectors.NONE}
    for (eq, deletes), files in sorted(groups.items(), key=lambda g: (g[0][1] == deletion_vectors.NONE, g[0])):
        if deletes == deletion_vectors.NONE and eq not in plain:
            continue  # read with files that have deletes, above
        deleted = _delete_set(ctx, files, deletes)  # dropped in the reader
        by_join = deletes != deletion_vectors.NONE and deleted is None
        if deleted is not None and eq in plain:
            files = files + plain.pop(eq)
        if resolved is not None:  # an anti-joined group's reader drops only the equality deletes
            names = status_names(spark, [p.file.file_path for p in files])
            deleted = resolved.delete_set(ctx, None if by_join else deleted, [names[p.file.file_path] for p in files])
        df = read_files(spark, schema, [p.file for p in files], by_join or positions or joined, deletes=deleted,
                        lineage=[constants[p.file.file_path] for p in files] if lineage else None)
        if by_join:
            df = _position_anti_join(ctx, df, files)
        if joined:
            df = J.select(df, columns + ([] if positions else [FILE_COL]))
        elif by_join or positions:  # a plain read has the columns already, in order
            df = J.select(df, columns)
        if files[0].equality_deletes and not joined and resolved is None:
            df = _apply_equality_deletes(ctx, scan, df, files[0].equality_deletes)
        parts.append(df)
    df = reduce(lambda a, b: a.unionByName(b), parts)
    if hashed is not None:
        df = J.select(hashed.apply(ctx, scan, df, sys.modules[__name__]), columns)
    elif joined:
        df = J.select(_equality_anti_joins(ctx, scan, df), columns)
    if lineage:
        df = J.select(row_lineage.apply(df, lineage, POS_COL), out)
    return df


def lower_scan(ctx, scan: LakeScan, lower):
    """LakeScan -> Project(aliases keeping the relation's exprIds) over the scan's reads,
    optimized on their own (the scan is planned inside Spark's optimizer)."""
    remember(scan)
    return aliased_plan(ctx, scan, scan_dataframe(ctx, scan))


def aliased_plan(ctx, scan: LakeScan, df: DataFrame, extra: list[str] = ()):
    """df's columns as the scan's output attributes (same exprIds), then ``extra`` as they are:
    the optimized JVM plan that stands for the scan in the query's plan."""
    spark = ctx.spark
    names = [a.name for a in scan.output]
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise LakeError(
            f"lakerules: column(s) {missing} of {scan.table} are not in the schema the scan was planned "
            "with; the table changed while the query was planned, run it again"
        )
    plan = J.optimized_plan(J.select(df, [*names, *extra]))
    return J.rename_project(spark, plan, [attr.jvm for attr in scan.output])


# ---- position deletes ----------------------------------------------------------------------------


def _delete_set(ctx, files: list, kind: int):
    """The JVM PositionDeleteSet of the planned ``files``' position deletes, which their reader
    drops (io.lakerules.PositionDeletesParquetFormat), or None: no deletes, or too many to
    broadcast (then _position_anti_join). The data files are named as Spark's reader names them;
    the delete rows' paths, in whatever URI form their writer used, are normalized and mapped to
    those names through the (delete file, data file) pairs planning allowed (sequence numbers,
    partitions).

    Deletion vectors (v3) are read and decoded once on the driver (lakerules.scan.deletion_vectors).
    Up to spark.lakerules.read.positionDeleteBroadcastRows delete rows of position delete files,
    the deleted positions of each data file are collected once (cached per set of delete files)
    and broadcast as sorted arrays, which the reader walks as a file's rows go by, as Iceberg's
    readers do with a position bitmap."""
    spark = ctx.spark
    if kind == deletion_vectors.NONE:
        return None
    if kind == deletion_vectors.DELETION_VECTOR:
        names = status_names(spark, sorted({p.file.file_path for p in files}))
        return deletion_vectors.delete_set(spark, files, names)
    delete_files, names = _position_delete_files(spark, files)
    if sum(f.record_count for f in delete_files) > settings.count(
            POS_BROADCAST_KEY, ctx.conf(POS_BROADCAST_KEY, None), POS_BROADCAST_DEFAULT, "rows"):
        return None
    pairs = sorted({(names[d.file_path], normal_path(p.file.file_path), names[p.file.file_path])
                    for p in files for d in p.position_deletes})
    return _position_set(ctx, pairs, delete_files, names)


def _position_delete_files(spark, files: list) -> tuple[list, dict]:
    """The planned ``files``' position delete files, by path, and Spark's names of those and of
    the data files (status_names)."""
    by_path = {d.file_path: d for p in files for d in p.position_deletes}
    names = status_names(spark, sorted({p.file.file_path for p in files} | set(by_path)))
    return [by_path[k] for k in sorted(by_path)], names


_POSITION_SET_ROWS = 20_000_000  # cached delete rows at most (8 bytes each on the driver)
_position_sets = Kept(lambda s: s.rows(), _POSITION_SET_ROWS)  # (application, pairs) -> JVM PositionDeleteSet


def _position_set(ctx, pairs: list[tuple[str, str, str]], delete_files: list, names: dict):
    """The JVM PositionDeleteSet of (delete file name, data file path, data file name) pairs:
    the rows of those delete files (DataFiles, named in the pairs; ``names``: each file's name)
    that point at those data files, by data file name. A set is built once per process and
    application, from each delete file's rows decoded once per driver (delete files never
    change: a table that gains a few delete files a commit decodes only those). The delete
    files not yet decoded, if they hold at most spark.lakerules.read.positionDeleteDriverRows
    rows in all, are read on the driver by the JVM (PositionDeleteSet.readOnDriver): no Spark
    job, whose scheduling costs more than reading a few small files (measured: 100,000 rows in
    10 files read on the driver took ~0.6 s more than the job on 2 cores); more by a Spark job."""
    spark = ctx.spark
    return _position_sets.get((spark.sparkContext.applicationId, tuple(pairs)),
                              lambda: _build_position_set(ctx, pairs, delete_files, names))


def _build_position_set(ctx, pairs: list[tuple[str, str, str]], delete_files: list, names: dict):
    spark = ctx.spark
    files = [(d.file_path, d.file_size_in_bytes) for d in delete_files]
    missing = [d for d, gone in zip(delete_files, delete_sets.uncached_delete_files(spark, files)) if gone]
    on_driver = settings.count(POS_DRIVER_KEY, ctx.conf(POS_DRIVER_KEY, None), POS_DRIVER_DEFAULT, "rows")
    if missing and sum(d.record_count for d in missing) > on_driver:
        # each row named by its delete file (length and path) and its data file's path, NUL-separated
        keys = J.local_frame(spark, [(names[d.file_path], f"{d.file_size_in_bytes}\0{d.file_path}") for d in missing],
                             StructType.fromDDL("d_file STRING, d_key STRING"))
        deletes = read_files(spark, POSITION_DELETE_SCHEMA, missing, with_positions=True)
        rows = (deletes.select(F.col(FILE_COL).alias("d_file"), normal_path_col(F.col("file_path")).alias("d_path"), "pos")
                .join(F.broadcast(keys), "d_file")
                .select(F.concat_ws("\0", "d_key", "d_path"), "pos"))
        delete_sets.cache_delete_files(spark, J.analyzed(rows))
    index = {names[d.file_path]: i for i, d in enumerate(delete_files)}
    return delete_sets.position_delete_set_on_driver(spark, files, [(index[d], path, name) for d, path, name in pairs])


def _position_anti_join(ctx, data: DataFrame, files: list) -> DataFrame:
    """Anti-join on (file, position), for delete sets too large to broadcast. Where the data
    files' lengths tell them apart, the join key is one long instead of (path, position):
    length * M + position, with M above every file's record count, so no row hashes a path."""
    spark = ctx.spark
    delete_files, names = _position_delete_files(spark, files)
    width = max(p.file.record_count for p in files) + 1
    # _metadata.file_size is the length the manifest gave the file index (LakeFileIndex)
    sizes = {p.file.file_path: p.file.file_size_in_bytes for p in files}
    by_length = (
        None not in sizes.values()
        and len(set(sizes.values())) == len(sizes)
        and max(sizes.values()) * width + width < 2**63
    )
    pairs = sorted({
        (names[d.file_path], normal_path(p.file.file_path), names[p.file.file_path],
         sizes[p.file.file_path] if by_length else None)
        for p in files
        for d in p.position_deletes
    })
    allowed = J.local_frame(spark, pairs, StructType.fromDDL("d_file STRING, d_path STRING, d_name STRING, d_size BIGINT"))
    deletes = read_files(spark, POSITION_DELETE_SCHEMA, delete_files, with_positions=True)
    deletes = deletes.select(
        F.col(FILE_COL).alias("d_file"),
        normal_path_col(F.col("file_path")).alias("d_path"),
        F.col("pos").alias("d_pos"),
    )
    deletes = deletes.join(F.broadcast(allowed), ["d_file", "d_path"])
    if by_length:
        # A position outside [0, width) deletes no row (and must not reach the next file's keys).
        deletes = deletes.where((F.col("d_pos") >= 0) & (F.col("d_pos") < width)).select(
            (F.col("d_size") * width + F.col("d_pos")).alias("d_key")
        )
        pos = data[POS_COL]
        key = F.when(pos < width, data[SIZE_COL] * width + pos)
        data = data.select("*", key.alias("__lakerules_key"))
        condition = data["__lakerules_key"] == F.col("d_key")
    else:
        deletes = deletes.select(F.col("d_name").alias("d_path"), "d_pos")
        condition = (data[FILE_COL] == F.col("d_path")) & (data[POS_COL] == F.col("d_pos"))
    return data.join(deletes, condition, "left_anti")


# ---- equality deletes ----------------------------------------------------------------------------

_cache_lock = threading.Lock()
_delete_rows: OrderedDict = OrderedDict()  # (delete file path, field ids) -> list of value tuples
_CACHE_FILES = 256


def _equality_rows(ctx, scan: LakeScan, f) -> tuple[tuple[int, ...], list[tuple]]:
    """The rows of one equality delete file, read once per process (delete files never change)."""
    ids = tuple(f.equality_ids)
    cache_key = (f.file_path, ids)
    with _cache_lock:
        if cache_key in _delete_rows:
            _delete_rows.move_to_end(cache_key)
            return ids, _delete_rows[cache_key]
    table_schema = scan.iceberg.schema()
    fields = [_field(scan, table_schema, i) for i in ids]
    df = read_files(ctx.spark, Schema(*fields), [f])
    rows = [tuple(r) for r in df.collect()]
    with _cache_lock:
        _delete_rows[cache_key] = rows
        while len(_delete_rows) > _CACHE_FILES:
            _delete_rows.popitem(last=False)
    return ids, rows


def _field(scan: LakeScan, schema: Schema, field_id: int) -> NestedField:
    try:
        return schema.find_field(field_id)
    except ValueError:
        raise LakeError(f"lakerules: equality delete column {field_id} of {scan.table} is not in the table schema") from None


def _apply_equality_deletes(ctx, scan: LakeScan, data: DataFrame, delete_files) -> DataFrame:
    names = {f.field_id: f.name for f in scan.schema.as_struct().fields}
    types = {f.field_id: iceberg_to_spark(Schema(f)).fields[0].dataType for f in scan.schema.as_struct().fields}
    # merge the delete rows of files with the same equality columns
    sets: dict[tuple[int, ...], set[tuple]] = defaultdict(set)
    for f in delete_files:
        ids, rows = _equality_rows(ctx, scan, f)
        sets[ids].update(rows)
    threshold = settings.count(EQ_FILTER_THRESHOLD_KEY, ctx.conf(EQ_FILTER_THRESHOLD_KEY, None),
                               EQ_FILTER_THRESHOLD_DEFAULT, "rows")
    single = {ids[0]: values for ids, values in sets.items() if len(ids) == 1}
    for ids, values in sorted(sets.items()):
        missing = [i for i in ids if i not in names]
        if missing:
            # a column dropped since: null-safe equality with NULL, as the row no longer has a value
            values = {v for v in values if all(v[ids.index(i)] is None for i in missing)}
            if not values:
                continue
        if len(ids) > 1:
            # the seed's simplification: rows a single-column set already deletes need no check
            values = {v for v in values if not any((v[k],) in single.get(i, ()) for k, i in enumerate(ids))}
            if not values:
                continue
        cols = [names.get(i) for i in ids]
        if len(values) <= threshold:
            data = data.where(_keep_filter(ctx.spark, cols, [types.get(i) for i in ids], values))
        else:
            data = _anti_join(ctx, scan, data, ids, cols, values)
    return data


def _equality_by_join(scan: LakeScan) -> bool:
    """Whether the scan's equality deletes are applied by one anti-join per set of equality
    columns over all its data files (_equality_anti_joins) rather than per group of data files
    sharing a set of delete files. Groups multiply with the delete files written one after
    another (each CDC batch's applies to every earlier file), and each group's filter would carry
    the keys of all its files: B batches ship about B * B / 2 batches' keys. The join reads each
    delete file once, in Spark. With a single group the per-group filter stays (a NOT IN pushed
    to Parquet), as it does for a column dropped since a delete file was written."""
    sets = {tuple(d.file_path for d in p.equality_deletes) for p in scan.plan.files if p.equality_deletes}
    if len(sets) < 2:
        return False
    names = {f.field_id for f in scan.schema.as_struct().fields}
    return all(i in names for p in scan.plan.files for d in p.equality_deletes for i in d.equality_ids)


def _equality_anti_joins(ctx, scan: LakeScan, data: DataFrame) -> DataFrame:
    """Equality deletes as Iceberg states them, applied in Spark: a data row goes when a row of
    a delete file with a higher sequence number than its data file's, global (an unpartitioned
    spec) or of the data file's spec and partition, equals it on the delete's columns (NULL
    equal to NULL). ``data`` carries FILE_COL; each data file's sequence number and partition,
    and each delete file's, reach Spark as small tables joined by file name."""
    spark, iceberg = ctx.spark, scan.iceberg
    specs = iceberg.specs()

    def scope(f) -> str:
        return f"{f.spec_id}:{_key_text(f.partition)}"

    files = scan.plan.files
    data_names = status_names(spark, [p.file.file_path for p in files])
    data_info = J.local_frame(
        spark, [(data_names[p.file.file_path], p.sequence_number, scope(p.file)) for p in files],
        StructType([StructField("__lakerules_df", T.StringType()), StructField("__lakerules_dseq", T.LongType()),
                    StructField("__lakerules_dscope", T.StringType())]))
    data = data.join(F.broadcast(data_info), data[FILE_COL] == data_info["__lakerules_df"]).drop("__lakerules_df")
    deletes: dict[tuple, dict] = defaultdict(dict)
    delete_seq: dict[str, int] = {}
    for p in files:
        delete_seq.update(p.equality_sequence)
        for d in p.equality_deletes:
            deletes[tuple(d.equality_ids)][d.file_path] = d
    names = {f.field_id: f.name for f in scan.schema.as_struct().fields}
    for ids, by_path in sorted(deletes.items()):
        fields = [_field(scan, iceberg.schema(), i) for i in ids]
        keys = [f"__lakerules_eq_{k}" for k in range(len(ids))]
        dnames = status_names(spark, list(by_path))
        info = J.local_frame(
            spark, [(dnames[path], delete_seq[path], None if specs[d.spec_id].is_unpartitioned() else scope(d))
                    for path, d in by_path.items()],
            StructType([StructField("__lakerules_ef", T.StringType()), StructField("__lakerules_eseq", T.LongType()),
                        StructField("__lakerules_escope", T.StringType())]))
        rows = read_files(spark, Schema(*fields), list(by_path.values()), True)
        rows = rows.select(*[rows[J.quote(f.name)].alias(k) for f, k in zip(fields, keys)], rows[FILE_COL].alias("__lakerules_ef"))
        rows = rows.join(F.broadcast(info), "__lakerules_ef").drop("__lakerules_ef")
        condition = reduce(lambda a, b: a & b, [data[J.quote(names[i])].eqNullSafe(rows[k]) for i, k in zip(ids, keys)])
        condition = (condition & (rows["__lakerules_eseq"] > data["__lakerules_dseq"])
                     & (rows["__lakerules_escope"].isNull() | (rows["__lakerules_escope"] == data["__lakerules_dscope"])))
        data = data.join(rows, condition, "left_anti")
    return data


def _key_text(partition) -> str:
    return repr(tuple(partition)) if partition is not None else "()"


def _keep_filter(spark, cols: list, types: list, values: set[tuple]) -> Column:
    """The rows an equality delete set keeps, as one filter Spark can push to Parquet. A
    single-column set is one NOT IN whose values reach the JVM in bulk as data (J.is_in)."""
    if len(cols) == 1:
        col = J.column(cols[0]) if cols[0] else F.lit(None)
        plain = sorted((v[0] for v in values if v[0] is not None), key=repr)
        keep = ~J.is_in(spark, col, plain, types[0]) if plain else F.lit(True)
        if any(v[0] is None for v in values):
            return col.isNotNull() & keep  # NULL deletes NULL
        return col.isNull() | keep  # NULL NOT IN (...) is NULL: keep NULLs explicitly
    # several columns: one key set, the rows in bulk. A column dropped since the delete was
    # written is NULL in every row and matches only the rows whose value there is NULL (the
    # caller kept only those): it is left out of the key.
    present = [k for k, c in enumerate(cols) if c]
    if not present:
        return F.lit(False)  # every kept delete row matches every row
    schema = StructType([StructField(f"k{k}", types[k]) for k in present])
    rows = sorted({tuple(v[k] for k in present) for v in values}, key=repr)
    return ~J.in_rows(spark, [J.column(cols[k]) for k in present], rows, schema)


def _anti_join(ctx, scan: LakeScan, data: DataFrame, ids, cols, values) -> DataFrame:
    fields = [_field(scan, scan.iceberg.schema(), i) for i in ids]
    schema = iceberg_to_spark(Schema(*fields))
    renamed = [f"__lakerules_eq_{k}" for k in range(len(ids))]
    deletes = J.local_frame(ctx.spark, sorted(values, key=repr), schema).toDF(*renamed)
    condition = reduce(
        lambda a, b: a & b,
        [(data[J.quote(c)] if c else F.lit(None)).eqNullSafe(deletes[r]) for c, r in zip(cols, renamed)],
    )
    return data.join(F.broadcast(deletes), condition, "left_anti")

