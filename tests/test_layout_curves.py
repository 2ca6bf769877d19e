"""File layout past powers of 2^k (issue 21): the k-d layout of z-order files for any file count,
the Hilbert curve (OPTIMIZE ... HILBERT BY), and the shim functions that place and order rows."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pyspark.sql import functions as F

from lakerules.optimize import curves as zorder
from test_optimize import error, live_files, may_hold, run, table_of, uniform_table


# ---- the layout, as pure functions -----------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_layout_meets_the_share_bound_for_every_file_count(k):
    """For n = 4 .. 64 files a point on any one column meets at most 1.2 n^(-1/k) of them."""
    for n in range(4, 65):
        tree = zorder.layout(n, k)
        assert zorder.count(tree) == n
        worst = max(zorder.shares(tree, k))
        assert worst <= 1.2 * n ** (-1 / k), (n, k, worst)
        if n in (16, 64) and k == 2 or n in (8, 64) and k == 3:
            assert worst == pytest.approx(n ** (-1 / k))  # powers of 2^k: the grid
    # many files: slabs of slabs
    for n in (100, 250, 1000):
        assert max(zorder.shares(zorder.layout(n, k), k)) <= 1.2 * n ** (-1 / k)


@pytest.mark.parametrize("n, k", [(6, 2), (8, 2), (12, 2), (18, 2), (8, 3), (12, 3), (27, 3)])
def test_cuts_from_a_sample_give_even_files_and_the_expected_shares(n, k):
    """kd_cuts on sampled keys, then kd_cells on other rows: files of even size, and each file's
    box of keys as narrow as the layout says."""
    rng = np.random.default_rng(n * 10 + k)
    sample = rng.integers(0, 1 << 20, (20_000, k))
    rows = rng.integers(0, 1 << 20, (20_000, k))
    tree = zorder.layout(n, k)
    flat, cuts = zorder.flatten(tree), zorder.kd_cuts(sample, tree)
    cells = zorder.kd_cells(rows, flat, cuts)
    sizes = np.bincount(cells, minlength=n)
    assert len(sizes) == n and sizes.min() > 0.85 * len(rows) / n and sizes.max() < 1.15 * len(rows) / n
    expected = zorder.shares(tree, k)
    for d in range(k):
        extent = sum(rows[cells == f, d].max() - rows[cells == f, d].min() for f in range(n)) / n / (1 << 20)
        assert extent == pytest.approx(expected[d], abs=0.03)


# ---- the shim's functions against their driver-side mirrors -----------------------------------------


def test_hilbert_index_and_kd_cell_in_the_jvm_match_the_driver(spark):
    rnd = random.Random(3)
    points = [[rnd.randrange(1 << 5) for _ in range(3)] for _ in range(200)]
    df = spark.createDataFrame([(p,) for p in points], "p array<int>")
    jvm = [r[0] for r in df.select(F.call_function("lake.system.hilbert_index", F.lit(5), F.col("p"))).collect()]
    ours = zorder.hilbert_index(5, [np.array([p[j] for p in points]) for j in range(3)]).tolist()
    assert jvm == ours
    assert sorted(zorder.hilbert_index(3, [np.array([x]), np.array([y])]).item()
                  for x in range(8) for y in range(8)) == list(range(64))  # a bijection
    # neighbours on the curve are neighbours in space
    order = sorted((zorder.hilbert_index(3, [np.array([x]), np.array([y])]).item(), x, y) for x in range(8) for y in range(8))
    assert all(abs(a[1] - b[1]) + abs(a[2] - b[2]) == 1 for a, b in zip(order, order[1:]))

    tree = zorder.layout(7, 2)
    flat, cuts = zorder.flatten(tree), zorder.kd_cuts(np.array([[rnd.randrange(100), rnd.randrange(100)] for _ in range(500)]), tree)
    keys = [[rnd.randrange(100), rnd.randrange(100)] for _ in range(300)]
    kdf = spark.createDataFrame([(k,) for k in keys], "k array<bigint>")
    cell = F.call_function("lake.system.kd_cell", F.col("k"), F.lit(flat).cast("array<int>"), F.lit(cuts).cast("array<bigint>"))
    assert [r[0] for r in kdf.select(cell).collect()] == zorder.kd_cells(np.array(keys), flat, cuts).tolist()
    with pytest.raises(Exception, match="do not fit in 63 bits"):
        spark.sql("SELECT lake.system.hilbert_index(32, array(1, 2)) FROM range(1)").collect()


# ---- OPTIMIZE ... ZORDER BY / HILBERT BY on a table ------------------------------------------------


def test_eight_files_skip_close_to_ideal_and_hilbert_by_clusters(spark, ns, iceberg_catalog, engines):
    """8 files, 2 columns: the z-curve cut gave one column 4 ranges and the other 2 (a point on it
    met half the files); the k-d layout gives both about 8^(-1/2) = 0.35."""
    table = f"lake.{ns}.z8"
    uniform_table(spark, table, 24_000, 2)
    total = sum(f.file_size_in_bytes for f in live_files(iceberg_catalog, table))
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{total // 8}')")
    rows = engines.lakerules(table)
    values = [random.Random(5).randrange(1_000_000) for _ in range(300)]
    bound = 1.2 * 8 ** -0.5

    m = run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)")
    files = live_files(iceberg_catalog, table)
    assert m.numFilesAdded == len(files) == 8
    assert may_hold(files, 1, values) <= bound and may_hold(files, 2, values) <= bound
    counts = [f.record_count for f in files]
    assert max(counts) < 1.3 * min(counts)
    assert engines.assert_same(table) == rows

    # the Hilbert curve: another clustering of the same columns, so the partition is rewritten,
    # into the same k-d files; inside each the rows follow the Hilbert curve
    m = run(spark, f"OPTIMIZE {table} HILBERT BY (a, b)")
    files = live_files(iceberg_catalog, table)
    assert (m.numFilesRemoved, m.numFilesAdded, m.zOrderStats.inputCubeFiles.num) == (8, len(files), 0)
    assert may_hold(files, 1, values) <= bound and may_hold(files, 2, values) <= bound
    summary = table_of(iceberg_catalog, table).current_snapshot().summary
    assert (summary["lakerules.zorder.columns"], summary["lakerules.zorder.curve"]) == ("1,2", "hilbert")
    assert engines.assert_same(table) == rows
    snapshot = table_of(iceberg_catalog, table).current_snapshot().snapshot_id
    m = run(spark, f"OPTIMIZE {table} HILBERT BY (a, b)")  # one Hilbert cube already: a no-op
    assert (m.numFilesAdded, m.numFilesRemoved, m.zOrderStats.inputNumCubes) == (0, 0, 1)
    assert table_of(iceberg_catalog, table).current_snapshot().snapshot_id == snapshot
    (text,) = spark.sql(f"EXPLAIN OPTIMIZE {table} HILBERT BY a, b").collect()[0]
    assert "Hilbert curve (files: a k-d layout) by (a, b)" in text
    assert "HILBERT BY column nope does not exist" in error(spark, f"OPTIMIZE {table} HILBERT BY (nope)")
    assert "HILBERT BY needs at least one column" in error(spark, f"OPTIMIZE {table} HILBERT BY ()")


# ---- CALL rewrite_data_files: Iceberg's procedure on OPTIMIZE's engine ---------------------------


def test_rewrite_data_files_binpack_and_zorder_as_optimize(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.r"
    uniform_table(spark, table, 4_000, 4)
    rows = engines.lakerules(table)
    before = live_files(iceberg_catalog, table)
    total = sum(f.file_size_in_bytes for f in before)
    call = f"CALL lake.system.rewrite_data_files(table => '{ns}.r'"

    # binpack: 4 files are fewer than Iceberg's min-input-files (5): nothing; with 2: one file
    (r,) = spark.sql(f"{call}, options => map('target-file-size-bytes', '{total * 2}'))").collect()
    assert tuple(r) == (0, 0, 0, 0, 0)
    (r,) = spark.sql(f"{call}, options => map('target-file-size-bytes', '{total * 2}', 'min-input-files', '2'))").collect()
    assert r.asDict() == {"rewritten_data_files_count": 4, "added_data_files_count": 1, "rewritten_bytes_count": total,
                          "failed_data_files_count": 0, "removed_delete_files_count": 0}
    assert engines.assert_same(table) == rows

    # sort by zorder(a, b): OPTIMIZE ZORDER BY (a, b)'s cube, so OPTIMIZE has nothing left to do
    (r,) = spark.sql(f"""{call}, strategy => 'sort', sort_order => 'zorder(a, b)',
                         options => map('target-file-size-bytes', '{total // 4}'))""").collect()
    assert (r.rewritten_data_files_count, r.added_data_files_count) == (1, len(live_files(iceberg_catalog, table)))
    assert run(spark, f"OPTIMIZE {table} ZORDER BY (a, b)").numFilesAdded == 0
    assert table_of(iceberg_catalog, table).current_snapshot().summary["lakerules.zorder.columns"] == "1,2"
    assert engines.assert_same(table) == rows
    # rewrite-all rewrites the cube again; hilbert(...) is HILBERT BY's
    (r,) = spark.sql(f"""{call}, sort_order => 'hilbert(a, b)', options => map('rewrite-all', 'true',
                         'target-file-size-bytes', '{total // 4}'))""").collect()
    assert r.rewritten_data_files_count > 0
    assert table_of(iceberg_catalog, table).current_snapshot().summary["lakerules.zorder.curve"] == "hilbert"
    assert engines.assert_same(table) == rows

    snapshot = table_of(iceberg_catalog, table).current_snapshot().snapshot_id
    for args, message in [
        ("options => map('max-file-size-bytes', '10')", "max-file-size-bytes (10) must be greater than target-file-size-bytes"),
        ("options => map('nope', '1')", "unknown option 'nope'; the options are"),
        ("options => map('partial-progress.enabled', 'true')", "partial-progress.enabled='true' is not supported"),
        ("options => map('min-input-files', 'many')", "min-input-files='many': expected a whole number"),
        ("strategy => 'shuffle'", "unknown strategy 'shuffle'"),
        ("strategy => 'binpack', sort_order => 'zorder(a)'", "strategy binpack takes no sort_order"),
        ("sort_order => 'a ASC, nope DESC'", "nope"),
        ("sort_order => 'zorder(a + 1)'", "ZORDER BY takes column names, not expressions"),
        ("sort_order => 'hilbert(a, b'", "is not a curve: write 'zorder(c1, c2, ...)'"),
        ("sort_order => 'zorder(nope)'", "ZORDER BY column nope does not exist"),
        ("where => 'a > 1'", "OPTIMIZE WHERE may name only partition columns"),
    ]:
        assert message in error(spark, f"{call}, {args})")
    assert table_of(iceberg_catalog, table).current_snapshot().snapshot_id == snapshot


def test_constant_where_selects_everything_or_nothing(spark, ns, iceberg_catalog):
    table = f"lake.{ns}.w"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, k STRING) PARTITIONED BY (k)")
    for i in range(2):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, 'p' FROM range({i * 10}, {i * 10 + 10})")
    assert run(spark, f"OPTIMIZE {table} WHERE 0 = 1").numFilesRemoved == 0
    assert "must be deterministic" in error(spark, f"OPTIMIZE {table} WHERE rand() < 2")
    assert (run(spark, f"OPTIMIZE {table} WHERE 1 = 1").numFilesRemoved, len(live_files(iceberg_catalog, table))) == (2, 1)


def test_files_of_an_earlier_spec_are_rewritten_into_the_current_one(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.spec"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, k STRING)")
    for i in range(2):
        spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ id, IF(id % 2 = 0, 'p', 'q') FROM range({i * 10}, {i * 10 + 10})")
    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD k")
    spark.sql(f"INSERT INTO {table} VALUES (100, 'p')")
    rows = engines.assert_same(table)
    current = table_of(iceberg_catalog, table).spec().spec_id
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('lakerules.optimize.rewriteOtherSpecs' = 'false')")
    m = run(spark, f"OPTIMIZE {table}")
    assert (m.numFilesRemoved, m.numFilesInOtherPartitionSpecs) == (0, 2)
    spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES ('lakerules.optimize.rewriteOtherSpecs')")
    # the old files may hold k = 'q': rewritten whole, with the files of the partitions their rows
    # go to (p's too), so that each partition is one file (issue 30: p had two)
    m = run(spark, f"OPTIMIZE {table} WHERE k = 'q'")
    assert (m.numFilesRemoved, m.numFilesInOtherPartitionSpecs) == (3, 0)
    files = live_files(iceberg_catalog, table)
    assert {f.spec_id for f in files} == {current} and sorted(f.partition[0] for f in files) == ["p", "q"]
    assert engines.assert_same(table) == rows
