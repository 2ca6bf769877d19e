"""Reading lake tables: which data files a snapshot has, and the Spark plan that reads them.

Columns are matched by Iceberg field id (``parquet.field.id`` in the read schema), so renamed,
added and dropped columns read right whatever schema a file was written with.
"""

from __future__ import annotations

import re

from pyiceberg.table import Table

from lakerules import jvm as J
from lakerules.errors import LakeError, NotSupported
from lakerules.plan import LakeScan
from lakerules.schema import iceberg_to_spark

_GLOB = re.compile(r"([\\\[\]{}*?])")


def plan_files(table: Table, snapshot_id: int | None) -> tuple[list, int]:
    """The scan tasks of a snapshot, and how many data files the snapshot has."""
    if snapshot_id is None:
        return [], 0
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    for task in tasks:
        if task.delete_files:
            raise NotSupported(
                f"lakerules: table {table.name()} has delete files at snapshot {snapshot_id}; reading "
                "merge-on-read deletes is not supported by this version of lakerules yet"
            )
    return tasks, len(tasks)


def spark_path(path: str) -> str:
    """A data file path as Spark's reader takes it: glob characters escaped."""
    return _GLOB.sub(r"\\\1", path)


def read_files(spark, schema, paths: list[str]):
    """A DataFrame reading the given Parquet data files with an Iceberg schema (by field id)."""
    read_schema = iceberg_to_spark(schema, with_ids=True)
    if not paths:
        return spark.createDataFrame([], read_schema)
    return spark.read.schema(read_schema).parquet(*[spark_path(p) for p in paths])


def lower_scan(ctx, scan: LakeScan, lower):
    """LakeScan -> Project(aliases keeping the relation's exprIds) over a Parquet file read."""
    spark = ctx.spark
    df = read_files(spark, scan.schema, [t.file.file_path for t in scan.tasks])
    plan = J.analyzed(df)
    by_name = {a.name(): a for a in J.from_seq(plan.output())}
    exprs = []
    for attr in scan.output:
        source = by_name.get(attr.name)
        if source is None:
            raise LakeError(
                f"lakerules: column {attr.name} of {scan.table} is not in the schema the scan was planned "
                "with; the table changed while the query was planned, run it again"
            )
        exprs.append(J.alias(spark, source, attr.name, attr.jvm.exprId(), attr.jvm.metadata()))
    return J.project(spark, exprs, plan)
