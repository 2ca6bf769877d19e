"""Scan planning: pruning, and delete files from other writers applied by the spec's rules."""

from __future__ import annotations

import datetime as dt

import pytest
from pyiceberg.typedef import Record
from pyspark.errors import AnalysisException

from lakerules.plan.nodes import LakeScan
import lakerules
from lakerules.scan.planning import plan_scan

from deletes_util import commit_deletes, equality_delete_file, position_delete_file
from settings_util import settings


def scans_of(spark, sql: str) -> list[LakeScan]:
    seen = []

    def record(plan, ctx):
        if isinstance(plan, LakeScan):
            seen.append(plan)
        return plan

    lakerules.register_rule(record)
    try:
        spark.sql(sql).collect()
    finally:
        lakerules.unregister_rule(record)
    return seen


def data_files(catalog, name):
    t = catalog.load_table(name)
    return sorted((task.file for task in t.scan().plan_files()), key=lambda f: f.file_path)


# ---- pruning ---------------------------------------------------------------------------------


def test_pruning_by_partition_and_metrics(spark, ns):
    table = f"lake.{ns}.p"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP, kind STRING) PARTITIONED BY (days(ts))")
    for day in range(1, 5):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id + {day * 1000}, TIMESTAMP'2026-01-0{day} 10:00:00', 'k{day}' FROM range(10)")
    (scan,) = scans_of(spark, f"SELECT * FROM {table} WHERE ts >= '2026-01-03'")
    assert (len(scan.tasks), scan.plan.total_data_files) == (2, 4)
    (scan,) = scans_of(spark, f"SELECT * FROM {table} WHERE id = 2003")  # metrics prune
    assert len(scan.tasks) == 1
    (scan,) = scans_of(spark, f"SELECT * FROM {table} WHERE kind IN ('k1', 'k4') AND id > 0")
    assert len(scan.tasks) == 2
    (scan,) = scans_of(spark, f"SELECT * FROM {table} WHERE upper(kind) = 'K1'")  # untranslatable: read all
    assert len(scan.tasks) == 4
    assert spark.sql(f"SELECT count(*) FROM {table} WHERE upper(kind) = 'K1'").collect()[0][0] == 10
    (scan,) = scans_of(spark, f"SELECT * FROM {table} WHERE NOT (ts >= '2026-01-03')")
    assert len(scan.tasks) == 2
    assert spark.sql(f"SELECT count(*) FROM {table} WHERE ts >= '2026-01-03' OR id = 1001").collect()[0][0] == 21


def test_scan_size_counts_rows_not_compressed_bytes(spark, ns, iceberg_catalog):
    """Spark's planner sees a scan's rows in memory (rows x the schema's width, as Iceberg's
    scans report), not the files' bytes: sequential ids compress to almost nothing, and a MERGE
    target of 10M such rows was broadcast to every task (and ran out of memory)."""
    t = f"lake.{ns}.wide_rows"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {t} SELECT id, 'same' FROM range(200000)")
    on_disk = sum(f.file_size_in_bytes for f in data_files(iceberg_catalog, f"{ns}.wide_rows"))
    size = int(str(spark.table(t)._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    assert size >= 200_000 * 28 > 20 * on_disk, (on_disk, size)  # BIGINT 8 + STRING 20
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(10 * on_disk))
    try:
        joined = spark.table(t).join(spark.range(10), "id", "right")
        plan = joined._jdf.queryExecution().executedPlan().toString()
        assert "BuildLeft" not in plan, plan
        assert joined.count() == 10
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


@pytest.mark.parametrize("version,deletes", [(2, "positions"), (3, "positions"), (2, "equality")])
def test_read_tasks_are_dealt_by_rows(spark, ns, version, deletes):
    """A table of one large file and many small ones (what CDC batches leave): Spark packs files
    by bytes plus 4 MiB a file, so the large file's task also gets small files while another gets
    one; the scan deals the same files by the manifests' rows instead (io.lakerules.LakeScanExec),
    with deletes too (position deletes, deletion vectors, an equality delete set probed per row,
    a condition Parquet's reader does not take). The rows are the same either way, and
    spark.lakerules.read.tasksByRows=false keeps Spark's tasks."""
    t = f"lake.{ns}.busy{version}{deletes}"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) TBLPROPERTIES ('format-version'='{version}')")
    spark.sql(f"INSERT INTO {t} SELECT id, concat('v', id) FROM range(0, 200000, 1, 1)")
    for b in range(12):
        spark.sql(f"INSERT INTO {t} SELECT id, 'u' FROM range({200_000 + b * 100}, {200_100 + b * 100}, 1, 1)")
    if deletes == "positions":
        spark.sql(f"DELETE FROM {t} WHERE id % 100 = 7")  # a row of every file: the files are read in one scan
    else:
        lakerules.delete_by_key(spark, t, spark.range(7, 201_200, 100), on=["id"])
    # the equality deletes as a set probed per row (no NOT IN pushed into Parquet)
    with settings(spark, {"spark.lakerules.read.equalityDeleteFilterThreshold": "0"}):
        def tasks():
            return sorted(r[0] for r in spark.sql(f"SELECT count(*) FROM {t} GROUP BY spark_partition_id()").collect())

        def answer():
            return spark.sql(f"SELECT count(*), sum(id), sum(length(v)) FROM {t}").collect()

        dealt, dealt_answer = tasks(), answer()
        with settings(spark, {"spark.lakerules.read.tasksByRows": "false"}):
            sparks, sparks_answer = tasks(), answer()
        live = 201_200 - 2012
        assert sum(dealt) == sum(sparks) == live
        assert 198_000 in dealt, dealt  # the large file's task has no small file
        assert max(sparks) > 198_000, sparks  # Spark's: small files with it
        assert dealt_answer == sparks_answer
        assert dealt_answer[0][0] == live
        # a filtered read keeps Spark's tasks (row-group statistics skip rows the manifests count)
        assert spark.sql(f"SELECT count(*) FROM {t} WHERE id > 100").collect()[0][0] == live - 100
        # so does a scan read row by row (its tasks would carry the node to executors, where the
        # node's class, written at run time, does not exist)
        with settings(spark, {"spark.sql.parquet.enableVectorizedReader": "false"}):
            assert tasks() == sparks
            assert answer() == sparks_answer


