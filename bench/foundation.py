"""Foundation benchmarks, each a ratio measured side by side in one run:

1. INSERT of N rows into a lake table PARTITIONED BY (days(ts)) vs a plain
   ``df.write.partitionBy(day).parquet`` of the same rows (zstd both), alternating
   lake, plain, lake, plain, ... on a fresh table / directory each run.
2. The extension's cost on non-lake statements: ``spark.sql(q)`` (parse + analysis) in a session
   with lakerules vs a plain session. A JVM holds one SparkContext and spark.sql.extensions is
   static, so each side is its own worker process (this file with ``--overhead-worker``); both
   stay up and run their batches in turns, so load on the machine hits both alike.

Run through bench/run.py (``--only foundation``), or alone: ``python bench/foundation.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import OUT, Report, verdict  # noqa: E402

NAME = "foundation"
TABLE = "lake.bench.ev"
DAYS = 30
INSERT_TARGET = 1.15  # lake / plain
OVERHEAD_TARGET_US = 1000.0  # per statement

# Spark settings both overhead workers share (the "with" side adds lakerules' own on top).
WORKER_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
}


# ---- 1. INSERT vs plain partitioned Parquet ------------------------------------------------------


def rows_df(spark, rows: int):
    """id, ts over DAYS days (spread over the seconds of the day), kind of 4, v: deterministic in id."""
    return spark.range(rows).selectExpr(
        "id",
        f"TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, CAST(id % {DAYS} AS INT), 0, 0, "
        "CAST(id * 7 % 86400 AS INT)) AS ts",
        "element_at(array('click', 'view', 'buy', 'spam'), CAST(id % 4 AS INT) + 1) AS kind",
        "CAST(id % 1000 AS DOUBLE) / 7 AS v",
    )


def _files(root: Path) -> tuple[int, int]:
    """(number, total bytes) of the Parquet files under root."""
    sizes = [p.stat().st_size for p in root.rglob("*.parquet")]
    return len(sizes), sum(sizes)


def insert(spark, rows: int, runs: int, report: Report) -> dict:
    from pyspark.sql import functions as F

    base = OUT / NAME
    warehouse = base / "warehouse"
    plain_dir = base / "plain"
    df = rows_df(spark, rows)
    df.createOrReplaceTempView("bench_rows")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")

    def fresh_table():
        spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
        spark.sql(f"CREATE TABLE {TABLE} (id BIGINT, ts TIMESTAMP, kind STRING, v DOUBLE) PARTITIONED BY (days(ts))")

    def lake(view: str) -> float:
        fresh_table()  # not timed
        t0 = time.perf_counter()
        spark.sql(f"INSERT INTO {TABLE} SELECT * FROM {view}")
        return time.perf_counter() - t0

    def plain(frame) -> float:
        shutil.rmtree(plain_dir, ignore_errors=True)  # not timed
        t0 = time.perf_counter()
        (frame.withColumn("day", F.to_date("ts"))
              .write.option("compression", "zstd").partitionBy("day").parquet(str(plain_dir)))
        return time.perf_counter() - t0

    # One untimed round on a tenth of the rows: JIT, class loading and the catalog's first
    # connection would otherwise land on whichever side runs first.
    warm = rows_df(spark, max(rows // 10, 1000))
    warm.createOrReplaceTempView("bench_warm")
    lake("bench_warm")
    plain(warm)

    times = {"lake": [], "plain": []}
    for i in range(runs):
        times["lake"].append(lake("bench_rows"))
        times["plain"].append(plain(df))
        print(f"    run {i + 1}/{runs}: lake {times['lake'][-1]:.2f} s, plain {times['plain'][-1]:.2f} s", flush=True)

    # What the last run of each side wrote: same rows, same partitions, comparable files.
    lake_count, lake_days = spark.sql(f"SELECT count(*), count(DISTINCT CAST(ts AS DATE)) FROM {TABLE}").collect()[0]
    plain_count = spark.read.parquet(str(plain_dir)).count()
    plain_days = sum(1 for p in plain_dir.iterdir() if p.name.startswith("day="))
    lake_files, lake_bytes = _files(warehouse)
    plain_files, plain_bytes = _files(plain_dir)
    if lake_count != rows or plain_count != rows:
        raise AssertionError(f"row counts differ: lake {lake_count}, plain {plain_count}, expected {rows}")

    lake_s, plain_s = statistics.median(times["lake"]), statistics.median(times["plain"])
    ratio = lake_s / plain_s
    report.add(
        f"INSERT {rows:,} rows into PARTITIONED BY (days(ts)) vs df.write.partitionBy(to_date(ts)).parquet, zstd "
        f"(median of {runs}, alternating)",
        f"{lake_s:.2f} s vs {plain_s:.2f} s = **{ratio:.2f}x**",
        f"<= {INSERT_TARGET}x", verdict(ratio <= INSERT_TARGET),
    )
    paired = [a / b for a, b in zip(times["lake"], times["plain"])]
    report.add(
        "  per run (lake / plain, s)",
        ", ".join(f"{a:.2f} / {b:.2f}" for a, b in zip(times["lake"], times["plain"]))
        + f"; each run's ratio {', '.join(f'{r:.2f}x' for r in paired)} (median {statistics.median(paired):.2f}x); "
        f"best run of each {min(times['lake']):.2f} s vs {min(times['plain']):.2f} s = "
        f"{min(times['lake']) / min(times['plain']):.2f}x",
    )
    report.add(
        "  written by the last run (lake / plain)",
        f"{lake_count:,} / {plain_count:,} rows, {lake_days} / {plain_days} days, {lake_files} / {plain_files} files, "
        f"{lake_bytes / 2**20:.1f} / {plain_bytes / 2**20:.1f} MiB",
    )
    return {"lake_s": lake_s, "plain_s": plain_s, "ratio": ratio, "paired": paired, "runs": times}


# ---- 2. per-statement overhead on non-lake statements --------------------------------------------

QUERIES = [
    "SELECT a, count(*) FROM VALUES (1), (2), (2) AS t(a) GROUP BY a",
    "SELECT id * 2 AS x FROM bench_view WHERE id > 10",
]


def _batch_micros(spark, statements: int) -> float:
    """Mean µs per spark.sql() (parse + analysis; nothing runs) over one batch."""
    t0 = time.perf_counter()
    for i in range(statements):
        spark.sql(QUERIES[i % len(QUERIES)])
    return (time.perf_counter() - t0) / statements * 1e6


def _worker(side: str) -> None:
    """One side of the overhead measurement: answers 'batch N' lines on stdin with a JSON line."""
    if side == "with":
        import lakerules

        shutil.rmtree(OUT / "overhead-with", ignore_errors=True)
        spark = lakerules.session(warehouse=OUT / "overhead-with" / "warehouse", master="local[2]",
                                  app_name="lakerules-bench-overhead-with", conf=WORKER_CONF)
        spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")  # the registry is attached and answers
    else:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master("local[2]").appName("lakerules-bench-overhead-without")
        for k, v in WORKER_CONF.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    extensions = spark.sparkContext.getConf().get("spark.sql.extensions", "") or ""
    spark.range(100).createOrReplaceTempView("bench_view")
    for q in QUERIES:
        spark.sql(q).collect()  # the queries are valid and run
    print("BENCH " + json.dumps({"ready": True, "extensions": extensions}), flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "batch":
            print("BENCH " + json.dumps({"micros": _batch_micros(spark, int(arg))}), flush=True)
        elif cmd == "quit":
            break
    spark.stop()


class _Worker:
    def __init__(self, side: str):
        self.side = side
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--overhead-worker", side],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )

    def read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("BENCH "):
                return json.loads(line[len("BENCH "):])
        raise RuntimeError(f"overhead worker '{self.side}' exited with code {self.proc.wait()}")

    def batch(self, statements: int) -> float:
        self.proc.stdin.write(f"batch {statements}\n")
        self.proc.stdin.flush()
        return self.read()["micros"]

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except Exception:  # noqa: BLE001
            self.proc.kill()


def overhead(statements: int, batches: int, report: Report) -> dict:
    workers = {"with": _Worker("with"), "without": _Worker("without")}
    try:
        ready = {side: w.read() for side, w in workers.items()}
        if "LakeRulesExtensions" not in ready["with"]["extensions"] or ready["without"]["extensions"]:
            raise AssertionError(f"the sessions are not what they should be: {ready}")
        for _ in range(2):  # warm-up, not counted: the JIT compiles the analyzer's paths
            for w in workers.values():
                w.batch(statements)
        micros = {"with": [], "without": []}
        for b in range(batches):
            order = ("with", "without") if b % 2 == 0 else ("without", "with")
            for side in order:
                micros[side].append(workers[side].batch(statements))
            print(f"    batch {b + 1}/{batches}: with {micros['with'][-1]:.0f} µs, "
                  f"without {micros['without'][-1]:.0f} µs", flush=True)
    finally:
        for w in workers.values():
            w.close()
    best = {side: min(ts) for side, ts in micros.items()}
    diff = best["with"] - best["without"]
    paired = statistics.median(a - b for a, b in zip(micros["with"], micros["without"]))
    report.add(
        f"spark.sql() of a non-lake query (parse + analysis), {statements} statements a batch, best of {batches} "
        "alternating batches: with the extension vs without",
        f"{best['with']:.0f} µs vs {best['without']:.0f} µs = **{diff:+.0f} µs** a statement",
        f"<= {OVERHEAD_TARGET_US:.0f} µs", verdict(diff <= OVERHEAD_TARGET_US),
    )
    report.add(
        "  per batch (with / without, µs)",
        ", ".join(f"{a:.0f} / {b:.0f}" for a, b in zip(micros["with"], micros["without"]))
        + f"; median paired difference {paired:+.0f} µs",
    )
    return {"best": best, "diff_us": diff, "paired_us": paired, "batches": micros}


# ---- entry points --------------------------------------------------------------------------------


def run(spark, args, report: Report) -> dict:
    print("  INSERT vs plain Parquet", flush=True)
    ins = insert(spark, args.rows, args.runs, report)
    print("  per-statement overhead", flush=True)
    ovh = overhead(args.statements, args.batches, report)
    return {"insert": ins, "overhead": ovh}


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--overhead-worker", choices=["with", "without"])
    a, rest = p.parse_known_args()
    if a.overhead_worker:
        _worker(a.overhead_worker)
    else:
        # the runner, as its own program (it imports this module: no import circle)
        os.execv(sys.executable, [sys.executable, str(Path(__file__).with_name("run.py")), "--only", NAME, *rest])
