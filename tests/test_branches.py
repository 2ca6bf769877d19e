"""Branches, tags and write-audit-publish (lakerules.iceberg.refs, lakerules.procedures.history.run_ref_change): refs
DDL, reads and writes on `lake.db.t.branch_b` / `tag_v`, and WAP, with the rows of main and of
each branch checked against pyiceberg (and DuckDB) after the statements."""

from __future__ import annotations

import pytest

from errors_util import refused


def ids_at(catalog, t: str, ref: str = "main") -> list[int]:
    table = catalog.load_table(t.split(".", 1)[1])
    r = table.metadata.refs.get(ref)
    if r is None:
        return []
    return sorted(row["id"] for row in table.scan(snapshot_id=r.snapshot_id).to_arrow().to_pylist())


def duck_ids_at(duck, catalog, t: str, ref: str = "main") -> list[int]:
    table = catalog.load_table(t.split(".", 1)[1])
    sid = table.metadata.refs[ref].snapshot_id
    location = table.metadata_location.replace("'", "''")
    return sorted(r[0] for r in duck.execute(f"SELECT id FROM iceberg_scan('{location}', snapshot_from_id={sid})").fetchall())


def ours(spark, t: str) -> list[int]:
    return sorted(r[0] for r in spark.sql(f"SELECT id FROM {t}").collect())


def refs_of(catalog, t: str) -> dict:
    table = catalog.load_table(t.split(".", 1)[1])
    return {n: (r.snapshot_ref_type.value, r.snapshot_id, r.max_ref_age_ms, r.min_snapshots_to_keep,
                r.max_snapshot_age_ms) for n, r in table.metadata.refs.items()}


def test_refs_ddl(spark, ns, iceberg_catalog):
    t = f"lake.{ns}.refs_ddl"
    spark.sql(f"CREATE TABLE {t} (id INT)")
    refused(spark, f"ALTER TABLE {t} CREATE BRANCH b", "no snapshot yet")
    spark.sql(f"INSERT INTO {t} VALUES (1)")
    first = iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id
    spark.sql(f"INSERT INTO {t} VALUES (2)")
    second = iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH b AS OF VERSION {first} RETAIN 2 DAYS "
              "WITH SNAPSHOT RETENTION 3 SNAPSHOTS 1 HOURS")
    spark.sql(f"ALTER TABLE {t} CREATE TAG v1 AS OF VERSION {first} RETAIN 30 MINUTES")
    spark.sql(f"/* c */ ALTER TABLE {t} CREATE TAG `v-2`")
    refs = refs_of(iceberg_catalog, t)
    assert refs["b"] == ("branch", first, 2 * 86_400_000, 3, 3_600_000)
    assert refs["v1"] == ("tag", first, 1_800_000, None, None)
    assert refs["v-2"] == ("tag", second, None, None, None)
    refused(spark, f"ALTER TABLE {t} CREATE BRANCH b", "already has a branch 'b'")
    refused(spark, f"ALTER TABLE {t} CREATE BRANCH v1", "'v1' is a tag")
    refused(spark, f"ALTER TABLE {t} REPLACE BRANCH nope", "no branch 'nope'")
    refused(spark, f"ALTER TABLE {t} CREATE TAG v3 AS OF VERSION 42", "no snapshot 42")
    refused(spark, f"ALTER TABLE {t} DROP BRANCH main", "main branch cannot be dropped")
    refused(spark, f"ALTER TABLE {t} DROP TAG b", "'b' is a branch")
    with pytest.raises(Exception, match="PARSE_SYNTAX_ERROR.*a tag has no snapshot retention"):
        spark.sql(f"ALTER TABLE {t} CREATE TAG v3 WITH SNAPSHOT RETENTION 2 SNAPSHOTS")
    assert refs_of(iceberg_catalog, t) == refs  # nothing changed by the refused statements
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH IF NOT EXISTS b AS OF VERSION {second}")  # exists: nothing
    spark.sql(f"ALTER TABLE {t} REPLACE BRANCH b")  # to the current snapshot, retention kept
    spark.sql(f"ALTER TABLE {t} CREATE OR REPLACE TAG v1 RETAIN 1 DAYS")
    spark.sql(f"ALTER TABLE {t} CREATE OR REPLACE BRANCH c AS OF VERSION {first}")
    refs = refs_of(iceberg_catalog, t)
    assert refs["b"] == ("branch", second, 2 * 86_400_000, 3, 3_600_000)
    assert refs["v1"] == ("tag", second, 86_400_000, None, None)
    assert refs["c"] == ("branch", first, None, None, None)
    spark.sql(f"ALTER TABLE {t} DROP TAG `v-2`")
    spark.sql(f"ALTER TABLE {t} DROP BRANCH IF EXISTS nope")
    spark.sql(f"ALTER TABLE {t} DROP BRANCH c")
    refused(spark, f"ALTER TABLE {t} DROP BRANCH c", "no branch 'c'")
    assert sorted(refs_of(iceberg_catalog, t)) == ["b", "main", "v1"]
    assert ours(spark, f"{t}.tag_v1") == [1, 2]
    assert ours(spark, f"{t} VERSION AS OF 'b'") == [1, 2]


