"""Run by tests/test_packaging.py in a fresh venv that has only the built wheel (and a chosen
pyspark): the jar is found, the parser, rule and command hooks work, pyiceberg reads the result.

    <venv>/bin/python tests/packaging_smoke.py WAREHOUSE"""

import subprocess
import sys

import pyspark
from pyiceberg.catalog import load_catalog

import lakerules


def main() -> None:
    warehouse = sys.argv[1]
    jar = subprocess.run([sys.executable, "-m", "lakerules", "jar"], capture_output=True, text=True, check=True).stdout.strip()
    assert jar.endswith("lakerules-shim.jar") and "site-packages" in jar, jar

    spark = lakerules.session(warehouse=warehouse, master="local[1]", conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE NAMESPACE lake.db")
    spark.sql("CREATE TABLE lake.db.t (id BIGINT, v STRING) USING iceberg "
              "TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    spark.sql("INSERT INTO lake.db.t SELECT id, CAST(id AS STRING) FROM range(0, 100)")
    spark.sql("DELETE FROM lake.db.t WHERE id % 10 = 0")
    spark.sql("UPDATE lake.db.t SET v = 'u' WHERE id < 5")
    spark.sql("OPTIMIZE lake.db.t ZORDER BY (id, v)")  # a statement only the shim's parser routes
    n = spark.sql("SELECT count(*) FROM lake.db.t").collect()[0][0]
    spark.stop()

    table = load_catalog("lake", **lakerules.embedded_catalog(warehouse)).load_table("db.t")
    rows = table.scan().to_arrow().to_pylist()
    assert n == len(rows) == 90, (n, len(rows))
    assert sorted(r["id"] for r in rows if r["v"] == "u") == [1, 2, 3, 4]
    print(f"ok pyspark {pyspark.__version__} {jar}")


if __name__ == "__main__":  # pytest --doctest-modules imports this file
    main()
