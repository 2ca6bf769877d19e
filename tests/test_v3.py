"""Iceberg format version 3 tables (issue 32, its foundation): created and upgraded, appends with
row lineage, every other write refused clearly. Each state is read back by lakerules, pyiceberg
(which reads v3) and DuckDB; the metadata JSON, manifest lists and manifests are read directly
(the metadata as JSON, the Avro files by DuckDB's avro extension), not through lakerules."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from errors_util import refused
from settings_util import settings

from lakerules.iceberg import format_version


def _metadata(iceberg_catalog, table: str) -> dict:
    t = iceberg_catalog.load_table(table.split(".", 1)[1])
    return json.loads(Path(t.metadata_location.removeprefix("file://")).read_text())


def _avro(duck, path: str) -> list[dict]:
    rel = duck.execute(f"SELECT * FROM read_avro('{path.removeprefix('file://')}')")
    names = [d[0] for d in rel.description]
    return [dict(zip(names, row)) for row in rel.fetchall()]


def _lineage(duck, meta: dict) -> dict:
    """What the current snapshot's manifest list and manifests say about row ids: per manifest
    (path -> first_row_id, added and existing rows), per data file (path -> first_row_id as
    written, record_count, status), in list and file order."""
    current = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])
    manifests, files = [], []
    for m in _avro(duck, current["manifest-list"]):
        manifests.append(m)
        for e in _avro(duck, m["manifest_path"]):
            files.append({"manifest": m["manifest_path"], "status": e["status"], **e["data_file"]})
    return {"snapshot": current, "manifests": manifests, "files": files}


def _row_ids(lineage: dict) -> dict[str, int]:
    """Each live data file's first row id as the spec's inheritance gives it: its own, else its
    manifest's first_row_id plus the rows of the live files before it that inherit too."""
    out = {}
    for m in lineage["manifests"]:
        if m["content"] != 0:
            continue
        nxt = m["first_row_id"]
        for f in lineage["files"]:
            if f["manifest"] != m["manifest_path"] or f["status"] == 2:
                continue
            if f.get("first_row_id") is not None:
                out[f["file_path"]] = f["first_row_id"]
            else:
                out[f["file_path"]] = nxt
                nxt += f["record_count"]
    return out


def _contiguous(lineage: dict, rows: int) -> bool:
    """Whether the live data files' row ids are 0 .. rows-1, each file's a range, none shared."""
    ids = _row_ids(lineage)
    ranges = sorted((ids[f["file_path"]], f["record_count"]) for f in lineage["files"]
                    if f["status"] != 2 and f["content"] == 0)
    return [r[0] for r in ranges] == [sum(c for _, c in ranges[:i]) for i in range(len(ranges))] and \
        sum(c for _, c in ranges) == rows


def test_create_insert_and_row_lineage(spark, ns, iceberg_catalog, engines, duck):
    t = f"lake.{ns}.v3"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) TBLPROPERTIES ('format-version'='3')")
    meta = _metadata(iceberg_catalog, t)
    assert meta["format-version"] == 3 and meta["next-row-id"] == 0
    assert iceberg_catalog.load_table(f"{ns}.v3").format_version == 3

    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    meta = _metadata(iceberg_catalog, t)
    first = meta["snapshots"][-1]
    assert (first["first-row-id"], first["added-rows"], meta["next-row-id"]) == (0, 3, 3)
    lin = _lineage(duck, meta)
    assert [m["first_row_id"] for m in lin["manifests"]] == [0]
    assert {f["first_row_id"] for f in lin["files"]} == {None}  # inherited from the manifest
    assert sum(f["record_count"] for f in lin["files"]) == 3
    assert all(f["file_format"] == "PARQUET" for f in lin["files"])

    spark.sql(f"INSERT INTO {t} VALUES (4, 'd'), (5, 'e')")
    spark.createDataFrame([(6, "f")], "id BIGINT, s STRING").writeTo(t).append()
    meta = _metadata(iceberg_catalog, t)
    second, third = meta["snapshots"][-2:]
    assert (second["first-row-id"], second["added-rows"]) == (3, 2)
    assert (third["first-row-id"], third["added-rows"]) == (5, 1)
    assert meta["next-row-id"] == 6 and meta["last-sequence-number"] == 3
    lin = _lineage(duck, meta)
    # the carried manifests keep the ids their first list gave them; the new one gets the next
    assert sorted(m["first_row_id"] for m in lin["manifests"]) == [0, 3, 5]
    assert _contiguous(lin, 6)

    rows = [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e"), (6, "f")]
    engines.assert_same(t, expected=rows)


def test_ctas_and_the_default_setting(spark, ns, iceberg_catalog, engines, duck):
    t = f"lake.{ns}.c3"
    spark.sql(f"CREATE TABLE {t} TBLPROPERTIES ('format-version'='3') AS SELECT id, id * 2 AS d FROM range(4)")
    meta = _metadata(iceberg_catalog, t)
    assert meta["format-version"] == 3 and meta["next-row-id"] == 4
    s = meta["snapshots"][-1]
    assert (s["first-row-id"], s["added-rows"]) == (0, 4)
    engines.assert_same(t, expected=[(i, 2 * i) for i in range(4)])

    spark.conf.set(format_version.DEFAULT_SETTING, "3")
    try:
        spark.sql(f"CREATE TABLE lake.{ns}.d3 (id INT)")
        spark.sql(f"CREATE TABLE lake.{ns}.d3b AS SELECT 1 AS id")
        spark.sql(f"CREATE TABLE lake.{ns}.d2 (id INT) TBLPROPERTIES ('format-version'='2')")
    finally:
        spark.conf.unset(format_version.DEFAULT_SETTING)
    assert iceberg_catalog.load_table(f"{ns}.d3").format_version == 3
    assert iceberg_catalog.load_table(f"{ns}.d3b").format_version == 3
    assert iceberg_catalog.load_table(f"{ns}.d2").format_version == 2
    spark.sql(f"CREATE TABLE lake.{ns}.d2b (id INT)")
    assert iceberg_catalog.load_table(f"{ns}.d2b").format_version == 2

    spark.conf.set(format_version.DEFAULT_SETTING, "4")
    try:
        refused(spark, f"CREATE TABLE lake.{ns}.bad (id INT)", format_version.DEFAULT_SETTING, "'4'")
    finally:
        spark.conf.unset(format_version.DEFAULT_SETTING)
    assert not spark.catalog.tableExists(f"lake.{ns}.bad")


def test_upgrade_from_v2_assigns_row_ids_to_older_files(spark, ns, iceberg_catalog, engines, duck):
    t = f"lake.{ns}.up"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {t} VALUES (1), (2)")
    spark.sql(f"INSERT INTO {t} VALUES (3)")
    refused(spark, f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='1')", "never downgraded")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='3')")
    meta = _metadata(iceberg_catalog, t)
    assert meta["format-version"] == 3 and meta["next-row-id"] == 0
    assert all("first-row-id" not in s for s in meta["snapshots"])
    engines.assert_same(t, expected=[(1,), (2,), (3,)])
    refused(spark, f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='2')", "would downgrade", "never downgraded")

    spark.sql(f"INSERT INTO {t} VALUES (4)")
    meta = _metadata(iceberg_catalog, t)
    s = meta["snapshots"][-1]
    # the two v2 manifests (3 rows) get ids in the first v3 list, as Iceberg's upgrade does
    assert (s["first-row-id"], s["added-rows"], meta["next-row-id"]) == (0, 4, 4)
    lin = _lineage(duck, meta)
    assert _contiguous(lin, 4)
    spark.sql(f"INSERT INTO {t} VALUES (5)")
    meta2 = _metadata(iceberg_catalog, t)
    lin2 = _lineage(duck, meta2)
    kept = {m["manifest_path"]: m["first_row_id"] for m in lin["manifests"]}
    assert all(kept[m["manifest_path"]] == m["first_row_id"] for m in lin2["manifests"] if m["manifest_path"] in kept)
    assert (meta2["snapshots"][-1]["first-row-id"], meta2["next-row-id"]) == (4, 5)
    engines.assert_same(t, expected=[(i,) for i in range(1, 6)])

    # a v1 table goes to 2 first
    spark.sql(f"CREATE TABLE lake.{ns}.one (id INT) TBLPROPERTIES ('format-version'='1')")
    refused(spark, f"ALTER TABLE lake.{ns}.one SET TBLPROPERTIES ('format-version'='3')", "upgrade it to 2 first")
    assert iceberg_catalog.load_table(f"{ns}.one").format_version == 1


def test_add_files_and_metadata_changes_keep_v3(spark, ns, iceberg_catalog, engines, duck, tmp_path):
    t = f"lake.{ns}.af"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a')")
    schema = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
                        pa.field("s", pa.string(), metadata={b"PARQUET:field_id": b"2"})])
    pq.write_table(pa.table({"id": [7, 8], "s": ["x", "y"]}, schema=schema), tmp_path / "f.parquet")
    spark.sql(f"CALL lake.system.add_files(table => '{ns}.af', source_table => '`parquet`.`{tmp_path / 'f.parquet'}`')")
    meta = _metadata(iceberg_catalog, t)
    assert (meta["snapshots"][-1]["first-row-id"], meta["snapshots"][-1]["added-rows"], meta["next-row-id"]) == (1, 2, 3)
    assert _contiguous(_lineage(duck, meta), 3)
    first_snapshot = meta["snapshots"][0]["snapshot-id"]

    # metadata-only changes: the table stays v3, next-row-id kept
    spark.sql(f"ALTER TABLE {t} ADD COLUMN n INT")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('k'='v')")
    spark.sql(f"INSERT INTO {t} VALUES (9, 'z', 5)")
    meta = _metadata(iceberg_catalog, t)
    assert meta["format-version"] == 3 and meta["next-row-id"] == 4 and meta["properties"]["k"] == "v"
    engines.assert_same(t, expected=[(1, "a", None), (7, "x", None), (8, "y", None), (9, "z", 5)])
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{ns}.af', {first_snapshot})")
    meta = _metadata(iceberg_catalog, t)
    assert meta["current-snapshot-id"] == first_snapshot and meta["next-row-id"] == 4  # ids are never reused
    engines.assert_same(t, expected=[(1, "a", None)])
    spark.sql(f"INSERT INTO {t} VALUES (2, 'b', 2)")
    meta = _metadata(iceberg_catalog, t)
    assert (meta["snapshots"][-1]["first-row-id"], meta["next-row-id"]) == (4, 5)
    engines.assert_same(t, expected=[(1, "a", None), (2, "b", 2)])


