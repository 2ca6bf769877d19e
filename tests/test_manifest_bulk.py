"""Manifests merged in the JVM (lakerules.write.manifest_bulk) hold what pyiceberg's writer
writes for the same merge: the same entries field by field, the same header metadata and Avro
schema, and the same manifest-list entry (counts, sequence numbers, partition summaries).
Manifests decoded in the JVM into columns (lakerules.scan.manifest_columns) give the entries
pyiceberg's reader gives, and plan the same files, cold and warm."""

from __future__ import annotations

import enum
import json
from decimal import Decimal
from types import SimpleNamespace

import pytest

from pyiceberg.avro.file import AvroFile
from pyiceberg.expressions import AlwaysTrue, EqualTo, GreaterThan, In, IsNull, LessThan
from pyiceberg.manifest import ManifestContent, ManifestEntry
from pyiceberg.schema import index_by_id
from pyiceberg.table.snapshots import Operation

from lakerules.iceberg import pyiceberg_edge as edge
from lakerules.scan import manifest_columns
from lakerules.scan.manifests import CACHE
from lakerules.scan.manifests import CachedManifest
from lakerules.scan.planning import plan_scan
from lakerules.write import commit, manifest_bulk, manifest_merge


def _table(spark, ns, iceberg_catalog, name="t"):
    t = f"lake.{ns}.{name}"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING, d DATE, x DECIMAL(9, 2), f FLOAT) "
              "PARTITIONED BY (s, d, x, truncate(10, id)) TBLPROPERTIES ('format-version' = '2', "
              "'commit.manifest-merge.enabled' = 'false', 'write.delete.mode' = 'copy-on-write')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', DATE '2024-01-01', 1.50, 1.1), (2, 'b', NULL, -2.25, NULL)")
    spark.sql(f"INSERT INTO {t} VALUES (3, 'é\"\\\\', DATE '1969-12-31', NULL, CAST('NaN' AS FLOAT)), "
              "(4, NULL, DATE '2024-01-02', 0.01, -0.0)")
    spark.sql(f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ * FROM VALUES (5, 'a', DATE '2024-01-01', 1.50, 1.1), "
              "(9, 'a', DATE '2024-01-01', 1.50, 1.1) AS v(id, s, d, x, f)")  # one file of two rows
    spark.sql(f"DELETE FROM {t} WHERE id = 2")  # an overwrite: DELETED and EXISTING entries
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    spark.sql(f"DELETE FROM {t} WHERE id = 5")  # a position delete file: a delete manifest
    return iceberg_catalog.load_table(f"{ns}.{name}")


def _entries(table, manifest):
    out = []
    for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
        f = e.data_file
        out.append((e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number,
                    tuple(_plain(f[i]) for i in range(len(f)))))
    return sorted(out, key=repr)


def _plain(value):
    """A data file's field as comparable text (its maps are lazy dicts; an enum as its value: pyiceberg
    reads a v1 manifest's absent content as 0, DataFileContent.DATA)."""
    if isinstance(value, enum.Enum):
        return repr(value.value)
    if hasattr(value, "items"):
        return repr(sorted(dict(value).items()))
    return repr(value)


def _header(table, manifest):
    with AvroFile[ManifestEntry](table.io.new_input(manifest.manifest_path)) as f:
        meta = dict(f.header.meta)
    return {**meta, "avro.schema": json.loads(meta["avro.schema"])}


def _summary(manifest):
    return {k: getattr(manifest, k) for k in (
        "partition_spec_id", "content", "sequence_number", "min_sequence_number", "added_snapshot_id",
        "added_files_count", "existing_files_count", "deleted_files_count", "added_rows_count",
        "existing_rows_count", "deleted_rows_count", "partitions", "key_metadata")}


def test_a_merge_in_the_jvm_writes_what_pyiceberg_writes(spark, ns, iceberg_catalog):
    table = _table(spark, ns, iceberg_catalog)
    manifests = table.current_snapshot().manifests(table.io)
    compared = 0
    for content in (ManifestContent.DATA, ManifestContent.DELETES):
        group = [m for m in manifests if m.content == content]
        assert group, (content, [s.summary for s in table.snapshots()], manifests)
        compared += _merged_alike(spark, table, content, group)
    assert compared == 5  # 4 data files (an earlier DELETED entry dropped) and 1 delete file


