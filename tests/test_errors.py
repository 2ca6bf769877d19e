"""Faults that are not the statement's: each is a clear error naming the table and the file or
setting at fault, with no Python traceback in the message, and the table exactly as it was (the
catalog's pointer, every file and its bytes) - issue 16 item 4.

- a table's metadata JSON missing, truncated, not JSON, or JSON that is no table metadata;
- a manifest list or a manifest missing or damaged;
- the catalog's SQLite database opened read-only (SQLite's own refusal, as for a file or folder
  this process cannot write), and a database error around a commit that did or did not land;
- a namespace named where a table belongs (OPTIMIZE lake.db), a table named without a namespace;
- dates and timestamps past year 9999 (Python's limit, not Spark's nor Iceberg's) in inserts,
  predicates, partition transforms, row-level writes and OPTIMIZE, ANSI mode off and on.

DROP TABLE of a table whose metadata is gone drops it from the catalog, as Iceberg's catalogs
do; DROP TABLE ... PURGE then deletes what it can know of and warns about the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3

import pyarrow as pa
import pytest

import faults_util as fu
import lakerules
from errors_util import refused
from settings_util import settings

FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"


# ---- helpers -------------------------------------------------------------------------------------


def forget_cached_metadata() -> None:
    """Drop what this process keeps parsed (metadata JSON, manifests, equality deletes), as a fresh
    process would: a file damaged after it was read stays readable from the caches."""
    from pyiceberg.manifest import clear_manifest_cache

    from lakerules.scan import manifests, read as scan
    from lakerules.iceberg import metadata_cache

    metadata_cache.clear()
    clear_manifest_cache()
    manifests.CACHE.clear()
    scan._delete_rows.clear()


def catalog_pointer(warehouse, ns: str, name: str) -> str | None:
    """The table's metadata location as the catalog's database has it (read directly: no parse)."""
    with contextlib.closing(sqlite3.connect(os.path.join(warehouse, "catalog.db"))) as con:
        row = con.execute("SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
                          (ns, name)).fetchone()
    return row[0] if row else None


def files_of(location: str) -> dict[str, str]:
    """Every file below the table's folder (hidden ones too) -> its digest."""
    root = fu.local(location)
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[p] = hashlib.sha256(f.read()).hexdigest()
    return out


def state(warehouse, ns: str, name: str, location: str) -> tuple:
    return catalog_pointer(warehouse, ns, name), files_of(location)


def statements(table: str, ns: str, name: str, spark) -> dict:
    """Every kind of statement on the table, by name."""
    ident = f"{ns}.{name}"
    return {
        "select": f"SELECT * FROM {table}",
        "describe": f"DESCRIBE TABLE {table}",
        "insert": f"INSERT INTO {table} VALUES (100, 'new', 1)",
        "delete": f"DELETE FROM {table} WHERE id % 4 = 1",
        "update": f"UPDATE {table} SET v = 'u' WHERE id = 2",
        "merge": f"""MERGE INTO {table} t USING (SELECT 3L AS id, 'm' AS v, 0 AS p) s ON t.id = s.id
                     WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""",
        "optimize": f"OPTIMIZE {table}",
        "delete_by_key": lambda: lakerules.delete_by_key(
            spark, table, spark.range(0, 3).selectExpr("id", "CAST(id % 3 AS INT) AS p"), on=["id"]),
        "add column": f"ALTER TABLE {table} ADD COLUMN w INT",
        "set property": f"ALTER TABLE {table} SET TBLPROPERTIES ('k' = 'v')",
        "orphans (dry run)": f"CALL lake.system.remove_orphan_files(table => '{ident}', dry_run => true)",
        "orphans": f"CALL lake.system.remove_orphan_files(table => '{ident}')",  # files older than 3 days
        "expire": f"CALL lake.system.expire_snapshots(table => '{ident}', older_than => {FUTURE}, retain_last => 1)",
        "rewrite manifests": f"CALL lake.system.rewrite_manifests(table => '{ident}')",
    }


