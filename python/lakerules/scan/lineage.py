"""Row lineage read (Iceberg format version 3): the ``_row_id`` and ``_last_updated_sequence_number``
metadata columns.

The spec's rules: a data file may hold either column (field ids 2147483540 and 2147483539, written
when rows are copied with their lineage, as UPDATE and MERGE do); where the file has no value (null,
or no such column), a row's ``_row_id`` is its file's ``first_row_id`` + its position in the file,
and its ``_last_updated_sequence_number`` is its file's data sequence number. A file with no
``first_row_id`` (listed before the table's first v3 commit) gives null ids.

The table offers the columns as Spark metadata columns (io.lakerules.LakeTable.metadataColumns,
v3 tables only), so ``SELECT _row_id, _last_updated_sequence_number, * FROM t`` resolves them; the
scan reads the stored columns by field id with each row's position, and its file's (first_row_id,
data sequence number) as constant ``_metadata`` fields Spark's reader appends to the file's rows
(io.lakerules.RowGroupParquetFormat, the values listed with the file by io.lakerules.LakeFileIndex):
one projection computes them (no join, no Python per row). The first_row_ids come from the snapshot's manifest list
and manifests read with v3's schema (lakerules.iceberg.v3.RowIds: pyiceberg's reader drops them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from pyspark.sql import DataFrame, functions as F

from lakerules.iceberg import v3
from lakerules.spark import jvm as J

ROW_ID, LAST_UPDATED = "_row_id", "_last_updated_sequence_number"
NAMES = (ROW_ID, LAST_UPDATED)
ROW_ID_FIELD_ID, LAST_UPDATED_FIELD_ID = 2147483540, 2147483539
# the stored columns as a read names them (a data column may not be named like the metadata column)
STORED = {ROW_ID: "__lakerules_stored_row_id", LAST_UPDATED: "__lakerules_stored_last_updated"}
FIELD_IDS = {ROW_ID: ROW_ID_FIELD_ID, LAST_UPDATED: LAST_UPDATED_FIELD_ID}
# a lineage read's columns of each row's file: its first_row_id and data sequence number
CONSTANTS = ("__lakerules_first_row_id", "__lakerules_file_seq")
# The lineage columns as a writer stores them after a table's columns (rows copied with their lineage)
FIELDS = (
    NestedField(ROW_ID_FIELD_ID, ROW_ID, LongType(), required=False),
    NestedField(LAST_UPDATED_FIELD_ID, LAST_UPDATED, LongType(), required=False),
)

_lock = threading.Lock()
_row_ids: OrderedDict = OrderedDict()  # manifest list path -> {data file path: first_row_id}
_KEPT = 16


def requested(table, schema, output) -> tuple[str, ...]:
    """The lineage columns among ``output`` (a relation's attributes) of a v3 table: named as the
    spec names them and not a column of ``schema`` (a data column of that name hides them)."""
    if table is None or table.format_version < v3.VERSION:
        return ()
    columns = {f.name for f in schema.as_struct().fields}
    names = {a.name for a in output}
    return tuple(n for n in NAMES if n in names and n not in columns)


def kept(table) -> tuple[str, ...]:
    """The lineage columns a rewrite of ``table``'s files (compaction) reads and writes again, so
    that every row keeps its ``_row_id`` and ``_last_updated_sequence_number`` as the spec requires:
    both on a v3 table, none before."""
    return NAMES if table.format_version >= v3.VERSION else ()


def check(table, verb: str) -> None:
    """A v3 table with a column named like a lineage column cannot have rows written with their
    lineage (the file would hold two columns of that name): refused, naming the column. A table
    before v3 carries no lineage: any column name is fine there."""
    if table.format_version < v3.VERSION:
        return
    taken = [f.name for f in table.schema().as_struct().fields if f.name in NAMES]
    if taken:
        from lakerules.errors import NotSupported
        from lakerules.iceberg import names as table_names

        name = table_names.table_name(table)
        raise NotSupported(f"lakerules: {verb} on {name}: column {taken[0]} of {name} has the name of Iceberg v3's row "
                           "lineage metadata column, which the rows it writes again must carry; rename the column. "
                           "Nothing was changed")


def write_fields(table, names: tuple[str, ...]) -> list:
    """The fields of a data file of ``table`` holding its columns, then the lineage ``names``."""
    return [*table.schema().as_struct().fields, *[f for f in FIELDS if f.name in names]]


def read_schema(schema: Schema, names: tuple[str, ...]) -> Schema:
    """``schema`` plus the stored lineage columns ``names`` (by field id, under STORED's names)."""
    if not names:
        return schema
    extra = [NestedField(FIELD_IDS[n], STORED[n], LongType(), required=False) for n in names]
    return Schema(*schema.as_struct().fields, *extra, schema_id=schema.schema_id)


def first_row_ids(table, snapshot_id: int | None) -> dict:
    """Data file path -> its first_row_id (None: it has none) in the snapshot, read once per
    manifest list (they never change)."""
    snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    if snapshot is None:
        return {}
    key = snapshot.manifest_list
    with _lock:
        hit = _row_ids.get(key)
        if hit is not None:
            _row_ids.move_to_end(key)
            return hit
    found = v3.RowIds(table.io, key).all()
    with _lock:
        _row_ids[key] = found
        while len(_row_ids) > _KEPT:
            _row_ids.popitem(last=False)
    return found


def constants(table, snapshot_id, files) -> dict:
    """Data file path -> (its first_row_id or None, its data sequence number) for ``files``
    (PlannedFiles of the snapshot): what a lineage read's reader appends to each file's rows."""
    ids = first_row_ids(table, snapshot_id)
    return {p.file.file_path: (ids.get(p.file.file_path), p.sequence_number) for p in files}


def apply(df: DataFrame, names: tuple[str, ...], pos_col: str) -> DataFrame:
    """``df`` (rows with their stored lineage columns, their position in ``pos_col`` and their
    file's CONSTANTS, as lakerules.scan.read's lineage read gives them) with the lineage columns
    ``names`` computed, the stored ones and the constants dropped: the spec's rules as one
    projection (no join)."""
    if not names:
        return df
    first, seq = CONSTANTS
    computed = {
        ROW_ID: F.coalesce(F.col(STORED[ROW_ID]), F.col(first) + F.col(pos_col)),
        LAST_UPDATED: F.coalesce(F.col(STORED[LAST_UPDATED]), F.col(seq)),
    }
    dropped = {STORED[n] for n in names} | set(CONSTANTS)
    keep = [c for c in df.columns if c not in dropped]
    return df.select(*[J.column(c) for c in keep], *[computed[n].alias(n) for n in names])
