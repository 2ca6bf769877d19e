"""CDC upserts into a lake table from a stream: foreachBatch + MERGE INTO keyed on id, made
idempotent per micro-batch.

A change event is (id, v, op, seq): op 'upsert' or 'delete', seq its order. Each micro-batch
keeps the newest event per id, then merges it into the target in one statement (one snapshot).
The commit carries the application's id and the batch id in its snapshot summary (the session
settings spark.lakerules.snapshot-property.<key>), so a batch Spark replays after a restart
(the driver stopped after the MERGE committed, before the checkpoint) is found in the table's
history and skipped: each change is applied once.

The fast alternative (``fast=True``): delete the batch's ids with equality delete files
(lakerules.delete_by_key, no read of the target) and append the upserted rows. Two commits per
batch instead of one, the second one marked with the batch id: a replay after the first and
before the second redoes both, which is harmless (the delete and the append are idempotent
together). Readers pay for equality deletes until OPTIMIZE rewrites the files.

    python examples/cdc_upserts.py [WAREHOUSE]
"""

from __future__ import annotations

import sys
import tempfile

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

APP, BATCH = "cdc.app-id", "cdc.batch-id"
PROPERTY = "spark.lakerules.snapshot-property."


def applied(spark: SparkSession, table: str, app_id: str) -> int | None:
    """The newest batch id of app_id in the table's current history (DESCRIBE HISTORY: the
    snapshot summaries, newest first), or None."""
    for row in spark.sql(f"DESCRIBE HISTORY {table}").collect():
        params = row["operationParameters"] or {}
        if params.get(APP) == app_id and BATCH in params:
            return int(params[BATCH])
    return None


def newest_per_id(changes: DataFrame) -> DataFrame:
    w = Window.partitionBy("id").orderBy(F.col("seq").desc())
    return changes.withColumn("_n", F.row_number().over(w)).where("_n = 1").drop("_n")


def upsert_batch(changes: DataFrame, batch_id: int, table: str, app_id: str, fast: bool = False) -> bool:
    """Apply one micro-batch of changes to table, unless the table already holds it. True if applied."""
    spark = changes.sparkSession
    done = applied(spark, table, app_id)
    if done is not None and batch_id <= done:
        return False
    latest = newest_per_id(changes)
    try:
        if fast:
            import lakerules

            lakerules.delete_by_key(spark, table, latest.select("id"), on=["id"])
            spark.conf.set(PROPERTY + APP, app_id)
            spark.conf.set(PROPERTY + BATCH, str(batch_id))
            latest.where("op = 'upsert'").select("id", "v").writeTo(table).append()
        else:
            spark.conf.set(PROPERTY + APP, app_id)
            spark.conf.set(PROPERTY + BATCH, str(batch_id))
            latest.createOrReplaceTempView("cdc_changes")
            spark.sql(f"""
                MERGE INTO {table} AS t USING cdc_changes AS c ON t.id = c.id
                WHEN MATCHED AND c.op = 'delete' THEN DELETE
                WHEN MATCHED THEN UPDATE SET v = c.v
                WHEN NOT MATCHED AND c.op = 'upsert' THEN INSERT (id, v) VALUES (c.id, c.v)""")
    finally:
        spark.conf.unset(PROPERTY + APP)
        spark.conf.unset(PROPERTY + BATCH)
    return True


def main(warehouse: str) -> None:
    import json
    import os

    import lakerules

    spark = lakerules.session(warehouse=warehouse, conf={"spark.ui.showConsoleProgress": "false"})
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.db")
    spark.sql("CREATE TABLE IF NOT EXISTS lake.db.customers (id BIGINT, v STRING)")
    source = os.path.join(warehouse, "changes")
    os.makedirs(source, exist_ok=True)
    events = [(1, "a", "upsert", 1), (2, "b", "upsert", 2), (1, "a2", "upsert", 3), (2, None, "delete", 4)]
    with open(os.path.join(source, "0.json"), "w") as f:
        for i, v, op, seq in events:
            f.write(json.dumps({"id": i, "v": v, "op": op, "seq": seq}) + "\n")
    changes = spark.readStream.schema("id BIGINT, v STRING, op STRING, seq BIGINT").json(source)
    q = (changes.writeStream
         .foreachBatch(lambda df, batch_id: upsert_batch(df, batch_id, "lake.db.customers", app_id="customers-cdc"))
         .option("checkpointLocation", os.path.join(warehouse, "checkpoints", "customers"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    spark.table("lake.db.customers").show()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())