def test_reads_and_writes_on_a_branch(spark, ns, iceberg_catalog, duck):
    t = f"lake.{ns}.br"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING) TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH b")
    spark.sql(f"ALTER TABLE {t} CREATE TAG v1")
    spark.sql(f"INSERT INTO {t} VALUES (4, 'main')")

    def check(main: list[int], branch: list[int]):
        assert ids_at(iceberg_catalog, t) == main == duck_ids_at(duck, iceberg_catalog, t)
        assert ids_at(iceberg_catalog, t, "b") == branch == ours(spark, f"{t}.branch_b")
        assert duck_ids_at(duck, iceberg_catalog, t, "b") == branch

    check([1, 2, 3, 4], [1, 2, 3])
    assert ours(spark, t) == [1, 2, 3, 4]
    assert ours(spark, f"{t} VERSION AS OF 'b'") == [1, 2, 3]
    spark.sql(f"INSERT INTO {t}.branch_b VALUES (10, 'x'), (11, 'y')")
    check([1, 2, 3, 4], [1, 2, 3, 10, 11])
    spark.sql(f"DELETE FROM {t}.branch_b WHERE id = 2")
    check([1, 2, 3, 4], [1, 3, 10, 11])
    spark.sql(f"UPDATE {t}.branch_b SET id = id + 100 WHERE id = 3")
    check([1, 2, 3, 4], [1, 10, 11, 103])
    spark.sql(f"MERGE INTO {t}.branch_b x USING (SELECT 1 AS id, 'm' AS v UNION ALL SELECT 20, 'n') s "
              "ON x.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *")
    check([1, 2, 3, 4], [10, 11, 20, 103])
    spark.createDataFrame([(30, "df")], "id INT, v STRING").writeTo(f"{t}.branch_b").append()
    check([1, 2, 3, 4], [10, 11, 20, 30, 103])
    spark.sql(f"OPTIMIZE {t}.branch_b")
    check([1, 2, 3, 4], [10, 11, 20, 30, 103])
    assert ours(spark, t) == [1, 2, 3, 4]
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    head = table.snapshot_by_id(table.metadata.refs["b"].snapshot_id)
    assert head.summary.operation.value == "replace"
    assert duck_ids_at(duck, iceberg_catalog, t, "b") == [10, 11, 20, 30, 103]
    assert duck_ids_at(duck, iceberg_catalog, t) == [1, 2, 3, 4]
    assert ours(spark, f"{t}.tag_v1") == [1, 2, 3]
    # a tag is never written; a missing branch is an error; a ref name and a read option contradict
    before = refs_of(iceberg_catalog, t)
    refused(spark, f"INSERT INTO {t}.tag_v1 VALUES (5, 'x')", "tag 'v1'", "never written")
    refused(spark, f"DELETE FROM {t}.tag_v1 WHERE id = 1", "tag 'v1'")
    refused(spark, f"SELECT * FROM {t}.branch_nope", "no branch 'nope'")
    refused(spark, lambda: spark.read.option("snapshot-id", 1).table(f"{t}.branch_b").collect(), "give one")
    assert refs_of(iceberg_catalog, t) == before


