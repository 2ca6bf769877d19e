"""MERGE INTO on the split write: updates, deletes and inserts in one snapshot."""

from __future__ import annotations

import pytest
from pyiceberg.manifest import DataFileContent

from lakerules.spark.local_keys import local_keys
from test_delete import files, orphans, snapshot_id


@pytest.fixture
def stock(spark, ns):
    return make_stock(spark, f"lake.{ns}.stock")


def make_stock(spark, table):
    """Table ``table`` of 20 stock rows (base()), and the temp view ``changes`` to merge into it."""
    spark.sql(f"CREATE TABLE {table} (id BIGINT, item STRING, qty INT) PARTITIONED BY (bucket(4, id))")
    spark.sql(f"INSERT INTO {table} SELECT id, concat('item-', CAST(id AS STRING)), CAST(id AS INT) FROM range(20)")
    spark.sql("""CREATE OR REPLACE TEMP VIEW changes AS SELECT * FROM VALUES
                 (1L, 'upd', 100), (2L, 'del', 0), (3L, 'upd', NULL), (30L, 'ins', 7), (31L, 'skip', 8), (32L, 'ins', NULL)
                 AS c(id, op, qty)""")
    return table


def rows(spark, table):
    return sorted(tuple(r) for r in spark.table(table).collect())


def base():
    return {i: (i, f"item-{i}", i) for i in range(20)}


def merged():
    """The rows after the MERGE of ``changes`` on base(): 1 and 3 updated, 2 deleted, 30 and 32
    inserted."""
    want = base()
    want[1] = (1, "item-1*", 100)
    want[3] = (3, "item-3*", -1)
    del want[2]
    want[30] = (30, "new", 7)
    want[32] = (32, "new", None)
    return sorted(want.values())


def test_merge_updates_deletes_and_inserts_in_one_snapshot(spark, stock, iceberg_catalog, engines):
    name = stock.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    (r,) = spark.sql(f"""MERGE INTO {stock} t USING changes c ON t.id = c.id
        WHEN MATCHED AND c.op = 'del' THEN DELETE
        WHEN MATCHED THEN UPDATE SET qty = coalesce(c.qty, -1), item = concat(t.item, '*')
        WHEN NOT MATCHED AND c.op = 'ins' THEN INSERT (id, item, qty) VALUES (c.id, 'new', c.qty)""").collect()
    assert (r.num_affected_rows, r.num_updated_rows, r.num_deleted_rows, r.num_inserted_rows) == (5, 2, 1, 2)
    assert rows(spark, stock) == merged()
    t = iceberg_catalog.load_table(name)
    assert t.current_snapshot().parent_snapshot_id == before
    assert t.current_snapshot().summary["added-position-deletes"] == "3"
    engines.assert_same(stock, expected=merged())


def test_merge_star_actions_and_not_matched_by_source(spark, ns, stock, engines):
    spark.sql(f"CREATE TABLE lake.{ns}.stock_src (id BIGINT, item STRING, qty INT)")
    spark.sql(f"INSERT INTO lake.{ns}.stock_src VALUES (5, 'five', 55), (40, 'forty', 44)")
    (r,) = spark.sql(f"""MERGE INTO {stock} t USING lake.{ns}.stock_src s ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET *
        WHEN NOT MATCHED THEN INSERT *
        WHEN NOT MATCHED BY SOURCE AND t.id >= 15 THEN DELETE
        WHEN NOT MATCHED BY SOURCE THEN UPDATE SET qty = t.qty + 1000""").collect()
    assert (r.num_updated_rows, r.num_deleted_rows, r.num_inserted_rows) == (1 + 14, 5, 1)
    want = {i: (i, f"item-{i}", i + 1000) for i in range(15) if i != 5}
    want[5] = (5, "five", 55)
    want[40] = (40, "forty", 44)
    engines.assert_same(stock, expected=list(want.values()))


def test_a_target_row_matching_two_source_rows_is_an_error(spark, stock, iceberg_catalog):
    name = stock.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    with pytest.raises(Exception, match="MERGE_CARDINALITY_VIOLATION"):
        spark.sql(f"""MERGE INTO {stock} t USING (SELECT 4L AS id UNION ALL SELECT 4L) s ON t.id = s.id
                      WHEN MATCHED THEN UPDATE SET qty = 0""").collect()
    assert snapshot_id(iceberg_catalog, name) == before
    assert orphans(iceberg_catalog, name) == set()
    assert rows(spark, stock) == sorted(base().values())


