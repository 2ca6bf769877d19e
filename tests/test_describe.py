"""DESCRIBE [EXTENDED | FORMATTED], DESCRIBE ... col, SHOW CREATE TABLE and TRUNCATE TABLE on lake
tables, with Iceberg's Spark catalog's output and semantics (issue 30, Required 8)."""

from __future__ import annotations

import pytest
from errors_util import refused


def _rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def _details(rows: list[tuple]) -> dict[str, str]:
    """The rows after "# Detailed Table Information", by their first column."""
    names = [r[0] for r in rows]
    return {r[0]: r[1] for r in rows[names.index("# Detailed Table Information") + 1:]}


@pytest.fixture
def described(spark, ns, iceberg_catalog):
    """A partitioned table with a property, a sort order, identifier fields and three rows."""
    t = f"lake.{ns}.t"
    spark.sql(f"CREATE TABLE {t} (id bigint NOT NULL COMMENT 'the id', kind string, ts timestamp, d date, "
              f"m decimal(10,2)) PARTITIONED BY (bucket(4, id), days(ts)) TBLPROPERTIES ('k1'='v1')")
    spark.sql(f"ALTER TABLE {t} WRITE ORDERED BY kind, id DESC NULLS LAST")
    spark.sql(f"ALTER TABLE {t} SET IDENTIFIER FIELDS id")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', TIMESTAMP'2024-01-01 00:00:00', DATE'2024-01-01', 1.25), "
              f"(2, 'b', TIMESTAMP'2024-01-02 10:00:00.5', DATE'2024-03-01', 3.00), (3, NULL, NULL, NULL, NULL)")
    return t, iceberg_catalog.load_table(f"{ns}.t")


def test_describe_lists_columns_and_partitioning(spark, described):
    t, _ = described
    rows = _rows(spark, f"DESCRIBE {t}")
    assert rows[:5] == [("id", "bigint", "the id"), ("kind", "string", None), ("ts", "timestamp", None),
                        ("d", "date", None), ("m", "decimal(10,2)", None)]
    assert rows[6:] == [("# Partitioning", "", ""), ("Part 0", "bucket(4, id)", ""), ("Part 1", "days(ts)", "")]


@pytest.mark.parametrize("statement", ["DESCRIBE EXTENDED {t}", "DESC FORMATTED {t}", "DESCRIBE TABLE EXTENDED {t}"])
def test_describe_extended_shows_iceberg_table_details(spark, described, statement):
    t, table = described
    rows = _rows(spark, statement.format(t=t))
    assert ("Part 1", "days(ts)", "") in rows
    details = _details(rows)
    assert details["Provider"] == "iceberg"
    assert details["Type"] == "MANAGED"
    assert details["Location"] == table.location()
    props = details["Table Properties"]
    for expected in (f"current-snapshot-id={table.current_snapshot().snapshot_id}", "format=iceberg/parquet",
                     "format-version=2", "identifier-fields=[id]", "k1=v1",
                     "sort-order=kind ASC NULLS FIRST, id DESC NULLS LAST", "write.distribution-mode=range"):
        assert expected in props, (expected, props)
    # Iceberg's scan statistics: the snapshot's total-records, times the schema's default row size
    assert details["Statistics"] == f"{3 * (8 + 20 + 8 + 4 + 8)} bytes, 3 rows"


def test_describe_extended_of_a_table_without_snapshot(spark, ns):
    spark.sql(f"CREATE TABLE lake.{ns}.e (id bigint)")
    details = _details(_rows(spark, f"DESCRIBE EXTENDED lake.{ns}.e"))
    assert "current-snapshot-id=none" in details["Table Properties"]
    assert details["Statistics"] == "0 bytes, 0 rows"
    assert _rows(spark, f"DESC EXTENDED lake.{ns}.e id")[3:7] == [
        ("min", "NULL"), ("max", "NULL"), ("num_nulls", "0"), ("distinct_count", "0")]


