"""CALL create_changelog_view (issue 32, item 7): a table's changes as a view, checked against the
changes computed independently from the snapshots' rows (pyiceberg reads each snapshot; a
snapshot's changes are its rows less its parent's, and the other way round, as multisets)."""

from __future__ import annotations

from collections import Counter

import pytest
from errors_util import refused


def _rows_at(iceberg_catalog, ident: str, snapshot_id) -> Counter:
    if snapshot_id is None:
        return Counter()
    t = iceberg_catalog.load_table(ident)
    return Counter(tuple(r.values()) for r in t.scan(snapshot_id=snapshot_id).to_arrow().to_pylist())


def _expected(iceberg_catalog, ident: str, snapshot_ids: list[int], updates_by=None) -> list[tuple]:
    """The changes of these snapshots (oldest first, replace ones already left out), as the view
    lists them: (*row, change type, ordinal, snapshot id); with ``updates_by`` (row -> identity),
    a DELETE and an INSERT of one identity in a snapshot as UPDATE_BEFORE and UPDATE_AFTER."""
    t = iceberg_catalog.load_table(ident)
    out = []
    for ordinal, sid in enumerate(snapshot_ids):
        parent = t.metadata.snapshot_by_id(sid).parent_snapshot_id
        now, before = _rows_at(iceberg_catalog, ident, sid), _rows_at(iceberg_catalog, ident, parent)
        changes = [(r, "DELETE") for r in (before - now).elements()] + [(r, "INSERT") for r in (now - before).elements()]
        if updates_by is not None:
            by_key = Counter((updates_by(r), kind) for r, kind in changes)
            changes = [(r, ("UPDATE_BEFORE" if kind == "DELETE" else "UPDATE_AFTER")
                        if by_key[(updates_by(r), "DELETE")] == 1 and by_key[(updates_by(r), "INSERT")] == 1 else kind)
                       for r, kind in changes]
        out += [(*r, kind, ordinal, sid) for r, kind in changes]
    return sorted(out)


def _view(spark, name: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM `{name}`").collect())


def _snapshots(iceberg_catalog, ident: str) -> list[int]:
    """The current snapshot's ancestry, oldest first, without "replace" snapshots."""
    t = iceberg_catalog.load_table(ident)
    out, s = [], t.current_snapshot()
    while s is not None:
        if s.summary.operation.value != "replace":
            out.append(s.snapshot_id)
        s = t.metadata.snapshot_by_id(s.parent_snapshot_id) if s.parent_snapshot_id is not None else None
    return out[::-1]


@pytest.mark.parametrize("version", ["2", "3"])
def test_changelog_view_against_the_snapshots_rows(spark, ns, iceberg_catalog, version):
    t, ident = f"lake.{ns}.cl{version}", f"{ns}.cl{version}"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) TBLPROPERTIES ('format-version'='{version}')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (5, 'e')")
    spark.sql(f"INSERT INTO {t} VALUES (5, 'e')")  # a duplicate row
    spark.sql(f"UPDATE {t} SET v = 'B' WHERE id = 2")  # merge-on-read: a delete and a new row
    spark.sql(f"DELETE FROM {t} WHERE id = 3")
    spark.sql(f"MERGE INTO {t} x USING (SELECT 1 AS id, 'A' AS v UNION ALL SELECT 4, 'd') s ON x.id = s.id "
              "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *")
    spark.sql(f"OPTIMIZE {t}")  # a replace: no change, left out
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.mode'='copy-on-write')")
    spark.sql(f"DELETE FROM {t} WHERE id = 4")  # the file rewritten: its other rows are carry-overs
    snapshots = _snapshots(iceberg_catalog, ident)
    assert len(snapshots) == 6

    assert spark.sql(f"CALL lake.system.create_changelog_view(table => '{ident}')").collect()[0][0] == f"cl{version}_changes"
    assert spark.table(f"cl{version}_changes").columns == ["id", "v", "_change_type", "_change_ordinal",
                                                           "_commit_snapshot_id"]
    assert _view(spark, f"cl{version}_changes") == _expected(iceberg_catalog, ident, snapshots)

    # updates by identifier columns, over a range of snapshot ids (start exclusive, end inclusive)
    spark.sql(f"CALL lake.system.create_changelog_view(table => '{ident}', changelog_view => 'by id', "
              f"options => map('start-snapshot-id', '{snapshots[1]}', 'end-snapshot-id', '{snapshots[4]}'), "
              "identifier_columns => array('id'))").collect()
    expected = _expected(iceberg_catalog, ident, snapshots[2:5], updates_by=lambda r: r[0])
    assert _view(spark, "by id") == expected
    assert {r[2] for r in expected} == {"UPDATE_BEFORE", "UPDATE_AFTER", "DELETE", "INSERT"}

    if version == "2":
        return  # the range options and net changes do not depend on the format version: checked on v3
    # net changes over the whole history: the rows live now, inserted
    spark.sql(f"CALL lake.system.create_changelog_view(table => '{ident}', changelog_view => 'net', "
              "net_changes => true)").collect()
    net = _view(spark, "net")
    assert sorted(r[:2] for r in net) == sorted(_rows_at(iceberg_catalog, ident, snapshots[-1]).elements())
    assert {r[2] for r in net} == {"INSERT"}

    # timestamps: from the first snapshot at or after the start to the last at or before the end
    table = iceberg_catalog.load_table(ident)
    ts = {s.snapshot_id: s.timestamp_ms for s in table.snapshots()}
    spark.sql(f"CALL lake.system.create_changelog_view(table => '{ident}', changelog_view => 'by_time', "
              f"options => map('start-timestamp', '{ts[snapshots[2]]}', 'end-timestamp', '{ts[snapshots[2]]}'))")
    assert {r[4] for r in _view(spark, "by_time")} <= {snapshots[2]}


