"""The JVM delete sets scans apply per row (the shim's io.lakerules.functions.PositionDeleteSet
and EqualityDeleteSet): built from a plan's rows by a Spark job, or, for small position delete
files, read on the driver."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakerules.errors import LakeError
from lakerules.spark.jclasses import jclass


def _nul_joined(texts) -> str:
    """Strings as one NUL-separated string: how lists cross to the JVM in one call."""
    texts = list(texts)
    for t in texts:
        if "\0" in t:
            raise LakeError(f"lakerules: a file path contains a NUL character: {t!r}")
    return "\0".join(texts)


def position_delete_set(spark: SparkSession, plan):
    """io.lakerules.functions.PositionDeleteSet of the (file name, position) rows of ``plan``."""
    return jclass(spark, "io.lakerules.functions.PositionDeleteSet").collect(spark._jsparkSession, plan)


def position_delete_set_on_driver(spark: SparkSession, delete_paths: list[str], pairs: list[tuple[int, str, str]]):
    """io.lakerules.functions.PositionDeleteSet of small delete files read on the driver: the
    rows of ``delete_paths`` that point, through a (delete file index, data file path, data file
    name) pair of ``pairs``, at a data file."""
    return jclass(spark, "io.lakerules.functions.PositionDeleteSet").readOnDriver(
        spark._jsparkSession, _nul_joined(delete_paths), _nul_joined(str(x) for t in pairs for x in t))


def equality_delete_set(spark: SparkSession, plan, scopes: int):
    """io.lakerules.functions.EqualityDeleteSet of the (key, delete sequence number, scope) rows of ``plan``."""
    return jclass(spark, "io.lakerules.functions.EqualityDeleteSet").collect(spark._jsparkSession, plan, scopes)
