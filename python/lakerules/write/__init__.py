"""Writing: data and delete files written by Spark's executors (``files``), the table's write order
(``order``) and Parquet settings (``parquet_props``), column metrics (``metrics``) and commits
through pyiceberg (``commit``); the one-commit replace of a table is lakerules.iceberg.replace.

May import: scan, plan, iceberg, spark. Imported by: rowlevel, optimize, procedures, streaming,
execute.
"""
