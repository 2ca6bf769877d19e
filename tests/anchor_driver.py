"""Iceberg's own Spark runtime on a lakerules catalog, in a process of its own (tests/anchor.py).

    <anchor venv>/bin/python anchor_driver.py JARS_DIR WAREHOUSE CATALOG_DB < statements.json
    <anchor venv>/bin/python anchor_driver.py JARS_DIR WAREHOUSE CATALOG_DB --serve

``--serve`` (the benchmarks, bench/iceberg.py): a JSON statement per line on stdin, answered as it
comes with a JSON line that also holds "seconds", the statement's wall time in this process (its
rows collected), until stdin closes.

Runs in the anchor's venv (pyspark of the Spark line Iceberg ships a runtime for; `make anchor`),
never with lakerules: a local Spark session with IcebergSparkSessionExtensions and the catalog
``lake`` as Iceberg's SparkCatalog over a JdbcCatalog on the same SQLite database pyiceberg's SQL
catalog keeps (both use the tables iceberg_tables / iceberg_namespace_properties). Reads a JSON
list of SQL statements from stdin and prints one JSON line per statement: {"rows": [...]} (values
as JSON, dates and decimals as strings) or {"error": "<first line>"}; a statement that fails does
not stop the others.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

import anchor_values  # beside this file


def main() -> None:
    jars_dir, warehouse, catalog_db = sys.argv[1:4]
    serve = "--serve" in sys.argv[4:]
    os.environ["TZ"] = "UTC"
    from pyspark.sql import SparkSession

    jars = ",".join(sorted(glob.glob(os.path.join(jars_dir, "*.jar"))))
    spark = (SparkSession.builder.master("local[2]").appName("iceberg-anchor")
             .config("spark.jars", jars)
             .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
             .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
             .config("spark.sql.catalog.lake.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
             .config("spark.sql.catalog.lake.uri", f"jdbc:sqlite:{catalog_db}")
             .config("spark.sql.catalog.lake.warehouse", f"file://{warehouse}")
             .config("spark.sql.catalog.lake.jdbc.schema-version", "V0")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", os.environ.get("ANCHOR_SHUFFLE_PARTITIONS", "2"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    statements = (json.loads(line) for line in sys.stdin if line.strip()) if serve else json.load(sys.stdin)
    for statement in statements:
        start = time.perf_counter()
        try:
            rows = [list(anchor_values.row(r)) for r in spark.sql(statement).collect()]
            out = {"rows": rows}
        except Exception as e:  # noqa: BLE001 - reported to the test, which decides
            out = {"error": _cause(e)}
        out["seconds"] = time.perf_counter() - start
        print(json.dumps(out), flush=True)
    spark.stop()


def _cause(e: Exception) -> str:
    """The error's first line, and for a JVM error each cause's class and first line down the chain."""
    text = str(getattr(e, "desc", None) or e).strip()
    parts = [text.splitlines()[0] if text else type(e).__name__]
    j = getattr(e, "java_exception", None)
    while j is not None:
        message = (j.getMessage() or "").strip()
        parts.append(f"{j.getClass().getName()}: {message.splitlines()[0] if message else ''}")
        j = j.getCause()
    return " <- ".join(parts)


if __name__ == "__main__":
    main()
