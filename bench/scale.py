"""Scale benchmarks (issue #18): tables with many files, many manifests and long histories.

1. many files: --files files of 50 rows (default 20,000 = 1M rows) added with pyiceberg
   ``add_files`` in 40 commits; ``count(*), sum(v)`` through lakerules vs ``spark.read.parquet``
   of the same files, before and after a DELETE and an UPDATE of one row each; EXPLAIN of the
   full scan (planning alone).
2. metadata: --big-files files of 10 rows (default 100,000) in 100 commits; a point query
   ``WHERE id = x`` (planning + read) vs pyiceberg's ``plan_files()`` of the same filter, a
   DELETE of one row, and the driver's memory while planning. Cold: the first point query of the
   process, and the first of a new SparkSession in the running JVM with every cache of metadata
   and manifests emptied, each vs DuckDB's ``iceberg_scan`` in a new connection.
3. long history: --inserts single-row INSERTs (default 1,000) into one table: the last commits'
   time vs the early ones', the manifests the table ends with, and a point query on it vs the
   same rows written by one INSERT.
5. planning: a table of --plan-files files of 10 rows added in 200 commits (a manifest each):
   a point query's planning (EXPLAIN) with no manifest cached, at snapshots of 10 to 200
   manifests, on the driver (``data-planning-mode`` local) vs as a Spark job (distributed): where
   the two cross is what the job costs (the auto mode uses it only on a cluster larger than the driver).
4. many deletes: --deletes single-row DELETEs (default 1,000), each on another file of a table of
   as many files of 50 rows (so as many position delete files, each applying to one data file):
   the full scan vs ``spark.read.parquet`` of the same files, then OPTIMIZE (which compacts the
   small files and applies the deletes) and the full scan again.

The tables of 1. and 2. are written with pyarrow (tiny Parquet files carrying the Iceberg field
ids, a process per core) into their own pyiceberg SQL catalog under bench/out/scale/cache/<size>/
and registered in the session's catalog with ``register_table``; ``--reuse`` takes them from
there when a run of the same size made them before (the DELETE/UPDATE of a run leave a few
unreferenced files in the cached table's folder: the cached metadata file stays the original).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import lakerules

from common import OUT, Report, side_by_side, timed, verdict

KEEP = ("cache",)  # session() leaves bench/out/scale/cache alone
CACHE = OUT / "scale" / "cache"
CACHE_VERSION = 1  # bump when the generated tables change
MANY_ROWS, MANY_COMMITS = 50, 40
BIG_ROWS, BIG_COMMITS = 10, 100
FILES_PER_DIR = 1000
AGG = "SELECT count(*), sum(v) FROM {src}"


def size(args) -> str:
    return (f"{args.files:,} x {MANY_ROWS} and {args.big_files:,} x {BIG_ROWS} files, {args.inserts:,} INSERTs, "
            f"{args.deletes:,} DELETEs")


# ---- generation ----------------------------------------------------------------------------------


def _arrow_schema():
    import pyarrow as pa

    def field(name, type_, fid):
        return pa.field(name, type_, metadata={b"PARQUET:field_id": str(fid).encode()})

    return pa.schema([field("id", pa.int64(), 1), field("v", pa.float64(), 2), field("k", pa.string(), 3)])


def _iceberg_schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    return Schema(NestedField(1, "id", LongType()), NestedField(2, "v", DoubleType()), NestedField(3, "k", StringType()))


def _path(root: str, i: int) -> str:
    return f"{root}/{i // FILES_PER_DIR:04d}/f{i:07d}.parquet"


def value(i: int) -> float:
    """v of the row with id i: quarters, so every sum is exact in a double, whatever its order."""
    return i / 4


def _write_range(root: str, start: int, stop: int, rows: int) -> None:
    """Files start..stop-1; file i holds ids [i * rows, (i + 1) * rows): a narrow id range each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    for i in range(start, stop):
        ids = range(i * rows, (i + 1) * rows)
        table = pa.table([pa.array(ids, pa.int64()), pa.array([value(x) for x in ids], pa.float64()),
                          pa.array([f"k{x % 10}" for x in ids], pa.string())], schema=schema)
        path = _path(root, i)
        if i % FILES_PER_DIR == 0 or i == start:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(table, path)


