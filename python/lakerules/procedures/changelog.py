"""CALL lake.system.create_changelog_view: a table's row changes between two snapshots, as a
temporary view with Iceberg's schema.

    CALL lake.system.create_changelog_view(table => 'db.t'
        [, changelog_view => 't_changes']
        [, options => map('start-snapshot-id', '1', 'end-snapshot-id', '2')]   -- or start-/end-timestamp (ms)
        [, compute_updates => true] [, identifier_columns => array('id')] [, net_changes => true])

The view has the table's columns, then ``_change_type`` (INSERT, DELETE, UPDATE_BEFORE,
UPDATE_AFTER), ``_change_ordinal`` (the snapshot's place in the range, from 0) and
``_commit_snapshot_id``. As Iceberg's procedure:

- The range: the snapshots after ``start-snapshot-id`` (exclusive; default: from the table's first)
  up to ``end-snapshot-id`` (inclusive; default: the current one), along the end's ancestry; or
  from the first snapshot committed at or after ``start-timestamp`` to the last committed at or
  before ``end-timestamp`` (milliseconds). Snapshots that only rewrite files ("replace":
  OPTIMIZE, rewrite procedures) change no row and are left out, as Iceberg leaves them out.
- The changes of a snapshot are the rows live in it and not in its parent (INSERT) and the rows
  live in the parent and not in it (DELETE), a row known by its data file and position. Only the
  data files whose presence or deletes differ between the two are read (each with the deletes that
  apply to it there: position deletes, deletion vectors, equality deletes), by Spark; no row goes
  through Python.
- Carry-overs are removed: a row a snapshot deletes and inserts again unchanged (a copy-on-write
  rewrite of its file) is no change. On a format-version 3 table a row is also known by its
  ``_row_id``, so two equal rows are never mistaken for one another.
- ``compute_updates`` (default: true when ``identifier_columns`` are given): a DELETE and an INSERT
  of the same snapshot with the same identifier columns become UPDATE_BEFORE and UPDATE_AFTER. The
  identifier columns are those given, else the table's identifier fields; on a v3 table without
  either, a row's ``_row_id`` is its identity (what row lineage is for). Two deletes or two inserts
  of one identity in one snapshot are an error when the view is read, as in Iceberg.
- ``net_changes``: the changes of the whole range netted per row (a row inserted and then deleted
  within the range is no change); not with ``compute_updates``, as in Iceberg.

The view is a temporary view of the statement's Spark session, over a plan that reads the files
of those snapshots: it reads the same changes whatever the table does afterwards, as long as the
files are there (expire_snapshots may delete them).
"""

from __future__ import annotations

from functools import reduce

from pyiceberg.table.snapshots import ancestors_of
from pyspark.sql import DataFrame, Window, functions as F
from pyspark.sql import types as T

from lakerules.errors import LakeError, NotSupported
from lakerules.iceberg import names, v3
from lakerules.plan.nodes import LakeScan, TableRef
from lakerules.scan import lineage
from lakerules.scan.planning import ScanPlan, plan_scan
from lakerules.scan.read import FILE_COL, POS_COL, scan_dataframe
from lakerules.spark import jvm as J, progress

PROCEDURE = "create_changelog_view"
CHANGE_TYPE, ORDINAL, COMMIT = "_change_type", "_change_ordinal", "_commit_snapshot_id"
INSERT, DELETE, UPDATE_BEFORE, UPDATE_AFTER = "INSERT", "DELETE", "UPDATE_BEFORE", "UPDATE_AFTER"
OPTIONS = ("start-snapshot-id", "end-snapshot-id", "start-timestamp", "end-timestamp")
_ROW_ID = "__lakerules_changelog_row_id"  # a v3 row's _row_id, carried to pair its versions


def create_changelog_view(ctx, table, args: dict):
    where = f"CALL system.{PROCEDURE}"
    shown = names.table_name(table)
    view = args.get("changelog_view") or f"{table.name()[-1]}_changes"
    identifiers = list(args.get("identifier_columns") or [])
    compute_updates = args.get("compute_updates")
    compute_updates = bool(identifiers) if compute_updates is None else bool(compute_updates)
    net = bool(args.get("net_changes"))
    if net and compute_updates:
        raise LakeError(f"lakerules: {where} on {shown}: net_changes and compute_updates cannot be combined "
                        "(as in Iceberg: net changes have no update images); nothing was created")
    columns = [f.name for f in table.schema().as_struct().fields]
    _check_columns(where, shown, table, columns)
    row_ids = table.format_version >= v3.VERSION and lineage.ROW_ID not in columns
    keys = _identity(where, shown, table, identifiers, columns, row_ids) if compute_updates else []
    snapshots = _range(where, table, args.get("options") or {})
    progress.step(ctx.spark, f"changes of {len(snapshots)} snapshots of {shown}")
    out = _changelog(ctx, table, list(enumerate(snapshots)), columns, row_ids, keys, net)
    out.createOrReplaceTempView(J.quote(view))
    from lakerules.procedures.maintenance import RESULTS

    return J.result_rows(ctx.spark, [(view,)], RESULTS[PROCEDURE])


