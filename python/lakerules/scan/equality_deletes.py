"""Equality deletes applied per data file in the JVM (io.lakerules.functions.EqualityDeleteSet).

For each set of equality columns, the keys of the scan's equality delete files are read once (a
Spark job over the delete files, no shuffle), built on the driver into hash tables, one for the
deletes of unpartitioned specs (they apply to every data file) and one per (spec, partition) of
the others, each key keeping the highest sequence number of the deletes that carry it, and
broadcast. A Filter over the data rows then looks up each row's data file (its data sequence
number, its partition's table) and drops the row when its key is in a table with a higher
sequence number: Iceberg's rule (a delete applies to strictly older data of its partition, or of
every partition when its spec is unpartitioned), with keys compared null-safely (a NULL in a
delete deletes the rows whose value is NULL; a column dropped since reads as NULL). No join, no
shuffle of the data rows. Sets are cached per process by their delete files (which never change).

Python decides (which files, which strategy: ``plan``); the JVM does the per-row work.

Memory: the tables are sized before they are built from the delete files' record counts
(an upper bound of their distinct keys) at ``BYTES_PER_LONG_KEY`` bytes a key row for one
integral, date or timestamptz column, and ``_row_key_bytes`` for other keys (the key's UnsafeRow
plus the table's arrays). Past ``spark.lakerules.read.equalityDeleteSetBytes`` (default
``SET_BYTES_DEFAULT``; 0: never) the scan keeps the anti-join of lakerules.scan.read. Small sets
that one group of data files shares stay a filter pushed into Parquet
(``equalityDeleteFilterThreshold``).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from pyiceberg.schema import Schema
from pyiceberg.types import (BinaryType, DateType, DecimalType, FixedType, IntegerType, LongType, NestedField, StringType,
                             TimestamptzType, UUIDType)
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType as SparkInt, LongType as SparkLong, StringType as SparkString, StructField, StructType

from lakerules.spark import delete_sets, jvm as J, settings
from lakerules.iceberg.schema import iceberg_to_spark
from lakerules.scan.kept import Kept

SET_BYTES_KEY = "spark.lakerules.read.equalityDeleteSetBytes"
SET_BYTES_DEFAULT = 128 << 20  # about 1.9M delete rows of long keys: room in a 1 GiB driver
# EqualityDeleteSet.bytes() of a LongTable: open addressing at most half full (a power of two of
# 16-byte slots: 32 to 64 bytes a key row) and its Bloom filter (2 to 4 bytes); the bound takes
# the worst. A probe costs 15-65 ns (measured on 2 loaded cores, 200,000 and 1,000,000 keys; 36
# and 130-160 ns without the Bloom filter).
BYTES_PER_LONG_KEY = 72
_LONG_TYPES = (IntegerType, LongType, DateType, TimestamptzType)
KEY_COL = "__lakerules_eqkey"
_SETS_KEPT_BYTES = 256 << 20  # cached sets' tables at most (driver memory)
POSITIONS_KEY = "spark.lakerules.read.equalityDeletePositions"
POSITIONS_MAX_ROWS = 8_000_000  # the shim's EqualityPositions.KEPT_ROWS: 64 MiB of positions


@dataclass(frozen=True)
class Group:
    """One set of equality columns: its fields (dropped ones included), which of them the data
    rows still have, and its delete files."""

    ids: tuple[int, ...]
    fields: tuple[NestedField, ...]
    present: tuple[bool, ...]
    deletes: tuple  # DataFiles

    @property
    def long_keys(self) -> bool:
        return len(self.fields) == 1 and isinstance(self.fields[0].field_type, _LONG_TYPES)

    def estimate(self) -> int:
        rows = sum(d.record_count for d in self.deletes)
        return rows * (BYTES_PER_LONG_KEY if self.long_keys else _row_key_bytes(self.fields))


def _row_key_bytes(fields) -> int:
    """Bytes a key row costs in a BytesTable: its UnsafeRow (a null-bit word, 8 bytes a column,
    variable-length values rounded up to 8 bytes, at Spark's default size of the type), its
    offset, sequence number and hash (16), table slots at most half full (under 16) and its
    Bloom filter's share (under 4): the row plus 36, taken as 40."""
    size = 8
    for f in fields:
        t = f.field_type
        if isinstance(t, FixedType):
            width = len(t)
        elif isinstance(t, (StringType, BinaryType)):
            width = 20  # Spark's default size of a string
        elif isinstance(t, (UUIDType, DecimalType)):
            width = 16
        else:
            width = 8
        size += 8 + (0 if width <= 8 else (width + 7) // 8 * 8)
    return size + 40


@dataclass(frozen=True)
class Sets:
    """The strategy ``plan`` chose: one hash set per group."""

    groups: tuple[Group, ...]

    def apply(self, ctx, scan, data: DataFrame, reader) -> DataFrame:
        """``data`` (carrying reader.FILE_COL, Spark's name of each row's file) without the
        deleted rows. ``reader``: lakerules.scan.read (its read_files, status_names, FILE_COL),
        passed in, as it calls this module."""
        file_col, status_names = reader.FILE_COL, reader.status_names
        spark = ctx.spark
        files = scan.plan.files
        names = status_names(spark, [p.file.file_path for p in files])
        columns = data.columns
        for n, group in enumerate(self.groups):
            deleted, plan, file_attr, key_attr, listing = _probe(ctx, scan, group, data, files, names, f"{KEY_COL}_{n}",
                                                               file_col, reader)
            data = J.select(J.dataframe(spark, deleted.filterLive(plan, file_attr, key_attr, listing)), columns)
        return data


def _probe(ctx, scan, group: Group, data: DataFrame, files, names: dict, key: str, file_col: str, reader):
    """(the group's EqualityDeleteSet, the analyzed plan of ``data`` with each row's key as
    ``key``, its file and key attributes, the listing of ``files`` that filterLive takes)."""
    scopes = sorted({_scope(scan, d) for d in group.deletes} - {None})
    index = {s: i for i, s in enumerate(scopes)}
    deleted = _set(ctx, scan, group, scopes, reader)
    listing = "\0".join(x for p in files for x in (
        names[p.file.file_path], str(p.sequence_number), str(index.get(_data_scope(p.file), -1))))
    keyed = data.select("*", _key(group, [J.column(f.name) if present else None
                                           for f, present in zip(group.fields, group.present)]).alias(key))
    plan = J.analyzed(keyed)
    output = {a.name(): a for a in J.from_seq(plan.output())}
    return deleted, plan, output[file_col], output[key], listing


def plan(ctx, scan, filter_threshold: int) -> Sets | None:
    """The hash sets for the scan's equality deletes, or None: none apply, the small case (one
    set of delete files for every data file that has any, up to ``filter_threshold`` rows) stays
    a filter, a column is nested (the older paths handle or refuse it), or the sets would pass
    spark.lakerules.read.equalityDeleteSetBytes."""
    files = scan.plan.files
    by_path = {d.file_path: d for p in files for d in p.equality_deletes}
    if not by_path:
        return None
    limit = settings.count(SET_BYTES_KEY, ctx.conf(SET_BYTES_KEY, None), SET_BYTES_DEFAULT, "bytes")
    sets = {tuple(d.file_path for d in p.equality_deletes) for p in files if p.equality_deletes}
    if len(sets) == 1 and sum(d.record_count for d in by_path.values()) <= filter_threshold:
        return None
    top = {f.field_id: f for f in scan.schema.as_struct().fields}
    grouped: dict[tuple, list] = {}
    for path in sorted(by_path):
        grouped.setdefault(tuple(by_path[path].equality_ids), []).append(by_path[path])
    groups = []
    for ids, deletes in sorted(grouped.items()):
        fields = [top.get(i) or _dropped(scan, i) for i in ids]
        if None in fields:
            return None
        groups.append(Group(ids, tuple(fields), tuple(i in top for i in ids), tuple(deletes)))
    if sum(g.estimate() for g in groups) > limit:
        return None
    return Sets(tuple(groups))


def _dropped(scan, field_id: int) -> NestedField | None:
    """The field a column dropped since had (a top-level column of an older schema), or None."""
    for schema in sorted(scan.iceberg.schemas().values(), key=lambda s: -s.schema_id):
        for f in schema.as_struct().fields:
            if f.field_id == field_id:
                return f
    return None


def _key(group: Group, cols: list[Column | None]) -> Column:
    """The key of a row as EqualityDeleteSet takes it: one BIGINT (long keys) or a struct of the
    key columns, floating point values normalized as Spark's joins do (-0.0 is 0.0, one NaN).
    A column the rows no longer have is NULL."""
    types = [iceberg_to_spark(Schema(f)).fields[0].dataType for f in group.fields]
    cols = [c if c is not None else F.lit(None).cast(t) for c, t in zip(cols, types)]
    if group.long_keys:
        c, t = cols[0], group.fields[0].field_type
        if isinstance(t, DateType):
            return F.unix_date(c).cast("long")
        if isinstance(t, TimestamptzType):
            return F.unix_micros(c)
        return c.cast("long")
    out = []
    for k, (c, t) in enumerate(zip(cols, types)):
        if t.typeName() in ("float", "double"):
            c = F.when(F.isnan(c), F.lit(float("nan")).cast(t)).when(c == 0, F.lit(0.0).cast(t)).otherwise(c)
        out.append(c.alias(f"k{k}"))
    return F.struct(*out)


def _scope(scan, f) -> str | None:
    """A delete file's scope: None (its spec is unpartitioned: every data file) or its partition."""
    return None if scan.iceberg.specs()[f.spec_id].is_unpartitioned() else _data_scope(f)


def _data_scope(f) -> str:
    return f"{f.spec_id}:{tuple(f.partition) if f.partition is not None else ()!r}"


_lock = threading.Lock()
_sets = Kept(lambda s: s.bytes(), _SETS_KEPT_BYTES)  # (application, what the set is built from) -> JVM EqualityDeleteSet


def _set_key(ctx, scan, group: Group, scopes: list[str]) -> tuple[tuple, list]:
    """What a group's set is built from (its cache key), and its delete files' (path, data
    sequence number, scope index)."""
    seqs: dict[str, int] = {}
    for p in scan.plan.files:
        seqs.update(p.equality_sequence)
    index = {s: i for i, s in enumerate(scopes)}
    info = [(d.file_path, seqs[d.file_path], index.get(_scope(scan, d))) for d in group.deletes]
    return (ctx.spark.sparkContext.applicationId, group.ids, tuple(f.field_type for f in group.fields),
            tuple(sorted(info))), info


def _set(ctx, scan, group: Group, scopes: list[str], reader):
    """The JVM EqualityDeleteSet of a group's delete files, built once per process and
    application (delete files never change)."""
    cache_key, info = _set_key(ctx, scan, group, scopes)
    return _sets.get(cache_key, lambda: _build_set(ctx, group, info, len(scopes), reader))


def _build_set(ctx, group: Group, info: list, scopes: int, reader):
    spark = ctx.spark
    dnames = reader.status_names(spark, [d.file_path for d in group.deletes])
    by_name = J.local_frame(spark, [(dnames[path], seq, scope) for path, seq, scope in info],
                            StructType([StructField("__lakerules_ef", SparkString()), StructField("__lakerules_eseq", SparkLong()),
                                        StructField("__lakerules_escope", SparkInt())]))
    rows = reader.read_files(spark, Schema(*group.fields), list(group.deletes), True)
    rows = rows.join(F.broadcast(by_name), rows[reader.FILE_COL] == by_name["__lakerules_ef"])
    rows = rows.select(_key(group, [rows[J.quote(f.name)] for f in group.fields]).alias("key"),
                       "__lakerules_eseq", "__lakerules_escope")
    return delete_sets.equality_delete_set(spark, J.analyzed(rows), scopes)


# ---- equality deletes resolved to positions ---------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """The deleted positions of each data file a scan reads with equality deletes (a JVM map by
    Spark's name of the file), which its reader drops as it drops position deletes."""

    positions: object  # JVM HashMap<String, long[]>
    names: frozenset  # Spark's names of the files with equality deletes
    key: str  # the delete set's fingerprint

    def delete_set(self, ctx, base, names: list[str]):
        """The PositionDeleteSet that files ``names`` (Spark's names, read together) are read
        with: ``base``'s positions (their position deletes or deletion vectors, or None) and the
        resolved ones, united; None when nothing is deleted. Built once per process."""
        spark = ctx.spark
        eq = sorted(n for n in names if n in self.names)
        other = sorted(n for n in names if n not in self.names)
        cache_key = (spark.sparkContext.applicationId, self.key, None if base is None else base.id(), tuple(eq),
                     tuple(other))
        return _united.get(cache_key, lambda: delete_sets.with_equality_positions(spark, base, self.positions, eq, other))


_united = Kept(lambda s: s.rows(), POSITIONS_MAX_ROWS)  # (application, set, base set, names) -> JVM PositionDeleteSet or None


def positions(ctx, scan, sets: Sets, reader) -> Resolved | None:
    """The scan's equality deletes resolved to the positions of the rows they delete, or None
    (more than one set of equality columns, a key column no longer in the table, more than
    POSITIONS_MAX_ROWS deleted rows; the caller reads spark.lakerules.read.equalityDeletePositions):
    then the rows are probed against the hash set as they are read.

    A data file, its sequence number and the delete files that apply to it never change, so
    neither do the rows those deletes remove from it: each file's positions are found once per
    process (a Spark job probing only its key columns against the set, the deleted rows'
    positions grouped per file by the tasks) and kept in the driver's JVM (the shim's
    EqualityPositions); later reads drop them inside the reader, as deletion vectors are."""
    if len(sets.groups) != 1 or not all(sets.groups[0].present):
        return None
    spark, group = ctx.spark, sets.groups[0]
    files = [p for p in scan.plan.files if p.equality_deletes]
    names = reader.status_names(spark, [p.file.file_path for p in files])
    scopes = sorted({_scope(scan, d) for d in group.deletes} - {None})
    key = hashlib.sha1(repr((_set_key(ctx, scan, group, scopes)[0], group.present)).encode()).hexdigest()
    if key in _too_many:  # found once to delete more rows than are kept: probed per row
        return None
    spark_names = [names[p.file.file_path] for p in files]
    missing = [p for p, kept in zip(files, delete_sets.equality_positions_kept(spark, key, spark_names)) if not kept]
    plan = None
    if missing:
        rows = reader.read_files(spark, Schema(*group.fields), [p.file for p in missing], True)
        deleted, keyed, file_attr, key_attr, listing = _probe(ctx, scan, group, rows, missing, names, KEY_COL,
                                                              reader.FILE_COL, reader)
        out = J.dataframe(spark, deleted.filterDeleted(keyed, file_attr, key_attr, listing))
        plan = J.analyzed(J.select(out, [reader.FILE_COL, reader.POS_COL]))
    found, too_many = delete_sets.resolve_equality_positions(spark, plan, key, spark_names,
                                                             [names[p.file.file_path] for p in missing],
                                                             POSITIONS_MAX_ROWS)
    if too_many:
        with _lock:
            _too_many.add(key)
    return None if found is None else Resolved(found, frozenset(spark_names), key)


_too_many: set = set()  # sets whose deleted rows passed POSITIONS_MAX_ROWS (their fingerprints)
