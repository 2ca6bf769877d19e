"""The write paths fault tests run, with the rows each leaves (a plain model), shared by
test_faults.py and the subprocess it starts (fault_driver.py)."""

from __future__ import annotations

import os
from pathlib import Path

# Each table: (id, v, p) with p = id % 3, partitioned by p; a few files per partition and one
# position delete file, so OPTIMIZE has files to compact and deletes to apply. Commits retry
# once, quickly (a rejected commit fails fast).
TABLE_PROPERTIES = ("'commit.retry.num-retries'='1', 'commit.retry.min-wait-ms'='10', "
                    "'commit.retry.max-wait-ms'='20'")


def create(spark, table: str) -> list[tuple]:
    """Create and fill the table; returns its rows. The rows are appended by pyiceberg, a writer
    as good as any (and much quicker than Spark jobs), the position delete of id 7 written as
    another engine would (deletes_util) and committed by lakerules."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import lakerules
    from deletes_util import position_delete_file
    from lakerules.write import row_delta

    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING, p INT) PARTITIONED BY (p) "
              f"TBLPROPERTIES ({TABLE_PROPERTIES})")
    ident = table.split(".", 1)[1]
    catalog = lakerules._backend.catalogs.get(table.split(".", 1)[0])
    t = catalog.load_table(ident)
    for lo, hi in ((0, 12), (12, 24)):  # two files per partition
        ids = list(range(lo, hi))
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids],
                           "p": pa.array([i % 3 for i in ids], pa.int32())}, schema=t.schema().as_arrow()))
    first = t.snapshots()[0]
    f = next(e.data_file for m in first.manifests(t.io) for e in m.fetch_manifest_entry(t.io)
             if e.data_file.partition[0] == 1)
    with t.io.new_input(f.file_path).open() as fh:
        pos = pq.read_table(fh).column("id").to_pylist().index(7)
    row_delta.commit(t, [], [position_delete_file(t, [(f.file_path, pos)], f.partition)])
    return [(i, f"v{i}", i % 3) for i in range(24) if i != 7]


def run(spark, path: str, table: str) -> None:
    """One statement of a write path."""
    if path == "insert":
        spark.sql(f"INSERT INTO {table} VALUES (100, 'new', 1), (101, 'new', 2)")
    elif path == "delete":
        spark.sql(f"DELETE FROM {table} WHERE id % 4 = 1")
    elif path == "update":
        spark.sql(f"UPDATE {table} SET v = concat(v, '!') WHERE id % 5 = 2")
    elif path == "merge":
        spark.sql(f"""MERGE INTO {table} AS x
                      USING (SELECT * FROM VALUES (3L, 0), (4L, 1), (200L, 2) AS s(id, p)) AS s ON x.id = s.id
                      WHEN MATCHED THEN UPDATE SET v = 'm'
                      WHEN NOT MATCHED THEN INSERT (id, v, p) VALUES (s.id, 'm', s.p)""")
    elif path == "optimize":
        spark.sql(f"OPTIMIZE {table}")
    elif path == "delete_by_key":
        import lakerules

        keys = spark.range(0, 24, 3).selectExpr("id", "CAST(id % 3 AS INT) AS p")
        lakerules.delete_by_key(spark, table, keys, on=["id"])
    else:
        raise ValueError(path)


def expected(path: str, rows: list[tuple]) -> list[tuple]:
    """The rows after run(path) committed."""
    if path == "insert":
        return rows + [(100, "new", 1), (101, "new", 2)]
    if path == "delete":
        return [r for r in rows if r[0] % 4 != 1]
    if path == "update":
        return [(i, v + "!" if i % 5 == 2 else v, p) for i, v, p in rows]
    if path == "merge":
        return [(i, "m" if i in (3, 4) else v, p) for i, v, p in rows] + [(200, "m", 2)]
    if path == "optimize":
        return list(rows)
    if path == "delete_by_key":
        return [r for r in rows if r[0] % 3 != 0]
    raise ValueError(path)


PATHS = ("insert", "delete", "update", "merge", "optimize", "delete_by_key")


def local(location: str) -> Path:
    """A table location (file:///x, file:/x or /x) as a local path."""
    if location.startswith("file:"):
        return Path("/" + location[len("file:"):].lstrip("/"))
    return Path(location)


def visible_files(location: str) -> set[str]:
    """Every file under the table folder but Hadoop's hidden ones (checksums, _temporary), as
    normalized local paths."""
    root = local(location)
    out = set()
    for d, dirs, names in os.walk(root):
        rel = Path(d).relative_to(root)
        if any(part.startswith(".") or (part.startswith("_") and "=" not in part) for part in rel.parts):
            continue
        out |= {str(Path(d) / n) for n in names if not n.startswith((".", "_"))}
    return out


def temporary_dirs(location: str) -> list[str]:
    return [d for d, _, _ in os.walk(local(location)) if "_temporary" in Path(d).name]


def duplicate_deletes(table) -> list:
    """(data file, position) named by more than one position delete file entry of the current
    snapshot, and equality delete keys written twice."""
    import collections

    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFileContent

    snapshot = table.current_snapshot()
    seen, dups = collections.Counter(), []
    for m in snapshot.manifests(table.io):
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
            f = e.data_file
            if f.content == DataFileContent.DATA:
                continue
            with table.io.new_input(f.file_path).open() as fh:
                rows = pq.read_table(fh).to_pylist()
            for r in rows:
                key = (f.content, tuple(sorted(r.items())))
                seen[key] += 1
    dups = [k for k, n in seen.items() if n > 1]
    return dups
