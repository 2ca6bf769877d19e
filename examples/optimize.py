"""OPTIMIZE ... ZORDER BY (a, b) and what it does to a table's layout: before, every file holds
every value of a and b, so a point query reads all files; after, each file holds a box of the
(a, b) plane. lakerules.inspect measures the expected share of files a point predicate reads
and draws each file's [min, max] box (the `plot` extra: matplotlib).

    .venv/bin/python examples/optimize.py [WAREHOUSE]      (writes optimize-before.png, optimize-after.png)
"""

import sys

import lakerules


def files_read(spark, query: str) -> str:
    plan = spark.sql(f"EXPLAIN {query}").collect()[0][0]
    return plan.split("== lakerules scans ==")[1].split()[2]  # files=N/M


def run(spark, ns: str = "examples", rows: int = 400_000, plots: str | None = "optimize") -> dict:
    t = f"lake.{ns}.points"
    spark.sql(f"CREATE TABLE {t} (a BIGINT, b BIGINT, payload STRING) USING iceberg")
    spark.sql(f"INSERT INTO {t} SELECT pmod(xxhash64(id, 1), 1000000), pmod(xxhash64(id, 2), 1000000), "
              f"concat('row-', id) FROM range(0, {rows}, 1, 16)")
    point = f"SELECT * FROM {t} WHERE a = 500000 AND b = 250000"
    before = lakerules.inspect(t, ["a", "b"], plot=f"{plots}-before.png" if plots else None)
    read_before = files_read(spark, point)
    # 16 output files: the target size is a 16th of the table
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{sum(before.sizes) // 16}')")
    spark.sql(f"OPTIMIZE {t} ZORDER BY (a, b)").collect()
    after = lakerules.inspect(t, ["a", "b"], plot=f"{plots}-after.png" if plots else None)
    read_after = files_read(spark, point)
    print(after)
    print(f"point query reads {read_before} before, {read_after} after; expected share of files read by a = v: "
          f"{before.columns[0].share:.2f} -> {after.columns[0].share:.2f}, by b = v: "
          f"{before.columns[1].share:.2f} -> {after.columns[1].share:.2f}")
    return {"before": before, "after": after, "read": (read_before, read_after), "table": t}


if __name__ == "__main__":
    spark = lakerules.session(warehouse=sys.argv[1] if len(sys.argv) > 1 else "warehouse/examples")
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("DROP NAMESPACE IF EXISTS lake.examples CASCADE")
    spark.sql("CREATE NAMESPACE lake.examples")
    run(spark)
    spark.stop()