def test_pruning_across_partition_evolution(spark, ns):
    table = f"lake.{ns}.evo"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP) PARTITIONED BY (days(ts))")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, TIMESTAMP'2026-01-01 00:00:00' + make_interval(0,0,0,0,CAST(id AS INT),0,0) FROM range(24)")
    spark.sql(f"ALTER TABLE {table} REPLACE PARTITION FIELD days(ts) WITH hours(ts)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id + 100, TIMESTAMP'2026-01-02 00:00:00' + make_interval(0,0,0,0,CAST(id AS INT),0,0) FROM range(24)")
    q = f"SELECT * FROM {table} WHERE ts >= '2026-01-02 05:00:00' AND ts < '2026-01-02 06:00:00'"
    (scan,) = scans_of(spark, q)
    assert (len(scan.tasks), scan.plan.total_data_files) == (1, 25)
    q = f"SELECT * FROM {table} WHERE ts >= '2026-01-01 05:00:00' AND ts < '2026-01-01 06:00:00'"
    (scan,) = scans_of(spark, q)
    assert len(scan.tasks) == 1 and scan.tasks[0].file.spec_id == 0  # the one day file
    assert [r.id for r in spark.sql(q).collect()] == [5]


# ---- position deletes -------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["file:///", "file:/", "/"])
def test_position_deletes_any_uri_form(spark, ns, iceberg_catalog, engines, form):
    table = f"lake.{ns}.pd"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {table} SELECT id, CAST(id % 2 AS STRING) FROM range(10)")
    files = data_files(iceberg_catalog, f"{ns}.pd")
    t = iceberg_catalog.load_table(f"{ns}.pd")

    def as_form(path):
        bare = path.replace("file://", "").replace("file:", "")
        return {"file:///": "file://" + bare, "file:/": "file:" + bare, "/": bare}[form]

    # delete the rows at positions 0 and 2 of the first file
    f = files[0]
    deleted = spark.read.parquet(f.file_path).collect()
    # with full path bounds (one referenced file, as Iceberg's Java writer records them): the
    # bounds carry the writer's form too
    commit_deletes(iceberg_catalog, f"{ns}.pd", [position_delete_file(
        t, [(as_form(f.file_path), 0), (as_form(f.file_path), 2)], f.partition, path_bounds=True)])
    remaining = engines.lakerules(table)
    assert len(remaining) == 8
    gone = {(deleted[0].id,), (deleted[2].id,)}
    assert not gone & {(r[0],) for r in remaining}
    if as_form(f.file_path) == f.file_path:
        # other readers match delete paths to the manifest's exactly, as the spec asks of writers
        assert engines.pyiceberg(table) == remaining
        assert engines.duckdb(table) == remaining


def test_position_deletes_respect_sequence_numbers(spark, ns, iceberg_catalog):
    """A position delete applies to data files with a sequence number <= its own."""
    table = f"lake.{ns}.seq"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES (1), (2)")
    (f,) = data_files(iceberg_catalog, f"{ns}.seq")
    t = iceberg_catalog.load_table(f"{ns}.seq")
    commit_deletes(iceberg_catalog, f"{ns}.seq", [position_delete_file(t, [(f.file_path, 1)], Record())])
    assert sorted(r.id for r in spark.table(table).collect()) == [1]
    (scan,) = scans_of(spark, f"SELECT * FROM {table}")
    assert len(scan.plan.position_delete_files) == 1


def _jobs(spark, run) -> int:
    """How many Spark jobs ``run`` ran."""
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    run()
    return len(set(tracker.getJobIdsForGroup(None)) - before)


