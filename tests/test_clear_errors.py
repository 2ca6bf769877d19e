"""Bad input is a one-line lakerules error naming the problem, the table as lake.db.t and the fix,
with the table unchanged (issue 30, Required 5 and 6): branch and tag names, format-version,
VACUUM's retention, statements nested too deep, a branch's retention, spark.lakerules.* settings,
identifier fields, the table's name in messages, data files missing or damaged on disk, errors in
a statement's own expressions."""

from __future__ import annotations

import os
import re

import pytest

import faults_util as fu
import lakerules
from errors_util import refused


# ---- helpers -------------------------------------------------------------------------------------


@pytest.fixture
def t(spark, ns):
    """lake.<ns>.t, two rows in one snapshot."""
    name = f"lake.{ns}.t"
    spark.sql(f"CREATE TABLE {name} (id BIGINT NOT NULL, s STRING, d DOUBLE)")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a', 0.5), (2, 'b', 1.5)")
    return name


def state(spark, catalog, name: str) -> tuple:
    """What must not change: the catalog's metadata file (snapshots, refs, schema, properties)
    and the rows."""
    table = catalog.load_table(name.split(".", 1)[1])
    rows = sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {name}").collect())
    return table.metadata_location, rows


def refused_unchanged(spark, catalog, name: str, statement, *needles: str) -> str:
    """The statement is refused with a one-line lakerules error naming each needle, and the table
    is as it was."""
    before = state(spark, catalog, name)
    message = refused(spark, statement, *needles)
    assert len(message.strip().splitlines()) == 1, message
    assert not re.search(r"\('[^']*', '", message), message  # never a table named as a tuple
    assert state(spark, catalog, name) == before
    return message


def error_class(statement) -> tuple[str | None, str]:
    with pytest.raises(Exception) as info:
        statement()
    e = info.value
    return (e.getCondition() if hasattr(e, "getCondition") else None), str(e)


# ---- branch and tag names (Required 5) -----------------------------------------------------------

BAD_NAMES = {
    "": "it is empty",
    "main ": "whitespace",
    " x": "whitespace",
    "../../x": "'.' or '..' segment",
    "a/./b": "'.' or '..' segment",
    "a//b": "an empty segment between '/'",
    "/a": "an empty segment between '/'",
    "a/": "an empty segment between '/'",
    "x" * 256: "256 characters long; the limit is 255",
    "x" * 5000: "5000 characters long",
}


def test_bad_branch_and_tag_names_are_refused(spark, iceberg_catalog, t):
    for bad, problem in BAD_NAMES.items():
        quoted = "`" + bad + "`"
        for statement in (f"ALTER TABLE {t} CREATE BRANCH {quoted}", f"ALTER TABLE {t} CREATE TAG {quoted}",
                          f"ALTER TABLE {t} CREATE OR REPLACE BRANCH {quoted}",
                          f"ALTER TABLE {t} CREATE BRANCH IF NOT EXISTS {quoted} RETAIN 2 DAYS"):
            refused_unchanged(spark, iceberg_catalog, t, statement, t, "name is not allowed", problem,
                              "1 to 255 characters")
    # names that follow the rule are taken as they are
    for good in ("MAIN", "a/b", "feature/x-1", "x" * 255, "v1.0", "..x"):
        spark.sql(f"ALTER TABLE {t} CREATE TAG `{good}`")
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH `Main`")
    refs = {r.name for r in spark.sql(f"SELECT name FROM {t}.refs").collect()}
    assert refs == {"main", "MAIN", "a/b", "feature/x-1", "x" * 255, "v1.0", "..x", "Main"}
    assert spark.sql(f"SELECT count(*) FROM {t} VERSION AS OF 'a/b'").collect()[0][0] == 2
    # main is the table's main branch: not created again, never a tag, never dropped
    refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} CREATE BRANCH main", "already has a branch 'main'")
    refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} CREATE TAG main", "is a branch of the table, not a tag")
    refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} DROP BRANCH main", "cannot be dropped")
    # a ref named against the rule by another engine can still be moved and dropped
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "../x").commit()
    spark.sql(f"INSERT INTO {t} VALUES (3, 'c', 2.5)")
    spark.sql(f"ALTER TABLE {t} REPLACE BRANCH `../x`")
    assert spark.sql(f"SELECT count(*) FROM {t} VERSION AS OF '../x'").collect()[0][0] == 3
    spark.sql(f"ALTER TABLE {t} DROP BRANCH `../x`")
    assert "../x" not in iceberg_catalog.load_table(t.split(".", 1)[1]).metadata.refs


