"""A table's history: Iceberg's rollback_to_snapshot, rollback_to_timestamp, set_current_snapshot,
cherrypick_snapshot, fast_forward and publish_changes, and Delta's DESCRIBE HISTORY and RESTORE.

After each step the rows lakerules reads equal those of the snapshot expected, as pyiceberg
reads that snapshot and as DuckDB reads the table; an error leaves the current snapshot as it was."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.typedef import Record

from deletes_util import commit_deletes, equality_delete_file
from errors_util import refused


def model(ids, updated=()):
    return sorted((i, "u" if i in updated else f"v{i}", i % 3) for i in ids)


@pytest.fixture
def hist(spark, ns, iceberg_catalog):
    """Five snapshots: two INSERTs, a DELETE, an UPDATE, an OPTIMIZE. (name, ident, steps):
    steps maps each step to (snapshot id, the rows of that snapshot)."""
    name, ident = f"lake.{ns}.h", f"{ns}.h"
    spark.sql(f"CREATE TABLE {name} (id BIGINT, v STRING, p INT) PARTITIONED BY (p)")
    steps = {}

    def step(label, sql, rows):
        spark.sql(sql)
        steps[label] = (iceberg_catalog.load_table(ident).current_snapshot().snapshot_id, rows)

    step("append1", f"INSERT INTO {name} SELECT id, concat('v', id), CAST(id % 3 AS INT) FROM range(0, 10)",
         model(range(10)))
    step("append2", f"INSERT INTO {name} SELECT id, concat('v', id), CAST(id % 3 AS INT) FROM range(10, 20)",
         model(range(20)))
    kept = [i for i in range(20) if i % 5 != 0]
    step("delete", f"DELETE FROM {name} WHERE id % 5 = 0", model(kept))
    step("update", f"UPDATE {name} SET v = 'u' WHERE id < 4", model(kept, updated={1, 2, 3}))
    step("optimize", f"OPTIMIZE {name}", model(kept, updated={1, 2, 3}))
    return name, ident, steps


def rows_of(iceberg_catalog, ident, snapshot_id) -> list[tuple]:
    arrow = iceberg_catalog.load_table(ident).scan(snapshot_id=snapshot_id).to_arrow()
    return sorted(tuple(r.values()) for r in arrow.to_pylist())


def current(iceberg_catalog, ident) -> int:
    return iceberg_catalog.load_table(ident).current_snapshot().snapshot_id


def check_rows(engines, iceberg_catalog, name, ident, snapshot_id, expected) -> None:
    """The table's rows are expected, and are what pyiceberg reads in snapshot_id."""
    assert rows_of(iceberg_catalog, ident, snapshot_id) == expected
    engines.assert_same(name, expected=expected)


def call(spark, procedure, args) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"CALL lake.system.{procedure}({args})").collect()]


def unchanged(spark, iceberg_catalog, ident, statement, *needles):
    """The statement fails with a lakerules error naming each needle; the table's current
    snapshot and refs stay as they were."""
    t = iceberg_catalog.load_table(ident)
    before = (t.current_snapshot().snapshot_id if t.current_snapshot() else None, dict(t.metadata.refs),
              len(t.metadata.snapshots))
    refused(spark, statement, *needles)
    t = iceberg_catalog.load_table(ident)
    assert (t.current_snapshot().snapshot_id if t.current_snapshot() else None, dict(t.metadata.refs),
            len(t.metadata.snapshots)) == before


# ---- DESCRIBE HISTORY -----------------------------------------------------------------------------