def test_merge_that_changes_nothing_commits_nothing(spark, stock, iceberg_catalog):
    name = stock.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    (r,) = spark.sql(f"""MERGE INTO {stock} t USING (SELECT 100L AS id) s ON t.id = s.id
                         WHEN MATCHED THEN DELETE""").collect()
    assert r.num_affected_rows == 0
    assert snapshot_id(iceberg_catalog, name) == before


def test_merge_into_an_empty_table_inserts(spark, ns, engines):
    table = f"lake.{ns}.empty_m"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, item STRING, qty INT)")
    (r,) = spark.sql(f"""MERGE INTO {table} t USING changes c ON t.id = c.id
                         WHEN NOT MATCHED THEN INSERT (id, qty) VALUES (c.id, c.qty)""").collect()
    assert r.num_inserted_rows == 6
    engines.assert_same(table, "id, qty", expected=[(1, 100), (2, 0), (3, None), (30, 7), (31, 8), (32, None)])


def test_explain_merge_does_not_run(spark, stock, iceberg_catalog):
    name = stock.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    text = "\n".join(r[0] for r in spark.sql(
        f"EXPLAIN MERGE INTO {stock} t USING changes c ON t.id = c.id WHEN MATCHED THEN DELETE").collect())
    assert "WriteMerge" in text and "WHEN MATCHED THEN DELETE" in text
    assert snapshot_id(iceberg_catalog, name) == before
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []


def test_merge_conflict_leaves_the_table_alone(spark, stock, iceberg_catalog, monkeypatch):
    """A data file the MERGE deletes from is rewritten by another writer before the commit."""
    from lakerules.write import row_delta
    from lakerules.rowlevel import run as rowlevel

    name = stock.split(".", 1)[1]
    real = row_delta.commit

    def concurrent_then_commit(table, *args, **kwargs):
        spark.sql(f"INSERT OVERWRITE {stock} SELECT * FROM {stock}")  # same rows, new files
        return real(table, *args, **kwargs)

    monkeypatch.setattr(rowlevel.row_delta, "commit", concurrent_then_commit)
    with pytest.raises(Exception, match="conflict on .*nothing was committed"):
        spark.sql(f"""MERGE INTO {stock} t USING changes c ON t.id = c.id
                      WHEN MATCHED THEN UPDATE SET qty = 0""").collect()
    monkeypatch.setattr(rowlevel.row_delta, "commit", real)
    assert rows(spark, stock) == sorted(base().values())
    assert files(iceberg_catalog, name, DataFileContent.POSITION_DELETES) == []


# ---- run-time pruning of the target by the source's keys (issue 33) ------------------------------


def make_ranges(spark, table, mode="merge-on-read"):
    """Four data files of 10 rows each, ids 0-9, 100-109, 200-209, 300-309 (one insert each), and
    a row with a NULL id in the last one."""
    spark.sql(f"CREATE TABLE {table} (id BIGINT, item STRING, qty INT) TBLPROPERTIES ('write.merge.mode' = '{mode}')")
    for k in range(4):
        extra = " UNION ALL SELECT NULL, 'no id', -5" if k == 3 else ""
        spark.sql(f"INSERT INTO {table} SELECT id, concat('item-', CAST(id AS STRING)), CAST(id AS INT) "
                  f"FROM range({100 * k}, {100 * k + 10}, 1, 1){extra}")
    return table


def ranges_base():
    want = {i: (i, f"item-{i}", i) for k in range(4) for i in range(100 * k, 100 * k + 10)}
    want[None] = (None, "no id", -5)
    return want


UPSERT = """MERGE INTO {t} t USING src s ON t.id = s.id
    WHEN MATCHED AND s.op = 'del' THEN DELETE
    WHEN MATCHED THEN UPDATE SET qty = s.qty
    WHEN NOT MATCHED AND s.op = 'ins' THEN INSERT (id, item, qty) VALUES (s.id, 'new', s.qty)"""


def source(spark, rows):
    spark.createDataFrame(rows, "id BIGINT, op STRING, qty INT").createOrReplaceTempView("src")