def test_a_commit_v3_cannot_hold_is_refused_and_changes_nothing(spark, ns, iceberg_catalog):
    from lakerules.errors import NotSupported
    from lakerules.write import row_delta

    t = f"lake.{ns}.r3"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, p INT) PARTITIONED BY (p) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1), (2, 2)")
    spark.sql(f"CREATE TABLE lake.{ns}.src (id BIGINT, p INT)")
    spark.sql(f"INSERT INTO lake.{ns}.src VALUES (1, 1), (3, 3)")
    before = iceberg_catalog.load_table(f"{ns}.r3").metadata_location
    # the fail-safe under the verbs: a commit adding a position delete file (not a DV) is refused on v3
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    table = iceberg_catalog.load_table(f"{ns}.r3")
    data = next(iter(table.scan().plan_files())).file
    position_file = DataFile.from_args(content=DataFileContent.POSITION_DELETES, file_path=f"{data.file_path}.pos.parquet",
                                       file_format=FileFormat.PARQUET, partition=data.partition, record_count=1,
                                       file_size_in_bytes=1)
    position_file.spec_id = data.spec_id
    with pytest.raises(NotSupported, match="format-version 3 table: lakerules writes only appends"):
        row_delta.commit(table, [], [position_file])
    assert iceberg_catalog.load_table(f"{ns}.r3").metadata_location == before
    assert sorted(tuple(r) for r in spark.table(t).collect()) == [(1, 1), (2, 2)]


def test_overwrites_and_merged_manifests_keep_row_ids(spark, ns, iceberg_catalog, engines, duck):
    t = f"lake.{ns}.ow"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, p INT) PARTITIONED BY (p) TBLPROPERTIES "
              "('format-version'='3', 'commit.manifest.min-count-to-merge'='2')")
    for i in range(3):
        spark.sql(f"INSERT INTO {t} VALUES ({i}, {i % 2})")
    lin = _lineage(duck, _metadata(iceberg_catalog, t))
    assert any(f["status"] == 0 for f in lin["files"]), "the manifests were not merged"  # EXISTING entries
    # a merged manifest's list entry takes ids for its existing rows too (as Iceberg's Java writer):
    # the ids of the files it carries are written out and kept, the rest of its range is unused
    assert sorted(_row_ids(lin).values()) == [0, 1, 3]
    first = _row_ids(lin)

    spark.sql(f"INSERT INTO {t} VALUES (4, 0)")
    lin = _lineage(duck, _metadata(iceberg_catalog, t))
    assert {p: i for p, i in _row_ids(lin).items() if p in first} == first  # merged again, ids kept
    spark.sql(f"INSERT OVERWRITE {t} SELECT 10, 1")  # static: the whole table
    spark.sql(f"INSERT INTO {t} VALUES (5, 0)")
    spark.sql(f"INSERT INTO {t} VALUES (6, 1)")
    before = _row_ids(_lineage(duck, _metadata(iceberg_catalog, t)))
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        spark.sql(f"INSERT OVERWRITE {t} SELECT 20, 1")  # replaces p=1 only
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    meta = _metadata(iceberg_catalog, t)
    lin = _lineage(duck, meta)
    after = _row_ids(lin)
    live = [f for f in lin["files"] if f["status"] != 2]
    p0 = [f["file_path"] for f in live if f["partition"]["p"] == 0]
    assert len(p0) == 1 and after[p0[0]] == before[p0[0]]  # the row (5, 0) kept its id
    # every live file's ids are its own range, below next-row-id
    ranges = sorted((after[f["file_path"]], f["record_count"]) for f in live)
    assert all(a + n <= b for (a, n), (b, _) in zip(ranges, ranges[1:]))
    assert ranges[-1][0] + ranges[-1][1] <= meta["next-row-id"]
    engines.assert_same(t, expected=[(5, 0), (20, 1)])


# ---- deletion vectors written by another writer, read by lakerules ---------------------------------

_DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
_ROW_POSITION_FIELD = 2147483545


def _dv_blob(positions) -> bytes:
    """A deletion-vector-v1 blob built here from the spec (pyroaring's portable 32-bit bitmaps)."""
    from collections import defaultdict

    from pyroaring import BitMap

    by_key = defaultdict(list)
    for p in sorted(set(positions)):
        by_key[p >> 32].append(p & 0xFFFFFFFF)
    vector = len(by_key).to_bytes(8, "little") + b"".join(
        k.to_bytes(4, "little") + BitMap(v).serialize() for k, v in sorted(by_key.items()))
    body = _DV_MAGIC + vector
    return len(body).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")


def _puffin(blobs: list[tuple[bytes, str, int]]) -> tuple[bytes, list[dict]]:
    out = bytearray(b"PFA1")
    meta = []
    for blob, referenced, cardinality in blobs:
        meta.append({"type": "deletion-vector-v1", "fields": [_ROW_POSITION_FIELD], "snapshot-id": -1,
                     "sequence-number": -1, "offset": len(out), "length": len(blob),
                     "properties": {"referenced-data-file": referenced, "cardinality": str(cardinality)}})
        out += blob
    footer = json.dumps({"blobs": meta, "properties": {"created-by": "lakerules tests"}}).encode()
    out += b"PFA1" + footer + len(footer).to_bytes(4, "little") + bytes(4) + b"PFA1"
    return bytes(out), meta


def _commit_deletion_vectors(warehouse, ident: str, deletes: dict[str, list[int]]) -> str:
    """Another writer's DELETE on a v3 table: one Puffin file of DVs (data file path -> deleted
    positions), a v3 delete manifest, a v3 manifest list, a snapshot; returns the Puffin path.
    (Committed through lakerules' catalog, which writes v3 metadata files; pyiceberg's does not.)"""
    import uuid

    import lakerules
    from lakerules.iceberg.catalogs import build

    iceberg_catalog = build("lake", lakerules.embedded_catalog(warehouse))
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

    from lakerules.iceberg import pyiceberg_edge as edge, v3

    table = iceberg_catalog.load_table(ident)
    files = {t.file.file_path: t.file for t in table.scan().plan_files()}
    blobs = [(_dv_blob(p), path, len(set(p))) for path, p in deletes.items()]
    content, meta = _puffin(blobs)
    puffin_path = f"{table.location()}/data/{uuid.uuid4()}-dv.puffin"
    with table.io.new_output(puffin_path).create() as f:
        f.write(content)
    parent = table.current_snapshot()
    snapshot_id = table.metadata.new_snapshot_id()
    seq = table.metadata.next_sequence_number()
    out = table.io.new_output(f"{table.location()}/metadata/{uuid.uuid4()}-m0.avro")
    with edge.DeleteManifestWriterV3(spec=table.spec(), schema=table.schema(), output_file=out,
                                     snapshot_id=snapshot_id, avro_compression="deflate") as w:
        for (blob, path, cardinality), m in zip(blobs, meta):
            df = DataFile.from_args(
                _table_format_version=3, content=DataFileContent.POSITION_DELETES, file_path=puffin_path,
                file_format=FileFormat.PUFFIN, partition=files[path].partition, record_count=cardinality,
                file_size_in_bytes=len(content), referenced_data_file=path, content_offset=m["offset"],
                content_size_in_bytes=m["length"])
            df.spec_id = files[path].spec_id
            w.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=df))
    manifests = [w.to_manifest_file(), *parent.manifests(table.io)]
    list_path = f"{table.location()}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    first = table.metadata.next_row_id
    nxt = v3.write_manifest_list(table.io.new_output(list_path), snapshot_id=snapshot_id,
                                 parent_snapshot_id=parent.snapshot_id, sequence_number=seq, first_row_id=first,
                                 manifests=manifests, known=v3.manifest_first_row_ids(table.io, parent.manifest_list),
                                 compression="deflate")
    snapshot = Snapshot(snapshot_id=snapshot_id, parent_snapshot_id=parent.snapshot_id, manifest_list=list_path,
                        sequence_number=seq, summary=Summary(Operation.DELETE), schema_id=table.schema().schema_id,
                        first_row_id=first, added_rows=nxt - first)
    with table.transaction() as tx:
        edge.stage(tx, (AddSnapshotUpdate(snapshot=snapshot),
                        SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id,
                                             parent_snapshot_id=parent.snapshot_id)),
                   (AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id),))
    return puffin_path


def _file_rows(spark, t: str) -> dict[str, list]:
    """Each data file's rows in file order (Spark's own read of the Parquet files)."""
    from pyspark.sql import functions as F

    out = {}
    for path in spark.sql(f"SELECT file_path FROM {t}.data_files").collect():
        p = path[0]
        rows = spark.read.parquet(p).select("id").collect()
        out[p] = [r[0] for r in rows]
    return out


