"""Iceberg's procedures: rewrite_position_delete_files (position delete files compacted, dangling
entries and files dropped) and rewrite_data_files with a plain sort order (a range-partitioned
sort); the rows the engines read unchanged."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFileContent, ManifestContent

from deletes_util import position_delete_file
from lakerules.write import commit, row_delta


def live(t, content):
    s = t.current_snapshot()
    return [e.data_file for m in s.manifests(t.io) for e in m.fetch_manifest_entry(t.io, discard_deleted=True)
            if e.data_file.content == content]


def error(spark, sql: str) -> str:
    try:
        spark.sql(sql).collect()
    except Exception as e:  # noqa: BLE001
        return str(e)
    raise AssertionError(f"no error from {sql}")


def other_form(path: str) -> str:
    """The same local file spelled another way (file:/x for /x, /x for file:/x)."""
    return path[len("file:"):].replace("///", "/") if path.startswith("file:") else f"file:{path}"


def test_rewrite_position_delete_files(spark, ns, iceberg_catalog, engines):
    table, short = f"lake.{ns}.d", f"{ns}.d"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, p INT) PARTITIONED BY (p)")
    t = iceberg_catalog.load_table(short)
    for lo in (0, 10, 20):  # three data files per partition, appended by pyiceberg (quick)
        ids = list(range(lo, lo + 10))
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([i % 2 for i in ids], pa.int32())},
                          schema=t.schema().as_arrow()))
    data = sorted(live(t, DataFileContent.DATA), key=lambda f: (f.partition[0], f.file_path))
    deletes = []
    for f in data:  # two delete files per data file, as Iceberg's file-granularity DELETE writes them
        for pos in (0, 1):
            deletes.append(position_delete_file(t, [(f.file_path, pos)], f.partition, path_bounds=True))
    p0 = [f for f in data if f.partition[0] == 0]
    # one delete file naming three data files of partition 0, one of them spelled another way
    deletes.append(position_delete_file(t, [(p0[0].file_path, 3), (p0[1].file_path, 3), (other_form(p0[2].file_path), 4)],
                                        p0[0].partition))
    row_delta.commit(t, [], deletes)
    commit.overwrite(t, [p0[0]], [])  # its deletes dangle: two files wholly, one partly
    t = iceberg_catalog.load_table(short)
    # lakerules reads /x and file:///x as one file; pyiceberg and DuckDB compare the strings, until
    # the rewrite writes every entry with its data file's path as the manifest spells it
    rows = engines.lakerules(table)
    assert len(rows) == 30 - 5 - 2 * 5 - 2
    data_paths = {f.file_path for f in live(t, DataFileContent.DATA)}
    call = f"CALL lake.system.rewrite_position_delete_files(table => '{short}'"

    # where: partition 1 only (its six files, one group of at least min-input-files: one file)
    (r,) = spark.sql(f"{call}, where => 'p = 1')").collect()
    assert (r.rewritten_delete_files_count, r.added_delete_files_count) == (6, 1)
    t = iceberg_catalog.load_table(short)
    assert t.current_snapshot().summary.operation.value == "replace"
    assert len(live(t, DataFileContent.POSITION_DELETES)) == 7 + 1
    assert engines.lakerules(table) == rows

    # the rest: two wholly dangling files dropped unread, five compacted into one
    before = {f.file_path: f for f in live(t, DataFileContent.POSITION_DELETES) if f.partition[0] == 0}
    (r,) = spark.sql(f"{call})").collect()
    assert r.asDict()["rewritten_delete_files_count"] == 7 and r.added_delete_files_count == 1
    assert r.rewritten_bytes_count == sum(f.file_size_in_bytes for f in before.values())
    t = iceberg_catalog.load_table(short)
    after = live(t, DataFileContent.POSITION_DELETES)
    assert len(after) == 2 and r.added_bytes_count == sum(f.file_size_in_bytes for f in after if f.partition[0] == 0)
    assert {f.file_path for f in live(t, DataFileContent.DATA)} == data_paths  # no data file changed
    summary = t.current_snapshot().summary
    assert (summary.operation.value, summary["removed-delete-files"], summary["added-delete-files"]) == ("replace", "7", "1")
    assert engines.assert_same(table) == rows
    # the entries kept are the live ones, each naming its data file as the manifest spells it
    kept = []
    for f in after:
        with t.io.new_input(f.file_path).open() as fh:
            kept += [(r["file_path"], r["pos"]) for r in pq.read_table(fh).to_pylist()]
    expected = sorted([(f.file_path, pos) for f in data[1:] for pos in (0, 1)] + [(p0[1].file_path, 3), (p0[2].file_path, 4)])
    assert sorted(kept) == expected
    assert spark.sql(f"SELECT count(*) FROM {table}.position_deletes").first()[0] == len(expected)

    # nothing left to do: one file a partition is fewer than min-input-files
    sid = t.current_snapshot().snapshot_id
    assert tuple(spark.sql(f"{call})").first()) == (0, 0, 0, 0)
    for args, message in [
        ("options => map('nope', '1')", "unknown option 'nope'; the options are"),
        ("options => map('max-concurrent-file-group-rewrites', '2')", "is not supported: lakerules rewrites every file group"),
        ("options => map('min-file-size-bytes', '100', 'target-file-size-bytes', '50')", "must be less than"),
        ("options => map('min-input-files', '0')", "min-input-files=0: it must be positive"),
        ("where => 'id > 1'", "rewrite_position_delete_files WHERE may name only partition columns"),
    ]:
        assert message in error(spark, f"{call}, {args})"), args
    # rewrite-all rewrites even a lone file; its entries stay the same
    (r,) = spark.sql(f"{call}, options => map('rewrite-all', 'true'))").collect()
    assert (r.rewritten_delete_files_count, r.added_delete_files_count) == (2, 2)
    assert iceberg_catalog.load_table(short).current_snapshot().snapshot_id != sid
    assert engines.assert_same(table) == rows
    assert [m.content for m in iceberg_catalog.load_table(short).current_snapshot().manifests(t.io)].count(ManifestContent.DELETES) >= 1


# ---- rewrite_data_files(strategy => 'sort', sort_order => 'a DESC NULLS FIRST, b') -------------------


def file_rows(t, f) -> list[dict]:
    with t.io.new_input(f.file_path).open() as fh:
        return pq.read_table(fh).to_pylist()


def test_rewrite_data_files_plain_sort_order(spark, ns, iceberg_catalog, engines):
    table, short = f"lake.{ns}.s", f"{ns}.s"
    spark.sql(f"CREATE TABLE {table} (a INT, b STRING, p INT) PARTITIONED BY (p)")
    t = iceberg_catalog.load_table(short)
    values = list(range(400))
    random.Random(7).shuffle(values)
    for i in range(4):  # four files a partition, each with a spread over all of its range
        chunk = values[i * 100:(i + 1) * 100]
        t.append(pa.table({"a": pa.array([None if v % 97 == 0 else v for v in chunk], pa.int32()),
                           "b": [f"b{v % 5}" for v in chunk], "p": pa.array([v % 2 for v in chunk], pa.int32())},
                          schema=t.schema().as_arrow()))
    rows = engines.lakerules(table)
    call = f"CALL lake.system.rewrite_data_files(table => '{short}'"
    assert "has none: give sort_order" in error(spark, f"{call}, strategy => 'sort')")
    assert "sort_order 'a ASC, nope': sort column 'nope' is not a column" in error(spark, f"{call}, sort_order => 'a ASC, nope')")
    assert "sort_order 'a ASC,, b' is not a sort order" in error(spark, f"{call}, sort_order => 'a ASC,, b')")
    size = sum(f.file_size_in_bytes for f in live(t, DataFileContent.DATA)) // 2  # a partition
    (r,) = spark.sql(f"""{call}, strategy => 'sort', sort_order => 'a DESC NULLS FIRST, b',
                         options => map('rewrite-all', 'true', 'target-file-size-bytes', '{size // 3}'))""").collect()
    t = iceberg_catalog.load_table(short)
    files = live(t, DataFileContent.DATA)
    assert r.rewritten_data_files_count == 8 and r.added_data_files_count == len(files) >= 4
    assert engines.assert_same(table) == rows
    for part in (0, 1):
        # ranges of a disjoint and ordered (descending; the nulls first, in the first file); each file sorted
        ranges = []
        for f in files:
            if f.partition[0] != part:
                continue
            a = [r["a"] for r in file_rows(t, f)]
            assert a == sorted(a, key=lambda v: (v is not None, -(v or 0)))
            ranges.append((a[0], a[-1]))
        assert len(ranges) >= 2
        ranges.sort(key=lambda r: (r[0] is not None, -(r[0] or 0)))
        assert all(r[0] is not None for r in ranges[1:])  # nulls only at the head of the first file
        for (_, low), (high, _) in zip(ranges, ranges[1:]):
            assert low is not None and high < low
        assert all(f.sort_order_id is None for f in files)  # not the table's sort order (it has none)

    # strategy sort alone: the table's sort order, recorded in the files
    spark.sql(f"ALTER TABLE {table} WRITE ORDERED BY b DESC, a")
    (r,) = spark.sql(f"{call}, strategy => 'sort', options => map('rewrite-all', 'true'))").collect()
    t = iceberg_catalog.load_table(short)
    files = live(t, DataFileContent.DATA)
    assert r.added_data_files_count == len(files) == 2
    order_id = t.sort_order().order_id
    for f in files:
        assert f.sort_order_id == order_id
        got = [(r["b"], r["a"]) for r in file_rows(t, f)]
        assert got == sorted(got, key=lambda x: (tuple(-ord(c) for c in x[0]), x[1] is not None, x[1] or 0))
    assert engines.assert_same(table) == rows


def test_rewrite_position_delete_files_conflict_leaves_no_trace(spark, ns, iceberg_catalog):
    """A delete file the rewrite replaces, removed by a commit while it ran: a conflict, nothing
    committed by the rewrite, its new files deleted."""
    import os

    table, short = f"lake.{ns}.c", f"{ns}.c"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    t = iceberg_catalog.load_table(short)
    t.append(pa.table({"id": pa.array(range(10), pa.int64())}, schema=t.schema().as_arrow()))
    (f,) = live(t, DataFileContent.DATA)
    row_delta.commit(t, [], [position_delete_file(t, [(f.file_path, i)], f.partition) for i in range(2)])
    t = iceberg_catalog.load_table(short)
    gone = live(t, DataFileContent.POSITION_DELETES)[0]
    data_dir = t.location().replace("file://", "") + "/data"

    def listing():
        return sorted(os.path.join(d, n) for d, _, names in os.walk(data_dir) for n in names)

    before = listing()

    def meanwhile(table):
        commit.before_commit = None
        row_delta.commit(iceberg_catalog.load_table(short), [], [], removed_delete_files=[gone])

    commit.before_commit = meanwhile
    try:
        message = error(spark, f"CALL lake.system.rewrite_position_delete_files(table => '{short}', "
                               "options => map('min-input-files', '2'))")
    finally:
        commit.before_commit = None
    assert "conflicts with a commit made while it ran" in message and "no longer in the table" in message
    t = iceberg_catalog.load_table(short)
    assert t.current_snapshot().summary.operation.value != "replace"
    assert len(live(t, DataFileContent.POSITION_DELETES)) == 1
    assert listing() == before  # the rewrite's delete file went again
