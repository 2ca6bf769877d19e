"""DELETE FROM: position deletes (merge-on-read), whole-file drops, copy-on-write, conflicts."""

from __future__ import annotations

import threading

import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.manifest import DataFileContent

from lakerules.write import row_delta
from lakerules.rowlevel import run as rowlevel
from settings_util import settings


def files(catalog, name, content=None):
    t = catalog.load_table(name)
    out = []
    snapshot = t.current_snapshot()
    if snapshot is None:
        return out
    for m in snapshot.manifests(t.io):
        for e in m.fetch_manifest_entry(t.io, discard_deleted=True):
            if content is None or e.data_file.content == content:
                out.append(e.data_file)
    return out


def orphans(catalog, name) -> set[str]:
    """Parquet files under the table's folder that no snapshot references."""
    from pathlib import Path

    t = catalog.load_table(name)
    referenced = set()
    for snap in t.snapshots():
        for m in snap.manifests(t.io):
            referenced |= {e.data_file.file_path.replace("file://", "") for e in m.fetch_manifest_entry(t.io, discard_deleted=False)}
    root = Path(t.location().replace("file://", ""))
    return {str(p) for p in root.rglob("*.parquet")} - referenced


def snapshot_id(catalog, name):
    s = catalog.load_table(name).current_snapshot()
    return s.snapshot_id if s else None


@pytest.fixture
def events(spark, ns):
    """30 rows in 3 identity partitions (kind a/b/c), one file per partition."""
    table = f"lake.{ns}.ev"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING, v DOUBLE) PARTITIONED BY (kind)")
    spark.sql(f"""INSERT INTO {table} SELECT /*+ REPARTITION(1) */ id,
                  element_at(array('a', 'b', 'c'), CAST(id % 3 AS INT) + 1), id / 2 FROM range(30)""")
    return table


def ids(spark, table):
    return sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())


DRIVER_ROWS = {"driver": "30", "counted": "3", "job": "0"}  # spark.lakerules.write.positionDeleteDriverRows


