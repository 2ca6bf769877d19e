"""CALL lake.system.rewrite_position_delete_files: Iceberg's compaction of position delete files,
dangling entries and files dropped; the rows the engines read unchanged."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFileContent, ManifestContent

from deletes_util import position_delete_file
from lakerules import commit


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
    commit.row_delta(t, [], deletes)
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
        ("options => map('partial-progress.enabled', 'true')", "partial-progress.enabled='true' is not supported"),
        ("options => map('min-file-size-bytes', '100', 'target-file-size-bytes', '50')", "must be less than"),
        ("options => map('min-input-files', '0')", "min-input-files=0: it must be positive"),
        ("where => 'id > 1'", "may name only partition columns"),
        ("foo => 1", "unknown argument 'foo'"),
    ]:
        assert message in error(spark, f"{call}, {args})"), args
    # rewrite-all rewrites even a lone file; its entries stay the same
    (r,) = spark.sql(f"{call}, options => map('rewrite-all', 'true'))").collect()
    assert (r.rewritten_delete_files_count, r.added_delete_files_count) == (2, 2)
    assert iceberg_catalog.load_table(short).current_snapshot().snapshot_id != sid
    assert engines.assert_same(table) == rows
    assert [m.content for m in iceberg_catalog.load_table(short).current_snapshot().manifests(t.io)].count(ManifestContent.DELETES) >= 1
