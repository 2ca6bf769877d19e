"""Iceberg's CALL procedures and Delta's maintenance verbs: their signatures, arguments and
results (``maintenance``), remove_orphan_files, expire_snapshots, rewrite_manifests, add_files
and register_table (``imports``), rewrite_data_files (on OPTIMIZE's engine),
rewrite_position_delete_files, remove_missing_files, the history procedures and DESCRIBE
HISTORY / RESTORE (``history``), VACUUM.

May import: optimize, rowlevel, write, scan, plan, iceberg, spark. Imported by: sql, execute.
"""