@pytest.mark.parametrize("writer", list(DRIVER_ROWS))
def test_delete_writes_sorted_position_deletes_per_partition(spark, ns, events, iceberg_catalog, engines, writer):
    """Written by the driver (few deletes), or by a Spark job (more than
    spark.lakerules.write.positionDeleteDriverRows: the positions were only counted; or 0), the
    delete files are the same: the spec's schema, sorted, one per partition."""
    name = events.split(".", 1)[1]
    data_before = sorted(f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA))
    with settings(spark, {"spark.lakerules.write.positionDeleteDriverRows": DRIVER_ROWS[writer]}):
        (row,) = spark.sql(f"DELETE FROM {events} WHERE id % 5 = 0 OR v > 13.6").collect()
    gone = {i for i in range(30) if i % 5 == 0 or i / 2 > 13.6}
    assert row.num_affected_rows == len(gone)
    assert ids(spark, events) == sorted(set(range(30)) - gone)
    # data files untouched; one delete file per partition, in that partition, pointing at its file
    assert sorted(f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA)) == data_before
    data = {f.file_path: f for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    deletes = files(iceberg_catalog, name, DataFileContent.POSITION_DELETES)
    assert len(deletes) == 3
    t = iceberg_catalog.load_table(name)
    for d in deletes:
        with t.io.new_input(d.file_path).open() as fh:
            arrow = pq.read_table(fh)
        schema = arrow.schema
        assert [f.name for f in schema] == ["file_path", "pos"]
        assert [f.metadata[b"PARQUET:field_id"] for f in schema] == [b"2147483546", b"2147483545"]
        assert [f.nullable for f in schema] == [False, False]  # required, as the spec says
        rows = list(zip(arrow.column("file_path").to_pylist(), arrow.column("pos").to_pylist()))
        assert rows == sorted(rows)
        assert d.lower_bounds[2147483545] == min(p for _, p in rows).to_bytes(8, "little")
        assert d.upper_bounds[2147483546] == max(p for p, _ in rows).encode()
        assert {p for p, _ in rows} <= set(data)  # exactly the manifest's paths
        assert {tuple(data[p].partition) for p, _ in rows} == {tuple(d.partition)}
        assert d.record_count == len(rows)
    summary = t.current_snapshot().summary
    assert summary.operation.value == "delete"
    assert summary["added-position-deletes"] == str(len(gone))
    assert summary["added-delete-files"] == "3"
    assert summary["total-records"] == "30" and summary["total-position-deletes"] == str(len(gone))
    engines.assert_same(events, expected=[(i, "abc"[i % 3], i / 2) for i in range(30) if i not in gone])


def test_deleted_rows_are_not_matched_again(spark, events, iceberg_catalog):
    name = events.split(".", 1)[1]
    assert spark.sql(f"DELETE FROM {events} WHERE id < 4").collect()[0].num_affected_rows == 4
    before = snapshot_id(iceberg_catalog, name)
    assert spark.sql(f"DELETE FROM {events} WHERE id < 4").collect()[0].num_affected_rows == 0
    assert snapshot_id(iceberg_catalog, name) == before  # nothing matched: no snapshot
    assert spark.sql(f"DELETE FROM {events} WHERE id < 6").collect()[0].num_affected_rows == 2
    assert ids(spark, events) == list(range(6, 30))


def test_subqueries_and_correlated_exists(spark, ns, events, engines):
    spark.sql(f"CREATE TABLE lake.{ns}.other (id BIGINT, tag STRING)")
    spark.sql(f"INSERT INTO lake.{ns}.other VALUES (1, 'x'), (2, 'y'), (20, 'x'), (21, NULL)")
    n = spark.sql(f"DELETE FROM {events} WHERE id IN (SELECT id FROM lake.{ns}.other WHERE tag = 'x')").collect()
    assert n[0].num_affected_rows == 2
    n = spark.sql(f"""DELETE FROM {events} AS e WHERE EXISTS
                      (SELECT 1 FROM lake.{ns}.other o WHERE o.id + 1 = e.id AND e.kind <> 'a')""").collect()
    # o.id + 1 in {2, 3, 21, 22}; kinds: 2 -> c, 3 -> a (kept), 21 -> a (kept), 22 -> b
    assert n[0].num_affected_rows == 2
    n = spark.sql(f"DELETE FROM {events} WHERE id * 2 > v * 4 - 1 AND kind IN ('b', 'c') AND id > 25").collect()
    assert n[0].num_affected_rows == 3  # 26 (c), 28 (b), 29 (c)
    expected = sorted(set(range(30)) - {1, 20, 2, 22, 26, 28, 29})
    assert ids(spark, events) == expected
    engines.assert_same(events, "id", expected=[(i,) for i in expected])


def test_partition_predicate_drops_whole_files_without_delete_files(spark, events, iceberg_catalog, engines):
    name = events.split(".", 1)[1]
    (row,) = spark.sql(f"DELETE FROM {events} WHERE kind = 'b'").collect()
    assert row.num_affected_rows == 10
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []
    assert sorted(tuple(f.partition) for f in files(iceberg_catalog, name, DataFileContent.DATA)) == [("a",), ("c",)]
    # metrics prove it too: kind a holds ids 0, 3, ..., 27, all >= 0 and < 100
    (row,) = spark.sql(f"DELETE FROM {events} WHERE id >= 0 AND id < 100 AND kind = 'a'").collect()
    assert row.num_affected_rows == 10
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []
    # a condition Spark evaluates that happens to match a whole file drops it as well
    (row,) = spark.sql(f"DELETE FROM {events} WHERE id % 3 = 2").collect()
    assert row.num_affected_rows == 10
    assert files(iceberg_catalog, name) == []
    engines.assert_same(events, expected=[])


@pytest.mark.parametrize("writer", list(DRIVER_ROWS))
def test_a_file_matched_whole_gets_no_delete_file(spark, events, iceberg_catalog, engines, writer):
    """A condition Spark evaluates matching every row of one file (kind c: id % 3 = 2) and one
    row of another: the first is removed whole, and no delete file names it, whichever writer."""
    name = events.split(".", 1)[1]
    c_file = next(f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA) if tuple(f.partition) == ("c",))
    with settings(spark, {"spark.lakerules.write.positionDeleteDriverRows": DRIVER_ROWS[writer]}):
        (row,) = spark.sql(f"DELETE FROM {events} WHERE id % 3 = 2 OR id = 3").collect()
    assert row.num_affected_rows == 11
    assert sorted(tuple(f.partition) for f in files(iceberg_catalog, name, DataFileContent.DATA)) == [("a",), ("b",)]
    (deletes,) = files(iceberg_catalog, name, DataFileContent.POSITION_DELETES)
    t = iceberg_catalog.load_table(name)
    with t.io.new_input(deletes.file_path).open() as fh:
        arrow = pq.read_table(fh)
    assert arrow.num_rows == 1 and c_file not in arrow.column("file_path").to_pylist()
    assert t.current_snapshot().summary["deleted-data-files"] == "1"
    engines.assert_same(events, expected=[(i, "abc"[i % 3], i / 2) for i in range(30) if i % 3 != 2 and i != 3])


