"""Read and write options: each is honored (checked against pyiceberg and DuckDB) or refused
with an error naming it, never ignored (lakerules.iceberg.options)."""

from __future__ import annotations

import time

import pytest
from pyspark.sql import functions as F

from errors_util import refused
from lakerules.iceberg import options


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
    for name in ("fanout-enabled", "target-file-size-bytes", "distribution-mode"):
        refused(spark, lambda n=name: df.writeTo(t).option(n, "1").append(), name, *options.WRITE_OPTIONS)
    refused(spark, lambda: df.writeTo(t).option("isolation-level", "strict").append(), "serializable or snapshot")
    refused(spark, lambda: df.writeTo(t).option("validate-from-snapshot-id", "x").append(), "whole number")
    refused(spark, lambda: df.writeTo(t).option("validate-from-snapshot-id", "42").append(), "42 is not a snapshot")
    refused(spark, lambda: df.writeTo(f"lake.{ns}.c2").option("isolation-level", "snapshot").create(),
            "isolation-level", "creating a table")
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id == before


def test_overwrite_validation_options(spark, ns, iceberg_catalog):
    """isolation-level and validate-from-snapshot-id: an overwrite validates the commits since that
    snapshot; serializable refuses data added where it overwrites, snapshot does not."""
    t = f"lake.{ns}.valid"
    spark.sql(f"CREATE TABLE {t} (id INT, p INT) PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1), (2, 2)")
    start = iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id
    spark.sql(f"INSERT INTO {t} VALUES (3, 2)")  # lands after start, in partition p=2
    head = iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id
    new = spark.createDataFrame([(9, 2)], "id INT, p INT")
    refused(spark, lambda: new.writeTo(t).option("validate-from-snapshot-id", str(start)).overwritePartitions(),
            "conflict", "partitions this write replaces")
    refused(spark, lambda: new.writeTo(t).option("validate-from-snapshot-id", str(start))
            .option("isolation-level", "serializable").overwrite(F.col("p") == 2), "conflict")
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id == head
    new.writeTo(t).option("validate-from-snapshot-id", str(start)).option("isolation-level", "snapshot").overwritePartitions()
    new.writeTo(t).option("validate-from-snapshot-id", str(start)).append()  # an append conflicts with nothing
    assert ids(spark.table(t)) == [1, 9, 9]


def test_format_iceberg(spark, ns, iceberg_catalog):
    """format("iceberg") as Iceberg's runtime takes it: load/save a table by name, with options."""
    t = f"lake.{ns}.fmt"
    spark.sql(f"CREATE TABLE {t} (id INT)")
    spark.createDataFrame([(1,)], "id INT").write.format("iceberg").mode("append") \
        .option("snapshot-property.src", "save").save(t)
    first = iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot()
    assert first.summary.get("src") == "save"
    spark.createDataFrame([(2,)], "id INT").write.format("iceberg").mode("append").save(t)
    assert ids(spark.read.format("iceberg").load(t)) == [1, 2]
    assert ids(spark.read.format("iceberg").option("snapshot-id", first.snapshot_id).load(t)) == [1]
    refused(spark, lambda: spark.read.format("iceberg").option("split-size", 1).load(t).collect(), "split-size")
    refused(spark, lambda: spark.read.format("iceberg").load("/tmp/some/dir").collect(), "not a file path")
    refused(spark, lambda: spark.createDataFrame([(3,)], "id INT").write.format("iceberg").mode("append")
            .option("fanout-enabled", "true").save(t), "fanout-enabled")
    spark.createDataFrame([(3,)], "id INT").write.format("iceberg").mode("overwrite").save(t)
    assert ids(spark.table(t)) == [3]


def test_the_docs_list_exactly_the_options_honored(spark, history):
    """Every option the "Read and write options" section of docs/settings.md lists is one
    lakerules honors (the tests above check each), and every option it honors is listed."""
    import pathlib
    import re

    page = (pathlib.Path(__file__).parent.parent / "docs" / "settings.md").read_text()
    section = page.split("\n## Read and write options\n", 1)[1].split("\n#", 1)[0]
    listed = set(re.findall(r"^\| `([a-z.<>-]+)` \|", section, re.MULTILINE))
    assert listed == set(options.READ_OPTIONS) | set(options.WRITE_OPTIONS), listed
    t, first = history
    for name in options.READ_OPTIONS:  # each honored: it changes what is read
        value = {"snapshot-id": first.snapshot_id, "as-of-timestamp": first.timestamp_ms, "branch": "b", "tag": "v1"}[name]
        assert ids(spark.read.option(name, value).table(t)) == [1, 2, 3]
