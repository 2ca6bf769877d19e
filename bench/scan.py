"""Scan planning benchmarks: full scans, scans with position and equality deletes, point
queries, and lakerules against pyiceberg and DuckDB on the same table."""

from __future__ import annotations

import glob
import os
import time

from pyiceberg.manifest import DataFileContent
from pyiceberg.types import LongType, NestedField, StringType

import lakerules
from lakerules.write import row_delta
from lakerules.write.files import write_files

from common import Report, side_by_side, timed, verdict

AGG = "SELECT count(*), sum(id), sum(v), max(kind), min(ts), max(payload) FROM {src}"


def _catalog(spark):
    return lakerules._backend.catalogs.get("lake")


def _files(spark, name):
    t = _catalog(spark).load_table(name)
    return [task.file.file_path for task in t.scan().plan_files()]


def _agg(spark, src: str):
    return tuple(spark.sql(AGG.format(src=src)).collect()[0])


def setup(spark, rows: int):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql("CREATE TABLE lake.bench.t (id BIGINT, ts TIMESTAMP, kind STRING, v DOUBLE, payload STRING)")
    spark.sql(f"""INSERT INTO lake.bench.t SELECT id,
        TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, CAST(id % 2592000 AS INT)),
        element_at(array('click', 'view', 'buy', 'spam'), CAST(id % 4 AS INT) + 1),
        CAST(id % 1000 AS DOUBLE) / 7, concat('payload-', CAST(id * 7919 % 100003 AS STRING))
        FROM range({rows})""")


def full_scan(spark, runs, report):
    paths = _files(spark, "bench.t")
    spark.read.parquet(*paths).createOrReplaceTempView("plain_t")
    assert _agg(spark, "lake.bench.t") == _agg(spark, "plain_t")
    t = side_by_side(runs, lake=lambda: _agg(spark, "lake.bench.t"), plain=lambda: _agg(spark, "plain_t"))
    ratio = t["lake"] / t["plain"]
    report.add("full scan (6 aggregates over every column) vs spark.read.parquet of the same files",
               f"{t['lake']:.2f} s vs {t['plain']:.2f} s = {ratio:.2f}x", "<= 1.05x", verdict(ratio <= 1.05))
    return t["lake"]


def _copy(spark, name):
    spark.sql(f"CREATE TABLE lake.bench.{name} AS SELECT * FROM lake.bench.t")


def position_deletes(spark, runs, report):
    _copy(spark, "pos")
    table = _catalog(spark).load_table("bench.pos")
    fields = [NestedField(2147483546, "file_path", StringType(), required=True),
              NestedField(2147483545, "pos", LongType(), required=True)]
    rows = (spark.read.parquet(*_files(spark, "bench.pos"))
            .where("id % 100 = 42")
            .selectExpr("_metadata.file_path AS file_path", "_metadata.row_index AS pos"))
    # the manifest's path form, as other writers do
    paths = {lakerules.scan.read.normal_path(p): p for p in _files(spark, "bench.pos")}
    mapping = spark.createDataFrame(list(paths.items()), "n string, manifest_path string")
    rows = (rows.withColumn("n", lakerules.scan.read.spark_file_path("file_path"))
            .join(mapping, "n").selectExpr("manifest_path AS file_path", "pos")
            .repartition(10).sortWithinPartitions("file_path", "pos"))
    written = write_files(spark, "lake", table, rows, fields=fields, content=DataFileContent.POSITION_DELETES)
    row_delta.commit(table, [], written)
    deleted = sum(f.record_count for f in written)
    base = spark.table("lake.bench.t").count()
    assert spark.table("lake.bench.pos").count() == base - deleted
    def cold():
        # the deleted positions are collected and broadcast again, as in a new process
        with lakerules.scan.read._cache_lock:
            lakerules.scan.read._position_sets.clear()
        lakerules.spark.delete_sets.clear_delete_file_cache(spark)
        return _agg(spark, "lake.bench.pos")

    t = side_by_side(runs, deletes=lambda: _agg(spark, "lake.bench.pos"), none=lambda: _agg(spark, "lake.bench.t"),
                     cold=cold)
    ratio = t["deletes"] / t["none"]
    report.add(f"scan with 1% of rows ({deleted:,}) deleted by {len(written)} position delete files vs no deletes",
               f"{t['deletes']:.2f} s vs {t['none']:.2f} s = {ratio:.2f}x (delete positions read by an "
               f"earlier query; read in the query: {t['cold']:.2f} s = {t['cold'] / t['none']:.2f}x)",
               "<= 1.2x", verdict(ratio <= 1.2))


