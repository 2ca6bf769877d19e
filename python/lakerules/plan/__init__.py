"""The plan model: frozen dataclass nodes over Spark's logical plan (``nodes``), the one tree walk,
the conversion from and to Spark's JVM plans, and Catalyst conditions as pyiceberg expressions
(``expressions``).

Data only: nothing here writes, commits or plans files. May import: iceberg (names), spark, errors.
"""
