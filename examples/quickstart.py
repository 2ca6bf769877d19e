"""The quickstart: a partitioned lake table on the embedded catalog, written and read with Spark
SQL, then read by pyiceberg and DuckDB to show it is a plain Iceberg v2 table.

    make demo            (or: .venv/bin/python examples/quickstart.py [WAREHOUSE])
"""

import shutil
import sys
from pathlib import Path

import lakerules

warehouse = Path(sys.argv[1] if len(sys.argv) > 1 else "warehouse/quickstart").resolve()
shutil.rmtree(warehouse, ignore_errors=True)

spark = lakerules.session(warehouse=warehouse, conf={"spark.ui.showConsoleProgress": "false"})
spark.sparkContext.setLogLevel("ERROR")

spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.db")
spark.sql("""
    CREATE TABLE lake.db.ev (id BIGINT, ts TIMESTAMP, kind STRING)
    USING iceberg PARTITIONED BY (days(ts), bucket(16, id))
""")
spark.sql("""
    INSERT INTO lake.db.ev
    SELECT id,
           TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id % 96 AS INT), 0, 0),
           element_at(array('click', 'view', 'spam'), CAST(id % 3 AS INT) + 1)
    FROM range(0, 100000)
""")
print("rows per kind since 2026-01-02:")
spark.sql("SELECT kind, count(*) AS n FROM lake.db.ev WHERE ts >= '2026-01-02' GROUP BY kind ORDER BY kind").show()

spark.sql("ALTER TABLE lake.db.ev ADD COLUMN score DOUBLE")
spark.sql("INSERT INTO lake.db.ev VALUES (100000, TIMESTAMP'2026-01-05 12:00:00', 'view', 0.5)")
spark.sql("DESCRIBE TABLE lake.db.ev").show(truncate=False)

# The same table through other engines.
from pyiceberg.catalog import load_catalog  # noqa: E402

table = load_catalog("lake", **lakerules.embedded_catalog(warehouse)).load_table("db.ev")
print("pyiceberg reads", table.scan().to_arrow().num_rows, "rows; snapshots:", len(table.snapshots()))
try:
    import glob
    import os

    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    con = duckdb.connect()
    for module, name in ((duckdb_extension_avro, "avro"), (duckdb_extension_iceberg, "iceberg")):
        path = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "**", f"{name}.duckdb_extension"), recursive=True)[0]
        con.execute(f"LOAD '{path}'")
    n = con.execute(f"SELECT count(*) FROM iceberg_scan('{table.metadata_location}')").fetchone()[0]
    print("DuckDB reads", n, "rows")
except ImportError:
    print("(install the test extras for the DuckDB check)")
spark.stop()