def test_deletion_vectors_of_another_writer_are_read(spark, ns, iceberg_catalog, engines, duck, warehouse):
    t = f"lake.{ns}.dv"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, p INT) PARTITIONED BY (p) TBLPROPERTIES ('format-version'='3')")
    spark.createDataFrame([(i, i % 2) for i in range(40)], "id BIGINT, p INT").coalesce(1).writeTo(t).append()
    files = _file_rows(spark, t)
    assert len(files) == 2
    (a, rows_a), (b, rows_b) = sorted(files.items())
    deletes = {a: [0, 3, 4, 19], b: [7]}
    puffin = _commit_deletion_vectors(warehouse, f"{ns}.dv", deletes)
    gone = {rows_a[i] for i in deletes[a]} | {rows_b[i] for i in deletes[b]}
    expected = [(i, i % 2) for i in range(40) if i not in gone]

    # pyiceberg reads our fixture's DVs (its own Puffin and bitmap reader): the fixture is sound
    assert sorted(engines.pyiceberg(t)) == sorted(expected)
    assert sorted(engines.lakerules(t)) == sorted(expected)
    assert spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0] == len(expected)
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {t} WHERE p = 0 AND id < 20").collect()) == \
        sorted(i for i, p in expected if p == 0 and i < 20)
    spark.conf.set("spark.lakerules.read.lateMaterialization", "on")  # its two-phase read applies them too
    try:
        assert sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {t} WHERE id > 30").collect()) == \
            sorted(r for r in expected if r[0] > 30)
    finally:
        spark.conf.unset("spark.lakerules.read.lateMaterialization")
    # the DV's manifest entry as written (DuckDB's Avro reader)
    meta = _metadata(iceberg_catalog, t)
    lin = _lineage(duck, meta)
    dvs = [f for f in lin["files"] if f["file_format"] == "PUFFIN"]
    assert sorted((f["referenced_data_file"], f["record_count"]) for f in dvs) == [(a, 4), (b, 1)]
    assert all(f["content"] == 1 and f["file_path"] == puffin and f["content_offset"] >= 4 for f in dvs)
    assert meta["next-row-id"] == 40  # a delete adds no rows

    # rows added after the DVs are not deleted by them (sequence numbers), and still read
    spark.sql(f"INSERT INTO {t} VALUES (100, 0)")
    assert sorted(engines.lakerules(t)) == sorted(expected + [(100, 0)]) == sorted(engines.pyiceberg(t))


def test_the_jvm_deletion_vector_codec_against_the_spec(spark, tmp_path):
    from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
    from pyiceberg.table.puffin import PuffinFile

    from lakerules.spark import deletion_vectors as DV

    positions = [0, 5, 6, 7, 100_000, 2**32 + 3, 2**33, 2**33 + 1]
    blob = DV.deletion_vector_blob(spark, positions[::-1] + [5])
    # the spec's framing, checked by hand: length (big-endian), magic, CRC-32 (big-endian) of magic + vector
    length = int.from_bytes(blob[:4], "big")
    assert length == len(blob) - 8 and blob[4:8] == _DV_MAGIC
    assert int.from_bytes(blob[-4:], "big") == zlib.crc32(blob[4:-4])
    assert int.from_bytes(blob[8:16], "little") == 3  # three 32-bit bitmaps: keys 0, 1, 2
    # its bitmaps, decoded by pyiceberg's reader
    content, meta = _puffin([(blob, "file:///x.parquet", len(positions))])
    dv = deletion_vectors_from_puffin_file(PuffinFile(content))[0]
    assert dv.referenced_data_file == "file:///x.parquet" and dv.to_vector().to_pylist() == positions
    # and the JVM decodes both its own blob and one built here, and refuses a damaged one
    path = tmp_path / "dv.puffin"
    ours, ours_meta = _puffin([(blob, "a", 8), (_dv_blob(positions), "b", 8)])
    path.write_bytes(ours)
    for m in ours_meta:
        assert DV.deletion_vector_positions(spark, f"file://{path}", m["offset"], m["length"]) == positions
    damaged = bytearray(ours)
    damaged[ours_meta[0]["offset"] + 12] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.raises(Exception, match="CRC-32 does not match"):
        DV.deletion_vector_positions(spark, f"file://{path}", ours_meta[0]["offset"], ours_meta[0]["length"])


# ---- deletion vectors written by DELETE -------------------------------------------------------------


def _dv_entries(duck, meta: dict) -> list[dict]:
    """The live DV entries of the current snapshot, as written (DuckDB's Avro reader)."""
    return [f for f in _lineage(duck, meta)["files"] if f["file_format"] == "PUFFIN" and f["status"] != 2]


def _check_puffin(dv: dict, positions_of_file: list[int] | None = None) -> list[int]:
    """The DV entry's Puffin bytes, read by hand and by pyiceberg's reader: the file's magic and
    footer, the blob at content_offset / content_size_in_bytes with its length, magic and CRC-32,
    the footer's blob properties; returns the positions."""
    from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
    from pyiceberg.table.puffin import PuffinFile

    content = Path(dv["file_path"].removeprefix("file://")).read_bytes()
    assert content[:4] == b"PFA1" and content[-4:] == b"PFA1" and len(content) == dv["file_size_in_bytes"]
    footer_size = int.from_bytes(content[-12:-8], "little")
    assert content[-(footer_size + 16):-(footer_size + 12)] == b"PFA1" and content[-8:-4] == bytes(4)
    footer = json.loads(content[-(footer_size + 12):-12])
    blob_meta = [b for b in footer["blobs"] if b["properties"]["referenced-data-file"] == dv["referenced_data_file"]]
    assert len(blob_meta) == 1
    m = blob_meta[0]
    assert (m["type"], m["snapshot-id"], m["sequence-number"]) == ("deletion-vector-v1", -1, -1)
    assert (m["offset"], m["length"]) == (dv["content_offset"], dv["content_size_in_bytes"])
    assert int(m["properties"]["cardinality"]) == dv["record_count"]
    blob = content[m["offset"]:m["offset"] + m["length"]]
    assert int.from_bytes(blob[:4], "big") == len(blob) - 8 and blob[4:8] == _DV_MAGIC
    assert int.from_bytes(blob[-4:], "big") == zlib.crc32(blob[4:-4])
    vectors = {v.referenced_data_file: v.to_vector().to_pylist() for v in deletion_vectors_from_puffin_file(PuffinFile(content))}
    positions = vectors[dv["referenced_data_file"]]
    assert len(positions) == dv["record_count"]
    return positions


# spark.lakerules.write.positionDeleteDriverRows: the positions come to the driver, which writes
# the DVs from them (no job); or they are only counted, and a job reads the matched rows again
DV_WRITERS = {"driver": "1000", "job": "0"}


@pytest.fixture
def dv_writer(request, spark, monkeypatch):
    """Runs the test with one way of writing DVs, the other made to fail (so each is shown taken)."""
    from lakerules.spark import deletion_vectors as jdv

    def unexpected(*args, **kwargs):
        raise AssertionError(f"DVs not written the {request.param} way")

    monkeypatch.setattr(jdv, "write_deletion_vectors" if request.param == "driver" else
                        "write_collected_deletion_vectors", unexpected)
    with settings(spark, {"spark.lakerules.write.positionDeleteDriverRows": DV_WRITERS[request.param]}):
        yield request.param


@pytest.mark.parametrize("dv_writer", list(DV_WRITERS), indirect=True)
def test_delete_writes_one_deletion_vector_per_file(spark, ns, iceberg_catalog, engines, duck, dv_writer):
    t = f"lake.{ns}.del_{dv_writer}"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, p INT) PARTITIONED BY (p) TBLPROPERTIES ('format-version'='3')")
    spark.createDataFrame([(i, i % 2) for i in range(30)], "id BIGINT, p INT").coalesce(1).writeTo(t).append()
    files = _file_rows(spark, t)
    rows = {i: (i, i % 2) for i in range(30)}

    def check(gone: set):
        expected = [r for i, r in rows.items() if i not in gone]
        assert sorted(engines.lakerules(t)) == sorted(expected)
        assert sorted(engines.pyiceberg(t)) == sorted(expected)
        assert sorted(engines.duckdb(t)) == sorted(expected)
        meta = _metadata(iceberg_catalog, t)
        dvs = _dv_entries(duck, meta)
        assert len({d["referenced_data_file"] for d in dvs}) == len(dvs), "two DVs for one data file"
        for d in dvs:
            assert d["content"] == 1 and d["file_format"] == "PUFFIN"
            positions = _check_puffin(d)
            assert sorted(files[d["referenced_data_file"]][i] for i in positions) == \
                sorted(i for i in files[d["referenced_data_file"]] if i in gone)
        # a DELETE adds no row ids; one that drops a file whole writes its manifest again, whose
        # list entry takes a new range for the kept files' rows (their own ids are written out)
        assert meta["next-row-id"] == 30 or gone >= {i for i in range(30) if i % 2}
        return dvs

    spark.sql(f"DELETE FROM {t} WHERE id IN (2, 3, 7)")
    dvs = check({2, 3, 7})
    assert len(dvs) == 2 and len({d["file_path"] for d in dvs}) == 1  # one Puffin file per statement
    first_puffin = dvs[0]["file_path"]

    spark.sql(f"DELETE FROM {t} WHERE id IN (4, 9)")  # p=0 and p=1 again: both DVs merged and replaced
    dvs = check({2, 3, 7, 4, 9})
    assert len(dvs) == 2 and all(d["file_path"] != first_puffin for d in dvs)

    spark.sql(f"DELETE FROM {t} WHERE id = 10")  # p=0 only: p=1's DV shares the old Puffin file, kept
    dvs = check({2, 3, 7, 4, 9, 10})
    assert len(dvs) == 2 and len({d["file_path"] for d in dvs}) == 2
    assert spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0] == 24

    ids = _row_ids(_lineage(duck, _metadata(iceberg_catalog, t)))
    spark.sql(f"DELETE FROM {t} WHERE p = 1")  # a whole file: dropped, its DV with it
    dvs = check({i for i in range(30) if i % 2} | {2, 4, 10})
    kept = [p for p in files if files[p][0] % 2 == 0]
    assert [d["referenced_data_file"] for d in dvs] == kept
    assert _row_ids(_lineage(duck, _metadata(iceberg_catalog, t)))[kept[0]] == ids[kept[0]]  # its row ids kept
    spark.sql(f"INSERT INTO {t} VALUES (100, 1)")
    rows[100] = (100, 1)
    check({i for i in range(30) if i % 2} | {2, 4, 10})
    spark.sql(f"DELETE FROM {t}")
    assert engines.lakerules(t) == [] == engines.pyiceberg(t)


