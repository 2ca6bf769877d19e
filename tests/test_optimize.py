"""OPTIMIZE [WHERE ...] [ZORDER BY ...]: grammar and validation, compaction, z-order clustering,
deletes, cubes (no-op reruns, incremental re-clustering), concurrency, other engines, EXPLAIN."""

from __future__ import annotations

import os
import random
import statistics

import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.typedef import Record
from pyspark.errors import AnalysisException

from lakerules.write import metrics
from lakerules.optimize import rewrite as optimize, select as optimize_select
from lakerules.scan.planning import plan_scan
from deletes_util import commit_deletes, equality_delete_file, position_delete_file


# ---- helpers -----------------------------------------------------------------------------------


def run(spark, sql: str):
    """The metrics struct of an OPTIMIZE."""
    (row,) = spark.sql(sql).collect()
    return row.metrics


def error(spark, sql: str) -> str:
    with pytest.raises(AnalysisException) as e:
        spark.sql(sql).collect()
    return str(e.value)


def table_of(catalog, name: str):
    return catalog.load_table(name.split(".", 1)[1])


def live_files(catalog, name: str):
    """The live data files, as lakerules plans them (pyiceberg's planner refuses equality deletes)."""
    t = table_of(catalog, name)
    if t.current_snapshot() is None:
        return []
    return sorted((p.file for p in plan_scan(t, t.current_snapshot().snapshot_id).files), key=lambda f: f.file_path)


def disk(catalog, name: str) -> set[str]:
    """Every file under the table's location: what a failed statement must leave as it was."""
    root = table_of(catalog, name).location().replace("file://", "")
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def lakerules_and_duckdb(engines, table: str) -> list[tuple]:
    """What lakerules reads, checked against DuckDB, for tables with equality deletes (which
    pyiceberg does not read)."""
    ours = engines.lakerules(table)
    assert engines.duckdb(table) == ours, "DuckDB reads differently"
    return ours


def bound(f, field_id: int, upper: bool = False) -> int:
    return int.from_bytes((f.upper_bounds if upper else f.lower_bounds)[field_id], "little", signed=True)


def may_hold(files, field_id: int, values) -> float:
    """Mean share of files whose [min, max] of the column can hold each value."""
    return statistics.mean(
        sum(1 for f in files if bound(f, field_id) <= v <= bound(f, field_id, True)) / len(files) for v in values
    )


def uniform_table(spark, table: str, rows: int, inserts: int, partitioned: bool = False):
    """a and b: uniform BIGINTs in [0, 1e6), independent of each other and of the insert order."""
    spark.sql(f"""CREATE TABLE {table} (a BIGINT, b BIGINT, s STRING, d DOUBLE, k STRING)
                  {"PARTITIONED BY (k)" if partitioned else ""}""")
    per = rows // inserts
    for i in range(inserts):
        spark.sql(f"""INSERT INTO {table} SELECT /*+ COALESCE(1) */ pmod(xxhash64(id, 1), 1000000),
                      pmod(xxhash64(id, 2), 1000000), concat('row-', id), id / 7, IF(id % 2 = 0, 'p', 'q')
                      FROM range({i * per}, {(i + 1) * per})""")


# ---- the shim's functions ------------------------------------------------------------------------


def test_range_id_and_interleave_bits(spark):
    rows = spark.sql("""SELECT lake.system.range_id(v, array(10L, 20L)), lake.system.range_id(s, array('b', 'd')),
        lake.system.range_id(d, array(0.0D, double('NaN'))), lake.system.range_id(CAST(s AS BINARY), array(X'62')),
        lake.system.interleave_bits(2, array(1, 2)), lake.system.interleave_bits(3, array(7, 0, CAST(NULL AS INT)))
        FROM VALUES (5L, 'a', -1.0D), (10L, 'b', 0.5D), (11L, 'c', double('NaN')), (99L, 'z', 0.0D),
        (NULL, NULL, NULL) AS t(v, s, d)""").collect()
    assert [tuple(r)[:4] for r in rows] == [(1, 1, 1, 1), (1, 1, 2, 1), (2, 2, 2, 2), (3, 3, 1, 2),
                                            (None, None, None, None)]
    # (01, 10) -> 0110; (111, 000, NULL=000) -> 100 100 100
    assert {(r[4], r[5]) for r in rows} == {(6, 0b100100100)}
    with pytest.raises(Exception, match="do not fit in 63 bits"):
        spark.sql("SELECT lake.system.interleave_bits(32, array(1, 2)) FROM range(1)").collect()


