"""lakerules and Iceberg's own Spark runtime on one catalog (issue #52, Required 2; tests/anchor.py).

Every state in STATES is made by lakerules; Iceberg's runtime, in a process of its own on the same
SQLite catalog, must read the same rows (row lineage included on v3), the same snapshots, files,
delete files, refs and partitions (metadata tables; the partitions table's whole rows), then run
its own rewrite_data_files and expire_snapshots on lakerules' tables, after which lakerules reads
them unchanged. The other way round, tables Iceberg's runtime
made (its merge-on-read deletes, its v3 deletion vectors and row lineage) must read the same in
lakerules. One anchor process serves the whole module (a JVM with Iceberg's runtime starts in ~10 s).
"""

from __future__ import annotations

import itertools

import pytest

import anchor
import anchor_values

_ids = itertools.count()

ROWS = "SELECT /*+ REPARTITION(2) */ id, concat('v', id) AS v, date_add(DATE'2026-01-01', CAST(id % 5 AS INT)) AS d FROM range(20)"
V3 = "TBLPROPERTIES ('format-version'='3')"
MOR = "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'"

# name -> (columns the engines compare, lakerules' statements making the state; {t} is the table)
STATES: dict[str, tuple[str, list[str]]] = {
    "mor_delete": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS,
                                "DELETE FROM {t} WHERE id % 3 = 0"]),
    "mor_update": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS,
                                "UPDATE {t} SET v = 'u' WHERE id < 4"]),
    "mor_merge": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS,
                               "MERGE INTO {t} t USING (SELECT id, 'm' AS v FROM range(15, 25)) s ON t.id = s.id "
                               "WHEN MATCHED AND t.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v "
                               "WHEN NOT MATCHED THEN INSERT (id, v, d) VALUES (s.id, s.v, DATE'2026-02-01')"]),
    "copy_on_write": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE) TBLPROPERTIES "
                                   "('write.delete.mode'='copy-on-write', 'write.update.mode'='copy-on-write')",
                                   "INSERT INTO {t} " + ROWS, "DELETE FROM {t} WHERE id % 4 = 1",
                                   "UPDATE {t} SET v = 'c' WHERE id = 2"]),
    "equality_deletes": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS]),
    "partitioned_evolved": ("id, v, d, n", [
        "CREATE TABLE {t} (id BIGINT, v STRING, d DATE) PARTITIONED BY (days(d))", "INSERT INTO {t} " + ROWS,
        "ALTER TABLE {t} ADD PARTITION FIELD bucket(4, id)", "ALTER TABLE {t} ADD COLUMN n INT",
        "INSERT INTO {t} VALUES (100, 'new', DATE'2026-03-01', 7)", "ALTER TABLE {t} RENAME COLUMN v TO v2",
        "ALTER TABLE {t} RENAME COLUMN v2 TO v", "DELETE FROM {t} WHERE id = 3"]),
    "zordered": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS,
                              "INSERT INTO {t} " + ROWS.replace("range(20)", "range(20, 40)"),
                              "OPTIMIZE {t} ZORDER BY (id, d)"]),
    "hilbert": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS,
                             "OPTIMIZE {t} HILBERT BY (id, d)"]),
    "expired": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS,
                             "DELETE FROM {t} WHERE id < 5", "INSERT INTO {t} VALUES (50, 'x', DATE'2026-01-09')",
                             "CALL lake.system.expire_snapshots(table => '{ident}', "
                             "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"]),
    "v3_deletion_vectors": ("id, v, d, _row_id, _last_updated_sequence_number", [
        f"CREATE TABLE {{t}} (id BIGINT, v STRING, d DATE) {V3}", "INSERT INTO {t} " + ROWS,
        "DELETE FROM {t} WHERE id % 3 = 0", "DELETE FROM {t} WHERE id % 5 = 0"]),
    "v3_lineage": ("id, v, d, _row_id, _last_updated_sequence_number", [
        f"CREATE TABLE {{t}} (id BIGINT, v STRING, d DATE) {V3}", "INSERT INTO {t} " + ROWS,
        "UPDATE {t} SET v = 'u' WHERE id < 4",
        "MERGE INTO {t} t USING (SELECT id FROM range(10, 12)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'm'",
        "OPTIMIZE {t}"]),
    "v3_upgraded": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS,
                                 "DELETE FROM {t} WHERE id % 3 = 0",
                                 "ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='3')",
                                 "DELETE FROM {t} WHERE id % 5 = 0"]),
    "v3_defaults": ("id, v, d, k", [f"CREATE TABLE {{t}} (id BIGINT, v STRING, d DATE) {V3}", "INSERT INTO {t} " + ROWS,
                                    "ALTER TABLE {t} ADD COLUMN k INT DEFAULT 42",
                                    "INSERT INTO {t} (id, v, d) VALUES (99, 'late', DATE'2026-04-01')"]),
    "branches_and_tags": ("id, v, d", ["CREATE TABLE {t} (id BIGINT, v STRING, d DATE)", "INSERT INTO {t} " + ROWS,
                                       "ALTER TABLE {t} CREATE TAG before", "ALTER TABLE {t} CREATE BRANCH side",
                                       "INSERT INTO {t}.branch_side VALUES (77, 'side', DATE'2026-05-01')",
                                       "DELETE FROM {t} WHERE id < 10"]),
    "write_audit_publish": ("id, v, d", [
        "CREATE TABLE {t} (id BIGINT, v STRING, d DATE) TBLPROPERTIES ('write.wap.enabled'='true')",
        "INSERT INTO {t} " + ROWS, "SET spark.wap.id = anchor-staged",
        "INSERT INTO {t} VALUES (500, 'staged', DATE'2026-06-01')", "SET spark.wap.id = anchor-published",
        "INSERT INTO {t} VALUES (501, 'published', DATE'2026-06-02')", "RESET spark.wap.id",
        "CALL lake.system.publish_changes(table => '{ident}', wap_id => 'anchor-published')"]),
}
# Iceberg's names for what lakerules reads at a branch or tag (Spark SQL's VERSION AS OF)
REFS = {"branches_and_tags": ["side", "before"]}


