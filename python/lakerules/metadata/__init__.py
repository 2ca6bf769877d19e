"""What a table says about itself: Iceberg's metadata tables (``t.snapshots``, ``t$files``, ...),
DESCRIBE EXTENDED of a column (statistics from the manifests) and ``inspect`` (a table's layout
and health, with its plot).

May import: rules (exact answers from the manifests), scan, plan, iceberg, spark.
"""
