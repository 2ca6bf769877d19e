"""The SQL lakerules adds to Spark's: one sqlglot dialect (``dialect``), what the shim routes to it
(``routes``), the parse of a routed statement (``statements``) and Spark's limit on nesting
(``nesting``).

May import: plan, spark, errors (and, until statements are data, the packages whose commands
they build). Imported by: backend.
"""