def test_a_write_audit_publish_branch_follows_the_rule(spark, iceberg_catalog, t):
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.wap.enabled'='true')")
    spark.conf.set("spark.wap.branch", "../../audit")
    try:
        refused_unchanged(spark, iceberg_catalog, t, f"INSERT INTO {t} VALUES (3, 'c', 2.5)",
                          "spark.wap.branch='../../audit'", t, "'.' or '..' segment")
    finally:
        spark.conf.unset("spark.wap.branch")


# ---- format-version (issue item 1) ---------------------------------------------------------------


def test_unknown_format_versions_and_downgrades_are_refused(spark, iceberg_catalog, t, ns):
    # format version 3: tests/test_v3.py
    refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='4')",
                      f"ALTER TABLE {t}", "'4' is not an Iceberg format version")
    refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='1')",
                      f"ALTER TABLE {t}", "would downgrade the table from format version 2",
                      "never downgraded")
    refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='two')",
                      "'two' is not an Iceberg format version")
    before = state(spark, iceberg_catalog, t)
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='2')")  # the version it has: nothing changes
    assert state(spark, iceberg_catalog, t) == before
    refused(spark, f"CREATE TABLE lake.{ns}.v4 (id INT) TBLPROPERTIES ('format-version'='4')",
            f"CREATE TABLE lake.{ns}.v4", "'4' is not an Iceberg format version")
    assert not spark.catalog.tableExists(f"lake.{ns}.v4")
    # an upgrade from 1 to 2 still works
    spark.sql(f"CREATE TABLE lake.{ns}.v1 (id INT) TBLPROPERTIES ('format-version'='1')")
    spark.sql(f"ALTER TABLE lake.{ns}.v1 SET TBLPROPERTIES ('format-version'='2')")
    assert iceberg_catalog.load_table(f"{ns}.v1").format_version == 2


# ---- VACUUM's retention (issue item 2) -----------------------------------------------------------


@pytest.mark.parametrize("hours, needle", [("1e400", "must be a finite number of hours"),
                                           ("1e300", "reaches back before 1970-01-01")])
def test_vacuum_retention_out_of_range_is_refused(spark, iceberg_catalog, t, hours, needle):
    refused_unchanged(spark, iceberg_catalog, t, f"VACUUM {t} RETAIN {hours} HOURS", f"VACUUM {t}", needle)


# ---- nesting (issue item 3) ----------------------------------------------------------------------


def nested(n: int, inner: str) -> str:
    return "(" * n + inner + ")" * n


def test_statements_nested_too_deep_fail_as_spark_parser_does(spark, iceberg_catalog, t):
    for statement in (f"OPTIMIZE {t} WHERE {nested(300, 'id = 1')}",
                      f"CALL lake.system.expire_snapshots(table => '{t[5:]}', retain_last => {nested(300, '1')})"):
        # (Spark's own parser says the same of a SELECT nested ~600 deep, but only once its JIT has
        # compiled the parser: in a cold JVM it may overflow outside its catch, a raw StackOverflowError)
        before = state(spark, iceberg_catalog, t)
        condition, message = error_class(lambda: spark.sql(statement).collect())
        assert condition == "FAILED_TO_PARSE_TOO_COMPLEX", message
        assert "Traceback" not in message and "RecursionError" not in message, message
        assert state(spark, iceberg_catalog, t) == before
    # nested less deep, as Spark's parser takes it, lakerules parses too (it failed from ~45 deep)
    got = spark.sql(f"CALL lake.system.expire_snapshots(table => '{t[5:]}', retain_last => {nested(200, '1')})")
    assert got.collect()[0].deleted_data_files_count == 0
    refused(spark, f"OPTIMIZE {t} WHERE {nested(200, 'id = 1')}", "may name only partition columns")