def _merged_alike(spark, table, content, manifests) -> int:
    """Merges ``manifests`` in the JVM and with pyiceberg's writer, for a commit never made;
    asserts the two manifests alike (entries, manifest-list entry, header); returns how many
    entries they hold."""
    producer = commit.AppendFiles(operation=Operation.APPEND, transaction=edge.CachingTransaction(table),
                                  io=table.io, **commit.producer_args(table, None))
    try:
        spec_id = manifests[0].partition_spec_id
        ours = manifest_bulk.merged(spark, producer, manifest_merge.manifest_writer(producer, content, spec_id),
                                    content, spec_id, manifests)
        theirs = manifest_merge._merged_here(producer, content, spec_id, manifests)
        assert len(ours) == len(theirs) == 1
        assert _summary(ours[0]) == _summary(theirs[0])
        assert _entries(table, ours[0]) == _entries(table, theirs[0])
        assert _header(table, ours[0]) == _header(table, theirs[0])
        return len(_entries(table, ours[0]))
    finally:
        producer.clean_all_uncommitted()


def test_a_merge_of_manifests_written_with_another_schema_converts_their_entries(spark, ns, iceberg_catalog):
    """Entries whose data file schema is the merged manifest's are carried over as their encoded
    bytes; those of a v1 manifest (another data file schema: no content, a block size) are
    converted field by field. Both give what pyiceberg's writer writes for the same merge."""
    t = f"lake.{ns}.up"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) PARTITIONED BY (s) TBLPROPERTIES ('format-version' = '1', "
              "'commit.manifest-merge.enabled' = 'false')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"INSERT INTO {t} VALUES (3, 'a')")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version' = '2')")
    spark.sql(f"INSERT INTO {t} VALUES (4, NULL)")
    table = iceberg_catalog.load_table(f"{ns}.up")
    manifests = table.current_snapshot().manifests(table.io)
    assert table.metadata.format_version == 2 and len(manifests) == 3
    assert _merged_alike(spark, table, ManifestContent.DATA, manifests) == 4


def test_commits_merging_in_the_jvm_read_the_same_in_every_engine(spark, ns, iceberg_catalog, engines):
    table = _table(spark, ns, iceberg_catalog)
    t = f"lake.{ns}.t"
    spark.sql(f"INSERT INTO {t} VALUES (6, 'c', DATE '2024-02-01', 3.00, 2.5)")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('commit.manifest-merge.enabled' = 'true', "
              "'commit.manifest.min-count-to-merge' = '2')")
    spark.sql(f"DELETE FROM {t} WHERE id = 9")  # a position delete: the data manifests merged, as they were
    table = iceberg_catalog.load_table(f"{ns}.t")
    manifests = table.current_snapshot().manifests(table.io)
    (data,) = [m for m in manifests if m.content == ManifestContent.DATA]
    # the DELETE planned from the cached columns of the manifests it merged: the merged one is
    # cached from them (not read again), with the entries pyiceberg reads from it
    carried = CACHE.peek(data.manifest_path)
    assert isinstance(carried, manifest_columns.ColumnarManifest)
    assert _rows(carried.entries) == _rows(data.fetch_manifest_entry(table.io, discard_deleted=True))
    day, dec = __import__("datetime").date, __import__("decimal").Decimal
    engines.assert_same(t, "id, s, d, x", [(1, "a", day(2024, 1, 1), dec("1.50")), (3, 'é"\\', day(1969, 12, 31), None),
                                         (4, None, day(2024, 1, 2), dec("0.01")), (6, "c", day(2024, 2, 1), dec("3.00"))])


def _rows(entries):
    return [(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file.spec_id,
             tuple(_plain(e.data_file[i]) for i in range(len(e.data_file)))) for e in entries]


def test_manifests_decoded_in_the_jvm_give_the_entries_pyiceberg_reads(spark, ns, iceberg_catalog):
    _same_entries(spark, _table(spark, ns, iceberg_catalog))


