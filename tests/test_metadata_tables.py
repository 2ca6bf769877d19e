"""Iceberg's metadata tables (lakerules.metadata.tables), compared with pyiceberg's ``inspect``
and with the manifests and delete files read directly, after one short history built once:
append, position delete, equality delete, update, OPTIMIZE, schema and partition evolution."""

from __future__ import annotations

import datetime
import itertools

import pyarrow.parquet as pq
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import Row

import lakerules

_n = itertools.count()


def norm(v):
    """Spark's and pyarrow's representations alike: Rows and lists of pairs (maps) as dicts,
    aware datetimes as naive UTC, bytes as bytes."""
    if isinstance(v, Row):
        return {k: norm(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()} if v else []  # an empty map: [] from pyarrow
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {k: norm(x) for k, x in v}
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return v


def key(row: dict):
    return repr(sorted((k, repr(v)) for k, v in row.items()))


def ours(spark, sql: str, columns=None) -> list[dict]:
    rows = [norm(r.asDict()) for r in spark.sql(sql).collect()]
    if columns is not None:
        rows = [{c: r[c] for c in columns} for r in rows]
    return sorted(rows, key=key)


def theirs(arrow, columns=None, rename=None) -> list[dict]:
    rows = [norm(r) for r in arrow.to_pylist()]
    if columns is not None:
        rows = [{c: r[c] for c in columns} for r in rows]
    return sorted(rows, key=key)


@pytest.fixture(scope="module")
def hist(spark, iceberg_catalog):
    """lake.<ns>.t after a history with every kind of change; the snapshot ids of each step."""
    ns = f"mt{next(_n)}"
    spark.sql(f"CREATE NAMESPACE lake.{ns}")
    name = f"lake.{ns}.t"
    steps = {}

    def step(label, sql=None):
        if sql is not None:
            spark.sql(sql)
        steps[label] = iceberg_catalog.load_table(f"{ns}.t").current_snapshot().snapshot_id

    spark.sql(f"CREATE TABLE {name} (id BIGINT, cat STRING, v DOUBLE) PARTITIONED BY (cat)")
    step("append", f"""INSERT INTO {name} SELECT /*+ REPARTITION(1) */ * FROM VALUES
        (1, 'a', 1.0), (2, 'a', 2.0), (3, 'a', 3.0), (4, 'b', 4.0), (5, 'b', double('NaN')), (6, 'b', 6.0) AS x(id, cat, v)""")
    step("position delete", f"DELETE FROM {name} WHERE id = 1")
    lakerules.delete_by_key(spark, name, spark.createDataFrame([(4, "b")], "id BIGINT, cat STRING"), on=["id", "cat"])
    step("equality delete")
    step("update", f"UPDATE {name} SET v = v + 10 WHERE id = 3")
    step("optimize", f"OPTIMIZE {name}")
    spark.sql(f"ALTER TABLE {name} ADD COLUMN note STRING")
    step("schema evolution", f"INSERT INTO {name} VALUES (7, 'a', 7.0, 'seven')")
    step("delete after evolution", f"DELETE FROM {name} WHERE id = 2")
    spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD bucket(2, id)")
    step("partition evolution", f"INSERT INTO {name} VALUES (8, 'b', 8.0, 'eight'), (9, 'c', 9.0, NULL)")
    iceberg_catalog.load_table(f"{ns}.t").manage_snapshots().create_tag(steps["update"], "v-update").commit()
    yield name, f"{ns}.t", steps
    spark.sql(f"DROP NAMESPACE IF EXISTS lake.{ns} CASCADE")


@pytest.fixture(scope="module")
def table(hist, iceberg_catalog):
    return iceberg_catalog.load_table(hist[1])


def test_snapshots_history_log_and_refs_equal_pyiceberg(spark, hist, table):
    name = hist[0]
    assert ours(spark, f"SELECT * FROM {name}.snapshots") == theirs(table.inspect.snapshots())
    assert ours(spark, f"SELECT * FROM {name}.history") == theirs(table.inspect.history())
    assert ours(spark, f"SELECT * FROM {name}.metadata_log_entries") == theirs(table.inspect.metadata_log_entries())
    assert ours(spark, f"SELECT * FROM {name}.refs") == theirs(table.inspect.refs())
    ops = [r.operation for r in spark.sql(f"SELECT operation FROM {name}.snapshots ORDER BY committed_at").collect()]
    assert ops[0] == "append" and "delete" in ops and "replace" in ops
    assert {r.name for r in spark.sql(f"SELECT name FROM {name}.refs").collect()} == {"main", "v-update"}


MANIFEST_COLUMNS = ["content", "path", "length", "partition_spec_id", "added_snapshot_id", "added_data_files_count",
                    "existing_data_files_count", "deleted_data_files_count", "added_delete_files_count",
                    "existing_delete_files_count", "deleted_delete_files_count", "partition_summaries"]


def test_manifests_equal_pyiceberg(spark, hist, table):
    name = hist[0]
    assert ours(spark, f"SELECT * FROM {name}.manifests") == theirs(table.inspect.manifests(), MANIFEST_COLUMNS)
    cols = [*MANIFEST_COLUMNS, "reference_snapshot_id"]
    assert ours(spark, f"SELECT * FROM {name}.all_manifests") == theirs(table.inspect.all_manifests(), cols)
    # delete manifests are there, with their counts in the delete columns
    assert spark.sql(f"SELECT count(*) FROM {name}.all_manifests WHERE content = 1 AND added_delete_files_count > 0").first()[0] > 0


FILE_COLUMNS = ["content", "file_path", "file_format", "spec_id", "partition", "record_count", "file_size_in_bytes",
                "column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds",
                "key_metadata", "split_offsets", "equality_ids", "sort_order_id"]


def _readable(rows: list[dict]) -> list[dict]:
    return sorted(({"file_path": r["file_path"], **{c: m for c, m in r["readable_metrics"].items()}} for r in rows), key=key)


@pytest.mark.parametrize("meta", ["files", "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files"])
def test_files_tables_equal_pyiceberg(spark, hist, table, meta):
    name = hist[0]
    mine = ours(spark, f"SELECT * FROM {name}.{meta}")
    expected = theirs(getattr(table.inspect, meta)())
    a, b = [{c: r[c] for c in FILE_COLUMNS} for r in mine], [{c: r[c] for c in FILE_COLUMNS} for r in expected]
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert {k: v for k, v in x.items() if y[k] != v} == {k: v for k, v in y.items() if x[k] != v}
    assert a == b
    # readable metrics: pyiceberg lists the top-level columns, as the table has only those
    for x, y in zip(_readable(mine), _readable(expected)):
        assert {k: v for k, v in x.items() if y.get(k) != v} == {k: v for k, v in y.items() if x.get(k) != v}
    assert _readable(mine) == _readable(expected)
    if meta == "files":
        contents = {r["content"] for r in mine}
        assert contents >= {0, 1}
    if meta == "all_delete_files":
        assert {r["content"] for r in mine} == {1, 2}


def test_entries_equal_pyiceberg_and_all_entries_the_manifests(spark, hist, table):
    name = hist[0]
    cols = ["status", "snapshot_id", "sequence_number", "file_sequence_number"]
    mine = ours(spark, f"SELECT status, snapshot_id, sequence_number, file_sequence_number, data_file.file_path AS p, "
                       f"data_file.record_count AS n FROM {name}.entries")
    expected = sorted(({**{c: r[c] for c in cols}, "p": r["data_file"]["file_path"], "n": r["data_file"]["record_count"]}
                       for r in table.inspect.entries().to_pylist()), key=key)
    assert mine == expected
    assert {r["status"] for r in mine} >= {0, 1}
    # all_entries: every entry of every manifest of every snapshot, each manifest once
    manifests = {m.manifest_path: m for s in table.snapshots() for m in s.manifests(table.io)}
    direct = sorted(({"status": int(e.status), "p": e.data_file.file_path}
                     for m in manifests.values() for e in m.fetch_manifest_entry(table.io, discard_deleted=False)), key=key)
    assert ours(spark, f"SELECT status, data_file.file_path AS p FROM {name}.all_entries") == direct
    assert any(r["status"] == 2 for r in direct)


def test_partitions_equal_pyiceberg(spark, hist, table):
    name = hist[0]
    mine = ours(spark, f"SELECT * FROM {name}.partitions")
    assert mine == theirs(table.inspect.partitions())
    # the partition struct spans every spec: cat and id_bucket
    assert spark.table(f"{name}.partitions").schema["partition"].dataType.simpleString() == "struct<cat:string,id_bucket_2:int>"
    assert sum(r["record_count"] for r in mine) == sum(r["record_count"] for r in table.inspect.data_files().to_pylist())


def test_position_deletes_are_the_delete_files_rows(spark, hist, table):
    name = hist[0]
    expected = []
    for task in table.inspect.delete_files().to_pylist():
        if task["content"] != 1:
            continue
        rows = pq.read_table(task["file_path"].removeprefix("file://")).to_pylist()
        expected += [{"file_path": r["file_path"], "pos": r["pos"], "delete_file_path": task["file_path"],
                      "spec_id": task["spec_id"]} for r in rows]
    mine = ours(spark, f"SELECT file_path, pos, delete_file_path, spec_id FROM {name}.position_deletes")
    assert mine == sorted(expected, key=key) and mine


def test_time_travel_on_snapshot_tables(spark, hist, table):
    name, _, steps = hist
    first = steps["append"]
    assert ours(spark, f"SELECT file_path, record_count FROM {name}.files VERSION AS OF {first}") == \
        theirs(table.inspect.files(first), ["file_path", "record_count"])
    # Iceberg's partition struct spans every spec of the table; pyiceberg's those of the snapshot
    old = ours(spark, f"SELECT * FROM {name}.partitions VERSION AS OF {steps['update']}")
    assert all(r["partition"]["id_bucket_2"] is None for r in old)
    for r in old:
        del r["partition"]["id_bucket_2"]
    assert old == theirs(table.inspect.partitions(steps["update"]))
    assert ours(spark, f"SELECT status, data_file.file_path AS p FROM {name}.entries VERSION AS OF 'v-update'") == \
        sorted(({"status": r["status"], "p": r["data_file"]["file_path"]}
                for r in table.inspect.entries(steps["update"]).to_pylist()), key=key)
    opt = spark.read.option("snapshot-id", str(first)).table(f"{name}.files").count()
    assert opt == len(table.inspect.files(first))
    with pytest.raises(AnalysisException, match="cannot be read at a snapshot"):
        spark.sql(f"SELECT * FROM {name}.snapshots VERSION AS OF {first}").collect()
    with pytest.raises(Exception, match="cannot be read at a snapshot"):
        spark.read.option("snapshot-id", str(first)).table(f"{name}.all_files").collect()


def test_dollar_names_filters_projections_and_types(spark, hist, table):
    name, ident, _ = hist
    ns = ident.split(".")[0]
    assert "files (metadata table)" in spark.sql(f"EXPLAIN SELECT * FROM {name}.files").first()[0]
    dotted = ours(spark, f"SELECT file_path FROM {name}.files WHERE content = 1")
    assert dotted == ours(spark, f"SELECT file_path FROM lake.{ns}.`t$files` WHERE content = 1") and dotted
    assert spark.table(f"{name}.data_files").where("partition.cat = 'a'").select("record_count").count() == \
        sum(1 for r in table.inspect.data_files().to_pylist() if r["partition"]["cat"] == "a")
    assert spark.sql(f"SELECT count(*) FROM {name}.snapshots s JOIN {name}.history h USING (snapshot_id)").first()[0] == \
        len(table.snapshots())
    # Iceberg's Spark types
    assert spark.table(f"{name}.snapshots").schema.simpleString() == (
        "struct<committed_at:timestamp,snapshot_id:bigint,parent_id:bigint,operation:string,manifest_list:string,"
        "summary:map<string,string>>")
    assert spark.table(f"{name}.history").schema.simpleString() == (
        "struct<made_current_at:timestamp,snapshot_id:bigint,parent_id:bigint,is_current_ancestor:boolean>")
    files = spark.table(f"{name}.files").schema
    assert [f.name for f in files.fields][:6] == ["content", "file_path", "file_format", "spec_id", "partition", "record_count"]
    assert files["readable_metrics"].dataType["v"].dataType.simpleString() == (
        "struct<column_size:bigint,value_count:bigint,null_value_count:bigint,nan_value_count:bigint,"
        "lower_bound:double,upper_bound:double>")


def test_errors_name_what_exists(spark, hist):
    name, ident, _ = hist
    with pytest.raises(AnalysisException, match="no metadata table 'snapshotz'.*snapshots, history"):
        spark.sql(f"SELECT * FROM {name}.snapshotz").collect()
    with pytest.raises(AnalysisException, match="no metadata table 'nope'"):
        spark.sql(f"SELECT * FROM lake.{ident.split('.')[0]}.`t$nope`").collect()
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM lake.{ident.split('.')[0]}.missing.snapshots").collect()
    with pytest.raises(Exception, match="read-only"):
        spark.sql(f"INSERT INTO {name}.snapshots SELECT * FROM {name}.snapshots").collect()
    with pytest.raises(Exception, match="read-only"):
        spark.sql(f"DELETE FROM {name}.files WHERE content = 0").collect()


# ---- aggregates answered from metadata ---------------------------------------------------------------


def _explained(spark, sql: str) -> str:
    return spark.sql(f"EXPLAIN {sql}").first()[0]


def _scanned(spark, sql: str) -> list:
    """The rows with the answer from metadata turned off: what a scan of the files says."""
    spark.conf.set("spark.sql.iceberg.aggregate-push-down.enabled", "false")
    try:
        text = _explained(spark, sql)
        assert "aggregate-push-down.enabled is false" in text
        return spark.sql(sql).collect()
    finally:
        spark.conf.unset("spark.sql.iceberg.aggregate-push-down.enabled")


def test_count_min_max_from_metadata_equal_the_scan(spark, ns):
    t = f"lake.{ns}.agg"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, d DATE, ts TIMESTAMP, s STRING, k STRING) PARTITIONED BY (k)")
    spark.sql(f"""INSERT INTO {t} VALUES (1, DATE'2026-01-05', TIMESTAMP'2026-01-01 10:00:00', 'x', 'a'),
        (2, NULL, NULL, 'y', 'a'), (3, DATE'2025-12-31', TIMESTAMP'2026-03-01 00:00:00', NULL, 'b'), (NULL, NULL, NULL, NULL, 'c')""")
    answered = [
        f"SELECT count(*), count(id), min(id), max(id), min(d), max(d), min(ts), max(ts), count(ts) FROM {t}",
        f"SELECT count(*), max(id) FROM {t} WHERE k IN ('a', 'c')",
        f"SELECT min(id) FROM {t} WHERE k = 'zzz'",
    ]
    for sql in answered:
        text = _explained(spark, sql)
        assert "aggregate answered from metadata" in text and "FileScan" not in text, text
        assert spark.sql(sql).collect() == _scanned(spark, sql)
    assert spark.sql(answered[0]).first()[0] == 4
    fallback = {
        f"SELECT min(s) FROM {t}": "bounds of string columns may be truncated",
        f"SELECT count(*) FROM {t} WHERE id > 1": "does not select whole files",
        f"SELECT sum(id) FROM {t}": "sum is not answered",
    }
    for sql, why in fallback.items():
        text = _explained(spark, sql)
        assert f"aggregate not answered from metadata" in text and why in text and "FileScan" in text, text
    spark.sql(f"DELETE FROM {t} WHERE id = 1")  # a position delete in partition a
    sql = f"SELECT count(*), max(id) FROM {t}"
    assert "delete files apply" in _explained(spark, sql)
    assert spark.sql(sql).collect() == [(3, 3)]
    # a partition the delete does not touch is still answered from metadata
    sql = f"SELECT count(*), max(id) FROM {t} WHERE k = 'b'"
    assert "aggregate answered from metadata" in _explained(spark, sql)
    assert spark.sql(sql).collect() == [(1, 3)]


