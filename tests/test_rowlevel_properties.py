"""Each row-level statement reads its own write.<statement>.* table properties (issue 17, items 5
and 10): write.merge.mode (MERGE copy-on-write), write.<statement>.isolation-level, and
write.delete.granularity for every position-delete writer."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent, ManifestContent

from errors_util import refused
from lakerules.write import row_delta
from lakerules.rowlevel import run as rowlevel
from test_delete import files, orphans, snapshot_id
from test_merge import base, make_stock, merged, rows

FILE_PATH_ID = 2147483546

MERGE = """MERGE INTO {t} t USING changes c ON t.id = c.id
    WHEN MATCHED AND c.op = 'del' THEN DELETE
    WHEN MATCHED THEN UPDATE SET qty = coalesce(c.qty, -1), item = concat(t.item, '*')
    WHEN NOT MATCHED AND c.op = 'ins' THEN INSERT (id, item, qty) VALUES (c.id, 'new', c.qty)"""


def ids_in(catalog, name, data_file) -> set[int]:
    t = catalog.load_table(name)
    with t.io.new_input(data_file.file_path).open() as fh:
        return set(pq.read_table(fh).column("id").to_pylist())


# ---- item 5: MERGE's own mode --------------------------------------------------------------------


def test_copy_on_write_merge_rewrites_the_touched_files(spark, ns, iceberg_catalog, engines):
    cow = make_stock(spark, f"lake.{ns}.cow")
    mor = make_stock(spark, f"lake.{ns}.mor")
    name = cow.split(".", 1)[1]
    # MERGE reads write.merge.mode only: bad update/delete modes do not reach it
    spark.sql(f"""ALTER TABLE {cow} SET TBLPROPERTIES ('write.merge.mode' = 'copy-on-write',
                  'write.update.mode' = 'bogus', 'write.delete.mode' = 'bogus')""")
    before = snapshot_id(iceberg_catalog, name)
    data_before = files(iceberg_catalog, name, DataFileContent.DATA)
    touched = {f.file_path for f in data_before if ids_in(iceberg_catalog, name, f) & {1, 2, 3}}
    assert touched and len(touched) < len(data_before)

    explain = "\n".join(r[0] for r in spark.sql("EXPLAIN " + MERGE.format(t=cow)).collect())
    assert "copy-on-write" in explain and "no delete files" in explain, explain
    (r,) = spark.sql(MERGE.format(t=cow)).collect()
    (m,) = spark.sql(MERGE.format(t=mor)).collect()
    assert tuple(r) == tuple(m) == (5, 2, 1, 2)
    assert rows(spark, cow) == rows(spark, mor) == merged()

    t = iceberg_catalog.load_table(name)
    snap = t.current_snapshot()
    assert snap.parent_snapshot_id == before  # one snapshot
    assert snap.summary["lakerules.merge-mode"] == "copy-on-write"
    assert all(m.content == ManifestContent.DATA for m in snap.manifests(t.io))  # no delete manifests
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []
    after = {f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    assert not (touched & after)  # every file holding an updated or deleted row was removed
    assert {f.file_path for f in data_before} - touched <= after  # the others stay
    assert int(snap.summary["deleted-data-files"]) == len(touched)
    # the merge-on-read twin wrote position deletes, as before
    assert files(iceberg_catalog, mor.split(".", 1)[1], DataFileContent.POSITION_DELETES)
    assert orphans(iceberg_catalog, name) == set()
    engines.assert_same(cow, expected=merged())


def test_merge_into_a_v1_table_copies_on_write(spark, ns, iceberg_catalog, engines):
    """A v1 table has no delete files: MERGE rewrites, whatever write.merge.mode says."""
    table = f"lake.{ns}.v1"
    spark.sql(f"""CREATE TABLE {table} (id BIGINT, item STRING, qty INT) PARTITIONED BY (bucket(4, id))
                  TBLPROPERTIES ('format-version' = '1', 'write.merge.mode' = 'merge-on-read')""")
    spark.sql(f"INSERT INTO {table} SELECT id, concat('item-', CAST(id AS STRING)), CAST(id AS INT) FROM range(20)")
    make_stock(spark, f"lake.{ns}.unused")  # the changes view
    (r,) = spark.sql(MERGE.format(t=table)).collect()
    assert tuple(r) == (5, 2, 1, 2)
    assert files(iceberg_catalog, f"{ns}.v1", DataFileContent.POSITION_DELETES) == []
    engines.assert_same(table, expected=merged())


def test_a_bad_merge_mode_is_refused_and_changes_nothing(spark, ns, iceberg_catalog):
    table = make_stock(spark, f"lake.{ns}.badmode")
    name = table.split(".", 1)[1]
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.merge.mode' = 'bogus')")
    before = snapshot_id(iceberg_catalog, name)
    refused(spark, MERGE.format(t=table), "write.merge.mode", "bogus")
    assert snapshot_id(iceberg_catalog, name) == before
    assert rows(spark, table) == sorted(base().values())
    assert orphans(iceberg_catalog, name) == set()


# ---- item 5: each statement's own isolation level ------------------------------------------------

STATEMENTS = {
    "delete": ("DELETE FROM {t} WHERE id < 4", lambda r: None if r[0] < 4 else r),
    "update": ("UPDATE {t} SET qty = -1 WHERE id < 4", lambda r: (r[0], r[1], -1) if r[0] < 4 else r),
    "merge": ("MERGE INTO {t} t USING changes c ON t.id = c.id WHEN MATCHED THEN UPDATE SET qty = -1",
              lambda r: (r[0], r[1], -1) if r[0] in (1, 2, 3) else r),
}


@pytest.mark.parametrize("statement, level", [("delete", "snapshot"), ("update", "serializable"),
                                              ("merge", "snapshot"), ("merge", "serializable")])
def test_each_statement_reads_its_own_isolation_level(spark, ns, iceberg_catalog, monkeypatch, statement, level):
    """A concurrent append of a row the statement would have matched: under the statement's
    snapshot isolation it commits (the new row untouched), under serializable it is a conflict.
    The other statements' properties say the opposite, and must not count: a statement that read
    another's property would do the opposite, so one level per statement (both for MERGE, whose
    property is new) shows each reads its own."""
    table = make_stock(spark, f"lake.{ns}.iso_{statement}_{level}")
    name = table.split(".", 1)[1]
    other = "serializable" if level == "snapshot" else "snapshot"
    # Iceberg reads the level case-insensitively (IsolationLevel.fromName)
    props = {f"write.{s}.isolation-level": (level.upper() if s == statement else other) for s in STATEMENTS}
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ("
              + ", ".join(f"'{k}' = '{v}'" for k, v in props.items()) + ")")
    sql, change = STATEMENTS[statement]
    real = row_delta.commit
    raced = []

    def concurrent_then_commit(tbl, *args, **kwargs):
        if not raced:
            raced.append(1)
            spark.sql(f"INSERT INTO {table} VALUES (1, 'race', 1000)")  # matches the statement's condition
        return real(tbl, *args, **kwargs)

    monkeypatch.setattr(rowlevel.row_delta, "commit", concurrent_then_commit)
    if level == "serializable":
        with pytest.raises(Exception, match="conflict on"):
            spark.sql(sql.format(t=table)).collect()
        monkeypatch.setattr(rowlevel.row_delta, "commit", real)
        want = sorted([*base().values(), (1, "race", 1000)])
        assert orphans(iceberg_catalog, name) == set()
    else:
        spark.sql(sql.format(t=table)).collect()
        monkeypatch.setattr(rowlevel.row_delta, "commit", real)
        want = sorted([r for r in map(change, base().values()) if r is not None] + [(1, "race", 1000)])
    assert raced
    assert rows(spark, table) == want


def test_a_bad_isolation_level_is_refused_before_anything_is_written(spark, ns, iceberg_catalog):
    """Each statement refuses a bad value of its own property, whatever the others say."""
    table = make_stock(spark, f"lake.{ns}.badiso")
    name = table.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    for statement in sorted(STATEMENTS):
        sql, _ = STATEMENTS[statement]
        # another statement's bad value is not this statement's business
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ("
                  + ", ".join(f"'write.{s}.isolation-level' = '{'Repeatable' if s == statement else 'bogus'}'"
                              for s in STATEMENTS) + ")")
        refused(spark, sql.format(t=table), f"write.{statement}.isolation-level", "Repeatable")
    assert snapshot_id(iceberg_catalog, name) == before
    assert rows(spark, table) == sorted(base().values())
    assert orphans(iceberg_catalog, name) == set()
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.merge.isolation-level' = 'snapshot')")
    spark.sql(STATEMENTS["merge"][0].format(t=table)).collect()
    assert rows(spark, table) == sorted(STATEMENTS["merge"][1](r) for r in base().values())


# ---- item 10: write.delete.granularity -----------------------------------------------------------


@pytest.fixture
def three_files(spark, ns):
    """Partition 'a' holds 3 data files of 4 rows (ids 0-11), partition 'b' one (ids 100-103)."""
    table = f"lake.{ns}.gran"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    for start in (0, 4, 8):
        spark.sql(f"INSERT INTO {table} SELECT /*+ REPARTITION(1) */ id, 'a' FROM range({start}, {start + 4})")
    spark.sql(f"INSERT INTO {table} SELECT /*+ REPARTITION(1) */ id, 'b' FROM range(100, 104)")
    return table


def new_deletes(catalog, name, seen):
    out = [d for d in files(catalog, name, DataFileContent.POSITION_DELETES) if d.file_path not in seen]
    seen.update(d.file_path for d in out)
    return out


def path_bounds(d):
    return d.lower_bounds[FILE_PATH_ID].decode(), d.upper_bounds[FILE_PATH_ID].decode()


GRANULARITY_STATEMENTS = {
    "delete": ("DELETE FROM {t} WHERE id % 4 = {k} AND kind = 'a'", lambda r, k: None if r[0] % 4 == k and r[1] == "a" else r),
    "update": ("UPDATE {t} SET id = id + 1000 WHERE id % 4 = {k} AND kind = 'a'",
               lambda r, k: (r[0] + 1000, r[1]) if r[0] % 4 == k and r[1] == "a" else r),
    "merge": ("MERGE INTO {t} t USING (SELECT id FROM range(12) WHERE id % 4 = {k}) s ON t.id = s.id "
              "WHEN MATCHED THEN DELETE", lambda r, k: None if r[0] % 4 == k and r[1] == "a" else r),
}


@pytest.mark.parametrize("writer", ["driver", "job"])
def test_delete_granularity_file_and_partition(spark, three_files, iceberg_catalog, engines, writer):
    """Default (file): one delete file per data file deleted from, its file_path bounds equal and
    naming that file; partition: one delete file for the partition's 3 data files. Each
    position-delete writer in turn (DELETE, UPDATE's split write, MERGE): they share the writer,
    whether the driver writes the files (few deletes) or a Spark job does."""
    if writer == "job":
        spark.conf.set("spark.lakerules.write.positionDeleteDriverRows", "0")
    try:
        _granularity(spark, three_files, iceberg_catalog, engines)
    finally:
        spark.conf.unset("spark.lakerules.write.positionDeleteDriverRows")


def _granularity(spark, three_files, iceberg_catalog, engines):
    table = three_files
    name = table.split(".", 1)[1]
    table_rows = [(i, "a") for i in range(12)] + [(i, "b") for i in range(100, 104)]
    data_a = {f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA) if tuple(f.partition) == ("a",)}
    assert len(data_a) == 3
    seen: set[str] = set()

    def run(statement, k):
        nonlocal table_rows
        sql, change = GRANULARITY_STATEMENTS[statement]
        spark.sql(sql.format(t=table, k=k)).collect()
        table_rows = [r for r in (change(r, k) for r in table_rows) if r is not None]
        return new_deletes(iceberg_catalog, name, seen)

    # the default: file
    deletes = run("delete", 0)
    assert len(deletes) == 3
    bounds = [path_bounds(d) for d in deletes]
    assert all(lo == hi for lo, hi in bounds), bounds
    assert {lo for lo, _ in bounds} == data_a
    assert all(d.record_count == 1 for d in deletes)
    engines.assert_same(table, expected=table_rows)

    # partition: one file for the partition
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.granularity' = 'partition')")
    (d,) = run("update", 1)
    lo, hi = path_bounds(d)
    assert lo < hi and {lo, hi} <= data_a
    assert d.record_count == 3
    engines.assert_same(table, expected=table_rows)

    # file, said explicitly
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.granularity' = 'file')")
    deletes = run("merge", 2)
    assert len(deletes) == 3 and all(lo == hi for lo, hi in map(path_bounds, deletes))
    engines.assert_same(table, expected=table_rows)


def test_a_bad_delete_granularity_is_refused(spark, three_files, iceberg_catalog):
    table = three_files
    name = table.split(".", 1)[1]
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.granularity' = 'row')")
    before = snapshot_id(iceberg_catalog, name)
    before_rows = rows(spark, table)
    for statement in sorted(GRANULARITY_STATEMENTS):
        refused(spark, GRANULARITY_STATEMENTS[statement][0].format(t=table, k=0), "write.delete.granularity", "row")
    assert snapshot_id(iceberg_catalog, name) == before
    assert rows(spark, table) == before_rows
    assert orphans(iceberg_catalog, name) == set()