@pytest.mark.parametrize("path", ["filter", "filter-by-a-job", "join"])
def test_position_deletes_by_filter_or_by_join(spark, ns, iceberg_catalog, path):
    """Up to positionDeleteBroadcastRows delete rows, the reader drops them, walking each file's
    sorted positions; past it, an anti-join: on one long key (length * M + position) where data files
    are told apart by length, else on (path, position). Either way exactly the listed rows go,
    and a position past a file's last row deletes nothing (nor a row of another file). The
    filter's positions are read on the driver while the delete files hold at most
    positionDeleteDriverRows rows (no Spark job), else by a Spark job."""
    name = f"{ns}.keys_{path.replace('-', '_')}"
    table = f"lake.{name}"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    for values in ["(1), (2), (3)", "(1), (2), (3)", "(10), (20), (30), (40)", "(100), (200), (300), (400), (500)"]:
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES {values}")
    files = data_files(iceberg_catalog, name)
    by_count = {}
    for f in files:
        by_count.setdefault(f.record_count, []).append(f)
    (a, b), (c,), (d,) = by_count[3], by_count[4], by_count[5]
    assert a.file_size_in_bytes == b.file_size_in_bytes  # the (path, position) join
    t = iceberg_catalog.load_table(name)
    rest_of_a = [r.id for r in spark.read.parquet(a.file_path).collect()][1:]
    # unsorted, with a duplicate and positions out of range, as other writers may leave them
    rows = [(d.file_path, 7), (a.file_path, 3), (a.file_path, 0), (c.file_path, 4), (c.file_path, 3),
            (d.file_path, 1), (d.file_path, 1), (c.file_path, -1)]
    commit_deletes(iceberg_catalog, name, [position_delete_file(t, rows, Record())])

    def plan_text(sql):
        return spark.sql(sql)._jdf.queryExecution().optimizedPlan().toString()

    conf = {"join": {"spark.lakerules.read.positionDeleteBroadcastRows": "0"},
            "filter-by-a-job": {"spark.lakerules.read.positionDeleteDriverRows": "0"}}.get(path, {})
    with settings(spark, conf):
        got = []
        jobs = _jobs(spark, lambda: got.extend(r.id for r in spark.sql(f"SELECT id FROM {table}").collect()))
        if path == "filter":
            assert jobs == 1  # the query's: the delete set was read on the driver
        elif path == "filter-by-a-job":
            assert jobs > 1  # and the delete set's
        everything = sorted(got)
        assert everything == sorted(rest_of_a + [1, 2, 3] + [10, 20, 30] + [100, 300, 400, 500])
        big = f"SELECT id FROM {table} WHERE id >= 10"  # files c and d only: lengths differ
        assert sorted(r.id for r in spark.sql(big).collect()) == [10, 20, 30, 100, 300, 400, 500]
        # a row-level read sees the same rows, with their positions
        assert sorted(r.id for r in spark.sql(f"SELECT id FROM {table} WHERE id % 2 = 0").collect()) == \
            sorted(i for i in everything if i % 2 == 0)
        if path == "join":
            assert "__lakerules_key" not in plan_text(f"SELECT id FROM {table}")
            assert "__lakerules_key" in plan_text(big)
        else:  # dropped in the reader (io.lakerules.PositionDeletesParquetFormat): no Filter, no position column
            physical = spark.sql(big)._jdf.queryExecution().executedPlan().toString()
            assert "Format: Parquet (position deletes: 6 rows in 2 data files)" in physical, physical
            assert "_metadata" not in physical and "_metadata" not in plan_text(big)


def test_a_bad_position_delete_driver_size_is_refused(spark, ns):
    table = f"lake.{ns}.t"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES (1), (2)")
    spark.sql(f"DELETE FROM {table} WHERE id = 1")  # a position delete: the file keeps a row
    with settings(spark, {"spark.lakerules.read.positionDeleteDriverRows": "-1"}):
        with pytest.raises(Exception, match="positionDeleteDriverRows='-1' is not a number of rows"):
            spark.sql(f"SELECT * FROM {table}").collect()


def test_position_delete_files_are_decoded_once(spark, ns, iceberg_catalog):
    """A table that gains a delete file a statement (a CDC stream's MERGE batches) decodes only the
    new one at its next read: each delete file's positions are cached on the driver, whether the
    driver wrote it, read it or had a Spark job decode it."""
    from lakerules.scan import read
    from lakerules.spark import delete_sets

    table, name = f"lake.{ns}.decoded", f"{ns}.decoded"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id FROM range(100)")

    def delete_files():
        t = iceberg_catalog.load_table(name)
        found = {d.file_path: d for task in t.scan().plan_files() for d in task.delete_files}
        return [(d.file_path, d.file_size_in_bytes) for d in found.values()]

    def forget_sets():
        with read._cache_lock:
            read._position_sets.clear()

    spark.sql(f"DELETE FROM {table} WHERE id = 1")
    assert delete_sets.uncached_delete_files(spark, delete_files()) == [False]  # written by the driver, kept
    by_job = {"spark.lakerules.write.positionDeleteDriverRows": "0"}
    with settings(spark, by_job):  # written by a Spark job: not decoded yet
        spark.sql(f"DELETE FROM {table} WHERE id = 3")
    assert sorted(delete_sets.uncached_delete_files(spark, delete_files())) == [False, True]
    assert spark.table(table).count() == 98
    assert delete_sets.uncached_delete_files(spark, delete_files()) == [False, False]  # read on the driver, kept
    with settings(spark, {**by_job, "spark.lakerules.read.positionDeleteDriverRows": "0"}):
        spark.sql(f"DELETE FROM {table} WHERE id IN (2, 50)")
        all_three = delete_files()
        assert sorted(delete_sets.uncached_delete_files(spark, all_three)) == [False, False, True]
        forget_sets()
        assert _jobs(spark, lambda: spark.table(table).count()) > 1  # the new file decoded by a job
        assert delete_sets.uncached_delete_files(spark, all_three) == [False, False, False]
        forget_sets()
        got = []
        assert _jobs(spark, lambda: got.extend(r.id for r in spark.table(table).collect())) == 1  # none decoded
        assert sorted(got) == [i for i in range(100) if i not in (1, 2, 3, 50)]


