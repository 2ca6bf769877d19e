"""Reading lake tables: scan planning from the manifests (``planning``, ``manifests``, the
distributed ``manifest_job``), the files a row-level statement touches (``row_files``), the read
itself with its deletes (``read``), late materialization (``latemat``) and EXPLAIN's view of it.

May import: plan, iceberg, spark. Imported by: rules, write and everything above.
"""
