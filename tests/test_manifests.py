"""Manifests stay few: commits merge small manifests (Iceberg's commit.manifest-merge.* and
commit.manifest.* properties), and CALL lake.system.rewrite_manifests clusters them by partition.

Most tests commit tiny one-row files through lakerules.write.commit on a catalog of their own (no
Spark); the rows are read back by pyiceberg and DuckDB, and which deletes apply to which files
by lakerules' planner."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.io.pyarrow import compute_statistics_plan, data_file_statistics_from_parquet_metadata, \
    parquet_path_to_id_mapping
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntryStatus
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

import lakerules
from deletes_util import equality_delete_file, position_delete_file
from lakerules.write import commit, row_delta
from lakerules.scan.planning import plan_scan

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "v", StringType(), required=False),
                NestedField(3, "p", IntegerType(), required=False))
BY_P = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "p"))


@pytest.fixture
def catalog(tmp_path):
    c = load_catalog("m", **lakerules.embedded_catalog(tmp_path))
    c.create_namespace("db")
    return c


def create(catalog, name="db.t", **properties):
    return catalog.create_table(name, SCHEMA, partition_spec=BY_P,
                                properties={"format-version": "2", **properties})


def tiny_file(table, i: int, p: int | None = None, v: str | None = None) -> DataFile:
    """A Parquet file of one row (id=i, v, p), written as Spark's writer would, as a DataFile."""
    p = i % 4 if p is None else p
    arrow = pa.table({"id": pa.array([i], pa.int64()), "v": [v or f"v{i}"], "p": pa.array([p], pa.int32())},
                     schema=table.schema().as_arrow())
    path = f"{table.location().rstrip('/')}/data/p={p}/{uuid.uuid4().hex}.parquet"
    with table.io.new_output(path).create() as out:
        pq.write_table(arrow, out)
    with table.io.new_input(path).open() as f:
        meta = pq.read_metadata(f)
    stats = data_file_statistics_from_parquet_metadata(
        meta, compute_statistics_plan(table.schema(), table.metadata.properties),
        parquet_path_to_id_mapping(table.schema()))
    f = DataFile.from_args(content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
                           partition=Record(p), file_size_in_bytes=len(table.io.new_input(path)),
                           **stats.to_serialized_dict())
    f.spec_id = table.metadata.default_spec_id
    return f


def append_rows(table, ids, p=None) -> list[DataFile]:
    """One commit per id, each appending a one-row file; returns the files."""
    files = []
    for i in ids:
        f = tiny_file(table, i, p)
        commit.append(table, [f])
        files.append(f)
    return files


def manifests(table, content=None) -> list:
    s = table.current_snapshot()
    ms = s.manifests(table.io) if s is not None else []
    return [m for m in ms if content is None or m.content == content]


def entries(table) -> dict[str, tuple]:
    """path -> (status, snapshot id, data sequence number, file sequence number) of live entries."""
    return {e.data_file.file_path: (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number)
            for m in manifests(table) for e in m.fetch_manifest_entry(table.io, discard_deleted=True)}


def pyiceberg_rows(table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.scan().to_arrow().to_pylist())


def duckdb_rows(duck, table) -> list[tuple]:
    return sorted(duck.execute(f"SELECT id, v, p FROM iceberg_scan('{table.metadata_location}')").fetchall())


def expected(ids) -> list[tuple]:
    return sorted((i, f"v{i}", i % 4) for i in ids)


# ---- merging on commit ---------------------------------------------------------------------------


def test_appends_keep_the_manifest_count_bounded_by_default(catalog, duck):
    t = create(catalog)
    counts = []
    for i in range(30):
        append_rows(t, [i])
        counts.append(len(manifests(t)))
    # default min-count-to-merge 10: the new manifest and the 9 before it become one
    assert max(counts) == 9
    assert counts[:9] == list(range(1, 10)) and counts[9] == 1
    assert counts[-1] <= 9
    assert len(entries(t)) == 30  # every file once
    assert pyiceberg_rows(t) == duckdb_rows(duck, t) == expected(range(30))
    # each snapshot of the history still reads as it was
    history = t.snapshots()
    assert len(history) == 30
    for n, s in enumerate(history, 1):
        assert t.scan(snapshot_id=s.snapshot_id).to_arrow().num_rows == n


def test_merging_off_and_the_properties_honoured(catalog, duck):
    off = create(catalog, "db.off", **{"commit.manifest-merge.enabled": "false"})
    append_rows(off, range(12))
    assert len(manifests(off)) == 12
    five = create(catalog, "db.five", **{"commit.manifest.min-count-to-merge": "5"})
    counts = []
    for i in range(12):
        append_rows(five, [i])
        counts.append(len(manifests(five)))
    assert max(counts) == 4 and counts[4] == 1
    # bins of 1 byte hold one manifest each: nothing is ever merged
    tiny = create(catalog, "db.tiny", **{"commit.manifest.target-size-bytes": "1"})
    append_rows(tiny, range(12))
    assert len(manifests(tiny)) == 12
    for t in (off, five, tiny):
        assert pyiceberg_rows(t) == duckdb_rows(duck, t) == expected(range(12))
    bad = create(catalog, "db.bad", **{"commit.manifest.min-count-to-merge": "many"})
    with pytest.raises(lakerules.LakeError, match="min-count-to-merge"):
        append_rows(bad, [1])


