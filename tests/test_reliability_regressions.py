"""Failures the model test (tests/test_model.py) and the concurrency test (tests/test_concurrency.py)
found, each kept as a small explicit test."""

from __future__ import annotations

import pytest

from lakerules.write import row_delta
from lakerules.rowlevel import run as rowlevel


@pytest.fixture
def small(spark, ns):
    table = f"lake.{ns}.r"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v BIGINT)")
    spark.sql(f"INSERT INTO {table} SELECT /*+ REPARTITION(1) */ id, -1 FROM range(20)")  # one data file
    return table


def meanwhile(monkeypatch, *statements):
    """Run statements (another writer) once, just before the next row-level commit lands."""
    real, calls = row_delta.commit, []

    def concurrent_then_commit(table, *args, **kwargs):
        if not calls:
            calls.append(1)
            for s in statements:
                s()
        return real(table, *args, **kwargs)

    monkeypatch.setattr(rowlevel.row_delta, "commit", concurrent_then_commit)
    return lambda: monkeypatch.setattr(rowlevel.row_delta, "commit", real)


# ---- concurrency: rows deleted meanwhile must not come back ---------------------------------------
# Found by the concurrency test: an UPDATE (or MERGE) read row 5, another writer deleted it, and
# the UPDATE's commit (a position delete of the old row plus the new row) still landed, so the
# deleted row came back with its new value. Now a delete file added meanwhile that may apply to a
# data file the statement deletes from is a conflict (as Iceberg's validateNoConflictingDeleteFiles).


def test_update_of_a_row_deleted_meanwhile_is_a_conflict(spark, small, engines, monkeypatch):
    restore = meanwhile(monkeypatch, lambda: spark.sql(f"DELETE FROM {small} WHERE id = 5").collect())
    with pytest.raises(Exception, match="conflict on .*nothing was committed"):
        spark.sql(f"UPDATE {small} SET v = 7 WHERE id % 5 = 0").collect()
    restore()
    engines.assert_same(small, expected=[(i, -1) for i in range(20) if i != 5])
    assert spark.sql(f"UPDATE {small} SET v = 7 WHERE id % 5 = 0").collect()[0][0] == 3  # again: lands


def test_merge_update_of_a_row_deleted_meanwhile_is_a_conflict(spark, small, engines, monkeypatch):
    restore = meanwhile(monkeypatch, lambda: spark.sql(f"DELETE FROM {small} WHERE id = 5").collect())
    with pytest.raises(Exception, match="conflict on .*nothing was committed"):
        spark.sql(f"""MERGE INTO {small} t USING (SELECT * FROM VALUES (5L), (6L) AS s(id)) s ON t.id = s.id
                      WHEN MATCHED THEN UPDATE SET v = 7""").collect()
    restore()
    engines.assert_same(small, expected=[(i, -1) for i in range(20) if i != 5])


def test_copy_on_write_over_a_delete_two_commits_back_is_a_conflict(spark, small, engines, monkeypatch):
    """A copy-on-write DELETE carries row 6 over into its new file; another writer deleted row 6,
    then a third commit landed on top: the DELETE must still see that row 6's delete is new."""
    spark.sql(f"ALTER TABLE {small} SET TBLPROPERTIES ('write.delete.mode' = 'copy-on-write')")
    restore = meanwhile(
        monkeypatch,
        lambda: spark.sql(f"ALTER TABLE {small} SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')"),
        lambda: spark.sql(f"DELETE FROM {small} WHERE id = 6").collect(),
        lambda: spark.sql(f"INSERT INTO {small} VALUES (100, -1)"),
    )
    with pytest.raises(Exception, match="conflict on .*nothing was committed"):
        spark.sql(f"DELETE FROM {small} WHERE id = 5").collect()
    restore()
    engines.assert_same(small, expected=[(i, -1) for i in range(20) if i != 6] + [(100, -1)])
