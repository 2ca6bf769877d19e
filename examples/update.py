"""UPDATE on a partitioned lake table: only the partitions the condition can match are read, the
matched rows are deleted by position and written again with their new values.

    .venv/bin/python examples/update.py [WAREHOUSE]
"""

import sys

import lakerules


def run(spark, ns: str = "examples", rows: int = 100_000) -> dict:
    t = f"lake.{ns}.upd"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, day DATE, status STRING) USING iceberg PARTITIONED BY (day)
                  TBLPROPERTIES ('write.update.mode' = 'merge-on-read')""")
    spark.sql(f"INSERT INTO {t} SELECT id, date_add(DATE'2026-01-01', CAST(id % 4 AS INT)), 'new' FROM range(0, {rows})")
    plan = spark.sql(f"EXPLAIN UPDATE {t} SET status = 'done' WHERE day = DATE'2026-01-02' AND id % 8 = 1").collect()[0][0]
    print(plan.split("\n\n")[0])  # the lakerules plan: files that may match, files read
    updated = spark.sql(f"UPDATE {t} SET status = 'done' WHERE day = DATE'2026-01-02' AND id % 8 = 1").collect()[0][0]
    counts = {r["status"]: r["n"] for r in spark.sql(f"SELECT status, count(*) AS n FROM {t} GROUP BY status").collect()}
    print(f"updated {updated:,} rows; by status: {counts}")
    return {"updated": updated, "counts": counts, "table": t}


if __name__ == "__main__":
    spark = lakerules.session(warehouse=sys.argv[1] if len(sys.argv) > 1 else "warehouse/examples")
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("DROP NAMESPACE IF EXISTS lake.examples CASCADE")
    spark.sql("CREATE NAMESPACE lake.examples")
    run(spark)
    spark.stop()
