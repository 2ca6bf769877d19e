"""UPDATE and MERGE (merge-on-read) on format version 3 tables: the rows they remove go into
deletion vectors, and the rows they write again keep their lineage.

- **Removed rows** (updated and deleted ones): a deletion vector per data file, written as DELETE
  writes them (lakerules.write.deletion_vectors: merged with the file's current DV, at most one
  per data file, siblings in a replaced Puffin file listed again). A data file whose every row is
  removed, and that had no deletes, is dropped whole instead.
- **Rewritten rows** (updated ones) are written with the spec's lineage columns, ``_row_id``
  (field id 2147483540) holding the row's id as read (its stored value, else its file's
  first_row_id + its position) and ``_last_updated_sequence_number`` (field id 2147483539) null:
  a null value reads as the new file's data sequence number, which is the commit's (whatever
  retry commits it), as the spec has writers do for an updated row.
- **Inserted rows** (MERGE's WHEN NOT MATCHED) have a null ``_row_id``: they get fresh ids from
  the new file's first_row_id, assigned when the commit lists its manifest.
- **Kept rows** (copy-on-write: the other live rows of a rewritten file) are written with both
  lineage columns as read, so they keep their id and last-updated sequence number.

The statement reads each target row's id under ROW_COL (lakerules.scan.lineage computes it) and
carries it beside the row's file and position to the write.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F

from lakerules.iceberg import v3
from lakerules.scan import lineage
from lakerules.spark import jvm as J
from lakerules.write import deletion_vectors, files as write

ROW_COL = "__lakerules_row_id"  # a target row's _row_id as read, carried to the write
LAST_COL = "__lakerules_last_updated"  # and its _last_updated_sequence_number (a copy-on-write kept row's)


def applies(table) -> bool:
    """Whether a row-level statement on ``table`` writes deletion vectors and row lineage."""
    return table.format_version >= v3.VERSION


def read_columns(scan_output, schema) -> tuple[str, ...]:
    """The lineage columns a target read computes: both (carried as ROW_COL and LAST_COL), unless
    a data column hides one (such a table is refused before it writes: lakerules.scan.lineage.check)."""
    columns = {f.name for f in schema.as_struct().fields}
    return tuple(n for n in lineage.NAMES if n not in columns)


def with_lineage(df: DataFrame) -> DataFrame:
    """``df`` (a target read with the lineage columns) with them copied under ROW_COL and LAST_COL."""
    for name, carried in ((lineage.ROW_ID, ROW_COL), (lineage.LAST_UPDATED, LAST_COL)):
        df = df.withColumn(carried, F.col(J.quote(name)) if name in df.columns else F.lit(None).cast("long"))
    return df


def changed(df: DataFrame) -> DataFrame:
    """Rows (carrying ROW_COL and LAST_COL) an UPDATE or MERGE writes with new values: their
    ``_last_updated_sequence_number`` stored null, which reads as the commit's sequence number."""
    return df.withColumn(LAST_COL, F.lit(None).cast("long"))


def data_columns(table, output) -> list[str]:
    """The names of ``output`` (a relation's attributes) that are the table's columns (not its
    metadata columns): what a written data file holds before its lineage columns."""
    columns = {f.name for f in table.schema().as_struct().fields}
    return [a.name for a in output if a.name in columns]


def write_rows(spark, catalog: str, table, rows: DataFrame, columns: list[str]) -> list:
    """Data files of ``rows`` (the table's ``columns``, then ROW_COL: a row's id, null for a new
    row), with the lineage columns after the table's (``_last_updated_sequence_number`` null)."""
    out = rows.select(*[J.column(c) for c in columns], F.col(ROW_COL).cast("long").alias(ROW_COL),
                      F.lit(None).cast("long").alias(LAST_COL))
    return write.write_files(spark, catalog, table, out, fields=lineage.write_fields(table, lineage.NAMES),
                             cluster=True)


def rewritten(rows: DataFrame, columns: list[str]) -> DataFrame:
    """A copy-on-write's rows (the table's ``columns``, ROW_COL, LAST_COL) as the new files hold
    them: the table's columns, then the lineage columns (lineage.write_fields)."""
    return rows.select(*[J.column(c) for c in columns], F.col(ROW_COL).cast("long").alias(ROW_COL),
                       F.col(LAST_COL).cast("long").alias(LAST_COL))


class Removal:
    """The deletion vectors of the positions an UPDATE or MERGE removes, and the files it drops
    whole: ``written`` (new DVs; delete them if the commit fails), ``kept`` (siblings listed
    again), ``replaced`` (the DVs they supersede), ``whole`` (PlannedFiles dropped whole)."""

    def __init__(self, spark, table, snapshot, positions: DataFrame, touched: list, counts: dict, collected=None,
                 kinds: str = "d"):
        """``positions``: (file_path: the manifest's data file path, pos) of the removed rows of
        ``touched`` (PlannedFiles); ``counts``: the removed rows per data file path; ``collected``:
        the same positions on the driver (lakerules.write.position_deletes.Collected: those of the
        ``kinds``), if the statement collected them."""
        self.whole = [p for p in touched if not p.position_deletes and not p.equality_deletes
                      and counts.get(p.file.file_path, 0) == p.file.record_count]
        partial = [p for p in touched if p not in self.whole]
        self.written, self.kept, self.replaced = [], [], []
        if partial:
            skip = [p.file.file_path for p in self.whole]
            if skip:
                positions = positions.where(~F.col("file_path").isin(skip))
            self.written, self.kept, self.replaced = deletion_vectors.write(
                spark, table, snapshot, positions, partial, self.whole, collected=collected, kinds=kinds, skip=skip)

    @property
    def delete_files(self) -> list:
        return self.written + self.kept

    @property
    def removed_data_files(self) -> list:
        return [p.file for p in self.whole]

    def discardable(self) -> list:
        """The new Puffin files (one entry per file: DVs share it)."""
        return list({f.file_path: f for f in self.written}.values())