# ---- a branch's retention (issue item 4) ---------------------------------------------------------


@pytest.mark.parametrize("clause, needle", [
    ("WITH SNAPSHOT RETENTION 0 SNAPSHOTS", "min-snapshots-to-keep=0; it must be greater than 0"),
    ("WITH SNAPSHOT RETENTION 0 DAYS", "max-snapshot-age-ms=0; it must be greater than 0"),
    ("RETAIN 0 HOURS", "max-ref-age-ms=0; it must be greater than 0"),
    ("WITH SNAPSHOT RETENTION 3000000000 SNAPSHOTS", "more than the largest value Iceberg stores"),
])
def test_branch_retention_must_be_positive(spark, iceberg_catalog, t, clause, needle):
    message = refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} CREATE BRANCH b {clause}",
                                f"ALTER TABLE {t} CREATE BRANCH 'b'", needle)
    assert "does not say whether it landed" not in message


# ---- spark.lakerules.* settings (issue item 5) ---------------------------------------------------


@pytest.fixture
def with_deletes(spark, ns):
    """A table with position deletes and an equality delete (its reads use the delete settings)."""
    name = f"lake.{ns}.dl"
    spark.sql(f"CREATE TABLE {name} (id BIGINT, k INT, a STRING)")
    spark.sql(f"INSERT INTO {name} SELECT id, CAST(id % 3 AS INT), repeat('x', 50) FROM range(30)")
    spark.sql(f"DELETE FROM {name} WHERE id = 4")  # position deletes
    lakerules.delete_by_key(spark, name, spark.range(7, 8), on=["id"])  # an equality delete
    return name


SETTINGS = [  # (setting, bad value, what the error says, statement that reads it)
    ("spark.lakerules.removeOrphanFiles.minAge", "garbage", "is not a duration", "orphans"),
    ("spark.lakerules.removeOrphanFiles.minAge", "-5d", "a duration cannot be negative", "orphans"),
    ("spark.lakerules.removeOrphanFiles.minAge", "-5d", "a duration cannot be negative", "vacuum"),
    ("spark.lakerules.read.positionDeleteBroadcastRows", "many", "is not a number of rows", "select"),
    ("spark.lakerules.read.equalityDeleteFilterThreshold", "-1", "is not a number of rows", "select"),
    ("spark.lakerules.read.equalityDeleteSetBytes", "256m", "is not a number of bytes", "select"),
    ("spark.lakerules.read.tasksByRows", "yes", "is not true or false", "select"),
    ("spark.lakerules.read.bloomFilters", "on", "is not true or false", "select"),
    ("spark.lakerules.read.equalityDeletePositions", "1", "is not true or false", "select"),
    ("spark.lakerules.read.lateMaterialization.maxRows", "1e5", "is not a number of rows", "late"),
    ("spark.lakerules.optimize.zorder.incrementalRatio", "inf", "expected a finite number >= 0", "optimize"),
    ("spark.lakerules.write.positionDeleteDriverRows", "some", "is not a number of rows", "delete"),
]