def test_format_version_1_manifests_decode_as_pyiceberg_reads_them(spark, ns, iceberg_catalog):
    """A v1 manifest's schema has no content or sequence numbers and has fields v2 dropped
    (block_size_in_bytes): the shim decodes by the file's own schema."""
    t = f"lake.{ns}.v1"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING, d DATE, x DECIMAL(9, 2), f FLOAT) "
              "PARTITIONED BY (s, d, x, truncate(10, id)) TBLPROPERTIES ('format-version' = '1')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', DATE '2024-01-01', 1.50, 1.1), (2, 'b', NULL, -2.25, NULL)")
    spark.sql(f"INSERT INTO {t} VALUES (3, 'é', DATE '1969-12-31', NULL, CAST('NaN' AS FLOAT)), "
              "(4, NULL, DATE '2024-01-02', 0.01, -0.0)")
    spark.sql(f"DELETE FROM {t} WHERE id = 2")  # a copy-on-write overwrite: DELETED entries
    table = iceberg_catalog.load_table(f"{ns}.v1")
    assert table.metadata.format_version == 1
    _same_entries(spark, table)


def _same_entries(spark, table):
    manifests = table.current_snapshot().manifests(table.io)
    got = manifest_columns.reader(spark, table)(manifests)
    assert set(got) == {m.manifest_path for m in manifests}
    schema = table.schema()
    for m in manifests:
        theirs = m.fetch_manifest_entry(table.io, discard_deleted=True)
        ours = got[m.manifest_path]
        assert ours.size == len(theirs)
        assert _rows(ours.take(reversed(range(ours.size)))) == _rows(list(reversed(theirs)))
        assert _rows(ours.entries) == _rows(theirs)
        plain = CachedManifest(theirs)
        for name in ("id", "s", "d", "x", "f"):
            f = schema.find_field(name)
            a, b = ours.bounds(f.field_id, f.field_type), plain.bounds(f.field_id, f.field_type)
            assert (a is None) == (b is None), name
            if a is not None:
                assert [repr(x.to_pylist()) for x in a] == [repr(x.to_pylist()) for x in b], name
        for position, field in enumerate(table.specs()[m.partition_spec_id].partition_type(schema).fields):
            a, b = ours.partition_values(position, field.field_type), plain.partition_values(position, field.field_type)
            assert (a.to_pylist() if a is not None else None) == (b.to_pylist() if b is not None else None), field


def _planned(plan):
    return sorted((p.file.file_path, p.sequence_number, p.snapshot_id, _plain(p.file.partition),
                   tuple(sorted(d.file_path for d in p.position_deletes)),
                   tuple(sorted(d.file_path for d in p.equality_deletes)),
                   tuple(_plain(p.file[i]) for i in range(len(p.file)))) for p in plan.files)


def test_cold_planning_from_the_jvm_plans_what_pyiceberg_s_entries_plan(spark, ns, iceberg_catalog):
    table = _table(spark, ns, iceberg_catalog)
    snapshot = table.current_snapshot().snapshot_id
    bulk = manifest_columns.reader(spark, table)
    filters = [AlwaysTrue(), EqualTo("id", 9), GreaterThan("d", "2024-01-01"), EqualTo("s", "a"),
               LessThan("x", Decimal("1.00")), In("id", [1, 3, 4]), IsNull("s")]
    for row_filter in filters:
        CACHE.clear()
        cold = plan_scan(table, snapshot, row_filter, bulk=bulk)
        warm = plan_scan(table, snapshot, row_filter, bulk=bulk)  # from the columns cached
        CACHE.clear()
        theirs = plan_scan(table, snapshot, row_filter)  # read by pyiceberg
        assert _planned(cold) == _planned(warm) == _planned(theirs), row_filter
    assert [p.file.file_path for p in cold.files] or filters