def generate(files: int, rows: int, commits: int, reuse: bool) -> dict:
    """The cached table of `files` files of `rows` rows: {metadata_location, paths, ...}."""
    from pyiceberg.catalog import load_catalog

    folder = CACHE / f"{files}x{rows}"
    marker = folder / "table.json"
    if reuse and marker.exists():
        info = json.loads(marker.read_text())
        if info.get("version") == CACHE_VERSION and os.path.exists(info["metadata_location"].removeprefix("file://")):
            info["paths"] = [_path(info["root"], i) for i in range(files)]
            info["reused"] = True
            return info
    shutil.rmtree(folder, ignore_errors=True)
    root = str(folder / "files")
    started = time.perf_counter()
    workers = max(os.cpu_count() or 1, 1)
    step = max(files // (workers * 8), 1)
    # spawn, not fork: this process runs a JVM gateway's threads
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in [pool.submit(_write_range, root, s, min(s + step, files), rows) for s in range(0, files, step)]:
            f.result()
    written = time.perf_counter() - started

    started = time.perf_counter()
    cat = load_catalog("scale-cache", **lakerules.embedded_catalog(folder))
    cat.create_namespace("bench")
    schema = _iceberg_schema()
    table = cat.create_table("bench.t", schema,
                             properties={"schema.name-mapping.default": schema.name_mapping.model_dump_json()})
    paths = [_path(root, i) for i in range(files)]
    per_commit = -(-files // commits)
    for s in range(0, files, per_commit):
        # the paths are new and unique: skip pyiceberg's duplicate check (a scan of every manifest)
        table.add_files(paths[s:s + per_commit], check_duplicate_files=False)
    added = time.perf_counter() - started
    info = {"version": CACHE_VERSION, "files": files, "rows": rows, "commits": -(-files // per_commit),
            "root": root, "metadata_location": table.metadata_location,
            "written_s": round(written, 1), "added_s": round(added, 1)}
    marker.write_text(json.dumps(info, indent=1))
    return {**info, "paths": paths, "reused": False}


def _catalog():
    return lakerules._backend.catalogs.get("lake")


def register(spark, name: str, info: dict) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    _catalog().register_table(("bench", name), info["metadata_location"])


def _generated(info: dict) -> str:
    if info["reused"]:
        return f"reused from {CACHE.name}/ (written in {info['written_s']} s, added in {info['added_s']} s when made)"
    return f"written in {info['written_s']} s, add_files in {info['added_s']} s"


# ---- measurements --------------------------------------------------------------------------------


def _agg(spark, src: str) -> tuple:
    return tuple(spark.sql(AGG.format(src=src)).collect()[0])


def _explain(spark, sql: str) -> float:
    return timed(lambda: spark.sql(f"EXPLAIN {sql}").collect())


def many_files(spark, args, report: Report) -> None:
    files, rows = args.files, args.files * MANY_ROWS
    info = generate(files, MANY_ROWS, MANY_COMMITS, args.reuse)
    print(f"  ({files:,} files: {_generated(info)})", flush=True)
    register(spark, "many", info)
    lake = "lake.bench.many"
    full = AGG.format(src=lake)
    cold_explain = _explain(spark, full)  # the first planning of the table in this process

    started = time.perf_counter()
    spark.read.parquet(*info["paths"]).createOrReplaceTempView("plain_many")
    listing = time.perf_counter() - started
    expected = (rows, sum(value(i) for i in range(rows)))
    ours, plain = _agg(spark, lake), _agg(spark, "plain_many")
    same = ours == plain == expected
    t = side_by_side(args.runs, lakerules=lambda: _agg(spark, lake), plain=lambda: _agg(spark, "plain_many"))
    ratio = t["lakerules"] / t["plain"]
    report.add(f"count(*), sum(v) over {files:,} files x {MANY_ROWS} rows ({rows:,} rows, {info['commits']} add_files "
               "commits): lakerules vs spark.read.parquet of the same files",
               f"{t['lakerules']:.2f} s vs {t['plain']:.2f} s = **{ratio:.2f}x**; results identical: {same}",
               "<= 1.1x, identical", verdict(ratio <= 1.1 and same))
    explain = statistics.median(_explain(spark, full) for _ in range(args.runs))
    report.add("  planning alone: EXPLAIN of that full scan",
               f"{explain:.2f} s warm (median of {args.runs}), {cold_explain:.2f} s the first time in the process; "
               f"spark.read.parquet(*paths) itself (its file listing, done once for the plain side): {listing:.2f} s")

    # one DELETE and one UPDATE: a position delete file each, applying to one data file each
    gone, changed = (files // 3) * MANY_ROWS + 7, (2 * files // 3) * MANY_ROWS + 11
    took_delete = timed(lambda: spark.sql(f"DELETE FROM {lake} WHERE id = {gone}").collect())
    took_update = timed(lambda: spark.sql(f"UPDATE {lake} SET v = -1 WHERE id = {changed}").collect())
    expected = (rows - 1, expected[1] - value(gone) - value(changed) - 1)
    ours = _agg(spark, lake)
    summary = _catalog().load_table("bench.many").current_snapshot().summary
    deletes = summary.get("total-position-deletes"), summary.get("total-delete-files")
    t = side_by_side(args.runs, lakerules=lambda: _agg(spark, lake), plain=lambda: _agg(spark, "plain_many"))
    ratio = t["lakerules"] / t["plain"]
    report.add(f"the same after a DELETE and an UPDATE of 1 row each ({deletes[1]} delete files, {deletes[0]} "
               "deleted positions) vs spark.read.parquet of the original files",
               f"{t['lakerules']:.2f} s vs {t['plain']:.2f} s = **{ratio:.2f}x**; result as expected: {ours == expected} "
               f"(DELETE took {took_delete:.2f} s, UPDATE {took_update:.2f} s)",
               "<= 1.15x, as expected", verdict(ratio <= 1.15 and ours == expected))
    spark.catalog.dropTempView("plain_many")


def _peak_rss_reset() -> bool:
    """Reset this process's peak RSS (VmHWM) so the next reading is the peak since (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rss_mib() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MiB."""
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, kb = line.split(":")[0], int(line.split()[1])
                out[key] = kb / 1024
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return peak, peak
    return out["VmRSS"], out["VmHWM"]


def _heap_mib(spark) -> float:
    """JVM heap in use after a full GC, in MiB."""
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    spark._jvm.java.lang.System.gc()
    return (runtime.totalMemory() - runtime.freeMemory()) / 2**20


def metadata(spark, args, report: Report) -> None:
    from pyiceberg.expressions import EqualTo

    files, rows = args.big_files, args.big_files * BIG_ROWS
    info = generate(files, BIG_ROWS, BIG_COMMITS, args.reuse)
    print(f"  ({files:,} files: {_generated(info)})", flush=True)
    register(spark, "big", info)
    lake = "lake.bench.big"
    cat = _catalog()

    # the first point query of the process (no manifest cached) vs DuckDB's cold iceberg_scan of it
    x = (4243 * BIG_ROWS + 7) % rows
    first = timed(lambda: spark.sql(f"SELECT * FROM {lake} WHERE id = {x}").collect())
    duck = _duck_cold(cat.load_table("bench.big").metadata_location, x)
    ratio = first / duck
    report.add(f"first point query WHERE id = x of the process on {files:,} files x {BIG_ROWS} rows ({info['commits']} "
               "manifests, none cached; planning + read): lakerules vs DuckDB iceberg_scan in a new connection",
               f"{first:.2f} s vs {duck:.2f} s = **{ratio:.2f}x**", "<= 2x", verdict(ratio <= 2.0))
    archive = _archive_option(spark)
    floor = _spark_first_query(info["paths"][x // BIG_ROWS], x, archive)
    started = "both JVMs started from the class-data archive" if archive else "no class-data archive (not built)"
    report.add("the same first point query of the process: lakerules (planning the 100 manifests, then the read) vs "
               "plain Spark's first query of a process reading only the one Parquet file that holds the row "
               f"(schema given: no inference, no table; {started})",
               f"{first:.2f} s vs {floor:.2f} s = {first / floor:.2f}x; DuckDB / plain Spark = {duck / floor:.2f}x",
               "report", "")

    session = _new_session_query(spark, lake, rows)
    report.add("first point query WHERE id = x of a new session in the running JVM (as a Spark Connect or Thrift "
               "server's new client; lakerules' and pyiceberg's caches of metadata and manifests emptied first: every "
               "manifest read and decoded again) vs DuckDB iceberg_scan in a new connection of the running process; "
               "medians of 3",
               f"{session:.2f} s vs {duck:.2f} s = **{session / duck:.2f}x**", "<= 2x", verdict(session / duck <= 2.0))

    from lakerules.scan.manifests import CACHE
    CACHE.clear()  # the full scan's planning below reads every manifest again
    heap_before = _heap_mib(spark)
    rss_before, _ = _rss_mib()
    exact_peak = _peak_rss_reset()
    cold_explain = _explain(spark, AGG.format(src=lake))
    _, rss_peak = _rss_mib()
    heap_after = _heap_mib(spark)

    def ids():
        k = 0
        while True:  # a different id each run, spread over the table
            k += 1
            yield (k * 7919 * BIG_ROWS + 3) % rows

    ours_ids, theirs_ids = ids(), ids()

    def ours():
        x = next(ours_ids)
        got = spark.sql(f"SELECT * FROM {lake} WHERE id = {x}").collect()
        assert [tuple(r) for r in got] == [(x, value(x), f"k{x % 10}")], (x, got)

    def theirs():
        x = next(theirs_ids)
        tasks = list(cat.load_table("bench.big").scan(row_filter=EqualTo("id", x)).plan_files())
        assert len(tasks) == 1, (x, len(tasks))

    t = side_by_side(args.runs, lakerules=ours, pyiceberg=theirs)
    ok = t["lakerules"] <= 1.0 and t["lakerules"] <= t["pyiceberg"]
    report.add(f"point query WHERE id = x on {files:,} files x {BIG_ROWS} rows ({info['commits']} manifests), warm, "
               "planning + read: lakerules vs pyiceberg load_table + scan(row_filter).plan_files()",
               f"{t['lakerules']:.2f} s vs {t['pyiceberg']:.2f} s = {t['lakerules'] / t['pyiceberg']:.2f}x",
               "<= 1 s and <= plan_files", verdict(ok))

    k = iter(range(1, 10**9))

    def delete():
        x = (next(k) * 104729 * BIG_ROWS + 5) % rows  # a different row each run
        (row,) = spark.sql(f"DELETE FROM {lake} WHERE id = {x}").collect()
        assert row.num_affected_rows == 1, (x, row)

    took = [timed(delete) for _ in range(args.runs + 1)]  # the first merges the table's 100 manifests
    later = ", ".join(f"{t:.2f}" for t in took[1:])
    report.add(f"DELETE of 1 row WHERE id = x on the {files:,}-file table: the first (its commit merges the "
               f"{info['commits']} manifests), then each later one", f"{took[0]:.2f} s, then {later} s", "each <= 2 s",
               verdict(max(took) <= 2.0))
    peak = f"{rss_peak:.0f} MiB peak while planning" if exact_peak else f"{rss_peak:.0f} MiB peak of the process"
    report.add(f"driver memory planning the full scan of the {files:,}-file table (EXPLAIN, first time: {cold_explain:.2f} s)",
               f"Python RSS {rss_before:.0f} MiB before, {peak}; JVM heap used after GC {heap_before:.0f} MiB before, "
               f"{heap_after:.0f} MiB after")


_FIRST_QUERY = """
import sys, time
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").appName("lakerules-bench-spark-first-query")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", "8g").config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
path, x = sys.argv[1], int(sys.argv[2])
started = time.perf_counter()
got = spark.read.schema("id BIGINT, v DOUBLE, k STRING").parquet(path).where(f"id = {x}").collect()
took = time.perf_counter() - started
assert [tuple(r) for r in got] == [(x, x / 4, f"k{x % 10}")], got
print(f"TOOK {took}")
"""


def _archive_option(spark) -> str:
    """The -XX:SharedArchiveFile option this session's JVM started with (lakerules.session() adds
    the class-data archive make setup built), or ""."""
    args = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    return next((a for a in args if a.startswith("-XX:SharedArchiveFile=")), "")


def _spark_first_query(path: str, x: int, archive: str = "") -> float:
    """Seconds of plain Spark's first query of a new process (its session started untimed, as
    the bench's is, without lakerules; from the same class-data archive as the bench's JVM when
    ``archive`` names one) reading only ``path``, the file that holds row ``x``: what a JVM
    engine's first query costs before any planning."""
    import subprocess
    import sys

    from lakerules import jvm_archive

    env = {**os.environ}
    if archive:
        env["SPARK_SUBMIT_OPTS"] = f"{env.get('SPARK_SUBMIT_OPTS', '')} {archive} {jvm_archive.QUIET}".strip()
    out = subprocess.run([sys.executable, "-c", _FIRST_QUERY, path, str(x)], capture_output=True, text=True,
                         check=True, env=env).stdout
    return float(next(line for line in out.splitlines() if line.startswith("TOOK ")).split()[1])


def _forget_metadata() -> None:
    """Empty this process's caches of table metadata and manifests: lakerules' (parsed metadata
    files, decoded manifests) and pyiceberg's (a manifest list's ManifestFiles)."""
    from pyiceberg.manifest import clear_manifest_cache

    from lakerules.iceberg import metadata_cache
    from lakerules.scan.manifests import CACHE

    CACHE.clear()
    metadata_cache.clear()
    clear_manifest_cache()


def _new_session_query(spark, lake: str, rows: int) -> float:
    """Seconds of the first point query of a new SparkSession of the running JVM, every cache of
    metadata and manifests emptied before it: median of 3, another id each."""
    times = []
    for k in range(3):
        x = ((9001 + 1013 * k) * BIG_ROWS + 5) % rows
        _forget_metadata()
        session = spark.newSession()
        started = time.perf_counter()
        got = session.sql(f"SELECT * FROM {lake} WHERE id = {x}").collect()
        times.append(time.perf_counter() - started)
        assert [tuple(r) for r in got] == [(x, value(x), f"k{x % 10}")], (x, got)
    return statistics.median(times)


def _duck_cold(metadata_location: str, x: int) -> float:
    """Seconds of DuckDB's SELECT * ... WHERE id = x over iceberg_scan in a new connection (the
    extensions loaded first, untimed): median of 3, each cold."""
    import glob

    import duckdb

    times = []
    for _ in range(3):
        con = duckdb.connect()
        for name in ("avro", "iceberg"):
            module = __import__(f"duckdb_extension_{name}")
            con.execute(f"LOAD '{glob.glob(os.path.join(os.path.dirname(module.__file__), 'extensions', '**', f'{name}.duckdb_extension'), recursive=True)[0]}'")
        started = time.perf_counter()
        got = con.execute(f"SELECT * FROM iceberg_scan('{metadata_location}') WHERE id = {x}").fetchall()
        times.append(time.perf_counter() - started)
        assert [tuple(r) for r in got] == [(x, value(x), f"k{x % 10}")], (x, got)
        con.close()
    return statistics.median(times)


def history(spark, args, report: Report) -> None:
    n = args.inserts
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql("CREATE TABLE lake.bench.hist (id BIGINT, v DOUBLE, k STRING)")
    times = []
    for i in range(n):
        times.append(timed(lambda: spark.sql(f"INSERT INTO lake.bench.hist VALUES ({i}, {value(i)}, 'k{i % 10}')")))
        if (i + 1) % 100 == 0:
            print(f"    {i + 1} INSERTs, the last took {times[-1]:.2f} s", flush=True)
    early, late = statistics.median(times[5:15]), statistics.median(times[-10:])
    ratio = late / early
    report.add(f"{n:,} single-row INSERTs into one table: commits {n - 9:,}-{n:,} vs commits 6-15 (medians)",
               f"{late:.2f} s vs {early:.2f} s = **{ratio:.2f}x** (all {n:,}: {sum(times):.0f} s)", "<= 1.5x",
               verdict(ratio <= 1.5))
    table = _catalog().load_table("bench.hist")
    manifests = len(table.current_snapshot().manifests(table.io))
    report.add(f"manifests of the table after the {n:,} INSERTs", f"{manifests:,}", "<= ~10", verdict(manifests <= 10))

    spark.sql("CREATE TABLE lake.bench.once (id BIGINT, v DOUBLE, k STRING)")
    spark.sql("INSERT INTO lake.bench.once SELECT * FROM lake.bench.hist")
    probes = {"hist": iter(range(7, 10**9, 13)), "once": iter(range(7, 10**9, 13))}

    def point(name):
        def run():
            x = next(probes[name]) % n
            got = spark.sql(f"SELECT * FROM lake.bench.{name} WHERE id = {x}").collect()
            assert [tuple(r) for r in got] == [(x, value(x), f"k{x % 10}")], (name, x, got)
        return run

    t = side_by_side(args.runs, hist=point("hist"), once=point("once"))
    ratio = t["hist"] / t["once"]
    report.add("point query on it vs on the same rows written by one INSERT",
               f"{t['hist']:.2f} s vs {t['once']:.2f} s = **{ratio:.2f}x**", "<= 1.2x", verdict(ratio <= 1.2))


def many_deletes(spark, args, report: Report) -> None:
    n = args.deletes
    info = generate(n, MANY_ROWS, 10, args.reuse)
    print(f"  ({n:,} files: {_generated(info)})", flush=True)
    # a table of its own over the cached files: the DELETEs below must not touch the cached metadata
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    _catalog().register_table(("bench", "dels"), info["metadata_location"])
    lake, rows = "lake.bench.dels", n * MANY_ROWS
    spark.read.parquet(*info["paths"]).createOrReplaceTempView("plain_dels")
    gone = [i * MANY_ROWS + (i * 7) % MANY_ROWS for i in range(n)]  # one row of each file
    times = []
    for i, x in enumerate(gone):
        times.append(timed(lambda: spark.sql(f"DELETE FROM {lake} WHERE id = {x}").collect()))
        if (i + 1) % 200 == 0:
            print(f"    {i + 1} DELETEs, the last took {times[-1]:.2f} s", flush=True)
    expected = (rows - n, sum(value(i) for i in range(rows)) - sum(value(x) for x in gone))
    summary = _catalog().load_table("bench.dels").current_snapshot().summary
    ours = _agg(spark, lake)
    t = side_by_side(args.runs, lakerules=lambda: _agg(spark, lake), plain=lambda: _agg(spark, "plain_dels"))
    ratio = t["lakerules"] / t["plain"]
    report.add(f"{n:,} single-row DELETEs, each on another of {n:,} files x {MANY_ROWS} rows "
               f"({summary.get('total-delete-files')} delete files): count(*), sum(v) vs spark.read.parquet "
               "of the original files",
               f"{t['lakerules']:.2f} s vs {t['plain']:.2f} s = **{ratio:.2f}x**; result as expected: {ours == expected} "
               f"(DELETEs: first 10 {statistics.median(times[:10]):.2f} s, last 10 {statistics.median(times[-10:]):.2f} s, "
               f"median)", "<= 1.15x, as expected", verdict(ratio <= 1.15 and ours == expected))
    took = timed(lambda: spark.sql(f"OPTIMIZE {lake}").collect())
    table = _catalog().load_table("bench.dels")
    summary = table.current_snapshot().summary
    ours = _agg(spark, lake)
    t = side_by_side(args.runs, lakerules=lambda: _agg(spark, lake), plain=lambda: _agg(spark, "plain_dels"))
    ratio = t["lakerules"] / t["plain"]
    report.add(f"  after OPTIMIZE ({took:.1f} s): {summary.get('total-data-files')} data files, "
               f"{summary.get('total-delete-files')} delete files; the same scan vs spark.read.parquet of the original files",
               f"{t['lakerules']:.2f} s vs {t['plain']:.2f} s = **{ratio:.2f}x**; result as expected: {ours == expected}",
               "no delete files, as expected", verdict(summary.get("total-delete-files") == "0" and ours == expected))
    spark.catalog.dropTempView("plain_dels")


PLAN_COMMITS = 200


def planning(spark, args, report: Report) -> None:
    from lakerules.scan import manifest_job

    files = args.plan_files
    info = generate(files, BIG_ROWS, PLAN_COMMITS, args.reuse)
    print(f"  ({files:,} files: {_generated(info)})", flush=True)
    register(spark, "plan", info)
    lake = "lake.bench.plan"
    table = _catalog().load_table("bench.plan")
    snapshots = [s.snapshot_id for s in table.snapshots()]
    cache_key = "spark.lakerules.planning.manifestCacheEntries"
    spark.conf.set(cache_key, "0")  # every planning reads its manifests
    try:
        for count in (10, 25, 50, 100, 200):
            if count > len(snapshots):
                continue
            sql = f"SELECT * FROM {lake} VERSION AS OF {snapshots[count - 1]} WHERE id = {(count * 7919) % (files * BIG_ROWS)}"

            def plan(mode):
                def go():
                    spark.conf.set(manifest_job.DATA_MODE_CONF, mode)
                    spark.conf.set(manifest_job.DELETE_MODE_CONF, mode)
                    _explain(spark, sql)
                return go

            t = side_by_side(args.runs, local=plan("local"), distributed=plan("distributed"))
            size = sum(m.manifest_length for m in table.snapshot_by_id(snapshots[count - 1]).manifests(table.io))
            report.add(f"point query planning (EXPLAIN), no manifest cached, {count} manifests of "
                       f"{files // PLAN_COMMITS:,} files ({size / 1e6:.1f} MB): on the driver vs a Spark job over the manifests",
                       f"{t['local']:.2f} s vs {t['distributed']:.2f} s = {t['distributed'] / t['local']:.2f}x")
    finally:
        for key in (cache_key, manifest_job.DATA_MODE_CONF, manifest_job.DELETE_MODE_CONF):
            spark.conf.unset(key)
    report.note("planning: here the job's tasks share the driver's cores; it wins once its JVM decoding of the "
                "manifests outweighs its fixed cost. Its entries are not cached, so the auto mode uses it only on a "
                "cluster larger than the driver; on one machine the driver's manifest cache serves later queries")


def run(spark, args, report: Report) -> None:
    steps = dict(files=many_files, metadata=metadata, history=history, deletes=many_deletes, planning=planning)
    chosen = [x.strip() for x in (args.scale_steps or ",".join(steps)).split(",") if x.strip()]
    unknown = [x for x in chosen if x not in steps]
    if unknown:
        raise SystemExit(f"--scale-steps: unknown {unknown}; the steps are {', '.join(steps)}")
    for step in (steps[x] for x in chosen):
        started = time.perf_counter()
        step(spark, args, report)
        print(f"  ({step.__name__} took {time.perf_counter() - started:.0f} s)", flush=True)
    report.note("Tables of tiny files are generated with pyarrow and registered with pyiceberg add_files "
                "(bench/out/scale/cache/, reused with --reuse); absolute targets (1 s, 2 s) are this machine's.")
