"""Distributed scan planning (lakerules.scan.manifest_job): manifests read by a Spark job give the same
entries, field for field, as pyiceberg's reader on the driver, and the same scans and rows."""

from __future__ import annotations

import pytest
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, GreaterThanOrEqual, In, LessThan
from pyiceberg.manifest import ManifestContent

from lakerules.scan import manifest_job, manifests
from lakerules.scan.planning import plan_scan

from deletes_util import commit_deletes, equality_delete_file
from errors_util import refused

MODE = manifest_job.DATA_MODE_CONF


@pytest.fixture(scope="module")
def table(spark, iceberg_catalog):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.distplan")
    name = "lake.distplan.t"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"""CREATE TABLE {name} (id BIGINT, ts TIMESTAMP, kind STRING, amount DECIMAL(10, 2), f FLOAT)
                  PARTITIONED BY (days(ts), kind, amount, bucket(4, id))
                  TBLPROPERTIES ('commit.manifest-merge.enabled' = 'false', 'format-version' = '2')""")
    for day in range(1, 6):  # a manifest per INSERT
        spark.sql(f"""INSERT INTO {name} SELECT id + {day * 100}, TIMESTAMP'2026-01-0{day} 10:00:00',
                      IF(id % 2 = 0, 'even', 'odd'), CAST(id % 3 AS DECIMAL(10, 2)), CAST(id AS FLOAT) / 3
                      FROM range(12)""")
    spark.sql(f"DELETE FROM {name} WHERE id = 203")  # a position delete file
    t = iceberg_catalog.load_table("distplan.t")
    home = next(task.file for task in t.scan(row_filter=EqualTo("id", 305)).plan_files())
    commit_deletes(iceberg_catalog, "distplan.t", [equality_delete_file(t, {"id": [305]}, home.partition)])
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {name}")


def _remote(spark, table):
    return manifest_job.remote_reader(spark, lambda k: "distributed" if k in (MODE, manifest_job.DELETE_MODE_CONF)
                                      else None, table, table.schema(), manifests.CACHE)


def _fields(entry):
    f = entry.data_file
    return (entry.status, entry.snapshot_id, entry.sequence_number, entry.file_sequence_number, f.content,
            f.file_path, f.file_format, tuple(f.partition), f.record_count, f.file_size_in_bytes, f.column_sizes,
            f.value_counts, f.null_value_counts, f.nan_value_counts, f.lower_bounds, f.upper_bounds, f.key_metadata,
            f.split_offsets, f.equality_ids, f.sort_order_id, f.spec_id)


def test_entries_equal_pyiceberg_reader(spark, iceberg_catalog, table):
    t = iceberg_catalog.load_table("distplan.t")
    listed = t.current_snapshot().manifests(t.io)
    assert len(listed) >= 6 and {m.content for m in listed} == {ManifestContent.DATA, ManifestContent.DELETES}
    local = sorted((_fields(e) for m in listed for e in m.fetch_manifest_entry(t.io, discard_deleted=True)),
                   key=lambda x: x[5])
    remote = sorted((_fields(e) for e in manifest_job.read_entries(spark, t, t.schema(), listed, AlwaysTrue())),
                    key=lambda x: x[5])
    assert [r[5] for r in remote] == [x[5] for x in local]
    for r, x in zip(remote, local):
        assert r == x


@pytest.mark.parametrize("expr", [
    AlwaysTrue(),
    EqualTo("id", 207),
    And(GreaterThanOrEqual("ts", "2026-01-03T00:00:00+00:00"), LessThan("id", 420)),
    In("kind", {"odd"}),
    EqualTo("amount", "2.00"),
    LessThan("f", 1.0),
])
def test_scans_plan_the_same(spark, iceberg_catalog, table, expr):
    t = iceberg_catalog.load_table("distplan.t")
    sid = t.current_snapshot().snapshot_id

    def summary(plan):
        return sorted((p.file.file_path, p.sequence_number, p.snapshot_id,
                       tuple(d.file_path for d in p.position_deletes), tuple(d.file_path for d in p.equality_deletes))
                      for p in plan.files), plan.total_data_files

    local = plan_scan(t, sid, expr)
    remote = plan_scan(t, sid, expr, remote=_remote(spark, t))
    assert summary(remote) == summary(local)
    assert len(local.files) > 0


def test_queries_read_the_same_rows(spark, table):
    queries = [f"SELECT * FROM {table}", f"SELECT id, kind FROM {table} WHERE id BETWEEN 200 AND 310",
               f"SELECT count(*), sum(amount) FROM {table} WHERE kind = 'even'"]
    local = [sorted(spark.sql(q).collect()) for q in queries]
    spark.conf.set(MODE, "distributed")
    spark.conf.set(manifest_job.DELETE_MODE_CONF, "distributed")
    try:
        remote = [sorted(spark.sql(q).collect()) for q in queries]
    finally:
        spark.conf.unset(MODE)
        spark.conf.unset(manifest_job.DELETE_MODE_CONF)
    assert remote == local
    assert all(r.id not in (203, 305) for r in local[0])


def test_auto_distributes_only_many_large_uncached_manifests_on_a_larger_cluster():
    class M:
        def __init__(self, path, content, length=1000):
            self.manifest_path, self.content, self.manifest_length = path, content, length

    ms = [M(f"m{i}", ManifestContent.DATA) for i in range(9)] + [M("d", ManifestContent.DELETES)]
    cached = lambda m: m.manifest_path == "m0"  # noqa: E731
    paths = lambda chosen: [m.manifest_path for m in chosen]  # noqa: E731
    auto = manifest_job.Auto(min_bytes=8000, remote_parallelism=16, local_parallelism=2)
    assert paths(manifest_job.choose(ms, cached, ("auto", "auto"), auto)) == [f"m{i}" for i in range(1, 9)]
    for other in (manifest_job.Auto(8000, 2, 2), manifest_job.Auto(8001, 16, 2), manifest_job.Auto(8000, 16, 4)):
        assert manifest_job.choose(ms, cached, ("auto", "auto"), other) == []  # one machine; too small; too few
    assert paths(manifest_job.choose(ms, cached, ("distributed", "local"), manifest_job.Auto(0, 1, 1))) \
        == [f"m{i}" for i in range(9)]
    assert paths(manifest_job.choose(ms, cached, ("local", "distributed"), auto)) == ["d"]


def test_bad_settings_are_refused(spark, table):
    spark.conf.set(MODE, "everywhere")
    try:
        refused(spark, f"SELECT * FROM {table}", "spark.sql.iceberg.data-planning-mode",
                "auto, local, distributed")
    finally:
        spark.conf.unset(MODE)
    spark.conf.set(manifest_job.MIN_BYTES_KEY, "-1")
    try:
        refused(spark, f"SELECT * FROM {table}", manifest_job.MIN_BYTES_KEY)
    finally:
        spark.conf.unset(manifest_job.MIN_BYTES_KEY)
