"""OPTIMIZE [WHERE] [ZORDER BY | HILBERT BY]: which files to rewrite and how they group
(``select``), the space-filling curves and k-d layout (``curves``), and the rewrite itself
(``rewrite``: plan, write, commit).

May import: write, scan, plan, iceberg, spark. Imported by: procedures (rewrite_data_files), execute.
"""
