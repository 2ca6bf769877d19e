"""MERGE INTO a lake table from a change set (a DataFrame as a view): matched rows updated or
deleted, new rows inserted, in one commit.

    .venv/bin/python examples/merge.py [WAREHOUSE]
"""

import sys

import lakerules


def run(spark, ns: str = "examples", rows: int = 100_000) -> dict:
    t = f"lake.{ns}.customers"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, name STRING, balance DOUBLE) USING iceberg")
    spark.sql(f"INSERT INTO {t} SELECT id, concat('c', id), 100.0 FROM range(0, {rows})")
    # The change set: the last 1,000 customers' balances (0 means: close the account), 1,000 new ones.
    spark.range(rows - 1000, rows + 1000).selectExpr(
        "id", "concat('c', id) AS name", "IF(id % 100 = 0, 0.0, 250.0) AS balance").createOrReplaceTempView("changes")
    result = spark.sql(f"""MERGE INTO {t} t USING changes c ON t.id = c.id
                           WHEN MATCHED AND c.balance = 0 THEN DELETE
                           WHEN MATCHED THEN UPDATE SET balance = c.balance
                           WHEN NOT MATCHED THEN INSERT *""").collect()[0].asDict()
    print(f"MERGE: {result}")
    print(f"{spark.sql(f'SELECT count(*) FROM {t}').collect()[0][0]:,} customers")
    return {**result, "table": t}


if __name__ == "__main__":
    spark = lakerules.session(warehouse=sys.argv[1] if len(sys.argv) > 1 else "warehouse/examples")
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("DROP NAMESPACE IF EXISTS lake.examples CASCADE")
    spark.sql("CREATE NAMESPACE lake.examples")
    run(spark)
    spark.stop()