# ---- equality deletes (seed 000: every example table is a case) --------------------------------


@pytest.fixture
def bears(spark, ns):
    table = f"lake.{ns}.bears"
    spark.sql(f"CREATE TABLE {table} (id INT, category STRING, name STRING)")
    spark.sql(f"""INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 'Bear', 'Grizzly'), (2, NULL, 'Polar'),
                  (3, NULL, 'Grizzly'), (4, 'Bear', 'Brown'), (5, 'Bear', 'Polar'), (6, 'Cat', NULL), (7, NULL, NULL)""")
    return table


def assert_duckdb_agrees(engines, table):
    """DuckDB (1.5.5) applies equality deletes with SQL's three-valued logic: it also drops rows
    with a NULL in an equality column that no delete row matches (the spec: NULL equals only
    NULL). Rows without NULLs must agree; lakerules' NULL rows are checked against the spec by
    each test's expected ids."""
    ours = [r for r in engines.lakerules(table) if None not in r]
    theirs = [r for r in engines.duckdb(table) if None not in r]
    assert ours == theirs


def _eq(spark, iceberg_catalog, table, *deletes):
    name = table.split(".", 1)[1]
    t = iceberg_catalog.load_table(name)
    commit_deletes(iceberg_catalog, name, [equality_delete_file(t, cols, Record()) for cols in deletes])
    return sorted(r.id for r in spark.table(table).collect())


def test_seed_multi_column_file_is_an_and(spark, bears, iceberg_catalog, engines):
    # equality_ids=[1, 3], row (3, NULL, Grizzly): deleted iff id = 3 AND name = 'Grizzly'
    assert _eq(spark, iceberg_catalog, bears, {"id": [3], "name": ["Grizzly"]}) == [1, 2, 4, 5, 6, 7]
    assert_duckdb_agrees(engines, bears)


def test_seed_null_value_deletes_nulls(spark, bears, iceberg_catalog, engines):
    # equality_ids=[2], row (3, NULL, Grizzly): deleted iff category IS NULL
    assert _eq(spark, iceberg_catalog, bears, {"category": [None]}) == [1, 4, 5, 6]
    assert_duckdb_agrees(engines, bears)


def test_seed_several_rows_are_an_or(spark, bears, iceberg_catalog, engines):
    # equality_ids=[1, 3], rows (3, NULL, Grizzly), (5, Bear, Polar)
    assert _eq(spark, iceberg_catalog, bears, {"id": [3, 5], "name": ["Grizzly", "Polar"]}) == [1, 2, 4, 6, 7]
    assert_duckdb_agrees(engines, bears)


def test_seed_several_files_are_an_or(spark, bears, iceberg_catalog, engines):
    # file 1: ids [1, 3] row (3, _, Grizzly); file 2: ids [3] row (_, _, Polar)
    got = _eq(spark, iceberg_catalog, bears, {"id": [3], "name": ["Grizzly"]}, {"name": ["Polar"]})
    assert got == [1, 4, 6, 7]
    assert_duckdb_agrees(engines, bears)


def test_seed_two_columns_category_and_name(spark, bears, iceberg_catalog, engines):
    # equality_ids=[2, 3], rows (Bear, Grizzly), (Bear, Brown)
    got = _eq(spark, iceberg_catalog, bears, {"category": ["Bear", "Bear"], "name": ["Grizzly", "Brown"]})
    assert got == [2, 3, 5, 6, 7]
    assert_duckdb_agrees(engines, bears)


def test_equality_deletes_with_positions_and_nulls_in_multi_column(spark, bears, iceberg_catalog, engines):
    t = iceberg_catalog.load_table(bears.split(".", 1)[1])
    (f,) = data_files(iceberg_catalog, bears.split(".", 1)[1])
    commit_deletes(iceberg_catalog, bears.split(".", 1)[1], [
        position_delete_file(t, [(f.file_path, 0)], Record()),  # id 1
        equality_delete_file(t, {"category": [None], "name": [None]}, Record()),  # id 7
        equality_delete_file(t, {"id": [5]}, Record()),
        equality_delete_file(t, {"id": [5, 6], "name": ["Polar", "nope"]}, Record()),  # (5, Polar) already covered
    ])
    assert sorted(r.id for r in spark.table(bears).collect()) == [2, 3, 4, 6]
    assert_duckdb_agrees(engines, bears)


