"""A new process's session start and first point query, with and without the class-data archive
lakerules.session() starts its JVM from (python/lakerules/jvm_archive.py), in turns.

Each turn starts two processes, one with the archive and one without (``jvm_archive=False``), in
alternating order, and DuckDB's cold iceberg_scan of the same point query (a new connection).
Each process times lakerules.session(), registering the scale benchmark's many-manifest table,
its first point query (no manifest cached; planning is plan_scan's part of it) and a second one:

    .venv/bin/python bench/jvm_start.py 100000 --turns 3

The table is bench/scale.py's (files of 10 rows in 100 add_files commits, cached under
bench/out/scale/cache/, generated on first use). Build the archive first:
``python -m lakerules jvm-archive --build`` (make setup does).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import cold, common, scale, lakerules
import lakerules.rules.resolve_scans as resolve

files, archive = int(sys.argv[2]), sys.argv[3] == "1"
parts = {}
cold._timed_parts(resolve, "plan_scan", parts)
session = lakerules.session
common.lakerules.session = lambda **kw: session(**kw, jvm_archive=archive)
info = scale.generate(files, scale.BIG_ROWS, scale.BIG_COMMITS, True)
t0 = time.perf_counter()
spark = common.session("jvm-start")
t1 = time.perf_counter()
scale.register(spark, "big", info)
t2 = time.perf_counter()
rows = files * scale.BIG_ROWS
x = (4243 * scale.BIG_ROWS + 7) % rows
got = spark.sql(f"SELECT * FROM lake.bench.big WHERE id = {x}").collect()
t3 = time.perf_counter()
assert [tuple(r) for r in got] == [(x, scale.value(x), f"k{x % 10}")], got
first_planning = parts.get("plan_scan", 0.0)
spark.sql(f"SELECT * FROM lake.bench.big WHERE id = {(x + 104729) % rows}").collect()
t4 = time.perf_counter()
mapped = any(a.startswith("-XX:SharedArchiveFile=") for a in
             spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
print("RESULT " + json.dumps({"session": t1 - t0, "register": t2 - t1, "first": t3 - t2, "planning": first_planning,
                              "second": t4 - t3, "mapped": mapped}))
"""


def child(files: int, archive: bool) -> dict:
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", CHILD, here, str(files), "1" if archive else "0"], capture_output=True,
                         text=True)
    if out.returncode:
        raise SystemExit(f"child failed: {out.stderr[-3000:]}")
    got = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))[7:])
    if got["mapped"] != archive:
        raise SystemExit(f"the child's JVM {'did not map' if archive else 'mapped'} the archive")
    return got


def main() -> None:
    from lakerules import jvm_archive

    import scale

    p = argparse.ArgumentParser()
    p.add_argument("files", type=int, nargs="?", default=100_000)
    p.add_argument("--turns", type=int, default=3)
    args = p.parse_args()
    if not jvm_archive.options():
        raise SystemExit("no class-data archive for this java, pyspark and shim jar: "
                         "python -m lakerules jvm-archive --build")
    info = scale.generate(args.files, scale.BIG_ROWS, scale.BIG_COMMITS, True)
    rows = args.files * scale.BIG_ROWS
    x = (4243 * scale.BIG_ROWS + 7) % rows
    print(f"{args.files:,} files, load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
          flush=True)
    runs = {True: [], False: []}
    duck = []
    for turn in range(args.turns):
        for archive in ((True, False) if turn % 2 == 0 else (False, True)):
            got = child(args.files, archive)
            runs[archive].append(got)
            print(f"  turn {turn + 1}, {'archive' if archive else 'no archive'}: " +
                  ", ".join(f"{k} {v:.2f} s" for k, v in got.items() if k != "mapped"), flush=True)
        duck.append(scale._duck_cold(info["metadata_location"], x))
        print(f"  turn {turn + 1}, DuckDB cold point query: {duck[-1]:.2f} s", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")
    print("\n| measurement (median of the turns) | no archive | archive |\n|---|---|---|")
    for key, label in (("session", "lakerules.session()"), ("register", "registering the table"),
                       ("first", "first point query (no manifest cached)"), ("planning", "its planning (plan_scan)"),
                       ("second", "second point query")):
        a, b = (statistics.median(r[key] for r in runs[k]) for k in (False, True))
        print(f"| {label} | {a:.2f} s | {b:.2f} s |")
    d = statistics.median(duck)
    a, b = (statistics.median(r["first"] for r in runs[k]) for k in (False, True))
    print(f"| first point query / DuckDB's cold ({d:.2f} s) | {a / d:.2f}x | {b / d:.2f}x |")


if __name__ == "__main__":
    main()
