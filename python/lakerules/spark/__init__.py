"""The Py4J edge: the one place Python reaches into the JVM (``jvm``: Catalyst objects, JVM
calls, DataFrames from plans), Spark job descriptions (``progress``) and lakerules' own
``spark.lakerules.*`` settings (``settings``).

May import: errors, pyspark. Imported by every package.
"""