def test_equality_deletes_only_for_older_data(spark, bears, iceberg_catalog):
    """Equality deletes apply to data with a strictly lower sequence number: rows re-inserted after stay."""
    _eq(spark, iceberg_catalog, bears, {"id": [1, 2]})
    spark.sql(f"INSERT INTO {bears} VALUES (1, 'Bear', 'again')")
    assert sorted(r.id for r in spark.table(bears).collect()) == [1, 3, 4, 5, 6, 7]


def test_large_equality_delete_sets_use_the_anti_join(spark, bears, iceberg_catalog):
    """Past the filter threshold: the JVM hash set; with no room for it, the anti-join."""
    spark.conf.set("spark.lakerules.read.equalityDeleteFilterThreshold", "1")
    try:
        got = _eq(spark, iceberg_catalog, bears, {"id": [1, 2, 999]}, {"category": [None, "Cat"]})
        assert got == [4, 5]
        with no_positions(spark):
            assert PROBE in executed(spark.table(bears))
        with set_bytes(spark, 0):
            assert sorted(r.id for r in spark.table(bears).collect()) == [4, 5]
            plan = executed(spark.table(bears))
            assert "Join" in plan and PROBE not in plan
    finally:
        spark.conf.unset("spark.lakerules.read.equalityDeleteFilterThreshold")


# ---- equality deletes as a JVM hash set per data file (issue 33) ------------------------------

PROBE = "EqualityDeleteSet$Probe"


def executed(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def set_bytes(spark, value):
    return settings(spark, {"spark.lakerules.read.equalityDeleteSetBytes": str(value)})


def no_positions(spark):
    """Equality deletes probed per row (not resolved to positions first)."""
    return settings(spark, {"spark.lakerules.read.equalityDeletePositions": "false"})


def _same_by_anti_join(spark, table, expected):
    """The hash set read the expected rows; resolved to positions where that applies, and by
    the anti-join (no room for a set), the same."""
    with no_positions(spark):
        df = spark.table(table)
        assert PROBE in executed(df)
        got = sorted(tuple(r) for r in df.collect())
    assert sorted(r[0] for r in got) == expected
    assert sorted(tuple(r) for r in spark.table(table).collect()) == got
    with set_bytes(spark, 0):
        plan = executed(spark.table(table))
        assert PROBE not in plan
        assert sorted(tuple(r) for r in spark.table(table).collect()) == got


def test_equality_delete_set_multi_column_nulls_and_sequence_numbers(spark, ns, iceberg_catalog):
    """Row keys (a string and a double) and long keys, NULL deleting NULL, 0.0 and -0.0 equal
    (as Spark's null-safe equality has them), rows added after a delete staying."""
    table = f"lake.{ns}.eqset"
    name = table.split(".", 1)[1]
    spark.sql(f"CREATE TABLE {table} (id INT, category STRING, score DOUBLE)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 'a', 1.0), (2, 'a', NULL), "
              "(3, NULL, 2.0), (4, NULL, NULL), (5, 'b', -0.0D), (6, 'b', 3.0)")
    t = iceberg_catalog.load_table(name)
    commit_deletes(iceberg_catalog, name, [equality_delete_file(
        t, {"category": ["a", None, "b"], "score": [None, None, 0.0]}, Record())])  # 2, 4, 5
    spark.sql(f"INSERT INTO {table} VALUES (7, 'a', NULL), (8, 'b', 3.0)")  # 7 stays: newer than the delete
    t = iceberg_catalog.load_table(name)
    commit_deletes(iceberg_catalog, name, [equality_delete_file(t, {"id": [6, None]}, Record())])
    t = iceberg_catalog.load_table(name)
    commit_deletes(iceberg_catalog, name, [equality_delete_file(t, {"category": ["b"], "score": [3.0]}, Record())])  # 6, 8
    spark.sql(f"INSERT INTO {table} VALUES (9, 'b', 3.0)")
    _same_by_anti_join(spark, table, [1, 3, 7, 9])


def test_equality_delete_set_with_a_dropped_column(spark, ns, iceberg_catalog):
    """A key column dropped since the deletes were written reads as NULL: only the delete rows
    with NULL there still match (a row they no longer match is back)."""
    table = f"lake.{ns}.eqdrop"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, tag STRING, note STRING)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 'x', 'n1'), (2, NULL, 'n2'), (3, 'y', 'n3')")
    keys = spark.createDataFrame([(1, "x"), (2, None), (3, None)], "id long, tag string")
    lakerules.delete_by_key(spark, table, keys, on=["id", "tag"])
    spark.sql(f"INSERT INTO {table} VALUES (4, 'z', 'n4')")
    lakerules.delete_by_key(spark, table, spark.createDataFrame([(4, None)], "id long, tag string"), on=["id", "tag"])
    _same_by_anti_join(spark, table, [3, 4])
    spark.sql(f"ALTER TABLE {table} DROP COLUMN tag")
    df = spark.table(table)
    assert PROBE in executed(df)
    assert sorted(tuple(r) for r in df.collect()) == [(1, "n1")]
    with set_bytes(spark, 0):  # the anti-join's path reads delete columns of the current schema only
        with pytest.raises(AnalysisException, match="equality delete column 2 of .* is not in the table schema"):
            spark.table(table).collect()