def merge_summary(iceberg_catalog, table):
    s = iceberg_catalog.load_table(table.split(".", 1)[1]).current_snapshot().summary
    return int(s["lakerules.merge.target-files-scanned"]), int(s["lakerules.merge.target-files-matched"])


@pytest.mark.parametrize("case, changes, scanned, matched", [
    ("no file", [(150, "ins", 1), (151, "upd", 2)], 0, 0),
    ("one file", [(102, "upd", 120), (105, "del", 0), (111, "ins", 2)], 1, 1),
    ("every file", [(1, "upd", 10), (101, "del", 0), (201, "upd", 210), (301, "upd", 310), (400, "ins", 3)], 4, 4),
])
def test_merge_reads_only_the_files_the_source_keys_can_match(spark, ns, iceberg_catalog, engines, case, changes,
                                                              scanned, matched):
    table = make_ranges(spark, f"lake.{ns}.ranges")
    source(spark, changes)
    spark.sql(UPSERT.format(t=table)).collect()
    want = ranges_base()
    for i, op, qty in changes:
        if i in want and op == "del":
            del want[i]
        elif i in want:
            want[i] = (i, f"item-{i}", qty)
        elif op == "ins":
            want[i] = (i, "new", qty)
    engines.assert_same(table, expected=list(want.values()))
    assert merge_summary(iceberg_catalog, table) == (scanned, matched)


@pytest.mark.parametrize("limit", [None, "3", "1", "0"])
def test_merge_deletes_written_by_the_driver_or_by_a_job(spark, ns, iceberg_catalog, engines, limit):
    """A MERGE whose source keys are distinct needs no cardinality check: its matched positions
    come to the driver, which counts them and writes the delete files (with a limit of 3, a task
    holds more than its share of it: a second job brings them). Past
    spark.lakerules.write.positionDeleteDriverRows (1 and 0 here: 3 positions), the rows are
    counted by an aggregate and a Spark job writes the delete files: the same table either way."""
    table = make_ranges(spark, f"lake.{ns}.ranges_w")
    name = table.split(".", 1)[1]
    source(spark, [(102, "upd", 120), (105, "del", 0), (111, "ins", 2), (1, "upd", 10), (None, "ins", 4)])
    if limit is not None:
        spark.conf.set("spark.lakerules.write.positionDeleteDriverRows", limit)
    try:
        (r,) = spark.sql(UPSERT.format(t=table)).collect()
    finally:
        spark.conf.unset("spark.lakerules.write.positionDeleteDriverRows")
    assert (r.num_affected_rows, r.num_updated_rows, r.num_deleted_rows, r.num_inserted_rows) == (5, 2, 1, 2)
    want = ranges_base()
    want[102], want[1], want[111] = (102, "item-102", 120), (1, "item-1", 10), (111, "new", 2)
    del want[105]
    engines.assert_same(table, expected=list(want.values()) + [(None, "new", 4)])
    assert merge_summary(iceberg_catalog, table) == (2, 2)
    deletes = files(iceberg_catalog, name, DataFileContent.POSITION_DELETES)
    assert len(deletes) == 2 and sum(d.record_count for d in deletes) == 3  # one per data file
    by_driver = {d.file_path.rsplit("/", 1)[1].startswith("deletes-") for d in deletes}
    assert by_driver == {limit in (None, "3")}  # the driver's writer names its files deletes-<uuid>.parquet
    assert orphans(iceberg_catalog, name) == set()


def test_merge_with_no_cardinality_check_and_not_matched_by_source(spark, ns, iceberg_catalog, engines):
    """The outer join's path without a cardinality check (a single unconditional DELETE): the rows
    NOT MATCHED BY SOURCE deletes are deleted too, whoever writes the delete files."""
    table = make_ranges(spark, f"lake.{ns}.ranges_nbs")
    source(spark, [(102, "x", 0), (102, "y", 0), (7, "x", 0)])
    (r,) = spark.sql(f"""MERGE INTO {table} t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE
                         WHEN NOT MATCHED BY SOURCE AND t.id >= 305 THEN DELETE""").collect()
    assert (r.num_deleted_rows, r.num_updated_rows, r.num_inserted_rows) == (2 + 5, 0, 0)
    want = {k: v for k, v in ranges_base().items() if k not in (102, 7, 305, 306, 307, 308, 309)}
    engines.assert_same(table, expected=list(want.values()))


