"""The JVM call that reads data files' Parquet bloom filters while a scan is planned
(io.lakerules.functions.BloomFilterIndex): one call for all the files, their filters kept in the
driver's JVM across queries."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakerules.spark.jclasses import jclass
from lakerules.spark.jvm import nul_joined

INDEX = "io.lakerules.functions.BloomFilterIndex"


def may_contain(spark: SparkSession, paths: list[str], field_id: int, kind: str, values: list) -> list[bool]:
    """For each of ``paths``, whether its bloom filters for the top-level column of ``field_id``
    admit one of ``values`` (``kind``: 'i' 32-bit integers and dates, 'l' 64-bit integers,
    's' strings); True where the file has no such filter."""
    out = jclass(spark, INDEX).mayContain(spark._jsparkSession, nul_joined(paths), field_id, kind,
                                          nul_joined(str(v) for v in values))
    return [b != 0 for b in bytes(out)]


def cached_files(spark: SparkSession) -> int:
    """How many files' filters the driver's JVM keeps (tests)."""
    return int(jclass(spark, INDEX).cachedFiles())


def clear(spark: SparkSession) -> None:
    jclass(spark, INDEX).clear()