def test_describe_history_shows_what_happened_newest_first(spark, hist, iceberg_catalog):
    name, ident, steps = hist
    rows = spark.sql(f"DESCRIBE HISTORY {name}").collect()
    assert spark.sql(f"DESCRIBE HISTORY {name}").columns == [
        "version", "timestamp", "userId", "userName", "operation", "operationParameters", "readVersion",
        "isolationLevel", "isBlindAppend", "operationMetrics"]
    order = ["optimize", "update", "delete", "append2", "append1"]
    assert [r.version for r in rows] == [steps[s][0] for s in order]
    assert [r.operation for r in rows] == ["OPTIMIZE", "UPDATE", "DELETE", "APPEND", "APPEND"]
    assert [r.readVersion for r in rows] == [steps[s][0] for s in order[1:]] + [None]
    assert [r.isBlindAppend for r in rows] == [False, False, False, True, True]
    t = iceberg_catalog.load_table(ident)
    assert [int(r.timestamp.replace(tzinfo=__import__("datetime").timezone.utc).timestamp() * 1000) for r in rows] \
        == [t.snapshot_by_id(steps[s][0]).timestamp_ms for s in order]
    assert all(r.userId is None and r.userName is None and r.isolationLevel is None for r in rows)
    assert rows[-1].operationMetrics["added-records"] == "10"
    assert rows[-1].operationMetrics["added-data-files"] == t.snapshot_by_id(steps["append1"][0]).summary["added-data-files"]
    assert "total-records" not in rows[-1].operationMetrics
    assert rows[2].operationMetrics.get("added-position-deletes") == "4"  # ids 0, 5, 10, 15
    assert rows[0].operationParameters.get("iceberg.operation") == "replace"
    # LIMIT, DESC
    limited = spark.sql(f"DESC HISTORY {name} LIMIT 2").collect()
    assert [r.version for r in limited] == [steps["optimize"][0], steps["update"][0]]
    assert spark.sql(f"DESCRIBE HISTORY {name} LIMIT 0").collect() == []
    # after a rollback: the current branch's history, not every snapshot
    call(spark, "rollback_to_snapshot", f"'{ident}', {steps['delete'][0]}")
    assert [r.version for r in spark.sql(f"DESCRIBE HISTORY {name}").collect()] == \
        [steps[s][0] for s in ("delete", "append2", "append1")]


# ---- rollback_to_snapshot, rollback_to_timestamp, set_current_snapshot ------------------------------


def test_rollback_to_snapshot_and_set_current_snapshot(spark, hist, iceberg_catalog, engines):
    name, ident, steps = hist
    head = steps["optimize"][0]
    # main's retention settings stay (pyiceberg's manage_snapshots would drop them)
    iceberg_catalog.load_table(ident).manage_snapshots().create_branch(head, "main", min_snapshots_to_keep=7).commit()
    sid, rows = steps["delete"]
    assert call(spark, "rollback_to_snapshot", f"table => '{ident}', snapshot_id => {sid}") == [(head, sid)]
    check_rows(engines, iceberg_catalog, name, ident, sid, rows)
    assert iceberg_catalog.load_table(ident).metadata.refs["main"].min_snapshots_to_keep == 7
    # the OPTIMIZE snapshot is no longer an ancestor: rollback refuses, set_current_snapshot does it
    unchanged(spark, iceberg_catalog, ident, f"CALL lake.system.rollback_to_snapshot('{ident}', {head})",
              "not an ancestor", str(head))
    assert call(spark, "set_current_snapshot", f"'{ident}', {head}") == [(sid, head)]
    check_rows(engines, iceberg_catalog, name, ident, head, steps["optimize"][1])
    # by ref: a tag on the UPDATE snapshot
    iceberg_catalog.load_table(ident).manage_snapshots().create_tag(steps["update"][0], "before_optimize").commit()
    assert call(spark, "set_current_snapshot", f"table => '{ident}', ref => 'before_optimize'") == \
        [(head, steps["update"][0])]
    check_rows(engines, iceberg_catalog, name, ident, steps["update"][0], steps["update"][1])
    # to the current snapshot: nothing changes
    metadata_before = iceberg_catalog.load_table(ident).metadata_location
    assert call(spark, "rollback_to_snapshot", f"'{ident}', {steps['update'][0]}") == \
        [(steps["update"][0], steps["update"][0])]
    assert iceberg_catalog.load_table(ident).metadata_location == metadata_before
    # the snapshot log records each change of the current snapshot
    log = [e.snapshot_id for e in iceberg_catalog.load_table(ident).metadata.snapshot_log]
    assert log[-3:] == [sid, head, steps["update"][0]]