def test_upgraded_position_deletes_are_merged_into_the_new_deletion_vector(spark, ns, iceberg_catalog, engines, duck):
    t = f"lake.{ns}.up2"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='2')")
    spark.createDataFrame([(i,) for i in range(6)], "id BIGINT").coalesce(1).writeTo(t).append()
    spark.sql(f"INSERT INTO {t} VALUES (20)")
    spark.sql(f"DELETE FROM {t} WHERE id IN (1, 4)")  # a v2 position delete file
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='3')")
    engines.assert_same(t, expected=[(0,), (2,), (3,), (5,), (20,)])
    (path, rows), = [(p, r) for p, r in _file_rows(spark, t).items() if len(r) == 6]

    spark.sql(f"DELETE FROM {t} WHERE id = 2")
    dvs = _dv_entries(duck, _metadata(iceberg_catalog, t))
    assert [d["referenced_data_file"] for d in dvs] == [path]
    assert sorted(rows[i] for i in _check_puffin(dvs[0])) == [1, 2, 4]  # the v2 deletes merged in
    expected = [(0,), (3,), (5,), (20,)]
    assert sorted(engines.lakerules(t)) == sorted(expected) == sorted(engines.pyiceberg(t))
    # the position delete file stays (readers skip it where a DV is); a later DELETE merges the DV only
    assert any(f["file_format"] == "PARQUET" and f["content"] == 1 for f in _lineage(duck, _metadata(iceberg_catalog, t))["files"])
    spark.sql(f"DELETE FROM {t} WHERE id IN (3, 20)")
    expected = [(0,), (5,)]
    assert sorted(engines.lakerules(t)) == sorted(expected) == sorted(engines.pyiceberg(t)) == sorted(engines.duckdb(t))
    dvs = _dv_entries(duck, _metadata(iceberg_catalog, t))  # (20)'s one-row file was dropped whole
    assert [d["referenced_data_file"] for d in dvs] == [path]
    assert sorted(rows[i] for i in _check_puffin(dvs[0])) == [1, 2, 3, 4]


def test_concurrent_deletion_vectors_for_one_file_conflict(spark, ns, iceberg_catalog, engines, warehouse, duck):
    from lakerules.write import commit

    t = f"lake.{ns}.cc"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='3')")
    spark.createDataFrame([(i,) for i in range(10)], "id BIGINT").coalesce(1).writeTo(t).append()
    (path, rows), = _file_rows(spark, t).items()

    def another_writer_deletes_meanwhile(table):
        commit.before_commit = None
        _commit_deletion_vectors(warehouse, f"{ns}.cc", {path: [0]})

    commit.before_commit = another_writer_deletes_meanwhile
    try:
        refused(spark, f"DELETE FROM {t} WHERE id = {rows[5]}", "conflict", t, "nothing was committed")
    finally:
        commit.before_commit = None
    expected = sorted((i,) for i in rows[1:])
    assert sorted(engines.lakerules(t)) == expected == sorted(engines.pyiceberg(t))
    assert len(_dv_entries(duck, _metadata(iceberg_catalog, t))) == 1
    location = Path(iceberg_catalog.load_table(f"{ns}.cc").location().removeprefix("file://"))
    assert len(list(location.rglob("*.puffin"))) == 1  # the failed statement's Puffin file was deleted
    spark.sql(f"DELETE FROM {t} WHERE id = {rows[5]}")  # run again: merged into the other writer's DV
    assert sorted(engines.lakerules(t)) == [r for r in expected if r != (rows[5],)] == sorted(engines.pyiceberg(t))
    assert len(_dv_entries(duck, _metadata(iceberg_catalog, t))) == 1


def test_an_append_retried_over_a_concurrent_one_gets_fresh_row_ids(spark, ns, iceberg_catalog, engines, duck):
    from lakerules.write import commit

    t = f"lake.{ns}.race"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} VALUES (1), (2)")

    def another_append_meanwhile(table):
        commit.before_commit = None
        spark.sql(f"INSERT INTO {t} VALUES (10), (11), (12)")

    commit.before_commit = another_append_meanwhile
    try:
        spark.sql(f"INSERT INTO {t} VALUES (3)")  # loses the race, retried on top of the other
    finally:
        commit.before_commit = None
    meta = _metadata(iceberg_catalog, t)
    ranges = [(s["first-row-id"], s["added-rows"]) for s in meta["snapshots"]]
    assert ranges == [(0, 2), (2, 3), (5, 1)] and meta["next-row-id"] == 6
    assert _contiguous(_lineage(duck, meta), 6)
    engines.assert_same(t, expected=[(1,), (2,), (3,), (10,), (11,), (12,)])


def test_create_or_replace_upgrades_and_keeps_row_lineage(spark, ns, iceberg_catalog, engines, duck):
    t = f"lake.{ns}.rep"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {t} VALUES (1), (2)")
    spark.sql(f"CREATE OR REPLACE TABLE {t} TBLPROPERTIES ('format-version'='3') AS SELECT id FROM range(3)")
    meta = _metadata(iceberg_catalog, t)
    assert meta["format-version"] == 3
    s = meta["snapshots"][-1]
    assert (s["first-row-id"], s["added-rows"], meta["next-row-id"]) == (0, 3, 3)
    engines.assert_same(t, expected=[(0,), (1,), (2,)])
    spark.sql(f"CREATE OR REPLACE TABLE {t} AS SELECT id FROM range(5, 7)")  # a v3 table replaced: ids go on
    meta = _metadata(iceberg_catalog, t)
    s = meta["snapshots"][-1]
    assert (meta["format-version"], s["first-row-id"], s["added-rows"], meta["next-row-id"]) == (3, 3, 2, 5)
    assert sorted(_row_ids(_lineage(duck, meta)).values())[0] == 3  # its files' ids start at 3, not 0
    engines.assert_same(t, expected=[(5,), (6,)])


# ---- row lineage read: _row_id and _last_updated_sequence_number ---------------------------------


def _lineage_rows(spark, t: str, where: str = "") -> dict[int, tuple[int, int]]:
    """id -> (_row_id, _last_updated_sequence_number) as lakerules reads them."""
    rows = spark.sql(f"SELECT _row_id, _last_updated_sequence_number, * FROM {t} {where}").collect()
    return {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in rows}


def test_row_lineage_metadata_columns(spark, ns, iceberg_catalog, duck):
    t = f"lake.{ns}.lin"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) TBLPROPERTIES ('format-version'='3')")
    spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id BIGINT, s STRING").coalesce(1).writeTo(t).append()
    spark.createDataFrame([(4, "d"), (5, "e")], "id BIGINT, s STRING").coalesce(1).writeTo(t).append()
    # the spec's inheritance: the file's first_row_id (from the manifest list) + the row's position,
    # the file's data sequence number
    expected = {1: (0, 1), 2: (1, 1), 3: (2, 1), 4: (3, 2), 5: (4, 2)}
    assert _lineage_rows(spark, t) == expected
    # each file's first_row_id and data sequence number come with its rows from the reader
    # (constant _metadata fields): the read joins its rows with nothing
    plan = spark.sql(f"SELECT _row_id, _last_updated_sequence_number, id FROM {t}")._jdf.queryExecution()
    assert "Join" not in plan.executedPlan().toString(), plan.executedPlan().toString()
    ids = _row_ids(_lineage(duck, _metadata(iceberg_catalog, t)))
    files = _file_rows(spark, t)
    assert {i: ids[path] + pos for path, rows in files.items() for pos, i in enumerate(rows)} == \
        {i: v[0] for i, v in expected.items()}
    assert spark.sql(f"SELECT * FROM {t}").columns == ["id", "s"]  # not part of SELECT *

    spark.sql(f"DELETE FROM {t} WHERE id = 2")  # a DV: the others keep their ids
    del expected[2]
    # the file without a DV is read in the same scan as the one with it (not a union of two scans)
    plan = spark.sql(f"SELECT * FROM {t}")._jdf.queryExecution().executedPlan().toString()
    assert "Union" not in plan and plan.count("FileScan") == 1, plan
    assert _lineage_rows(spark, t) == expected
    assert _lineage_rows(spark, t, "WHERE _row_id >= 2 AND id < 5") == {3: (2, 1), 4: (3, 2)}
    assert spark.sql(f"SELECT count(*), max(_row_id), min(_last_updated_sequence_number) FROM {t} "
                     "WHERE _row_id > 0").collect()[0] == (3, 4, 1)
    spark.conf.set("spark.lakerules.read.lateMaterialization", "on")
    try:
        assert _lineage_rows(spark, t, "WHERE s = 'e'") == {5: (4, 2)}
    finally:
        spark.conf.unset("spark.lakerules.read.lateMaterialization")
    # an empty scan has the columns too
    assert spark.sql(f"SELECT _row_id, id FROM {t} WHERE id > 100").collect() == []
    # row-level statements may name them (they prune no file)
    assert spark.sql(f"UPDATE {t} SET s = 'w' WHERE _row_id = 4").collect()[0][0] == 1
    assert spark.sql(f"DELETE FROM {t} WHERE _row_id = 0 OR _last_updated_sequence_number = 4").collect()[0][0] == 2
    assert _lineage_rows(spark, t) == {3: (2, 1), 4: (3, 2)}

    # a data column of that name hides the metadata column; a v2 table has none
    spark.sql(f"CREATE TABLE {t}_own (id BIGINT, _row_id BIGINT) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t}_own VALUES (1, 100)")
    assert [tuple(r) for r in spark.sql(f"SELECT _row_id, _last_updated_sequence_number FROM {t}_own").collect()] == \
        [(100, 1)]
    spark.sql(f"CREATE TABLE {t}_v2 (id BIGINT) TBLPROPERTIES ('format-version'='2')")
    with pytest.raises(Exception, match="_row_id"):
        spark.sql(f"SELECT _row_id FROM {t}_v2").collect()