def test_negations_are_not_taken_as_whole_file_proofs(spark, ns, iceberg_catalog):
    """SQL's NULL != 'x' is not true: a file with NULLs must not be dropped by kind != 'x'."""
    table = f"lake.{ns}.nulls"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ REPARTITION(1) */ * FROM VALUES (1, 'a'), (2, NULL), (3, 'b')")
    assert spark.sql(f"DELETE FROM {table} WHERE kind != 'x'").collect()[0].num_affected_rows == 2
    assert [tuple(r) for r in spark.table(table).collect()] == [(2, None)]
    assert spark.sql(f"DELETE FROM {table} WHERE NOT kind IN ('x')").collect()[0].num_affected_rows == 0


def test_delete_without_where_is_a_truncate(spark, events, iceberg_catalog, engines):
    name = events.split(".", 1)[1]
    spark.sql(f"DELETE FROM {events} WHERE id = 4")
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES)
    (row,) = spark.sql(f"DELETE FROM {events}").collect()
    assert row.num_affected_rows == 29
    assert files(iceberg_catalog, name) == []  # no data file, no delete file
    summary = iceberg_catalog.load_table(name).current_snapshot().summary
    assert summary["total-records"] == "0" and summary["total-delete-files"] == "0"
    engines.assert_same(events, expected=[])
    spark.sql(f"INSERT INTO {events} VALUES (100, 'a', 1.0)")
    assert ids(spark, events) == [100]


