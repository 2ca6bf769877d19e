"""Data files dropped at planning by their Parquet bloom filters (lakerules.scan.bloom_filters,
io.lakerules.functions.BloomFilterIndex): a point query over files whose bounds all admit the
key opens only the files whose filters admit it, and reads the same rows as without."""

from __future__ import annotations

import pytest

import lakerules
from lakerules.plan.nodes import LakeScan
from lakerules.spark import bloom_filters as jvm_filters

from settings_util import settings

KEY = "spark.lakerules.read.bloomFilters"


def _planned(spark, sql: str) -> tuple[list, int]:
    """(the rows of sql, the data files its one lake scan reads)."""
    seen = []

    def record(plan, ctx):
        if isinstance(plan, LakeScan):
            seen.append(len(plan.plan.files))
        return plan

    lakerules.register_rule(record)
    try:
        rows = sorted(tuple(r) for r in spark.sql(sql).collect())
    finally:
        lakerules.unregister_rule(record)
    assert len(seen) == 1, seen
    return rows, seen[0]


def _both(spark, sql: str) -> tuple[list, int, int]:
    """sql's rows (checked equal with and without the filters), and the files read with and without."""
    with settings(spark, {KEY: "false"}):
        plain, every = _planned(spark, sql)
    rows, pruned = _planned(spark, sql)
    assert rows == plain, (rows, plain)
    return rows, pruned, every