def test_describe_column_extended_gives_statistics_from_the_manifests(spark, described):
    t, _ = described
    stats = {c: dict(_rows(spark, f"DESCRIBE TABLE EXTENDED {t} {c}")) for c in ("id", "ts", "d", "m", "kind")}
    assert list(stats["id"]) == ["col_name", "data_type", "comment", "min", "max", "num_nulls", "distinct_count",
                                 "avg_col_len", "max_col_len", "histogram"]
    assert stats["id"] == {"col_name": "id", "data_type": "bigint", "comment": "the id", "min": "1", "max": "3",
                           "num_nulls": "0", "distinct_count": "NULL", "avg_col_len": "NULL",
                           "max_col_len": "NULL", "histogram": "NULL"}
    assert (stats["ts"]["min"], stats["ts"]["max"], stats["ts"]["num_nulls"]) == (
        "2024-01-01 00:00:00.000000", "2024-01-02 10:00:00.500000", "1")
    assert (stats["d"]["min"], stats["d"]["max"], stats["d"]["comment"]) == ("2024-01-01", "2024-03-01", "NULL")
    assert (stats["m"]["min"], stats["m"]["max"]) == ("1.25", "3.00")
    # string bounds may be truncated (and Spark keeps no min/max of strings): unknown
    assert (stats["kind"]["min"], stats["kind"]["max"], stats["kind"]["num_nulls"]) == ("NULL", "NULL", "1")
    # without EXTENDED: Spark's three rows
    assert _rows(spark, f"DESCRIBE {t} id") == [("col_name", "id"), ("data_type", "bigint"), ("comment", "the id")]


def test_describe_column_statistics_are_null_when_deletes_make_them_inexact(spark, ns):
    t = f"lake.{ns}.del"
    spark.sql(f"CREATE TABLE {t} (id bigint)")
    spark.sql(f"INSERT INTO {t} SELECT * FROM VALUES (1), (2), (3) AS v(id) ORDER BY id")
    assert dict(_rows(spark, f"DESC EXTENDED {t} id"))["max"] == "3"
    spark.sql(f"DELETE FROM {t} WHERE id = 3")  # merge-on-read: a position delete, the row stays in its file
    assert _rows(spark, f"SELECT content FROM {t}.files WHERE content = 1") == [(1,)]
    stats = dict(_rows(spark, f"DESC EXTENDED {t} id"))
    assert (stats["min"], stats["max"], stats["num_nulls"]) == ("NULL", "NULL", "NULL")


def test_describe_column_distinct_count_from_a_statistics_file(spark, described, iceberg_catalog):
    from pyiceberg.table.statistics import BlobMetadata, StatisticsFile

    t, table = described
    snapshot = table.current_snapshot()
    blob = BlobMetadata(type="apache-datasketches-theta-v1", **{"snapshot-id": snapshot.snapshot_id,
                        "sequence-number": snapshot.sequence_number}, fields=[1], properties={"ndv": "3"})
    stats = StatisticsFile(**{"snapshot-id": snapshot.snapshot_id, "statistics-path": f"{table.location()}/s.puffin",
                              "file-size-in-bytes": 100, "file-footer-size-in-bytes": 50, "blob-metadata": [blob]})
    with table.update_statistics() as update:
        update.set_statistics(stats)
    assert dict(_rows(spark, f"DESC EXTENDED {t} id"))["distinct_count"] == "3"
    assert dict(_rows(spark, f"DESC EXTENDED {t} kind"))["distinct_count"] == "NULL"


def test_describe_of_a_metadata_table(spark, described):
    t, _ = described
    details = _details(_rows(spark, f"DESCRIBE EXTENDED {t}.snapshots"))
    assert details["Provider"] == "iceberg"
    assert "Statistics" not in details  # unknown
    stats = dict(_rows(spark, f"DESC EXTENDED {t}.snapshots snapshot_id"))
    assert stats["data_type"] == "bigint" and stats["min"] == "NULL"


