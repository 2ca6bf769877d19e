"""The one parser for what Spark's grammar lacks (lakerules.sql.dialect): OPTIMIZE, CALL, partition
evolution and EXPLAIN routing, through comments, quoted names and string literals; a statement
is parsed whole, or fails with Spark's ParseException naming the problem."""

from __future__ import annotations

import re

import pytest

from lakerules.sql import dialect, statements
from lakerules.errors import LakeSyntaxError

ROUTES = re.compile(statements.ROUTES, re.IGNORECASE | re.DOTALL)


@pytest.mark.parametrize("sql, kind", [
    ("/* nightly */ OPTIMIZE lake.db.t", "OPTIMIZE"),
    ("-- c\nCALL lake.system.expire_snapshots(table => 'db.t')", "CALL"),
    ("  /* a */ -- b\n  /* c */ explain DELETE FROM t", "EXPLAIN"),
    ("ALTER TABLE lake.db.t /* x */ ADD PARTITION FIELD bucket(4, id)", "PARTITION FIELD"),
    ("ALTER TABLE `we``ird.t` DROP PARTITION FIELD p", "PARTITION FIELD"),
])
def test_lake_statements_are_routed_and_recognized_through_comments(sql, kind):
    assert ROUTES.match(sql), sql
    assert dialect.statement_kind(sql) == kind


@pytest.mark.parametrize("sql", [
    "SELECT 'OPTIMIZE' FROM t",
    "ALTER TABLE t SET TBLPROPERTIES ('k' = 'ADD PARTITION FIELD x')",
    "-- OPTIMIZE t\nSELECT 1",
    "/* CALL x() */ SELECT 1",
    "INSERT INTO t VALUES ('EXPLAIN')",
])
def test_other_statements_are_not_ours(sql):
    assert dialect.statement_kind(sql) is None


def test_call_arguments_keep_their_text():
    call = dialect.parse_call(
        "CALL lake.system.remove_orphan_files(table => 'db.t', older_than => TIMESTAMP '2026-01-01 00:00:00', "
        "location => 'file:///w/a,b (c)/it''s', dry_run => true);")
    assert call.this == ["lake", "system", "remove_orphan_files"]
    assert call.args["args"] == [
        ("table", "'db.t'"), ("older_than", "TIMESTAMP '2026-01-01 00:00:00'"),
        ("location", "'file:///w/a,b (c)/it''s'"), ("dry_run", "true")]
    positional = dialect.parse_call("CALL `la``ke`.system.expire_snapshots('db.t', 3)")
    assert positional.this == ["la`ke", "system", "expire_snapshots"]
    assert positional.args["args"] == [(None, "'db.t'"), (None, "3")]


def test_partition_fields_with_hostile_names():
    p = dialect.parse_partition_field(
        "ALTER TABLE lake.`d b`.`t,1` REPLACE PARTITION FIELD `p(1)` WITH truncate(2, `a.b`.`c,d`) AS `n m`;")
    assert p.this == ["lake", "d b", "t,1"] and p.args["op"] == "REPLACE"
    assert p.args["field"].args == {"transform": None, "args": None, "column": ["p(1)"], "alias": None}
    assert p.args["new"].args == {"transform": "truncate", "args": [{"lit": "2"}, {"ref": ["a.b", "c,d"]}],
                                  "column": None, "alias": "n m"}


@pytest.mark.parametrize("sql, message", [
    ("ALTER TABLE lake.db.t/**/,lake.db.u ADD PARTITION FIELD bucket(4, id)",
     "expected ADD, DROP or REPLACE PARTITION FIELD after the table name"),
    ("ALTER TABLE lake.db.t ADD PARTITION FIELD bucket(4, id) extra", "unexpected 'extra'"),
    ("ALTER TABLE lake.db.t DROP PARTITION FIELD p AS q", "AS names a new partition field"),
    ("ALTER TABLE lake.db.t REPLACE PARTITION FIELD p", "expected WITH"),
    ("CALL lake.system.expire_snapshots(table => 'db.t',)", "expected an argument value"),
    ("CALL lake.system.expire_snapshots(table => 'db.t'", "expected , or ) after an argument"),
    ("CALL lake.system.expire_snapshots", "expected ( after the procedure name"),
    ("CALL lake.system.f() SELECT 1", "unexpected 'SELECT'"),
])
def test_syntax_errors_name_the_problem(sql, message):
    with pytest.raises(LakeSyntaxError, match=re.escape(message)):
        (dialect.parse_call if "CALL" in sql else dialect.parse_partition_field)(sql)


def test_through_spark(spark, ns, iceberg_catalog):
    t = f"lake.{ns}.`we,ird`"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, `a,b` STRING)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'x'), (2, 'y')")
    (row,) = spark.sql(f"-- compact\n/* twice */ OPTIMIZE {t}").collect()
    assert row.metrics.numFilesRemoved >= 1
    spark.sql(f"/* nightly */ ALTER TABLE {t} ADD PARTITION FIELD bucket(4, `a,b`) AS `p(1)`")
    table = iceberg_catalog.load_table(f"{ns}.we,ird")
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("p(1)", "bucket[4]")]
    (row,) = spark.sql(f"/* keep one */ CALL lake.system.expire_snapshots(table => '{ns}.`we,ird`', "
                       "older_than => current_timestamp(), retain_last => 1)").collect()
    assert row.deleted_manifest_lists_count >= 1
    with pytest.raises(Exception, match="expected ADD, DROP or REPLACE PARTITION FIELD"):
        spark.sql(f"ALTER TABLE {t}/**/,lake.{ns}.u ADD PARTITION FIELD bucket(4, id)")
    assert len(iceberg_catalog.load_table(f"{ns}.we,ird").specs()) == 2  # nothing else changed