@pytest.fixture(scope="module")
def keyed(spark):
    """A file written before the table's bloom filter properties (ids 0, 7, 14, ... 20,993: no
    filters), then four with them, whose ids span 0..19,999 (8 x + k, k = 0..3: the bounds of
    every file admit any key below 20,000, and keys 8 x + 4..7 are in none)."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bloom_module")
    table = "lake.bloom_module.bloomed"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, s STRING, n INT, d DATE)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id * 7, concat('s', CAST(id * 7 AS STRING), 'é'), "
              "CAST(id * 7 AS INT), date_add(DATE'2000-01-01', CAST(id * 7 AS INT)) FROM range(3000)")
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.parquet.bloom-filter-enabled.column.id'='true', "
              "'write.parquet.bloom-filter-enabled.column.s'='true', 'write.parquet.bloom-filter-enabled.column.n'='true', "
              "'write.parquet.bloom-filter-enabled.column.d'='true')")
    for k in range(4):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id * 8 + {k}, concat('s', CAST(id * 8 + {k} AS STRING), 'é'), "
                  f"CAST(id * 8 + {k} AS INT), date_add(DATE'2000-01-01', CAST(id * 8 + {k} AS INT)) FROM range(2500)")
    yield table
    spark.sql("DROP NAMESPACE IF EXISTS lake.bloom_module CASCADE")


def test_a_point_query_reads_only_the_files_whose_filters_admit_the_key(spark, keyed):
    rows, pruned, every = _both(spark, f"SELECT id, s FROM {keyed} WHERE id = 4001")
    assert rows == [(4001, "s4001é")]
    assert (pruned, every) == (2, 5), (pruned, every)  # its file, and the file written without filters
    rows, pruned, every = _both(spark, f"SELECT id FROM {keyed} WHERE id IN (4001, 4002, 77777777)")
    assert rows == [(4001,), (4002,)] and pruned == 3, pruned
    rows, pruned, _ = _both(spark, f"SELECT s FROM {keyed} WHERE s = 's4003é'")  # strings: UTF-8 bytes
    assert rows == [("s4003é",)] and pruned == 2, pruned
    rows, pruned, _ = _both(spark, f"SELECT n FROM {keyed} WHERE n = 9 AND id > 0")  # with another conjunct
    assert rows == [(9,)] and pruned == 2, pruned
    rows, pruned, _ = _both(spark, f"SELECT n FROM {keyed} WHERE d = DATE'2000-01-10'")  # a date: its days
    assert rows == [(9,)] and pruned == 2, pruned


def test_a_key_in_no_file_reads_only_the_unfiltered_one(spark, keyed):
    rows, pruned, every = _both(spark, f"SELECT * FROM {keyed} WHERE id = 4005")
    assert rows == [] and (pruned, every) == (1, 5), (pruned, every)


def test_what_filters_cannot_answer_prunes_nothing_they_do_not_know(spark, keyed):
    # a range, an OR, an expression of the column, a string with a NUL: the bounds decide alone
    for where in ("id > 4000 AND id < 4002", "id = 4001 OR id = 4002", "id + 1 = 4002",
                  "s = concat('s4003é', char(0))"):
        rows, pruned, every = _both(spark, f"SELECT id FROM {keyed} WHERE {where}")
        assert pruned == every == 5, (where, pruned, every)


def test_a_widened_column_finds_its_older_files_values(spark, ns):
    # n written as INT (32-bit filters), then widened to BIGINT: the key is looked up as the file stores it
    table = f"lake.{ns}.widened"
    spark.sql(f"CREATE TABLE {table} (n INT) TBLPROPERTIES ('write.parquet.bloom-filter-enabled.column.n'='true')")
    for k in range(3):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ CAST(id * 3 + {k} AS INT) FROM range(1000)")
    spark.sql(f"ALTER TABLE {table} ALTER COLUMN n TYPE BIGINT")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ 5000000000 + id * 3 FROM range(1000)")
    rows, pruned, every = _both(spark, f"SELECT n FROM {table} WHERE n = 1501")
    assert rows == [(1501,)] and (pruned, every) == (1, 3), (pruned, every)
    rows, pruned, _ = _both(spark, f"SELECT n FROM {table} WHERE n IN (1502, 5000000003)")
    assert rows == [(1502,), (5000000003,)] and pruned == 2, pruned


def test_deleted_rows_stay_deleted_and_filters_are_kept_across_queries(spark, ns):
    table = f"lake.{ns}.bloomdel"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) TBLPROPERTIES ("
              "'write.parquet.bloom-filter-enabled.column.id'='true', 'write.delete.mode'='merge-on-read')")
    for k in range(3):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id * 3 + {k}, 'v' FROM range(1000)")
    spark.sql(f"DELETE FROM {table} WHERE id IN (4, 7)")
    jvm_filters.clear(spark)
    rows, pruned, every = _both(spark, f"SELECT id FROM {table} WHERE id IN (4, 5)")
    assert rows == [(5,)] and (pruned, every) == (2, 3), (pruned, every)
    assert jvm_filters.cached_files(spark) == 3  # read once; the next query asks no file
    _both(spark, f"SELECT id FROM {table} WHERE id = 8")
    assert jvm_filters.cached_files(spark) == 3


def test_a_delete_by_key_reads_only_the_files_whose_filters_admit_it(spark, ns, iceberg_catalog):
    """DELETE / UPDATE WHERE key = value plan the files they read the same way (EXPLAIN says how many)."""
    table = f"lake.{ns}.bloomdml"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) TBLPROPERTIES ("
              "'write.parquet.bloom-filter-enabled.column.id'='true', 'write.delete.mode'='merge-on-read', "
              "'write.update.mode'='merge-on-read')")
    for k in range(4):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id * 4 + {k}, 'v' FROM range(1000)")
    for statement, files in ((f"DELETE FROM {table} WHERE id = 2001", 1),
                             (f"UPDATE {table} SET v = 'u' WHERE id IN (2002, 3)", 2)):
        text = spark.sql(f"EXPLAIN {statement}").collect()[0][0]
        assert f"{files} of 4 data files may hold matching rows" in text, text
        spark.sql(statement)
    rows = {r.id: r.v for r in spark.table(table).collect()}
    assert len(rows) == 3999 and 2001 not in rows and rows[2002] == rows[3] == "u" and rows[4] == "v"
    t = iceberg_catalog.load_table(f"{ns}.bloomdml")
    assert sorted((r["id"], r["v"]) for r in t.scan(row_filter="id IN (2001, 2002, 3)").to_arrow().to_pylist()) == [
        (3, "u"), (2002, "u")]


def test_a_merge_of_a_few_keys_reads_only_the_files_whose_filters_admit_them(spark, ns, iceberg_catalog, monkeypatch):
    """A small MERGE source's keys are probed in the target files' bloom filters: of four files
    whose bounds all admit the keys, only those holding one are read; the rows are MERGE's."""
    from lakerules.rowlevel import merge_source

    table = f"lake.{ns}.bloommerge"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) TBLPROPERTIES ("
              "'write.parquet.bloom-filter-enabled.column.id'='true', 'write.merge.mode'='merge-on-read')")
    for k in range(4):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id * 4 + {k}, 'v' FROM range(1000)")
    seen = []
    real = merge_source.within_bounds
    monkeypatch.setattr(merge_source, "within_bounds", lambda *a, **kw: seen.append(len(out := real(*a, **kw))) or out)
    spark.createDataFrame([(2001, "u"), (9999999, "new"), (2005, None)], "id long, v string").createOrReplaceTempView("src")
    spark.sql(f"""MERGE INTO {table} t USING src s ON t.id = s.id
                  WHEN MATCHED AND s.v IS NULL THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v
                  WHEN NOT MATCHED THEN INSERT *""")
    assert seen == [1], seen  # 2001 and 2005 are both in the file of ids 4x + 1
    rows = {r.id: r.v for r in spark.table(table).collect()}
    assert len(rows) == 4000 and rows[2001] == "u" and 2005 not in rows and rows[9999999] == "new" and rows[2002] == "v"
    t = iceberg_catalog.load_table(f"{ns}.bloommerge")
    assert t.scan().to_arrow().num_rows == 4000
