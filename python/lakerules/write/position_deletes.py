"""Position delete files a statement writes (DELETE, UPDATE's split write, MERGE, rewriting delete
files): one file per group, a group being one data file (write.delete.granularity=file: each
delete file then names one data file, its file_path bounds equal) or one partition (granularity
partition); the callers number the groups (lakerules.rowlevel.run._delete_groups).

Few deletes (at most spark.lakerules.write.positionDeleteDriverRows) are written by the driver:
each task groups its rows into sorted positions per data file where they are (no shuffle), the
arrays come to the driver (8 bytes a row) and its JVM writes them with parquet-mr's output format
under the table's delete-file Parquet properties (the shim's PositionDeleteFiles), caching them
as decoded for the next read. More are shuffled by group into one Spark write job.
"""

from __future__ import annotations

from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import Record
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakerules.errors import LakeError
from lakerules.iceberg import schema as schemas
from lakerules.spark import delete_sets, jvm as J, local_files, progress, settings
from lakerules.write.files import (
    PART_COL,
    POSITION_DELETE_FIELDS,
    _data_files,
    _delete_dir,
    _list_files,
    _new_target,
    _parquet_options,
)

DRIVER_ROWS_KEY = "spark.lakerules.write.positionDeleteDriverRows"
DRIVER_ROWS_DEFAULT = 1_000_000


def driver_rows(spark) -> int:
    """spark.lakerules.write.positionDeleteDriverRows: a statement's position deletes up to this
    many are written by the driver."""
    return settings.count(DRIVER_ROWS_KEY, spark.conf.get(DRIVER_ROWS_KEY, None), DRIVER_ROWS_DEFAULT, "rows")


def write(spark, table: Table, df: DataFrame, groups: list[tuple[int, Record]], rows: int | None = None,
          collected: Collected | None = None, skip=()) -> list[DataFile]:
    """Write position delete files: df has (file_path, pos, __lakerules_part), where the last is
    an index into ``groups``, the (spec id, partition) of the data file each row points at. Each
    group's deletes are one file, sorted by file path then position as the spec asks. Written by
    the driver: the positions ``collected`` (df's, of kind "d", by the caller) when complete, or
    (``rows``, how many df holds, when the caller knows, at most driver_rows) collected here;
    otherwise rows are shuffled by group in one write job, and written partitioned by it, one
    task a group. ``skip``: data file paths whose positions the driver leaves out (df has none)."""
    progress.step(spark, "write delete files")
    limit = driver_rows(spark)
    if collected is None and rows is not None and rows <= limit:
        collected = collect(spark, df.withColumn("kind", F.lit("d")), limit)
    if collected is not None and collected.complete:
        return write_collected(spark, table, collected, "d", groups, skip)
    columns = [
        # every row names its data file (rows come from the planned files); coalesce makes Spark
        # write the column as required, as the spec's schema has it (the driver's writer does too)
        F.coalesce(F.col("file_path").cast("string"), F.lit("")).alias(
            "file_path", metadata={schemas.FIELD_ID: POSITION_DELETE_FIELDS[0].field_id}),
        F.col("pos").cast("long").alias("pos", metadata={schemas.FIELD_ID: POSITION_DELETE_FIELDS[1].field_id}),
        F.col(PART_COL).cast("int").alias(PART_COL),
    ]
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions", "200"))
    out = (df.select(*columns)
           .repartition(max(1, min(len(groups), partitions)), F.col(PART_COL))
           .sortWithinPartitions(PART_COL, "file_path", "pos"))
    target = _new_target(table)
    writer = (
        out.write.mode("errorifexists")
        .options(**_parquet_options(table, DataFileContent.POSITION_DELETES), **local_files.local_write_options(spark, target))
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
        .partitionBy(PART_COL)
    )
    try:
        writer.parquet(target)
        return _delete_files(table, target, _list_files(spark, target), groups)
    except BaseException:
        _delete_dir(spark, table, target)
        raise


class Collected:
    """Positions of a statement's rows on the driver (a JVM object), if ``complete``, else only
    counted: ``counts`` maps (kind, group index, data file path) to how many."""

    def __init__(self, handle):
        self.handle = handle
        text, self.complete = delete_sets.position_counts(handle)
        parts = text.split("\0") if text else []  # kind, group, path, count; ...
        self.counts = {(parts[i], int(parts[i + 1]), parts[i + 2]): int(parts[i + 3]) for i in range(0, len(parts), 4)}


def collect(spark, df: DataFrame, max_rows: int) -> Collected:
    """The (kind, __lakerules_part, file_path, pos) rows of df on the driver (a kind is one
    character), or only their counts if there are more than ``max_rows`` (0: count only): one
    job, no shuffle, 8 bytes a row (a second one only when a task held more than its share of
    ``max_rows``)."""
    sep = F.lit("\0")
    name = F.concat(F.col("kind").cast("string"), sep, F.col(PART_COL).cast("int").cast("string"), sep,
                    F.col("file_path").cast("string"))
    plan = J.analyzed(df.select(name.alias("name"), F.col("pos").cast("long").alias("pos")))
    return Collected(delete_sets.collect_positions(spark, plan, max_rows))


def write_collected(spark, table: Table, positions: Collected, kinds: str, groups: list[tuple[int, Record]],
                    skip=()) -> list[DataFile]:
    """Position delete files of the collected positions of ``kinds`` (but those of the data
    files ``skip`` names), written by the driver's JVM: one file per group (as write's), each
    then cached as decoded."""
    options = _parquet_options(table, DataFileContent.POSITION_DELETES)
    target = _new_target(table)
    try:
        written = delete_sets.write_positions(spark, positions.handle, kinds, target, PART_COL,
                                              J.nul_joined(x for kv in options.items() for x in kv), J.nul_joined(skip))
        parts = written.split("\0") if written else []
        return _delete_files(table, target, [(parts[i], int(parts[i + 1])) for i in range(0, len(parts), 2)], groups)
    except BaseException:
        _delete_dir(spark, table, target)
        raise


def _delete_files(table: Table, target: str, listed: list[tuple[str, int]], groups: list) -> list[DataFile]:
    """DataFiles of the position delete files written under ``target`` ((relative path, length)
    each), their group from their folder, ``<PART_COL>=<index into groups>``."""

    def group(directory: str):
        key, _, text = directory.partition("=")
        if key != PART_COL or not text.isdigit():
            raise LakeError(f"lakerules: unexpected delete file directory {directory!r}")
        return groups[int(text)]

    return _data_files(table, Schema(*POSITION_DELETE_FIELDS), None, [], target, listed,
                       DataFileContent.POSITION_DELETES, locate=group)
