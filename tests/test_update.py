"""UPDATE: the split write (deletes + new rows in one snapshot), copy-on-write, and errors."""

from __future__ import annotations

import pytest
from pyiceberg.manifest import DataFileContent

from lakerules.write import row_delta
from lakerules.rowlevel import run as rowlevel

from settings_util import settings
from test_delete import DRIVER_ROWS, files, orphans, snapshot_id


@pytest.fixture
def people(spark, ns):
    """30 rows in 3 identity partitions (team a/b/c)."""
    table = f"lake.{ns}.people"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, team STRING, score INT, note STRING) PARTITIONED BY (team)")
    spark.sql(f"""INSERT INTO {table} SELECT /*+ REPARTITION(1) */ id,
                  element_at(array('a', 'b', 'c'), CAST(id % 3 AS INT) + 1), CAST(id * 10 AS INT), NULL FROM range(30)""")
    return table


def rows(spark, table):
    return sorted(tuple(r) for r in spark.table(table).collect())


def model():
    return {i: (i, "abc"[i % 3], i * 10, None) for i in range(30)}


@pytest.mark.parametrize("writer", list(DRIVER_ROWS))
def test_split_write_is_one_snapshot_of_deletes_and_new_rows(spark, people, iceberg_catalog, engines, writer):
    """The same snapshot whichever writes the delete files: the driver (positions collected with
    the matches' counts), or a Spark job (more than positionDeleteDriverRows: only counted; or 0)."""
    name = people.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    data_before = {f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    with settings(spark, {"spark.lakerules.write.positionDeleteDriverRows": DRIVER_ROWS[writer]}):
        (row,) = spark.sql(f"UPDATE {people} SET score = score + 1, note = 'x' WHERE id % 4 = 1").collect()
    want = model()
    for i in want:
        if i % 4 == 1:
            want[i] = (i, "abc"[i % 3], i * 10 + 1, "x")
    assert row.num_affected_rows == sum(1 for i in range(30) if i % 4 == 1)
    assert rows(spark, people) == sorted(want.values())
    t = iceberg_catalog.load_table(name)
    assert t.current_snapshot().parent_snapshot_id == before  # one snapshot
    summary = t.current_snapshot().summary
    assert summary.operation.value == "overwrite"
    assert summary["added-position-deletes"] == str(row.num_affected_rows)
    assert summary["added-records"] == str(row.num_affected_rows)
    assert data_before <= {f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    # new rows: one file per partition (clustered by the new values' partition)
    new = [f for f in files(iceberg_catalog, name, DataFileContent.DATA) if f.file_path not in data_before]
    assert sorted(tuple(f.partition) for f in new) == [("a",), ("b",), ("c",)]
    deletes = files(iceberg_catalog, name, DataFileContent.POSITION_DELETES)
    assert sorted(tuple(f.partition) for f in deletes) == [("a",), ("b",), ("c",)]
    assert sum(f.record_count for f in deletes) == row.num_affected_rows
    assert orphans(iceberg_catalog, name) == set()
    engines.assert_same(people, expected=list(want.values()))


def test_updating_a_partition_column_moves_rows(spark, people, iceberg_catalog, engines):
    name = people.split(".", 1)[1]
    spark.sql(f"UPDATE {people} SET team = 'z' WHERE id IN (1, 2, 4)")
    want = model()
    for i in (1, 2, 4):
        want[i] = (i, "z", i * 10, None)
    assert rows(spark, people) == sorted(want.values())
    assert ("z",) in {tuple(f.partition) for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    assert spark.sql(f"SELECT count(*) FROM {people} WHERE team = 'z'").collect()[0][0] == 3
    engines.assert_same(people, expected=list(want.values()))


def test_update_across_partition_evolution(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.evo_u"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP) PARTITIONED BY (days(ts))")
    spark.sql(f"INSERT INTO {table} SELECT id, TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id AS INT), 0, 0) FROM range(48)")
    spark.sql(f"ALTER TABLE {table} REPLACE PARTITION FIELD days(ts) WITH hours(ts)")
    (row,) = spark.sql(f"UPDATE {table} SET ts = ts + INTERVAL 30 DAYS WHERE id % 5 = 0").collect()
    assert row.num_affected_rows == 10
    name = f"{ns}.evo_u"
    new = [f for f in files(iceberg_catalog, name, DataFileContent.DATA) if f.spec_id == 1]
    assert len(new) == 10  # one file per new hour, in the current spec
    assert {d.spec_id for d in files(iceberg_catalog, name, DataFileContent.POSITION_DELETES)} == {0}
    got = engines.assert_same(table)
    assert len(got) == 48
    assert spark.sql(f"SELECT count(*) FROM {table} WHERE ts >= '2026-01-20'").collect()[0][0] == 10


def test_update_without_where_rewrites_files(spark, people, iceberg_catalog, engines):
    name = people.split(".", 1)[1]
    spark.sql(f"DELETE FROM {people} WHERE id = 0")  # a delete file that must go too
    (row,) = spark.sql(f"UPDATE {people} SET score = -score").collect()
    assert row.num_affected_rows == 29
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []
    want = [(i, "abc"[i % 3], -i * 10, None) for i in range(1, 30)]
    engines.assert_same(people, expected=want)


def test_copy_on_write_update(spark, people, iceberg_catalog, engines):
    name = people.split(".", 1)[1]
    spark.sql(f"ALTER TABLE {people} SET TBLPROPERTIES ('write.update.mode' = 'copy-on-write')")
    before = {tuple(f.partition): f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    (row,) = spark.sql(f"UPDATE {people} SET note = 'cow' WHERE id IN (SELECT 3 UNION ALL SELECT 6)").collect()
    assert row.num_affected_rows == 2
    after = {tuple(f.partition): f.file_path for f in files(iceberg_catalog, name, DataFileContent.DATA)}
    assert after[("a",)] != before[("a",)] and after[("b",)] == before[("b",)]
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []
    want = model()
    for i in (3, 6):
        want[i] = (i, "a", i * 10, "cow")
    engines.assert_same(people, expected=list(want.values()))


def test_no_match_changes_nothing(spark, people, iceberg_catalog):
    name = people.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    assert spark.sql(f"UPDATE {people} SET score = 0 WHERE id > 1000").collect()[0].num_affected_rows == 0
    assert snapshot_id(iceberg_catalog, name) == before


def test_bad_updates_change_nothing(spark, people, iceberg_catalog):
    name = people.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    for sql, message in [
        (f"UPDATE {people} SET score = 1, score = 2", "Multiple assignments for 'score'"),
        (f"UPDATE {people} SET nope = 1", "nope"),
        (f"UPDATE {people} SET score = 'many'", "(?i)cast"),
        (f"UPDATE {people} SET score = 1 WHERE rand() < 0.5", "(?i)determin"),
    ]:
        with pytest.raises(Exception, match=message):
            spark.sql(sql).collect()
    assert snapshot_id(iceberg_catalog, name) == before
    assert rows(spark, people) == sorted(model().values())
    assert orphans(iceberg_catalog, name) == set()


def test_update_conflict_leaves_the_table_alone(spark, people, iceberg_catalog, monkeypatch):
    from pyiceberg.expressions import EqualTo

    name = people.split(".", 1)[1]
    real = row_delta.commit

    def concurrent_then_commit(table, *args, **kwargs):
        other = iceberg_catalog.load_table(name)
        other.overwrite(other.scan(row_filter=EqualTo("team", "b")).to_arrow(), overwrite_filter=EqualTo("team", "b"))
        return real(table, *args, **kwargs)

    monkeypatch.setattr(rowlevel.row_delta, "commit", concurrent_then_commit)
    with pytest.raises(Exception, match="conflict on"):
        spark.sql(f"UPDATE {people} SET score = 0 WHERE id = 1").collect()
    monkeypatch.setattr(rowlevel.row_delta, "commit", real)
    assert rows(spark, people) == sorted(model().values())
    assert orphans(iceberg_catalog, name) == set()


def test_explain_update_does_not_run(spark, people, iceberg_catalog):
    name = people.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    text = "\n".join(r[0] for r in spark.sql(f"EXPLAIN UPDATE {people} SET score = 0 WHERE id = 1").collect())
    assert "WriteUpdate" in text and "merge-on-read" in text
    assert snapshot_id(iceberg_catalog, name) == before