# ---- add_files, register_table, VACUUM ------------------------------------------------------------------


def _parquet(path, ids, cats, field_ids=True):
    import os

    import pyarrow as pa

    os.makedirs(os.path.dirname(path), exist_ok=True)
    meta = (lambda i: {b"PARQUET:field_id": str(i).encode()}) if field_ids else (lambda i: None)
    schema = pa.schema([pa.field("id", pa.int64(), metadata=meta(1)), pa.field("s", pa.string(), metadata=meta(2))])
    pq.write_table(pa.table({"id": ids, "s": cats}, schema=schema), path)


def _snapshot_of(iceberg_catalog, ident):
    s = iceberg_catalog.load_table(ident).current_snapshot()
    return s.snapshot_id if s is not None else None


def test_add_files_registers_parquet_files_with_their_metrics(spark, ns, iceberg_catalog, engines, tmp_path):
    t = f"lake.{ns}.added"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) PARTITIONED BY (s)")
    src = tmp_path / "src"
    _parquet(str(src / "s=a" / "f1.parquet"), [1, 2], ["a", "a"])
    _parquet(str(src / "s=b" / "f2.parquet"), [3], ["b"])
    _parquet(str(tmp_path / "noids" / "f.parquet"), [9], ["a"], field_ids=False)
    call = f"CALL lake.system.add_files(table => '{ns}.added', source_table => '`parquet`.`{src}`'"
    assert spark.sql(call + ", partition_filter => map('s', 'a'))").collect() == [(1, 1)]
    before = _snapshot_of(iceberg_catalog, f"{ns}.added")
    refused = {
        call + ")": "already in table",  # f1 again
        f"CALL lake.system.add_files(table => '{ns}.added', source_table => '`parquet`.`{tmp_path / 'noids'}`')":
            "without Iceberg field ids",
        f"CALL lake.system.add_files(table => '{ns}.added', source_table => '{ns}.other')": "importing a catalog table",
        f"CALL lake.system.add_files(table => '{ns}.added', source_table => '`parquet`.`{tmp_path / 'none'}`')":
            "does not exist",
        call + ", parallelism => 'x')": "must be int",
        call + ", source => 'x')": "its arguments are \\['table', 'source_table', 'partition_filter'",
    }
    for sql, why in refused.items():
        with pytest.raises(Exception, match=why):
            spark.sql(sql).collect()
        assert _snapshot_of(iceberg_catalog, f"{ns}.added") == before
    assert spark.sql(call + ", partition_filter => map('s', 'b'))").collect() == [(1, 1)]
    engines.assert_same(t, expected=[(1, "a"), (2, "a"), (3, "b")])
    files = ours(spark, f"SELECT file_path, record_count, readable_metrics.id.lower_bound AS lo, "
                        f"readable_metrics.id.upper_bound AS hi, partition.s AS s FROM {t}.files")
    assert [(r["record_count"], r["lo"], r["hi"], r["s"]) for r in files] == [(2, 1, 2, "a"), (1, 3, 3, "b")]
    assert all(r["file_path"].startswith(f"file://{src}") for r in files)


