"""Deleted rows dropped inside Spark's Parquet reader (io.lakerules.PositionDeletesParquetFormat,
io.lakerules.KeptRows, io.lakerules.RowIndexes): deletion vectors (v3) and position delete files
(v2) over every column type Iceberg gives Spark, nulls in each, rows spread over many batches, row
groups and file splits, whole batches deleted, the first and the last row; the vectorized reader
with on-heap vectors (kept rows moved as runs) and off-heap ones (row by row), and the row-based
one. Each state is read identically by lakerules, pyiceberg and DuckDB."""

from __future__ import annotations

import pytest

COLUMNS = ("id BIGINT, b BOOLEAN, i INT, f FLOAT, d DOUBLE, d9 DECIMAL(9,2), d18 DECIMAL(18,3), "
           "d38 DECIMAL(38,5), dt DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, s STRING, low STRING, bin BINARY, "
           "st STRUCT<a: INT, b: STRING>, arr ARRAY<INT>, m MAP<STRING, INT>")
ROWS, MORE = 2000, 300

# each value null on its own rows, so that null flags move too
VALUES = """
  id,
  CASE WHEN id % 7 = 1 THEN NULL ELSE id % 3 = 0 END AS b,
  CASE WHEN id % 7 = 2 THEN NULL ELSE CAST(id * 3 AS INT) END AS i,
  CASE WHEN id % 7 = 3 THEN NULL ELSE CAST(id / 4 AS FLOAT) END AS f,
  CASE WHEN id % 7 = 4 THEN NULL ELSE id / 8.0D END AS d,
  CASE WHEN id % 7 = 5 THEN NULL ELSE CAST(id / 100 AS DECIMAL(9,2)) END AS d9,
  CASE WHEN id % 7 = 6 THEN NULL ELSE CAST(id * 1000 + 0.125 AS DECIMAL(18,3)) END AS d18,
  CASE WHEN id % 11 = 0 THEN NULL ELSE CAST(id AS DECIMAL(38,5)) * 1000000000000 END AS d38,
  CASE WHEN id % 11 = 1 THEN NULL ELSE date_add(DATE'2026-01-01', CAST(id AS INT)) END AS dt,
  CASE WHEN id % 11 = 2 THEN NULL ELSE TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) END AS ts,
  CASE WHEN id % 11 = 3 THEN NULL ELSE TIMESTAMP_NTZ'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, id, 0, 0) END AS ntz,
  CASE WHEN id % 11 = 4 THEN NULL ELSE concat('row-', id, repeat('x', CAST(id % 5 AS INT))) END AS s,
  CASE WHEN id % 11 = 5 THEN NULL ELSE concat('k', id % 4) END AS low,
  CASE WHEN id % 11 = 6 THEN NULL ELSE encode(CAST(id AS STRING), 'UTF-8') END AS bin,
  CASE WHEN id % 13 = 0 THEN NULL
       ELSE named_struct('a', CASE WHEN id % 13 = 1 THEN NULL ELSE CAST(id AS INT) END, 'b', concat('b', id)) END AS st,
  CASE WHEN id % 13 = 2 THEN NULL ELSE sequence(0, CAST(id % 4 AS INT)) END AS arr,
  CASE WHEN id % 13 = 3 THEN NULL ELSE map(concat('k', id % 3), CAST(id AS INT)) END AS m
"""

# small row groups, small batches and small splits: a file is many of each
READ_CONF = {
    "spark.sql.parquet.columnarReaderBatchSize": "64",
    "spark.sql.files.maxPartitionBytes": "16384",
    "spark.sql.files.openCostInBytes": "1024",
}


@pytest.fixture
def small_batches(spark):
    before = {k: spark.conf.get(k, None) for k in READ_CONF}
    for k, v in READ_CONF.items():
        spark.conf.set(k, v)
    yield
    for k, v in before.items():
        spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def _maps_as_dicts(rows: list[tuple]) -> list[tuple]:
    """pyiceberg gives a map as a list of (key, value) pairs, Spark and DuckDB as a dict."""
    return [r[:-1] + (dict(r[-1]) if isinstance(r[-1], list) else r[-1],) for r in rows]


def _check(spark, engines, t: str, live: list[int], duckdb: bool = True) -> None:
    ours = engines.lakerules(t)
    assert _maps_as_dicts(engines.pyiceberg(t)) == ours, "pyiceberg reads differently"
    if duckdb:
        assert _maps_as_dicts(engines.duckdb(t)) == ours, "DuckDB reads differently"
    assert sorted(r[0] for r in ours) == sorted(live), "lakerules keeps other rows than the deletes leave"
    assert spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0] == len(live)
    # pushed filters skip row groups: the row indexes of those read stay right
    wanted = sorted(i for i in live if 1000 <= i <= 1100)
    assert [r[0] for r in spark.sql(f"SELECT id FROM {t} WHERE id BETWEEN 1000 AND 1100 ORDER BY id").collect()] == wanted


@pytest.mark.parametrize("version", ["2", "3"])
def test_deleted_rows_of_every_type_are_dropped_in_the_reader(spark, ns, engines, small_batches, version):
    t = f"lake.{ns}.typed{version}"
    spark.sql(f"CREATE TABLE {t} ({COLUMNS}) TBLPROPERTIES ('format-version'='{version}', "
              "'write.parquet.row-group-size-bytes'='16384', 'write.delete.mode'='merge-on-read')")
    spark.range(ROWS).selectExpr(*[v.strip() for v in _split(VALUES)]).coalesce(1).writeTo(t).append()
    spark.range(ROWS, ROWS + MORE).selectExpr(*[v.strip() for v in _split(VALUES)]).coalesce(1).writeTo(t).append()
    live = set(range(ROWS + MORE))
    for step, where in enumerate(("id % 10 = 3", "id >= 640 AND id < 900", "id = 0 OR id = 2299",
                                  "id % 97 = 5 AND id > 1500")):
        spark.sql(f"DELETE FROM {t} WHERE {where}")
        live -= {r[0] for r in spark.range(ROWS + MORE).where(where).collect()}
        # DuckDB 1.5.5 misreads a v3 table whose DVs sit in several Puffin files (docs/format-v3.md):
        # at the third DELETE here it applies the first data file's DV to the second
        _check(spark, engines, t, sorted(live), duckdb=version == "2" or step < 2)
    plan = spark.sql(f"EXPLAIN SELECT * FROM {t}").collect()[0][0]
    assert "position deletes:" in plan and "_metadata" not in plan, plan  # dropped in the reader, no Filter

    # off-heap vectors: the kept rows move one by one (runs are array copies of on-heap vectors)
    spark.conf.set("spark.sql.columnVector.offheap.enabled", "true")
    try:
        _check(spark, engines, t, sorted(live), duckdb=False)
    finally:
        spark.conf.unset("spark.sql.columnVector.offheap.enabled")

    spark.conf.set("spark.sql.parquet.enableVectorizedReader", "false")  # Spark's row-based reader
    try:
        _check(spark, engines, t, sorted(live), duckdb=version == "2")
    finally:
        spark.conf.unset("spark.sql.parquet.enableVectorizedReader")


def _split(values: str) -> list[str]:
    """The select list's expressions (commas inside parentheses stay)."""
    out, depth, current = [], 0, ""
    for ch in values:
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    return [e for e in out + [current] if e.strip()]