def test_equality_delete_set_at_its_size_limit(spark, ns, iceberg_catalog):
    """spark.lakerules.read.equalityDeleteSetBytes bounds the tables, estimated before they are
    built (delete rows x 64 bytes for long keys): at the bound the set, one byte below the
    anti-join, with the same rows."""
    from lakerules.scan.equality_deletes import BYTES_PER_LONG_KEY

    table = f"lake.{ns}.eqlimit"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, CAST(id AS STRING) FROM range(10)")
    lakerules.delete_by_key(spark, table, spark.range(0, 3), on=["id"])
    spark.sql(f"INSERT INTO {table} VALUES (1, 'again'), (20, 'new')")
    lakerules.delete_by_key(spark, table, spark.range(7, 9), on=["id"])
    bound = 5 * BYTES_PER_LONG_KEY
    expected = [(1, "again"), (3, "3"), (4, "4"), (5, "5"), (6, "6"), (9, "9"), (20, "new")]
    with set_bytes(spark, bound):
        with no_positions(spark):
            assert PROBE in executed(spark.table(table))
            assert sorted(tuple(r) for r in spark.table(table).collect()) == expected
        assert sorted(tuple(r) for r in spark.table(table).collect()) == expected
    with set_bytes(spark, bound - 1):
        plan = executed(spark.table(table))
        assert PROBE not in plan and "Join" in plan
        assert sorted(tuple(r) for r in spark.table(table).collect()) == expected


def _three_ways(spark, table) -> list:
    """The table's rows read with its equality deletes resolved to positions, probed per row, and
    anti-joined: the same."""
    got = sorted(map(repr, spark.table(table).collect()))
    with no_positions(spark):
        assert PROBE in executed(spark.table(table))
        assert sorted(map(repr, spark.table(table).collect())) == got
    with set_bytes(spark, 0):
        assert sorted(map(repr, spark.table(table).collect())) == got
    return got


def test_a_null_long_key_is_deleted_only_by_a_null_delete(spark, ns):
    """A row whose long key is NULL stays until a delete with a NULL key (Spark's Invoke returns
    NULL for a NULL argument of a primitive parameter: the probe once dropped such rows)."""
    table = f"lake.{ns}.eqnull"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 'a'), (NULL, 'b'), (2, 'c')")
    with settings(spark, {"spark.lakerules.read.equalityDeleteFilterThreshold": "0"}):
        lakerules.delete_by_key(spark, table, spark.createDataFrame([(2,)], "id long"), on=["id"])
        assert _three_ways(spark, table) == ["Row(id=1, v='a')", "Row(id=None, v='b')"]
        lakerules.delete_by_key(spark, table, spark.createDataFrame([(None,)], "id long"), on=["id"])
        assert _three_ways(spark, table) == ["Row(id=1, v='a')"]


def test_equality_deletes_resolved_to_positions_once(spark, ns, iceberg_catalog, engines):
    """A delete_by_key table is read through the positions its equality deletes remove from each
    data file, found once per set of delete files and kept (no second job on the next read), with
    position deletes of the same files united with them; a new delete file makes a new set."""
    from lakerules.spark import delete_sets

    positions = spark._jvm.io.lakerules.functions.EqualityPositions
    table = f"lake.{ns}.eqpos"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    with settings(spark, {"spark.lakerules.read.equalityDeleteFilterThreshold": "0"}):
        for b in range(3):
            spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id * 3 + {b}, 'v{b}' FROM range(100)")
        lakerules.delete_by_key(spark, table, spark.range(0, 30), on=["id"])  # 30 keys over the 3 files
        spark.sql(f"DELETE FROM {table} WHERE id IN (31, 32, 40)")  # position deletes of the same files
        delete_sets.clear_equality_positions(spark)
        got = _three_ways(spark, table)
        assert len(got) == 300 - 33
        kept = positions.keptRows()
        assert kept == 30  # the equality deletes' rows, found once
        spark.sparkContext.setJobGroup("eqpos", "eqpos")
        try:
            assert sorted(map(repr, spark.table(table).collect())) == got
            assert len(spark.sparkContext.statusTracker().getJobIdsForGroup("eqpos")) == 1  # the read alone
        finally:
            spark.sparkContext.setJobGroup(None, None)
        assert positions.keptRows() == kept
        spark.sql(f"INSERT INTO {table} VALUES (5, 'again')")  # newer than the delete: stays
        lakerules.delete_by_key(spark, table, spark.range(90, 95), on=["id"])
        got = _three_ways(spark, table)
        assert "Row(id=5, v='again')" in got and len(got) == 300 - 33 - 5 + 1
        assert positions.keptRows() == kept + 35  # the new set's positions (the first set's kept too)
        assert engines.duckdb(table) == engines.lakerules(table), "DuckDB reads differently"
        with settings(spark, {"spark.lakerules.read.equalityDeletePositions": "nope"}):
            with pytest.raises(Exception, match="equalityDeletePositions='nope' is not true or false"):
                spark.table(table).collect()


