"""Iceberg tables through pyiceberg: catalogs (built from Spark's catalog settings, their faults
made clear), schema and partition spec conversions, branches and tags, write options, table
properties, paths and which folders each table owns, the cleanup of files a table no longer
needs, the one-commit replace of a table, pyiceberg's metadata caches, and the one module that
uses pyiceberg's private names (``pyiceberg_edge``: every other module uses its public ones).

May import: spark (settings only), errors, pyiceberg. Imported by everything above it; imports
nothing that plans or runs a statement.
"""