def _ours(spark, sql: str) -> list[tuple]:
    return sorted((anchor_values.row(r) for r in spark.sql(sql).collect()), key=repr)


@pytest.fixture(scope="module")
def made(spark, warehouse):
    """The states, made by lakerules in namespace lake.anchor<N>; (namespace, the anchor's answers
    to every statement of ANCHOR_STATEMENTS, in order)."""
    anchor.require()
    ns = f"anchor{next(_ids)}"
    spark.sql(f"CREATE NAMESPACE lake.{ns}")
    import lakerules

    for name, (_, statements) in STATES.items():
        for s in statements:
            spark.sql(s.format(t=f"lake.{ns}.{name}", ident=f"{ns}.{name}")).collect()
        if name == "equality_deletes":
            lakerules.delete_by_key(spark, f"lake.{ns}.{name}", spark.sql("SELECT id FROM range(0, 20, 4)"), ["id"])
    yield ns
    spark.sql(f"DROP NAMESPACE lake.{ns} CASCADE")


def _reads(ns: str) -> list[tuple[str, str, str]]:
    """(state, what, SQL) the two engines must answer alike."""
    out = []
    for name, (columns, _) in STATES.items():
        t = f"lake.{ns}.{name}"
        out.append((name, "rows", f"SELECT {columns} FROM {t}"))
        out.append((name, "snapshots", f"SELECT snapshot_id, parent_id, operation FROM {t}.snapshots"))
        out.append((name, "files", f"SELECT content, file_path, record_count FROM {t}.files"))
        out.append((name, "delete_files", f"SELECT content, file_path FROM {t}.delete_files"))
        out.append((name, "refs", f"SELECT name, type, snapshot_id FROM {t}.refs"))
        out.append((name, "partitions", f"SELECT * FROM {t}.partitions"))
        out += [(name, f"ref {r}", f"SELECT {columns} FROM {t} VERSION AS OF '{r}'") for r in REFS.get(name, [])]
    return out


def test_icebergs_runtime_reads_what_lakerules_writes(spark, warehouse, made):
    reads = _reads(made)
    answers = anchor.run(warehouse, [sql for _, _, sql in reads])
    differ, compared = [], {}
    for (name, what, sql), answer in zip(reads, answers):
        theirs, ours = anchor.rows(answer) if "error" not in answer else answer["error"], _ours(spark, sql)
        if theirs != ours:
            differ.append(f"{name} {what}: Iceberg {theirs!r}\n  lakerules {ours!r}")
        compared[(name, what)] = ours
    assert not differ, "\n".join(differ)
    # what was compared is not empty: every state has rows, files and snapshots; the deletes and
    # the lineage are there to be read
    assert all(compared[(n, w)] for n in STATES for w in ("rows", "files", "snapshots", "refs")), compared
    for n in ("mor_delete", "mor_update", "equality_deletes", "v3_deletion_vectors", "v3_upgraded"):
        assert compared[(n, "delete_files")], n
    assert all(r[3] is not None and r[4] is not None for r in compared[("v3_lineage", "rows")])