def test_equality_deletes_past_the_positions_kept_are_probed(spark, ns, monkeypatch):
    """More deleted rows than the driver keeps positions for: the rows are probed per row, and
    the set is not resolved again on the next read."""
    from lakerules.scan import equality_deletes

    table = f"lake.{ns}.eqmany"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, 'v' FROM range(100)")
    monkeypatch.setattr(equality_deletes, "POSITIONS_MAX_ROWS", 5)
    calls = []
    real = equality_deletes.delete_sets.resolve_equality_positions
    monkeypatch.setattr(equality_deletes.delete_sets, "resolve_equality_positions",
                        lambda *a: calls.append(1) or real(*a))
    with settings(spark, {"spark.lakerules.read.equalityDeleteFilterThreshold": "0"}):
        lakerules.delete_by_key(spark, table, spark.range(10, 20), on=["id"])
        for _ in range(2):
            assert sorted(r.id for r in spark.table(table).collect()) == [*range(10), *range(20, 100)]
            assert PROBE in executed(spark.table(table))
    assert len(calls) == 1, calls


def test_partitioned_equality_deletes_stay_in_their_partition(spark, ns, iceberg_catalog):
    table = f"lake.{ns}.peq"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (1, 'b'), (2, 'a')")
    t = iceberg_catalog.load_table(f"{ns}.peq")
    commit_deletes(iceberg_catalog, f"{ns}.peq", [equality_delete_file(t, {"id": [1]}, Record("a"))])
    assert sorted((r.id, r.kind) for r in spark.table(table).collect()) == [(1, "b"), (2, "a")]


def test_dataframe_filters_prune_too(spark, ns):
    table = f"lake.{ns}.dfp"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, CAST(id % 4 AS STRING) FROM range(40)")
    seen = []

    def record(plan, ctx):
        if isinstance(plan, LakeScan):
            seen.append(len(plan.tasks))
        return plan

    lakerules.register_rule(record)
    try:
        assert spark.table(table).where("kind = '2'").count() == 10
        # a filter that reaches the table only through a join
        other = spark.createDataFrame([("3",)], "kind string")
        assert spark.table(table).join(other, "kind").where("kind = '3'").count() == 10
    finally:
        lakerules.unregister_rule(record)
    assert seen == [1, 1]


def test_explain_shows_each_lake_scan(spark, ns, iceberg_catalog, capsys):
    table = f"lake.{ns}.exs"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, CAST(id % 4 AS STRING) FROM range(40)")
    t = iceberg_catalog.load_table(f"{ns}.exs")
    f = sorted((x.file for x in t.scan().plan_files()), key=lambda f: tuple(f.partition))[0]
    commit_deletes(iceberg_catalog, f"{ns}.exs", [position_delete_file(t, [(f.file_path, 0)], f.partition)])
    snap = iceberg_catalog.load_table(f"{ns}.exs").current_snapshot().snapshot_id
    text = spark.sql(f"EXPLAIN SELECT * FROM {table} WHERE kind = '{f.partition[0]}'").collect()[0].plan
    assert "== Physical Plan ==" in text
    assert f"{table} snapshot={snap} files=1/4 position_delete_files=1 equality_delete_files=0" in text
    spark.sql(f"SELECT * FROM {table} t1 JOIN {table} t2 USING (id) WHERE t2.kind = '1'").explain()
    out = capsys.readouterr().out
    assert "== lakerules scans ==" in out
    assert f"files=4/4" in out and "files=1/4" in out


# ---- the equality delete writer ----------------------------------------------------------------


def test_delete_by_key(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.cdc"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING, v DOUBLE) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {table} SELECT id, CAST(id % 3 AS STRING), id * 0.5 FROM range(30)")
    keys = spark.createDataFrame([(1, "1"), (2, "2"), (2, "2"), (5, "2"), (99, "0")], "id long, kind string")
    assert lakerules.delete_by_key(spark, table, keys, on=["id"]) == 4
    t = iceberg_catalog.load_table(f"{ns}.cdc")
    summary = t.current_snapshot().summary
    assert summary["added-equality-delete-files"] == str(len([f for f in t.inspect.files().to_pylist() if f["content"] == 2]))
    assert summary["added-equality-deletes"] == "4"
    expected = [(i, str(i % 3), i * 0.5) for i in range(30) if i not in (1, 2, 5)]
    assert sorted(engines.lakerules(table)) == sorted(expected)
    assert engines.duckdb(table) == engines.lakerules(table)
    # rows inserted afterwards with a deleted key stay
    spark.sql(f"INSERT INTO {table} VALUES (1, '1', 100.0)")
    assert spark.sql(f"SELECT count(*) FROM {table} WHERE id = 1").collect()[0][0] == 1


