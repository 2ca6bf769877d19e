"""Replacing a table is one commit on it (issue #30 item 1, lakerules.iceberg.replace): CREATE OR REPLACE
TABLE [AS SELECT], REPLACE TABLE, writeTo(...).createOrReplace()/replace(), saveAsTable in
overwrite mode. Every path is failed during its query, during its write and at its commit: the
table and its history stay exactly as they were and no file of the attempt remains. When it
succeeds, the old snapshots stay for time travel and rollback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

import faults_util as fu
from errors_util import refused

PATHS = ["sql", "sql_replace", "write_to_create_or_replace", "write_to_replace", "save_as_table",
         "save_as_table_iceberg"]


def _files(table) -> set[str]:
    root = fu.local(table.location())
    return {str(p) for p in Path(root).rglob("*") if p.is_file()}


def _state(iceberg_catalog, ident: str):
    t = iceberg_catalog.load_table(ident)
    rows = sorted(t.scan().to_arrow().column("id").to_pylist()) if t.current_snapshot() else []
    return t.metadata_location, [s.snapshot_id for s in t.snapshots()], t.schema(), t.spec(), rows, _files(t)


def _make(spark, name: str, partitioned: bool = True) -> None:
    by = "PARTITIONED BY (bucket(2, id)) " if partitioned else ""
    spark.sql(f"CREATE TABLE {name} (id BIGINT, s STRING) {by}"
              f"TBLPROPERTIES ('keep'='me')")
    spark.sql(f"INSERT INTO {name} SELECT id, CAST(id AS STRING) FROM range(10)")


def _replace(spark, path: str, name: str, query: str) -> None:
    """Replace table ``name`` with the rows of ``query`` (a SELECT with an ``id`` column)."""
    if path == "sql":
        spark.sql(f"CREATE OR REPLACE TABLE {name} AS {query}")
    elif path == "sql_replace":
        spark.sql(f"REPLACE TABLE {name} USING iceberg AS {query}")
    elif path == "write_to_create_or_replace":
        spark.sql(query).writeTo(name).createOrReplace()
    elif path == "write_to_replace":
        spark.sql(query).writeTo(name).replace()
    elif path == "save_as_table":  # no format(): the session's default source is named
        spark.sql(query).write.mode("overwrite").saveAsTable(name)
    elif path == "save_as_table_iceberg":
        spark.sql(query).write.format("iceberg").mode("overwrite").saveAsTable(name)
    else:
        raise ValueError(path)


@pytest.mark.parametrize("path", PATHS)
def test_a_failed_replace_leaves_the_table_as_it_was(spark, ns, iceberg_catalog, monkeypatch, path):
    from lakerules.write import commit, files as write

    name, ident = f"lake.{ns}.r", f"{ns}.r"
    _make(spark, name)
    before = _state(iceberg_catalog, ident)
    # during the query (the write job fails on its 8th row)
    with pytest.raises(Exception, match="DIVIDE_BY_ZERO"):
        _replace(spark, path, name, "SELECT id DIV (id - 7) AS id FROM range(20)")
    assert _state(iceberg_catalog, ident) == before
    # after the files were written, before the commit: reading what was written fails
    real = write._data_files

    def broken(*args, **kwargs):
        raise OSError("footer unreadable")

    monkeypatch.setattr(write, "_data_files", broken)
    with pytest.raises(Exception, match="footer unreadable"):
        _replace(spark, path, name, "SELECT id * 2 AS id FROM range(5)")
    monkeypatch.setattr(write, "_data_files", real)
    assert _state(iceberg_catalog, ident) == before
    # at the commit
    def fail(table):
        raise RuntimeError("commit refused by the test")

    monkeypatch.setattr(commit, "before_commit", fail)
    with pytest.raises(Exception, match="commit refused by the test"):
        _replace(spark, path, name, "SELECT id * 3 AS id FROM range(5)")
    monkeypatch.setattr(commit, "before_commit", None)
    assert _state(iceberg_catalog, ident) == before
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {name}").collect()) == list(range(10))


@pytest.mark.parametrize("path", PATHS)
def test_a_replace_is_one_commit_that_keeps_history(spark, ns, iceberg_catalog, engines, path):
    name, ident = f"lake.{ns}.r", f"{ns}.r"
    _make(spark, name)
    old = iceberg_catalog.load_table(ident)
    old_snapshot, old_schema = old.current_snapshot().snapshot_id, old.schema()
    _replace(spark, path, name, "SELECT id + 100 AS id, CAST(id AS INT) AS n FROM range(3)")
    t = iceberg_catalog.load_table(ident)
    assert t.metadata.table_uuid == old.metadata.table_uuid
    assert [s.snapshot_id for s in t.snapshots()][:-1] == [s.snapshot_id for s in old.snapshots()]
    head = t.current_snapshot()
    assert head.parent_snapshot_id is None and head.summary["total-records"] == "3"
    # the column of the same name keeps its id; the new one gets a new id; no partitioning now
    assert t.schema().find_field("id").field_id == old_schema.find_field("id").field_id
    assert t.schema().find_field("n").field_id > old.metadata.last_column_id
    assert t.spec().is_unpartitioned() and t.properties["keep"] == "me"
    engines.assert_same(name, "id, n", [(100, 0), (101, 1), (102, 2)])
    # the old rows are there for time travel, and a rollback brings them back
    rows = spark.sql(f"SELECT id FROM {name} VERSION AS OF {old_snapshot}").collect()
    assert sorted(r.id for r in rows) == list(range(10))
    spark.sql(f"CALL lake.system.set_current_snapshot(table => '{ident}', snapshot_id => {old_snapshot})").collect()
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {name}").collect()) == list(range(10))


def test_replace_without_select_is_one_commit(spark, ns, iceberg_catalog, engines):
    name, ident = f"lake.{ns}.r", f"{ns}.r"
    _make(spark, name)
    before = _state(iceberg_catalog, ident)
    old = iceberg_catalog.load_table(ident)
    # a statement that fails (an unknown transform) replaces nothing: before, it dropped the table
    refused(spark, f"CREATE OR REPLACE TABLE {name} (a STRING, id BIGINT) PARTITIONED BY (fancy(a))",
            "unsupported partition transform")
    refused(spark, f"REPLACE TABLE {name} (a STRING) USING parquet", "USING parquet is not supported")
    assert _state(iceberg_catalog, ident) == before
    # failed at its commit
    from lakerules.write import commit

    def fail(table):
        raise RuntimeError("commit refused by the test")

    commit.before_commit = fail
    try:
        with pytest.raises(Exception, match="commit refused by the test"):
            spark.sql(f"CREATE OR REPLACE TABLE {name} (a STRING, id BIGINT) PARTITIONED BY (a)")
    finally:
        commit.before_commit = None
    assert _state(iceberg_catalog, ident) == before
    spark.sql(f"CREATE OR REPLACE TABLE {name} (a STRING, id BIGINT) PARTITIONED BY (a)")
    t = iceberg_catalog.load_table(ident)
    assert t.current_snapshot() is None and t.metadata.table_uuid == old.metadata.table_uuid
    assert [s.snapshot_id for s in t.snapshots()] == before[1]
    assert spark.sql(f"SELECT * FROM {name}").collect() == []
    spark.sql(f"INSERT INTO {name} VALUES ('x', 1)")
    engines.assert_same(name, "a, id", [("x", 1)])
    # REPLACE TABLE of a missing table is refused; CREATE OR REPLACE of one creates it
    with pytest.raises(AnalysisException):
        spark.sql(f"REPLACE TABLE lake.{ns}.missing (a INT)")
    assert not iceberg_catalog.table_exists(f"{ns}.missing")
    spark.sql(f"CREATE OR REPLACE TABLE lake.{ns}.fresh (a INT)")
    assert iceberg_catalog.table_exists(f"{ns}.fresh")


def test_a_commit_meanwhile_makes_the_replace_a_conflict(spark, ns, iceberg_catalog, monkeypatch):
    import pyarrow as pa

    from lakerules.write import commit

    name, ident = f"lake.{ns}.r", f"{ns}.r"
    _make(spark, name, partitioned=False)  # pyiceberg appends to it meanwhile
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({fu.TABLE_PROPERTIES})")

    def meanwhile(table):
        monkeypatch.setattr(commit, "before_commit", None)
        other = iceberg_catalog.load_table(ident)
        other.append(pa.table({"id": pa.array([99], pa.int64()), "s": ["other"]}, schema=other.schema().as_arrow()))

    monkeypatch.setattr(commit, "before_commit", meanwhile)
    with pytest.raises(Exception, match="conflict"):
        spark.sql(f"CREATE OR REPLACE TABLE {name} AS SELECT 5L AS id")
    t = iceberg_catalog.load_table(ident)
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [*range(10), 99]
    # the replace's own files are gone: every Parquet file there is one the table reads
    live = {str(fu.local(task.file.file_path)) for task in t.scan().plan_files()}
    assert {f for f in _files(t) if f.endswith(".parquet")} == live