def test_merged_entries_keep_snapshot_ids_and_sequence_numbers(catalog):
    t = create(catalog)
    append_rows(t, range(9))
    before = entries(t)
    assert len(manifests(t)) == 9 and all(e[0] == ManifestEntryStatus.ADDED for e in before.values())
    (last,) = append_rows(t, [9])  # the 10th manifest: all merged into one
    t = catalog.load_table("db.t")
    (merged,) = manifests(t)
    after = entries(t)
    s = t.current_snapshot()
    assert merged.added_snapshot_id == s.snapshot_id
    assert after.pop(last.file_path) == (ManifestEntryStatus.ADDED, s.snapshot_id, s.sequence_number, s.sequence_number)
    assert after == {path: (ManifestEntryStatus.EXISTING, *rest) for path, (_, *rest) in before.items()}
    assert merged.min_sequence_number == 1


def test_the_merged_away_manifest_is_deleted(catalog):
    t = create(catalog)
    append_rows(t, range(20))
    t = catalog.load_table("db.t")
    named = {m.manifest_path.rsplit("/", 1)[1] for s in t.snapshots() for m in s.manifests(t.io)}
    on_disk = {p.name for p in local(t.location()).joinpath("metadata").glob("*-m*.avro")}
    # commits 10 and 19 wrote their new manifest and the merged one, which alone they list
    assert len(named) == 20 and on_disk == named


def local(location: str) -> Path:
    return Path("/" + location.removeprefix("file:").lstrip("/"))


def test_deletes_written_before_a_merge_still_apply_after_it(catalog, duck):
    t = create(catalog)
    files = append_rows(t, range(4), p=0)  # ids 0..3, each its own file, partition 0
    # a position delete of id 1 and an equality delete of id 2, committed at sequence number 5
    row_delta.commit(t, [], [position_delete_file(t, [(files[1].file_path, 0)], Record(0)),
                             equality_delete_file(t, {"id": [2]}, Record(0))])
    # id 2 again, appended later: the equality delete is older and must not apply to it
    later = tiny_file(t, 2, p=0, v="again")
    commit.append(t, [later])
    t = catalog.load_table("db.t")
    want = [(0, "v0", 0), (2, "again", 0), (3, "v3", 0)]

    def check():
        assert duckdb_rows(duck, t) == want
        plan = {p.file.file_path: p for p in plan_scan(t, t.current_snapshot().snapshot_id).files}
        assert [d.content for d in plan[files[1].file_path].position_deletes] == [DataFileContent.POSITION_DELETES]
        assert len(plan[files[2].file_path].equality_deletes) == 1
        assert len(plan[later.file_path].equality_deletes) == 0

    check()
    assert len(manifests(t, ManifestContent.DATA)) == 5
    append_rows(t, range(10, 15), p=0)  # the 10th data manifest: merged
    t = catalog.load_table("db.t")
    assert len(manifests(t, ManifestContent.DATA)) == 1
    want += [(i, f"v{i}", 0) for i in range(10, 15)]
    check()


def test_row_deltas_merge_delete_manifests_apart_from_data_manifests(catalog, duck):
    t = create(catalog)
    files = append_rows(t, range(12))
    t = catalog.load_table("db.t")
    data_before = {m.manifest_path for m in manifests(t, ManifestContent.DATA)}
    counts = []
    for i in range(1, 12):  # 11 DELETEs of one row each: one delete manifest each before merging
        f = files[i]
        row_delta.commit(t, [], [position_delete_file(t, [(f.file_path, 0)], f.partition)])
        t = catalog.load_table("db.t")
        counts.append(len(manifests(t, ManifestContent.DELETES)))
    assert max(counts) == 9 and counts[9] == 1
    assert {m.manifest_path for m in manifests(t, ManifestContent.DATA)} == data_before  # untouched
    for m in manifests(t):  # never mixed
        kinds = {e.data_file.content for e in m.fetch_manifest_entry(t.io, discard_deleted=False)}
        assert kinds == ({DataFileContent.DATA} if m.content == ManifestContent.DATA
                         else {DataFileContent.POSITION_DELETES})
    assert pyiceberg_rows(t) == duckdb_rows(duck, t) == expected([0])


def test_manifests_of_dropped_files_are_not_carried_over(catalog):
    t = create(catalog, **{"commit.manifest-merge.enabled": "false"})
    files = append_rows(t, range(3))
    commit.overwrite(t, [files[0]], [])  # a manifest whose one entry is DELETED
    t = catalog.load_table("db.t")
    assert any(not m.has_added_files() and not m.has_existing_files() for m in manifests(t))
    row_delta.commit(t, [], [position_delete_file(t, [(files[1].file_path, 0)], files[1].partition)])
    t = catalog.load_table("db.t")
    assert all(m.has_added_files() or m.has_existing_files() for m in manifests(t))
    assert pyiceberg_rows(t) == expected([2])


