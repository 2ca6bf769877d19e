"""Row-level statements run: DELETE as position deletes or copy-on-write, UPDATE and MERGE as
split writes (``run``), and ``delete_by_key``'s equality deletes.

May import: write, scan, plan, iceberg, spark. Imported by: execute, procedures.
"""