def equality_deletes(spark, runs, report, rows):
    _copy(spark, "eq1k")
    keys = spark.range(1000).selectExpr(f"id * {max(rows // 1000, 1)} AS id")
    lakerules.delete_by_key(spark, "lake.bench.eq1k", keys, on=["id"])
    t = side_by_side(runs, deletes=lambda: _agg(spark, "lake.bench.eq1k"), none=lambda: _agg(spark, "lake.bench.t"))
    ratio = t["deletes"] / t["none"]
    report.add("scan with one equality delete file of 1,000 ids vs no deletes",
               f"{t['deletes']:.2f} s vs {t['none']:.2f} s = {ratio:.2f}x", "<= 1.15x", verdict(ratio <= 1.15))

    _copy(spark, "eq100k")
    n = min(100_000, rows // 10)
    keys = spark.range(n).selectExpr(f"id * {max(rows // n, 1)} AS id")
    lakerules.delete_by_key(spark, "lake.bench.eq100k", keys, on=["id"])
    key = lakerules.scan.read.EQ_FILTER_THRESHOLD_KEY

    def with_threshold(value):
        def run():
            spark.conf.set(key, str(value))
            try:
                return _agg(spark, "lake.bench.eq100k")
            finally:
                spark.conf.unset(key)
        return run

    assert with_threshold(n + 1)() == with_threshold(0)()
    t = side_by_side(runs, filter=with_threshold(n + 1), antijoin=with_threshold(0), default=lambda: _agg(spark, "lake.bench.eq100k"))
    faster = "filter" if t["filter"] < t["antijoin"] else "anti-join"
    default_path = "filter" if n <= lakerules.scan.read.EQ_FILTER_THRESHOLD_DEFAULT else "anti-join"
    report.add(f"one equality delete file of {n:,} ids: NOT IN filter vs broadcast anti-join",
               f"filter {t['filter']:.2f} s, anti-join {t['antijoin']:.2f} s; default threshold "
               f"{lakerules.scan.read.EQ_FILTER_THRESHOLD_DEFAULT:,} takes the {default_path} ({t['default']:.2f} s)",
               "threshold picks the faster", verdict(default_path == faster))


def point_query(spark, rows, report):
    spark.sql("CREATE TABLE lake.bench.p (id BIGINT, ts TIMESTAMP, kind STRING, v DOUBLE, payload STRING) "
              "PARTITIONED BY (bucket(16, id))")
    spark.sql("INSERT INTO lake.bench.p SELECT * FROM lake.bench.t")
    seen = []

    def record(plan, ctx):
        if isinstance(plan, lakerules.plan.nodes.LakeScan):
            seen.append(plan)
        return plan

    probe = rows // 3
    lakerules.register_rule(record)
    try:
        elapsed = timed(lambda: spark.sql(f"SELECT * FROM lake.bench.p WHERE id = {probe}").collect())
    finally:
        lakerules.unregister_rule(record)
    (scan,) = seen
    # the files that can hold the id: its bucket's files whose id bounds contain it
    from pyiceberg.expressions import EqualTo
    can = len(list(_catalog(spark).load_table("bench.p").scan(row_filter=EqualTo("id", probe)).plan_files()))
    report.add(f"point query id = {probe} on {rows:,} rows, PARTITIONED BY (bucket(16, id))",
               f"read {len(scan.tasks)} of {scan.plan.total_data_files} files ({elapsed:.2f} s); files that can match: {can}",
               "only files that can match", verdict(len(scan.tasks) == can))


def other_engines(spark, runs, report):
    import duckdb

    table = _catalog(spark).load_table("bench.pos")
    con = duckdb.connect()
    for name in ("avro", "iceberg"):
        module = __import__(f"duckdb_extension_{name}")
        con.execute(f"LOAD '{glob.glob(os.path.join(os.path.dirname(module.__file__), 'extensions', '**', f'{name}.duckdb_extension'), recursive=True)[0]}'")
    sql = "SELECT count(*), sum(id), sum(v) FROM {src}"

    def ours():
        return tuple(spark.sql(sql.format(src="lake.bench.pos")).collect()[0])

    def pyiceberg():
        import pyarrow.compute as pc

        arrow = table.scan(selected_fields=("id", "v")).to_arrow()
        return (arrow.num_rows, pc.sum(arrow["id"]).as_py(), pc.sum(arrow["v"]).as_py())

    def duck():
        return tuple(con.execute(sql.format(src=f"iceberg_scan('{table.metadata_location}')")).fetchone())

    a, b, c = ours(), pyiceberg(), duck()
    same = a[:2] == b[:2] == c[:2] and abs(a[2] - b[2]) < 1e-6 * abs(a[2]) and abs(a[2] - c[2]) < 1e-6 * abs(a[2])
    t = side_by_side(runs, lakerules=ours, pyiceberg=pyiceberg, duckdb=duck)
    report.add("table with 1% position-deleted rows, count/sum(id)/sum(v): lakerules vs pyiceberg to_arrow() vs DuckDB iceberg_scan",
               f"{t['lakerules']:.2f} s / {t['pyiceberg']:.2f} s / {t['duckdb']:.2f} s "
               f"(lakerules/pyiceberg {t['lakerules'] / t['pyiceberg']:.2f}x, lakerules/DuckDB {t['lakerules'] / t['duckdb']:.2f}x); "
               f"results identical: {same}", "report; identical results", verdict(same))


def run(spark, args, report: Report) -> None:
    t0 = time.perf_counter()
    setup(spark, args.rows)
    print(f"  (table of {args.rows:,} rows written in {time.perf_counter() - t0:.1f} s)", flush=True)
    full_scan(spark, args.runs, report)
    position_deletes(spark, args.runs, report)
    equality_deletes(spark, args.runs, report, args.rows)
    point_query(spark, args.rows, report)
    other_engines(spark, args.runs, report)