# ---- UPDATE and MERGE: deletion vectors, rows written again with their lineage -------------------

_ROW_ID_FIELD, _LAST_UPDATED_FIELD = b"2147483540", b"2147483539"


def _written_lineage(spark, t: str) -> dict[int, tuple]:
    """id -> (_row_id, _last_updated_sequence_number) as stored in the data files that hold the
    lineage columns (read by pyarrow, the columns found by their field ids), live rows or not."""
    out = {}
    for (path,) in spark.sql(f"SELECT file_path FROM {t}.data_files").collect():
        table = pq.ParquetFile(path.removeprefix("file://")).read()  # the file alone (no hive partition column)
        ids = {f.metadata[b"PARQUET:field_id"]: f.name for f in table.schema}
        if _ROW_ID_FIELD not in ids:
            continue
        assert _LAST_UPDATED_FIELD in ids
        for r in table.to_pylist():
            out.setdefault(r["id"], []).append((r[ids[_ROW_ID_FIELD]], r[ids[_LAST_UPDATED_FIELD]]))
    return out


def _one_dv_per_file(duck, iceberg_catalog, t: str) -> list[dict]:
    meta = _metadata(iceberg_catalog, t)
    dvs = _dv_entries(duck, meta)
    assert len({d["referenced_data_file"] for d in dvs}) == len(dvs), "two DVs for one data file"
    # the snapshot summary's totals count the live entries (each DV of a Puffin file is one); a
    # commit of the tests' other writer leaves them out, and so do the commits after it
    files = [f for f in _lineage(duck, meta)["files"] if f["status"] != 2]
    summary = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])["summary"]
    if "total-delete-files" in summary:
        assert int(summary["total-delete-files"]) == len([f for f in files if f["content"] != 0]), summary
        assert int(summary["total-data-files"]) == len([f for f in files if f["content"] == 0]), summary
    for d in dvs:
        _check_puffin(d)
    return dvs


@pytest.mark.parametrize("dv_writer", list(DV_WRITERS), indirect=True)
def test_update_writes_deletion_vectors_and_keeps_row_ids(spark, ns, iceberg_catalog, engines, duck, dv_writer):
    t = f"lake.{ns}.upd_{dv_writer}"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, p INT, s STRING) PARTITIONED BY (p) TBLPROPERTIES ('format-version'='3')")
    spark.createDataFrame([(i, i % 2, "a") for i in range(10)], "id BIGINT, p INT, s STRING").coalesce(1).writeTo(t).append()
    rows = {i: (i, i % 2, "a") for i in range(10)}
    ids = {i: v[0] for i, v in _lineage_rows(spark, t).items()}
    assert sorted(ids.values()) == list(range(10))

    def check(changed: dict):
        """``changed``: id -> the sequence number its row was last updated at."""
        seq = _metadata(iceberg_catalog, t)["last-sequence-number"]
        assert engines.assert_same(t) == sorted(rows.values())  # pyiceberg and DuckDB apply the DVs
        assert _lineage_rows(spark, t) == {i: (ids[i], changed.get(i, 1)) for i in rows}
        assert max(changed.values(), default=1) == seq
        return _one_dv_per_file(duck, iceberg_catalog, t)

    assert spark.sql(f"UPDATE {t} SET s = 'b' WHERE id IN (2, 3)").collect()[0][0] == 2
    rows.update({2: (2, 0, "b"), 3: (3, 1, "b")})
    dvs = check({2: 2, 3: 2})
    assert len(dvs) == 2 and len({d["file_path"] for d in dvs}) == 1  # one Puffin file per statement
    # the new data file holds the rows' ids and a null _last_updated_sequence_number (inherited: the commit's)
    assert _written_lineage(spark, t) == {2: [(ids[2], None)], 3: [(ids[3], None)]}

    for _ in range(2):  # the same row again, then a row of the same file: one DV per data file
        spark.sql(f"UPDATE {t} SET s = concat(s, 'c') WHERE id = 2")
    rows[2] = (2, 0, "bcc")
    spark.sql(f"UPDATE {t} SET s = 'd' WHERE id IN (4, 5)")
    rows.update({4: (4, 0, "d"), 5: (5, 1, "d")})
    check({2: 4, 3: 2, 4: 5, 5: 5})
    assert _written_lineage(spark, t)[2] == [(ids[2], None)]  # its earlier one-row files were dropped whole

    # no WHERE: every row written again with its id; a file with no deletes is dropped whole
    assert spark.sql(f"UPDATE {t} SET s = 'z'").collect()[0][0] == 10
    rows = {i: (i, i % 2, "z") for i in range(10)}
    dvs = check({i: 6 for i in range(10)})
    assert _written_lineage(spark, t) == {i: [(ids[i], None)] for i in range(10)}
    assert len(dvs) == 2  # the first file (its DV merged again), and one updated file holding a DV already


def test_merge_writes_deletion_vectors_and_keeps_row_ids(spark, ns, iceberg_catalog, engines, duck):
    t, src = f"lake.{ns}.mrg", f"lake.{ns}.msrc"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) TBLPROPERTIES ('format-version'='3')")
    spark.createDataFrame([(i, "a") for i in range(6)], "id BIGINT, s STRING").coalesce(1).writeTo(t).append()
    spark.sql(f"CREATE TABLE {src} (id BIGINT, s STRING)")
    spark.sql(f"INSERT INTO {src} VALUES (1, 'u'), (2, 'del'), (7, 'new')")
    ids = {i: v[0] for i, v in _lineage_rows(spark, t).items()}
    merge = (f"MERGE INTO {t} x USING {src} y ON x.id = y.id WHEN MATCHED AND y.s = 'del' THEN DELETE "
             "WHEN MATCHED THEN UPDATE SET s = y.s WHEN NOT MATCHED THEN INSERT *")
    assert tuple(spark.sql(merge).collect()[0]) == (3, 1, 1, 1)  # the broadcast source's path
    expected = {0: "a", 1: "u", 3: "a", 4: "a", 5: "a", 7: "new"}
    assert engines.assert_same(t) == sorted(expected.items())
    lin = _lineage_rows(spark, t)
    assert {i: lin[i] for i in ids if i in lin} == {i: (ids[i], 2 if i == 1 else 1) for i in expected if i in ids}
    # the new file: the updated row with its id, the inserted one with none (a fresh id, past every old one)
    assert _written_lineage(spark, t) == {1: [(ids[1], None)], 7: [(None, None)]}
    assert lin[7] == (7, 2)  # the new file's first_row_id (6) + its position (1)
    assert len(_one_dv_per_file(duck, iceberg_catalog, t)) == 1

    # the outer join's path (a source too large to broadcast), NOT MATCHED BY SOURCE, the same file again
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        spark.sql(f"INSERT INTO {src} VALUES (3, 'v')")
        spark.sql(f"MERGE INTO {t} x USING {src} y ON x.id = y.id WHEN MATCHED THEN UPDATE SET s = concat(x.s, y.s) "
                  "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE AND x.id = 0 THEN UPDATE SET s = 'nbs'")
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    expected.update({0: "nbs", 1: "uu", 2: "del", 3: "av", 7: "newnew"})
    assert engines.assert_same(t) == sorted(expected.items())
    lin = _lineage_rows(spark, t)
    assert all(lin[i] == (ids[i], 3) for i in (0, 1, 3)) and lin[4] == (ids[4], 1) and lin[7] == (7, 3)
    assert lin[2][1] == 3 and len({v[0] for v in lin.values()}) == len(lin)  # a re-inserted row: a new id
    # the first file's DV merged with the new positions; the second file, every row updated, dropped whole
    assert len(_one_dv_per_file(duck, iceberg_catalog, t)) == 1

    # Spark's cardinality rule still holds; the table is unchanged
    before = iceberg_catalog.load_table(f"{ns}.mrg").metadata_location
    spark.sql(f"INSERT INTO {src} VALUES (3, 'twice')")
    refused(spark, f"MERGE INTO {t} x USING {src} y ON x.id = y.id WHEN MATCHED THEN UPDATE SET s = y.s",
            "MERGE_CARDINALITY_VIOLATION")
    assert iceberg_catalog.load_table(f"{ns}.mrg").metadata_location == before