def test_a_small_source_is_computed_once(spark, ns, engines, tmp_path):
    """A source Spark estimates small, reading files, is computed once (into a LocalRelation): its
    keys, the join finding the matches and the anti-join finding the inserts all read those rows.
    A Python UDF in the source (a probe only a test would write) notes each row it computes."""
    log = tmp_path / "calls"

    def probe(i):
        with open(log, "a") as f:
            f.write(f"{i}\n")
        return i

    spark.udf.register("probe_once", probe, "bigint")
    table = f"lake.{ns}.once"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.sql(f"INSERT INTO {table} SELECT id FROM range(10)")
    spark.sql(f"CREATE TABLE lake.{ns}.once_src AS SELECT id FROM range(10)")  # files: worth computing once
    (r,) = spark.sql(f"""MERGE INTO {table} t USING (SELECT probe_once(id * 2) AS id FROM lake.{ns}.once_src) s
        ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *""").collect()
    assert (r.num_deleted_rows, r.num_inserted_rows) == (5, 5)
    assert sorted(int(x) for x in log.read_text().split()) == [2 * i for i in range(10)]  # each row once
    engines.assert_same(table, expected=[(i,) for i in (1, 3, 5, 7, 9, 10, 12, 14, 16, 18)])


def test_a_small_cached_source_is_read_in_one_task(spark, ns, engines):
    """A cached source (rows in memory, kept in the partitions that cached them) small enough to
    broadcast is read in one task by the keys' job, the broadcast and the inserted rows (a coalesce:
    a task per cached partition cost more than the reading). Same rows; a duplicate key still fails
    the cardinality check."""
    from dataclasses import make_dataclass

    from lakerules.rowlevel import merge_source
    from lakerules.spark import attributes

    table = f"lake.{ns}.cached"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {table} SELECT id, 'old' FROM range(20)")
    src = spark.range(10, 30, 1, 8).selectExpr("id", "'new' AS v").repartition(8).persist()
    try:
        assert src.count() == 20 and src.rdd.getNumPartitions() == 8
        src.createOrReplaceTempView("cached_src")
        plan = src._jdf.queryExecution().analyzed()
        once = merge_source.computed_once(spark, make_dataclass("Node", ["source"])(plan))
        assert once.source.getClass().getSimpleName() == "Repartition" and once.source.numPartitions() == 1
        assert attributes.expr_ids(once.source.output()) == attributes.expr_ids(plan.output())
        (r,) = spark.sql(f"""MERGE INTO {table} t USING cached_src s ON t.id = s.id
            WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""").collect()
        assert (r.num_updated_rows, r.num_inserted_rows) == (10, 10)
        engines.assert_same(table, expected=[(i, "old" if i < 10 else "new") for i in range(30)])
    finally:
        src.unpersist()
    dup = spark.range(0, 4, 1, 4).selectExpr("id % 2 AS id", "'dup' AS v").persist()
    try:
        dup.count()
        dup.createOrReplaceTempView("dup_src")
        with pytest.raises(Exception, match="MERGE_CARDINALITY_VIOLATION"):
            spark.sql(f"MERGE INTO {table} t USING dup_src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v")
    finally:
        dup.unpersist()
    engines.assert_same(table, expected=[(i, "old" if i < 10 else "new") for i in range(30)])


def test_a_local_sources_keys_are_summed_up_without_a_job(spark):
    """A small MERGE source, materialized as local rows, has its integer keys' bounds, their
    distinctness and the first key's values summed up in the driver's JVM: no Spark job."""
    df = spark.sql("SELECT CAST(a AS BIGINT) a, CAST(b AS INT) b, s FROM VALUES (3, 1, 'x'), (NULL, 2, 'y'), "
                   "(1, NULL, 'z'), (3, 1, 'w'), (7, 5, NULL) AS t(a, b, s)")
    tracker = spark.sparkContext.statusTracker()
    jobs = len(tracker.getJobIdsForGroup())
    got = local_keys(df.select("a", "b"), 2)
    assert len(tracker.getJobIdsForGroup()) == jobs
    assert (got.rows, got.bounds, got.unique, got.first) == (5, [(1, 7), (1, 5)], False, [1, 3, 7])
    assert local_keys(df.where("a = 7").select("a", "b"), 2).unique
    nothing = local_keys(df.where("a IS NULL").select("a"), 1)
    assert (nothing.rows, nothing.bounds, nothing.unique, nothing.first) == (1, [(None, None)], True, [])
    assert local_keys(df.select("s"), 1) is None  # strings: Arrow's order, by the caller
    assert local_keys(spark.range(5).select("id"), 1) is None  # not local rows: the caller's job


