"""Lake commands run once, when Spark executes them (issue 15).

Planning (analysis, optimization, EXPLAIN) runs nothing: each statement below is parsed once and
analyzed, optimized and explained several times with the table checked unchanged; then it is
executed once and makes exactly one snapshot. The DataFrame API's writes each make one snapshot
too, and every Spark job a command runs is named after the statement and its step."""

from __future__ import annotations

import pytest

from lakerules.spark.jvm import from_seq


def state(iceberg_catalog, ns: str, name: str = "t") -> tuple[int, list]:
    """(number of snapshots, sorted rows) of lake.<ns>.<name>, read by pyiceberg."""
    t = iceberg_catalog.load_table(f"{ns}.{name}")
    rows = sorted(tuple(r.values()) for r in t.scan().to_arrow().to_pylist())
    return len(t.metadata.snapshots), rows


@pytest.fixture
def table(spark, ns):
    spark.sql(f"CREATE TABLE lake.{ns}.t (id BIGINT, kind STRING) TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO lake.{ns}.t SELECT id, CAST(id % 3 AS STRING) FROM range(12)")
    spark.sql(f"INSERT INTO lake.{ns}.t SELECT id, 'x' FROM range(12, 15)")
    spark.sql(f"CREATE TABLE lake.{ns}.src (id BIGINT, kind STRING)")
    spark.sql(f"INSERT INTO lake.{ns}.src VALUES (1, 'm'), (100, 'n')")
    return f"lake.{ns}.t"


STATEMENTS = {
    "insert": "INSERT INTO {t} SELECT id, 'i' FROM range(20, 23)",
    "insert overwrite": "INSERT OVERWRITE {t} SELECT id, 'o' FROM range(3)",
    "delete": "DELETE FROM {t} WHERE kind = '1'",
    "update": "UPDATE {t} SET kind = 'u' WHERE id < 4",
    "merge": ("MERGE INTO {t} t USING {src} s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET kind = s.kind WHEN NOT MATCHED THEN INSERT *"),
    "optimize": "OPTIMIZE {t}",
    "optimize zorder": "OPTIMIZE {t} ZORDER BY (id, kind)",
    "call": "CALL lake.system.rewrite_manifests(table => '{short}')",
}


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_planning_runs_nothing_and_execution_runs_once(spark, iceberg_catalog, ns, table, name):
    sql = STATEMENTS[name].format(t=table, src=f"lake.{ns}.src", short=f"{ns}.t")
    before = state(iceberg_catalog, ns)
    jspark = spark._jsparkSession
    sstate = jspark.sessionState()
    parsed = sstate.sqlParser().parsePlan(sql)
    skip = spark._jvm.org.apache.spark.sql.execution.CommandExecutionMode.SKIP()
    for _ in range(3):
        analyzed = sstate.analyzer().execute(parsed)
        sstate.optimizer().execute(analyzed)
        qe = sstate.executePlan(parsed, skip)
        qe.executedPlan()
    for keyword in ("", "EXTENDED ", "FORMATTED "):
        text = spark.sql(f"EXPLAIN {keyword}{sql}").collect()[0][0]
        assert "lakerules plan (not run)" in text, text
    assert state(iceberg_catalog, ns) == before, "planning changed the table"
    assert analyzed.getClass().getName() == "io.lakerules.LakeCommand"

    result = spark.sql(sql)  # Spark runs commands when spark.sql returns: no action needed
    after = state(iceberg_catalog, ns)
    assert after[0] == before[0] + 1, (before[0], after[0])
    result.collect(), result.show()  # reading the result runs nothing again
    assert state(iceberg_catalog, ns) == after


def test_affected_rows_are_the_rows_deleted(spark, iceberg_catalog, ns, table):
    before = state(iceberg_catalog, ns)[1]
    (row,) = spark.sql(f"DELETE FROM {table} WHERE kind = '0'").collect()
    after = state(iceberg_catalog, ns)[1]
    assert row.num_affected_rows == len(before) - len(after) == 4