def test_show_create_table_shows_partitioning_and_sort_order(spark, described):
    t, table = described
    (text,), = _rows(spark, f"SHOW CREATE TABLE {t}")
    assert "USING iceberg" in text and "PARTITIONED BY (bucket(4, id), days(ts))" in text
    assert f"LOCATION '{table.location()}'" in text
    assert "'sort-order' = 'kind ASC NULLS FIRST, id DESC NULLS LAST'" in text
    assert "'k1' = 'v1'" in text


# ---- TRUNCATE TABLE ------------------------------------------------------------------------


def test_truncate_table_deletes_every_file_in_one_snapshot(spark, ns, engines, iceberg_catalog):
    t = f"lake.{ns}.tr"
    spark.sql(f"CREATE TABLE {t} (id bigint, kind string) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'b')")
    spark.sql(f"DELETE FROM {t} WHERE id = 2")  # a position delete file, which goes too
    before = iceberg_catalog.load_table(f"{ns}.tr")
    old = before.current_snapshot().snapshot_id
    history = len(before.snapshots())

    assert spark.sql(f"TRUNCATE TABLE {t}").collect() == []  # as Spark's TRUNCATE TABLE: no rows

    table = iceberg_catalog.load_table(f"{ns}.tr")
    assert len(table.snapshots()) == history + 1
    snapshot = table.current_snapshot()
    assert snapshot.parent_snapshot_id == old
    summary = snapshot.summary
    assert summary.operation.value == "delete"
    assert (summary["deleted-data-files"], summary["deleted-records"], summary["removed-delete-files"],
            summary["total-records"], summary["total-data-files"], summary["total-delete-files"]) == (
        "2", "3", "1", "0", "0", "0")
    assert engines.assert_same(t, expected=[]) == []
    # history kept: the snapshot before the truncate still reads its rows
    assert sorted(_rows(spark, f"SELECT id FROM {t} VERSION AS OF {old}")) == [(1,), (3,)]


def test_truncate_table_on_a_branch_and_under_write_audit_publish(spark, ns):
    t = f"lake.{ns}.br"
    spark.sql(f"CREATE TABLE {t} (id bigint)")
    spark.sql(f"INSERT INTO {t} VALUES (1), (2)")
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH b")
    spark.sql(f"TRUNCATE TABLE {t}.branch_b")
    assert _rows(spark, f"SELECT count(*) FROM {t}.branch_b") == [(0,)]
    assert _rows(spark, f"SELECT count(*) FROM {t}") == [(2,)]

    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.wap.enabled'='true')")
    spark.conf.set("spark.wap.branch", "audit")
    try:
        spark.sql(f"TRUNCATE TABLE {t}")
    finally:
        spark.conf.unset("spark.wap.branch")
    assert _rows(spark, f"SELECT count(*) FROM {t}.branch_audit") == [(0,)]
    assert _rows(spark, f"SELECT count(*) FROM {t}") == [(2,)]


def test_truncate_table_refusals(spark, ns):
    t = f"lake.{ns}.rf"
    spark.sql(f"CREATE TABLE {t} (id bigint, kind string) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a')")
    spark.sql(f"ALTER TABLE {t} CREATE TAG v1")
    # Iceberg tables have no partition management: Iceberg's Spark catalog refuses this too
    refused(spark, f"TRUNCATE TABLE {t} PARTITION (kind = 'a')", f"TRUNCATE TABLE {t} PARTITION",
            f"DELETE FROM {t} WHERE")
    refused(spark, f"TRUNCATE TABLE {t}.tag_v1", "tag 'v1'")
    refused(spark, f"TRUNCATE TABLE {t}.snapshots", "read-only")
    assert _rows(spark, f"SELECT id FROM {t}") == [(1,)]
