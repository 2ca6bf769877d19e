"""A folder belongs to one table, and no table's cleanup deletes another's files (issue #30 items
2-4, lakerules.iceberg.owners): the cases that lost files, each checked with every file on disk listed
before and after."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import faults_util as fu
from errors_util import refused
from test_path_safety import age

OLD_ENOUGH = "TIMESTAMP '2999-01-01 00:00:00'"  # with minAge off, every file is old enough


@pytest.fixture
def no_min_age(spark):
    spark.conf.set("spark.lakerules.removeOrphanFiles.minAge", "0")
    yield
    spark.conf.unset("spark.lakerules.removeOrphanFiles.minAge")


def _table(spark, name: str, rows: int = 5, extra: str = "") -> None:
    spark.sql(f"CREATE TABLE {name} (id BIGINT) {extra}")
    spark.sql(f"INSERT INTO {name} SELECT id FROM range({rows})")


def _files(location: str) -> set[Path]:
    return {p for p in fu.local(location).rglob("*") if p.is_file()}


def _count(spark, name: str) -> int:
    return len(spark.sql(f"SELECT id FROM {name}").collect())  # reads every data file


def _clean(spark, ident: str) -> None:
    spark.sql(f"CALL lake.system.remove_orphan_files(table => '{ident}', older_than => {OLD_ENOUGH})").collect()


def test_a_table_inside_another_tables_folder_is_refused(spark, ns, iceberg_catalog, no_min_age):
    f = f"lake.{ns}.f"
    _table(spark, f)
    loc = iceberg_catalog.load_table(f"{ns}.f").location()
    before = _files(loc)
    for inner in (f"{loc}/data", f"{loc}/data/x", loc, f"{loc}/../f/metadata"):
        refused(spark, f"CREATE TABLE lake.{ns}.c2 (id BIGINT) LOCATION '{inner}'",
                f"the location of table lake.{ns}.f", "Choose another location")
    # and the other way round: a table whose folder holds f's
    refused(spark, f"CREATE TABLE lake.{ns}.c3 (id BIGINT) LOCATION '{loc}/..'", f"contains the location of table lake.{ns}.f")
    assert not iceberg_catalog.table_exists(f"{ns}.c2") and not iceberg_catalog.table_exists(f"{ns}.c3")
    # a namespace located in f's folder: its tables would be too
    refused(spark, f"CREATE NAMESPACE lake.{ns}_evil LOCATION '{loc}'", f"the folder of table lake.{ns}.f")
    refused(spark, f"ALTER NAMESPACE lake.{ns} SET LOCATION '{loc}/data'", f"the folder of table lake.{ns}.f")
    spark.sql(f"CREATE NAMESPACE lake.{ns}_ok LOCATION '{loc}/..'")  # holding tables is what namespaces do
    try:
        spark.sql(f"CREATE TABLE lake.{ns}_ok.f (id BIGINT)")  # its default folder is f's: a fresh one instead
        other = iceberg_catalog.load_table(f"{ns}_ok.f").location()
        assert fu.local(other) != fu.local(loc) and fu.local(other).parent == fu.local(loc).parent
    finally:
        spark.sql(f"DROP NAMESPACE lake.{ns}_ok CASCADE")
    assert _files(loc) == before and _count(spark, f) == 5


def test_a_table_made_inside_another_elsewhere_is_refused_at_cleanup(spark, ns, iceberg_catalog, no_min_age):
    """A table another tool made inside f's folder (pyiceberg checks nothing): cleanup of either
    refuses, both directions, before deleting anything."""
    import pyiceberg.schema
    import pyiceberg.types as T

    f = f"lake.{ns}.f"
    _table(spark, f)
    loc = iceberg_catalog.load_table(f"{ns}.f").location()
    schema = pyiceberg.schema.Schema(T.NestedField(1, "id", T.LongType(), required=False))
    iceberg_catalog.create_table((ns, "c2"), schema, location=f"{loc}/data")
    before = _files(loc)
    age(fu.local(loc))
    for ident in (f"{ns}.c2", f"{ns}.f"):
        refused(spark, f"CALL lake.system.remove_orphan_files(table => '{ident}', older_than => {OLD_ENOUGH})",
                "nothing was deleted")
        refused(spark, f"VACUUM lake.{ident} RETAIN 168 HOURS", "nothing was deleted")
    assert _files(loc) == before and _count(spark, f) == 5
    refused(spark, f"DROP TABLE lake.{ns}.c2 PURGE", f"inside the location of table lake.{ns}.f", "DROP TABLE without PURGE")
    spark.sql(f"DROP TABLE lake.{ns}.c2")
    assert _files(loc) == before and _count(spark, f) == 5


def test_write_data_path_is_honoured_and_owned(spark, ns, iceberg_catalog, no_min_age, tmp_path):
    a, b = f"lake.{ns}.a", f"lake.{ns}.b"
    _table(spark, a)
    a_loc = iceberg_catalog.load_table(f"{ns}.a").location()
    # into another table's folder: refused at CREATE and at ALTER
    refused(spark, f"CREATE TABLE {b} (id BIGINT) TBLPROPERTIES ('write.data.path'='{a_loc}/data')",
            f"the location of table lake.{ns}.a")
    spark.sql(f"CREATE TABLE {b} (id BIGINT)")
    refused(spark, f"ALTER TABLE {b} SET TBLPROPERTIES ('write.data.path'='{a_loc}/data')",
            f"the location of table lake.{ns}.a")
    refused(spark, f"ALTER TABLE {b} SET TBLPROPERTIES ('write.metadata.path'='{a_loc}/metadata')",
            f"the location of table lake.{ns}.a")
    # a folder of its own elsewhere: lakerules' writers use it (they ignored it before)
    own = tmp_path / "b-data"
    spark.sql(f"ALTER TABLE {b} SET TBLPROPERTIES ('write.data.path'='{own}')")
    spark.sql(f"INSERT INTO {b} VALUES (1), (2)")
    t = iceberg_catalog.load_table(f"{ns}.b")
    assert all(str(fu.local(task.file.file_path)).startswith(str(own)) for task in t.scan().plan_files())
    # a third table cannot take that folder either
    refused(spark, f"CREATE TABLE lake.{ns}.c (id BIGINT) LOCATION '{own}/inner'", f"the folder of table lake.{ns}.b")
    # the other table's cleanup still leaves b's files alone, and b's own cleanup keeps its rows
    before = _files(a_loc) | _files(str(own))
    age(fu.local(a_loc))
    age(own)
    _clean(spark, f"{ns}.a")
    _clean(spark, f"{ns}.b")
    assert _files(a_loc) | _files(str(own)) == before
    assert _count(spark, a) == 5 and _count(spark, b) == 2
    # moving the data folder again keeps the old one b's: its files are there
    spark.sql(f"ALTER TABLE {b} SET TBLPROPERTIES ('write.data.path'='{tmp_path / 'b-data2'}')")
    refused(spark, f"CREATE TABLE lake.{ns}.d (id BIGINT) LOCATION '{own}'", f"the folder of table lake.{ns}.b")


def test_add_files_of_another_tables_file_is_refused_unless_shared(spark, ns, iceberg_catalog, no_min_age):
    a, b = f"lake.{ns}.a", f"lake.{ns}.b"
    _table(spark, a)
    spark.sql(f"CREATE TABLE {b} (id BIGINT)")
    ta = iceberg_catalog.load_table(f"{ns}.a")
    extra = fu.local(ta.location()) / "data" / "extra.parquet"
    schema = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    pq.write_table(pa.table({"id": pa.array([100, 101], pa.int64())}, schema=schema), extra)
    call = f"CALL lake.system.add_files(table => '{ns}.b', source_table => '`parquet`.`{extra}`'"
    refused(spark, call + ")", f"in the folder of table lake.{ns}.a", "shared => true", "Nothing was added")
    assert _count(spark, b) == 0
    spark.sql(call + ", shared => true)").collect()
    assert _count(spark, b) == 2
    # a's cleanup: extra.parquet is no file of a's, but b borrows it; also after a DELETE and an expiry
    age(fu.local(ta.location()))
    _clean(spark, f"{ns}.a")
    spark.sql(f"DELETE FROM {a} WHERE id < 3")
    spark.sql(f"CALL lake.system.expire_snapshots(table => '{ns}.a', older_than => {OLD_ENOUGH}, retain_last => 1)").collect()
    spark.sql(f"VACUUM {a} RETAIN 168 HOURS").collect()
    assert extra.exists() and _count(spark, b) == 2 and _count(spark, a) == 2
    # b's own cleanup never touches it either (outside b's folders); a's purge keeps it
    _clean(spark, f"{ns}.b")
    spark.sql(f"DROP TABLE {a} PURGE")
    assert extra.exists() and sorted(r.id for r in spark.sql(f"SELECT id FROM {b}").collect()) == [100, 101]


def test_checkpoints_and_underscore_folders_are_never_orphans(spark, ns, iceberg_catalog, no_min_age, tmp_path):
    a = f"lake.{ns}.a"
    _table(spark, a)
    loc = fu.local(iceberg_catalog.load_table(f"{ns}.a").location())
    checkpoint = loc / "checkpoint"
    for part in ("offsets/0", "commits/0", "metadata", "sources/0/0", "state/0/0/1.delta"):
        (checkpoint / part).parent.mkdir(parents=True, exist_ok=True)
        (checkpoint / part).write_text("{}")
    hidden = [loc / "_delta_log" / "0.json", loc / ".spark-staging" / "x", loc / "data" / "_temporary" / "y"]
    for p in hidden:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    stray = loc / "data" / "stray.parquet"
    stray.write_text("an orphan")
    kept = _files(str(loc)) - {stray}
    age(loc)
    rows = spark.sql(f"VACUUM {a} RETAIN 168 HOURS DRY RUN").collect()
    assert [fu.local(r.path) for r in rows] == [stray]
    rows = spark.sql(f"CALL lake.system.remove_orphan_files(table => '{ns}.a', older_than => {OLD_ENOUGH})").collect()
    assert [fu.local(r[0]) for r in rows] == [stray]
    assert _files(str(loc)) == kept and _count(spark, a) == 5


def test_a_renamed_table_keeps_its_folder_and_the_old_name_gets_a_new_one(spark, ns, iceberg_catalog, no_min_age):
    x, y = f"lake.{ns}.x", f"lake.{ns}.y"
    _table(spark, x)
    old = iceberg_catalog.load_table(f"{ns}.x").location()
    spark.sql(f"ALTER TABLE {x} RENAME TO {y}")
    spark.sql(f"CREATE TABLE {x} (id BIGINT)")
    new = iceberg_catalog.load_table(f"{ns}.x").location()
    assert iceberg_catalog.load_table(f"{ns}.y").location() == old and fu.local(new) != fu.local(old)
    y_files = _files(old)
    spark.sql(f"DROP TABLE {y}")  # no PURGE: y's files stay, and x's cleanup does not see them
    age(fu.local(old))
    rows = spark.sql(f"CALL lake.system.remove_orphan_files(table => '{ns}.x', older_than => {OLD_ENOUGH}, "
                     "dry_run => true)").collect()
    assert rows == [] and _files(old) == y_files
    # a dropped table's files on disk keep the next table of that name out of their folder too
    spark.sql(f"CREATE TABLE lake.{ns}.z (id BIGINT)")
    z = iceberg_catalog.load_table(f"{ns}.z").location()
    spark.sql(f"INSERT INTO lake.{ns}.z VALUES (1)")
    spark.sql(f"DROP TABLE lake.{ns}.z")
    spark.sql(f"CREATE TABLE lake.{ns}.z (id BIGINT)")
    assert fu.local(iceberg_catalog.load_table(f"{ns}.z").location()) != fu.local(z)


def test_a_name_that_decodes_to_another_tables_folder_does_not_block_it(spark, ns, iceberg_catalog, no_min_age):
    a = f"lake.{ns}.a"
    _table(spark, a)
    spark.sql(f"CREATE TABLE lake.{ns}.`a%2F` (id BIGINT)")
    spark.sql(f"INSERT INTO lake.{ns}.`a%2F` VALUES (1)")
    loc = iceberg_catalog.load_table((ns, "a%2F")).location()
    assert "%" not in loc.rsplit("/", 1)[-1]
    _clean(spark, f"{ns}.a")
    spark.sql(f"CALL lake.system.remove_orphan_files(table => '{ns}.`a%2F`', older_than => {OLD_ENOUGH})").collect()
    assert _count(spark, a) == 5 and _count(spark, f"lake.{ns}.`a%2F`") == 1


def test_set_location_and_register_table_are_checked(spark, ns, iceberg_catalog, no_min_age, tmp_path):
    a, b = f"lake.{ns}.a", f"lake.{ns}.b"
    _table(spark, a)
    _table(spark, b, rows=3)
    ta = iceberg_catalog.load_table(f"{ns}.a")
    refused(spark, f"ALTER TABLE {b} SET LOCATION '{ta.location()}/data'", f"the location of table lake.{ns}.a")
    # the same metadata registered under a second name would give one folder two tables
    refused(spark, f"CALL lake.system.register_table(table => '{ns}.a2', metadata_file => '{ta.metadata_location}')",
            f"is also the location of table lake.{ns}.a")
    assert not iceberg_catalog.table_exists(f"{ns}.a2")
    # moved: new files go to the new folder; the old one stays b's (its files are there)
    tb = iceberg_catalog.load_table(f"{ns}.b")
    spark.sql(f"ALTER TABLE {b} SET LOCATION '{tmp_path / 'moved'}'")
    spark.sql(f"INSERT INTO {b} VALUES (10)")
    assert _count(spark, b) == 4
    refused(spark, f"CREATE TABLE lake.{ns}.c (id BIGINT) LOCATION '{tb.location()}'", f"the folder of table lake.{ns}.b")