def _changelog(ctx, table, snapshots: list, columns: list[str], row_ids: bool, keys: list[str],
               net: bool = False) -> DataFrame:
    """The changes of ``snapshots`` ((ordinal, snapshot) pairs) with the view's columns:
    carry-overs removed (or, ``net``, netted over them all), DELETE and INSERT pairs of one
    identity (``keys``; none: no pairing) as updates."""
    ref = TableRef(table.catalog.name, tuple(table.name()[:-1]), table.name()[-1])
    plans: dict = {}
    parts = [p for ordinal, s in snapshots
             if (p := _changes(ctx, table, ref, ordinal, s, plans, columns, row_ids)) is not None]
    df = reduce(DataFrame.unionByName, parts) if parts else _empty(ctx, table, row_ids, changes=True)
    carried = [*columns, *([_ROW_ID] if row_ids else [])]
    df = _net(df, carried) if net else _without_carryovers(df, carried)
    if keys:
        df = _updates(df, keys, ["_row_id" if k == _ROW_ID else k for k in keys])
    return df.select(*[J.column(c) for c in columns], CHANGE_TYPE, ORDINAL, COMMIT)


def _check_columns(where: str, shown: str, table, columns: list[str]) -> None:
    taken = [c for c in (CHANGE_TYPE, ORDINAL, COMMIT) if c in columns]
    if taken:
        raise NotSupported(f"lakerules: {where}: table {shown} has a column named {taken[0]}, a column of the "
                           "changelog view; nothing was created")
    maps = [f.name for f in table.schema().as_struct().fields if _has_map(f.field_type)]
    if maps:
        raise NotSupported(f"lakerules: {where}: column {maps[0]} of {shown} holds a map, which Spark cannot "
                           "compare to tell an unchanged row; the changelog view of such a table is not supported "
                           "yet. Nothing was created")


def _has_map(t) -> bool:
    from pyiceberg.types import ListType, MapType, StructType

    if isinstance(t, MapType):
        return True
    if isinstance(t, ListType):
        return _has_map(t.element_type)
    if isinstance(t, StructType):
        return any(_has_map(f.field_type) for f in t.fields)
    return False


def _identity(where: str, shown: str, table, identifiers: list[str], columns: list[str], row_ids: bool) -> list[str]:
    """The columns that tell one row from another for compute_updates."""
    if identifiers:
        missing = [c for c in identifiers if c not in columns]
        if missing:
            raise LakeError(f"lakerules: {where}: identifier column {missing[0]!r} is not a column of {shown} "
                            f"(its columns are {columns}); nothing was created")
        return identifiers
    schema = table.schema()
    own = [schema.find_column_name(i) for i in schema.identifier_field_ids]
    if own:
        return own
    if row_ids:
        return [_ROW_ID]
    raise LakeError(f"lakerules: {where}: cannot compute updates of {shown} without identifier columns: give "
                    "identifier_columns => array(...), set the table's identifier fields, or use format version 3 "
                    "(rows are then known by their _row_id); nothing was created")


