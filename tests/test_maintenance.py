"""CALL lake.system.remove_orphan_files and CALL lake.system.expire_snapshots: Iceberg's
arguments and results; only files nothing needs are removed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pyiceberg.manifest import DataFileContent

import faults_util as fu

FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"
OLD = time.time() - 10 * 86400


@pytest.fixture
def table(spark, ns):
    """Four snapshots: two appends, a position delete, an OPTIMIZE that compacts it all."""
    name = f"lake.{ns}.m"
    rows = fu.create(spark, name)  # append, append, delete
    spark.sql(f"OPTIMIZE {name}")
    return name, rows


def age_everything(location: str) -> None:
    """Every file of the table 10 days old, as if written long ago."""
    for d, _, names in os.walk(fu.local(location)):
        for n in names:
            os.utime(Path(d) / n, (OLD, OLD))


def plant(location: str, relative: str, old: bool = True) -> str:
    path = fu.local(location) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a table file")
    if old:
        os.utime(path, (OLD, OLD))
    return str(path)


def call(spark, text: str):
    return spark.sql(f"CALL {text}").collect()


def test_remove_orphan_files_never_touches_files_a_snapshot_needs(spark, ns, table, iceberg_catalog, engines):
    name, rows = table
    short = name.split(".", 1)[1]
    t = iceberg_catalog.load_table(short)
    first = t.snapshots()[0].snapshot_id
    location = t.location()
    age_everything(location)
    planted = {plant(location, "data/stray/part-0.parquet"), plant(location, "metadata/stray-m0.avro"),
               plant(location, "data/p=1/stray.parquet")}
    hidden = [plant(location, "data/_temporary/0/part-1.parquet"), plant(location, "data/.part-2.parquet.crc")]
    fresh = plant(location, "data/fresh.parquet", old=False)
    before = fu.visible_files(location)

    # the default older_than is 3 days ago: the fresh file is left alone
    dry = call(spark, f"lake.system.remove_orphan_files(table => '{short}', dry_run => true)")
    assert [f.name for f in spark.sql(f"CALL lake.system.remove_orphan_files('{short}', NULL, NULL, true)").schema] \
        == ["orphan_file_location"]
    assert {str(fu.local(r.orphan_file_location)) for r in dry} == planted
    assert fu.visible_files(location) == before  # dry run: nothing deleted
    removed = call(spark, f"lake.system.remove_orphan_files(table => '{short}')")
    assert {str(fu.local(r.orphan_file_location)) for r in removed} == planted
    assert fu.visible_files(location) == before - planted
    assert all(Path(p).exists() for p in [*hidden, fresh])
    # every snapshot still reads: the current one in every engine, the first by time travel
    engines.assert_same(name, "id, v, p", expected=rows)
    assert spark.sql(f"SELECT count(*) FROM {name} VERSION AS OF {first}").first()[0] == 12


def test_remove_orphan_files_arguments(spark, ns, table, iceberg_catalog):
    name, _ = table
    short = name.split(".", 1)[1]
    location = iceberg_catalog.load_table(short).location()
    stray = plant(location, "data/stray/x.parquet")
    other = plant(location, "metadata/x.avro")
    # positional, and location: only files under it
    rows = call(spark, f"lake.system.remove_orphan_files('{short}', {FUTURE.replace('2999', '2000')}, "
                       f"'{location}/data', true)")
    assert rows == []  # nothing older than 2000
    with pytest.raises(Exception, match="less than spark.lakerules.removeOrphanFiles.minAge"):
        call(spark, f"lake.system.remove_orphan_files(table => '{short}', older_than => {FUTURE})")
    rows = call(spark, f"lake.system.remove_orphan_files(table => '{short}', location => '{location}/data')")
    assert {str(fu.local(r[0])) for r in rows} == {stray}
    assert Path(other).exists() and not Path(stray).exists()
    for bad, message in [
        (f"table => '{short}', location => '/tmp'", "is not inside the table's location"),
        (f"'{short}', dry_run => true", "mixing positional and named arguments"),
        (f"table => '{short}', bogus => 1", "unknown argument 'bogus'"),
        ("dry_run => true", "missing required argument 'table'"),
        (f"table => '{short}', equal_schemes => map('s3a', 's3')", "argument 'equal_schemes' is not supported"),
        (f"table => '{short}', older_than => 'not a time'", "cannot evaluate the arguments"),
        (f"table => 'nope.{short}'", "nope"),
    ]:
        with pytest.raises(Exception, match=message):
            call(spark, f"lake.system.remove_orphan_files({bad})")
            pytest.fail(f"no error for {bad}")
    with pytest.raises(Exception, match="procedure lake.system.nope not found"):
        call(spark, "lake.system.nope()")
    assert Path(other).exists()


def test_explain_call_runs_nothing(spark, ns, table, iceberg_catalog):
    name, _ = table
    short = name.split(".", 1)[1]
    stray = plant(iceberg_catalog.load_table(short).location(), "data/stray/x.parquet")
    text = spark.sql(f"EXPLAIN CALL lake.system.remove_orphan_files(table => '{short}')").first()[0]
    assert "remove_orphan_files" in text
    assert Path(stray).exists()


def _needed(t, snapshot) -> dict[str, str]:
    """Files one snapshot needs (its manifest list, manifests, live data and delete files)."""
    out = {snapshot.manifest_list: "manifest-list"}
    kinds = {DataFileContent.DATA: "data", DataFileContent.POSITION_DELETES: "position-deletes",
             DataFileContent.EQUALITY_DELETES: "equality-deletes"}
    for m in snapshot.manifests(t.io):
        out[m.manifest_path] = "manifest"
        for e in m.fetch_manifest_entry(t.io, discard_deleted=True):
            out[e.data_file.file_path] = kinds[e.data_file.content]
    return out


RESULT = ["deleted_data_files_count", "deleted_position_delete_files_count", "deleted_equality_delete_files_count",
          "deleted_manifest_files_count", "deleted_manifest_lists_count", "deleted_statistics_files_count"]


def test_expire_snapshots_removes_only_files_no_remaining_snapshot_needs(spark, ns, table, iceberg_catalog, engines):
    name, rows = table
    short = name.split(".", 1)[1]
    t = iceberg_catalog.load_table(short)
    snapshots = t.snapshots()
    assert len(snapshots) == 4
    needed = [_needed(t, s) for s in snapshots]

    # the defaults (older than 5 days, keep 1) expire nothing of a table made just now
    result = spark.sql(f"CALL lake.system.expire_snapshots(table => '{short}')")
    assert result.columns == RESULT and tuple(result.first()) == (0,) * 6
    # keep the last two (positional: table, older_than, retain_last)
    first = call(spark, f"lake.system.expire_snapshots('{short}', {FUTURE}, 2)")[0]
    t = iceberg_catalog.load_table(short)
    assert [s.snapshot_id for s in t.snapshots()] == [s.snapshot_id for s in snapshots[2:]]
    keep = {**needed[2], **needed[3]}
    gone = {p: k for n in needed[:2] for p, k in n.items() if p not in keep}
    assert tuple(first) == _counts(gone)
    assert all(not fu.local(p).exists() for p in gone)
    assert all(fu.local(p).exists() for p in keep)
    engines.assert_same(name, "id, v, p", expected=rows)

    # by id: the DELETE's snapshot, whose delete file and deleted-from data files OPTIMIZE replaced
    with pytest.raises(Exception, match="still referenced by \\['main'\\]"):
        call(spark, f"lake.system.expire_snapshots(table => '{short}', snapshot_ids => ARRAY({snapshots[3].snapshot_id}))")
    with pytest.raises(Exception, match="is not a snapshot of the table"):
        call(spark, f"lake.system.expire_snapshots(table => '{short}', snapshot_ids => ARRAY(1))")
    second = call(spark, f"lake.system.expire_snapshots(table => '{short}', snapshot_ids => ARRAY({snapshots[2].snapshot_id}))")[0]
    gone = {p: k for p, k in needed[2].items() if p not in needed[3]}
    assert second.deleted_position_delete_files_count == 1 and tuple(second) == _counts(gone)
    assert all(not fu.local(p).exists() for p in gone)
    assert all(fu.local(p).exists() for p in needed[3])
    engines.assert_same(name, "id, v, p", expected=rows)
    spark.conf.set("spark.lakerules.removeOrphanFiles.minAge", "0")
    try:
        # nothing unreachable was left behind
        assert call(spark, f"lake.system.remove_orphan_files(table => '{short}', older_than => {FUTURE}, dry_run => true)") == []
    finally:
        spark.conf.unset("spark.lakerules.removeOrphanFiles.minAge")
    with pytest.raises(Exception, match="retain_last must be at least 1"):
        call(spark, f"lake.system.expire_snapshots(table => '{short}', retain_last => 0)")


def _counts(files: dict[str, str]) -> tuple:
    kinds = ["data", "position-deletes", "equality-deletes", "manifest", "manifest-list", "statistics"]
    return tuple(sum(1 for k in files.values() if k == kind) for kind in kinds)


# ---- the way back for pyiceberg after delete_by_key ----------------------------------------------


@pytest.mark.parametrize("large_files", [False, True])
def test_optimize_makes_equality_deletes_readable_by_pyiceberg(spark, ns, iceberg_catalog, engines, large_files):
    """pyiceberg cannot read equality deletes (delete_by_key writes them); OPTIMIZE rewrites the
    files they apply to and drops them. Files at or above minFileSize need deleteFileThreshold=1."""
    import lakerules

    t = f"lake.{ns}.eq"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, kind STRING) PARTITIONED BY (kind)")
    spark.sql(f"INSERT INTO {t} SELECT id, CAST(id % 2 AS STRING) FROM range(0, 20, 1, 2)")
    keys = spark.createDataFrame([(3, "1"), (4, "0"), (15, "1")], "id long, kind string")
    assert lakerules.delete_by_key(spark, t, keys, on=["id"]) == 3
    expected = [(i, str(i % 2)) for i in range(20) if i not in (3, 4, 15)]
    with pytest.raises(Exception, match="PyIceberg does not yet support equality deletes"):
        engines.pyiceberg(t)

    settings = {"spark.lakerules.optimize.minFileSize": "1"} if large_files else {}
    if large_files:  # every file is "large": plain OPTIMIZE keeps them, and the equality deletes
        settings["spark.lakerules.optimize.deleteFileThreshold"] = "1"
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        spark.sql(f"OPTIMIZE {t}").collect()
    finally:
        for k in settings:
            spark.conf.unset(k)

    table = iceberg_catalog.load_table(f"{ns}.eq")
    assert table.current_snapshot().summary["total-equality-deletes"] == "0"
    assert not [f for f in table.inspect.files().to_pylist() if f["content"] == DataFileContent.EQUALITY_DELETES]
    assert len(engines.assert_same(t, expected=expected)) == 17  # pyiceberg and DuckDB read lakerules' rows


def test_optimize_and_rewrite_data_files_read_through_the_equality_delete_set(spark, ns, iceberg_catalog, engines, monkeypatch):
    """OPTIMIZE and rewrite_data_files read the rows to rewrite through the scan's read path: CDC
    batches' equality deletes (each batch's apply to every older file) by the JVM hash set, its
    rows resolved to positions first."""
    import lakerules
    from lakerules.scan import equality_deletes

    applied = []
    real = equality_deletes.positions

    def spied(*a):
        resolved = real(*a)
        if resolved is not None:
            applied.append(resolved)
        return resolved

    monkeypatch.setattr(equality_deletes, "positions", spied)
    expected = {}
    for name, rewrite in (("eq_opt", "OPTIMIZE {t}"), ("eq_rdf", "CALL lake.system.rewrite_data_files(table => '{i}')")):
        t = f"lake.{ns}.{name}"
        spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
        for batch in range(3):
            spark.sql(f"INSERT INTO {t} SELECT id, 'b{batch}' FROM range({batch * 10}, {batch * 10 + 10}, 1, 1)")
            if batch:  # a key of every older batch, and one that is re-inserted after (it stays)
                keys = spark.createDataFrame([(b * 10 + batch,) for b in range(batch)] + [(100 + batch,)], "id long")
                lakerules.delete_by_key(spark, t, keys, on=["id"])
                spark.sql(f"INSERT INTO {t} VALUES ({100 + batch}, 'again')")
        expected[name] = engines.lakerules(t)
        assert len(expected[name]) == 30 + 2 - 3
        del applied[:]
        spark.sql(rewrite.format(t=t, i=f"{ns}.{name}")).collect()
        assert applied, "the rewrite did not read through the equality delete set"
        assert iceberg_catalog.load_table(f"{ns}.{name}").current_snapshot().summary["total-equality-deletes"] == "0"
        assert engines.assert_same(t, expected=expected[name])  # pyiceberg and DuckDB read the rewritten rows


def test_plain_optimize_keeps_equality_deletes_of_large_files(spark, ns, iceberg_catalog):
    """Why docs/sql.md (CDC deletes) names deleteFileThreshold: a file of minFileSize or more is not compacted."""
    import lakerules

    t = f"lake.{ns}.eq_large"
    spark.sql(f"CREATE TABLE {t} (id BIGINT)")
    spark.sql(f"INSERT INTO {t} SELECT id FROM range(0, 10, 1, 1)")
    lakerules.delete_by_key(spark, t, spark.createDataFrame([(3,)], "id long"), on=["id"])
    spark.conf.set("spark.lakerules.optimize.minFileSize", "1")
    try:
        spark.sql(f"OPTIMIZE {t}").collect()
    finally:
        spark.conf.unset("spark.lakerules.optimize.minFileSize")
    summary = iceberg_catalog.load_table(f"{ns}.eq_large").current_snapshot().summary
    assert summary["total-equality-deletes"] == "1"
