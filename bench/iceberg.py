"""lakerules next to Iceberg's own Spark runtime, verb by verb (issue #52, Required 4; a first part).

    .venv/bin/python bench/run.py --only iceberg [--rows N] [--runs R]

Iceberg's runtime (`make anchor`: Iceberg 1.12.0 for Spark 4.1, in .anchor/) runs in a process of
its own (tests/anchor_driver.py --serve) on this module's catalog, with the same local[2] master,
8 GiB of driver memory and shuffle partitions as lakerules' session; each statement is timed in
the process that runs it (its rows collected). The two engines take turns (the order rotating),
after an untimed warm-up turn, and each works on a table of its own with the same rows:

- INSERT of N rows (each into an empty table of its own);
- a full scan (an aggregate over every column), a point query on the id, count(*);
- DELETE of 0.1% of the rows spread over every file, merge-on-read, and the same copy-on-write;
- UPDATE of 0.1%, merge-on-read;
- MERGE of 10,000 changes with keys spread over the table (half updates, half inserts),
  merge-on-read;
- a single-row INSERT's latency.

A row-changing statement runs on a fresh copy per turn (CREATE TABLE ... AS SELECT of the
engine's own base table, not timed). Ratios are lakerules / Iceberg's runtime.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

from common import Report, load, verdict

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = Path(os.environ.get("LAKERULES_ANCHOR", ROOT / ".anchor"))
DRIVER = ROOT / "tests" / "anchor_driver.py"
MOR = ("TBLPROPERTIES ('write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
       "'write.merge.mode'='merge-on-read')")
COW = "TBLPROPERTIES ('write.delete.mode'='copy-on-write')"
COLUMNS = "id BIGINT, ts TIMESTAMP, kind STRING, v DOUBLE, payload STRING"
ROWS_SQL = """SELECT id, TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, CAST(id % 2592000 AS INT)),
    element_at(array('click', 'view', 'buy', 'spam'), CAST(id % 4 AS INT) + 1), CAST(id % 1000 AS DOUBLE) / 7,
    concat('payload-', CAST(id * 7919 % 100003 AS STRING)) FROM range({rows})"""


class Anchor:
    """Iceberg's runtime serving statements on the lake catalog of ``warehouse``."""

    def __init__(self, warehouse: Path):
        python = ANCHOR / "venv" / "bin" / "python"
        if not python.exists():
            raise SystemExit(f"no anchor at {ANCHOR}: run `make anchor` first")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_SUBMIT"))}
        env.update({"TZ": "UTC", "PYSPARK_SUBMIT_ARGS": "--driver-memory 8g pyspark-shell",
                    "ANCHOR_SHUFFLE_PARTITIONS": "8"})
        self.proc = subprocess.Popen([str(python), str(DRIVER), str(ANCHOR / "jars"), str(warehouse),
                                      str(warehouse / "catalog.db"), "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=str(DRIVER.parent))

    def sql(self, statement: str) -> dict:
        self.proc.stdin.write(json.dumps(statement) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the anchor stopped (exit {self.proc.poll()}) running: {statement}")
            if line.startswith("{"):
                answer = json.loads(line)
                if "error" in answer:
                    raise RuntimeError(f"Iceberg's runtime: {statement[:120]}: {answer['error']}")
                return answer

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def _ours(spark, statement: str) -> float:
    import time

    start = time.perf_counter()
    spark.sql(statement).collect()
    return time.perf_counter() - start


def run(spark, args, report: Report) -> None:
    warehouse = Path(spark.conf.get("spark.sql.catalog.lake.warehouse").removeprefix("file://"))
    n, runs = args.rows, args.runs
    ice = Anchor(warehouse)
    try:
        spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
        engines = {
            "lakerules": lambda s: _ours(spark, s),
            "iceberg": lambda s: ice.sql(s)["seconds"],
        }

        def side_by_side(statement, setup=None, warmup=1) -> dict[str, float]:
            """Median seconds per engine of ``statement(engine)``, turns rotating; ``setup(engine)``
            (untimed) before each."""
            times = {e: [] for e in engines}
            names = list(engines)
            for turn in range(warmup + runs):
                k = turn % len(names)
                for e in names[k:] + names[:k]:
                    if setup is not None:
                        for s in setup(e):
                            engines[e](s)
                    t = engines[e](statement(e))
                    if turn >= warmup:
                        times[e].append(t)
            return {e: statistics.median(ts) for e, ts in times.items()}

        def ratio(what: str, t: dict, target: float) -> None:
            r = t["lakerules"] / t["iceberg"]
            report.add(what, f"**{r:.2f}x** (lakerules {t['lakerules']:.2f} s, Iceberg's runtime {t['iceberg']:.2f} s; "
                             f"load {load()})", f"<= {target}x", verdict(r <= target))

        # INSERT of n rows, each engine into an empty table of its own (a new one each turn)
        counter = iter(range(10_000))

        def fresh_insert(e):
            name = f"lake.bench.ins_{e}"
            return [f"DROP TABLE IF EXISTS {name} PURGE", f"CREATE TABLE {name} ({COLUMNS}) USING iceberg"]

        ratio(f"INSERT {n:,} rows", side_by_side(statement=lambda e: f"INSERT INTO lake.bench.ins_{e} "
                                                 + ROWS_SQL.format(rows=n), setup=fresh_insert, warmup=0), 1.0)
        # the base tables, one per engine, written by that engine
        for e in engines:
            engines[e](f"DROP TABLE IF EXISTS lake.bench.base_{e} PURGE")
            engines[e](f"CREATE TABLE lake.bench.base_{e} ({COLUMNS}) USING iceberg {MOR}")
            engines[e](f"INSERT INTO lake.bench.base_{e} " + ROWS_SQL.format(rows=n))
        ratio("full scan (aggregate of every column)",
              side_by_side(lambda e: f"SELECT count(*), sum(id), sum(v), max(kind), min(ts), max(payload) "
                                           f"FROM lake.bench.base_{e}"), 1.0)
        ratio("point query (id = ...)",
              side_by_side(lambda e: f"SELECT * FROM lake.bench.base_{e} WHERE id = {n // 2 + next(counter)}"), 1.0)
        ratio("count(*)", side_by_side(lambda e: f"SELECT count(*) FROM lake.bench.base_{e}"), 1.0)

        def copy(props):
            return lambda e: [f"DROP TABLE IF EXISTS lake.bench.work_{e} PURGE",
                              f"CREATE TABLE lake.bench.work_{e} USING iceberg {props} AS SELECT * FROM lake.bench.base_{e}"]

        ratio("DELETE 0.1%, merge-on-read", side_by_side(
            lambda e: f"DELETE FROM lake.bench.work_{e} WHERE id % 1000 = 7", setup=copy(MOR)), 0.5)
        ratio("DELETE 0.1%, copy-on-write", side_by_side(
            lambda e: f"DELETE FROM lake.bench.work_{e} WHERE id % 1000 = 7", setup=copy(COW)), 0.5)
        ratio("UPDATE 0.1%, merge-on-read", side_by_side(
            lambda e: f"UPDATE lake.bench.work_{e} SET kind = 'upd' WHERE id % 1000 = 7", setup=copy(MOR)), 0.5)
        step = max(n // 10_000, 1)
        merge = ("MERGE INTO lake.bench.work_{e} t USING (SELECT id * " + str(step) + " + IF(id % 2 = 0, 0, " + str(n) +
                 ") AS id, TIMESTAMP'2026-02-01 00:00:00' AS ts, 'merged' AS kind, 1.0 AS v, 'p' AS payload "
                 "FROM range(10000)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET kind = s.kind "
                 "WHEN NOT MATCHED THEN INSERT *")
        ratio("MERGE of 10,000 changes, keys spread (half updates), merge-on-read",
              side_by_side(lambda e: merge.format(e=e), setup=copy(MOR)), 0.5)
        ratio("single-row INSERT", side_by_side(
            lambda e: f"INSERT INTO lake.bench.base_{e} VALUES ({n + 10**9 + next(counter)}, "
                            "TIMESTAMP'2026-03-01 00:00:00', 'one', 0.0, 'x')", warmup=2), 1.0)
        report.note("Each engine in its own JVM (local[2], 8 GiB driver, 8 shuffle partitions); lakerules on the "
                    "pyspark the project runs (4.3 here), Iceberg's runtime 1.12.0 on pyspark 4.1.4, the newest "
                    "Spark it ships a runtime for. Each statement timed in its own process, rows collected.")
    finally:
        ice.close()


def size(args) -> str:
    return f"{args.rows:,} rows"