def test_rollback_to_timestamp(spark, hist, iceberg_catalog, engines):
    name, ident, steps = hist
    t = iceberg_catalog.load_table(ident)
    at_update = t.snapshot_by_id(steps["update"][0]).timestamp_ms
    # strictly older than the timestamp: the UPDATE snapshot itself is not
    assert call(spark, "rollback_to_timestamp", f"'{ident}', timestamp_millis({at_update})") == \
        [(steps["optimize"][0], steps["delete"][0])]
    check_rows(engines, iceberg_catalog, name, ident, steps["delete"][0], steps["delete"][1])
    first = t.snapshot_by_id(steps["append1"][0]).timestamp_ms
    unchanged(spark, iceberg_catalog, ident,
              f"CALL lake.system.rollback_to_timestamp(table => '{ident}', timestamp => timestamp_millis({first}))",
              "no snapshot of its current history is older than")


# ---- cherrypick_snapshot, publish_changes, fast_forward ---------------------------------------------


def stage(iceberg_catalog, ident, ids, wap_id=None) -> int:
    """A snapshot on no branch (as write-audit-publish leaves one): appended to a branch that is
    then removed. Its id."""
    t = iceberg_catalog.load_table(ident)
    t.manage_snapshots().create_branch(t.current_snapshot().snapshot_id, "staging").commit()
    t = iceberg_catalog.load_table(ident)
    data = pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids],
                     "p": pa.array([i % 3 for i in ids], pa.int32())})
    t.append(data, snapshot_properties={"wap.id": wap_id} if wap_id else {}, branch="staging")
    t = iceberg_catalog.load_table(ident)
    sid = t.metadata.refs["staging"].snapshot_id
    t.manage_snapshots().remove_branch("staging").commit()
    return sid


def test_publish_changes_and_cherrypick_snapshot(spark, hist, iceberg_catalog, engines):
    name, ident, steps = hist
    staged = stage(iceberg_catalog, ident, [100, 101, 102], wap_id="w1")
    spark.sql(f"INSERT INTO {name} VALUES (200, 'v200', 2)")  # main moves on: no fast-forward
    before = current(iceberg_catalog, ident)
    base = steps["optimize"][1] + [(200, "v200", 2)]
    assert current(iceberg_catalog, ident) != staged
    [(source, now)] = call(spark, "publish_changes", f"table => '{ident}', wap_id => 'w1'")
    assert source == staged and now != staged
    t = iceberg_catalog.load_table(ident)
    new = t.snapshot_by_id(now)
    assert new.parent_snapshot_id == before
    assert new.summary["source-snapshot-id"] == str(staged) and new.summary["published-wap-id"] == "w1"
    assert new.summary.operation.value == "append"
    check_rows(engines, iceberg_catalog, name, ident, now, sorted(base + model([100, 101, 102])))
    # published once only; an ancestor is not cherry-picked again
    unchanged(spark, iceberg_catalog, ident, f"CALL lake.system.publish_changes('{ident}', 'w1')", "already published")
    unchanged(spark, iceberg_catalog, ident, f"CALL lake.system.cherrypick_snapshot('{ident}', {steps['delete'][0]})",
              "already an ancestor")
    unchanged(spark, iceberg_catalog, ident, f"CALL lake.system.publish_changes('{ident}', 'nope')",
              "no snapshot staged with wap.id 'nope'")
    # a staged snapshot whose parent is the current snapshot: a fast-forward, as Iceberg's
    other = stage(iceberg_catalog, ident, [300])
    assert call(spark, "cherrypick_snapshot", f"table => '{ident}', snapshot_id => {other}") == [(other, other)]
    check_rows(engines, iceberg_catalog, name, ident, other, sorted(base + model([100, 101, 102, 300])))


