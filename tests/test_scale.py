"""Scale, correctness only (issue #18; the timings are bench/scale.py's): a table of a thousand
tiny files added with pyiceberg ``add_files`` in a few commits (a manifest each) reads the same
through lakerules as through pyiceberg, for a full scan, point queries and range filters,
before and after a DELETE (a position delete file) and an UPDATE; unpartitioned and
partitioned by identity (pyiceberg derives each file's partition from its bounds)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent

FILES, ROWS, COMMITS = 1200, 5, 4
DELETED, UPDATED = 2503, 2511  # in files 500 and 502
FILTERS = {  # the same text for Spark SQL and pyiceberg's row_filter, and what it keeps
    "full scan": (None, lambda r: True),
    "point query": (f"id = {UPDATED}", lambda r: r[0] == UPDATED),
    "point query, deleted row": (f"id = {DELETED}", lambda r: r[0] == DELETED),
    "range": ("id >= 2490 AND id <= 2530", lambda r: 2490 <= r[0] <= 2530),
    "partition and range": ("k = 'k3' AND id >= 1000 AND id < 3000", lambda r: r[2] == "k3" and 1000 <= r[0] < 3000),
}
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),  # lakerules reads columns by field id
    pa.field("v", pa.float64(), metadata={b"PARQUET:field_id": b"2"}),
    pa.field("k", pa.string(), metadata={b"PARQUET:field_id": b"3"}),
])


def _write(folder: str, i: int) -> str:
    """File i: ids [i * ROWS, (i + 1) * ROWS), v = id / 4, one k per file (its partition)."""
    ids = list(range(i * ROWS, (i + 1) * ROWS))
    path = os.path.join(folder, f"f{i:05d}.parquet")
    pq.write_table(pa.table([ids, [x / 4 for x in ids], [f"k{i % 7}"] * ROWS], schema=SCHEMA), path)
    return path


def _ours(spark, table: str, where: str | None) -> list[tuple]:
    sql = f"SELECT id, v, k FROM {table}" + (f" WHERE {where}" if where else "")
    return sorted(tuple(r) for r in spark.sql(sql).collect())


def _theirs(catalog, name: str, where: str | None) -> list[tuple]:
    scan = catalog.load_table(name).scan(**({"row_filter": where} if where else {}))
    return sorted(tuple(r.values()) for r in scan.to_arrow().select(["id", "v", "k"]).to_pylist())


def _check(spark, catalog, ns: str, rows: dict[int, tuple], when: str) -> None:
    for what, (where, keeps) in FILTERS.items():
        ours = _ours(spark, f"lake.{ns}.t", where)
        assert ours == _theirs(catalog, f"{ns}.t", where), f"{when}, {what}: lakerules and pyiceberg differ"
        assert ours == sorted(r for r in rows.values() if keeps(r)), f"{when}, {what}: not the rows written"


# make test: the partitioned table (pruning by partition and by metrics); make soak: both
_LAYOUTS = [True] if os.environ.get("LAKERULES_PROFILE", "small") == "small" else [False, True]


@pytest.mark.parametrize("partitioned", _LAYOUTS, ids=["partitioned" if p else "unpartitioned" for p in _LAYOUTS])
def test_many_added_files_read_like_pyiceberg(spark, ns, warehouse, iceberg_catalog, partitioned):
    spark.sql(f"CREATE TABLE lake.{ns}.t (id BIGINT, v DOUBLE, k STRING)" + (" PARTITIONED BY (k)" if partitioned else ""))
    folder = warehouse / f"{ns}-added-files"
    folder.mkdir()
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda i: _write(str(folder), i), range(FILES)))
    table = iceberg_catalog.load_table(f"{ns}.t")
    step = -(-FILES // COMMITS)
    for s in range(0, FILES, step):
        table.add_files(paths[s:s + step])
    table = table.refresh()
    assert len(table.current_snapshot().manifests(table.io)) == COMMITS
    if partitioned:
        assert {t.file.partition[0] for t in table.scan().plan_files()} == {f"k{i}" for i in range(7)}
    rows = {x: (x, x / 4, f"k{(x // ROWS) % 7}") for x in range(FILES * ROWS)}
    _check(spark, iceberg_catalog, ns, rows, "as added")

    (deleted,) = spark.sql(f"DELETE FROM lake.{ns}.t WHERE id = {DELETED}").collect()
    assert deleted.num_affected_rows == 1
    table = table.refresh()
    assert int(table.current_snapshot().summary["added-position-delete-files"]) == 1
    del rows[DELETED]
    _check(spark, iceberg_catalog, ns, rows, "after the DELETE")

    (updated,) = spark.sql(f"UPDATE lake.{ns}.t SET v = -1 WHERE id = {UPDATED}").collect()
    assert updated.num_affected_rows == 1
    rows[UPDATED] = (UPDATED, -1.0, rows[UPDATED][2])
    _check(spark, iceberg_catalog, ns, rows, "after the UPDATE")
    deletes = [d for t in iceberg_catalog.load_table(f"{ns}.t").scan().plan_files() for d in t.delete_files]
    assert {d.content for d in deletes} == {DataFileContent.POSITION_DELETES}
