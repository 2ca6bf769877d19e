"""DELETE benchmark: DELETE of 0.1% of rows spread over a table, lakerules' merge-on-read
(position delete files) vs pyiceberg's copy-on-write ``table.delete()`` of the same rows, on
two copies of the same table: bytes written and wall time; then the scan after it.

Both delete the same rows: lakerules ``DELETE ... WHERE id % 1000 = 7`` (what a user writes),
pyiceberg ``table.delete(In("id", <the same ids>))`` (it takes only pyiceberg expressions).
"""

from __future__ import annotations

import statistics
import time

from pyiceberg.expressions import In

import lakerules

from common import Report, side_by_side, verdict

AGG = "SELECT count(*), sum(id), sum(v), max(kind), min(ts), max(payload) FROM {src}"
FRACTION = 1000  # one row in FRACTION is deleted


def _catalog():
    return lakerules._backend.catalogs.get("lake")


def setup(spark, rows: int):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql("CREATE TABLE lake.bench.base (id BIGINT, ts TIMESTAMP, kind STRING, v DOUBLE, payload STRING)")
    spark.sql(f"""INSERT INTO lake.bench.base SELECT id,
        TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, CAST(id % 2592000 AS INT)),
        element_at(array('click', 'view', 'buy', 'spam'), CAST(id % 4 AS INT) + 1),
        CAST(id % 1000 AS DOUBLE) / 7, concat('payload-', CAST(id * 7919 % 100003 AS STRING))
        FROM range({rows})""")


def _added_bytes(table) -> tuple[int, int]:
    """(bytes, files) the table's current snapshot added, data and delete files."""
    s = table.current_snapshot().summary

    def prop(key: str) -> int:
        return int(s.get(key) or 0)  # Summary.get takes no default

    return prop("added-files-size"), prop("added-data-files") + prop("added-delete-files")


def fresh(spark, name: str) -> None:
    """A new copy of lakerules.bench.base (not timed)."""
    spark.sql(f"DROP TABLE IF EXISTS lake.bench.{name} PURGE")
    spark.sql(f"CREATE TABLE lake.bench.{name} AS SELECT * FROM lake.bench.base")


def run(spark, args, report: Report) -> None:
    t0 = time.perf_counter()
    setup(spark, args.rows)
    print(f"  (tables of {args.rows:,} rows written in {time.perf_counter() - t0:.1f} s)", flush=True)
    cat = _catalog()
    files = len(list(cat.load_table("bench.base").scan().plan_files()))
    # spread: ids with id % FRACTION = 7, in every file
    ids = [r.id for r in spark.sql(f"SELECT id FROM lake.bench.base WHERE id % {FRACTION} = 7").collect()]

    # warm-up (JIT, first catalog use), untimed: one DELETE on a copy
    fresh(spark, "warm")
    spark.sql(f"DELETE FROM lake.bench.warm WHERE id % {FRACTION} = 3").collect()

    times = {"lakerules": [], "pyiceberg": []}
    for i in range(args.runs):  # alternating, each on a fresh copy
        fresh(spark, "mor")
        t0 = time.perf_counter()
        (row,) = spark.sql(f"DELETE FROM lake.bench.mor WHERE id % {FRACTION} = 7").collect()
        times["lakerules"].append(time.perf_counter() - t0)
        assert row.num_affected_rows == len(ids), (row, len(ids))
        fresh(spark, "cow")
        cow = cat.load_table("bench.cow")
        t0 = time.perf_counter()
        cow.delete(delete_filter=In("id", ids))
        times["pyiceberg"].append(time.perf_counter() - t0)
        print(f"    run {i + 1}: lakerules {times['lakerules'][-1]:.2f} s, pyiceberg {times['pyiceberg'][-1]:.2f} s", flush=True)
    ours, theirs = statistics.median(times["lakerules"]), statistics.median(times["pyiceberg"])
    ours_bytes, ours_files = _added_bytes(cat.load_table("bench.mor"))
    theirs_bytes, theirs_files = _added_bytes(cat.load_table("bench.cow"))

    same = (spark.sql(AGG.format(src="lake.bench.mor")).collect() == spark.sql(AGG.format(src="lake.bench.cow")).collect())
    byte_ratio = ours_bytes / theirs_bytes
    time_ratio = ours / theirs
    report.add(
        f"DELETE of {len(ids):,} rows (0.1%, spread over all {files} files of {args.rows:,} rows): "
        "lakerules merge-on-read vs pyiceberg copy-on-write table.delete(), bytes written",
        f"{ours_bytes:,} B in {ours_files} delete files vs {theirs_bytes:,} B in {theirs_files} files = "
        f"**{byte_ratio:.4f}x**", "<= 0.01x", verdict(byte_ratio <= 0.01),
    )
    report.add(f"  the same, wall time (median of {args.runs} alternating runs, each on a fresh copy, after a warm-up)",
               f"{ours:.2f} s vs {theirs:.2f} s = **{time_ratio:.2f}x** (runs: "
               + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(times["lakerules"], times["pyiceberg"]))
               + f"); tables read identically after: {same}",
               "<= 0.5x", verdict(time_ratio <= 0.5 and same))

    t = side_by_side(args.runs, deletes=lambda: spark.sql(AGG.format(src="lake.bench.mor")).collect(),
                     none=lambda: spark.sql(AGG.format(src="lake.bench.base")).collect())
    ratio = t["deletes"] / t["none"]
    report.add("scan after the DELETE (6 aggregates over every column) vs the table without deletes",
               f"{t['deletes']:.2f} s vs {t['none']:.2f} s = {ratio:.2f}x",
               "report (scan benchmark: <= 1.2x)", verdict(ratio <= 1.2))
