"""No table lost, round two (issue #51, items 1-4): the ways a careful but unlucky user lost or
duplicated rows after the first round, each as a test with every file on disk listed before and
after. Files brought in from outside a table's folders are recorded, the record (and the other
protective bookkeeping) cannot be edited by SQL, every lake catalog of the session is checked, and
a stream's record of committed batches outlives maintenance."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import faults_util as fu
from errors_util import refused
from test_ownership import OLD_ENOUGH, _clean, _count, _files, _table
from test_path_safety import age

SCHEMA = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])


@pytest.fixture
def no_min_age(spark):
    spark.conf.set("spark.lakerules.removeOrphanFiles.minAge", "0")
    yield
    spark.conf.unset("spark.lakerules.removeOrphanFiles.minAge")


def _parquet(folder: Path, ids, name: str = "f.parquet") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(list(ids), pa.int64())}, schema=SCHEMA), folder / name)
    return folder / name


def _ids(spark, name: str) -> list[int]:
    return sorted(r.id for r in spark.sql(f"SELECT id FROM {name}").collect())


def _add(spark, ident: str, path, shared: bool = False) -> None:
    flag = ", shared => true" if shared else ""
    spark.sql(f"CALL lake.system.add_files(table => '{ident}', source_table => '`parquet`.`{path}`'{flag})").collect()


# ---- 1. files imported without `shared` are recorded -------------------------------------------


def test_a_table_cannot_be_made_or_moved_onto_files_another_table_imported(spark, ns, iceberg_catalog, no_min_age,
                                                                           tmp_path):
    x = tmp_path / "x"
    _parquet(x / "p", [1, 2])
    spark.sql(f"CREATE TABLE lake.{ns}.b1 (id BIGINT)")
    _add(spark, f"{ns}.b1", x / "p")
    assert json.loads(iceberg_catalog.load_table(f"{ns}.b1").properties["lakerules.borrows"]) == [f"file://{x}/p"]
    before = _files(str(x))
    for where in (x, x / "p", x / "p" / "q"):  # around, on and inside the imported folder
        refused(spark, f"CREATE TABLE lake.{ns}.n1 (id BIGINT) LOCATION '{where}'",
                f"which holds files table lake.{ns}.b1 references", "nothing was changed")
    _table(spark, f"lake.{ns}.m")
    refused(spark, f"ALTER TABLE lake.{ns}.m SET LOCATION '{x}'", f"which holds files table lake.{ns}.b1 references")
    refused(spark, f"ALTER TABLE lake.{ns}.m SET TBLPROPERTIES ('write.data.path'='{x}/p')",
            f"which holds files table lake.{ns}.b1 references")
    assert not iceberg_catalog.table_exists(f"{ns}.n1")
    # the table whose files they are, cleaned in every way, deletes none of them
    _clean(spark, f"{ns}.m")
    _clean(spark, f"{ns}.b1")
    assert _files(str(x)) == before and _ids(spark, f"lake.{ns}.b1") == [1, 2]


def test_a_dropped_tables_files_added_to_another_keep_its_old_folder_taken(spark, ns, iceberg_catalog, no_min_age):
    m = f"lake.{ns}.m"
    _table(spark, m, rows=3)
    old = iceberg_catalog.load_table(f"{ns}.m").location()
    spark.sql(f"DROP TABLE {m}")  # not purged: its files stay, nobody's
    spark.sql(f"CREATE TABLE lake.{ns}.b (id BIGINT)")
    _add(spark, f"{ns}.b", f"{old}/data")
    refused(spark, f"CREATE TABLE lake.{ns}.n (id BIGINT) LOCATION '{old}'", f"table lake.{ns}.b references")
    spark.sql(f"CREATE TABLE {m} (id BIGINT)")  # the old name goes to a fresh folder beside it
    new = iceberg_catalog.load_table(f"{ns}.m").location()
    assert fu.local(new) != fu.local(old)
    age(fu.local(old))
    _clean(spark, f"{ns}.m")
    assert _ids(spark, f"lake.{ns}.b") == [0, 1, 2]


def test_register_table_records_the_files_it_names_outside_its_folders(spark, ns, iceberg_catalog, no_min_age,
                                                                       tmp_path):
    a = f"lake.{ns}.a"
    spark.sql(f"CREATE TABLE {a} (id BIGINT)")
    _add(spark, f"{ns}.a", _parquet(tmp_path / "outside", [7, 8]))
    t = iceberg_catalog.load_table(f"{ns}.a")
    copy = tmp_path / "copied" / "metadata" / "v1.metadata.json"  # a copy of the table under another location
    copy.parent.mkdir(parents=True)
    doc = json.loads(fu.local(t.metadata_location).read_text())
    doc["location"] = f"file://{tmp_path / 'copied'}"
    doc["properties"] = {k: v for k, v in doc["properties"].items() if k != "lakerules.borrows"}
    copy.write_text(json.dumps(doc))
    spark.sql(f"DROP TABLE {a}")  # its files stay
    spark.sql(f"CALL lake.system.register_table(table => '{ns}.r', metadata_file => '{copy}')").collect()
    borrows = json.loads(iceberg_catalog.load_table(f"{ns}.r").properties["lakerules.borrows"])
    assert f"{tmp_path / 'outside'}" in borrows and any(b.endswith(f"/{ns}/a/metadata") for b in borrows), borrows
    refused(spark, f"CREATE TABLE lake.{ns}.n (id BIGINT) LOCATION '{tmp_path / 'outside'}'",
            f"table lake.{ns}.r references")
    assert _ids(spark, f"lake.{ns}.r") == [7, 8]


# ---- 2. the bookkeeping is out of SQL's reach -----------------------------------------------------


@pytest.mark.parametrize("key", ["lakerules.borrows", "lakerules.previous-folders", "lakerules.stream.q-1",
                                 "LAKERULES.BORROWS"])
def test_protective_bookkeeping_cannot_be_set_or_removed(spark, ns, iceberg_catalog, key):
    t = f"lake.{ns}.b"
    spark.sql(f"CREATE TABLE {t} (id BIGINT)")
    before = iceberg_catalog.load_table(f"{ns}.b").metadata_location
    for statement in (f"ALTER TABLE {t} SET TBLPROPERTIES ('{key}'='[]')",
                      f"ALTER TABLE {t} UNSET TBLPROPERTIES ('{key}')",
                      f"ALTER TABLE {t} UNSET TBLPROPERTIES IF EXISTS ('{key}')",
                      f"CREATE OR REPLACE TABLE {t} (id BIGINT) TBLPROPERTIES ('{key}'='[]')",
                      f"CREATE TABLE lake.{ns}.c (id BIGINT) TBLPROPERTIES ('{key}'='[]')"):
        refused(spark, statement, f"table property '{key}' is lakerules' own record", "Nothing was changed")
    refused(spark, lambda: spark.range(1).writeTo(f"lake.{ns}.d").tableProperty(key, "[]").create(),
            "lakerules' own record")
    assert iceberg_catalog.load_table(f"{ns}.b").metadata_location == before
    assert not iceberg_catalog.table_exists(f"{ns}.c") and not iceberg_catalog.table_exists(f"{ns}.d")


def test_borrowed_files_survive_the_owners_overwrite_expiry_and_purge(spark, ns, iceberg_catalog, no_min_age):
    o, b = f"lake.{ns}.o", f"lake.{ns}.b"
    _table(spark, o, rows=2)
    spark.sql(f"CREATE TABLE {b} (id BIGINT)")
    _add(spark, f"{ns}.b", f"{iceberg_catalog.load_table(f'{ns}.o').location()}/data", shared=True)
    refused(spark, f"ALTER TABLE {b} UNSET TBLPROPERTIES ('lakerules.borrows')", "lakerules' own record")
    spark.sql(f"INSERT OVERWRITE {o} VALUES (5)")
    spark.sql(f"CALL lake.system.expire_snapshots(table => '{ns}.o', older_than => {OLD_ENOUGH}, retain_last => 1)").collect()
    assert _ids(spark, b) == [0, 1]
    spark.sql(f"DROP TABLE {o} PURGE")
    assert _ids(spark, b) == [0, 1]


def test_a_moved_tables_old_folder_stays_its_own(spark, ns, iceberg_catalog, no_min_age, tmp_path):
    m = f"lake.{ns}.mv"
    _table(spark, m, rows=3)
    old = iceberg_catalog.load_table(f"{ns}.mv").location()
    spark.sql(f"ALTER TABLE {m} SET LOCATION '{tmp_path / 'moved'}'")
    refused(spark, f"ALTER TABLE {m} SET TBLPROPERTIES ('lakerules.previous-folders'='[]')", "lakerules' own record")
    before = _files(old)
    refused(spark, f"CREATE TABLE lake.{ns}.mvy (id BIGINT) LOCATION '{old}'", f"the folder of table {m}")
    age(fu.local(old))
    _clean(spark, f"{ns}.mv")
    assert _files(old) == before and _ids(spark, m) == [0, 1, 2]


# ---- 3. every lake catalog of the session -------------------------------------------------------


@pytest.fixture
def db2(spark, lake2):
    """lake2 (conftest) with an empty namespace lake2.db; (its folder, its pyiceberg catalog)."""
    spark.sql("CREATE NAMESPACE lake2.db")
    yield lake2
    spark.sql("DROP NAMESPACE IF EXISTS lake2.db CASCADE")


def test_a_second_catalog_cannot_take_a_tables_folder(spark, ns, iceberg_catalog, no_min_age, db2):
    live = f"lake.{ns}.live"
    _table(spark, live, rows=4)
    loc = iceberg_catalog.load_table(f"{ns}.live").location()
    before = _files(loc)
    for where in (loc, f"{loc}/data", str(fu.local(loc).parent)):
        refused(spark, f"CREATE TABLE lake2.db.x (id BIGINT) LOCATION '{where}'", f"table lake.{ns}.live")
    # lake2's warehouse root (and database) are held as lake's are
    refused(spark, f"CREATE TABLE lake.{ns}.y (id BIGINT) LOCATION '{db2[0]}'", "warehouse root of catalog 'lake2'")
    # a table of lake2 that borrows from lake's table: lake's cleanup keeps its files
    spark.sql("CREATE TABLE lake2.db.b (id BIGINT)")
    spark.sql(f"CALL lake2.system.add_files(table => 'db.b', source_table => '`parquet`.`{loc}/data`', "
              "shared => true)").collect()
    spark.sql(f"INSERT OVERWRITE {live} VALUES (9)")
    spark.sql(f"CALL lake.system.expire_snapshots(table => '{ns}.live', older_than => {OLD_ENOUGH}, retain_last => 1)").collect()
    age(fu.local(loc))
    _clean(spark, f"{ns}.live")
    spark.sql("CALL lake2.system.remove_orphan_files(table => 'db.b', older_than => TIMESTAMP '2999-01-01 00:00:00')").collect()
    assert _ids(spark, "lake2.db.b") == [0, 1, 2, 3] and _ids(spark, live) == [9]
    assert {p for p in before if p.suffix == ".parquet"} <= _files(loc)  # the borrowed data files


def test_a_table_made_by_another_tool_in_a_second_catalog_stops_cleanup(spark, ns, iceberg_catalog, no_min_age, db2):
    """A table pyiceberg made in lake2's database at lake's table's folder (pyiceberg checks
    nothing): the cleanup of either refuses before deleting anything."""
    import pyiceberg.schema
    import pyiceberg.types as T

    live = f"lake.{ns}.live"
    _table(spark, live, rows=3)
    loc = iceberg_catalog.load_table(f"{ns}.live").location()
    db2[1].create_table(("db", "x"), pyiceberg.schema.Schema(T.NestedField(1, "id", T.LongType(), required=False)),
                       location=loc)
    before = _files(loc)
    age(fu.local(loc))
    refused(spark, "CALL lake2.system.remove_orphan_files(table => 'db.x', older_than => TIMESTAMP '2999-01-01 00:00:00')",
            f"table lake.{ns}.live", "nothing was deleted")
    refused(spark, f"CALL lake.system.remove_orphan_files(table => '{ns}.live', older_than => {OLD_ENOUGH})",
            "table lake2.db.x", "nothing was deleted")
    assert _files(loc) == before and _ids(spark, live) == [0, 1, 2]
    spark.sql("DROP TABLE lake2.db.x")


# ---- 4. exactly once through maintenance --------------------------------------------------------


def _stream(spark, table: str, source: Path, checkpoint: Path) -> None:
    """An availableNow stream of the JSON files in ``source`` (a file a batch) into ``table``."""
    rows = spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1).json(str(source))
    query = rows.writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).toTable(table)
    query.awaitTermination()


def _put(source: Path, name: str, ids) -> None:
    source.mkdir(parents=True, exist_ok=True)
    (source / f"{name}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))


def _maintain(spark, ns: str, table: str, kind: str) -> None:
    ident = table.split(".", 1)[1]
    if kind == "expire":
        spark.sql(f"INSERT INTO {table} VALUES (1000)")  # another commit, then only it is kept
        spark.sql(f"CALL lake.system.expire_snapshots(table => '{ident}', older_than => {OLD_ENOUGH}, retain_last => 1)").collect()
    elif kind == "replace":
        spark.sql(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM {table}")
    elif kind == "optimize":
        spark.sql(f"OPTIMIZE {table}")
    elif kind == "rollback":  # to the snapshot before batch 1: the batch undone on purpose stays undone
        first = spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at").collect()[0][0]
        spark.sql(f"CALL lake.system.rollback_to_snapshot(table => '{ident}', snapshot_id => {first})").collect()


@pytest.mark.parametrize("kind", ["expire", "replace", "optimize", "rollback"])
def test_a_stream_restarted_after_maintenance_writes_no_batch_twice(spark, ns, tmp_path, engines, kind):
    """Batch 1 landed, the driver died before the checkpoint said so (its commit marker is gone),
    and maintenance ran before the restart: the restart skips batch 1 (its record is in the table's
    properties, not only in the snapshots maintenance removed) and writes batch 2 once."""
    table = f"lake.{ns}.k"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    source, checkpoint = tmp_path / "src", tmp_path / "ck"
    _put(source, "a", [1, 2])
    _put(source, "b", [3, 4])
    _stream(spark, table, source, checkpoint)
    assert (checkpoint / "commits" / "1").exists()
    for marker in ("1", ".1.crc"):  # as if the driver died between batch 1's commit and its marker
        (checkpoint / "commits" / marker).unlink(missing_ok=True)
    _maintain(spark, ns, table, kind)
    _put(source, "c", [5])
    _stream(spark, table, source, checkpoint)
    expected = {"expire": [1, 2, 3, 4, 5, 1000], "replace": [1, 2, 3, 4, 5], "optimize": [1, 2, 3, 4, 5],
                "rollback": [1, 2, 5]}[kind]
    engines.assert_same(table, expected=[(i,) for i in expected])
    assert (checkpoint / "commits" / "2").exists()
