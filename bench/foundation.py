"""Foundation benchmarks: INSERT into a partitioned lake table vs a plain partitioned Parquet
write of the same rows; per-statement overhead of the extension on non-lake statements."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from common import OUT, Report, side_by_side, verdict

DAYS = 30


def rows_df(spark, rows: int):
    return spark.range(rows).selectExpr(
        "id",
        f"TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, CAST(id % {DAYS} AS INT), 0, 0, CAST(id % 86400 AS INT)) AS ts",
        "element_at(array('click', 'view', 'buy', 'spam'), CAST(id % 4 AS INT) + 1) AS kind",
        "CAST(id % 1000 AS DOUBLE) / 7 AS v",
    )


def insert(spark, rows: int, runs: int, report: Report) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    counter = iter(range(10_000))
    df = rows_df(spark, rows)

    def lake():
        name = f"lake.bench.ev{next(counter)}"
        spark.sql(f"CREATE TABLE {name} (id BIGINT, ts TIMESTAMP, kind STRING, v DOUBLE) PARTITIONED BY (days(ts))")
        t0 = time.perf_counter()
        df.writeTo(name).append()
        lake.elapsed.append(time.perf_counter() - t0)

    lake.elapsed = []

    def plain():
        path = OUT / "foundation" / f"plain{next(counter)}"
        t0 = time.perf_counter()
        df.withColumn("day", df.ts.cast("date")).write.option("compression", "zstd").partitionBy("day").parquet(str(path))
        plain.elapsed.append(time.perf_counter() - t0)

    plain.elapsed = []
    side_by_side(runs, lake=lake, plain=plain)  # alternate; CREATE TABLE is not counted
    import statistics

    lake_s, plain_s = statistics.median(lake.elapsed), statistics.median(plain.elapsed)
    ratio = lake_s / plain_s
    report.add(f"INSERT {rows:,} rows, days(ts) partitions: lakerules vs df.write.partitionBy().parquet",
               f"{lake_s:.2f} s vs {plain_s:.2f} s = {ratio:.2f}x", "<= 1.15x", verdict(ratio <= 1.15))


QUERIES = [
    "SELECT a, count(*) FROM VALUES (1), (2), (2) AS t(a) GROUP BY a",
    "SELECT id * 2 AS x FROM bench_view WHERE id > 10",
]


def statement_micros(spark, statements: int) -> float:
    """Mean µs to parse and analyze a non-lake statement (best of 3 batches)."""
    spark.range(100).createOrReplaceTempView("bench_view")
    for q in QUERIES:
        spark.sql(q)  # warm up
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(statements):
            spark.sql(QUERIES[i % len(QUERIES)])
        best = min(best, (time.perf_counter() - t0) / statements * 1e6)
    return best


def overhead(statements: int, report: Report) -> None:
    """Each side in its own process: a JVM has one SparkContext, and the extension is static."""
    results = {}
    for side in ("plain", "lakerules"):
        out = subprocess.run(
            [sys.executable, __file__, "--overhead-side", side, "--statements", str(statements)],
            capture_output=True, text=True, check=True,
        ).stdout
        results[side] = json.loads(out.strip().splitlines()[-1])["micros"]
    diff_ms = (results["lakerules"] - results["plain"]) / 1000
    report.add(f"non-lake spark.sql() (parse + analyze), {statements} statements",
               f"{results['lakerules']:.0f} µs with the extension vs {results['plain']:.0f} µs without: "
               f"{diff_ms * 1000:+.0f} µs", "<= 1 ms overhead", verdict(diff_ms <= 1.0))


def _overhead_side(side: str, statements: int) -> None:
    if side == "plain":
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    else:
        from common import session

        spark = session("overhead")
    spark.sparkContext.setLogLevel("ERROR")
    print(json.dumps({"micros": statement_micros(spark, statements)}))
    spark.stop()


def run(spark, args, report: Report) -> None:
    insert(spark, args.rows, args.runs, report)
    overhead(args.statements, report)


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--overhead-side")
    p.add_argument("--statements", type=int, default=2000)
    a = p.parse_args()
    _overhead_side(a.overhead_side, a.statements)