def test_write_audit_publish(spark, ns, iceberg_catalog, duck):
    t = f"lake.{ns}.wap"
    spark.sql(f"CREATE TABLE {t} (id INT) TBLPROPERTIES ('write.wap.enabled' = 'true')")
    spark.sql(f"INSERT INTO {t} VALUES (1), (2)")
    try:
        # spark.wap.branch: writes go to the branch (made from main by the first write), reads read it
        spark.conf.set("spark.wap.branch", "audit")
        spark.sql(f"INSERT INTO {t} VALUES (3)")
        spark.sql(f"DELETE FROM {t} WHERE id = 1")
        assert ids_at(iceberg_catalog, t) == [1, 2]
        assert ids_at(iceberg_catalog, t, "audit") == [2, 3] == ours(spark, t)
        refused(spark, f"INSERT INTO {t}.branch_other VALUES (9)", "no branch 'other'")
        spark.conf.unset("spark.wap.branch")
        assert ours(spark, t) == [1, 2]
        spark.sql(f"CALL lake.system.fast_forward(table => '{t.split('.', 1)[1]}', branch => 'main', to => 'audit')")
        assert ids_at(iceberg_catalog, t) == [2, 3] == duck_ids_at(duck, iceberg_catalog, t)
        # spark.wap.id: the write is staged, main does not move until published
        spark.conf.set("spark.wap.id", "w1")
        spark.sql(f"INSERT INTO {t} VALUES (4)")
        table = iceberg_catalog.load_table(t.split(".", 1)[1])
        staged = [s for s in table.snapshots() if s.summary.get("wap.id") == "w1"]
        assert len(staged) == 1 and staged[0].snapshot_id not in {r.snapshot_id for r in table.metadata.refs.values()}
        assert ids_at(iceberg_catalog, t) == [2, 3] == ours(spark, t)
        spark.conf.set("spark.wap.branch", "audit")
        refused(spark, f"INSERT INTO {t} VALUES (5)", "both spark.wap.id", "spark.wap.branch")
        spark.conf.unset("spark.wap.branch")
        refused(spark, f"OPTIMIZE {t}", "spark.wap.id")
    finally:
        spark.conf.unset("spark.wap.id")
        spark.conf.unset("spark.wap.branch")
    spark.sql(f"CALL lake.system.publish_changes(table => '{t.split('.', 1)[1]}', wap_id => 'w1')")
    assert ids_at(iceberg_catalog, t) == [2, 3, 4] == ours(spark, t) == duck_ids_at(duck, iceberg_catalog, t)


def test_a_branch_write_is_validated_against_the_branch_head(spark, ns, iceberg_catalog, monkeypatch):
    """A DELETE on a branch conflicts with a commit that removed its file on that branch meanwhile;
    a commit on main meanwhile is no conflict (the branch's head did not move)."""
    from lakerules.write import row_delta
    from lakerules.rowlevel import run as rowlevel

    t = f"lake.{ns}.brc"
    name = t.split(".", 1)[1]
    spark.sql(f"CREATE TABLE {t} (id INT) TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    spark.sql(f"INSERT INTO {t} VALUES (1), (2), (3)")
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH b")
    real = row_delta.commit

    def meanwhile(branch):
        def concurrent_then_commit(table, *args, **kwargs):
            other = iceberg_catalog.load_table(name)
            rows = other.scan(snapshot_id=other.metadata.refs[branch].snapshot_id).to_arrow()
            other.overwrite(rows, branch=branch)  # the same rows in a new file: the old one removed
            return real(table, *args, **kwargs)
        monkeypatch.setattr(rowlevel.row_delta, "commit", concurrent_then_commit)

    meanwhile("b")
    refused(spark, f"DELETE FROM {t}.branch_b WHERE id = 2", "conflict", "nothing was committed")
    meanwhile("main")
    spark.sql(f"DELETE FROM {t}.branch_b WHERE id = 2")
    monkeypatch.setattr(rowlevel.row_delta, "commit", real)
    assert ids_at(iceberg_catalog, t, "b") == [1, 3] == ours(spark, f"{t}.branch_b")
    assert ids_at(iceberg_catalog, t) == [1, 2, 3]
