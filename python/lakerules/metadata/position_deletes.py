"""The ``position_deletes`` metadata table: one row per deleted position of the snapshot's live
position delete files and deletion vectors (Iceberg v3), read by Spark, each with its data file's
path, its delete file's partition, spec id and path.

- Position delete files are read as the Parquet files they are (their ``file_path`` and ``pos``
  columns), with their partition, spec id and path joined on Spark's name of the file.
- A deletion vector lists no rows: its positions are those of its data file that the DV deletes.
  The data files with a DV are read for their row positions only (no column), and the rows the
  scan's own DV filter drops (lakerules.scan.deletion_vectors: each DV read and checked once, in
  the JVM) are the table's rows; a position a DV holds beyond its file's rows cannot be listed.
"""

from __future__ import annotations

from pyiceberg.manifest import FileFormat
from pyiceberg.schema import Schema
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakerules.scan import deletion_vectors
from lakerules.scan.planning import plan_scan
from lakerules.scan.read import FILE_COL, POS_COL, POSITION_DELETE_SCHEMA, read_files, status_names
from lakerules.spark import jvm as J


def rows(spark, table, snapshot, files: list, fr, schema: T.StructType) -> DataFrame:
    """The table's rows for ``snapshot`` (None: no rows) whose live position delete files (and
    deletion vectors) are ``files``; ``fr``: lakerules.metadata.tables' file rows (partitions)."""
    parquet = [d for d in files if d.file_format != FileFormat.PUFFIN]
    out = _position_files(spark, parquet, fr, schema)
    if len(parquet) < len(files):
        out = out.unionByName(_deletion_vectors(spark, table, snapshot, fr, schema))
    return out


_NAME = T.StructField("__name", T.StringType(), False)


def _info_fields(schema: T.StructType) -> list:
    return [_NAME] + [x for x in schema.fields if x.name in ("partition", "spec_id", "delete_file_path")]


def _info_row(fr, name: str, partitioned_by, spec_id: int, path: str) -> tuple:
    row = [name]
    if fr.partitioned:
        row.append(fr.partition(partitioned_by))
    return (*row, spec_id, path)


def _selected(joined: DataFrame, schema: T.StructType, info_fields: list) -> DataFrame:
    cols = [F.col("file_path"), F.col("pos"), F.lit(None).cast(schema["row"].dataType).alias("row")]
    return joined.select(*cols, *[J.column(x.name) for x in info_fields[1:]])


def _position_files(spark, files: list, fr, schema: T.StructType) -> DataFrame:
    """The rows of position delete files, with their partition, spec id and path."""
    info_fields = _info_fields(schema)
    names = status_names(spark, [d.file_path for d in files]) if files else {}
    info = J.local_frame(spark, [_info_row(fr, names[d.file_path], d, d.spec_id, d.file_path) for d in files],
                         T.StructType(info_fields))
    rows = read_files(spark, POSITION_DELETE_SCHEMA, files, with_positions=True)
    return _selected(rows.join(F.broadcast(info), rows[FILE_COL] == info["__name"]), schema, info_fields)


def _deletion_vectors(spark, table, snapshot, fr, schema: T.StructType) -> DataFrame:
    """The positions the snapshot's deletion vectors delete, as rows of the table."""
    planned = [p for p in plan_scan(table, snapshot.snapshot_id).files
               if deletion_vectors.kind(p) == deletion_vectors.DELETION_VECTOR]
    info_fields = _info_fields(schema)
    names = status_names(spark, [p.file.file_path for p in planned])
    info = J.local_frame(spark, [(*_info_row(fr, names[p.file.file_path], p.position_deletes[0],
                                             p.position_deletes[0].spec_id, p.position_deletes[0].file_path),
                                  p.file.file_path) for p in planned],
                         T.StructType([*info_fields, T.StructField("file_path", T.StringType(), False)]))
    # the positions only: each data file read for no column, its DV's filter turned around
    positions = read_files(spark, Schema(), [p.file for p in planned], with_positions=True)
    plan = J.analyzed(positions)
    output = {a.name(): a for a in J.from_seq(plan.output())}
    live = deletion_vectors.apply(spark, plan, output[FILE_COL], output[POS_COL], planned, names)
    deleted = J.dataframe(spark, J.filter_plan(spark, J.not_true(spark, live.condition()), plan))
    rows = deleted.select(F.col(FILE_COL), F.col(POS_COL).alias("pos"))
    joined = rows.join(F.broadcast(info), rows[FILE_COL] == info["__name"])
    return _selected(joined, schema, info_fields)
