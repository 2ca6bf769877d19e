"""The JVM calls of Iceberg v3's deletion vectors (io.lakerules.functions.DeletionVectors): a
scan's DVs read once on the driver into a broadcast PositionDeleteSet, a DELETE's DVs written as
one Puffin file, and a blob encoded or decoded (tests compare it with other writers' bytes)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakerules.spark.jclasses import jclass
from lakerules.spark.jvm import nul_joined

_DV = "io.lakerules.functions.DeletionVectors"
_JOINED = "io.lakerules.functions.Joined"


def _strings(spark: SparkSession, values):
    """A Java String[] of ``values`` in one Py4J call (a Py4J array is filled one call an element)."""
    return jclass(spark, _JOINED).strings(nul_joined(values))


def _longs(spark: SparkSession, values):
    """A Java long[] of ``values`` in one Py4J call."""
    return jclass(spark, _JOINED).longs(",".join(str(int(v)) for v in values))


def deletion_vector_set(spark: SparkSession, names: list[str], paths: list[str], offsets: list[int],
                        lengths: list[int]):
    """io.lakerules.functions.PositionDeleteSet of the deletion vectors at (paths, offsets, lengths),
    read once on the driver (io.lakerules.functions.DeletionVectors), by data file name."""
    return jclass(spark, _DV).deleteSet(
        spark._jsparkSession, _strings(spark, names), _strings(spark, paths), _longs(spark, offsets),
        _longs(spark, lengths))


def write_deletion_vectors(spark: SparkSession, plan, puffin_path: str, created_by: str,
                           bases: list[tuple[str, str, int, int]]) -> str:
    """io.lakerules.functions.DeletionVectors.writePuffin: the deletion vectors of the rows of
    ``plan`` (data file path, position), each merged with its data file's current one (``bases``:
    (data file path, DV path, offset, length)), written as one Puffin file; its JSON description."""
    cols = list(zip(*bases)) if bases else [[], [], [], []]
    return str(jclass(spark, _DV).writePuffin(
        spark._jsparkSession, plan, puffin_path, created_by, _strings(spark, cols[0]), _strings(spark, cols[1]),
        _longs(spark, cols[2]), _longs(spark, cols[3])))


def write_collected_deletion_vectors(spark: SparkSession, collected, kinds: str, skip, puffin_path: str,
                                     created_by: str, bases: list[tuple[str, str, int, int]]) -> str:
    """write_deletion_vectors of positions already on the driver: those of ``collected`` (a
    complete io.lakerules.functions.PositionDeleteFiles.Collected) of the ``kinds``, but for the data
    files ``skip`` names. No Spark job."""
    cols = list(zip(*bases)) if bases else [[], [], [], []]
    return str(jclass(spark, _DV).writePuffin(
        spark._jsparkSession, collected, kinds, nul_joined(skip), puffin_path, created_by, _strings(spark, cols[0]),
        _strings(spark, cols[1]), _longs(spark, cols[2]), _longs(spark, cols[3])))


def deletion_vector_blob(spark: SparkSession, positions: list[int]) -> bytes:
    """The deletion-vector-v1 blob of ``positions`` (io.lakerules.functions.DeletionVectors.blob)."""
    return bytes(jclass(spark, _DV).blob(_longs(spark, positions)))


def deletion_vector_positions(spark: SparkSession, path: str, offset: int, length: int) -> list[int]:
    """The positions the deletion vector at (path, offset, length) deletes, ascending."""
    return list(jclass(spark, _DV).readPositions(spark._jsparkSession, path, offset, length))
