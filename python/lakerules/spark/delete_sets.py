"""The JVM delete sets scans apply per row (the shim's io.lakerules.functions.PositionDeleteSet
and EqualityDeleteSet): position delete files decoded once per driver (read there when small,
by a Spark job otherwise) and cached per file; equality delete sets built from a plan's rows by
a Spark job."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakerules.spark.jclasses import jclass
from lakerules.spark.jvm import nul_joined


def position_delete_set_on_driver(spark: SparkSession, delete_files: list[tuple[str, int]],
                                  pairs: list[tuple[int, str, str]]):
    """io.lakerules.functions.PositionDeleteSet of delete files (path, length) with no Spark job:
    each file's rows from the driver's cache of decoded delete files, or read on the driver (and
    cached). A delete row counts only through a (delete file index, data file path, data file
    name) pair of ``pairs``."""
    return jclass(spark, "io.lakerules.functions.PositionDeleteSet").readOnDriver(
        spark._jsparkSession, nul_joined(p for p, _ in delete_files), nul_joined(str(n) for _, n in delete_files),
        nul_joined(str(x) for t in pairs for x in t))


def uncached_delete_files(spark: SparkSession, delete_files: list[tuple[str, int]]) -> list[bool]:
    """Per delete file (path, length): whether the driver's cache of decoded delete files lacks it."""
    if not delete_files:
        return []
    flags = jclass(spark, "io.lakerules.functions.PositionDeleteSet").uncached(
        nul_joined(p for p, _ in delete_files), nul_joined(str(n) for _, n in delete_files))
    return [c == "1" for c in flags]


def cache_delete_files(spark: SparkSession, plan) -> None:
    """Decodes, by a Spark job, the (name, position) rows of ``plan`` into the driver's cache of
    decoded delete files; a row's name is ``<delete file length>\\0<delete file path>\\0<data
    file path in normal_path form>``."""
    jclass(spark, "io.lakerules.functions.PositionDeleteSet").cacheFiles(spark._jsparkSession, plan)


def clear_delete_file_cache(spark: SparkSession) -> None:
    """Forgets every decoded delete file (benchmarks measuring a first read)."""
    jclass(spark, "io.lakerules.functions.PositionDeleteSet").clearFileCache()


def equality_delete_set(spark: SparkSession, plan, scopes: int):
    """io.lakerules.functions.EqualityDeleteSet of the (key, delete sequence number, scope) rows of ``plan``."""
    return jclass(spark, "io.lakerules.functions.EqualityDeleteSet").collect(spark._jsparkSession, plan, scopes)


def collect_positions(spark: SparkSession, plan, max_rows: int):
    """The (name, position) rows of ``plan`` on the driver, sorted per name (the shim's
    PositionDeleteFiles.Collected), or only their counts per name if more than ``max_rows``."""
    return jclass(spark, "io.lakerules.functions.PositionDeleteFiles").collect(spark._jsparkSession, plan, max_rows)


def position_counts(collected) -> tuple[str, bool]:
    """NUL-separated (name, number of positions) of collected positions, and whether the
    positions themselves were collected (else only counted)."""
    return collected.counts(), collected.complete()


def write_positions(spark: SparkSession, collected, kinds: str, target: str, group_column: str, options: str,
                    skip: str = "") -> str:
    """Writes collected positions of ``kinds`` as delete files under ``target`` (the shim's
    PositionDeleteFiles.write), leaving out the data files ``skip`` names (NUL-separated):
    NUL-separated (relative path, length) pairs."""
    return jclass(spark, "io.lakerules.functions.PositionDeleteFiles").write(
        spark._jsparkSession, collected, kinds, target, group_column, options, skip)


def equality_positions_kept(spark: SparkSession, key: str, names: list[str]) -> list[bool]:
    """Per data file name: whether the driver's JVM keeps the positions the equality delete set
    ``key`` removes from it (the shim's EqualityPositions)."""
    flags = jclass(spark, "io.lakerules.functions.EqualityPositions").kept(key, nul_joined(names))
    return [c == "1" for c in flags]


def resolve_equality_positions(spark: SparkSession, plan, key: str, names: list[str], missing: list[str],
                               max_rows: int) -> tuple[object, bool]:
    """The positions the equality delete set ``key`` removes from the files ``names``, as a JVM
    map by name: those kept, and those of ``missing`` from ``plan`` (their deleted rows' (name,
    position), one job; None when nothing is missing), then kept; and whether they passed
    ``max_rows`` (then nothing is kept and the map is None). The map is also None when kept
    positions were dropped meanwhile."""
    found = jclass(spark, "io.lakerules.functions.EqualityPositions").resolve(
        spark._jsparkSession, plan, key, nul_joined(names), nul_joined(missing), max_rows)
    if found is not None and found.containsKey(""):  # EqualityPositions.TOO_MANY
        return None, True
    return found, False


def with_equality_positions(spark: SparkSession, base, resolved, eq_names: list[str], other_names: list[str]):
    """A PositionDeleteSet: ``base``'s positions (a PositionDeleteSet or None) united with the
    ``resolved`` ones of ``eq_names``, and base's of ``other_names``; None when empty."""
    return jclass(spark, "io.lakerules.functions.EqualityPositions").united(
        spark._jsparkSession, base, resolved, nul_joined(eq_names), nul_joined(other_names))


def clear_equality_positions(spark: SparkSession) -> None:
    jclass(spark, "io.lakerules.functions.EqualityPositions").clear()
