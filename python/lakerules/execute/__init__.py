"""The executor: the one place planned commands run. One dispatch table maps each command node
type to the function that writes and commits it (row-level statements, writes, OPTIMIZE,
procedures, DESCRIBE, streaming batches).

May import: rowlevel, write, optimize, procedures, metadata, streaming, plan, iceberg, spark.
Imported by: backend.
"""
