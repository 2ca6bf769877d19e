"""No wrong answer after a type change (issue #51, items 5-7): a replace that changes a column's
type gives it a new field id, so that branches, tags, time travel and rollbacks to the old
snapshots read their own files; ALTER COLUMN ... TYPE follows Iceberg's promotions; a column
default is checked against its type and range when it is declared."""

from __future__ import annotations

import decimal

import pytest

from errors_util import refused


def _rows(spark, name: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {name}").collect())


def _pyiceberg(catalog, ident: str, **scan) -> list[tuple]:
    table = catalog.load_table(ident).scan(**scan).to_arrow()
    return sorted(tuple(row.values()) for row in table.to_pylist())


# ---- 6. a replace that changes a column's type --------------------------------------------------


@pytest.mark.parametrize("how", ["ctas", "save_as_table", "string_column"])
def test_a_replace_that_changes_a_type_keeps_old_snapshots_readable(spark, ns, iceberg_catalog, how):
    t = f"lake.{ns}.rb"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    old_snapshot = iceberg_catalog.load_table(f"{ns}.rb").current_snapshot().snapshot_id
    old_ids = {f.name: f.field_id for f in iceberg_catalog.load_table(f"{ns}.rb").schema().fields}
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH keep")
    spark.sql(f"ALTER TABLE {t} CREATE TAG v1")
    if how == "ctas":
        spark.sql(f"CREATE OR REPLACE TABLE {t} AS SELECT 5 AS id, 'x' AS v")
        new_rows = [(5, "x")]
    elif how == "save_as_table":
        spark.sql("SELECT 5 AS id, 'x' AS v").write.mode("overwrite").saveAsTable(t)
        new_rows = [(5, "x")]
    else:
        spark.sql(f"CREATE OR REPLACE TABLE {t} (id STRING, v STRING)")
        spark.sql(f"INSERT INTO {t} VALUES ('five', 'x')")
        new_rows = [("five", "x")]
    new_ids = {f.name: f.field_id for f in iceberg_catalog.load_table(f"{ns}.rb").schema().fields}
    assert new_ids["id"] != old_ids["id"] and new_ids["v"] == old_ids["v"]  # v's type is the same: its id stays
    assert _rows(spark, t) == new_rows
    for old in (f"{t}.branch_keep", f"{t}.tag_v1", f"{t} VERSION AS OF {old_snapshot}", f"{t} VERSION AS OF 'v1'"):
        assert _rows(spark, old) == [(1, "a"), (2, "b")], old
    assert _pyiceberg(iceberg_catalog, f"{ns}.rb", snapshot_id=old_snapshot) == [(1, "a"), (2, "b")]
    # main back at the old snapshot: its schema is current again, for Spark and pyiceberg alike
    spark.sql(f"CALL lake.system.set_current_snapshot(table => '{ns}.rb', snapshot_id => {old_snapshot})").collect()
    assert _rows(spark, t) == [(1, "a"), (2, "b")]
    assert _pyiceberg(iceberg_catalog, f"{ns}.rb") == [(1, "a"), (2, "b")]
    spark.sql(f"INSERT INTO {t} VALUES (3, 'c')")
    assert _rows(spark, t) == [(1, "a"), (2, "b"), (3, "c")]


def test_restore_across_a_replace_reads_its_rows(spark, ns, iceberg_catalog):
    """RESTORE of a snapshot before a replace that changed a column's type (rollback_to_snapshot
    cannot: the replace's snapshot has no parent) makes that snapshot's schema current again."""
    t = f"lake.{ns}.rr"
    spark.sql(f"CREATE TABLE {t} (id BIGINT)")
    spark.sql(f"INSERT INTO {t} VALUES (1), (2)")
    old_snapshot = iceberg_catalog.load_table(f"{ns}.rr").current_snapshot().snapshot_id
    spark.sql(f"CREATE OR REPLACE TABLE {t} AS SELECT CAST(7 AS INT) AS id")
    spark.sql(f"RESTORE TABLE {t} TO VERSION AS OF {old_snapshot}").collect()
    assert _rows(spark, t) == [(1,), (2,)] and _pyiceberg(iceberg_catalog, f"{ns}.rr") == [(1,), (2,)]
    assert spark.table(t).schema.simpleString() == "struct<id:bigint>"


def test_a_replace_with_a_promoted_type_keeps_the_field_id(spark, ns, iceberg_catalog):
    t = f"lake.{ns}.rp"
    spark.sql(f"CREATE TABLE {t} (id INT, d DECIMAL(10,2))")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1.25)")
    before = {f.name: f.field_id for f in iceberg_catalog.load_table(f"{ns}.rp").schema().fields}
    spark.sql(f"CREATE OR REPLACE TABLE {t} (id BIGINT, d DECIMAL(12,2))")
    after = {f.name: f.field_id for f in iceberg_catalog.load_table(f"{ns}.rp").schema().fields}
    assert before == after