# ---- CALL lake.system.rewrite_manifests ---------------------------------------------------------------


def test_rewrite_manifests_clusters_by_partition(spark, ns, iceberg_catalog, engines):
    name = f"lake.{ns}.r"
    spark.sql(f"CREATE TABLE {name} (id BIGINT, v STRING, p INT) PARTITIONED BY (p) TBLPROPERTIES "
              "('commit.manifest-merge.enabled'='false', 'format-version'='2')")
    t = iceberg_catalog.load_table(f"{ns}.r")
    ids = range(24)
    files = []
    for lo in range(0, 24, 4):  # 6 commits, each a file in each of partitions 0..3
        fs = [tiny_file(t, i) for i in range(lo, lo + 4)]
        commit.append(t, fs)
        files += fs
    t = iceberg_catalog.load_table(f"{ns}.r")
    for f in (files[5], files[6]):  # pyiceberg's reader (engines) refuses equality deletes
        row_delta.commit(t, [], [position_delete_file(t, [(f.file_path, 0)], f.partition)])
    t = iceberg_catalog.load_table(f"{ns}.r")
    before = entries(t)
    assert len(manifests(t, ManifestContent.DATA)) == 6 and len(manifests(t, ManifestContent.DELETES)) == 2
    # a target size giving two data manifests: each then covers partitions 0-1 or 2-3
    data_size = sum(m.manifest_length for m in manifests(t, ManifestContent.DATA))
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('commit.manifest.target-size-bytes'='{data_size // 2 + 1}')")
    rows = engines.assert_same(name, "id, v, p", expected=[(i, f"v{i}", i % 4) for i in ids if i not in (5, 6)])

    (r,) = spark.sql(f"CALL lake.system.rewrite_manifests(table => '{ns}.r')").collect()
    assert (r.rewritten_manifests_count, r.added_manifests_count) == (8, 3)
    t = iceberg_catalog.load_table(f"{ns}.r")
    s = t.current_snapshot()
    assert s.summary.operation.value == "replace"
    assert s.summary["total-records"] == t.snapshot_by_id(s.parent_snapshot_id).summary["total-records"]
    data = manifests(t, ManifestContent.DATA)
    ranges = sorted({e.data_file.partition[0] for e in m.fetch_manifest_entry(t.io)} for m in data)
    assert ranges == [{0, 1}, {2, 3}]
    assert [m.partitions[0].lower_bound != m.partitions[0].upper_bound for m in data] == [True, True]
    (deletes,) = manifests(t, ManifestContent.DELETES)  # delete manifests rewritten on their own
    assert len(deletes.fetch_manifest_entry(t.io)) == 2
    # the same entries: snapshot ids and sequence numbers kept, so the same deletes apply
    assert entries(t) == {p: (ManifestEntryStatus.EXISTING, *rest) for p, (_, *rest) in before.items()}
    assert engines.assert_same(name, "id, v, p") == rows

    # one manifest of the target size: nothing to do, no commit
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('commit.manifest.target-size-bytes'='8388608')")
    spark.sql(f"CALL lake.system.rewrite_manifests('{ns}.r')").collect()
    t = iceberg_catalog.load_table(f"{ns}.r")
    assert len(manifests(t)) == 2
    (r,) = spark.sql(f"CALL lake.system.rewrite_manifests('{ns}.r')").collect()
    assert (r.rewritten_manifests_count, r.added_manifests_count) == (0, 0)
    assert iceberg_catalog.load_table(f"{ns}.r").current_snapshot().snapshot_id == \
        t.current_snapshot().snapshot_id
    assert engines.assert_same(name, "id, v, p") == rows


def test_rewrite_manifests_arguments(spark, ns):
    name = f"lake.{ns}.a"
    spark.sql(f"CREATE TABLE {name} (id BIGINT, p INT) PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {name} VALUES (1, 1)")
    spark.sql(f"INSERT INTO {name} VALUES (2, 2)")
    schema = spark.sql(f"CALL lake.system.rewrite_manifests(table => '{ns}.a', spec_id => 0)").schema
    assert [(f.name, f.dataType.simpleString()) for f in schema] == \
        [("rewritten_manifests_count", "int"), ("added_manifests_count", "int")]
    for call, message in [
        (f"table => '{ns}.a', use_caching => false", "use_caching"),
        (f"'{ns}.a', true", "use_caching"),
        (f"table => '{ns}.a', spec_id => 7", "no partition spec 7"),
        (f"table => '{ns}.a', target => 1", "unknown argument"),
    ]:
        with pytest.raises(Exception) as e:
            spark.sql(f"CALL lake.system.rewrite_manifests({call})").collect()
        assert message in str(e.value), str(e.value)
