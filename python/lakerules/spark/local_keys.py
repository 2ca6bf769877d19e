"""A small MERGE source's key columns summed up in the driver's JVM, with no Spark job, when the
source is local rows (io.lakerules.PlanBuilders.localKeys): its rows, each key's bounds, whether
its keys are distinct, and the first key's sorted distinct values."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from lakerules.spark.jclasses import jclass


@dataclass(frozen=True)
class LocalKeys:
    rows: int
    bounds: list  # per key (min, max) of its non-NULL values, (None, None) when it has none
    unique: bool  # the rows whose keys are all non-NULL have distinct keys
    first: list  # the first key's distinct non-NULL values, sorted


def local_keys(df: DataFrame, keys: int) -> LocalKeys | None:
    """The first ``keys`` columns of ``df`` (INT or BIGINT) summed up without a Spark job when
    Spark's optimizer makes ``df`` local rows; None otherwise (another column type, or rows that
    take a job to compute)."""
    spark = df.sparkSession
    text = jclass(spark, "io.lakerules.PlanBuilders").localKeys(
        spark._jsparkSession, df._jdf.queryExecution().analyzed(), keys)
    if text is None:
        return None
    parts = str(text).split(";")
    bounds = []
    for part in parts[1:1 + keys]:
        low, high = part.split(",")
        bounds.append((int(low), int(high)) if low else (None, None))
    values = parts[2 + keys]
    return LocalKeys(int(parts[0]), bounds, parts[1 + keys] == "1", [int(v) for v in values.split(",")] if values else [])
