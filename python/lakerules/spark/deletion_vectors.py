"""The JVM calls of Iceberg v3's deletion vectors (io.lakerules.functions.DeletionVectors): a
scan's DVs read once on the driver into a broadcast PositionDeleteSet, a DELETE's DVs written as
one Puffin file, and a blob encoded or decoded (tests compare it with other writers' bytes)."""

from __future__ import annotations

from pyspark.sql import SparkSession


def _java_array(spark: SparkSession, kind, values):
    out = spark.sparkContext._gateway.new_array(kind, len(values))
    for i, v in enumerate(values):
        out[i] = v
    return out


def deletion_vector_set(spark: SparkSession, names: list[str], paths: list[str], offsets: list[int],
                        lengths: list[int]):
    """io.lakerules.functions.PositionDeleteSet of the deletion vectors at (paths, offsets, lengths),
    read once on the driver (io.lakerules.functions.DeletionVectors), by data file name."""
    jvm = spark._jvm
    return jvm.io.lakerules.functions.DeletionVectors.deleteSet(
        spark._jsparkSession, _java_array(spark, jvm.String, names), _java_array(spark, jvm.String, paths),
        _java_array(spark, jvm.long, offsets), _java_array(spark, jvm.long, lengths))


def write_deletion_vectors(spark: SparkSession, plan, puffin_path: str, created_by: str,
                           bases: list[tuple[str, str, int, int]]) -> str:
    """io.lakerules.functions.DeletionVectors.writePuffin: the deletion vectors of the rows of
    ``plan`` (data file path, position), each merged with its data file's current one (``bases``:
    (data file path, DV path, offset, length)), written as one Puffin file; its JSON description."""
    jvm = spark._jvm
    cols = list(zip(*bases)) if bases else [[], [], [], []]
    return str(jvm.io.lakerules.functions.DeletionVectors.writePuffin(
        spark._jsparkSession, plan, puffin_path, created_by, _java_array(spark, jvm.String, cols[0]),
        _java_array(spark, jvm.String, cols[1]), _java_array(spark, jvm.long, cols[2]),
        _java_array(spark, jvm.long, cols[3])))


def deletion_vector_blob(spark: SparkSession, positions: list[int]) -> bytes:
    """The deletion-vector-v1 blob of ``positions`` (io.lakerules.functions.DeletionVectors.blob)."""
    return bytes(spark._jvm.io.lakerules.functions.DeletionVectors.blob(_java_array(spark, spark._jvm.long, positions)))


def deletion_vector_positions(spark: SparkSession, path: str, offset: int, length: int) -> list[int]:
    """The positions the deletion vector at (path, offset, length) deletes, ascending."""
    return list(spark._jvm.io.lakerules.functions.DeletionVectors.readPositions(spark._jsparkSession, path, offset, length))