@pytest.mark.parametrize("dv_writer", list(DV_WRITERS), indirect=True)
def test_a_merge_of_distinct_keys_writes_its_deletion_vectors_either_way(spark, ns, iceberg_catalog, engines, duck,
                                                                         dv_writer):
    """A source of distinct keys needs no cardinality check: the matched positions come to the
    driver, which writes the DVs from them; past positionDeleteDriverRows an aggregate counts the
    rows and a job reads them again. The same table either way."""
    t, src = f"lake.{ns}.mk_{dv_writer}", f"lake.{ns}.mk_src_{dv_writer}"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) TBLPROPERTIES ('format-version'='3')")
    for part in (range(0, 5), range(5, 10)):  # two data files
        spark.createDataFrame([(i, "a") for i in part], "id BIGINT, s STRING").coalesce(1).writeTo(t).append()
    spark.sql(f"CREATE TABLE {src} (id BIGINT, s STRING)")
    ids = {i: v[0] for i, v in _lineage_rows(spark, t).items()}
    merge = (f"MERGE INTO {t} x USING {src} y ON x.id = y.id WHEN MATCHED AND y.s = 'del' THEN DELETE "
             "WHEN MATCHED THEN UPDATE SET s = y.s WHEN NOT MATCHED THEN INSERT *")
    expected = {i: "a" for i in range(10)}
    # the second batch: id 1 again, now in the file the first one wrote (a third DV), 3 in the first file
    for seq, dvs, batch in ((3, 2, [(1, "u"), (2, "del"), (6, "u"), (12, "new")]),
                            (4, 3, [(1, "v"), (3, "del"), (13, "new")])):
        spark.sql(f"DELETE FROM {src}")
        spark.createDataFrame(batch, "id BIGINT, s STRING").writeTo(src).append()
        spark.sql(merge)
        for i, v in batch:
            if v == "del":
                expected.pop(i)
            else:
                expected[i] = v
        engines.assert_same(t, expected=list(expected.items()))  # pyiceberg and DuckDB apply the DVs
        lin = _lineage_rows(spark, t)
        assert all(lin[i][0] == ids[i] for i in expected if i in ids)  # updated rows keep their ids
        assert all(lin[i][1] == seq for i, v in batch if v not in ("del",))
        assert len(_one_dv_per_file(duck, iceberg_catalog, t)) == dvs  # one DV per data file


def test_delete_by_key_writes_deletion_vectors(spark, ns, iceberg_catalog, engines, duck):
    import lakerules

    t = f"lake.{ns}.dbk"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) TBLPROPERTIES ('format-version'='3')")
    data = [(i, None if i == 5 else f"s{i % 3}") for i in range(8)]
    spark.createDataFrame(data, "id BIGINT, s STRING").coalesce(1).writeTo(t).append()
    spark.createDataFrame([(20, "s0"), (21, "x")], "id BIGINT, s STRING").coalesce(1).writeTo(t).append()
    rows = dict(data + [(20, "s0"), (21, "x")])
    ids = {i: v[0] for i, v in _lineage_rows(spark, t).items()}

    def check():
        engines.assert_same(t, expected=list(rows.items()))  # pyiceberg and DuckDB apply the DVs
        assert {i: v[0] for i, v in _lineage_rows(spark, t).items()} == {i: ids[i] for i in rows}
        return _one_dv_per_file(duck, iceberg_catalog, t)

    keys = spark.createDataFrame([(1,), (2,), (2,), (99,)], "id BIGINT")
    assert lakerules.delete_by_key(spark, t, keys, on=["id"]) == 3  # distinct keys
    del rows[1], rows[2]
    assert len(check()) == 1
    # a NULL key deletes the NULL rows (as an equality delete would); the file's DV is merged
    assert lakerules.delete_by_key(spark, t, spark.createDataFrame([(None,), ("s0",)], "s STRING"), on=["s"]) == 2
    for i in [i for i, v in rows.items() if v in (None, "s0")]:
        del rows[i]
    dvs = check()
    assert len(dvs) == 2 and {d["record_count"] for d in dvs} == {1, 6}  # ids 0, 1, 2, 3, 5, 6 of the first file
    before = _metadata(iceberg_catalog, t)["current-snapshot-id"]
    assert lakerules.delete_by_key(spark, t, spark.createDataFrame([(98,)], "id BIGINT"), on=["id"]) == 1
    assert _metadata(iceberg_catalog, t)["current-snapshot-id"] == before  # nothing matched: no commit


# ---- compaction: rows keep their lineage, deletion vectors go with their files ------------------


def test_optimize_keeps_row_lineage_and_drops_deletion_vectors(spark, ns, iceberg_catalog, engines, duck, warehouse,
                                                               monkeypatch):
    from lakerules.optimize import rewrite as optimize

    t = f"lake.{ns}.opt"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, p INT, s STRING) PARTITIONED BY (p) TBLPROPERTIES ('format-version'='3')")
    for first in (0, 10, 20):  # three appends: three files a partition, sequence numbers 1-3
        spark.createDataFrame([(i, i % 2, f"s{i % 7}") for i in range(first, first + 10)],
                              "id BIGINT, p INT, s STRING").coalesce(1).writeTo(t).append()
    spark.sql(f"UPDATE {t} SET s = 'u' WHERE id IN (3, 14)")  # rows written again with their ids (seq 4)
    spark.sql(f"DELETE FROM {t} WHERE id IN (5, 6, 25)")  # deletion vectors (seq 5)
    lineage = _lineage_rows(spark, t)
    assert len(lineage) == 27 and lineage[3][1] == lineage[14][1] == 4 and lineage[20] == (20, 3)
    rows = engines.assert_same(t)
    assert len(_one_dv_per_file(duck, iceberg_catalog, t)) == 4  # the DELETE's and the UPDATE's
    meta = _metadata(iceberg_catalog, t)
    next_row_id = meta["next-row-id"]

    def compacted(sql: str, reads_again: bool = True) -> dict:
        spark.sql(sql).collect()
        assert engines.assert_same(t) == rows  # pyiceberg and DuckDB read the same rows
        assert _lineage_rows(spark, t) == lineage  # every row kept its id and last-updated sequence number
        assert _dv_entries(duck, _metadata(iceberg_catalog, t)) == []  # the DVs went with their data files
        # the new files store both columns, never null: they are the rows' lineage as read before
        written = _written_lineage(spark, t)
        assert {i: v for i, v in written.items() if len(v) == 1 and v[0][0] is not None} == \
            {i: [v] for i, v in lineage.items()}
        return _metadata(iceberg_catalog, t)

    meta = compacted(f"OPTIMIZE {t}")
    assert len(spark.sql(f"SELECT * FROM {t}.data_files").collect()) == 2  # one file a partition
    current = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])
    # the replace's new files took fresh first_row_ids (the spec's added-rows), their rows read their stored ids
    assert (current["first-row-id"], current["added-rows"], meta["next-row-id"]) == (next_row_id, 27, next_row_id + 27)
    assert current["summary"]["operation"] == "replace"

    # a row updated after compaction keeps the id stored in the compacted file
    spark.sql(f"UPDATE {t} SET s = 'v' WHERE id = 20")
    seq = _metadata(iceberg_catalog, t)["last-sequence-number"]
    lineage[20] = (20, seq)
    rows = engines.assert_same(t)
    assert _lineage_rows(spark, t) == lineage
    spark.sql(f"DELETE FROM {t} WHERE id = 7")
    del lineage[7]
    rows = engines.assert_same(t)
    compacted(f"OPTIMIZE {t} ZORDER BY (id, s)")
    spark.sql(f"DELETE FROM {t} WHERE id = 8")
    del lineage[8]
    rows = engines.assert_same(t)
    compacted(f"CALL lake.system.rewrite_data_files(table => '{ns}.opt', strategy => 'sort', "
              "sort_order => 'id DESC', options => map('rewrite-all', 'true'))")

    # a deletion vector committed meanwhile for a file being rewritten: the rewrite conflicts, nothing lands
    spark.sql(f"DELETE FROM {t} WHERE id = 9")
    del lineage[9]
    rows = engines.assert_same(t)
    (path, ids), = [(p, r) for p, r in _file_rows(spark, t).items() if 10 in r]
    before = iceberg_catalog.load_table(f"{ns}.opt").metadata_location

    def another_writer_deletes_meanwhile(table):
        monkeypatch.setattr(optimize, "_before_commit", None)
        _commit_deletion_vectors(warehouse, f"{ns}.opt", {path: [ids.index(10)]})

    every_file = f"CALL lake.system.rewrite_data_files(table => '{ns}.opt', options => map('rewrite-all', 'true'))"
    monkeypatch.setattr(optimize, "_before_commit", another_writer_deletes_meanwhile)
    refused(spark, every_file, "conflicts with a commit", "deleted rows of data file", "nothing was committed")
    assert _metadata(iceberg_catalog, t)["metadata-log"][-1]["metadata-file"] == before
    del lineage[10]
    rows = engines.assert_same(t)
    assert _lineage_rows(spark, t) == lineage
    compacted(every_file)  # run again: it takes the other writer's DV in

    # a table with a column named like a lineage column cannot be compacted with its lineage
    spark.sql(f"CREATE TABLE {t}_own (id BIGINT, _row_id BIGINT) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t}_own VALUES (1, 100)")
    spark.sql(f"INSERT INTO {t}_own VALUES (2, 200)")
    refused(spark, f"OPTIMIZE {t}_own", "_row_id", "rename the column", "Nothing was changed")
    # a v2 table may have such a column: it carries no lineage
    spark.sql(f"CREATE TABLE {t}_v2 (id BIGINT, _row_id BIGINT) TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {t}_v2 VALUES (1, 100)")
    spark.sql(f"INSERT INTO {t}_v2 VALUES (2, 200)")
    spark.sql(f"OPTIMIZE {t}_v2").collect()
    assert sorted(tuple(r) for r in spark.table(f"{t}_v2").collect()) == [(1, 100), (2, 200)]


