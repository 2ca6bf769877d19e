"""Runs write paths on tables the test made, in a process of its own (test_faults.py).

    python fault_driver.py WAREHOUSE MODE NAMESPACE TABLE...

Table NAMESPACE.TABLE, named <path> or <path>_<point>, gets its write path (faults_util.run).
Modes:
  retry:  Spark may run a task twice (local[2,2]) and the first attempt of every write task
          fails after writing its files (FailFirstCommit, on spark.driver.extraClassPath from
          env LAKERULES_TEST_CLASSES); the statements run one after another; prints DONE.
  kill:   the statements run at once, each stopping at its point: "before" where its files are
          written and its commit would start (lakerules.commit.before_commit), "commit" inside
          the catalog's commit (manifests and manifest list written); once all have, prints
          READY and waits to be killed.
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


def main() -> None:
    warehouse, mode, ns, *tables = sys.argv[1:]
    os.environ["TZ"] = "UTC"
    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2",
            "spark.sql.session.timeZone": "UTC"}
    master = "local[2]"
    if mode == "retry":
        master = "local[2,2]"
        conf["spark.driver.extraClassPath"] = os.environ["LAKERULES_TEST_CLASSES"]
        conf["spark.sql.sources.commitProtocolClass"] = "lakerules.testing.FailFirstCommit"
    spark = lakerules.session(warehouse=warehouse, master=master, app_name="lakerules-faults", conf=conf)
    spark.sparkContext.setLogLevel("OFF")
    if mode == "retry":
        for table in tables:
            faults_util.run(spark, table, f"lake.{ns}.{table}")
        print("DONE", flush=True)
        return

    reached, lock = [], threading.Lock()
    stop = threading.Event()

    def hold(*_args):
        with lock:
            reached.append(1)
        stop.wait()  # until killed

    if mode != "kill":
        raise SystemExit(f"unknown mode {mode}")
    from lakerules import commit

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
            faults_util.run(spark, table.rsplit("_", 1)[0], f"lake.{ns}.{table}")
            errors.append(f"{table}: committed")
        except Exception as e:  # noqa: BLE001
            errors.append(f"{table}: {e}")

    threads = [threading.Thread(target=one, args=(t,), daemon=True) for t in tables]
    for t in threads:
        t.start()
    deadline = time.time() + 300
    while time.time() < deadline:
        with lock:
            if len(reached) == len(tables):
                print("READY", flush=True)
                break
        if errors:
            print("FAILED " + "; ".join(errors), flush=True)
            return
        time.sleep(0.2)
    stop.wait()


if __name__ == "__main__":
    main()
