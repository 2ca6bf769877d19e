"""DELETE on a lake table, both ways Iceberg has: merge-on-read (position delete files, the data
files untouched) and copy-on-write (the affected files rewritten). EXPLAIN shows the files a
query reads and the delete files it applies.

    .venv/bin/python examples/delete.py [WAREHOUSE]
"""

import sys

import lakerules


def scans(spark, query: str) -> str:
    return spark.sql(f"EXPLAIN {query}").collect()[0][0].split("== lakerules scans ==")[1].strip()


def run(spark, ns: str = "examples", rows: int = 100_000) -> dict:
    out = {}
    for mode in ("merge-on-read", "copy-on-write"):
        t = f"lake.{ns}.del_{mode.replace('-', '_')}"
        spark.sql(f"CREATE TABLE {t} (id BIGINT, kind STRING) USING iceberg "
                  f"TBLPROPERTIES ('write.delete.mode' = '{mode}')")
        spark.sql(f"INSERT INTO {t} SELECT id, IF(id % 10 = 0, 'spam', 'ok') FROM range(0, {rows}, 1, 4)")
        deleted = spark.sql(f"DELETE FROM {t} WHERE kind = 'spam'").collect()[0]["num_affected_rows"]
        left = spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0]
        print(f"{mode}: deleted {deleted:,}, {left:,} rows left; EXPLAIN: {scans(spark, f'SELECT * FROM {t}')}")
        out[mode] = (deleted, left, t)
    return out


if __name__ == "__main__":
    spark = lakerules.session(warehouse=sys.argv[1] if len(sys.argv) > 1 else "warehouse/examples")
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("DROP NAMESPACE IF EXISTS lake.examples CASCADE")
    spark.sql("CREATE NAMESPACE lake.examples")
    run(spark)
    spark.stop()