def test_a_planned_command_executed_twice_runs_twice(spark, iceberg_catalog, ns, table):
    """The same analyzed plan executed again is a second execution (Spark's semantics for a
    command run twice); here a DELETE whose second run finds nothing left: no new snapshot."""
    jplan = spark._jsparkSession.sessionState().analyzer().execute(
        spark._jsparkSession.sessionState().sqlParser().parsePlan(f"DELETE FROM {table} WHERE kind = '2'"))
    from pyspark.sql import DataFrame

    first = DataFrame(spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, jplan), spark)
    assert first.collect()[0].num_affected_rows == 4
    second = DataFrame(spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, jplan), spark)
    assert second.collect()[0].num_affected_rows == 0
    assert state(iceberg_catalog, ns)[0] == 3


def test_dataframe_writes_each_commit_once(spark, iceberg_catalog, ns, table):
    t = table
    df = spark.range(30, 33).selectExpr("id", "'w' AS kind")
    steps = [
        ("writeTo append", lambda: df.writeTo(t).append(), 1, 18),
        ("writeTo overwritePartitions", lambda: df.writeTo(t).overwritePartitions(), 1, 3),
        ("writeTo overwrite", lambda: df.writeTo(t).overwrite(df.id > 100), 1, 6),
        ("insertInto", lambda: df.write.insertInto(t), 1, 9),
        ("saveAsTable append", lambda: df.write.mode("append").saveAsTable(t), 1, 12),
    ]
    for what, step, snapshots, rows in steps:
        before = state(iceberg_catalog, ns)[0]
        step()
        n, now = state(iceberg_catalog, ns)
        assert (n - before, len(now)) == (snapshots, rows), what
    df.writeTo(f"lake.{ns}.c").create()
    assert state(iceberg_catalog, ns, "c")[0] == 1
    df.writeTo(f"lake.{ns}.c").createOrReplace()  # one commit on the table, its history kept (docs/operations.md)
    assert state(iceberg_catalog, ns, "c") == (2, sorted((i, "w") for i in range(30, 33)))


def test_jobs_are_named_after_the_statement_and_step(spark, ns, table):
    store = spark._jsparkSession.sparkContext().statusStore()
    seen = {j.jobId() for j in from_seq(store.jobsList(None))}
    spark.sql(f"DELETE FROM {table} WHERE kind = '1'")
    spark.sql(f"UPDATE {table} SET kind = 'v' WHERE id = 2")
    spark.sql(f"OPTIMIZE {table}")
    new = [j for j in from_seq(store.jobsList(None)) if j.jobId() not in seen]
    names = [j.description().get() if j.description().isDefined() else "" for j in new]
    assert names and all(n.startswith("lakerules ") for n in names), names
    assert any(n.startswith(f"lakerules DELETE {table}") for n in names), names
    assert any(n.startswith(f"lakerules UPDATE {table}") for n in names), names
    assert any(n.startswith(f"lakerules OPTIMIZE {table}") for n in names), names


def test_explain_shows_the_planned_files_and_bins(spark, iceberg_catalog, ns):
    t = f"lake.{ns}.p"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    for i in range(2):
        spark.sql(f"INSERT INTO {t} SELECT id, CAST(id % 2 AS STRING) FROM range({i * 10}, {i * 10 + 10}, 1, 1)")
    delete = spark.sql(f"EXPLAIN DELETE FROM {t} WHERE kind = '1' OR id = 2").collect()[0][0]
    # kind = '1': its 2 files go whole; id = 2: column metrics leave 1 file of kind 0 to read
    assert "3 of 4 data files may hold matching rows" in delete, delete
    assert "dropped whole, not read (every row matches, by partition or column metrics): 2 files" in delete, delete
    assert "read to find matching rows: 1 files" in delete, delete
    assert "delete files (write.delete.granularity=file): at most one per data file read, 1 files in 1 partitions" in delete, delete
    whole = spark.sql(f"EXPLAIN DELETE FROM {t} WHERE kind = '1'").collect()[0][0]
    assert "2 of 4 data files may hold matching rows" in whole, whole
    assert "dropped whole, not read (every row matches, by partition or column metrics): 2 files, 10 rows" in whole
    update = spark.sql(f"EXPLAIN UPDATE {t} SET id = 0 WHERE kind = '0'").collect()[0][0]
    assert "read to find matching rows: 2 files" in update, update
    optimize = spark.sql(f"EXPLAIN OPTIMIZE {t} ZORDER BY (id)").collect()[0][0]
    assert "z-order (files: a k-d layout) by (id)" in optimize and "bins: 2: 4 files in, about 2 files out" in optimize, optimize
    assert state(iceberg_catalog, ns, "p")[0] == 2  # explaining ran nothing