def test_cherrypick_of_an_overwrite_only_fast_forwards(spark, hist, iceberg_catalog, engines):
    name, ident, steps = hist
    call(spark, "rollback_to_snapshot", f"'{ident}', {steps['append2'][0]}")
    # the UPDATE's parent is the DELETE, not the current snapshot: refused
    unchanged(spark, iceberg_catalog, ident, f"CALL lake.system.cherrypick_snapshot('{ident}', {steps['update'][0]})",
              f"cannot cherry-pick snapshot {steps['update'][0]}", "only an append")
    # the DELETE's parent is the current snapshot: a fast-forward to the DELETE snapshot itself
    assert call(spark, "cherrypick_snapshot", f"'{ident}', {steps['delete'][0]}") == \
        [(steps["delete"][0], steps["delete"][0])]
    check_rows(engines, iceberg_catalog, name, ident, steps["delete"][0], steps["delete"][1])


def test_fast_forward(spark, hist, iceberg_catalog, engines):
    name, ident, steps = hist
    t = iceberg_catalog.load_table(ident)
    t.manage_snapshots().create_branch(steps["append2"][0], "audit", max_ref_age_ms=10**9).commit()
    head = steps["optimize"][0]
    assert call(spark, "fast_forward", f"table => '{ident}', branch => 'audit', to => 'main'") == \
        [("audit", steps["append2"][0], head)]
    ref = iceberg_catalog.load_table(ident).metadata.refs["audit"]
    assert ref.snapshot_id == head and ref.max_ref_age_ms == 10**9
    assert current(iceberg_catalog, ident) == head
    # main fast-forwarded to a branch ahead of it
    t = iceberg_catalog.load_table(ident)
    t.append(pa.table({"id": pa.array([500], pa.int64()), "v": ["v500"], "p": pa.array([2], pa.int32())}),
             branch="audit")
    ahead = iceberg_catalog.load_table(ident).metadata.refs["audit"].snapshot_id
    assert call(spark, "fast_forward", f"'{ident}', 'main', 'audit'") == [("main", head, ahead)]
    check_rows(engines, iceberg_catalog, name, ident, ahead, sorted(steps["optimize"][1] + [(500, "v500", 2)]))
    # diverged: refused
    iceberg_catalog.load_table(ident).manage_snapshots().create_branch(steps["append1"][0], "old").commit()
    iceberg_catalog.load_table(ident).append(
        pa.table({"id": pa.array([600], pa.int64()), "v": ["v600"], "p": pa.array([0], pa.int32())}), branch="old")
    unchanged(spark, iceberg_catalog, ident, f"CALL lake.system.fast_forward('{ident}', 'main', 'old')",
              "is not an ancestor of")
    unchanged(spark, iceberg_catalog, ident, f"CALL lake.system.fast_forward('{ident}', 'nope', 'main')",
              "has no branch 'nope'")


# ---- RESTORE --------------------------------------------------------------------------------------