def _range(where: str, table, options: dict) -> list:
    """The snapshots of the range, oldest first, without "replace" ones."""
    given = {}
    for key, value in options.items():
        k = (key or "").strip().lower()
        if k not in OPTIONS:
            raise LakeError(f"lakerules: {where}: unknown option {key!r}; the options are {list(OPTIONS)}")
        if value is None or not str(value).strip().lstrip("-").isdigit():
            raise LakeError(f"lakerules: {where}: option {key}={value!r} is not a whole number")
        given[k] = int(str(value).strip())
    if "start-snapshot-id" in given and "start-timestamp" in given or \
            "end-snapshot-id" in given and "end-timestamp" in given:
        raise LakeError(f"lakerules: {where}: give a snapshot id or a timestamp for each end of the range, not both")
    metadata = table.metadata
    shown = names.table_name(table)

    def snapshot(sid: int):
        s = metadata.snapshot_by_id(sid)
        if s is None:
            raise LakeError(f"lakerules: {where}: table {shown} has no snapshot {sid}")
        return s

    head = metadata.current_snapshot()
    if "end-snapshot-id" in given:
        head = snapshot(given["end-snapshot-id"])
    elif "end-timestamp" in given:
        log = [e for e in metadata.snapshot_log if e.timestamp_ms <= given["end-timestamp"]]
        head = metadata.snapshot_by_id(log[-1].snapshot_id) if log else None
    chain = list(reversed(list(ancestors_of(head, metadata)))) if head is not None else []  # oldest first
    if "start-snapshot-id" in given:
        start = snapshot(given["start-snapshot-id"])
        ids = [c.snapshot_id for c in chain]
        if start.snapshot_id not in ids:
            raise LakeError(f"lakerules: {where}: snapshot {start.snapshot_id} of {shown} is not an ancestor of "
                            f"snapshot {head.snapshot_id if head else None}, the end of the range")
        chain = chain[ids.index(start.snapshot_id) + 1:]
    elif "start-timestamp" in given:
        chain = [c for c in chain if c.timestamp_ms >= given["start-timestamp"]]
    return [c for c in chain if c.summary is None or c.summary.operation.value != "replace"]


def _signature(planned) -> tuple:
    """What decides a data file's live rows in a snapshot: the deletes that apply to it."""
    return (tuple(sorted((d.file_path, v3.deletion_vector_of(d)[1] or 0) for d in planned.position_deletes)),
            tuple(sorted(d.file_path for d in planned.equality_deletes)))


def _plan(table, snapshot_id, plans: dict) -> dict:
    if snapshot_id not in plans:
        plans[snapshot_id] = {p.file.file_path: p for p in plan_scan(table, snapshot_id).files}
    return plans[snapshot_id]


def _changes(ctx, table, ref, ordinal: int, snapshot, plans: dict, columns: list[str], row_ids: bool):
    """The INSERT and DELETE rows of one snapshot, or None when it changed no row."""
    parent = snapshot.parent_snapshot_id
    if parent is not None and table.metadata.snapshot_by_id(parent) is None:
        raise LakeError(f"lakerules: {PROCEDURE}: the parent of snapshot {snapshot.snapshot_id} of "
                        f"{names.table_name(table)} was expired, so the snapshot's changes cannot be told; start the "
                        "range after it")
    now = _plan(table, snapshot.snapshot_id, plans)
    before = _plan(table, parent, plans) if parent is not None else {}
    changed = [path for path in sorted(now.keys() | before.keys())
               if path not in now or path not in before or _signature(now[path]) != _signature(before[path])]
    if not changed:
        return None
    key = [FILE_COL, POS_COL]
    rows_now = _rows(ctx, table, ref, snapshot.snapshot_id, [now[p] for p in changed if p in now], row_ids)
    rows_before = _rows(ctx, table, ref, parent, [before[p] for p in changed if p in before], row_ids)
    inserted = rows_now.join(rows_before.select(*key), key, "left_anti").withColumn(CHANGE_TYPE, F.lit(INSERT))
    deleted = rows_before.join(rows_now.select(*key), key, "left_anti").withColumn(CHANGE_TYPE, F.lit(DELETE))
    both = deleted.unionByName(inserted)
    return both.withColumn(ORDINAL, F.lit(ordinal)).withColumn(COMMIT, F.lit(snapshot.snapshot_id))


def _rows(ctx, table, ref, snapshot_id, files: list, row_ids: bool) -> DataFrame:
    """The live rows of ``files`` in the snapshot, with their file and position (and v3: _ROW_ID)."""
    if snapshot_id is None or not files:
        return _empty(ctx, table, row_ids)
    scan = LakeScan(table=ref, snapshot_id=snapshot_id, output=(), iceberg=table, schema=table.schema(),
                    plan=ScanPlan(files=tuple(files), total_data_files=len(files)))
    df = scan_dataframe(ctx, scan, positions=True, lineage=(lineage.ROW_ID,) if row_ids else ())
    return df.withColumnRenamed(lineage.ROW_ID, _ROW_ID) if row_ids else df


def _empty(ctx, table, row_ids: bool, changes: bool = False) -> DataFrame:
    """No rows, with the columns a read has (the table's, then on v3 _ROW_ID, then the row's file
    and position), then with ``changes`` those a change adds."""
    from lakerules.iceberg import schema as schemas

    fields = [T.StructField(f.name, schemas.iceberg_type_to_spark(f.field_type)) for f in table.schema().as_struct().fields]
    if row_ids:
        fields.append(T.StructField(_ROW_ID, T.LongType()))
    fields += [T.StructField(FILE_COL, T.StringType()), T.StructField(POS_COL, T.LongType())]
    if changes:
        fields += [T.StructField(CHANGE_TYPE, T.StringType()), T.StructField(ORDINAL, T.IntegerType()),
                   T.StructField(COMMIT, T.LongType())]
    return J.local_frame(ctx.spark, [], T.StructType(fields))