def test_bad_settings_are_refused_by_name(spark, iceberg_catalog, with_deletes):
    ident = with_deletes.split(".", 1)[1]
    statements = {
        "orphans": f"CALL lake.system.remove_orphan_files(table => '{ident}', dry_run => true)",
        "vacuum": f"VACUUM {with_deletes} DRY RUN",
        "select": f"SELECT * FROM {with_deletes} WHERE k = 1",
        "late": f"SELECT * FROM {with_deletes} WHERE k = 1",
        "optimize": f"OPTIMIZE {with_deletes} ZORDER BY (k)",
        "delete": f"DELETE FROM {with_deletes} WHERE id = 5",
    }
    before = iceberg_catalog.load_table(ident).metadata_location
    for key, value, needle, query in SETTINGS:
        spark.conf.set(key, value)
        if query == "late":
            spark.conf.set("spark.lakerules.read.lateMaterialization", "on")
        try:
            message = refused(spark, statements[query], f"{key}={value!r}", needle)
            assert len(message.strip().splitlines()) == 1, message
        finally:
            spark.conf.unset(key)
            spark.conf.unset("spark.lakerules.read.lateMaterialization")
    assert iceberg_catalog.load_table(ident).metadata_location == before
    # 0 still turns the orphan floor off, as documented
    now = f"CALL lake.system.remove_orphan_files(table => '{ident}', older_than => current_timestamp(), dry_run => true)"
    refused(spark, now, "less than spark.lakerules.removeOrphanFiles.minAge")
    spark.conf.set("spark.lakerules.removeOrphanFiles.minAge", "0")
    try:
        spark.sql(now).collect()
    finally:
        spark.conf.unset("spark.lakerules.removeOrphanFiles.minAge")


# ---- identifier fields (issue item 6) ------------------------------------------------------------


def test_identifier_fields_must_be_required_columns(spark, iceberg_catalog, t):
    refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} SET IDENTIFIER FIELDS s",
                      f"ALTER TABLE {t} SET IDENTIFIER FIELDS", "column 's' is nullable", "required (NOT NULL)")
    refused_unchanged(spark, iceberg_catalog, t, f"ALTER TABLE {t} SET IDENTIFIER FIELDS id, d",
                      "column 'd' is nullable")
    spark.sql(f"ALTER TABLE {t} SET IDENTIFIER FIELDS id")
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).schema().identifier_field_names() == {"id"}


# ---- the table's name in messages (issue item 7) -------------------------------------------------


def test_messages_name_the_table_as_catalog_namespace_table(spark, iceberg_catalog, t):
    refused_unchanged(spark, iceberg_catalog, t, f"SELECT * FROM {t} VERSION AS OF 'nope'",
                      f"table {t} has no snapshot or reference 'nope'")
    refused_unchanged(spark, iceberg_catalog, t, f"SELECT * FROM {t} TIMESTAMP AS OF '1999-01-01'",
                      f"table {t} has no snapshot at or before")
    refused_unchanged(spark, iceberg_catalog, t, f"CALL lake.system.rollback_to_snapshot(table => '{t[5:]}', "
                                                 "snapshot_id => 1)", f"table {t} has no snapshot 1")


def test_table_name_helper():
    from types import SimpleNamespace

    from lakerules.iceberg.names import table_name

    table = SimpleNamespace(name=lambda: ("db", "t"), catalog=SimpleNamespace(name="lake"))
    assert table_name(table) == "lake.db.t"
    assert table_name(SimpleNamespace(name=lambda: ("a", "b", "t"), catalog=None)) == "a.b.t"


# ---- data files missing or damaged on disk (issue item 8) ----------------------------------------


def _damage(path: str, how: str) -> None:
    if how == "missing":
        os.remove(path)
        crc = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")
        if os.path.exists(crc):
            os.remove(crc)
    elif how == "truncated":
        with open(path, "r+b") as f:
            f.truncate(100)
    else:  # overwritten, same size
        size = os.path.getsize(path)
        with open(path, "wb") as f:
            f.write(b"x" * size)


