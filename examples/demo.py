"""What lakerules is for, in one run on the embedded catalog: an events table of a few million
rows, DELETE (merge-on-read: position delete files), UPDATE, MERGE of a change set, OPTIMIZE ...
ZORDER BY (a, b) and the file skipping it buys a point query, then pyiceberg and DuckDB reading
the same rows. Each step prints what EXPLAIN says about the files a query reads.

    make demo            (or: .venv/bin/python examples/demo.py [ROWS] [WAREHOUSE])
"""

import shutil
import sys
import time
from pathlib import Path

import lakerules

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
warehouse = Path(sys.argv[2] if len(sys.argv) > 2 else "warehouse/demo").resolve()
shutil.rmtree(warehouse, ignore_errors=True)
started = time.time()

# Spark's progress bars stay on: the long steps show their stages.
spark = lakerules.session(warehouse=warehouse, conf={"spark.sql.shuffle.partitions": "8"})
spark.sparkContext.setLogLevel("ERROR")
T = "lake.demo.events"
POINT = f"SELECT count(*) FROM {T} WHERE a = 123 AND b = 456"


def step(title: str) -> None:
    print(f"\n=== {title}  [{time.time() - started:.0f} s]", flush=True)


def scans(query: str) -> str:
    """The '== lakerules scans ==' lines of EXPLAIN: files read of the snapshot's, delete files applied."""
    plan = spark.sql(f"EXPLAIN {query}").collect()[0][0]
    return plan.split("== lakerules scans ==", 1)[1].strip() if "== lakerules scans ==" in plan else plan


def count() -> int:
    return spark.sql(f"SELECT count(*) FROM {T}").collect()[0][0]


step(f"CREATE TABLE and INSERT {ROWS:,} events (16 files; a and b spread over every file)")
spark.sql("CREATE NAMESPACE lake.demo")
spark.sql(f"""CREATE TABLE {T} (id BIGINT, ts TIMESTAMP, user_id BIGINT, kind STRING, a BIGINT, b BIGINT)
              USING iceberg
              TBLPROPERTIES ('write.delete.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read',
                             'write.merge.mode' = 'merge-on-read')""")
spark.sql(f"""INSERT INTO {T}
              SELECT id, TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, CAST(id % 86400 AS INT)),
                     pmod(xxhash64(id, 0), 10000), element_at(array('click', 'view', 'spam'), CAST(id % 3 AS INT) + 1),
                     pmod(xxhash64(id, 1), 1000), pmod(xxhash64(id, 2), 1000)
              FROM range(0, {ROWS}, 1, 16)""")
print(f"{count():,} rows")

step("DELETE, merge-on-read: matched rows become position delete files, data files stay")
print("EXPLAIN before:", scans(f"SELECT count(*) FROM {T}"))
n = spark.sql(f"DELETE FROM {T} WHERE kind = 'spam' AND user_id < 5000").collect()[0][0]
print(f"deleted {n:,} rows")
print("EXPLAIN after: ", scans(f"SELECT count(*) FROM {T}"))

step("UPDATE")
n = spark.sql(f"UPDATE {T} SET kind = 'purchase' WHERE user_id < 10 AND kind = 'view'").collect()[0][0]
print(f"updated {n:,} rows")

step("MERGE a change set: 5,000 changed events and 5,000 new ones")
spark.range(ROWS - 5000, ROWS + 5000).selectExpr(
    "id", "TIMESTAMP'2026-01-02 00:00:00' AS ts", "id % 10000 AS user_id", "'late' AS kind",
    "pmod(xxhash64(id, 1), 1000) AS a", "pmod(xxhash64(id, 2), 1000) AS b",
).createOrReplaceTempView("changes")
row = spark.sql(f"""MERGE INTO {T} t USING changes c ON t.id = c.id
                    WHEN MATCHED THEN UPDATE SET kind = c.kind, ts = c.ts
                    WHEN NOT MATCHED THEN INSERT *""").collect()[0]
print(f"merged: {row.asDict()}")
before = lakerules.inspect(T, ["a", "b"])

step("OPTIMIZE ... ZORDER BY (a, b): files clustered so that a point query on a and b skips most")
print("point query EXPLAIN before:", scans(POINT))
size = sum(before.sizes) // 16
spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{size}')")
metrics = spark.sql(f"OPTIMIZE {T} ZORDER BY (a, b)").collect()[0]["metrics"]
print(f"OPTIMIZE: {metrics['numFilesRemoved']} files removed, {metrics['numFilesAdded']} added; "
      f"{metrics['deleteFileStats']['numDeleteFilesRemoved']} delete files applied and removed")
print("point query EXPLAIN after: ", scans(POINT))
after = lakerules.inspect(T, ["a", "b"])
print(f"expected share of files a point predicate reads: on a {before.columns[0].share:.0%} -> {after.columns[0].share:.0%}, "
      f"on b {before.columns[1].share:.0%} -> {after.columns[1].share:.0%}")

step("The same rows through pyiceberg and DuckDB")
spark_rows = count()
from pyiceberg.catalog import load_catalog  # noqa: E402

table = load_catalog("lake", **lakerules.embedded_catalog(warehouse)).load_table("demo.events")
print(f"Spark {spark_rows:,} rows; pyiceberg {table.scan().to_arrow().num_rows:,} rows")
try:
    import glob
    import os

    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    con = duckdb.connect()
    for module, name in ((duckdb_extension_avro, "avro"), (duckdb_extension_iceberg, "iceberg")):
        con.execute(f"LOAD '{glob.glob(os.path.join(os.path.dirname(module.__file__), 'extensions', '**', f'{name}.duckdb_extension'), recursive=True)[0]}'")
    print(f"DuckDB {con.execute('SELECT count(*) FROM iceberg_scan(?)', [table.metadata_location]).fetchone()[0]:,} rows")
except ImportError:
    print("(install the test extras for the DuckDB read)")

step(f"done in {time.time() - started:.0f} s; the table's layout: python -m lakerules inspect {T} "
     f"--warehouse {warehouse} --column a --column b --plot events.png")
spark.stop()