def test_copy_on_write_rewrites_affected_files(spark, events, iceberg_catalog, engines):
    name = events.split(".", 1)[1]
    spark.sql(f"ALTER TABLE {events} SET TBLPROPERTIES ('write.delete.mode' = 'copy-on-write')")
    before = {tuple(f.partition): f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    (row,) = spark.sql(f"DELETE FROM {events} WHERE id IN (0, 3, 4)").collect()
    assert row.num_affected_rows == 3
    after = {tuple(f.partition): f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []
    assert after[("c",)] == before[("c",)]  # no matched row: untouched
    assert after[("a",)] != before[("a",)] and after[("b",)] != before[("b",)]
    expected = [(i, "abc"[i % 3], i / 2) for i in range(30) if i not in (0, 3, 4)]
    engines.assert_same(events, expected=expected)


def test_a_file_removed_meanwhile_is_a_conflict(spark, events, iceberg_catalog, monkeypatch):
    """A concurrent writer removes a data file the new deletes point at (as OPTIMIZE would):
    the DELETE must fail cleanly, not commit deletes that would resurrect nothing."""
    name = events.split(".", 1)[1]
    real = row_delta.commit

    def concurrent_then_commit(table, *args, **kwargs):
        # another writer rewrites partition 'a' (same rows, new file) before this commit lands
        other = iceberg_catalog.load_table(name)
        rows = other.scan(row_filter=EqualTo("kind", "a")).to_arrow()
        other.overwrite(rows, overwrite_filter=EqualTo("kind", "a"))
        return real(table, *args, **kwargs)

    monkeypatch.setattr(rowlevel.row_delta, "commit", concurrent_then_commit)
    with pytest.raises(Exception, match="conflict on .*concurrently deleted.*nothing was committed"):
        spark.sql(f"DELETE FROM {events} WHERE id IN (3, 4)").collect()
    monkeypatch.setattr(rowlevel.row_delta, "commit", real)
    assert ids(spark, events) == list(range(30))
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []
    assert orphans(iceberg_catalog, name) == set()  # the delete files written were removed
    # run again on the new snapshot: it goes through
    assert spark.sql(f"DELETE FROM {events} WHERE id IN (3, 4)").collect()[0].num_affected_rows == 2


def test_an_unrelated_commit_meanwhile_is_retried(spark, events, iceberg_catalog, monkeypatch):
    name = events.split(".", 1)[1]
    real = row_delta.commit
    calls = []

    def concurrent_then_commit(table, *args, **kwargs):
        if not calls:
            calls.append(1)
            spark.sql(f"INSERT INTO {events} VALUES (100, 'c', 0.5)")  # matches no part of the condition
        return real(table, *args, **kwargs)

    monkeypatch.setattr(rowlevel.row_delta, "commit", concurrent_then_commit)
    assert spark.sql(f"DELETE FROM {events} WHERE id < 3").collect()[0].num_affected_rows == 3
    assert ids(spark, events) == list(range(3, 30)) + [100]


def test_serializable_isolation_refuses_new_matching_rows(spark, events, iceberg_catalog, monkeypatch):
    real = row_delta.commit

    def concurrent_then_commit(table, *args, **kwargs):
        spark.sql(f"INSERT INTO {events} VALUES (1, 'b', 0.5)")  # a row the DELETE should have seen
        return real(table, *args, **kwargs)

    monkeypatch.setattr(rowlevel.row_delta, "commit", concurrent_then_commit)
    with pytest.raises(Exception, match="conflict on .*added meanwhile"):
        spark.sql(f"DELETE FROM {events} WHERE id < 3").collect()
    monkeypatch.setattr(rowlevel.row_delta, "commit", real)
    assert ids(spark, events).count(1) == 2


def test_two_writers_at_once(spark, events, engines):
    """Two DELETEs on different rows, started together: both land (one retries), nothing lost."""
    errors = []

    def run(condition):
        try:
            spark.sql(f"DELETE FROM {events} WHERE {condition}").collect()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in ("id < 5", "id >= 25")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # under serializable isolation each may also see the other's rows as a conflict only if
    # it added data; deletes add none, so both must land
    assert not errors, errors
    expected = list(range(5, 25))
    assert ids(spark, events) == expected
    engines.assert_same(events, "id", expected=[(i,) for i in expected])


def test_explain_delete_does_not_run(spark, events, iceberg_catalog):
    name = events.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    text = "\n".join(r[0] for r in spark.sql(f"EXPLAIN DELETE FROM {events} WHERE id = 4").collect())
    assert "WriteDeletes" in text and "merge-on-read" in text and "file_path, pos" in text
    assert snapshot_id(iceberg_catalog, name) == before
    assert len(ids(spark, events)) == 30


def test_bad_deletes_change_nothing(spark, events, iceberg_catalog):
    name = events.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    with pytest.raises(Exception, match="nope"):
        spark.sql(f"DELETE FROM {events} WHERE nope = 1")
    with pytest.raises(Exception, match="(?i)determin"):
        spark.sql(f"DELETE FROM {events} WHERE rand() < 0.5").collect()
    spark.sql(f"ALTER TABLE {events} SET TBLPROPERTIES ('write.delete.mode' = 'sometimes')")
    mid = snapshot_id(iceberg_catalog, name)
    with pytest.raises(Exception, match="write.delete.mode"):
        spark.sql(f"DELETE FROM {events} WHERE id = 1")
    assert snapshot_id(iceberg_catalog, name) == mid
    assert before == mid or mid is not None
    assert len(ids(spark, events)) == 30


def test_delete_across_partition_evolution(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.evo"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP) PARTITIONED BY (days(ts))")
    spark.sql(f"INSERT INTO {table} SELECT id, TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id AS INT), 0, 0) FROM range(48)")
    spark.sql(f"ALTER TABLE {table} REPLACE PARTITION FIELD days(ts) WITH hours(ts)")
    # two rows an hour: the delete below takes one row of some hourly files, never a whole file
    spark.sql(f"INSERT INTO {table} SELECT id + 100, TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id DIV 2 AS INT), 0, 0) FROM range(48)")
    (row,) = spark.sql(f"DELETE FROM {table} WHERE id % 10 = 1").collect()
    assert row.num_affected_rows == 10
    name = f"{ns}.evo"
    deletes = files(iceberg_catalog, name, DataFileContent.POSITION_DELETES)
    assert {d.spec_id for d in deletes} == {0, 1}
    expected = sorted(i for i in list(range(48)) + list(range(100, 148)) if i % 10 != 1)
    engines.assert_same(table, "id", expected=[(i,) for i in expected])
    # an older snapshot still has every row
    first = iceberg_catalog.load_table(name).history()[1].snapshot_id
    assert spark.sql(f"SELECT count(*) FROM {table} VERSION AS OF {first}").collect()[0][0] == 96


@pytest.mark.parametrize("statement, expected", [
    ("DELETE FROM {t} WHERE id IN (1, 4)", [(2, "a"), (3, "c")]),
    ("UPDATE {t} SET kind = 'z' WHERE id IN (1, 4)", [(1, "z"), (2, "a"), (3, "c"), (4, "z")]),
    ("MERGE INTO {t} x USING (SELECT 1 AS id) s ON x.id = s.id WHEN MATCHED THEN DELETE",
     [(2, "a"), (3, "c"), (4, "d")]),
])
def test_row_level_writes_after_a_partition_field_was_added(spark, ns, iceberg_catalog, engines, statement, expected):
    """Delete files against files of an older spec with fewer partition fields are counted in the
    snapshot summary under their own spec (pyiceberg's summary used the current one and failed)."""
    table = f"lake.{ns}.added_field"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 'a'), (2, 'a'), (3, 'c')")
    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD bucket(4, id)")
    spark.sql(f"INSERT INTO {table} VALUES (4, 'd')")
    spark.sql(f"INSERT INTO {table} VALUES (5, 'a')")
    spark.sql(statement.format(t=table))
    expected = sorted([*expected, (5, "a")])
    assert files(iceberg_catalog, f"{ns}.added_field", DataFileContent.POSITION_DELETES)  # against spec 0
    engines.assert_same(table, "id, kind", expected=expected)
    t = iceberg_catalog.load_table(f"{ns}.added_field")
    live = files(iceberg_catalog, f"{ns}.added_field", DataFileContent.DATA)
    assert int(t.current_snapshot().summary["total-records"]) == sum(f.record_count for f in live)


def test_conditions_on_fields_of_nested_structs(spark, ns, iceberg_catalog, engines):
    """A condition on a field of a struct inside a struct: pruning reads files by the field's
    bounds, and a file whose every row matches is read (its bounds prove nothing to pyiceberg's
    strict evaluator, which reads top-level columns only), never dropped unread or wrongly."""
    t = f"lake.{ns}.nested"
    spark.sql(f"CREATE TABLE {t} (id INT, s STRUCT<a: INT, c: STRUCT<d: STRING, e: STRING>>)")
    row = "({0}, named_struct('a', {0}, 'c', named_struct('d', '{1}', 'e', '{2}')))"
    spark.sql(f"INSERT INTO {t} VALUES {row.format(1, 'x', 'p')}, {row.format(2, 'x', 'q')}")  # every row d = 'x'
    spark.sql(f"INSERT INTO {t} VALUES {row.format(3, 'x', 'p')}, {row.format(4, 'y', 'q')}, (5, NULL)")
    (r,) = spark.sql(f"DELETE FROM {t} WHERE s.c.d = 'x' AND s.c.e = 'p'").collect()
    assert r.num_affected_rows == 2
    engines.assert_same(t, "id", expected=[(2,), (4,), (5,)])
    (r,) = spark.sql(f"UPDATE {t} SET s.c.e = 'u' WHERE s.c.d = 'y' OR s.a = 2").collect()
    assert r.num_affected_rows == 2
    spark.sql(f"""MERGE INTO {t} t USING (SELECT * FROM VALUES (2, 'x'), (4, 'y') AS src(id, d)) src
                  ON t.id = src.id AND t.s.c.d = src.d
                  WHEN MATCHED AND t.s.c.d = 'y' THEN DELETE
                  WHEN MATCHED AND t.s.c.e = 'u' THEN UPDATE SET s.a = 20""").collect()
    engines.assert_same(t, expected=[(2, {"a": 20, "c": {"d": "x", "e": "u"}}), (5, None)])
    (r,) = spark.sql(f"DELETE FROM {t} WHERE s.c.d = 'x'").collect()  # the whole first file, read
    assert r.num_affected_rows == 1
    engines.assert_same(t, "id", expected=[(5,)])
