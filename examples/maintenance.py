"""Table history and maintenance: DESCRIBE HISTORY, RESTORE to an earlier snapshot, and
Iceberg's procedures (expire_snapshots, remove_orphan_files, rewrite_manifests) as CALLs.

    .venv/bin/python examples/maintenance.py [WAREHOUSE]
"""

import sys

import lakerules


def run(spark, ns: str = "examples", rows: int = 10_000) -> dict:
    t = f"lake.{ns}.logs"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, msg STRING) USING iceberg")
    for i in range(3):  # three appends: three snapshots, three manifests
        spark.sql(f"INSERT INTO {t} SELECT id, 'batch {i}' FROM range({i * rows}, {(i + 1) * rows})")
    spark.sql(f"DELETE FROM {t} WHERE msg = 'batch 2'")
    history = spark.sql(f"DESCRIBE HISTORY {t}").select("version", "operation").collect()
    print("history:", [(r["version"], r["operation"]) for r in history])
    first = history[-1]["version"]
    spark.sql(f"RESTORE TABLE {t} TO VERSION AS OF {first}").collect()
    restored = spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0]
    print(f"restored to snapshot {first}: {restored:,} rows")
    spark.sql(f"INSERT INTO {t} SELECT id, 'again' FROM range(0, {rows})")
    name = t.split(".", 1)[1]
    manifests = spark.sql(f"CALL lake.system.rewrite_manifests(table => '{name}')").collect()[0].asDict()
    print("rewrite_manifests:", manifests)
    expired = spark.sql(f"CALL lake.system.expire_snapshots(table => '{name}', "
                        "older_than => current_timestamp(), retain_last => 1)").collect()[0].asDict()
    print("expire_snapshots:", expired)
    orphans = spark.sql(f"CALL lake.system.remove_orphan_files(table => '{name}', dry_run => true)").collect()
    print(f"remove_orphan_files (dry run, files older than 3 days): {len(orphans)}")
    return {"restored": restored, "manifests": manifests, "expired": expired, "table": t,
            "rows": spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0]}


if __name__ == "__main__":
    spark = lakerules.session(warehouse=sys.argv[1] if len(sys.argv) > 1 else "warehouse/examples")
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("DROP NAMESPACE IF EXISTS lake.examples CASCADE")
    spark.sql("CREATE NAMESPACE lake.examples")
    run(spark)
    spark.stop()