def test_delete_by_key_errors(spark, ns, iceberg_catalog):
    table = f"lake.{ns}.cdc2"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    before = iceberg_catalog.load_table(f"{ns}.cdc2").current_snapshot()
    keys = spark.createDataFrame([(1,)], "id long")
    with pytest.raises(lakerules.LakeError, match="must have column kind"):
        lakerules.delete_by_key(spark, table, keys, on=["id"])
    with pytest.raises(lakerules.LakeError, match="no column 'nope'"):
        lakerules.delete_by_key(spark, table, keys, on=["nope"])
    with pytest.raises(lakerules.LakeError, match="not a table of a lake catalog"):
        lakerules.delete_by_key(spark, "spark_catalog.default.x", keys, on=["id"])
    assert iceberg_catalog.load_table(f"{ns}.cdc2").current_snapshot() == before


def test_deletion_vectors_are_refused(spark, ns, iceberg_catalog):
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    table = f"lake.{ns}.dv"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.sql(f"INSERT INTO {table} VALUES (1)")
    t = iceberg_catalog.load_table(f"{ns}.dv")
    (f,) = data_files(iceberg_catalog, f"{ns}.dv")
    dv = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=t.location() + "/data/dv.puffin", file_format=FileFormat.PUFFIN,
        partition=Record(), record_count=1, file_size_in_bytes=10, referenced_data_file=f.file_path,
        content_offset=4, content_size_in_bytes=6,
    )
    dv.spec_id = 0
    commit_deletes(iceberg_catalog, f"{ns}.dv", [dv])
    with pytest.raises(AnalysisException, match="deletion vectors"):
        spark.table(table).collect()


def test_delete_by_key_writes_one_file_per_partition(spark, ns, iceberg_catalog):
    table = f"lake.{ns}.cdc3"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {table} SELECT id, CAST(id % 3 AS STRING) FROM range(300)")
    keys = spark.table(table).where("id % 7 = 0").repartition(8)
    lakerules.delete_by_key(spark, table, keys, on=["id"])
    files = [f for f in iceberg_catalog.load_table(f"{ns}.cdc3").inspect.files().to_pylist() if f["content"] == 2]
    assert len(files) == 3
    assert spark.table(table).where("id % 7 = 0").count() == 0 and spark.table(table).count() == 300 - 43


@pytest.mark.parametrize("partitioned", [False, True], ids=["global", "per-partition"])
def test_batches_of_equality_deletes_are_one_anti_join(spark, ns, iceberg_catalog, engines, partitioned):
    """CDC batches: each batch's equality deletes apply to every earlier file, so the data files'
    delete sets all differ; they are applied by one anti-join on key and sequence number (and
    partition), not one filter per set, with the rows Iceberg's rules give."""
    table = f"lake.{ns}.batches"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')"
              .replace(") TBL", ") PARTITIONED BY (kind) TBL" if partitioned else ") TBL"))
    rows = {}
    for batch in range(4):
        new = [(batch * 10 + i, "ab"[i % 2]) for i in range(6)] + ([(None, "a")] if batch == 0 else [])
        spark.createDataFrame(new, "id long, kind string").writeTo(table).append()
        rows.update({(r[0], r[1], batch): r for r in new})
        if batch:  # delete a key of every earlier batch, and re-insert one of them (a newer row stays)
            gone = [(b * 10 + batch, "ab"[batch % 2]) for b in range(batch)] + ([(None, "a")] if batch == 2 else [])
            lakerules.delete_by_key(spark, table, spark.createDataFrame(gone, "id long, kind string"), on=["id"])
            for k in [k for k in rows if any(k[0] == g[0] and k[2] < batch for g in gone)]:
                del rows[k]
            spark.createDataFrame([(batch, "a")], "id long, kind string").writeTo(table).append()
            rows[(batch, "a", batch + 0.5)] = (batch, "a")
    spark.sql(f"DELETE FROM {table} WHERE id = 4")  # a position delete among them
    rows = {k: v for k, v in rows.items() if v[0] != 4}
    t = iceberg_catalog.load_table(f"{ns}.batches")
    planned = plan_scan(t, t.current_snapshot().snapshot_id)
    # the data files' delete sets differ: the case the anti-join is for
    assert len({tuple(d.file_path for d in p.equality_deletes) for p in planned.files if p.equality_deletes}) >= 3
    ours = engines.lakerules(table)
    assert sorted(map(repr, ours)) == sorted(map(repr, rows.values()))
    assert engines.duckdb(table) == ours, "DuckDB reads differently"
    # applied per data file by the JVM hash set (resolved to positions by default); the
    # anti-join (no room for it) reads the same
    with no_positions(spark):
        assert PROBE in executed(spark.table(table))
        assert engines.lakerules(table) == ours
    with set_bytes(spark, 0):
        assert PROBE not in executed(spark.table(table))
        assert engines.lakerules(table) == ours
