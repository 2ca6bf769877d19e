"""The local file system lakerules writes through: io.lakerules.LocalFiles, Hadoop's own (checksum
files and all) setting file modes by a system call, where Hadoop without its native library
starts a chmod process for every file and folder it creates."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakerules.spark.jclasses import jclass


def local_write_options(spark: SparkSession, target: str) -> dict[str, str]:
    """Hadoop settings for a Spark write job's options when ``target`` is on the local file system:
    io.lakerules.LocalFiles, which sets file modes without starting a chmod process per file and
    folder (half of a small write job's time); none for any other file system."""
    text = str(jclass(spark, "io.lakerules.LocalFiles").settingsFor(spark._jsparkSession, target))
    parts = text.split("\0") if text else []
    return dict(zip(parts[::2], parts[1::2]))
