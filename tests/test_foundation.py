"""Foundation: DDL, writes and reads of lake tables from Spark SQL, checked against pyiceberg and DuckDB."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import AnalysisException

import lakerules
from lakerules.plan.nodes import LakeScan, Node


def snapshot_id(catalog, table: str):
    s = catalog.load_table(table.split(".", 1)[1]).current_snapshot()
    return None if s is None else s.snapshot_id


# ---- DDL ---------------------------------------------------------------------------------


def test_namespaces(spark, ns):
    spark.sql(f"CREATE NAMESPACE lake.{ns}_x WITH DBPROPERTIES ('owner_team'='data')")
    names = {r[0] for r in spark.sql("SHOW NAMESPACES IN lake").collect()}
    assert {ns, f"{ns}_x"} <= names
    props = {r[0]: r[1] for r in spark.sql(f"DESCRIBE NAMESPACE EXTENDED lake.{ns}_x").collect()}
    assert "owner_team" in str(props)
    spark.sql(f"DROP NAMESPACE lake.{ns}_x")
    assert f"{ns}_x" not in {r[0] for r in spark.sql("SHOW NAMESPACES IN lake").collect()}
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")  # exists: no error
    with pytest.raises(AnalysisException, match="already exists|SCHEMA_ALREADY_EXISTS"):
        spark.sql(f"CREATE NAMESPACE lake.{ns}")


def test_create_table_all_types_and_describe(spark, ns, iceberg_catalog):
    spark.sql(f"""
        CREATE TABLE lake.{ns}.types (
            b BOOLEAN, i INT, s SMALLINT, l BIGINT, f FLOAT, d DOUBLE, dec DECIMAL(12, 3),
            dt DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, str STRING, bin BINARY,
            st STRUCT<x: INT, y: STRING>, arr ARRAY<BIGINT>, m MAP<STRING, DOUBLE>
        ) USING iceberg
        PARTITIONED BY (identity(str), bucket(8, l), truncate(4, str), years(ts), months(dt), hours(ntz))
        TBLPROPERTIES ('write.parquet.compression-codec'='snappy', 'team'='core')
    """)
    t = iceberg_catalog.load_table(f"{ns}.types")
    assert t.format_version == 2
    assert [str(f.transform) for f in t.spec().fields] == ["identity", "bucket[8]", "truncate[4]", "year", "month", "hour"]
    assert t.properties["team"] == "core"
    assert str(t.schema().find_field("ts").field_type) == "timestamptz"
    assert str(t.schema().find_field("ntz").field_type) == "timestamp"
    rows = spark.sql(f"DESCRIBE TABLE lake.{ns}.types").collect()
    described = {r.col_name: r.data_type for r in rows}
    assert described["dec"] == "decimal(12,3)"
    assert described["st"] == "struct<x:int,y:string>"
    assert described["Part 1"] == "bucket(8, l)"
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES lake.{ns}.types").collect()}
    assert props["team"] == "core"
    assert [r.tableName for r in spark.sql(f"SHOW TABLES IN lake.{ns}").collect()] == ["types"]


def test_types_round_trip_across_engines(spark, ns, engines):
    table = f"lake.{ns}.rt"
    spark.sql(f"""CREATE TABLE {table} (b BOOLEAN, i INT, l BIGINT, f FLOAT, d DOUBLE, dec DECIMAL(12,3),
                  dt DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, s STRING, bin BINARY,
                  st STRUCT<x: INT, y: STRING>, arr ARRAY<BIGINT>, m MAP<STRING, DOUBLE>)""")
    spark.sql(f"""INSERT INTO {table} VALUES
        (true, 1, 10000000000, 1.5, 2.25, 123.456, DATE'2026-01-02', TIMESTAMP'2026-01-02 03:04:05.123456',
         TIMESTAMP_NTZ'2026-01-02 03:04:05', 'héllo', X'00FF', named_struct('x', 1, 'y', 'a'), array(1, 2, NULL), map('k', 1.0)),
        (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        (false, -7, -1, -0.5, -1e300, -0.001, DATE'1969-12-31', TIMESTAMP'1969-12-31 23:59:59.999999',
         TIMESTAMP_NTZ'1900-01-01 00:00:00', '', X'', named_struct('x', NULL, 'y', NULL), array(), map())""")
    flat = "b, i, l, f, d, dec, dt, ts, ntz, s, bin"
    rows = engines.assert_same(table, flat)
    assert len(rows) == 3
    assert (True, 1, 10000000000, 1.5, 2.25, Decimal("123.456"), dt.date(2026, 1, 2),
            dt.datetime(2026, 1, 2, 3, 4, 5, 123456), dt.datetime(2026, 1, 2, 3, 4, 5), "héllo", bytearray(b"\x00\xff")) in [
        tuple(bytearray(v) if isinstance(v, (bytes, bytearray)) else v for v in r) for r in rows]
    # nested columns: lakerules and pyiceberg agree on values
    ours = spark.sql(f"SELECT i, st.x, st.y, arr, m FROM {table}").collect()
    assert sorted((r.i, r.x, r.y, r.arr, r.m) for r in ours if r.i is not None) == [
        (-7, None, None, [], {}), (1, 1, "a", [1, 2, None], {"k": 1.0})]
    theirs = engines.pyiceberg(table, "i, st, arr, m")
    assert sorted(((r[0], r[1]["x"], r[1]["y"], r[2], dict(r[3])) for r in theirs if r[0] is not None)) == [
        (-7, None, None, [], {}), (1, 1, "a", [1, 2, None], {"k": 1.0})]


def test_nested_columns_read_alike_by_every_engine(spark, ns, engines, iceberg_catalog):
    """List elements and map keys and values carry their Iceberg field ids in the Parquet files
    (Spark's writer gives ids to struct fields only): DuckDB, which resolves columns by id, read
    such lists as NULLs and refused such maps."""
    table = f"lake.{ns}.nested"
    spark.sql(f"""CREATE TABLE {table} (id INT, arr ARRAY<BIGINT>, m MAP<STRING, DOUBLE>,
                  ls ARRAY<STRUCT<p: INT, q: ARRAY<STRING>>>, mm MAP<STRING, STRUCT<z: BIGINT, w: MAP<INT, STRING>>>)
                  TBLPROPERTIES ('write.update.mode' = 'merge-on-read')""")
    spark.sql(f"""INSERT INTO {table} VALUES
        (1, array(1, 2, NULL), map('k', 1.0), array(named_struct('p', 1, 'q', array('a', NULL))),
         map('x', named_struct('z', 5, 'w', map(1, 'one')))),
        (2, NULL, NULL, NULL, NULL),
        (3, array(), map(), array(), map())""")
    spark.sql(f"UPDATE {table} SET arr = array(7), mm = map('y', named_struct('z', 6, 'w', map(2, 'two'))) WHERE id = 3")
    t = iceberg_catalog.load_table(f"{ns}.nested")
    arr, m = t.schema().find_field("arr").field_type, t.schema().find_field("m").field_type
    for task in t.scan().plan_files():
        written = pq.read_schema(task.file.file_path.removeprefix("file:"))
        field_id = lambda f: int(f.metadata[b"PARQUET:field_id"])  # noqa: E731
        assert field_id(written.field("arr").type.value_field) == arr.element_id
        assert (field_id(written.field("m").type.key_field), field_id(written.field("m").type.item_field)) == (m.key_id, m.value_id)
    ours = engines.lakerules(table)
    assert [r[0] for r in ours] == [1, 2, 3] and ours[2][1] == [7]
    assert engines.duckdb(table) == ours, "DuckDB reads differently"
    # pyiceberg gives maps as lists of pairs, and reads a NULL list of structs as [] (its own files too)
    theirs = [(r[0], r[1], None if r[2] is None else dict(r[2])) for r in engines.pyiceberg(table, "id, arr, m")]
    assert theirs == [r[:3] for r in ours], "pyiceberg reads differently"


def test_drop_table(spark, ns, iceberg_catalog):
    spark.sql(f"CREATE TABLE lake.{ns}.gone (id BIGINT)")
    spark.sql(f"DROP TABLE lake.{ns}.gone")
    assert not iceberg_catalog.table_exists(f"{ns}.gone")
    spark.sql(f"DROP TABLE IF EXISTS lake.{ns}.gone")
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND|cannot be found"):
        spark.sql(f"DROP TABLE lake.{ns}.gone")


# ---- writes and reads ----------------------------------------------------------------------


@pytest.fixture
def events(spark, ns):
    table = f"lake.{ns}.ev"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP, kind STRING) PARTITIONED BY (days(ts), bucket(4, id))")
    spark.sql(f"""INSERT INTO {table}
        SELECT id, TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id % 72 AS INT), 0, 0),
               CASE WHEN id % 10 = 0 THEN NULL ELSE CAST(id % 3 AS STRING) END
        FROM range(0, 300)""")
    return table


def test_insert_and_select_match_other_engines(spark, events, engines, iceberg_catalog):
    rows = engines.assert_same(events)
    assert len(rows) == 300
    got = spark.sql(f"SELECT kind, count(*) AS n FROM {events} WHERE ts >= '2026-01-02' GROUP BY kind ORDER BY kind").collect()
    expected = {}
    for i in range(300):
        if i % 72 >= 24:
            k = None if i % 10 == 0 else str(i % 3)
            expected[k] = expected.get(k, 0) + 1
    assert {r.kind: r.n for r in got} == expected
    t = iceberg_catalog.load_table(events.split(".", 1)[1])
    summary = t.current_snapshot().summary
    assert summary["added-records"] == "300" and summary["engine-name"] == "lakerules"
    files = list(t.scan().plan_files())
    assert all(f.file.spec_id == 0 and len(f.file.partition) == 2 for f in files)
    # column metrics recorded for other engines to prune with
    some = files[0].file
    assert set(some.value_counts) == {1, 2, 3} and 1 in some.lower_bounds and 1 in some.upper_bounds


def test_one_statement_one_snapshot(spark, events, iceberg_catalog):
    t = iceberg_catalog.load_table(events.split(".", 1)[1])
    before = len(t.snapshots())
    spark.sql(f"INSERT INTO {events} SELECT id, NULL, 'x' FROM range(1000, 1100)")
    assert len(iceberg_catalog.load_table(events.split(".", 1)[1]).snapshots()) == before + 1


def test_dataframe_apis(spark, events, engines):
    spark.range(5).selectExpr("id + 500 AS id", "CAST(NULL AS TIMESTAMP) AS ts", "'df' AS kind").writeTo(events).append()
    assert spark.table(events).where("kind = 'df'").count() == 5
    spark.range(3).selectExpr("id + 600 AS id", "current_timestamp() AS ts", "'ins' AS kind").write.insertInto(events)
    assert spark.table(events).count() == 308
    engines.assert_same(events)


def test_insert_by_name_and_column_list(spark, ns, engines):
    table = f"lake.{ns}.cols"
    spark.sql(f"CREATE TABLE {table} (a BIGINT, b STRING, c DOUBLE)")
    spark.sql(f"INSERT INTO {table} (b, a) VALUES ('x', 1)")
    spark.sql(f"INSERT INTO {table} BY NAME SELECT 2.5 AS c, 'y' AS b, 2 AS a")
    engines.assert_same(table, expected=[(1, "x", None), (2, "y", 2.5)])


def test_insert_overwrite_full_static_partition_and_dynamic(spark, ns, engines):
    table = f"lake.{ns}.ow"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    # static, with a partition clause: only kind = 'a' is replaced
    spark.sql(f"INSERT OVERWRITE {table} PARTITION (kind = 'a') SELECT 10")
    engines.assert_same(table, expected=[(10, "a"), (2, "b"), (3, "c")])
    # dynamic: the partitions written are replaced, others stay
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        spark.sql(f"INSERT OVERWRITE {table} VALUES (20, 'b'), (40, 'd')")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    engines.assert_same(table, expected=[(10, "a"), (20, "b"), (3, "c"), (40, "d")])
    # static without a partition clause: the whole table
    spark.sql(f"INSERT OVERWRITE {table} VALUES (99, 'z')")
    engines.assert_same(table, expected=[(99, "z")])


def test_ctas_and_replace(spark, ns, events, engines, iceberg_catalog):
    table = f"lake.{ns}.copy"
    spark.sql(f"CREATE TABLE {table} USING iceberg PARTITIONED BY (kind) TBLPROPERTIES ('k'='v') AS SELECT id, kind FROM {events} WHERE id < 50")
    rows = engines.assert_same(table)
    assert len(rows) == 50
    t = iceberg_catalog.load_table(f"{ns}.copy")
    assert t.properties["k"] == "v" and str(t.spec().fields[0].transform) == "identity"
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} AS SELECT 1 AS id, 'no' AS kind")
    assert spark.table(table).count() == 50
    spark.sql(f"CREATE OR REPLACE TABLE {table} AS SELECT 7 AS x")
    engines.assert_same(table, expected=[(7,)])


def test_time_travel(spark, ns, engines, iceberg_catalog):
    table = f"lake.{ns}.tt"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.sql(f"INSERT INTO {table} VALUES (1)")
    first = snapshot_id(iceberg_catalog, table)
    t1 = iceberg_catalog.load_table(f"{ns}.tt").current_snapshot().timestamp_ms
    spark.sql(f"INSERT INTO {table} VALUES (2)")
    assert [r.id for r in spark.sql(f"SELECT * FROM {table} VERSION AS OF {first}").collect()] == [1]
    at = dt.datetime.fromtimestamp(t1 / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert [r.id for r in spark.sql(f"SELECT * FROM {table} TIMESTAMP AS OF '{at}'").collect()] == [1]
    assert sorted(r.id for r in spark.table(table).collect()) == [1, 2]
    with pytest.raises(AnalysisException, match="no snapshot"):
        spark.sql(f"SELECT * FROM {table} VERSION AS OF 12345").collect()
    with pytest.raises(AnalysisException, match="no snapshot"):
        spark.sql(f"SELECT * FROM {table} TIMESTAMP AS OF '2000-01-01 00:00:00'").collect()


def test_schema_evolution_reads_by_field_id(spark, ns, engines):
    table = f"lake.{ns}.evo"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, score INT)")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a', 10)")
    spark.sql(f"ALTER TABLE {table} RENAME COLUMN name TO label")
    spark.sql(f"ALTER TABLE {table} ADD COLUMN extra DOUBLE")
    spark.sql(f"ALTER TABLE {table} DROP COLUMN score")
    spark.sql(f"ALTER TABLE {table} ADD COLUMN score INT")  # a new column: old rows must NOT see the old values
    spark.sql(f"ALTER TABLE {table} ALTER COLUMN id COMMENT 'the key'")
    spark.sql(f"INSERT INTO {table} VALUES (2, 'b', 0.5, 20)")
    assert spark.table(table).columns == ["id", "label", "extra", "score"]
    engines.assert_same(table, expected=[(1, "a", None, None), (2, "b", 0.5, 20)])
    spark.sql(f"ALTER TABLE {table} ALTER COLUMN score TYPE BIGINT")
    engines.assert_same(table, expected=[(1, "a", None, None), (2, "b", 0.5, 20)])
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('a'='1')")
    spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES ('a')")
    with pytest.raises(AnalysisException):
        spark.sql(f"ALTER TABLE {table} ALTER COLUMN label TYPE INT")  # not a promotion


def test_partition_evolution(spark, ns, engines, iceberg_catalog):
    table = f"lake.{ns}.pe"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP) PARTITIONED BY (days(ts))")
    spark.sql(f"INSERT INTO {table} VALUES (1, TIMESTAMP'2026-01-01 10:00:00')")
    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD bucket(4, id) AS id_b")
    spark.sql(f"ALTER TABLE {table} REPLACE PARTITION FIELD days(ts) WITH hours(ts)")
    spark.sql(f"INSERT INTO {table} VALUES (2, TIMESTAMP'2026-01-01 11:00:00')")
    t = iceberg_catalog.load_table(f"{ns}.pe")
    assert [(f.name, str(f.transform)) for f in t.spec().fields] == [("id_b", "bucket[4]"), ("ts_hour", "hour")]
    specs = sorted({task.file.spec_id for task in t.scan().plan_files()})
    assert len(specs) == 2
    engines.assert_same(table, expected=[(1, dt.datetime(2026, 1, 1, 10)), (2, dt.datetime(2026, 1, 1, 11))])
    spark.sql(f"ALTER TABLE {table} DROP PARTITION FIELD id_b")
    assert [f.name for f in iceberg_catalog.load_table(f"{ns}.pe").spec().fields] == ["ts_hour"]
    with pytest.raises(AnalysisException, match="no partition field"):
        spark.sql(f"ALTER TABLE {table} DROP PARTITION FIELD nothing_here")


# ---- what other writers wrote, lakerules reads -------------------------------------------------


def test_reads_what_pyiceberg_writes(spark, ns, iceberg_catalog, engines):
    from pyiceberg.expressions import EqualTo

    spark.sql(f"CREATE TABLE lake.{ns}.py (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    t = iceberg_catalog.load_table(f"{ns}.py")
    t.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "kind": ["a", "b", "a"]}))
    t = iceberg_catalog.load_table(f"{ns}.py")
    with t.update_schema() as u:
        u.rename_column("kind", "category")
        u.add_column("note", __import__("pyiceberg.types", fromlist=["StringType"]).StringType())
    t = iceberg_catalog.load_table(f"{ns}.py")
    t.append(pa.table({"id": pa.array([4], pa.int64()), "category": ["b"], "note": ["n"]}))
    t = iceberg_catalog.load_table(f"{ns}.py")
    t.delete(EqualTo("id", 2))  # pyiceberg rewrites the file (copy-on-write)
    engines.assert_same(f"lake.{ns}.py", expected=[(1, "a", None), (3, "a", None), (4, "b", "n")])
    spark.sql(f"INSERT INTO lake.{ns}.py VALUES (5, 'c', 'x')")
    engines.assert_same(f"lake.{ns}.py", expected=[(1, "a", None), (3, "a", None), (4, "b", "n"), (5, "c", "x")])


# ---- bad input -----------------------------------------------------------------------------------


def test_bad_input_is_a_clear_error_and_commits_nothing(spark, events, ns, iceberg_catalog):
    before = snapshot_id(iceberg_catalog, events)
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND|cannot be found"):
        spark.sql(f"SELECT * FROM lake.{ns}.nope")
    with pytest.raises(AnalysisException, match="SCHEMA_NOT_FOUND|NoSuchNamespace|cannot be found"):
        spark.sql("CREATE TABLE lake.no_such_ns.t (id BIGINT)")
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN|cannot be resolved"):
        spark.sql(f"SELECT nope FROM {events}")
    with pytest.raises(AnalysisException, match="INCOMPATIBLE_DATA|Cannot safely cast|CAST"):
        spark.sql(f"INSERT INTO {events} VALUES ('not a number', TIMESTAMP'2026-01-01 00:00:00', 'x')")
    with pytest.raises(AnalysisException, match="unsupported partition transform"):
        spark.sql(f"CREATE TABLE lake.{ns}.bad (id BIGINT) PARTITIONED BY (fancy(id))")
    with pytest.raises(AnalysisException, match="lake tables are Iceberg tables"):
        spark.sql(f"CREATE TABLE lake.{ns}.pq (id BIGINT) USING parquet")
    with pytest.raises(AnalysisException, match="not defined for type"):
        spark.sql(f"CREATE TABLE lake.{ns}.bad2 (s STRING) PARTITIONED BY (days(s))")
    assert not iceberg_catalog.table_exists(f"{ns}.bad") and not iceberg_catalog.table_exists(f"{ns}.pq")
    assert snapshot_id(iceberg_catalog, events) == before


def test_failed_write_leaves_table_and_files_as_they_were(spark, events, iceberg_catalog, warehouse):
    before = snapshot_id(iceberg_catalog, events)
    location = iceberg_catalog.load_table(events.split(".", 1)[1]).location().replace("file://", "")
    files_before = {p for p in __import__("pathlib").Path(location).rglob("*.parquet")}
    with pytest.raises(Exception, match="boom"):
        spark.sql(f"INSERT INTO {events} SELECT id, NULL, CASE WHEN id = 7 THEN raise_error('boom') ELSE 'x' END FROM range(20)")
    assert snapshot_id(iceberg_catalog, events) == before
    files_after = {p for p in __import__("pathlib").Path(location).rglob("*.parquet")}
    assert files_after == files_before
    assert spark.table(events).count() == 300


def test_unattached_registry_is_a_clear_error(spark, events):
    lakerules.detach(spark)
    try:
        with pytest.raises(AnalysisException, match="lakerules.attach"):
            spark.sql(f"SELECT * FROM {events}")
        assert spark.sql("SELECT 1 AS x").collect()[0].x == 1  # non-lake statements are unaffected
    finally:
        lakerules.attach(spark)
    assert spark.table(events).count() == 300


# ---- the registry is open to users -------------------------------------------------------------


def test_user_rule_sees_planned_scans(spark, events):
    seen = []

    @lakerules.register_rule
    def record_scans(plan: Node, ctx) -> Node:
        match plan:
            case LakeScan():
                seen.append((str(plan.table), len(plan.tasks)))
        return plan

    try:
        spark.sql(f"SELECT count(*) FROM {events}").collect()
    finally:
        lakerules.unregister_rule(record_scans)
    assert seen and seen[0][0] == events and seen[0][1] > 0


def test_user_rule_can_refuse_a_query(spark, events):
    def no_unbounded_scans(plan: Node, ctx) -> Node:
        if isinstance(plan, LakeScan) and len(plan.tasks) > 1:
            raise lakerules.LakeError(f"refusing to scan {len(plan.tasks)} files of {plan.table}")
        return plan

    lakerules.register_rule(no_unbounded_scans)
    try:
        with pytest.raises(AnalysisException, match="refusing to scan"):
            spark.sql(f"SELECT * FROM {events}").collect()  # scans are planned when the query is
    finally:
        lakerules.unregister_rule(no_unbounded_scans)


# ---- the command line ----------------------------------------------------------------------------


def test_cli_prints_jar_and_conf():
    jar = subprocess.run([sys.executable, "-m", "lakerules", "jar"], capture_output=True, text=True, check=True).stdout.strip()
    assert jar.endswith("lakerules-shim.jar") and __import__("os").path.isfile(jar)
    conf = subprocess.run([sys.executable, "-m", "lakerules", "conf", "--warehouse", "/tmp/w"], capture_output=True, text=True, check=True).stdout
    assert "spark.sql.extensions=io.lakerules.LakeRulesExtensions" in conf
    assert "spark.sql.catalog.lake=io.lakerules.LakeCatalog" in conf
    assert "spark.sql.catalog.lake.uri=sqlite:////tmp/w/catalog.db" in conf


def test_explain_of_a_write_runs_nothing(spark, ns, iceberg_catalog):
    table = f"lake.{ns}.ex"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING)")
    text = spark.sql(f"EXPLAIN INSERT INTO {table} VALUES (1, 'a')").collect()[0].plan
    assert "WriteToLake append " + table in text and "not run" in text
    assert snapshot_id(iceberg_catalog, table) is None
    text = spark.sql(f"EXPLAIN EXTENDED CREATE TABLE lake.{ns}.ex2 AS SELECT 1 AS x").collect()[0].plan
    assert "CreateTableAsSelect" in text
    assert not iceberg_catalog.table_exists(f"{ns}.ex2")
    # a query is explained by Spark as usual
    assert "Physical Plan" in spark.sql(f"EXPLAIN SELECT * FROM {table}").collect()[0].plan


def test_more_ddl(spark, ns, iceberg_catalog, tmp_path, engines):
    spark.sql(f"ALTER NAMESPACE lake.{ns} SET DBPROPERTIES ('team'='x')")
    assert iceberg_catalog.load_namespace_properties(ns)["team"] == "x"
    spark.sql(f"CREATE TABLE lake.{ns}.a (id BIGINT NOT NULL, v STRING) LOCATION '{tmp_path}/a_loc'")
    assert iceberg_catalog.load_table(f"{ns}.a").location().endswith("a_loc")
    spark.sql(f"ALTER TABLE lake.{ns}.a ALTER COLUMN id DROP NOT NULL")
    spark.sql(f"ALTER TABLE lake.{ns}.a ADD COLUMNS (first_col INT FIRST, after_id INT AFTER id)")
    assert spark.table(f"lake.{ns}.a").columns == ["first_col", "id", "after_id", "v"]
    spark.sql(f"INSERT INTO lake.{ns}.a VALUES (1, NULL, 2, 'x')")
    spark.sql(f"ALTER TABLE lake.{ns}.a RENAME TO lake.{ns}.b")
    assert not iceberg_catalog.table_exists(f"{ns}.a")
    engines.assert_same(f"lake.{ns}.b", expected=[(1, None, 2, "x")])
    spark.sql(f"DROP TABLE lake.{ns}.b PURGE")
    assert not iceberg_catalog.table_exists(f"{ns}.b")


def test_snapshot_properties_from_session_settings(spark, ns, iceberg_catalog):
    table = f"lake.{ns}.props"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.conf.set("spark.lakerules.snapshot-property.job", "nightly-7")
    try:
        spark.sql(f"INSERT INTO {table} VALUES (1), (2)")
        spark.sql(f"DELETE FROM {table} WHERE id = 1")
    finally:
        spark.conf.unset("spark.lakerules.snapshot-property.job")
    spark.sql(f"INSERT INTO {table} VALUES (3)")
    t = iceberg_catalog.load_table(f"{ns}.props")
    jobs = [s.summary.additional_properties.get("job") for s in t.snapshots()]
    assert jobs == ["nightly-7", "nightly-7", None]
    assert t.current_snapshot().summary["engine-name"] == "lakerules"


def test_commit_retries_running_out_is_a_conflict(spark, ns, iceberg_catalog, monkeypatch):
    """Another writer commits between this INSERT's write and its commit, and the table allows no
    retry: a clear conflict, nothing committed, the written files removed."""
    from lakerules.write import commit, files as write

    table = f"lake.{ns}.retry"
    spark.sql(f"CREATE TABLE {table} (id BIGINT) TBLPROPERTIES ('commit.retry.num-retries'='0')")
    real, calls = commit.append, []

    def concurrent_then_commit(t, *args, **kwargs):
        if not calls:
            calls.append(1)
            iceberg_catalog.load_table(f"{ns}.retry")  # the other writer's view, then its commit
            spark.sql(f"INSERT INTO {table} VALUES (1)")
        return real(t, *args, **kwargs)

    monkeypatch.setattr(write.commit, "append", concurrent_then_commit)
    with pytest.raises(AnalysisException, match="conflict on .*nothing was committed"):
        spark.sql(f"INSERT INTO {table} VALUES (2)")
    monkeypatch.setattr(write.commit, "append", real)
    assert [r.id for r in spark.table(table).collect()] == [1]
    from test_delete import orphans

    assert orphans(iceberg_catalog, f"{ns}.retry") == set()


def test_a_catalog_pyiceberg_cannot_load_is_named_with_its_settings(spark, tmp_path):
    """Only a warehouse set (no type, no uri): the error names the catalog, its settings (the
    password in a URI masked) and the embedded default's settings, not an internal error."""
    spark.conf.set("spark.sql.catalog.halfset", "io.lakerules.LakeCatalog")
    spark.conf.set("spark.sql.catalog.halfset.warehouse", str(tmp_path))
    spark.conf.set("spark.sql.catalog.halfset.s3.secret-access-key", "hunter2")
    try:
        with pytest.raises(Exception) as info:
            spark.sql("SHOW NAMESPACES IN halfset").collect()
        text = str(info.value)
        assert "cannot load catalog 'halfset'" in text and f"warehouse={tmp_path}" in text, text
        assert "python -m lakerules conf --warehouse" in text and "internal error" not in text, text
        assert "hunter2" not in text and "s3.secret-access-key=***" in text, text
    finally:
        for k in ("", ".warehouse", ".s3.secret-access-key"):
            spark.conf.unset(f"spark.sql.catalog.halfset{k}")


def test_overwrite_by_a_negated_condition_is_refused_and_keeps_null_rows(spark, ns):
    """SQL's c != 5 does not hold on NULL, Iceberg's does: proving files from the metadata would
    replace the NULL rows too. Refused, the table untouched."""
    from pyspark.sql import functions as F

    table = f"lake.{ns}.neg"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, c INT)")
    spark.sql(f"INSERT INTO {table} VALUES (1, NULL), (2, NULL)")
    spark.sql(f"INSERT INTO {table} VALUES (3, 7)")
    df = spark.createDataFrame([(9, 9)], "id bigint, c int")
    with pytest.raises(Exception, match="INSERT OVERWRITE with a negated condition"):
        df.writeTo(table).overwrite(F.expr("c != 5"))
    assert sorted(tuple(r) for r in spark.table(table).collect()) == [(1, None), (2, None), (3, 7)]
