"""Read and write options: each is honored (checked against pyiceberg and DuckDB) or refused
with an error naming it, never ignored (lakerules.options)."""

from __future__ import annotations

import time

import pytest

from errors_util import refused
from lakerules import options


@pytest.fixture
def history(spark, ns, iceberg_catalog):
    """A table with two snapshots: the first (ids 1-3, tagged v1, branch b) and the current one (1-7)."""
    t = f"lake.{ns}.hist"
    spark.sql(f"CREATE TABLE {t} (id INT)")
    spark.sql(f"INSERT INTO {t} VALUES (1), (2), (3)")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    first = table.current_snapshot()
    table.manage_snapshots().create_tag(first.snapshot_id, "v1").create_branch(first.snapshot_id, "b").commit()
    time.sleep(0.01)
    spark.sql(f"INSERT INTO {t} VALUES (4), (5), (6), (7)")
    return t, first


def ids(df) -> list[int]:
    return sorted(r[0] for r in df.collect())


def test_read_options_choose_the_snapshot(spark, history, iceberg_catalog, duck):
    t, first = history
    old = [1, 2, 3]
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    assert sorted(r["id"] for r in table.scan(snapshot_id=first.snapshot_id).to_arrow().to_pylist()) == old
    assert ids(spark.read.option("snapshot-id", first.snapshot_id).table(t)) == old
    assert ids(spark.read.option("as-of-timestamp", first.timestamp_ms).table(t)) == old
    assert ids(spark.read.option("branch", "b").table(t)) == old
    assert ids(spark.read.option("tag", "v1").table(t)) == old
    assert ids(spark.read.option("SNAPSHOT-ID", first.snapshot_id).table(t)) == old  # option names ignore case
    # pruning and filters apply to the chosen snapshot
    assert ids(spark.read.option("snapshot-id", first.snapshot_id).table(t).where("id > 1")) == [2, 3]
    assert ids(spark.table(t)) == [1, 2, 3, 4, 5, 6, 7]


def test_bad_read_options_are_refused(spark, history):
    t, first = history
    refused(spark, lambda: spark.read.option("snapshot-id", 123).table(t).collect(), "no snapshot 123")
    refused(spark, lambda: spark.read.option("snapshot-id", "x").table(t).collect(), "whole number")
    refused(spark, lambda: spark.read.option("as-of-timestamp", 0).table(t).collect(), "no snapshot at or before 0")
    refused(spark, lambda: spark.read.option("branch", "v1").table(t).collect(), "no branch 'v1'", "'b'")
    refused(spark, lambda: spark.read.option("tag", "nope").table(t).collect(), "no tag 'nope'", "'v1'")
    refused(spark, lambda: spark.read.option("snapshot-id", first.snapshot_id).option("tag", "v1").table(t).collect(),
            "['snapshot-id', 'tag']")
    refused(spark, lambda: spark.read.option("split-size", 10).table(t).collect(), "split-size", *options.READ_OPTIONS)


def test_write_options(spark, ns, iceberg_catalog):
    t = f"lake.{ns}.wopt"
    spark.sql(f"CREATE TABLE {t} (id INT)")
    df = spark.createDataFrame([(1,)], "id INT")
    df.writeTo(t).option("snapshot-property.job", "nightly").append()
    df.write.option("snapshot-property.Run-Id", "42").insertInto(t)
    df.writeTo(t).option("snapshot-property.kind", "overwrite").overwritePartitions()
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    summaries = [s.summary for s in table.snapshots()]
    assert [s.get("job") for s in summaries] == ["nightly", None, None]
    assert [s.get("Run-Id") for s in summaries] == [None, "42", None]
    assert summaries[-1].get("kind") == "overwrite"
    created = f"lake.{ns}.wopt_ctas"
    df.writeTo(created).option("snapshot-property.from", "ctas").create()
    assert iceberg_catalog.load_table(created.split(".", 1)[1]).current_snapshot().summary.get("from") == "ctas"
    before = table.current_snapshot().snapshot_id
    for name in ("fanout-enabled", "isolation-level", "validate-from-snapshot-id", "target-file-size-bytes"):
        refused(spark, lambda n=name: df.writeTo(t).option(n, "1").append(), name, "snapshot-property.<key>")
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id == before


def test_write_audit_publish_settings_are_refused_not_ignored(spark, ns, iceberg_catalog):
    """On a table with write.wap.enabled=true, spark.wap.id / spark.wap.branch would stage the write
    or send it to a branch: lakerules does neither yet, and writing to main would publish
    unaudited data, so the write is refused. Elsewhere the settings mean nothing (as in Iceberg)."""
    t, plain = f"lake.{ns}.wap", f"lake.{ns}.nowap"
    spark.sql(f"CREATE TABLE {t} (id INT) TBLPROPERTIES ('write.wap.enabled' = 'true')")
    spark.sql(f"CREATE TABLE {plain} (id INT)")
    try:
        for key in options.WAP_SETTINGS:
            spark.conf.set(key, "audit1")
            for sql in (f"INSERT INTO {t} VALUES (1)", f"DELETE FROM {t} WHERE id = 1", f"UPDATE {t} SET id = 2",
                        f"MERGE INTO {t} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"):
                refused(spark, sql, "write.wap.enabled", key)
            refused(spark, lambda: spark.createDataFrame([(1,)], "id INT").writeTo(t).append(), key)
            spark.sql(f"INSERT INTO {plain} VALUES (1)")
            spark.conf.unset(key)
    finally:
        for key in options.WAP_SETTINGS:
            spark.conf.unset(key)
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot() is None
    assert len(iceberg_catalog.load_table(plain.split(".", 1)[1]).snapshots()) == 2
    spark.sql(f"INSERT INTO {t} VALUES (1)")
    assert ids(spark.table(t)) == [1]