def test_a_v3_table_pairs_updates_by_row_id(spark, ns, iceberg_catalog):
    """Without identifier columns a v3 table's updates are known by _row_id, even one that changes
    every column a key could be made of; equal rows stay apart."""
    t, ident = f"lake.{ns}.clr", f"{ns}.clr"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (2, 'b')")
    spark.sql(f"UPDATE {t} SET id = 20, v = 'z' WHERE id = 1")
    spark.sql(f"MERGE INTO {t} x USING (SELECT 7 AS id) s ON x.id = s.id WHEN NOT MATCHED THEN INSERT (id, v) "
              "VALUES (s.id, 'n')")
    snapshots = _snapshots(iceberg_catalog, ident)
    spark.sql(f"CALL lake.system.create_changelog_view(table => '{ident}', compute_updates => true)").collect()
    assert _view(spark, "clr_changes") == sorted([
        (1, "a", "INSERT", 0, snapshots[0]), (2, "b", "INSERT", 0, snapshots[0]), (2, "b", "INSERT", 0, snapshots[0]),
        (1, "a", "UPDATE_BEFORE", 1, snapshots[1]), (20, "z", "UPDATE_AFTER", 1, snapshots[1]),
        (7, "n", "INSERT", 2, snapshots[2])])
    # by identifier columns the same change is a delete and an insert
    spark.sql(f"CALL lake.system.create_changelog_view(table => '{ident}', identifier_columns => array('id'), "
              f"options => map('start-snapshot-id', '{snapshots[0]}', 'end-snapshot-id', '{snapshots[1]}'))")
    assert _view(spark, "clr_changes") == sorted([(1, "a", "DELETE", 0, snapshots[1]), (20, "z", "INSERT", 0, snapshots[1])])


def test_changelog_view_errors(spark, ns, iceberg_catalog):
    t, ident = f"lake.{ns}.cle", f"{ns}.cle"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (1, 'b')")
    spark.sql(f"UPDATE {t} SET v = 'c'")
    call = f"CALL lake.system.create_changelog_view(table => '{ident}'"
    refused(spark, call + ", compute_updates => true)", "without identifier columns", "nothing was created")
    refused(spark, call + ", options => map('start-snapshot', '1'))", "unknown option 'start-snapshot'")
    refused(spark, call + ", options => map('end-snapshot-id', '12'))", "has no snapshot 12")
    refused(spark, call + ", net_changes => true, compute_updates => true)", "cannot be combined")
    refused(spark, call + ", identifier_columns => array('nope'))", "identifier column 'nope'")
    # an empty range: an empty view with the view's columns
    current = iceberg_catalog.load_table(ident).metadata.current_snapshot_id
    spark.sql(call + f", changelog_view => 'none', options => map('start-snapshot-id', '{current}'))").collect()
    assert spark.table("none").columns == ["id", "v", "_change_type", "_change_ordinal", "_commit_snapshot_id"]
    assert spark.table("none").collect() == []
    # two rows of one identity in a snapshot: an error when the view is read, as Iceberg's
    spark.sql(call + ", changelog_view => 'twice', identifier_columns => array('id'))").collect()
    with pytest.raises(Exception, match="several rows of one snapshot have the same identifier columns"):
        spark.sql("SELECT * FROM twice").collect()


def test_a_stream_of_changes(spark, ns, iceberg_catalog, tmp_path):
    """readStream with streaming-changelog=true: the changes create_changelog_view lists, snapshot
    by snapshot, a restarted query going on from its checkpoint; updates paired by _row_id (v3)."""
    t, ident = f"lake.{ns}.cls", f"{ns}.cls"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"UPDATE {t} SET v = 'B' WHERE id = 2")
    spark.sql(f"DELETE FROM {t} WHERE id = 3")
    seen: list = []

    def run() -> None:
        q = (spark.readStream.format("iceberg").option("streaming-changelog", "true").load(t).writeStream
             .foreachBatch(lambda df, _: seen.extend(tuple(r) for r in df.collect()))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        q.awaitTermination()

    def view() -> list:
        spark.sql(f"CALL lake.system.create_changelog_view(table => '{ident}', changelog_view => 'cls_all', "
                  "compute_updates => true)").collect()
        return sorted(tuple(r[:3]) + (r[4],) for r in spark.sql("SELECT * FROM cls_all").collect())

    run()
    assert sorted(r[:3] + (r[4],) for r in seen) == view()
    assert {r[2] for r in seen} == {"INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"}
    n = len(seen)
    spark.sql(f"OPTIMIZE {t}")  # no change: nothing streams
    spark.sql(f"MERGE INTO {t} x USING (SELECT 1 AS id, 'A' AS v UNION ALL SELECT 4, 'd') s ON x.id = s.id "
              "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *")
    run()  # the restarted query reads only the new snapshots' changes
    assert sorted(r[:3] for r in seen[n:]) == [(1, "A", "UPDATE_AFTER"), (1, "a", "UPDATE_BEFORE"), (4, "d", "INSERT")]
    assert sorted(r[:3] + (r[4],) for r in seen) == view()
    with pytest.raises(Exception, match="does not apply with streaming-changelog"):
        spark.readStream.format("iceberg").option("streaming-changelog", "true") \
            .option("streaming-max-files-per-micro-batch", "1").load(t).writeStream.format("noop") \
            .option("checkpointLocation", str(tmp_path / "ck2")).trigger(availableNow=True).start().awaitTermination()