def damage(path, how: str) -> bytes:
    """Damage the file at path; returns its bytes, to put back."""
    with open(path, "rb") as f:
        original = f.read()
    if how == "missing":
        os.remove(path)
    elif how == "truncated":
        with open(path, "wb") as f:
            f.write(original[: len(original) // 2])
    elif how == "garbage":
        with open(path, "wb") as f:
            f.write(b"Obj\x01" + b"\xff\x00garbage" * 40)
    elif how == "not metadata":
        with open(path, "wb") as f:
            f.write(b'{"format-version": 2, "note": "valid JSON, no table"}')
    else:
        raise ValueError(how)
    forget_cached_metadata()
    return original


def restore(path, original: bytes) -> None:
    with open(path, "wb") as f:
        f.write(original)
    forget_cached_metadata()


@pytest.fixture
def table(spark, ns, warehouse, iceberg_catalog):
    """lake.<ns>.f: 23 rows in 3 partitions, 3 snapshots (two appends, a position delete)."""
    name = "f"
    full = f"lake.{ns}.{name}"
    rows = fu.create(spark, full)
    t = iceberg_catalog.load_table((ns, name))
    yield full, name, rows, t
    forget_cached_metadata()


# ---- damaged metadata files ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["missing", "truncated", "garbage", "not metadata"])
def test_a_damaged_metadata_file_is_a_clear_error_and_drop_table_still_drops(
        spark, ns, warehouse, iceberg_catalog, engines, table, caplog, how):
    full, name, rows, t = table
    path = fu.local(t.metadata_location)
    original = damage(path, how)
    before = state(warehouse, ns, name, t.location())
    problem = "is missing" if how == "missing" else "cannot be read"
    every = statements(full, ns, name, spark)
    # every statement loads the table the same way: all of them once, a few for the other damages
    chosen = every if how == "missing" else {k: every[k] for k in ("select", "insert", "delete", "expire")}
    for what, statement in chosen.items():
        refused(spark, statement, f"table {full}", "metadata file", str(path), problem, "Nothing was changed")
        assert state(warehouse, ns, name, t.location()) == before, f"{what} changed the table"
    # the table was left as it was: with its file back, it reads its rows in every engine
    restore(path, original)
    engines.assert_same(full, "id, v, p", expected=rows)
    # DROP TABLE drops it all the same (its files stay); PURGE deletes nothing it cannot know of
    damage(path, how)
    purge = how != "missing"
    with caplog.at_level(logging.WARNING, logger="lakerules"):
        spark.sql(f"DROP TABLE {full}{' PURGE' if purge else ''}").collect()
    assert catalog_pointer(warehouse, ns, name) is None
    assert not iceberg_catalog.table_exists((ns, name))
    assert set(files_of(t.location())) == set(before[1])
    if purge:
        assert any("deleted none of its files" in r.getMessage() and str(path) in r.getMessage()
                   for r in caplog.records), caplog.text
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM {full}")


def test_drop_table_if_exists_and_drop_namespace_cascade_with_a_table_whose_metadata_is_gone(
        spark, ns, warehouse, iceberg_catalog, table):
    full, name, rows, t = table
    damage(fu.local(t.metadata_location), "missing")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {full} (id BIGINT)").collect()  # exists: nothing to do
    assert catalog_pointer(warehouse, ns, name) == t.metadata_location
    with pytest.raises(Exception, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark.sql(f"CREATE TABLE {full} (id BIGINT)")
    spark.sql(f"DROP NAMESPACE lake.{ns} CASCADE").collect()
    assert catalog_pointer(warehouse, ns, name) is None
    spark.sql(f"CREATE NAMESPACE lake.{ns}")  # for the fixture's clean-up
    spark.sql(f"DROP TABLE IF EXISTS {full}").collect()


@pytest.mark.parametrize("kind,how", [("manifest list", "missing"), ("manifest list", "garbage"),
                                      ("manifest", "missing"), ("manifest", "truncated")])
def test_a_damaged_manifest_list_or_manifest_is_a_clear_error(
        spark, ns, warehouse, iceberg_catalog, engines, table, caplog, kind, how):
    full, name, rows, t = table
    snapshot = t.current_snapshot()
    target = snapshot.manifest_list if kind == "manifest list" else snapshot.manifests(t.io)[0].manifest_path
    path = fu.local(target)
    for d, _, names in os.walk(fu.local(t.location())):  # every file old: each one an orphan candidate,
        for n in names:  # so remove_orphan_files would delete what it cannot see as named
            os.utime(os.path.join(d, n), (1_000_000_000, 1_000_000_000))
    original = damage(path, how)
    before = state(warehouse, ns, name, t.location())
    problem = "is missing" if how == "missing" else "cannot be read"
    every = statements(full, ns, name, spark)
    # an append reads no manifest (only the manifest list), so with a manifest gone it may land
    skip = {"insert", "describe", "add column", "set property"} | ({"delete_by_key"} if kind == "manifest" else set())
    for what, statement in every.items():
        if what in skip:
            continue
        refused(spark, statement, f"table {full}", kind, str(path), problem, "Nothing was changed")
        assert state(warehouse, ns, name, t.location()) == before, f"{what} changed the table"
    if kind == "manifest list":
        refused(spark, every["insert"], f"table {full}", kind, str(path), problem)
        assert state(warehouse, ns, name, t.location()) == before, "insert changed the table"
    restore(path, original)
    engines.assert_same(full, "id, v, p", expected=rows)
    # PURGE deletes what the readable metadata names and says what it could not
    damage(path, how)
    with caplog.at_level(logging.WARNING, logger="lakerules"):
        spark.sql(f"DROP TABLE {full} PURGE").collect()
    assert catalog_pointer(warehouse, ns, name) is None
    assert any("could not be read" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)
    left = set(files_of(t.location()))
    assert left and left < set(before[1])  # some deleted, those only the damaged file named kept


# ---- the catalog's database ----------------------------------------------------------------------


@contextlib.contextmanager
def catalog_swapped(catalog):
    """The session's lake catalog replaced by ``catalog`` (pyiceberg, wrapped as lakerules wraps
    its own) for the duration."""
    catalogs = lakerules._backend.catalogs
    own = catalogs.get("lake")
    catalogs._catalogs["lake"] = catalog
    try:
        yield
    finally:
        catalogs._catalogs["lake"] = own


def read_only_catalog(warehouse):
    """The session's catalog database opened read-only: SQLite refuses every write as it does for a
    file or folder this process may not write ('attempt to write a readonly database')."""
    from lakerules.iceberg import catalogs

    props = {**lakerules.embedded_catalog(warehouse), "uri": f"sqlite:///file:{warehouse}/catalog.db?mode=ro&uri=true"}
    return catalogs.build("lake", props)


def test_a_read_only_catalog_database_is_a_clear_error_and_leaves_nothing(
        spark, ns, warehouse, iceberg_catalog, engines, table):
    full, name, rows, t = table
    other = f"lake.{ns}.other"
    spark.sql(f"CREATE TABLE {other} (id BIGINT) PARTITIONED BY (bucket(2, id))")
    before = state(warehouse, ns, name, t.location())
    every = statements(full, ns, name, spark)
    every = {k: every[k] for k in ("insert", "delete", "merge", "add column", "expire")}  # (reads work)
    every |= {
        "create table": f"CREATE TABLE lake.{ns}.new (id BIGINT)",
        "create table as select": f"CREATE TABLE lake.{ns}.new2 AS SELECT 1L AS id",
        "rename": f"ALTER TABLE {full} RENAME TO lake.{ns}.renamed",
        "create namespace": f"CREATE NAMESPACE lake.{ns}_new",
        "alter namespace": f"ALTER NAMESPACE lake.{ns} SET DBPROPERTIES ('k' = 'v')",
        "drop table": f"DROP TABLE {other}",
        "drop table purge": f"DROP TABLE {full} PURGE",
    }
    tables = iceberg_catalog.list_tables(ns)
    with catalog_swapped(read_only_catalog(warehouse)):
        assert sorted(r.id for r in spark.sql(f"SELECT id FROM {full}").collect()) == sorted(r[0] for r in rows)
        for what, statement in every.items():
            message = refused(spark, statement, "catalog 'lake' could not", "catalog.db", "refused the change",
                              "attempt to write a readonly database")
            assert ("nothing was committed" in message) or ("Nothing was changed" in message), message
            assert state(warehouse, ns, name, t.location()) == before, f"{what} changed the table"
    assert iceberg_catalog.list_tables(ns) == tables
    assert not os.path.exists(os.path.join(warehouse, ns, "new", "metadata")) or \
        not os.listdir(os.path.join(warehouse, ns, "new", "metadata"))  # no metadata JSON left
    engines.assert_same(full, "id, v, p", expected=rows)
    spark.sql(f"CREATE TABLE lake.{ns}.new (id BIGINT)")  # the refused name was left free
    spark.sql(f"INSERT INTO {full} VALUES (100, 'new', 1)")
    assert len(engines.assert_same(full, "id, v, p")) == len(rows) + 1


@pytest.mark.parametrize("landed", [True, False])
def test_a_database_error_around_a_commit_is_read_back(spark, ns, warehouse, iceberg_catalog, engines, table, landed):
    """The database fails the commit's update (landed=False: before it; True: after it, as a lost
    answer would): the catalog is read back, so a commit that landed is a success and one that did
    not leaves nothing (its metadata JSON, manifests and data files are deleted)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy.exc import OperationalError

    from lakerules.iceberg import catalogs

    full, name, rows, t = table
    props = lakerules.embedded_catalog(warehouse)
    calls = []

    class FailingCommit(SqlCatalog):
        def commit_table(self, tbl, requirements, updates):
            calls.append(1)
            if landed:
                super().commit_table(tbl, requirements, updates)
            else:  # a metadata file written (through the catalog, as its commit writes one), then the failure
                self._write_metadata(tbl.metadata, tbl.io, f"{tbl.location()}/metadata/99999-written-before-failing.metadata.json")
            raise OperationalError("UPDATE iceberg_tables ...", {}, sqlite3.OperationalError("disk I/O error"))

    inner = FailingCommit("lake", **props)
    before = state(warehouse, ns, name, t.location())
    with catalog_swapped(catalogs.guarded(inner, "lake", props)):
        statement = f"INSERT INTO {full} VALUES (100, 'new', 1)"
        if landed:
            spark.sql(statement).collect()
        else:
            message = refused(spark, statement, "could not commit to table", "disk I/O error", "did not land")
            assert "nothing was committed" in message
    assert calls == [1]  # no retry: a database error is not a conflict
    if landed:
        assert catalog_pointer(warehouse, ns, name) != before[0]
        engines.assert_same(full, "id, v, p", expected=rows + [(100, "new", 1)])
    else:
        assert state(warehouse, ns, name, t.location()) == before
        engines.assert_same(full, "id, v, p", expected=rows)


# ---- names that are not tables -------------------------------------------------------------------


def test_a_namespace_where_a_table_belongs(spark, ns, iceberg_catalog):
    for statement in [f"OPTIMIZE lake.{ns}", f"SELECT * FROM lake.{ns}", f"DELETE FROM lake.{ns} WHERE true"]:
        refused(spark, statement, f"lake.{ns} is a namespace, not a table")
    refused(spark, f"CALL lake.system.rewrite_manifests(table => '{ns}')", "name the table as namespace.table")
    spark.sql(f"DROP TABLE IF EXISTS lake.{ns}").collect()  # no such table: nothing to do
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"OPTIMIZE lake.no_such_{ns}")
    spark.sql(f"CREATE TABLE lake.{ns}.t (id BIGINT)")
    for statement in ["CREATE TABLE lake.nons (id BIGINT)", "CREATE TABLE lake.nons AS SELECT 1 AS id"]:
        refused(spark, statement, "has no namespace")
    for statement in ["ALTER NAMESPACE lake SET DBPROPERTIES ('k' = 'v')"]:
        refused(spark, statement, "needs a namespace of catalog 'lake'")
    # RENAME TO lake.x: as in Iceberg's Spark catalog, lake is the new namespace here
    with pytest.raises(Exception, match="SCHEMA_NOT_FOUND.*`lake`"):
        spark.sql(f"ALTER TABLE lake.{ns}.t RENAME TO lake.nons")
    assert iceberg_catalog.list_tables(ns) == [(ns, "t")]


# ---- dates and timestamps past year 9999 -----------------------------------------------------------

MAX, MIN = 2**63 - 1, -(2**63)
# (id, ts and n as microseconds, d as days), beyond Python's years 1-9999 and at Spark's limits
FAR = [(1, 1_767_225_600_000_000, 20_454),  # 2026-01-01
       (2, 253_402_300_800_000_000, 2_932_897),  # +10000-01-01
       (3, 2**62, 2**30),  # years 148,108 and 2,941,790
       (4, MAX, 2**31 - 1),  # +294247-01-10 and +5881580-07-11
       (5, MIN, -(2**31)),  # -290308-12-21 and -5877641-06-23
       (6, -62_135_596_800_000_001, -719_163)]  # a microsecond before year 1, and 0000-12-31


def _far_rows(spark, table) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT id, unix_micros(ts), unix_micros(CAST(n AS TIMESTAMP)), unix_date(d) FROM {table}").collect())


def _pyiceberg_far_rows(iceberg_catalog, ident) -> list[tuple]:
    arrow = iceberg_catalog.load_table(ident).scan().to_arrow()
    cols = [arrow.column(c).cast(pa.int64()) if c != "d" else arrow.column(c).cast(pa.int32()).cast(pa.int64())
            for c in ("ts", "n", "d")]
    return sorted(zip(arrow.column("id").to_pylist(), *(c.to_pylist() for c in cols)))


@pytest.mark.parametrize("partitioning", ["PARTITIONED BY (days(ts), months(n), years(d), d)"])
def test_dates_and_timestamps_past_year_9999(spark, ns, iceberg_catalog, partitioning):
    """Inserted, partitioned, filtered, deleted, updated and compacted with ANSI mode off (where
    they used to fail with Python's OverflowError); the partition values are the ones Spark
    computes, so pruning keeps every row."""
    table, ident = f"lake.{ns}.far", (ns, "far")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP, n TIMESTAMP_NTZ, d DATE) {partitioning}")
    values = ", ".join(f"({i}, timestamp_micros({u}), CAST(timestamp_micros({u}) AS TIMESTAMP_NTZ), date_from_unix_date({d}))"
                       for i, u, d in FAR)
    with _ansi(spark, "false"):
        spark.sql(f"INSERT INTO {table} VALUES {values}")
        rows = {r[0]: (r[0], r[1], r[1], r[2]) for r in FAR}
        assert _far_rows(spark, table) == sorted(rows.values())
        assert _pyiceberg_far_rows(iceberg_catalog, ident) == sorted(rows.values())
        # the partition values of each file are Spark's own for its row
        t = iceberg_catalog.load_table(ident)
        spec = [(f.name, str(f.transform)) for f in t.spec().fields]
        if spec:
            expected = {r[0]: r for r in spark.sql(
                f"SELECT id, unix_date(to_date(ts)), (year(n) - 1970) * 12 + month(n) - 1, year(d) - 1970,"
                f" unix_date(d) FROM {table}").collect()}
            for task in t.scan().plan_files():
                (i,) = {r[0] for r in _rows_of(t, task.file.file_path)}
                want = {"ts_day": expected[i][1], "n_month": expected[i][2], "d_year": expected[i][3],
                        "d": expected[i][4]}
                assert tuple(task.file.partition) == tuple(want[name] for name, _ in spec), (i, spec)
        for condition, ids in [(f"ts > timestamp_micros({253_402_300_800_000_000})", {3, 4}),
                               (f"ts >= timestamp_micros({2**62})", {3, 4}),
                               (f"ts = timestamp_micros({MAX})", {4}), (f"ts < timestamp_micros({-62_135_596_800_000_000})", {5, 6}),
                               (f"n >= CAST(timestamp_micros({253_402_300_800_000_000}) AS TIMESTAMP_NTZ)", {2, 3, 4}),
                               ("d > DATE'+10000-01-01'", {3, 4}), ("d < DATE'0001-01-01'", {5, 6}),
                               ("year(ts) > 100000", {3, 4})]:
            assert {r.id for r in spark.sql(f"SELECT id FROM {table} WHERE {condition}").collect()} == ids, condition
        # (not WHERE ts = timestamp_micros(MIN): Spark's own filter push-down to Parquet overflows
        # on that literal, for any file source table)
        (r,) = spark.sql(f"DELETE FROM {table} WHERE ts < timestamp_micros({-2**62})").collect()
        assert r.num_affected_rows == 1
        del rows[5]
        (r,) = spark.sql(f"UPDATE {table} SET ts = timestamp_micros({2**62 + 1}), d = date_from_unix_date({2**30 + 1}) "
                         "WHERE id = 1").collect()
        assert r.num_affected_rows == 1
        rows[1] = (1, 2**62 + 1, rows[1][2], 2**30 + 1)
        spark.sql(f"OPTIMIZE {table} ZORDER BY (ts, n)").collect()
        assert _far_rows(spark, table) == sorted(rows.values())
        assert _pyiceberg_far_rows(iceberg_catalog, ident) == sorted(rows.values())
        assert {r.id for r in spark.sql(f"SELECT id FROM {table} WHERE ts > timestamp_micros({2**62})").collect()} == {1, 4}


def _rows_of(table, path) -> list[tuple]:
    import pyarrow.parquet as pq

    with table.io.new_input(path).open() as f:
        return [tuple(r.values()) for r in pq.read_table(f, columns=["id"]).to_pylist()]


def _ansi(spark, value: str):
    return settings(spark, {"spark.sql.ansi.enabled": value})


@pytest.mark.parametrize("ansi", ["false", "true"])
def test_an_hour_partition_value_out_of_range_is_a_clear_error(spark, ns, warehouse, iceberg_catalog, ansi):
    """hours(ts) of a timestamp more than 2^31 hours from 1970 (past about year 246,000) does not
    fit Iceberg's int partition value: the write fails, naming the field and the value, whatever
    ANSI mode says (a cast without it used to wrap the value into another partition's)."""
    table, ident = f"lake.{ns}.hours", (ns, "hours")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP) PARTITIONED BY (hours(ts))")
    spark.sql(f"INSERT INTO {table} VALUES (1, timestamp_micros({2**62}))")  # year 148,108: fits
    t = iceberg_catalog.load_table(ident)
    before = state(warehouse, ns, "hours", t.location())
    with _ansi(spark, ansi):
        for statement in [f"INSERT INTO {table} VALUES (2, timestamp_micros({MAX}))",
                          f"INSERT INTO {table} VALUES (3, timestamp_micros({MIN}))",
                          f"UPDATE {table} SET ts = timestamp_micros({MAX}) WHERE id = 1"]:
            refused(spark, statement, "lakerules: partition field ts_hour (hour of column ts) cannot hold the value",
                    "+294247-01-10" if "MAX" in statement or str(MAX) in statement else "-290308-12-21",
                    "Nothing was committed")
            assert state(warehouse, ns, "hours", t.location()) == before
    assert [tuple(r) for r in spark.sql(f"SELECT id, unix_micros(ts) FROM {table}").collect()] == [(1, 2**62)]


# ---- names the catalog or pyiceberg's file IO would not keep as written ------------------------------


@pytest.mark.parametrize("bad,problem", [
    ("a.b", "contains '.', which a SQL catalog uses to separate nested namespaces"),
    (" x", "starts or ends with whitespace, which a SQL catalog strips"),
    ("x\u2003", "starts or ends with whitespace"),
    ("  ", "is only whitespace"),
])
def test_namespace_names_a_sql_catalog_would_change_are_refused(spark, ns, iceberg_catalog, bad, problem):
    """pyiceberg's SQL catalog stores lake.`a.b` as the nested lake.a.b and lake.` x` as lake.x:
    the same namespace under another name for every reader. Found by tests/test_hostile_alphabet.py."""
    before = iceberg_catalog.list_namespaces()
    refused(spark, f"CREATE NAMESPACE lake.`{bad}`", f"namespace name {bad!r}", problem)
    refused(spark, f"CREATE TABLE lake.`{bad}`.t (id BIGINT)", problem)
    spark.sql(f"CREATE TABLE lake.{ns}.t (id BIGINT)")
    refused(spark, f"ALTER TABLE lake.{ns}.t RENAME TO lake.`{bad}`.t", problem)
    assert iceberg_catalog.list_namespaces() == before
    assert iceberg_catalog.list_tables(ns) == [(ns, "t")]


@pytest.mark.parametrize("bad", ["a\tb", "a\nb", "a\rb"])
def test_names_and_locations_with_characters_pyiceberg_drops_are_refused(spark, ns, warehouse, iceberg_catalog, bad):
    """Python's URL parsing, which pyiceberg's file IO runs every path through, drops tabs and line
    breaks: a table so named was created, then its first INSERT failed reading its own files.
    Found by tests/test_hostile_alphabet.py."""
    quoted = f"`{bad}`"
    refused(spark, f"CREATE TABLE lake.{ns}.{quoted} (id BIGINT)", "a tab, line feed or carriage return")
    refused(spark, f"CREATE NAMESPACE lake.{quoted}", "a tab, line feed or carriage return")
    location = f"{warehouse}/{ns}-{bad}/t".replace("\\", "\\\\")
    refused(spark, f"CREATE TABLE lake.{ns}.t (id BIGINT) LOCATION '{location}'", "a tab, line feed or carriage return")
    assert iceberg_catalog.list_tables(ns) == []
