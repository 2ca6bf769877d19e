"""Writing: data and delete files written by Spark's executors (``files``), the table's write order
(``order``) and Parquet settings (``parquet_props``), column metrics (``metrics``), commits through
pyiceberg (``commit``) and the one-commit replace of a table (``replace``).

May import: scan, plan, iceberg, spark. Imported by: rowlevel, optimize, procedures, streaming,
execute.
"""
