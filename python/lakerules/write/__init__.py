"""Writing: data and delete files written by Spark's executors (``files``), the table's write order
(``order``) and Parquet settings (``parquet_props``), column metrics (``metrics``), and commits
through pyiceberg: the transaction, appends, overwrites and a table replaced in one commit
(``commit``), manifest merging (``manifest_merge``), row deltas with delete files and their
validation (``row_delta``), OPTIMIZE's rewrites and rewrite_manifests (``rewrites``), ref moves and
RESTORE (``history``); the one-commit replace of a table is lakerules.iceberg.replace. pyiceberg's
private names are reached only through lakerules.iceberg.pyiceberg_edge.

May import: scan, plan, iceberg, spark. Imported by: rowlevel, optimize, procedures, streaming,
execute.
"""
