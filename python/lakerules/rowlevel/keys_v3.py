"""lakerules.delete_by_key on a format version 3 table: deletion vectors instead of equality deletes.

The spec has v3 writers record row-level deletes as deletion vectors, and pyiceberg reads them
(not equality deletes). So on a v3 table the key rows are resolved to positions when the call
runs: the live rows of the current snapshot's data files (their deletes applied) are joined,
null-safe on the ``on`` columns (NULL matches NULL, as an equality delete), with the distinct keys
(broadcast when small, by Spark's join planning); the matched (file, position) pairs become one
deletion vector per data file, merged with its current one (lakerules.rowlevel.v3_rows.Removal:
DELETE's path; a file whose every row matched and that had no deletes is dropped whole). Files
whose column bounds exclude every key are not read (the keys' min and max per key column, as
MERGE prunes). The commit is validated as DELETE's: the touched files still exist and no DV landed
on them meanwhile (a conflict fails the call, nothing committed). As with equality deletes, rows
added after the call read the table are not deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.table.snapshots import Operation
from pyiceberg.types import IntegerType, LongType, StringType
from pyspark.sql import DataFrame, SparkSession, functions as F
from pyspark.sql.types import StringType as SparkString, StructField, StructType

from lakerules.plan.nodes import LakeScan
from lakerules.rowlevel import v3_rows
from lakerules.scan.planning import ScanPlan, plan_scan
from lakerules.scan.read import FILE_COL, POS_COL, scan_dataframe, status_names
from lakerules.spark import jvm as J, progress
from lakerules.write import files as write, row_delta

_BOUNDED = (IntegerType, LongType, StringType)  # bounds compare as Python values, as MERGE's


@dataclass
class _Context:  # what a scan's read needs of a rule's context
    spark: SparkSession

    def conf(self, key: str, default: str | None = None) -> str | None:
        return self.spark.conf.get(key, default)


def delete(spark: SparkSession, table, t, keys: DataFrame, key_fields: list) -> None:
    """Delete the live rows of ``table`` (its current snapshot) whose ``key_fields`` equal a row of
    ``keys`` (distinct, cached, one column per key field, named like it): deletion vectors, one
    commit (none when no row matches). ``t``: the table's TableRef."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return
    files = list(plan_scan(table, snapshot.snapshot_id, _bounds(keys, key_fields)).files)
    if not files:
        return
    progress.step(spark, "find the rows the keys match")
    scan = LakeScan(table=t, snapshot_id=snapshot.snapshot_id, output=(), iceberg=table, schema=table.schema(),
                    plan=ScanPlan(files=tuple(files)))
    rows = scan_dataframe(_Context(spark), scan, positions=True)
    renamed = keys.select(*[J.column(f.name).alias(f"__lakerules_key{i}") for i, f in enumerate(key_fields)])
    on = reduce(lambda a, b: a & b, [rows[J.quote(f.name)].eqNullSafe(renamed[f"__lakerules_key{i}"])
                                     for i, f in enumerate(key_fields)])
    names = status_names(spark, [p.file.file_path for p in files])
    lookup = J.local_frame(spark, [(names[p.file.file_path], p.file.file_path) for p in files],
                           StructType([StructField("__lakerules_name", SparkString()),
                                       StructField("file_path", SparkString())]))
    matched = (rows.join(renamed, on, "left_semi").select(FILE_COL, POS_COL)
               .join(F.broadcast(lookup), F.col(FILE_COL) == F.col("__lakerules_name"))
               .select("file_path", F.col(POS_COL).alias("pos"))
               .persist())
    removal = None
    try:
        counts = {r[0]: r[1] for r in matched.groupBy("file_path").count().collect()}
        if not counts:
            return
        touched = [p for p in files if p.file.file_path in counts]
        removal = v3_rows.Removal(spark, table, snapshot, matched, touched, counts)
        row_delta.commit(
            table, [], removal.delete_files, {"lakerules.operation": "delete_by_key"},
            removed_data_files=removal.removed_data_files,
            removed_delete_files=removal.replaced,
            validation=row_delta.Validation(must_exist=frozenset(p.file for p in touched),
                                            no_new_deletes=frozenset(p.file for p in touched), statement="delete"),
            operation=Operation.DELETE,
        )
    except BaseException as e:
        if removal is not None:
            write.discard(table, removal.discardable(), e)
        raise
    finally:
        matched.unpersist()


def _bounds(keys: DataFrame, key_fields: list):
    """``key >= min AND key <= max`` per key column whose bounds prune (one aggregate job):
    planning then skips files whose bounds hold no key. A column with a NULL key gets no bound
    (NULL matches the NULL rows, which bounds do not cover)."""
    fields = [f for f in key_fields if isinstance(f.field_type, _BOUNDED)]
    if not fields:
        return AlwaysTrue()
    aggs = [a for f in fields for a in (F.min(J.column(f.name)), F.max(J.column(f.name)),
                                        F.max(J.column(f.name).isNull().cast("int")))]
    row = keys.agg(*aggs).collect()[0]
    expr = AlwaysTrue()
    for i, f in enumerate(fields):
        low, high, nulls = row[3 * i], row[3 * i + 1], row[3 * i + 2]
        if low is None or nulls:
            continue
        expr = And(expr, And(GreaterThanOrEqual(f.name, low), LessThanOrEqual(f.name, high)))
    return expr