# ---- 7. ALTER COLUMN ... TYPE follows Iceberg's promotions ---------------------------------------


@pytest.mark.parametrize("column, old, new", [
    ("dec", "DECIMAL(10,2)", "DECIMAL(12,3)"),
    ("dec", "DECIMAL(10,2)", "DECIMAL(20,4)"),
    ("n", "INT", "STRING"),
    ("n", "INT", "DOUBLE"),
    ("n", "FLOAT", "DECIMAL(10,2)"),
    # Spark refuses these itself (a narrowing): the table is unchanged all the same
    ("dec", "DECIMAL(10,2)", "DECIMAL(9,2)"),
    ("n", "BIGINT", "INT"),
    ("n", "DOUBLE", "FLOAT"),
])
def test_a_type_change_that_is_no_promotion_is_refused(spark, ns, iceberg_catalog, column, old, new):
    t = f"lake.{ns}.d"
    spark.sql(f"CREATE TABLE {t} ({column} {old})")
    spark.sql(f"INSERT INTO {t} VALUES (CAST(123.45 AS {old}))")
    before = iceberg_catalog.load_table(f"{ns}.d").metadata_location
    with pytest.raises(Exception) as info:
        spark.sql(f"ALTER TABLE {t} ALTER COLUMN {column} TYPE {new}").collect()
    message = str(info.value)
    assert ("cannot become" in message and "Nothing was changed" in message and "Traceback" not in message
            or "NOT_SUPPORTED_CHANGE_COLUMN" in message), message
    assert iceberg_catalog.load_table(f"{ns}.d").metadata_location == before


def test_promotions_read_the_same_values(spark, ns):
    t = f"lake.{ns}.p"
    spark.sql(f"CREATE TABLE {t} (i INT, f FLOAT, dec DECIMAL(10,2))")
    spark.sql(f"INSERT INTO {t} VALUES (7, 1.5, 123.45)")
    for column, new in (("i", "BIGINT"), ("f", "DOUBLE"), ("dec", "DECIMAL(12,2)")):
        spark.sql(f"ALTER TABLE {t} ALTER COLUMN {column} TYPE {new}")
    assert spark.sql(f"SELECT * FROM {t} WHERE dec = 123.45").collect()[0] == (7, 1.5, decimal.Decimal("123.45"))
    assert spark.sql(f"SELECT max(dec) FROM {t}").collect()[0][0] == decimal.Decimal("123.45")


# ---- 5. defaults checked when they are declared --------------------------------------------------


@pytest.mark.parametrize("column, default, needle", [
    ("c DECIMAL(38,0)", "9999999999999999999999", "fits 64 bits"),
    ("c DECIMAL(20,2)", "-999999999999999999.99", "fits 64 bits"),
    ("d DATE", "DATE'-0001-01-01'", "years 1 to 9999"),
    ("ts TIMESTAMP", "TIMESTAMP'294247-01-01 00:00:00'", "years 1 to 9999"),
])
def test_a_default_a_reader_cannot_fill_is_refused(spark, ns, iceberg_catalog, column, default, needle):
    t = f"lake.{ns}.v3"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} VALUES (1)")
    before = iceberg_catalog.load_table(f"{ns}.v3").metadata_location
    refused(spark, f"ALTER TABLE {t} ADD COLUMN {column} DEFAULT {default}", needle, "Nothing was changed")
    name = column.split()[0]
    spark.sql(f"ALTER TABLE {t} ADD COLUMN {column}")
    refused(spark, f"ALTER TABLE {t} ALTER COLUMN {name} SET DEFAULT {default}", needle)
    assert spark.sql(f"SELECT id FROM {t}").collect() == [(1,)]
    assert iceberg_catalog.load_table(f"{ns}.v3").metadata_location != before  # only the plain ADD COLUMN landed


def test_wide_decimal_defaults_that_fit_read_back(spark, ns, engines):
    t = f"lake.{ns}.v3"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} VALUES (1)")
    spark.sql(f"ALTER TABLE {t} ADD COLUMN c DECIMAL(38,0) DEFAULT 9223372036854775807")
    spark.sql(f"ALTER TABLE {t} ADD COLUMN d DATE DEFAULT DATE'9999-12-31'")
    assert spark.sql(f"SELECT c, CAST(d AS STRING) FROM {t}").collect() == [(decimal.Decimal("9223372036854775807"),
                                                                           "9999-12-31")]
