"""Write order and distribution (lakerules.write.order): Iceberg's ALTER TABLE ... WRITE and
SET/DROP IDENTIFIER FIELDS stored as Iceberg stores them (pyiceberg reads them), and honored by
lakerules' writes: each data file sorted by the sort order and recording its id."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from settings_util import settings
from pyiceberg.table.sorting import NullOrder, SortDirection
from pyiceberg.transforms import BucketTransform, IdentityTransform

from errors_util import refused


def files(catalog, t):
    table = catalog.load_table(t.split(".", 1)[1])
    return [task.file for task in table.scan().plan_files()]


def ids_in(catalog, t, data_file) -> list[int]:
    table = catalog.load_table(t.split(".", 1)[1])
    with table.io.new_input(data_file.file_path).open() as f:
        return pq.read_table(f).column("id").to_pylist()


def test_write_order(spark, ns, iceberg_catalog, engines):
    t = f"lake.{ns}.wo"
    spark.sql(f"CREATE TABLE {t} (id INT NOT NULL, v STRING) TBLPROPERTIES ('write.update.mode' = 'merge-on-read')")
    spark.sql(f"ALTER TABLE {t} WRITE ORDERED BY id DESC NULLS LAST, v")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    order = table.sort_order()
    assert [(f.source_id, f.transform, f.direction, f.null_order) for f in order.fields] == [
        (1, IdentityTransform(), SortDirection.DESC, NullOrder.NULLS_LAST),
        (2, IdentityTransform(), SortDirection.ASC, NullOrder.NULLS_FIRST)]
    assert table.properties["write.distribution-mode"] == "range"
    spark.sql(f"INSERT INTO {t} VALUES (3, 'c'), (9, 'i'), (1, 'a'), (7, 'g'), (5, 'e')")
    (f,) = files(iceberg_catalog, t)
    assert f.sort_order_id == order.order_id
    assert ids_in(iceberg_catalog, t, f) == [9, 7, 5, 3, 1]
    spark.sql(f"MERGE INTO {t} x USING (SELECT 4 AS id, 'd' AS v UNION ALL SELECT 8, 'h' UNION ALL SELECT 6, 'f') s "
              "ON x.id = s.id WHEN NOT MATCHED THEN INSERT *")
    new = [g for g in files(iceberg_catalog, t) if g.file_path != f.file_path]
    assert [ids_in(iceberg_catalog, t, g) for g in new] == [[8, 6, 4]] and new[0].sort_order_id == order.order_id
    engines.assert_same(t, expected=[(i, "abcdefghi"[i - 1]) for i in (1, 3, 4, 5, 6, 7, 8, 9)])
    # OPTIMIZE without ZORDER BY writes its files in the sort order too
    spark.sql(f"OPTIMIZE {t}")
    (f,) = files(iceberg_catalog, t)
    assert ids_in(iceberg_catalog, t, f) == [9, 8, 7, 6, 5, 4, 3, 1]
    assert f.sort_order_id == order.order_id
    # the other forms: LOCALLY keeps the distribution mode; DISTRIBUTED BY PARTITION is hash; UNORDERED none
    spark.sql(f"ALTER TABLE {t} WRITE LOCALLY ORDERED BY bucket(4, id)")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    assert [(f.transform, f.direction) for f in table.sort_order().fields] == [(BucketTransform(4), SortDirection.ASC)]
    assert table.properties["write.distribution-mode"] == "range"
    spark.sql(f"ALTER TABLE {t} WRITE DISTRIBUTED BY PARTITION")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    assert table.sort_order().is_unsorted and table.properties["write.distribution-mode"] == "hash"
    spark.sql(f"ALTER TABLE {t} WRITE UNORDERED")
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).properties["write.distribution-mode"] == "none"
    refused(spark, f"ALTER TABLE {t} WRITE ORDERED BY nope", "nope")
    # identifier fields
    spark.sql(f"ALTER TABLE {t} SET IDENTIFIER FIELDS id")
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).schema().identifier_field_ids == [1]
    refused(spark, f"ALTER TABLE {t} SET IDENTIFIER FIELDS v", "IDENTIFIER FIELDS")  # optional: not allowed
    refused(spark, f"ALTER TABLE {t} DROP IDENTIFIER FIELDS v", "not identifier fields")
    spark.sql(f"ALTER TABLE {t} DROP IDENTIFIER FIELDS id")
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).schema().identifier_field_ids == []


def test_a_distribution_and_an_ordering_together(spark, ns, iceberg_catalog, engines):
    """Issue 30: Iceberg's grammar takes DISTRIBUTED BY PARTITION with any ordering clause, in either
    order; the mode is hash and the sort order the fields (or none), as Iceberg sets them."""
    t = f"lake.{ns}.dist_order"
    name = t.split(".", 1)[1]
    spark.sql(f"CREATE TABLE {t} (id INT, p STRING) PARTITIONED BY (p)")

    def state():
        table = iceberg_catalog.load_table(name)
        return ([(f.source_id, f.direction) for f in table.sort_order().fields],
                table.properties.get("write.distribution-mode"))

    spark.sql(f"ALTER TABLE {t} WRITE DISTRIBUTED BY PARTITION ORDERED BY id DESC")
    assert state() == ([(1, SortDirection.DESC)], "hash")
    spark.sql(f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, IF(id % 2 = 0, 'a', 'b') FROM range(10)")
    written = files(iceberg_catalog, t)
    assert len(written) == 2  # one file per partition: distributed by it
    assert sorted(ids_in(iceberg_catalog, t, f) for f in written) == [[8, 6, 4, 2, 0], [9, 7, 5, 3, 1]]
    spark.sql(f"ALTER TABLE {t} WRITE UNORDERED")
    assert state() == ([], "none")
    spark.sql(f"ALTER TABLE {t} WRITE ORDERED BY p DISTRIBUTED BY PARTITION")
    assert state() == ([(2, SortDirection.ASC)], "hash")
    spark.sql(f"ALTER TABLE {t} WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY id")
    assert state() == ([(1, SortDirection.ASC)], "hash")
    spark.sql(f"ALTER TABLE {t} WRITE DISTRIBUTED BY PARTITION UNORDERED")
    assert state() == ([], "hash")
    spark.sql(f"ALTER TABLE {t} WRITE ORDERED BY id")
    assert state() == ([(1, SortDirection.ASC)], "range")
    for twice in ("ORDERED BY id ORDERED BY p", "DISTRIBUTED BY PARTITION DISTRIBUTED BY PARTITION",
                  "UNORDERED ORDERED BY id"):
        with pytest.raises(Exception, match="PARSE_SYNTAX_ERROR.*each once"):
            spark.sql(f"ALTER TABLE {t} WRITE {twice}")
    assert state() == ([(1, SortDirection.ASC)], "range")
    engines.assert_same(t, expected=[(i, "ab"[i % 2]) for i in range(10)])


def test_parquet_writer_properties(spark, ns, iceberg_catalog, engines):
    """Iceberg's write.parquet.* properties reach Spark's Parquet writer: row group and page
    sizes, zstd level, bloom filters per column; a value lakerules cannot honor is refused before
    anything is written."""
    import duckdb

    t = f"lake.{ns}.pq"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, s STRUCT<a: STRING>) TBLPROPERTIES (
        'write.parquet.row-group-size-bytes' = '65536', 'write.parquet.row-group-check-min-record-count' = '10',
        'write.parquet.row-group-check-max-record-count' = '100', 'write.parquet.page-row-limit' = '500',
        'write.parquet.compression-level' = '9', 'write.parquet.bloom-filter-enabled.column.s.a' = 'true',
        'write.parquet.bloom-filter-fpp.column.s.a' = '0.01')""")
    spark.sql(f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, named_struct('a', sha2(CAST(id AS STRING), 256)) "
              "FROM range(20000)")
    [data] = files(iceberg_catalog, t)
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    with table.io.new_input(data.file_path).open() as f:
        meta = pq.ParquetFile(f).metadata
    assert meta.num_row_groups >= 10, meta.num_row_groups  # 20,000 rows of ~80 bytes in 64 KiB row groups
    assert meta.row_group(0).column(1).compression == "ZSTD"
    local = data.file_path.removeprefix("file:")
    with duckdb.connect() as con:
        chunks = dict(con.execute("SELECT path_in_schema, count(bloom_filter_offset) FROM parquet_metadata(?) GROUP BY 1",
                                  [local]).fetchall())
        largest = con.execute("SELECT max(bloom_filter_length) FROM parquet_metadata(?)", [local]).fetchone()[0]
    assert chunks == {"id": 0, "s, a": meta.num_row_groups}, chunks  # a bloom filter in every row group, s.a only
    # sized by the row group's distinct values (<= 100 rows: parquet-mr's adaptive filters), not 1 MiB each
    assert 0 < largest <= 4200, largest
    engines.assert_same(t, "id")

    before = table.current_snapshot().snapshot_id
    for prop, value, needle in [
        ("write.parquet.page-row-limit", "many", "must be a whole number"),
        ("write.parquet.bloom-filter-enabled.column.nope", "true", "names no column"),
        ("write.parquet.bloom-filter-ndv.column.s.a", "lots", "must be a whole number"),
        ("write.parquet.stats-everything", "true", "is not supported"),
        ("write.parquet.compression-codec", "lzo", "is not supported"),
    ]:
        spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('{prop}' = '{value}')")
        refused(spark, f"INSERT INTO {t} VALUES (1, named_struct('a', 'x'))", prop, needle)
        spark.sql(f"ALTER TABLE {t} UNSET TBLPROPERTIES ('{prop}')")
        assert iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id == before
    spark.sql(f"INSERT INTO {t} VALUES (1, named_struct('a', 'x'))")
    assert spark.table(t).count() == 20001

    # delete files read write.delete.parquet.* first
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.parquet.compression-codec' = 'snappy')")
    spark.sql(f"DELETE FROM {t} WHERE id = 7")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    [delete] = {d.file_path: d for task in table.scan().plan_files() for d in task.delete_files}.values()
    with table.io.new_input(delete.file_path).open() as f:
        assert pq.ParquetFile(f).metadata.row_group(0).column(0).compression == "SNAPPY"
    with settings(spark, {"spark.lakerules.write.positionDeleteDriverRows": "0"}):  # by a Spark job: the same
        spark.sql(f"DELETE FROM {t} WHERE id = 9")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    found = {d.file_path: d for task in table.scan().plan_files() for d in task.delete_files}
    [by_job] = set(found) - {delete.file_path}
    with table.io.new_input(by_job).open() as f:
        assert pq.ParquetFile(f).metadata.row_group(0).column(0).compression == "SNAPPY"
    before = table.current_snapshot().snapshot_id
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.parquet.page-row-limit' = '-1')")
    refused(spark, f"DELETE FROM {t} WHERE id = 8", "write.delete.parquet.page-row-limit", "delete files")
    assert iceberg_catalog.load_table(t.split(".", 1)[1]).current_snapshot().snapshot_id == before
    assert spark.table(t).count() == 19999