def test_icebergs_procedures_run_on_lakerules_tables(spark, warehouse, made):
    """Iceberg's rewrite_data_files (binpack, then sort) and expire_snapshots on lakerules' tables;
    lakerules then reads the rows it read before."""
    names = ["mor_delete", "mor_merge", "v3_deletion_vectors", "v3_lineage", "partitioned_evolved"]
    before = {n: _ours(spark, f"SELECT {STATES[n][0]} FROM lake.{made}.{n}") for n in names}
    statements = []
    for n in names:
        ident = f"{made}.{n}"
        statements += [f"CALL lake.system.rewrite_data_files(table => '{ident}', options => map('min-input-files', '1'))",
                       f"CALL lake.system.rewrite_data_files(table => '{ident}', strategy => 'sort', "
                       "sort_order => 'id DESC', options => map('min-input-files', '1'))",
                       f"CALL lake.system.expire_snapshots(table => '{ident}', "
                       "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"]
    answers = anchor.run(warehouse, statements)
    errors = [f"{s}: {a['error']}" for s, a in zip(statements, answers) if "error" in a]
    assert not errors, "\n".join(errors)
    for n in names:
        spark.sql(f"REFRESH TABLE lake.{made}.{n}")
        assert _ours(spark, f"SELECT {STATES[n][0]} FROM lake.{made}.{n}") == before[n], n


ICEBERG_MADE = {
    "ice_mor": ("id, v", [
        f"CREATE TABLE {{t}} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR}, 'format-version'='2')",
        "INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, concat('v', id) FROM range(20)",
        "DELETE FROM {t} WHERE id % 3 = 0", "UPDATE {t} SET v = 'u' WHERE id < 5",
        "MERGE INTO {t} t USING (SELECT id FROM range(15, 25)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'm' "
        "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, 'n')"]),
    "ice_v3": ("id, v, _row_id, _last_updated_sequence_number", [
        f"CREATE TABLE {{t}} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR}, 'format-version'='3')",
        "INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, concat('v', id) FROM range(20)",
        "DELETE FROM {t} WHERE id % 3 = 0", "DELETE FROM {t} WHERE id % 5 = 0", "UPDATE {t} SET v = 'u' WHERE id < 5"]),
}


def test_lakerules_reads_what_icebergs_runtime_writes(spark, warehouse, made):
    statements, reads = [], []
    for name, (columns, steps) in ICEBERG_MADE.items():
        t = f"lake.{made}.{name}"
        statements += [s.format(t=t) for s in steps]
        reads += [(name, f"SELECT {columns} FROM {t}"), (name, f"SELECT content, file_path, record_count FROM {t}.files"),
                  (name, f"SELECT snapshot_id, operation FROM {t}.snapshots")]
    answers = anchor.run(warehouse, statements + [sql for _, sql in reads])
    errors = [f"{s}: {a['error']}" for s, a in zip(statements, answers) if "error" in a]
    assert not errors, "\n".join(errors)
    differ = []
    for (name, sql), answer in zip(reads, answers[len(statements):]):
        theirs, ours = anchor.rows(answer), _ours(spark, sql)
        if theirs != ours:
            differ.append(f"{name}: {sql}\n  Iceberg {theirs!r}\n  lakerules {ours!r}")
    assert not differ, "\n".join(differ)


def test_a_commit_of_icebergs_runtime_landing_meanwhile_is_seen(spark, warehouse, made, monkeypatch):
    """Commits of both engines interleave on one table: Iceberg's runtime commits while a
    lakerules statement is about to commit. An UPDATE over a row Iceberg's runtime deleted
    meanwhile is a conflict (no deleted row comes back), run again it lands; an INSERT over
    Iceberg's INSERT lands on top of it (both rows kept)."""
    from lakerules.write import commit

    t = f"lake.{made}.interleaved"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) TBLPROPERTIES ({MOR})")
    spark.sql(f"INSERT INTO {t} SELECT id, 'a' FROM range(20)")
    meanwhile: list[str] = []

    def icebergs_commit_first(table):
        if meanwhile:
            answers = anchor.run(warehouse, [meanwhile.pop()])
            assert "error" not in answers[0], answers[0]

    monkeypatch.setattr(commit, "before_commit", icebergs_commit_first)
    meanwhile.append(f"DELETE FROM {t} WHERE id = 5")
    with pytest.raises(Exception, match="conflict on"):
        spark.sql(f"UPDATE {t} SET v = 'u' WHERE id % 5 = 0").collect()
    spark.sql(f"UPDATE {t} SET v = 'u' WHERE id % 5 = 0").collect()
    meanwhile.append(f"INSERT INTO {t} VALUES (100, 'iceberg')")
    spark.sql(f"INSERT INTO {t} VALUES (101, 'lakerules')").collect()
    monkeypatch.setattr(commit, "before_commit", None)
    expected = sorted([(i, "u" if i % 5 == 0 else "a") for i in range(20) if i != 5] + [(100, "iceberg"), (101, "lakerules")])
    assert _ours(spark, f"SELECT id, v FROM {t}") == sorted(expected, key=repr)
    assert anchor.rows(anchor.run(warehouse, [f"SELECT id, v FROM {t}"])[0]) == sorted(expected, key=repr)