def test_driver_z_keys_match_the_jvm(spark):
    """The JVM's z-keys of the rows (_zkey: range ids spread over 2^bits codes, interleaved) are
    those the driver's mirrors of its functions compute (range_ids, interleave_bits)."""
    import pyarrow as pa
    from pyspark.sql.types import DoubleType, StringType

    from lakerules.optimize import curves as zorder

    def driver_zkeys(columns, bounds, bits, ranges):
        ids = [zorder.range_ids(column, b, t) * (1 << bits) // (ranges + 1) for (column, t), b in zip(columns, bounds)]
        return zorder.interleave_bits(bits, ids)

    doubles = [None, -5.5, 0.0, 1.0, 2.5, 1e300, float("nan"), 3.0]
    strings = ["b", None, "a", "zz", "é", "", "b", "c"]
    bd = zorder.boundaries(pa.chunked_array([doubles]), 5, DoubleType())
    bs = zorder.boundaries(pa.chunked_array([strings]), 5, StringType())
    bits, ranges = zorder.ranges_and_bits(5, 2, False)
    ours = driver_zkeys([(pa.chunked_array([doubles]), DoubleType()), (pa.chunked_array([strings]), StringType())],
                        [bd, bs], bits, ranges).tolist()
    df = spark.createDataFrame(list(zip(doubles, strings)), "d double, s string")
    from pyspark.sql import functions as F

    z = zorder._zkey("lake.system", [F.col("d") + F.lit(0.0), F.col("s")],
                     [F.array(*[F.lit(v) for v in bd]), F.array(*[F.lit(v) for v in bs])], bits, ranges, False, 0)
    assert [r[0] for r in df.select(z).collect()] == ours
    assert len(set(ours)) > 4


# ---- grammar and validation: clear errors, the table as it was -----------------------------------


@pytest.fixture
def strict_table(spark, ns):
    table = f"lake.{ns}.v"
    spark.sql(f"""CREATE TABLE {table} (a BIGINT, b BIGINT, s STRING, st STRUCT<x: INT>, k STRING, ts TIMESTAMP)
                  PARTITIONED BY (k, days(ts))
                  TBLPROPERTIES ('write.metadata.metrics.column.b' = 'none', 'write.metadata.metrics.column.s' = 'counts')""")
    for i in range(2):
        spark.sql(f"INSERT INTO {table} SELECT id, id, 'x', named_struct('x', 1), 'k', TIMESTAMP'2026-01-01 00:00:00' FROM range({i}, {i + 1})")
    return table


@pytest.mark.parametrize("clause, message", [
    # syntax errors are Spark's own ParseException, with the position (0-based) and a caret
    ("ZORDER BY (a + 1)", "Syntax error at or near 'a': ZORDER BY takes column names, not expressions. SQLSTATE: 42601 (line 1, pos {c})"),
    ("ZORDER BY ()", "Syntax error at or near ')': ZORDER BY needs at least one column. SQLSTATE: 42601 (line 1, pos {c})"),
    ("ZORDER BY", "Syntax error at or near end of input: ZORDER BY needs at least one column. SQLSTATE: 42601 (line 1, pos {e})"),
    ("ZORDER (a)", "Syntax error at or near '(': expected BY after ZORDER. SQLSTATE: 42601 (line 1, pos {z})"),
    ("ZORDER BY (nope)", "ZORDER BY column nope does not exist in lake.{ns}.v; its columns are a, b, s, st, k, ts"),
    ("ZORDER BY (k)", "ZORDER BY column k is a partition column of lake.{ns}.v (identity)"),
    ("ZORDER BY (b)", "ZORDER BY column b has no min/max statistics in lake.{ns}.v (metrics mode none)"),
    ("ZORDER BY (s)", "ZORDER BY column s has no min/max statistics in lake.{ns}.v (metrics mode counts)"),
    ("ZORDER BY (st)", "ZORDER BY column st is of type struct<x:int>; clustering needs a primitive column"),
    ("ZORDER BY a, A", "ZORDER BY names column A twice"),
    ("WHERE a = 1", "OPTIMIZE WHERE may name only partition columns; a is not one (lake.{ns}.v is partitioned by k, ts)"),
    ("WHERE upper(k) = 'K'", "the predicate must be comparisons of partition columns with constants"),
    ("WHERE nope = 1", "UNRESOLVED_COLUMN"),
])
def test_bad_statements_fail_clearly_and_change_nothing(spark, ns, iceberg_catalog, strict_table, clause, message):
    sql = f"OPTIMIZE {strict_table} {clause}"
    head = f"OPTIMIZE {strict_table} "
    positions = {"c": len(head + "ZORDER BY ("), "e": len(sql), "z": len(head + "ZORDER ")}
    before = (table_of(iceberg_catalog, strict_table).current_snapshot().snapshot_id, disk(iceberg_catalog, strict_table))
    assert message.format(ns=ns, **positions) in error(spark, sql)
    after = (table_of(iceberg_catalog, strict_table).current_snapshot().snapshot_id, disk(iceberg_catalog, strict_table))
    assert after == before


def test_bad_targets_and_settings(spark, ns, iceberg_catalog):
    table = f"lake.{ns}.u"
    spark.sql(f"CREATE TABLE {table} (a BIGINT) TBLPROPERTIES ('lakerules.optimize.targetFileSize' = 'lots')")
    spark.sql(f"INSERT INTO {table} VALUES (1)")
    assert "table property lakerules.optimize.targetFileSize='lots': expected a positive integer" in error(spark, f"OPTIMIZE {table}")
    spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES ('lakerules.optimize.targetFileSize')")
    assert "a is not one (lake.{ns}.u is partitioned by nothing: it is not partitioned)".format(ns=ns) in error(
        spark, f"OPTIMIZE {table} WHERE a = 1")
    spark.range(3).createOrReplaceTempView("not_lake")
    assert "this statement needs a lake table" in error(spark, "OPTIMIZE not_lake")
    assert "TABLE_OR_VIEW_NOT_FOUND" in error(spark, f"OPTIMIZE lake.{ns}.missing")
    spark.conf.set("spark.lakerules.optimize.zorder.addNoise", "maybe")
    try:
        assert "spark.lakerules.optimize.zorder.addNoise='maybe': expected true or false" in error(spark, f"OPTIMIZE {table} ZORDER BY (a)")
    finally:
        spark.conf.unset("spark.lakerules.optimize.zorder.addNoise")


def test_explain_optimize_runs_nothing(spark, ns, iceberg_catalog):
    table = f"lake.{ns}.e"
    uniform_table(spark, table, 400, 4)
    before = table_of(iceberg_catalog, table).current_snapshot().snapshot_id
    (text,) = spark.sql(f"EXPLAIN OPTIMIZE {table} ZORDER BY a, b").collect()[0]
    assert "lakerules plan (not run)" in text and f"OPTIMIZE {table} ZORDER BY (a, b)" in text
    assert table_of(iceberg_catalog, table).current_snapshot().snapshot_id == before
    assert len(live_files(iceberg_catalog, table)) == 4


# ---- compaction --------------------------------------------------------------------------------


def test_compaction_bin_packs_small_files_per_selected_partition(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.c"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, k STRING, payload STRING) PARTITIONED BY (k)")
    for i in range(8):
        spark.sql(f"""INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, IF(id % 2 = 0, 'a', 'b'), repeat('x', 20)
                      FROM range({i * 200}, {(i + 1) * 200})""")
    files = live_files(iceberg_catalog, table)
    assert len(files) == 16
    largest = max(f.file_size_in_bytes for f in files)
    assert min(f.file_size_in_bytes for f in files) * 5 > largest * 4.5  # sizes close: bins of exactly 4
    # every input file is small; a file of 4 inputs' rows is not
    spark.sql(f"""ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{int(largest * 4.5)}',
                  'lakerules.optimize.minFileSize' = '{largest + 1}')""")
    rows = engines.lakerules(table)

    m = run(spark, f"OPTIMIZE {table} WHERE k = 'a'")
    assert (m.numFilesRemoved, m.numFilesAdded, m.numBins, m.partitionsOptimized, m.totalConsideredFiles) == (8, 2, 2, 1, 8)
    assert m.zOrderStats is None and m.filesRemoved.totalFiles == 8 and m.filesAdded.totalFiles == 2
    after = live_files(iceberg_catalog, table)
    assert sorted(f.file_path for f in after if f.partition[0] == "b") == sorted(f.file_path for f in files if f.partition[0] == "b")
    assert sorted(f.record_count for f in after if f.partition[0] == "a") == [400, 400]
    assert table_of(iceberg_catalog, table).current_snapshot().summary.operation.value == "replace"
    assert engines.assert_same(table) == rows

    m = run(spark, f"OPTIMIZE {table}")  # the other partition: partition a has no small files left
    assert (m.numFilesRemoved, m.numFilesAdded) == (8, 2)
    snapshot = table_of(iceberg_catalog, table).current_snapshot().snapshot_id
    m = run(spark, f"OPTIMIZE {table}")  # nothing left to do
    assert (m.numFilesRemoved, m.numFilesAdded, m.numBatches) == (0, 0, 0)
    assert table_of(iceberg_catalog, table).current_snapshot().snapshot_id == snapshot
    assert engines.assert_same(table) == rows


# ---- z-order -----------------------------------------------------------------------------------


def test_zorder_clusters_both_columns_for_file_skipping(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.z"
    uniform_table(spark, table, 40_000, 4)
    total = sum(f.file_size_in_bytes for f in live_files(iceberg_catalog, table))
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{total // 16}')")
    rows = engines.lakerules(table)
    rnd = random.Random(7)
    values = [rnd.randrange(1_000_000) for _ in range(300)]
    before = live_files(iceberg_catalog, table)
    assert may_hold(before, 1, values) > 0.95 and may_hold(before, 2, values) > 0.95  # no layout at all

    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    files = live_files(iceberg_catalog, table)
    assert (m.numFilesRemoved, m.numFilesAdded, len(files)) == (4, 16, 16)
    assert m.zOrderStats.strategyName == "minCubeSize(107374182400)" and m.zOrderStats.numOutputCubes == 1
    # 2 columns, 16 files: a 4 x 4 grid holds a value of either column in 1/4 of the files
    assert may_hold(files, 1, values) <= 0.30 and may_hold(files, 2, values) <= 0.30
    counts = [f.record_count for f in files]
    assert max(counts) < 1.5 * min(counts)
    summary = table_of(iceberg_catalog, table).current_snapshot().summary
    assert (summary["lakerules.zorder.columns"], summary["lakerules.zorder.column-names"]) == ("1,2", "a,b")
    assert engines.assert_same(table) == rows
    # the scan planner skips by the new bounds
    from test_scan_planning import scans_of

    (scan,) = scans_of(spark, f"SELECT * FROM {table} WHERE b = {values[0]}")
    assert len(scan.tasks) <= 6


def test_zorder_again_is_a_noop_and_new_files_recluster_by_cube(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.inc"
    uniform_table(spark, table, 8_000, 2, partitioned=True)
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '20000')")
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert m.partitionsOptimized == 2
    first = live_files(iceberg_catalog, table)
    snapshot = table_of(iceberg_catalog, table).current_snapshot().snapshot_id

    # the same again: every partition is one cube already
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert (m.numFilesAdded, m.numFilesRemoved, m.zOrderStats.inputNumCubes) == (0, 0, 2)
    assert table_of(iceberg_catalog, table).current_snapshot().snapshot_id == snapshot

    # a few new rows in partition p: clustered on their own (they are under 10% of p's cube); q stays
    cube = {f.file_path for f in first if f.partition[0] == "p"}
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, id, 'n', 0.0, 'p' FROM range(100)")
    rows = engines.lakerules(table)
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert (m.partitionsOptimized, m.numFilesRemoved, m.numFilesAdded, m.zOrderStats.mergedNumCubes) == (1, 1, 1, 0)
    assert m.numFilesSkippedToReduceWriteAmplification == len(cube)
    now = {f.file_path for f in live_files(iceberg_catalog, table)}
    assert {f.file_path for f in first} <= now  # neither p's cube nor q was rewritten
    assert engines.assert_same(table) == rows
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert m.numFilesAdded == 0  # the small cube is clustered already

    # more new rows: they and the small cube make a new small cube; the large cube stays
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, id, 'n', 0.0, 'p' FROM range(100, 200)")
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert (m.numFilesRemoved, m.numFilesAdded, m.zOrderStats.mergedNumCubes) == (2, 1, 1)
    assert cube <= {f.file_path for f in live_files(iceberg_catalog, table)}

    # with incrementalRatio 0, p's cubes merge into one again
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.zorder.incrementalRatio' = '0')")
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert (m.partitionsOptimized, m.zOrderStats.mergedNumCubes, m.zOrderStats.numOutputCubes) == (1, 2, 1)
    assert not cube & {f.file_path for f in live_files(iceberg_catalog, table)}

    # a cube of minCubeSize is never merged: new rows are clustered on their own
    cube = {f.file_path for f in live_files(iceberg_catalog, table) if f.partition[0] == "p"}
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.zorder.minCubeSize' = '1')")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, id, 'n', 0.0, 'p' FROM range(200, 300)")
    rows = engines.lakerules(table)
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert (m.numFilesRemoved, m.numFilesAdded, m.numFilesSkippedToReduceWriteAmplification) == (1, 1, len(cube))
    assert cube <= {f.file_path for f in live_files(iceberg_catalog, table)}
    assert engines.assert_same(table) == rows
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert m.numFilesAdded == 0  # two stable cubes: nothing to merge

    # other columns: nothing is clustered by them yet
    count = len(live_files(iceberg_catalog, table))
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (b)")
    assert (m.numFilesRemoved, m.zOrderStats.inputCubeFiles.num, m.zOrderStats.inputOtherFiles.num) == (count, 0, count)
    assert engines.assert_same(table) == rows
    # plain OPTIMIZE leaves z-ordered files alone
    m = run(spark, f"OPTIMIZE {table}")
    assert m.numFilesAdded == 0 and m.numFilesSkippedToReduceWriteAmplification > 0


# ---- deletes and sequence numbers --------------------------------------------------------------


def test_deletes_are_applied_and_delete_files_dropped(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.d"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    for i in range(3):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, concat('v', id) FROM range({i * 100}, {(i + 1) * 100})")
    name = f"{ns}.d"
    first = live_files(iceberg_catalog, table)[0]
    t = iceberg_catalog.load_table(name)
    commit_deletes(iceberg_catalog, name, [position_delete_file(t, [(first.file_path, p) for p in range(10)], Record())])
    t = iceberg_catalog.load_table(name)
    commit_deletes(iceberg_catalog, name, [equality_delete_file(t, {"id": [150, 151]}, Record())])
    expected = lakerules_and_duckdb(engines, table)
    assert len(expected) == 288

    m = run(spark, f"OPTIMIZE {table} ZORDER BY (id)")
    assert (m.numFilesRemoved, m.deleteFileStats.numDeleteFilesRemoved, m.deleteFileStats.numDeletedRowsRemoved) == (3, 2, 12)
    t = iceberg_catalog.load_table(name)
    plan = plan_scan(t, t.current_snapshot().snapshot_id)
    assert plan.files and not plan.position_delete_files and not plan.equality_delete_files
    summary = t.current_snapshot().summary
    assert (summary["removed-position-delete-files"], summary["removed-equality-delete-files"]) == ("1", "1")
    assert summary["total-delete-files"] == "0" and summary["total-records"] == "288"
    assert engines.assert_same(table) == expected  # pyiceberg too: no equality deletes left


def test_files_with_many_deletes_are_rewritten_by_plain_optimize(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.dt"
    spark.sql(f"CREATE TABLE {table} (id BIGINT) TBLPROPERTIES ('lakerules.optimize.minFileSize' = '1')")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id FROM range(100)")
    name = f"{ns}.dt"
    (f,) = live_files(iceberg_catalog, table)
    commit_deletes(iceberg_catalog, name, [position_delete_file(iceberg_catalog.load_table(name), [(f.file_path, 3)], Record())])
    m = run(spark, f"OPTIMIZE {table}")  # no file is small, Iceberg's default threshold never counts deletes
    assert m.numFilesRemoved == 0
    spark.conf.set("spark.lakerules.optimize.deleteFileThreshold", "1")
    try:
        m = run(spark, f"OPTIMIZE {table}")
    finally:
        spark.conf.unset("spark.lakerules.optimize.deleteFileThreshold")
    assert (m.numFilesRemoved, m.numFilesAdded, m.deleteFileStats.numDeleteFilesRemoved) == (1, 1, 1)
    assert sorted(r[0] for r in engines.assert_same(table)) == [i for i in range(100) if i != 3]


def test_rewritten_rows_keep_the_starting_sequence_number(spark, ns, iceberg_catalog, engines):
    """An equality delete committed before OPTIMIZE must not apply to the rows it rewrites: they
    get the sequence number of the snapshot OPTIMIZE read (>= the delete's), not that of their
    oldest input file (< the delete's). The delete stays: a file left alone still needs it."""
    table = f"lake.{ns}.sq"
    name = f"{ns}.sq"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, pad STRING)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, repeat('p', 50) FROM range(2000)")  # big: A
    spark.sql(f"INSERT INTO {table} VALUES (10000, 'o')")  # small, older than the delete: O
    commit_deletes(iceberg_catalog, name, [equality_delete_file(iceberg_catalog.load_table(name), {"id": [5]}, Record())])
    spark.sql(f"INSERT INTO {table} VALUES (5, 'again')")  # small, newer: B
    big = max(f.file_size_in_bytes for f in live_files(iceberg_catalog, table))
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.minFileSize' = '{big}')")
    start = table_of(iceberg_catalog, table).current_snapshot()
    expected = lakerules_and_duckdb(engines, table)
    assert [r for r in expected if r[0] == 5] == [(5, "again")]

    m = run(spark, f"OPTIMIZE {table}")
    assert (m.numFilesRemoved, m.numFilesAdded, m.deleteFileStats.numDeleteFilesRemoved) == (2, 1, 0)
    t = iceberg_catalog.load_table(name)
    entries = [e for mf in t.current_snapshot().manifests(t.io) for e in mf.fetch_manifest_entry(t.io)
               if e.snapshot_id == t.current_snapshot().snapshot_id and e.status.value == 1]
    assert [e.sequence_number for e in entries] == [start.sequence_number]
    assert lakerules_and_duckdb(engines, table) == expected


# ---- concurrency -------------------------------------------------------------------------------


@pytest.fixture
def meanwhile(monkeypatch):
    """meanwhile(fn): fn(catalog) runs after OPTIMIZE wrote its files, before it commits."""
    def set_(fn):
        monkeypatch.setattr(optimize, "_before_commit", lambda table: fn())
    return set_


def test_a_position_delete_committed_meanwhile_is_never_lost(spark, ns, iceberg_catalog, engines, meanwhile):
    table = f"lake.{ns}.cp"
    name = f"{ns}.cp"
    uniform_table(spark, table, 400, 4)
    victim = live_files(iceberg_catalog, table)[0]
    gone = spark.read.parquet(victim.file_path).collect()[0]

    def delete_row():
        t = iceberg_catalog.load_table(name)
        commit_deletes(iceberg_catalog, name, [position_delete_file(t, [(victim.file_path, 0)], Record())])

    meanwhile(delete_row)
    files_before = disk(iceberg_catalog, table)
    message = error(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert f"OPTIMIZE {table} conflicts with a commit made while it ran, so nothing was committed" in message
    # (the delete file has no path bounds: it may apply to any file of its partition)
    assert "by position, which this rewrite replaces" in message
    t = iceberg_catalog.load_table(name)
    assert t.current_snapshot().summary.operation.value == "delete"  # the delete is the last commit
    added = disk(iceberg_catalog, table) - files_before
    assert not [p for p in added if p.endswith(".parquet") and "pos-deletes" not in p]  # OPTIMIZE's files removed
    rows = engines.assert_same(table)
    assert len(rows) == 399 and (gone.a, gone.b) not in {(r[0], r[1]) for r in rows}


def test_equality_deletes_and_appends_committed_meanwhile_still_apply(spark, ns, iceberg_catalog, engines, meanwhile):
    table = f"lake.{ns}.ce"
    name = f"{ns}.ce"
    uniform_table(spark, table, 400, 4)
    target = spark.table(table).orderBy("a").first()

    def delete_and_append():
        t = iceberg_catalog.load_table(name)
        commit_deletes(iceberg_catalog, name, [equality_delete_file(t, {"a": [target.a]}, Record())])
        spark.sql(f"INSERT INTO {table} VALUES (-1, -1, 'new', 0.0, 'p')")

    meanwhile(delete_and_append)
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    assert m.numFilesRemoved == 4
    rows = lakerules_and_duckdb(engines, table)
    assert target.a not in {r[0] for r in rows}  # the equality delete applies to the rewritten rows
    assert (-1, -1, "new", 0.0, "p") in rows and len(rows) == 400  # 400 - 1 + 1


def test_a_delete_in_another_partition_does_not_conflict(spark, ns, iceberg_catalog, engines, meanwhile):
    table = f"lake.{ns}.cq"
    name = f"{ns}.cq"
    uniform_table(spark, table, 400, 4, partitioned=True)
    other = next(f for f in live_files(iceberg_catalog, table) if f.partition[0] == "q")

    def delete_in_q():
        t = iceberg_catalog.load_table(name)
        commit_deletes(iceberg_catalog, name, [position_delete_file(t, [(other.file_path, 0)], other.partition)])

    meanwhile(delete_in_q)
    m = run(spark, f"OPTIMIZE {table} WHERE k = 'p' ZORDER BY (a, b)")
    assert m.numFilesRemoved == 4 and m.partitionsOptimized == 1
    assert len(engines.assert_same(table)) == 399


def test_zorder_by_every_orderable_type_with_nulls(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.types"
    spark.sql(f"""CREATE TABLE {table} (i INT, l BIGINT, s STRING, d DOUBLE, f FLOAT, dec DECIMAL(10, 2), dt DATE,
                  ts TIMESTAMP, ntz TIMESTAMP_NTZ, bin BINARY, bo BOOLEAN, day DATE) PARTITIONED BY (days(day))""")
    for i in range(3):
        spark.sql(f"""INSERT INTO {table} SELECT /*+ COALESCE(1) */
            IF(id % 7 = 0, NULL, CAST(id AS INT)), IF(id % 5 = 0, NULL, -id), IF(id % 3 = 0, NULL, concat('é', id)),
            IF(id % 4 = 0, NULL, IF(id % 6 = 0, -0.0D, id / 3.0)), CAST(id AS FLOAT), CAST(id / 7 AS DECIMAL(10, 2)),
            date_add(DATE'2026-01-01', CAST(id AS INT)), TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, CAST(id AS INT), 0),
            TIMESTAMP_NTZ'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, CAST(id AS INT)), unhex(hex(id)), id % 2 = 0,
            date_add(DATE'2026-03-01', CAST(id % 2 AS INT))
            FROM range({i * 300}, {(i + 1) * 300})""")
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '4000')")
    rows = engines.assert_same(table)
    m = run(spark, f"OPTIMIZE {table} WHERE day >= DATE'2026-03-02' ZORDER BY (i, l, s, d, f, dec, dt, ts, ntz, bin, bo)")
    assert m.partitionsOptimized == 1 and m.numFilesRemoved == 3 and m.numFilesAdded > 1
    assert engines.assert_same(table) == rows
    empty = f"lake.{ns}.empty"
    spark.sql(f"CREATE TABLE {empty} (a BIGINT)")
    m = run(spark, f"OPTIMIZE {empty} ZORDER BY (a)")
    assert (m.numFilesAdded, m.numFilesRemoved, m.totalConsideredFiles) == (0, 0, 0)


# ---- nested and dotted columns -----------------------------------------------------------------


def test_zorder_by_a_struct_field_and_a_dotted_column_skips_files(spark, ns, iceberg_catalog, engines):
    """ZORDER BY s.a (field a of struct s) and `x.y` (one column whose name holds a dot): files
    record their bounds (as Iceberg's Java writers do), the scan skips by them, and the same
    columns work as rewrite_data_files' sort_order; what cannot be clustered is said."""
    from test_scan_planning import scans_of

    table = f"lake.{ns}.nested"
    spark.sql(f"""CREATE TABLE {table} (s STRUCT<a: BIGINT, c: STRING>, `x.y` BIGINT, l ARRAY<BIGINT>, p STRUCT<k: STRING, j: INT>)
                  PARTITIONED BY (p.k)""")
    spark.sql(f"""INSERT INTO {table} SELECT /*+ COALESCE(1) */ named_struct('a', pmod(xxhash64(id, 1), 100000), 'c', 'c'),
                  pmod(xxhash64(id, 2), 100000), NULL, named_struct('k', 'v', 'j', 0) FROM range(6000)""")
    (before,) = live_files(iceberg_catalog, table)
    schema = table_of(iceberg_catalog, table).schema()
    sa, xy = (schema.find_field(n).field_id for n in ("s.a", "x.y"))
    assert {sa, xy} <= set(before.lower_bounds)
    plan = metrics.statistics_plan(schema, {"write.metadata.metrics.column.x.y": "counts"})
    assert [plan[schema.find_field(n).field_id].mode.type.value for n in ("s.a", "s.c", "x.y", "l.element")] == [
        "full", "truncate", "counts", "counts"]  # a list's elements: counts at most
    rows = engines.lakerules(table)
    for clause, message in [
        ("(s)", "ZORDER BY column s is of type struct<a:bigint,c:string>; clustering needs a primitive column (name one of its fields, e.g. s.a)"),
        ("(s.z)", f"ZORDER BY column s.z does not exist in {table}: struct s has no field z; its fields are a, c"),
        ("(x.y)", f"ZORDER BY column x.y does not exist in {table}; its columns are s, `x.y`, l"),
        ("(l.element)", "l is of type array<bigint>; clustering reaches only fields of structs"),
        ("(p.k)", f"ZORDER BY column p.k is a partition column of {table} (identity)"),
    ]:
        assert message in error(spark, f"OPTIMIZE {table} ZORDER BY {clause}")
    for where, name in (("p.k = 'v' AND s.a = 1", "s"), ("p.j = 0", "p.j")):  # p holds the partition source p.k
        assert f"OPTIMIZE WHERE may name only partition columns; {name} is not one ({table} is partitioned by p.k)" in error(
            spark, f"OPTIMIZE {table} WHERE {where}")
    total = before.file_size_in_bytes
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{total // 8}')")

    assert run(spark, f"OPTIMIZE {table} WHERE p.k = 'w' ZORDER BY (s.a, `x.y`)").numFilesRemoved == 0
    m = run(spark, f"OPTIMIZE {table} WHERE P.K = 'v' ZORDER BY (s.a, `x.y`)")  # names resolved as Spark does
    files = live_files(iceberg_catalog, table)
    assert (m.numFilesRemoved, len(files)) == (1, 8)
    values = random.Random(3).sample(range(100000), 100)
    # 8 files, 2 columns: the k-d layout holds a value of each in about 0.34 / 0.38 of the files
    assert may_hold(files, sa, values) <= 0.45 and may_hold(files, xy, values) <= 0.45
    summary = table_of(iceberg_catalog, table).current_snapshot().summary
    assert (summary["lakerules.zorder.columns"], summary["lakerules.zorder.column-names"]) == (f"{sa},{xy}", "s.a,`x.y`")
    assert engines.assert_same(table) == rows
    point = [r for r in rows if r[0]["a"] == values[0]]
    for column, value in (("s.a", values[0]), ("`x.y`", values[1])):
        (scan,) = scans_of(spark, f"SELECT * FROM {table} WHERE {column} = {value}")
        assert len(scan.plan.files) <= 4
    assert [tuple(r) for r in spark.sql(f"SELECT s.a FROM {table} WHERE s.a = {values[0]}").collect()] == [(values[0],)] * len(point)
    by_pyiceberg = table_of(iceberg_catalog, table).scan(row_filter=EqualTo("s.a", values[0]))  # skips by the same bounds
    assert len(list(by_pyiceberg.plan_files())) <= 4 and by_pyiceberg.to_arrow().num_rows == len(point)

    (r,) = spark.sql(f"""CALL lake.system.rewrite_data_files(table => '{ns}.nested', strategy => 'sort',
                         sort_order => 'hilbert(`x.y`, s.a)', options => map('rewrite-all', 'true'))""").collect()
    assert r.rewritten_data_files_count == 8
    summary = table_of(iceberg_catalog, table).current_snapshot().summary
    assert (summary["lakerules.zorder.columns"], summary.get("lakerules.zorder.curve")) == (f"{xy},{sa}", "hilbert")
    files = live_files(iceberg_catalog, table)
    assert may_hold(files, sa, values) <= 0.5 and may_hold(files, xy, values) <= 0.5
    assert engines.assert_same(table) == rows


# ---- deletes: per data file --------------------------------------------------------------------


def test_delete_ratio_and_delete_file_threshold_count_each_data_files_own_deletes(spark, ns, iceberg_catalog, engines):
    """A position delete file whose file_path bounds name one data file applies to that file only,
    and its rows are that file's deleted rows (Iceberg's delete-ratio-threshold, default 0.3); one
    whose bounds span several paths applies to the files in the span and counts as a delete file,
    not as known deleted rows."""
    table, name = f"lake.{ns}.dr", f"{ns}.dr"
    spark.sql(f"CREATE TABLE {table} (id BIGINT) TBLPROPERTIES ('lakerules.optimize.minFileSize' = '1')")
    for i in range(3):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id FROM range({i * 100}, {(i + 1) * 100})")
    a, b, c = sorted(live_files(iceberg_catalog, table), key=lambda f: bound(f, 1))
    t = iceberg_catalog.load_table(name)
    scoped = [position_delete_file(t, [(a.file_path, p) for p in range(40)], Record(), path_bounds=True),  # 0.4 of a
              position_delete_file(t, [(b.file_path, p) for p in range(5)], Record(), path_bounds=True),
              position_delete_file(t, [(b.file_path, p) for p in range(5, 10)], Record(), path_bounds=True),  # 0.1 of b
              position_delete_file(t, [(a.file_path, 99), (c.file_path, 99)], Record(), path_bounds=True)]  # a span
    commit_deletes(iceberg_catalog, name, scoped)
    t = iceberg_catalog.load_table(name)
    counted = {p.file.file_path: optimize_select.deletes(p) for p in plan_scan(t, t.current_snapshot().snapshot_id).files}
    low, high = sorted([a.file_path, c.file_path])
    assert counted == {a.file_path: 2, b.file_path: 2 + (low <= b.file_path <= high), c.file_path: 1}
    expected = [(i,) for i in range(300) if not (i < 40 or 100 <= i < 110 or i in (99, 299))]

    (text,) = spark.sql(f"EXPLAIN OPTIMIZE {table}").collect()[0]
    assert "1 data files with deletes past deleteFileThreshold (2147483647 delete files) or deleteRatioThreshold (0.3" in text
    m = run(spark, f"OPTIMIZE {table}")  # a: 0.4 of its rows deleted; b: 0.1; c: none known
    assert (m.numFilesRemoved, m.numFilesAdded, m.filesRemoved.min) == (1, 1, a.file_size_in_bytes)
    engines.assert_same(table, expected=expected)
    spark.conf.set("spark.lakerules.optimize.deleteFileThreshold", "2")
    try:
        m = run(spark, f"OPTIMIZE {table}")  # b has two delete files; c one (the span)
    finally:
        spark.conf.unset("spark.lakerules.optimize.deleteFileThreshold")
    assert {f.file_path for f in live_files(iceberg_catalog, table)} & {a.file_path, b.file_path, c.file_path} == {c.file_path}
    (r,) = spark.sql(f"""CALL lake.system.rewrite_data_files(table => '{name}',
                         options => map('delete-ratio-threshold', '0.005'))""").collect()
    assert r.rewritten_data_files_count == 0  # c's deleted row is in a delete file of two data files: not known
    engines.assert_same(table, expected=expected)
    assert "option delete-ratio-threshold='0': expected a number > 0 and <= 1" in error(
        spark, f"CALL lake.system.rewrite_data_files(table => '{name}', options => map('delete-ratio-threshold', '0'))")
    spark.conf.set("spark.lakerules.optimize.deleteRatioThreshold", "1.5")
    try:
        assert "spark.lakerules.optimize.deleteRatioThreshold='1.5': expected a number > 0 and <= 1" in error(spark, f"OPTIMIZE {table}")
    finally:
        spark.conf.unset("spark.lakerules.optimize.deleteRatioThreshold")


# ---- a smaller target re-splits; one file group per partition of the current spec (issue 30) ----


def test_a_smaller_target_resplits_cubes_and_large_files(spark, ns, iceberg_catalog, engines):
    """As Delta's OPTIMIZE re-splits: a cube written for a larger target (files on average above
    maxFileSize, 1.8 times the target) is z-ordered again into files of the new one; plain
    OPTIMIZE splits a file above maxFileSize into round(size / target) runs of its rows, in order."""
    table = f"lake.{ns}.resplit"
    uniform_table(spark, table, 40_000, 2)
    rows = engines.lakerules(table)
    assert run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)").numFilesAdded == 1
    (cube,) = live_files(iceberg_catalog, table)
    # the table's Iceberg target (write.target-file-size-bytes) is OPTIMIZE's when lakerules' is unset
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.target-file-size-bytes' = '{cube.file_size_in_bytes // 4}')")
    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    files = live_files(iceberg_catalog, table)
    assert (m.numFilesRemoved, m.numFilesAdded, len(files)) == (1, 4, 4)
    assert all(0.6 < f.file_size_in_bytes / (cube.file_size_in_bytes / 4) < 1.4 for f in files)
    assert run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)").numFilesAdded == 0  # laid out for this target
    assert engines.assert_same(table) == rows

    plain = f"lake.{ns}.split"
    spark.sql(f"CREATE TABLE {plain} (id BIGINT, s STRING)")
    spark.sql(f"INSERT INTO {plain} SELECT /*+ COALESCE(1) */ id, concat('row-', id) FROM range(20000)")
    (big,) = live_files(iceberg_catalog, plain)
    spark.sql(f"ALTER TABLE {plain} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{big.file_size_in_bytes // 3}')")
    m = run(spark, f"OPTIMIZE {plain}")
    files = live_files(iceberg_catalog, plain)
    assert (m.numFilesRemoved, m.numFilesAdded) == (1, 3)
    table = table_of(iceberg_catalog, plain)
    runs = sorted((bound(f, 1), bound(f, 1, True), f.record_count) for f in files)
    assert [(lo, hi) for lo, hi, _ in runs] == [(lo, lo + n - 1) for lo, _, n in runs]  # consecutive rows
    assert runs[0][0] == 0 and runs[-1][1] == 19999 and sum(n for _, _, n in runs) == 20000
    assert run(spark, f"OPTIMIZE {plain}").numFilesAdded == 0
    engines.assert_same(plain, expected=[(i, f"row-{i}") for i in range(20000)])
    # rewrite_data_files: Iceberg's max-file-size-bytes, which must be above the target
    call = f"CALL lake.system.rewrite_data_files(table => '{ns}.split', options => map({{}}))"
    sizes = [f.file_size_in_bytes for f in files]
    target = min(sizes) // 2
    (r,) = spark.sql(call.format(f"'target-file-size-bytes', '{target}', 'max-file-size-bytes', '{min(sizes) - 1}'")).collect()
    assert (r.rewritten_data_files_count, r.added_data_files_count) == (3, sum(round(n / target) for n in sizes))
    assert "max-file-size-bytes (10) must be greater than target-file-size-bytes (20)" in error(
        spark, call.format("'target-file-size-bytes', '20', 'max-file-size-bytes', '10'"))
    assert len(engines.assert_same(plain)) == 20000


@pytest.mark.parametrize("clause", ["", " ZORDER BY (id, v)"])
def test_one_file_group_per_partition_of_the_current_spec(spark, ns, iceberg_catalog, engines, clause):
    """Files an earlier spec wrote are rewritten with the current spec's files of the partitions
    their rows go to: by their partition values (days into months), by their bounds, or, when
    they hold rows of several partitions, with the files of each of those (with or without WHERE)."""
    table = f"lake.{ns}.specs"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, k STRING, v BIGINT, ts DATE) PARTITIONED BY (days(ts))")
    for day in (1, 2):  # two days of one month: a file each
        spark.sql(f"INSERT INTO {table} VALUES ({day}, 'p', {day}, DATE'2026-01-0{day}')")
    spark.sql(f"ALTER TABLE {table} REPLACE PARTITION FIELD days(ts) WITH months(ts)")
    spark.sql(f"INSERT INTO {table} VALUES (3, 'p', 3, DATE'2026-01-20'), (4, 'q', 4, DATE'2026-02-01')")
    spark.sql(f"INSERT INTO {table} VALUES (5, 'q', 5, DATE'2026-02-02')")
    rows = engines.lakerules(table)
    m = run(spark, f"OPTIMIZE {table} WHERE ts < DATE'2026-02-01'{clause}")
    files = live_files(iceberg_catalog, table)
    current = table_of(iceberg_catalog, table).spec().spec_id
    assert {f.spec_id for f in files} == {current}
    months = sorted(f.partition[0] for f in files)
    assert months.count(672) == 1, months  # January 2026: the two day files and the month's file, one file
    assert m.numFilesRemoved == 3
    assert engines.assert_same(table) == rows

    # unpartitioned files holding k = 'p' and 'q', then partitioned by k: each partition one file
    other = f"lake.{ns}.spread"
    spark.sql(f"DROP TABLE IF EXISTS {other}")
    spark.sql(f"CREATE TABLE {other} (id BIGINT, k STRING, v BIGINT)")
    spark.sql(f"INSERT INTO {other} SELECT /*+ COALESCE(1) */ id, IF(id % 2 = 0, 'p', 'q'), id FROM range(10)")
    spark.sql(f"INSERT INTO {other} SELECT /*+ COALESCE(1) */ id, 'r', id FROM range(10, 15)")  # k = 'r' by its bounds
    spark.sql(f"ALTER TABLE {other} ADD PARTITION FIELD k")
    spark.sql(f"INSERT INTO {other} VALUES (100, 'p', 1), (101, 'q', 2), (102, 'r', 3), (103, 's', 4)")
    spark.sql(f"INSERT INTO {other} VALUES (104, 's', 5)")
    rows = engines.lakerules(other)
    m = run(spark, f"OPTIMIZE {other} WHERE k = 'q'{clause}")
    files = live_files(iceberg_catalog, other)
    # q's rows and p's (the first file held both) in one file each; r (its old file too: its rows
    # are all r, by its bounds) and s not rewritten
    assert sorted(f.partition[0] if len(f.partition) else "-" for f in files) == ["-", "p", "q", "r", "s", "s"]
    assert m.numFilesRemoved == 3
    m = run(spark, f"OPTIMIZE {other}{clause}")
    assert sorted(f.partition[0] for f in live_files(iceberg_catalog, other)) == ["p", "q", "r", "s"]
    assert engines.assert_same(other) == rows

    # no bounds of k (metrics mode counts): an old file may write into any partition
    blind = f"lake.{ns}.blind"
    spark.sql(f"DROP TABLE IF EXISTS {blind}")
    spark.sql(f"CREATE TABLE {blind} (id BIGINT, k STRING, v BIGINT) TBLPROPERTIES ('write.metadata.metrics.column.k' = 'counts')")
    spark.sql(f"INSERT INTO {blind} VALUES (1, 'p', 1)")
    spark.sql(f"ALTER TABLE {blind} ADD PARTITION FIELD k")
    spark.sql(f"INSERT INTO {blind} VALUES (2, 'p', 2), (3, 'q', 3)")
    spark.sql(f"INSERT INTO {blind} VALUES (4, 'q', 4)")
    m = run(spark, f"OPTIMIZE {blind} WHERE k = 'q'{clause}")
    assert m.numFilesRemoved == 4
    assert sorted(f.partition[0] for f in live_files(iceberg_catalog, blind)) == ["p", "q"]
    engines.assert_same(blind, expected=[(1, "p", 1), (2, "p", 2), (3, "q", 3), (4, "q", 4)])