@pytest.mark.parametrize("umask", ["022", "027"])
def test_local_files_get_hadoop_modes_without_a_chmod_process(spark, ns, iceberg_catalog, umask):
    """Local files lakerules writes (a Spark write job's data files, the driver's delete files, a
    Spark job's delete files) and their folders get the modes Hadoop gives them under
    fs.permissions.umask-mode, with their .crc side files, set by io.lakerules.LocalFiles through a
    system call instead of a chmod process per file and folder."""
    import os
    import stat
    from pathlib import Path

    t = f"lake.{ns}.modes{umask}"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    with settings(spark, {"fs.permissions.umask-mode": umask}):
        spark.sql(f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, 'x' FROM range(10)")
        spark.sql(f"DELETE FROM {t} WHERE id = 3")  # few deletes: the driver writes the file
        with settings(spark, {"spark.lakerules.write.positionDeleteDriverRows": "0"}):
            spark.sql(f"DELETE FROM {t} WHERE id = 4")  # by a Spark job
    assert sorted(r.id for r in spark.table(t).collect()) == [0, 1, 2, 5, 6, 7, 8, 9]
    mask = int(umask, 8)
    root = Path(iceberg_catalog.load_table(t.split(".", 1)[1]).location().replace("file://", "").replace("file:", "")) / "data"
    written = [p for p in root.rglob("*.parquet")]
    assert len(written) == 3
    for p in written:
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o666 & ~mask, p
        assert (p.parent / f".{p.name}.crc").exists(), p
        folder = p.parent
        while folder != root:
            assert stat.S_IMODE(os.stat(folder).st_mode) == 0o777 & ~mask, folder
            folder = folder.parent


def test_deletion_vector_files_get_hadoop_modes(spark, ns, iceberg_catalog):
    """A v3 DELETE's Puffin file (written by the driver through io.lakerules.LocalFiles) gets the
    mode Hadoop gives it under fs.permissions.umask-mode, and its .crc side file."""
    import os
    import stat
    from pathlib import Path

    t = f"lake.{ns}.dvmodes"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) TBLPROPERTIES ('format-version' = '3')")
    spark.sql(f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, 'x' FROM range(10)")
    with settings(spark, {"fs.permissions.umask-mode": "027"}):
        spark.sql(f"DELETE FROM {t} WHERE id = 3")
    assert sorted(r.id for r in spark.table(t).collect()) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    root = Path(iceberg_catalog.load_table(t.split(".", 1)[1]).location().replace("file://", "").replace("file:", ""))
    (puffin,) = [p for p in root.rglob("*") if p.is_file() and p.suffix == ".puffin"]
    assert stat.S_IMODE(os.stat(puffin).st_mode) == 0o640
    assert (puffin.parent / f".{puffin.name}.crc").exists()