def _recoded(spark, source: str, target: str, codec: str) -> None:
    """The Avro container ``source`` written again to ``target`` by Avro's own Java writer, with
    ``codec`` and blocks of many entries (pyiceberg writes one entry a block)."""
    jvm = spark._jvm
    stream = jvm.org.apache.avro.file.DataFileStream(jvm.java.io.FileInputStream(source),
                                                     jvm.org.apache.avro.generic.GenericDatumReader())
    schema = stream.getSchema()
    writer = jvm.org.apache.avro.file.DataFileWriter(jvm.org.apache.avro.generic.GenericDatumWriter(schema))
    writer.setCodec(jvm.org.apache.avro.file.CodecFactory.fromString(codec))
    writer.setSyncInterval(1 << 20)
    for key in stream.getMetaKeys():
        if not key.startswith("avro."):
            writer.setMeta(key, stream.getMeta(key))
    writer.create(schema, jvm.java.io.File(target))
    while stream.hasNext():
        writer.append(stream.next())
    writer.close()
    stream.close()


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard"])
def test_manifests_of_any_block_size_and_codec_decode_alike(spark, ns, iceberg_catalog, tmp_path, codec):
    """The shim reads a manifest's blocks itself ("null" and "deflate", one inflater for the file);
    Avro's codecs decompress any other. Each gives the columns of the manifest as pyiceberg wrote
    it (deflate, one entry a block)."""
    from lakerules.scan import manifest_job
    from lakerules.scan.manifest_columns import _PARTITION_KINDS
    from lakerules.spark import manifest_io

    table = _table(spark, ns, iceberg_catalog)
    schema = table.schema()
    bounds = sorted((fid, kind) for fid, f in index_by_id(schema).items()
                    if (kind := manifest_job.BOUND_KINDS.get(type(f.field_type))) is not None)
    for i, m in enumerate(table.current_snapshot().manifests(table.io)):
        kinds = [_PARTITION_KINDS.get(type(f.field_type), "binary")
                 for f in table.specs()[m.partition_spec_id].partition_type(schema).fields]
        source = m.manifest_path.removeprefix("file://")
        target = str(tmp_path / f"m{i}-{codec}.avro")
        _recoded(spark, source, target, codec)
        [theirs], [ours] = (manifest_io.manifest_columns(spark, [p], kinds, bounds) for p in (source, target))
        assert ours.num_rows == theirs.num_rows > 0
        assert ours.schema == theirs.schema
        for name in theirs.column_names:  # repr: NaN bounds compare equal
            assert repr(ours.column(name).to_pylist()) == repr(theirs.column(name).to_pylist()), (name, m.manifest_path)


def _damaged(source: str, target: str, change: int) -> None:
    """``source`` (one block, codec null) written to ``target`` with its block's count of records
    changed by ``change``: a count the block's bytes do not hold."""
    data = bytearray(open(source, "rb").read())
    sync = bytes(data[-16:])
    at = data.index(sync) + 16  # the header ends with the sync marker; the block's count follows
    count = data[at] >> 1  # zigzag, one byte for a count below 64
    assert data[at] < 0x80 and count > 0
    data[at] = (count + change) << 1
    open(target, "wb").write(bytes(data))


def test_a_manifest_whose_block_does_not_hold_its_count_is_refused_then_read_by_pyiceberg(
        spark, ns, iceberg_catalog, tmp_path):
    """The shim decodes Avro's encoding itself: a block whose count of records runs past its bytes,
    or leaves bytes over, is named damaged, never decoded from the next block's bytes; planning
    then reads that manifest with pyiceberg, which says what it finds."""
    from py4j.protocol import Py4JError

    from lakerules.spark import manifest_io

    table = _table(spark, ns, iceberg_catalog, "damaged")
    manifest = table.current_snapshot().manifests(table.io)[0]
    plain = str(tmp_path / "plain.avro")
    _recoded(spark, manifest.manifest_path.removeprefix("file://"), plain, "null")
    kinds = ["string", "int", "binary", "long"]
    [good] = manifest_io.manifest_columns(spark, [plain], kinds, [(1, "long")])
    assert good.num_rows > 0
    for change, words in ((1, "runs past the end"), (-1, "more bytes than its records")):
        target = str(tmp_path / f"damaged{change}.avro")
        _damaged(plain, target, change)
        with pytest.raises(Py4JError, match=words):
            manifest_io.manifest_columns(spark, [target], kinds, [(1, "long")])
        damaged = SimpleNamespace(manifest_path=target, partition_spec_id=manifest.partition_spec_id)
        assert manifest_columns.reader(spark, table)([damaged]) == {}  # left to pyiceberg