def test_register_table_and_vacuum(spark, ns, iceberg_catalog, engines, tmp_path):
    import os

    t = f"lake.{ns}.orig"
    spark.sql(f"CREATE TABLE {t} (id BIGINT)")
    for i in range(3):
        spark.sql(f"INSERT INTO {t} VALUES ({i})")
    location = iceberg_catalog.load_table(f"{ns}.orig").metadata_location
    spark.sql(f"DROP TABLE {t}")  # the files stay
    reg = f"CALL lake.system.register_table(table => '{ns}.again', metadata_file => '{location}')"
    row = spark.sql(reg).first()
    table = iceberg_catalog.load_table(f"{ns}.again")
    assert tuple(row) == (table.current_snapshot().snapshot_id, 3, 3)
    engines.assert_same(f"lake.{ns}.again", expected=[(0,), (1,), (2,)])
    with pytest.raises(AnalysisException, match="already exists"):
        spark.sql(reg).collect()
    with pytest.raises(AnalysisException, match="register_table"):
        spark.sql(f"CALL lake.system.register_table(table => '{ns}.x', metadata_file => '/no/such.metadata.json')").collect()

    name = f"lake.{ns}.again"
    orphan = os.path.join(table.location().removeprefix("file://"), "data", "left-behind.parquet")
    with open(orphan, "wb") as f:
        f.write(b"x")
    os.utime(orphan, (1, 1))
    with pytest.raises(AnalysisException, match="retention below 168 hours.*retentionDurationCheck"):
        spark.sql(f"VACUUM {name} RETAIN 0 HOURS").collect()
    assert len(iceberg_catalog.load_table(f"{ns}.again").snapshots()) == 3
    spark.conf.set("spark.lakerules.vacuum.retentionDurationCheck.enabled", "false")
    spark.conf.set("spark.lakerules.removeOrphanFiles.minAge", "0")
    try:
        dry = [r.path for r in spark.sql(f"VACUUM {name} RETAIN 0 HOURS DRY RUN").collect()]
        assert any(p.endswith("left-behind.parquet") for p in dry) and any("snap-" in p for p in dry)
        assert os.path.exists(orphan) and len(iceberg_catalog.load_table(f"{ns}.again").snapshots()) == 3
        assert [r.path for r in spark.sql(f"VACUUM {name} RETAIN 0 HOURS").collect()] == [table.location()]
    finally:
        spark.conf.unset("spark.lakerules.vacuum.retentionDurationCheck.enabled")
        spark.conf.unset("spark.lakerules.removeOrphanFiles.minAge")
    assert not os.path.exists(orphan)
    assert len(iceberg_catalog.load_table(f"{ns}.again").snapshots()) == 1
    engines.assert_same(name, expected=[(0,), (1,), (2,)])
    with pytest.raises(Exception, match="VACUUM of a path is not supported"):
        spark.sql("VACUUM '/tmp/x'").collect()