@pytest.fixture
def two_files(spark, iceberg_catalog, ns):
    """lake.<ns>.f: rows 1, 2 in one data file, row 3 in another; the first file's local path."""
    name = f"lake.{ns}.f"
    spark.sql(f"CREATE TABLE {name} (id BIGINT, s STRING)")
    spark.sql(f"INSERT INTO {name} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 'a'), (2, 'b')")
    first = iceberg_catalog.load_table(f"{ns}.f").current_snapshot().snapshot_id
    spark.sql(f"INSERT INTO {name} SELECT /*+ COALESCE(1) */ * FROM VALUES (3, 'c')")
    table = iceberg_catalog.load_table(f"{ns}.f")
    path = next(t.file.file_path for t in table.scan(snapshot_id=first).plan_files())
    return name, re.sub(r"^file:/*", "/", path)


@pytest.mark.parametrize("how", ["missing", "truncated", "overwritten"])
def test_statements_over_a_missing_or_damaged_data_file_say_which_and_what_to_do(spark, iceberg_catalog, ns,
                                                                                  two_files, how):
    name, path = two_files
    spark.sql(f"CREATE TABLE lake.{ns}.other (id BIGINT, s STRING)")
    _damage(path, how)
    before = iceberg_catalog.load_table(f"{ns}.f").metadata_location
    problem = "is missing" if how == "missing" else "cannot be read: it is damaged"
    fix = (f"CALL lake.system.remove_missing_files(table => '{ns}.f'"
           + (")" if how == "missing" else ", include_damaged => true)"))
    for statement in (f"UPDATE {name} SET s = 'z' WHERE id = 1",
                      f"DELETE FROM {name} WHERE s = 'b'",
                      f"MERGE INTO {name} t USING (SELECT 1 AS id) u ON t.id = u.id WHEN MATCHED THEN DELETE",
                      f"OPTIMIZE {name}",
                      f"INSERT INTO lake.{ns}.other SELECT * FROM {name}"):
        message = refused(spark, statement, os.path.basename(path), f"of table {name} {problem}",
                          "Nothing was changed", "Restore the file", fix)
        assert len(message.strip().splitlines()) == 1, message
        assert "REFRESH TABLE" not in message
        assert iceberg_catalog.load_table(f"{ns}.f").metadata_location == before
    assert spark.sql(f"SELECT count(*) FROM lake.{ns}.other").collect()[0][0] == 0


def test_remove_missing_files(spark, iceberg_catalog, ns, two_files):
    name, path = two_files
    ident = name[5:]
    assert spark.sql(f"CALL lake.system.remove_missing_files(table => '{ident}')").collect() == []  # nothing gone
    _damage(path, "missing")
    before = iceberg_catalog.load_table(ident).metadata_location
    listed = spark.sql(f"CALL lake.system.remove_missing_files(table => '{ident}', dry_run => true)").collect()
    assert [(re.sub(r"^file:/*", "/", r.file_path), r.file_content, r.problem) for r in listed] == \
        [(path, "data", "missing")]
    assert iceberg_catalog.load_table(ident).metadata_location == before  # a dry run changes nothing
    removed = spark.sql(f"CALL lake.system.remove_missing_files(table => '{ident}')").collect()
    assert [r.file_path for r in removed] == [listed[0].file_path]
    table = iceberg_catalog.load_table(ident)
    assert len(table.metadata.snapshots) == 3  # one commit
    assert table.current_snapshot().summary["lakerules.operation"] == "remove_missing_files"
    assert sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {name}").collect()) == [(3, "c")]
    spark.sql(f"UPDATE {name} SET s = 'z' WHERE id = 3")  # the table works again
    assert spark.sql(f"SELECT s FROM {name}").collect()[0][0] == "z"