def test_restore_to_a_version_keeps_history(spark, hist, iceberg_catalog, engines):
    name, ident, steps = hist
    t = iceberg_catalog.load_table(ident)
    snapshots_before = [s.snapshot_id for s in t.metadata.snapshots]
    head = steps["optimize"][0]
    sid, rows = steps["delete"]
    result = spark.sql(f"RESTORE TABLE {name} TO VERSION AS OF {sid}")
    assert result.columns == ["table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                              "num_restored_files", "removed_files_size", "restored_files_size"]
    [r] = result.collect()
    t = iceberg_catalog.load_table(ident)
    new = t.current_snapshot()
    assert new.snapshot_id not in snapshots_before and new.parent_snapshot_id == head
    assert [s.snapshot_id for s in t.metadata.snapshots][:-1] == snapshots_before  # history kept
    assert new.summary.operation.value == "overwrite"
    assert new.summary["lakerules.restored-snapshot-id"] == str(sid)
    check_rows(engines, iceberg_catalog, name, ident, new.snapshot_id, rows)
    assert rows_of(iceberg_catalog, ident, sid) == rows
    # what the result counts: the OPTIMIZE's files removed, the DELETE snapshot's files back
    def live(snapshot_id):
        s = t.snapshot_by_id(snapshot_id)
        return {e.data_file.file_path: e.data_file for m in s.manifests(t.io) for e in m.fetch_manifest_entry(t.io)}
    then, now = live(sid), live(head)
    assert r.num_removed_files == len(now.keys() - then.keys()) > 0
    assert r.num_restored_files == len(then.keys() - now.keys()) > 0
    assert r.removed_files_size == sum(now[p].file_size_in_bytes for p in now.keys() - then.keys())
    data = [f for f in then.values() if f.content.value == 0]
    assert (r.num_of_files_after_restore, r.table_size_after_restore) == \
        (len(data), sum(f.file_size_in_bytes for f in data))
    assert set(live(new.snapshot_id)) == set(then)
    history = spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").collect()[0]
    assert history.operation == "RESTORE" and history.readVersion == head
    # a restore to the current state commits nothing
    metadata_before = iceberg_catalog.load_table(ident).metadata_location
    [r2] = spark.sql(f"RESTORE {name} VERSION AS OF {new.snapshot_id}").collect()
    assert (r2.num_removed_files, r2.num_restored_files) == (0, 0)
    assert iceberg_catalog.load_table(ident).metadata_location == metadata_before
    # and forward again, to the UPDATE snapshot, by timestamp: the one current then
    at = t.snapshot_by_id(steps["update"][0]).timestamp_ms
    spark.sql(f"RESTORE TABLE {name} TO TIMESTAMP AS OF timestamp_millis({at})")
    check_rows(engines, iceberg_catalog, name, ident, current(iceberg_catalog, ident), steps["update"][1])


def test_restore_keeps_deletes_applying_as_they_did(spark, ns, iceberg_catalog, engines):
    """An equality delete applies to the data files older than it (by data sequence number):
    re-added files keep their sequence numbers, so it applies as it did in the restored snapshot."""
    name, ident = f"lake.{ns}.e", f"{ns}.e"
    spark.sql(f"CREATE TABLE {name} (id BIGINT, v STRING, p INT) PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a', 0), (2, 'b', 0), (3, 'c', 0)")
    t = iceberg_catalog.load_table(ident)
    commit_deletes(iceberg_catalog, ident, [equality_delete_file(t, {"id": [2]}, Record(0))])
    spark.sql(f"INSERT INTO {name} VALUES (2, 'again', 0)")  # newer than the delete: stays
    with_deletes = current(iceberg_catalog, ident)
    want = [(1, "a", 0), (2, "again", 0), (3, "c", 0)]
    assert engines.lakerules(name) == engines.duckdb(name) == want
    spark.sql(f"OPTIMIZE {name}")  # compacts every file, deletes applied
    spark.sql(f"DELETE FROM {name} WHERE id = 1")
    assert engines.lakerules(name) == engines.duckdb(name) == want[1:]
    spark.sql(f"RESTORE TABLE {name} TO VERSION AS OF {with_deletes}")
    # pyiceberg does not read equality deletes: lakerules and DuckDB
    assert engines.lakerules(name) == engines.duckdb(name) == want


def test_explain_runs_nothing_and_errors_change_nothing(spark, hist, iceberg_catalog):
    name, ident, steps = hist
    before = iceberg_catalog.load_table(ident).metadata_location
    text = spark.sql(f"EXPLAIN RESTORE TABLE {name} TO VERSION AS OF {steps['delete'][0]}").collect()[0][0]
    assert "RESTORE TABLE TO VERSION AS OF" in text
    text = spark.sql(f"EXPLAIN CALL lake.system.rollback_to_snapshot('{ident}', {steps['delete'][0]})").collect()[0][0]
    assert "rollback_to_snapshot" in text
    spark.sql(f"EXPLAIN EXTENDED DESCRIBE HISTORY {name}").collect()
    assert iceberg_catalog.load_table(ident).metadata_location == before
    assert current(iceberg_catalog, ident) == steps["optimize"][0]
    errors_leave_the_table_unchanged(spark, hist, iceberg_catalog)
    unknown_procedure_lists_every_procedure(spark, hist)


# ---- errors ---------------------------------------------------------------------------------------


def errors_leave_the_table_unchanged(spark, hist, iceberg_catalog):
    name, ident, steps = hist
    sid = steps["delete"][0]
    cases = [
        (f"CALL lake.system.rollback_to_snapshot('{ident}', 42)", "has no snapshot 42"),
        (f"CALL lake.system.set_current_snapshot('{ident}', 42)", "has no snapshot 42"),
        (f"CALL lake.system.cherrypick_snapshot('{ident}', 42)", "has no snapshot 42"),
        (f"CALL lake.system.set_current_snapshot(table => '{ident}', ref => 'nope')", "has no branch or tag 'nope'"),
        (f"CALL lake.system.set_current_snapshot(table => '{ident}', snapshot_id => {sid}, ref => 'main')",
         "either snapshot_id or ref"),
        (f"CALL lake.system.set_current_snapshot(table => '{ident}')", "either snapshot_id or ref"),
        (f"CALL lake.system.rollback_to_snapshot('{ident}', 'abc')", "argument 'snapshot_id' must be bigint, not string"),
        (f"CALL lake.system.rollback_to_snapshot('{ident}', '{sid}')", "argument 'snapshot_id' must be bigint"),
        (f"CALL lake.system.rollback_to_timestamp('{ident}', {sid})", "argument 'timestamp' must be timestamp, not bigint"),
        (f"CALL lake.system.fast_forward('{ident}', 'main', 3)", "argument 'to' must be string, not int"),
        (f"CALL lake.system.rollback_to_snapshot('{ident}')", "missing required argument 'snapshot_id'"),
        (f"CALL lake.system.rollback_to_snapshot(table => '{ident}', snapshot_id => NULL)", "'snapshot_id' is NULL"),
        (f"CALL lake.system.fast_forward(table => '{ident}', branch => 'main')", "missing required argument 'to'"),
        (f"CALL lake.system.publish_changes('{ident}')", "missing required argument 'wap_id'"),
        (f"CALL lake.system.rollback_to_snapshot(table => '{ident}', snapshot => {sid})", "unknown argument 'snapshot'"),
        (f"RESTORE TABLE {name} TO VERSION AS OF 42", "has no snapshot 42"),
        (f"RESTORE TABLE {name} TO VERSION AS OF 'nope'", "has no branch or tag 'nope'"),
        (f"RESTORE TABLE {name} TO TIMESTAMP AS OF TIMESTAMP '2000-01-01 00:00:00'", "no snapshot that was current at"),
        (f"RESTORE TABLE {name} TO TIMESTAMP AS OF 'not a time'", "cannot evaluate the timestamp"),
    ]
    failed = []
    for statement, needle in cases:
        try:
            unchanged(spark, iceberg_catalog, ident, statement, needle)
        except BaseException as e:  # noqa: BLE001 - every case is tried, the failures listed
            failed.append(f"{statement}: {str(e)[:300]}")
    assert not failed, "\n".join(failed)
    # syntax errors are Spark's ParseException, with the position
    for statement, needle in [(f"RESTORE TABLE {name} TO VERSION AS OF", "expected a version or a timestamp"),
                              (f"RESTORE TABLE {name} TO VERSION AS OF 1.5", "VERSION AS OF takes a snapshot id"),
                              (f"DESCRIBE HISTORY {name} LIMIT x", "LIMIT needs a whole number")]:
        with pytest.raises(Exception) as info:
            spark.sql(statement)
        assert needle in str(info.value) and "PARSE_SYNTAX_ERROR" in str(info.value)
    assert current(iceberg_catalog, ident) == steps["optimize"][0]


def unknown_procedure_lists_every_procedure(spark, hist):
    name, ident, steps = hist
    message = refused(spark, f"CALL lake.system.rollback_to('{ident}', 1)", "procedure lake.system.rollback_to not found")
    for p in ("remove_orphan_files", "expire_snapshots", "rewrite_manifests", "rollback_to_snapshot",
              "rollback_to_timestamp", "set_current_snapshot", "cherrypick_snapshot", "fast_forward",
              "publish_changes"):
        assert f"lake.system.{p}" in message


def test_describe_of_a_table_named_history_is_sparks(spark, ns):
    spark.sql(f"CREATE TABLE lake.{ns}.history (id BIGINT)")
    catalog, database = spark.catalog.currentCatalog(), spark.catalog.currentDatabase()
    spark.sql(f"USE lake.{ns}")
    try:
        assert [r.col_name for r in spark.sql("DESCRIBE history").collect()][:1] == ["id"]
        assert [r.col_name for r in spark.sql(f"DESCRIBE lake.{ns}.history").collect()][:1] == ["id"]
    finally:
        spark.catalog.setCurrentCatalog(catalog)
        spark.catalog.setCurrentDatabase(database)


# ---- concurrent commits ---------------------------------------------------------------------------


@pytest.fixture
def commit_meanwhile(iceberg_catalog):
    """commit_meanwhile(ident): just before the next lakerules commit, another writer appends a
    row (id 900) to main; its snapshot id is in the returned list once it ran."""
    from lakerules.write import commit

    landed = []

    def arm(ident):
        def append(table):
            commit.before_commit = None
            t = iceberg_catalog.load_table(ident)
            t.append(pa.table({"id": pa.array([900], pa.int64()), "v": ["v900"], "p": pa.array([0], pa.int32())}))
            landed.append(iceberg_catalog.load_table(ident).current_snapshot().snapshot_id)

        commit.before_commit = append
        return landed

    yield arm
    commit.before_commit = None


def test_a_commit_landing_meanwhile_fails_the_statement(spark, hist, iceberg_catalog, engines, commit_meanwhile):
    """What the statement decided on what it read is not applied over another writer's commit."""
    name, ident, steps = hist
    expected = list(steps["optimize"][1])
    for statement in ["CALL lake.system.rollback_to_snapshot('{ident}', {delete})",
                      "CALL lake.system.set_current_snapshot('{ident}', {delete})",
                      "RESTORE TABLE {name} TO VERSION AS OF {delete}"]:
        landed = commit_meanwhile(ident)
        count = len(landed)
        message = refused(spark, statement.format(ident=ident, name=name, delete=steps["delete"][0]), "conflict")
        assert "nothing was committed" in message or "changed" in message, message
        assert len(landed) == count + 1, statement
        other = landed[-1]
        assert current(iceberg_catalog, ident) == other
        expected = sorted(expected + [(900, "v900", 0)])
        check_rows(engines, iceberg_catalog, name, ident, other, expected)


@pytest.mark.parametrize("escaped", ["true", "false"])
def test_names_with_quotes_reach_no_sql_text(spark, ns, iceberg_catalog, escaped):
    """A table named it's and a tag named a'b: history verbs name them as objects, never as SQL."""
    name = f"lake.{ns}.`it's`"
    spark.sql(f"CREATE TABLE {name} (id BIGINT)")
    spark.sql(f"INSERT INTO {name} VALUES (1)")
    t = iceberg_catalog.load_table((ns, "it's"))
    first = t.current_snapshot().snapshot_id
    t.manage_snapshots().create_tag(first, "a'b").commit()
    spark.sql(f"INSERT INTO {name} VALUES (2)")
    old = spark.conf.get("spark.sql.parser.escapedStringLiterals")
    spark.conf.set("spark.sql.parser.escapedStringLiterals", escaped)
    try:
        assert len(spark.sql(f"DESCRIBE HISTORY {name}").collect()) == 2
        # Spark reads the string literal, under the session's parser settings
        spark.sql(f"RESTORE TABLE {name} TO VERSION AS OF \"a'b\"")
        assert [r.id for r in spark.sql(f"SELECT id FROM {name}").collect()] == [1]
        # a backslash escape, read as Spark reads it: a'b, or with escaped literals a\'b (no such tag)
        if escaped == "false":
            spark.sql(f"RESTORE TABLE {name} TO VERSION AS OF 'a\\'b'")
        else:
            refused(spark, f"RESTORE TABLE {name} TO VERSION AS OF 'a\\'b'", "has no branch or tag")
        assert [r.id for r in spark.sql(f"SELECT id FROM {name}").collect()] == [1]
        head = iceberg_catalog.load_table((ns, "it's")).current_snapshot().snapshot_id
        assert [tuple(r) for r in spark.sql(
            f"CALL lake.system.set_current_snapshot(table => \"{ns}.`it's`\", ref => \"a'b\")").collect()] \
            == [(head, first)]
    finally:
        spark.conf.set("spark.sql.parser.escapedStringLiterals", old)