def test_rewrite_position_delete_files_turns_them_into_deletion_vectors(spark, ns, iceberg_catalog, engines, duck,
                                                                        warehouse, monkeypatch):
    from lakerules.procedures import rewrite_position_delete_files as procedure

    t, ident = f"lake.{ns}.pd3", f"{ns}.pd3"
    call = f"CALL lake.system.rewrite_position_delete_files(table => '{ident}')"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, p INT) PARTITIONED BY (p) TBLPROPERTIES ('format-version'='2')")
    for first in (0, 10, 20):
        spark.createDataFrame([(i, int(i >= 10)) for i in range(first, first + 6)],
                              "id BIGINT, p INT").coalesce(1).writeTo(t).append()
    spark.sql(f"DELETE FROM {t} WHERE id IN (1, 11, 12, 24)")  # v2 position delete files, one a partition
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"DELETE FROM {t} WHERE id = 2")  # p=0's file gets a DV, merging its v2 deletes
    files = _file_rows(spark, t)
    path_of = {i: p for p, ids in files.items() for i in ids}
    rows = engines.assert_same(t)
    assert len(rows) == 13
    (dv_before,) = _dv_entries(duck, _metadata(iceberg_catalog, t))
    refused(spark, call.replace(")", ", options => map('min-input-files', '2'))"), "min-input-files",
            "format-version 3", "nothing was changed")

    # another writer's DV for one of the files, committed meanwhile: a conflict, nothing lands
    before = iceberg_catalog.load_table(ident).metadata_location
    real = procedure.rewrites.rewrite_deletes

    def another_writer_first(table, *args, **kwargs):
        monkeypatch.setattr(procedure.rewrites, "rewrite_deletes", real)
        # as a v3 writer does, its DV merges the file's v2 position deletes (11, 12)
        _commit_deletion_vectors(warehouse, ident, {path_of[13]: [files[path_of[13]].index(i) for i in (11, 12, 13)]})
        return real(table, *args, **kwargs)

    monkeypatch.setattr(procedure.rewrites, "rewrite_deletes", another_writer_first)
    refused(spark, call, "conflicts with a commit", "deletion vector for data file", "nothing was committed")
    assert _metadata(iceberg_catalog, t)["metadata-log"][-1]["metadata-file"] == before
    location = Path(iceberg_catalog.load_table(ident).location().removeprefix("file://"))
    assert len(list(location.rglob("*.puffin"))) == 2  # the DELETE's and the other writer's: ours was deleted
    rows = [r for r in rows if r[0] != 13]
    assert engines.assert_same(t) == rows

    # run again: the v2 files go (p=0's and now p=1's apply only to files with a DV, but 20's), one new DV
    def position_files() -> list:
        entries = _lineage(duck, _metadata(iceberg_catalog, t))["files"]
        return [f for f in entries if f["content"] == 1 and f["file_format"] != "PUFFIN" and f["status"] != 2]

    live = len(position_files())
    assert live >= 2
    assert tuple(spark.sql(call).collect()[0])[:2] == (live, 1)  # all of them out, 1 DV in
    assert position_files() == []
    dvs = _one_dv_per_file(duck, iceberg_catalog, t)
    by_file = {d["referenced_data_file"]: sorted(files[d["referenced_data_file"]][i] for i in _check_puffin(d))
               for d in dvs}
    assert by_file == {path_of[0]: [1, 2], path_of[10]: [11, 12, 13], path_of[20]: [24]}
    assert [d for d in dvs if d["referenced_data_file"] == path_of[0]][0]["file_path"] == dv_before["file_path"]
    assert engines.assert_same(t) == rows
    assert tuple(spark.sql(call).collect()[0]) == (0, 0, 0, 0)  # nothing left to convert


def test_copy_on_write_keeps_row_lineage(spark, ns, iceberg_catalog, engines, duck):
    t, src = f"lake.{ns}.cow", f"lake.{ns}.cowsrc"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) TBLPROPERTIES ('format-version'='3', "
              "'write.delete.mode'='copy-on-write', 'write.update.mode'='copy-on-write', "
              "'write.merge.mode'='copy-on-write')")
    for first in (0, 10):
        spark.createDataFrame([(i, "a") for i in range(first, first + 5)], "id BIGINT, s STRING").coalesce(1) \
            .writeTo(t).append()
    lineage = _lineage_rows(spark, t)
    assert lineage == {i: (i if i < 5 else i - 5, 1 if i < 5 else 2) for i in (*range(5), *range(10, 15))}

    def check(changed: dict):
        """``changed``: id -> the sequence number its row was last updated at (the others keep theirs)."""
        lineage.update(changed)
        assert _lineage_rows(spark, t) == lineage
        rows = engines.assert_same(t)
        assert _dv_entries(duck, _metadata(iceberg_catalog, t)) == []  # copy-on-write: no delete file
        # every live row is in a file as written: its stored lineage, or (first append) none
        for i, stored in _written_lineage(spark, t).items():
            if i in lineage and stored[-1][0] is not None:
                assert stored[-1][0] == lineage[i][0]
        return rows

    def seq() -> int:
        return _metadata(iceberg_catalog, t)["last-sequence-number"]

    spark.sql(f"DELETE FROM {t} WHERE id = 1")  # the file is rewritten; its other rows keep their lineage
    del lineage[1]
    check({})
    # the kept rows are stored with both columns as they were read
    assert {i: v for i, v in _written_lineage(spark, t).items() if i < 5} == {i: [lineage[i]] for i in (0, 2, 3, 4)}

    assert spark.sql(f"UPDATE {t} SET s = 'u' WHERE id IN (2, 11)").collect()[0][0] == 2
    check({2: (lineage[2][0], seq()), 11: (lineage[11][0], seq())})

    spark.sql(f"CREATE TABLE {src} (id BIGINT, s STRING)")
    spark.sql(f"INSERT INTO {src} VALUES (3, 'm'), (12, 'del'), (20, 'new'), (21, 'new')")
    before = _metadata(iceberg_catalog, t)["next-row-id"]
    merged = spark.sql(f"MERGE INTO {t} x USING {src} y ON x.id = y.id "
                       "WHEN MATCHED AND y.s = 'del' THEN DELETE WHEN MATCHED THEN UPDATE SET s = y.s "
                       "WHEN NOT MATCHED THEN INSERT *").collect()[0]
    assert tuple(merged) == (4, 1, 1, 2)
    del lineage[12]
    now = _lineage_rows(spark, t)
    assert now[3] == (lineage[3][0], seq())
    fresh = sorted(now[i][0] for i in (20, 21))
    assert fresh[0] >= before and fresh[1] == fresh[0] + 1 and now[20][1] == now[21][1] == seq()
    check({3: now[3], 20: now[20], 21: now[21]})

    # no WHERE: every row is written again, each keeps its id
    assert spark.sql(f"UPDATE {t} SET s = 'all'").collect()[0][0] == len(lineage)
    rows = check({i: (v[0], seq()) for i, v in lineage.items()})
    assert sorted(r[1] for r in rows) == ["all"] * len(lineage)
    assert sorted(v[0] for v in lineage.values()) == sorted(set(v[0] for v in lineage.values()))  # ids unique


def test_restore_keeps_row_ids_and_one_deletion_vector_per_file(spark, ns, iceberg_catalog, engines, duck):
    t = f"lake.{ns}.rst"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) TBLPROPERTIES ('format-version'='3')")
    for first in (0, 10):
        spark.createDataFrame([(i, "a") for i in range(first, first + 5)], "id BIGINT, s STRING").coalesce(1) \
            .writeTo(t).append()

    def state() -> tuple:
        table = iceberg_catalog.load_table(f"{ns}.rst")
        dvs = _one_dv_per_file(duck, iceberg_catalog, t)
        return (table.metadata.current_snapshot_id, _lineage_rows(spark, t), engines.assert_same(t),
                sorted((d["file_path"], d["referenced_data_file"]) for d in dvs))

    spark.sql(f"DELETE FROM {t} WHERE id IN (1, 11)")  # one Puffin file: DVs for both data files
    first = state()
    assert len(first[3]) == 2 and len({p for p, _ in first[3]}) == 1
    spark.sql(f"DELETE FROM {t} WHERE id = 2")  # a new DV for the first file; the other listed again
    second = state()
    assert len({p for p, _ in second[3]}) == 2
    spark.sql(f"UPDATE {t} SET s = 'u' WHERE id = 12")
    spark.sql(f"OPTIMIZE {t}")  # new files: the rows' ids are stored in them
    spark.createDataFrame([(20, "n")], "id BIGINT, s STRING").writeTo(t).append()

    for target in (first, second, first):  # back, forward (one of two sibling DVs goes), back again
        next_row_id = _metadata(iceberg_catalog, t)["next-row-id"]
        spark.sql(f"RESTORE TABLE {t} TO VERSION AS OF {target[0]}").collect()
        now = state()
        assert now[1:] == target[1:]  # rows, their ids and last-updated numbers, the same DVs
        assert _metadata(iceberg_catalog, t)["next-row-id"] >= next_row_id  # ids are never reused


def test_manifests_rewritten_and_staged_writes_published_keep_row_ids(spark, ns, iceberg_catalog, engines, duck):
    t, ident = f"lake.{ns}.wap3", f"{ns}.wap3"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, p INT) PARTITIONED BY (p) TBLPROPERTIES ('format-version'='3', "
              "'write.wap.enabled'='true')")
    for first in (0, 10, 20):
        spark.createDataFrame([(i, i % 2) for i in range(first, first + 4)], "id BIGINT, p INT").writeTo(t).append()
    spark.sql(f"DELETE FROM {t} WHERE id IN (1, 10)")
    lineage = _lineage_rows(spark, t)
    rows = engines.assert_same(t)

    result = spark.sql(f"CALL lake.system.rewrite_manifests('{ident}')").collect()[0]
    assert result[0] > 1  # the data manifests of three appends (and the DVs') rewritten
    assert _lineage_rows(spark, t) == lineage and engines.assert_same(t) == rows
    meta = _metadata(iceberg_catalog, t)
    current = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])
    assert current["summary"]["operation"] == "replace"
    # every live data file states its first_row_id, so the new manifests' fresh ids do not move a row
    assert all(f["first_row_id"] is not None for f in _lineage(duck, meta)["files"] if f["content"] == 0)
    _one_dv_per_file(duck, iceberg_catalog, t)

    # a staged write published as a cherry-pick onto a main that moved: its rows get fresh ids
    spark.conf.set("spark.wap.id", "w3")
    try:
        spark.createDataFrame([(100, 0), (101, 1)], "id BIGINT, p INT").writeTo(t).append()
    finally:
        spark.conf.unset("spark.wap.id")
    assert _lineage_rows(spark, t) == lineage  # main did not move
    spark.createDataFrame([(200, 0)], "id BIGINT, p INT").writeTo(t).append()
    spark.sql(f"CALL lake.system.publish_changes(table => '{ident}', wap_id => 'w3')").collect()
    now = _lineage_rows(spark, t)
    assert {i: v for i, v in now.items() if i in lineage} == lineage
    ids = [v[0] for v in now.values()]
    assert len(set(ids)) == len(ids) and max(ids) < _metadata(iceberg_catalog, t)["next-row-id"]
    assert sorted(now) == sorted([*lineage, 100, 101, 200])
    engines.assert_same(t)