def test_merge_with_null_keys_matches_nothing_by_them(spark, ns, iceberg_catalog, engines):
    """A NULL key matches no target row (not even the target's NULL id): it is NOT MATCHED, and
    a source of NULL keys only reads no target file."""
    table = make_ranges(spark, f"lake.{ns}.ranges_null")
    source(spark, [(None, "ins", 1), (None, "upd", 2)])
    (r,) = spark.sql(UPSERT.format(t=table)).collect()
    assert (r.num_updated_rows, r.num_deleted_rows, r.num_inserted_rows) == (0, 0, 1)
    assert merge_summary(iceberg_catalog, table) == (0, 0)
    source(spark, [(None, "ins", 3), (5, "upd", 50), (None, "upd", 4)])
    spark.sql(UPSERT.format(t=table)).collect()
    assert merge_summary(iceberg_catalog, table) == (1, 1)
    want = list(ranges_base().values()) + [(None, "new", 1), (None, "new", 3)]
    want = [(5, "item-5", 50) if w[0] == 5 else w for w in want]
    engines.assert_same(table, expected=want)


def test_merge_source_with_duplicate_keys(spark, ns, iceberg_catalog, engines):
    """Two source rows matching one target row: the cardinality error when an UPDATE could take
    either (nothing committed); a single unconditional DELETE deletes the row once."""
    table = make_ranges(spark, f"lake.{ns}.ranges_dup")
    name = table.split(".", 1)[1]
    before = snapshot_id(iceberg_catalog, name)
    source(spark, [(102, "upd", 1), (102, "upd", 2), (111, "ins", 3)])
    with pytest.raises(Exception, match="MERGE_CARDINALITY_VIOLATION"):
        spark.sql(UPSERT.format(t=table)).collect()
    assert snapshot_id(iceberg_catalog, name) == before
    assert orphans(iceberg_catalog, name) == set()
    (r,) = spark.sql(f"MERGE INTO {table} t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE").collect()
    assert r.num_deleted_rows == 1
    want = ranges_base()
    del want[102]
    engines.assert_same(table, expected=list(want.values()))


@pytest.mark.parametrize("how", ["copy-on-write", "no broadcast", "not matched by source"])
def test_merge_pruning_other_paths(spark, ns, iceberg_catalog, engines, how):
    """Copy-on-write rewrites only the matched file; a source too big to broadcast
    (autoBroadcastJoinThreshold -1) takes the outer join, still over the files the keys can
    match; WHEN NOT MATCHED BY SOURCE reads every file."""
    table = make_ranges(spark, f"lake.{ns}.ranges_o", "copy-on-write" if how == "copy-on-write" else "merge-on-read")
    source(spark, [(102, "upd", 120), (105, "del", 0), (111, "ins", 2)])
    sql = UPSERT.format(t=table)
    want = ranges_base()
    want[102] = (102, "item-102", 120)
    del want[105]
    want[111] = (111, "new", 2)
    if how == "not matched by source":
        sql += "\n    WHEN NOT MATCHED BY SOURCE AND t.id >= 305 THEN DELETE"
        for i in range(305, 310):
            del want[i]
    before = {f.file_path for f in files(iceberg_catalog, table.split(".", 1)[1], DataFileContent.DATA)}
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    if how == "no broadcast":
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        spark.sql(sql).collect()
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
    engines.assert_same(table, expected=list(want.values()))
    scanned, matched = merge_summary(iceberg_catalog, table)
    assert (scanned, matched) == ((len(before), 2) if how == "not matched by source" else (1, 1))
    if how == "copy-on-write":
        after = {f.file_path for f in files(iceberg_catalog, table.split(".", 1)[1], DataFileContent.DATA)}
        assert len(before - after) == 1  # only the file of ids 100-109 rewritten