def _counted(df: DataFrame, group: list[str]) -> DataFrame:
    """``df`` with each row's rank among the rows of its group and change type, and the numbers of
    the group's DELETE and INSERT rows."""
    cols = [J.column(c) for c in group]
    by_group = Window.partitionBy(*cols)
    by_type = Window.partitionBy(*cols, F.col(CHANGE_TYPE)).orderBy(F.col(ORDINAL), F.col(FILE_COL), F.col(POS_COL))
    return (df.withColumn("__deletes", F.sum((F.col(CHANGE_TYPE) == DELETE).cast("int")).over(by_group))
              .withColumn("__inserts", F.sum((F.col(CHANGE_TYPE) == INSERT).cast("int")).over(by_group))
              .withColumn("__rank", F.row_number().over(by_type)))


def _without_carryovers(df: DataFrame, carried: list[str]) -> DataFrame:
    """Within each snapshot, a row deleted and inserted again unchanged is no change: per group of
    equal rows, as many DELETE and INSERT rows as the smaller number of them are dropped."""
    counted = _counted(df, [ORDINAL, *carried])
    keep = F.when(F.col(CHANGE_TYPE) == DELETE, F.col("__rank") > F.col("__inserts")) \
        .otherwise(F.col("__rank") > F.col("__deletes"))
    return counted.where(keep).drop("__deletes", "__inserts", "__rank")


def _net(df: DataFrame, carried: list[str]) -> DataFrame:
    """The range's net changes per group of equal rows: more inserts than deletes keeps the last
    inserts, more deletes the first deletes, as many as the difference."""
    counted = _counted(df, carried)
    extra_inserts = F.col("__inserts") - F.col("__deletes")
    keep = F.when(F.col(CHANGE_TYPE) == INSERT, F.col("__rank") > F.col("__inserts") - F.greatest(extra_inserts, F.lit(0))) \
        .otherwise(F.col("__rank") <= F.greatest(-extra_inserts, F.lit(0)))
    return counted.where(keep).drop("__deletes", "__inserts", "__rank")


def _updates(df: DataFrame, keys: list[str], shown_keys: list[str]) -> DataFrame:
    """Within each snapshot, the DELETE and the INSERT of one identity as UPDATE_BEFORE and
    UPDATE_AFTER; an identity deleted or inserted twice is an error when the view is read."""
    cols = [J.column(c) for c in keys]
    group = Window.partitionBy(F.col(ORDINAL), *cols)
    deletes = F.sum((F.col(CHANGE_TYPE) == DELETE).cast("int")).over(group)
    inserts = F.sum((F.col(CHANGE_TYPE) == INSERT).cast("int")).over(group)
    known = reduce(lambda a, b: a & b, [c.isNotNull() for c in cols])
    message = (f"lakerules: {PROCEDURE}: cannot compute updates: several rows of one snapshot have the same "
               f"identifier columns {shown_keys}; make them unique, or create the view without compute_updates")
    kind = (F.when(known & ((deletes > 1) | (inserts > 1)), F.raise_error(F.lit(message)).cast("string"))
             .when(known & (deletes == 1) & (inserts == 1),
                   F.when(F.col(CHANGE_TYPE) == DELETE, F.lit(UPDATE_BEFORE)).otherwise(F.lit(UPDATE_AFTER)))
             .otherwise(F.col(CHANGE_TYPE)))
    return df.withColumn(CHANGE_TYPE, kind)


def stream_changes(ctx, table, snapshots: list) -> DataFrame:
    """The changes of ``snapshots`` ((ordinal, snapshot) pairs) as a stream's micro-batch reads them
    (lakerules.streaming.source, streaming-changelog): the view's columns; carry-overs removed;
    updates paired by the table's identifier fields, else on a v3 table by row id."""
    columns = [f.name for f in table.schema().as_struct().fields]
    shown = names.table_name(table)
    _check_columns("streaming-changelog", shown, table, columns)
    row_ids = table.format_version >= v3.VERSION and lineage.ROW_ID not in columns
    schema = table.schema()
    keys = [schema.find_column_name(i) for i in schema.identifier_field_ids] or ([_ROW_ID] if row_ids else [])
    return _changelog(ctx, table, snapshots, columns, row_ids, keys)