def test_metadata_tables_show_row_ids_and_deletion_vectors(spark, ns, iceberg_catalog, duck):
    t = f"lake.{ns}.mt3"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='3')")
    for first in (0, 10):
        spark.createDataFrame([(i,) for i in range(first, first + 4)], "id BIGINT").coalesce(1).writeTo(t).append()
    spark.sql(f"DELETE FROM {t} WHERE id IN (1, 11)")
    spark.sql(f"UPDATE {t} SET id = 12 WHERE id = 2")
    written = _lineage(duck, _metadata(iceberg_catalog, t))
    ids = _row_ids(written)  # as the spec's inheritance gives them, from the Avro files
    data = {r[0]: r[1] for r in spark.sql(f"SELECT file_path, first_row_id FROM {t}.data_files").collect()}
    assert data == ids and None not in data.values()
    assert {r[0]: r[1] for r in spark.sql(f"SELECT file_path, first_row_id FROM {t}.all_data_files").collect()} == ids
    dvs = sorted((d["file_path"], d["referenced_data_file"], d["content_offset"], d["content_size_in_bytes"],
                  d["record_count"]) for d in _dv_entries(duck, _metadata(iceberg_catalog, t)))
    assert len(dvs) == 2
    shown = spark.sql(f"SELECT file_path, referenced_data_file, content_offset, content_size_in_bytes, record_count "
                      f"FROM {t}.delete_files WHERE file_format = 'PUFFIN'").collect()
    assert sorted(tuple(r) for r in shown) == dvs
    entries = spark.sql(f"SELECT status, data_file.file_path, data_file.first_row_id, data_file.referenced_data_file "
                        f"FROM {t}.entries").collect()
    live = {r[1]: r[2] for r in entries if r[0] != 2 and r[3] is None}
    assert live == ids
    assert sorted(r[3] for r in entries if r[3] is not None and r[0] != 2) == sorted(d[1] for d in dvs)
    # the position_deletes table lists each position a DV deletes, with its data file and the Puffin file
    files = _file_rows(spark, t)
    shown = sorted((r["file_path"], r["pos"], r["delete_file_path"], r["row"])
                   for r in spark.sql(f"SELECT * FROM {t}.position_deletes").collect())
    by_dv = {d[1]: d[0] for d in dvs}  # data file -> its Puffin file
    expected = sorted((path, files[path].index(i), by_dv[path], None) for path in by_dv for i in (1, 2, 11)
                      if i in files[path])
    assert shown == expected and len(shown) == 3


def test_column_defaults(spark, ns, iceberg_catalog, engines, duck):
    """ADD COLUMN ... DEFAULT on a v3 table: the column's initial-default is what rows written
    before read (here, in pyiceberg, and after OPTIMIZE), its write-default what an INSERT that
    omits it writes; no parser setting changes what a default reads as."""
    import datetime
    import decimal

    import settings_util

    t = f"lake.{ns}.dflt"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} VALUES (1)")
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (c INT DEFAULT 2 + 3, s STRING DEFAULT 'it''s \\\\ ok', "
              "d DATE DEFAULT DATE'2024-01-02', ts TIMESTAMP DEFAULT TIMESTAMP'2024-01-02 03:04:05', "
              "dec DECIMAL(5,2) DEFAULT 1.25)")
    spark.sql(f"ALTER TABLE {t} ADD COLUMN r INT NOT NULL DEFAULT 7")
    spark.sql(f"INSERT INTO {t} (id) VALUES (2)")  # the write-defaults
    spark.sql(f"INSERT INTO {t} (id, c, s) VALUES (3, NULL, 'x')")
    d = (5, "it's \\ ok", datetime.date(2024, 1, 2), datetime.datetime(2024, 1, 2, 3, 4, 5), decimal.Decimal("1.25"), 7)
    expected = [(1, *d), (2, *d), (3, None, "x", *d[2:])]
    assert sorted(engines.lakerules(t)) == expected
    as_pyiceberg = [tuple(v.replace(tzinfo=None) if isinstance(v, datetime.datetime) else v for v in r)
                    for r in engines.pyiceberg(t)]
    assert sorted(as_pyiceberg) == expected  # pyiceberg fills initial-default in from the metadata
    assert sorted(engines.duckdb(t, "id, c, s, d, dec, r")) == [(r[0], *r[1:4], *r[5:]) for r in expected]  # DuckDB too
    fields = {f["name"]: f for f in _metadata(iceberg_catalog, t)["schemas"][-1]["fields"]}
    assert (fields["c"]["initial-default"], fields["c"]["write-default"]) == (5, 5)
    assert (fields["s"]["initial-default"], fields["d"]["initial-default"]) == ("it's \\ ok", "2024-01-02")
    assert fields["ts"]["initial-default"].startswith("2024-01-02T03:04:05") and fields["r"]["required"] is True
    with settings_util.settings(spark, {"spark.sql.parser.escapedStringLiterals": "true", "spark.sql.ansi.enabled": "false",
                                        "spark.sql.session.timeZone": "America/New_York"}):
        assert sorted(r[:3] for r in engines.lakerules(t)) == [r[:3] for r in expected]
    assert spark.sql(f"SELECT count(c), max(c), min(r) FROM {t}").collect()[0] == (2, 5, 7)
    assert [r[0] for r in spark.sql(f"SELECT id FROM {t} WHERE c = 5 ORDER BY id").collect()] == [1, 2]
    spark.sql(f"OPTIMIZE {t}")  # the defaults are written into the new file
    assert sorted(engines.lakerules(t)) == expected

    refused(spark, f"ALTER TABLE {t} ADD COLUMN b BINARY DEFAULT X'00'", "binary", "Nothing was changed")
    spark.sql(f"ALTER TABLE {t} ADD COLUMN st STRUCT<x: INT>")
    refused(spark, f"ALTER TABLE {t} ADD COLUMN st.y INT DEFAULT 1", "top-level columns only")
    # a new write-default: later INSERTs write it; rows written before keep reading the initial-default
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN c SET DEFAULT 4 + 5")
    spark.sql(f"INSERT INTO {t} (id) VALUES (4)")
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN c DROP DEFAULT")
    spark.sql(f"INSERT INTO {t} (id) VALUES (5)")
    assert [tuple(r) for r in spark.sql(f"SELECT id, c FROM {t} ORDER BY id").collect()] == \
        [(1, 5), (2, 5), (3, None), (4, 9), (5, None)]
    fields = {f["name"]: f for f in _metadata(iceberg_catalog, t)["schemas"][-1]["fields"]}
    assert fields["c"]["initial-default"] == 5 and "write-default" not in fields["c"]
    refused(spark, f"ALTER TABLE {t} ALTER COLUMN r DROP DEFAULT", "required", "Nothing was changed")
    spark.sql(f"CREATE TABLE {t}_v2 (id BIGINT)")
    refused(spark, f"ALTER TABLE {t}_v2 ADD COLUMN c INT DEFAULT 5", "format version 3", "Nothing was changed")
    refused(spark, f"CREATE TABLE {t}_var (v VARIANT) TBLPROPERTIES ('format-version'='3')", "variant",
            "not supported by lakerules yet")
    assert spark.table(f"{t}_v2").columns == ["id"]


def test_remove_missing_files_on_v3(spark, ns, iceberg_catalog, engines, duck):
    t, ident = f"lake.{ns}.miss", f"{ns}.miss"
    call = f"CALL lake.system.remove_missing_files(table => '{ident}')"
    spark.sql(f"CREATE TABLE {t} (id BIGINT) TBLPROPERTIES ('format-version'='3')")
    for first in (0, 10, 20):
        spark.createDataFrame([(i,) for i in range(first, first + 5)], "id BIGINT").coalesce(1).writeTo(t).append()
    spark.sql(f"DELETE FROM {t} WHERE id IN (1, 11, 21)")  # one Puffin file: a DV for each data file
    files = _file_rows(spark, t)
    path_of = {i: p for p, ids in files.items() for i in ids}
    (puffin,) = {d["file_path"] for d in _dv_entries(duck, _metadata(iceberg_catalog, t))}
    Path(path_of[0].removeprefix("file://")).unlink()  # a data file gone: its rows go, the Puffin file stays
    rows = spark.sql(call).collect()
    assert [(r[0], r[1], r[2]) for r in rows] == [(path_of[0], "data", "missing")]
    assert sorted(engines.lakerules(t)) == [(i,) for i in (10, 12, 13, 14, 20, 22, 23, 24)] == sorted(engines.pyiceberg(t))
    Path(puffin.removeprefix("file://")).unlink()  # the Puffin file gone: the rows its DVs deleted come back
    rows = spark.sql(call).collect()
    assert [(r[0], r[1], r[2]) for r in rows] == [(puffin, "position deletes", "missing")]
    assert sorted(engines.lakerules(t)) == [(i,) for i in (*range(10, 15), *range(20, 25))] == \
        sorted(engines.pyiceberg(t))
    assert _dv_entries(duck, _metadata(iceberg_catalog, t)) == []
