"""A streaming query into a lake table, in a process of its own (test_streaming.py).

    python stream_driver.py WAREHOUSE TABLE SOURCE_DIR CHECKPOINT [STOP_AFTER_BATCH]

Streams the JSON files of SOURCE_DIR (one file per micro-batch) into TABLE with toTable, until
the files run out (availableNow). With STOP_AFTER_BATCH, once that batch's commit landed (before
Spark marks it done in the checkpoint) it prints COMMITTED and waits to be killed; else DONE.
"""

from __future__ import annotations

import os
import sys
import threading

import lakerules
from lakerules.streaming import sink as streaming


def main() -> None:
    warehouse, table, source, checkpoint, *stop = sys.argv[1:]
    os.environ["TZ"] = "UTC"
    spark = lakerules.session(warehouse=warehouse, master="local[2]", app_name="lakerules-stream", conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
    })
    spark.sparkContext.setLogLevel("OFF")
    if stop:
        held = threading.Event()

        def after_commit(name, batch_id):
            if batch_id == int(stop[0]):
                print("COMMITTED", flush=True)
                held.wait()  # until killed, before the checkpoint says the batch is done

        streaming.after_commit = after_commit
    rows = spark.readStream.schema("id BIGINT, v STRING").option("maxFilesPerTrigger", 1).json(source)
    query = (rows.writeStream.option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).toTable(table))
    query.awaitTermination()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
