"""Cold planning and commits on the scale benchmark's many-manifest table (issue #33, item 3).

One fresh process per run: DuckDB's cold iceberg_scan of a point query (a new connection each
time), then lakerules' first point query of the process (no manifest cached), a warm one, and
four single-row DELETEs (the first one's commit merges the table's 100 manifests), printing each
time and the part of it spent planning (plan_scan) and committing (row_delta.commit). Run it with
PYTHONPATH pointing at the lakerules to measure (e.g. an older checkout's python/, for a before /
after comparison at the same load):

    PYTHONPATH=python .venv/bin/python bench/cold.py 20000
    PYTHONPATH=/tmp/before/python .venv/bin/python bench/cold.py 100000
    PYTHONPATH=python .venv/bin/python bench/cold.py 100000 --full   # a cold full scan's planning

The table is bench/scale.py's (``--big-files`` files of 10 rows in 100 add_files commits, cached
under bench/out/scale/cache/ and generated on first use).
"""

from __future__ import annotations

import functools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _timed_parts(module, name: str, parts: dict) -> None:
    fn = getattr(module, name)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            parts[name] = parts.get(name, 0.0) + time.perf_counter() - started

    setattr(module, name, wrapped)


def main() -> None:
    import common
    import scale
    import lakerules.rules.resolve_scans as resolve
    import lakerules.scan.row_files as row_files
    import lakerules.write.row_delta as row_delta

    files = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    parts: dict = {}
    for module, name in ((resolve, "plan_scan"), (row_files, "plan_scan"), (row_delta, "commit")):
        _timed_parts(module, name, parts)
    info = scale.generate(files, scale.BIG_ROWS, scale.BIG_COMMITS, True)
    spark = common.session("cold")
    scale.register(spark, "big", info)
    lake, rows = "lake.bench.big", files * scale.BIG_ROWS
    print(f"{files:,} files, load: {os.getloadavg()[0]:.2f}", flush=True)
    spark.sql("SELECT 1").collect()
    x = (4243 * scale.BIG_ROWS + 7) % rows
    print(f"duckdb cold point query: {scale._duck_cold(info['metadata_location'], x):.2f} s", flush=True)

    def run(label: str, sql: str) -> None:
        parts.clear()
        started = time.perf_counter()
        spark.sql(sql).collect()
        took = time.perf_counter() - started
        detail = ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
        print(f"{label}: {took:.2f} s ({detail})", flush=True)

    if "--full" in sys.argv[2:]:
        # a cold full scan's planning: every entry of every manifest becomes a planned file
        run("first full-scan planning (EXPLAIN)", f"EXPLAIN SELECT sum(id) FROM {lake}")
        run("warm full-scan planning (EXPLAIN)", f"EXPLAIN SELECT sum(id) FROM {lake}")
        return
    run("first point query", f"SELECT * FROM {lake} WHERE id = {x}")
    run("warm point query", f"SELECT * FROM {lake} WHERE id = {(x + 104729) % rows}")
    for i in range(4):
        run(f"DELETE {i + 1}", f"DELETE FROM {lake} WHERE id = {(i * 79190 + 5) % rows}")
    print(f"load: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
