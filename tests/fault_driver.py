"""Runs write paths on tables the test made, in a process of its own (test_faults.py).

    python fault_driver.py WAREHOUSE NAMESPACE TABLE...

Spark may run a task twice (local[2,2]) and the first attempt of every write task fails after
writing its files (FailFirstCommit, on spark.driver.extraClassPath from env
LAKERULES_TEST_CLASSES). Table NAMESPACE.TABLE, named <path>_<point>, gets write path <path>
(faults_util.run):
  <path>_retry:   run one after another, to their commit; then prints RETRIED.
  <path>_before:  then all of these and the next run at once, each stopping where its files are
                  written and its commit would start (lakerules.write.commit.before_commit);
  <path>_commit:  inside the catalog's commit (manifests and manifest list written);
once all have stopped, prints READY and waits to be killed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import faults_util  # noqa: E402
import lakerules  # noqa: E402
from lakerules.write import commit


def main() -> None:
    warehouse, ns, *tables = sys.argv[1:]
    os.environ["TZ"] = "UTC"
    spark = lakerules.session(warehouse=warehouse, master="local[2,2]", app_name="lakerules-faults", conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraClassPath": os.environ["LAKERULES_TEST_CLASSES"],
        "spark.sql.sources.commitProtocolClass": "lakerules.testing.FailFirstCommit",
        # delete files by Spark's write job, whose tasks fail once (the driver would write few deletes itself)
        "spark.lakerules.write.positionDeleteDriverRows": "0",
    })
    spark.sparkContext.setLogLevel("OFF")

    def path_of(table: str) -> str:
        return table.rsplit("_", 1)[0]

    for table in tables:
        if table.endswith("_retry"):
            faults_util.run(spark, path_of(table), f"lake.{ns}.{table}")
    print("RETRIED", flush=True)

    held = [t for t in tables if t.endswith(("_before", "_commit"))]
    reached, lock, stop = [], threading.Lock(), threading.Event()

    def hold():
        with lock:
            reached.append(1)
        stop.wait()  # until killed

    spark._jsparkSession.sessionState().catalogManager().catalog("lake")  # initialized: its options known
    catalog = lakerules._backend.catalogs.get("lake")
    original = catalog.commit_table

    def before_commit(table):
        if table.name()[-1].endswith("_before"):
            hold()

    def commit_table(table, requirements, updates):
        if table.name()[-1].endswith("_commit"):
            hold()
        return original(table, requirements, updates)

    commit.before_commit = before_commit
    catalog.commit_table = commit_table
    errors = []

    def one(table):
        try:
            faults_util.run(spark, path_of(table), f"lake.{ns}.{table}")
            errors.append(f"{table}: committed")
        except Exception as e:  # noqa: BLE001
            errors.append(f"{table}: {e}")

    for t in held:
        threading.Thread(target=one, args=(t,), daemon=True).start()
    deadline = time.time() + 600
    while time.time() < deadline:
        with lock:
            if len(reached) == len(held):
                print("READY", flush=True)
                break
        if errors:
            print("FAILED " + "; ".join(errors), flush=True)
            return
        time.sleep(0.2)
    stop.wait()


if __name__ == "__main__":
    main()
