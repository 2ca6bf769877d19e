"""The JVM delete sets scans apply per row (the shim's io.lakerules.functions.PositionDeleteSet
and EqualityDeleteSet): built from a plan's rows by a Spark job, or, for small position delete
files, read on the driver."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakerules.spark.jclasses import jclass
from lakerules.spark.jvm import nul_joined


def position_delete_set(spark: SparkSession, plan):
    """io.lakerules.functions.PositionDeleteSet of the (file name, position) rows of ``plan``."""
    return jclass(spark, "io.lakerules.functions.PositionDeleteSet").collect(spark._jsparkSession, plan)


def position_delete_set_on_driver(spark: SparkSession, delete_paths: list[str], pairs: list[tuple[int, str, str]]):
    """io.lakerules.functions.PositionDeleteSet of small delete files read on the driver: the
    rows of ``delete_paths`` that point, through a (delete file index, data file path, data file
    name) pair of ``pairs``, at a data file."""
    return jclass(spark, "io.lakerules.functions.PositionDeleteSet").readOnDriver(
        spark._jsparkSession, nul_joined(delete_paths), nul_joined(str(x) for t in pairs for x in t))


def equality_delete_set(spark: SparkSession, plan, scopes: int):
    """io.lakerules.functions.EqualityDeleteSet of the (key, delete sequence number, scope) rows of ``plan``."""
    return jclass(spark, "io.lakerules.functions.EqualityDeleteSet").collect(spark._jsparkSession, plan, scopes)
