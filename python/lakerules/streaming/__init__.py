"""Structured Streaming: micro-batches written to lake tables exactly once (``sink``) and lake
tables read as a stream of their appended rows (``source``).

May import: write, scan, plan, iceberg, spark. Imported by: execute, backend.
"""