def test_remove_missing_files_include_damaged(spark, iceberg_catalog, ns):
    name = f"lake.{ns}.g"
    spark.sql(f"CREATE TABLE {name} (id BIGINT) TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    for i in range(3):
        spark.sql(f"INSERT INTO {name} SELECT /*+ COALESCE(1) */ * FROM VALUES ({i}), ({i + 10})")
    spark.sql(f"DELETE FROM {name} WHERE id = 10")  # a position delete file on the first data file
    table = iceberg_catalog.load_table(f"{ns}.g")
    files = [t.file.file_path for t in table.scan().plan_files()]
    by_rows = {}
    for t in table.scan().plan_files():
        ids = sorted(r["id"] for r in spark.read.parquet(t.file.file_path).collect())
        by_rows[ids[0]] = re.sub(r"^file:/*", "/", t.file.file_path)
    assert len(files) == 3
    _damage(by_rows[0], "truncated")
    _damage(by_rows[1], "overwritten")
    assert spark.sql(f"CALL lake.system.remove_missing_files(table => '{ns}.g', dry_run => true)").collect() == []
    rows = spark.sql(f"CALL lake.system.remove_missing_files(table => '{ns}.g', include_damaged => true)").collect()
    problems = {(os.path.basename(re.sub(r"^file:/*", "/", r.file_path)), r.file_content): r.problem for r in rows}
    assert problems[(os.path.basename(by_rows[0]), "data")].startswith("damaged: 100 bytes, the table recorded")
    assert problems[(os.path.basename(by_rows[1]), "data")] == "damaged: not a Parquet file (no PAR1 at its start and end)"
    assert [p for (_, kind), p in problems.items() if kind == "position deletes"] == \
        ["applies only to removed data files"]
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {name}").collect()) == [2, 12]
    assert iceberg_catalog.load_table(f"{ns}.g").current_snapshot().summary["total-delete-files"] == "0"


# ---- errors in the statement's own expressions (issue item 9) ------------------------------------


def test_a_write_error_points_at_the_query_not_at_lakerules(spark, iceberg_catalog, t, ns):
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        for statement in (f"INSERT INTO {t} SELECT id DIV 0, 'x', 0.5 FROM range(3)",
                          f"CREATE TABLE lake.{ns}.c AS SELECT id DIV 0 AS x FROM range(2)"):
            before = state(spark, iceberg_catalog, t)
            condition, message = error_class(lambda: spark.sql(statement).collect())
            assert condition == "DIVIDE_BY_ZERO", message
            assert "lakerules" not in message and ".py:" not in message, message
            assert "== SQL" in message and "id DIV 0" in message, message  # Spark's own context: the query
            assert state(spark, iceberg_catalog, t) == before
        condition, message = error_class(
            lambda: spark.range(3).selectExpr("id DIV 0 AS id", "'x' AS s", "0.5 AS d").writeTo(t).append())
        assert condition == "DIVIDE_BY_ZERO" and "files.py" not in message, message
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


# ---- issue 51: errors that told the truth badly ---------------------------------------------------


@pytest.mark.parametrize("statement", [
    "DELETE FROM {t} WHERE id = 2",
    "INSERT INTO {t} VALUES (20, 'x', 0.0)",
    "UPDATE {t} SET s = 'u' WHERE id = 1",
    "MERGE INTO {t} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE",
])
def test_a_statement_racing_expire_snapshots_is_run_again(spark, t, engines, monkeypatch, statement):
    """Another commit lands and expire_snapshots removes the snapshot the statement read while it
    commits: not damage (the old message said to restore the file or roll back) but a conflict,
    which the executor resolves by running the statement again on the table as it is now."""
    from lakerules.write import commit

    races = []

    def expire_meanwhile(table):
        if not races:
            races.append(1)
            spark.sql(f"INSERT INTO {t} VALUES (10, 'm', 0.0)")
            spark.sql(f"CALL lake.system.expire_snapshots(table => '{t.split('.', 1)[1]}', "
                      "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)").collect()

    monkeypatch.setattr(commit, "before_commit", expire_meanwhile)
    spark.sql(statement.format(t=t)).collect()
    assert races == [1]
    rows = {(1, "a", 0.5), (2, "b", 1.5), (10, "m", 0.0)}
    if statement.startswith("DELETE"):
        rows.discard((2, "b", 1.5))
    elif statement.startswith("INSERT"):
        rows.add((20, "x", 0.0))
    elif statement.startswith("UPDATE"):
        rows = rows - {(1, "a", 0.5)} | {(1, "u", 0.5)}
    else:
        rows.discard((1, "a", 0.5))
    engines.assert_same(t, expected=sorted(rows))


def test_a_statement_that_keeps_meeting_expiry_fails_as_a_conflict(spark, t, iceberg_catalog, monkeypatch):
    from lakerules.write import commit

    busy = []

    def expire_every_time(table):
        if busy:  # the commits of the maintenance itself
            return
        busy.append(1)
        try:
            spark.sql(f"INSERT INTO {t} VALUES (10, 'm', 0.0)")
            spark.sql(f"CALL lake.system.expire_snapshots(table => '{t.split('.', 1)[1]}', "
                      "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)").collect()
        finally:
            busy.pop()

    monkeypatch.setattr(commit, "before_commit", expire_every_time)
    message = refused(spark, f"DELETE FROM {t} WHERE id = 2", f"conflict on {t}", "the table is healthy",
                      "Run it again")
    assert "Restore the file" not in message and "roll the table back" not in message
    assert len(message.strip().splitlines()) == 1, message
    monkeypatch.setattr(commit, "before_commit", None)
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {t}").collect()) == [1, 2, 10, 10, 10]


def test_a_missing_borrowed_file_is_named_under_the_statements_table(spark, iceberg_catalog, ns):
    owner, borrower = f"lake.{ns}.mvy", f"lake.{ns}.mv"
    spark.sql(f"CREATE TABLE {owner} (id BIGINT)")
    spark.sql(f"INSERT INTO {owner} SELECT /*+ COALESCE(1) */ * FROM VALUES (1L), (2L) AS v(id)")  # one data file
    spark.sql(f"CREATE TABLE {borrower} (id BIGINT)")
    data = f"{iceberg_catalog.load_table(f'{ns}.mvy').location()}/data"
    spark.sql(f"CALL lake.system.add_files(table => '{ns}.mv', source_table => '`parquet`.`{data}`', shared => true)").collect()
    path = next(t.file.file_path for t in iceberg_catalog.load_table(f"{ns}.mv").scan().plan_files())
    _damage(re.sub(r"^file:/*", "/", path), "missing")
    before = iceberg_catalog.load_table(f"{ns}.mv").metadata_location
    message = refused(spark, f"DELETE FROM {borrower} WHERE id = 1", f"of table {borrower} is missing",
                      f"remove_missing_files(table => '{ns}.mv')")
    assert "mvy" not in re.sub(r"file \S+", "", message) and len(message.strip().splitlines()) == 1, message
    assert iceberg_catalog.load_table(f"{ns}.mv").metadata_location == before


@pytest.mark.parametrize("statement", [
    "INSERT INTO {t} SELECT 1e20, 'x', 0.0",
    "MERGE INTO {t} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET id = 1e20",
])
def test_a_failed_write_under_ansi_leaves_no_false_warning(spark, t, caplog, statement):
    """The write fails before it made its folder: there is nothing to remove, and nothing to warn of."""
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with caplog.at_level("WARNING", logger="lakerules"):
            with pytest.raises(Exception, match="CAST_OVERFLOW"):
                spark.sql(statement.format(t=t)).collect()
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert not [r for r in caplog.records if "could not remove" in r.getMessage()], caplog.text
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("statement, needles", [
    ("CREATE TABLE lake.{ns}.x (id BIGINT) LOCATION '{warehouse}/catalog.db/x'", ("which is a file, not a folder",)),
    ("CREATE TABLE lake.{ns}." + "a" * 300 + " (id BIGINT)", ("is 300 bytes long", "at most 246 bytes")),
    ("CREATE NAMESPACE lake." + "n" * 260, ("is 260 bytes long",)),
    ("CALL lake.system.expire_snapshots(table => '{ns}.no_such_table')", ("table lake.{ns}.no_such_table does not exist",)),
    ("ALTER TABLE lake.{ns}.p ADD PARTITION FIELD years(ts)", ("has that field already", "Nothing was changed")),
    ("CALL lake.system.remove_orphan_files(table => '{ns}.p', older_than => NULL)",
     ("argument 'older_than' is NULL; leave it out for its default",)),
    ("RESTORE TABLE lake.{ns}.p TO TIMESTAMP AS OF TIMESTAMP'2999-01-01 00:00:00'", ("is in the future",)),
])
def test_bad_input_is_one_line_and_changes_nothing(spark, iceberg_catalog, ns, warehouse, statement, needles):
    p = f"lake.{ns}.p"
    spark.sql(f"CREATE TABLE {p} (id BIGINT, ts TIMESTAMP) PARTITIONED BY (years(ts))")
    spark.sql(f"INSERT INTO {p} VALUES (1, TIMESTAMP'2026-01-01 00:00:00')")
    namespaces = spark.sql("SHOW NAMESPACES IN lake").collect()
    text = statement.format(ns=ns, warehouse=warehouse)
    refused_unchanged(spark, iceberg_catalog, p, text, *(n.format(ns=ns) for n in needles))
    assert spark.sql("SHOW NAMESPACES IN lake").collect() == namespaces
    assert not iceberg_catalog.table_exists(f"{ns}.x")


def test_unset_of_a_missing_property_is_a_no_op(spark, iceberg_catalog, t):
    before = state(spark, iceberg_catalog, t)
    spark.sql(f"ALTER TABLE {t} UNSET TBLPROPERTIES ('no.such.key')")
    spark.sql(f"ALTER TABLE {t} UNSET TBLPROPERTIES IF EXISTS ('no.such.key')")
    assert state(spark, iceberg_catalog, t)[1] == before[1]


def test_add_files_with_a_column_the_table_lacks_names_it(spark, iceberg_catalog, ns, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = f"lake.{ns}.a"
    spark.sql(f"CREATE TABLE {name} (id BIGINT)")
    schema = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
                        pa.field("v", pa.string(), metadata={b"PARQUET:field_id": b"2"})])
    pq.write_table(pa.table({"id": [1], "v": ["a"]}, schema=schema), tmp_path / "f.parquet")
    refused_unchanged(spark, iceberg_catalog, name,
                      f"CALL lake.system.add_files(table => '{ns}.a', source_table => '`parquet`.`{tmp_path}`')",
                      f"has columns table {name} does not have: v (field id 2)", "Nothing was added")


def test_a_stream_checkpointed_at_its_tables_folder_is_refused_in_one_line(spark, iceberg_catalog, ns, tmp_path):
    name = f"lake.{ns}.k"
    spark.sql(f"CREATE TABLE {name} (id BIGINT)")
    spark.sql(f"INSERT INTO {name} VALUES (1)")
    location = iceberg_catalog.load_table(f"{ns}.k").location()
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.json").write_text('{"id": 2}\n')
    rows = spark.readStream.schema("id BIGINT").json(str(source))
    before = state(spark, iceberg_catalog, name)
    message = refused(spark, lambda: rows.writeStream.option("checkpointLocation", location)
                      .trigger(availableNow=True).toTable(name).awaitTermination(),
                      "checkpoint location at the table's own folder", "outside the table's folder")
    assert len(message.strip().splitlines()) == 1, message
    assert state(spark, iceberg_catalog, name) == before
    folder = fu.local(location)
    assert not (folder / "offsets").exists() and not (folder / "commits").exists()
