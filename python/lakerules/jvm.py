"""Small helpers at the Py4J edge: Scala collections and Options, class names, Datasets over
JVM plans, and the small result plans commands return."""

from __future__ import annotations

from typing import Any, Iterable

from pyspark.sql import DataFrame, SparkSession


def to_seq(spark: SparkSession, items: Iterable[Any]):
    """A Python iterable as an immutable Scala Seq."""
    return spark._jvm.scala.jdk.javaapi.CollectionConverters.asScala(to_java_list(spark, items)).toList()


def to_java_list(spark: SparkSession, items: Iterable[Any]):
    lst = spark._jvm.java.util.ArrayList()
    for item in items:
        lst.add(item)
    return lst


def from_seq(seq) -> list:
    """A Scala Seq (or any Scala iterable) as a Python list."""
    it = seq.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out




def option_value(opt):
    """The value of a Scala Option, or None."""
    return opt.get() if opt.isDefined() else None


def class_name(obj) -> str:
    return obj.getClass().getName()


def simple_name(obj) -> str:
    return obj.getClass().getSimpleName()


def dataframe(spark: SparkSession, plan) -> DataFrame:
    """A DataFrame over an (analyzed or not) JVM logical plan."""
    jdf = spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan)
    return DataFrame(jdf, spark)


def analyzed(df: DataFrame):
    """The analyzed JVM logical plan of a DataFrame."""
    return df._jdf.queryExecution().analyzed()




def empty_result(spark: SparkSession):
    """The plan a command returns when it has no rows to show (what Spark's v2 writes return)."""
    from pyspark.sql.types import StructType

    return analyzed(local_frame(spark, [], StructType([])))


def result_rows(spark: SparkSession, rows: list[tuple], schema: str):
    """A LocalRelation of a few result rows, e.g. DML's num_affected_rows."""
    flat = "<" not in schema and all(v is None or isinstance(v, (bool, int, str)) for r in rows for v in r)
    if not flat:  # nested results (OPTIMIZE's metrics struct)
        from pyspark.sql.types import StructType

        return analyzed(local_frame(spark, rows, StructType.fromDDL(schema)))
    columns = [tuple(part.strip().split(None, 1)) for part in schema.split(",")]
    return analyzed(values_frame(spark, rows, [(n, t.upper()) for n, t in columns]))


def local_frame(spark: SparkSession, rows: list, schema) -> DataFrame:
    """A DataFrame of driver-side Python rows (tuples in ``schema``'s column order, any types) as
    a LocalRelation built in the JVM from Arrow batches. ``spark.createDataFrame(rows)`` makes a
    Python RDD instead, which runs Python workers on the executors: lakerules needs none."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    columns = list(zip(*rows)) if rows else [[] for _ in schema.fields]
    table = pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, arrow_schema)],
                                 schema=arrow_schema)
    return spark.createDataFrame(table, schema)


def values_frame(spark: SparkSession, rows: list[tuple], columns: list[tuple[str, str]]) -> DataFrame:
    """A small DataFrame of driver-side rows as Spark's own VALUES (a LocalRelation): unlike
    createDataFrame from Python objects it needs no Python worker and no job to read; and the
    values appear in EXPLAIN and in the plan's text, which suits a few flat values.
    ``columns``: (name, SQL type) pairs; values are str, int or None."""
    casts = ", ".join(f"CAST(col{i + 1} AS {t}) AS `{n}`" for i, (n, t) in enumerate(columns))
    if not rows:
        nulls = ", ".join(f"CAST(NULL AS {t}) AS `{n}`" for n, t in columns)
        return spark.sql(f"SELECT {nulls} WHERE false")
    body = ", ".join("(" + ", ".join(_sql_value(v) for v in r) + ")" for r in rows)
    return spark.sql(f"SELECT {casts} FROM VALUES {body}")


def sql_literal(v) -> str | None:
    """v as Spark SQL literal text, for the types whose text is exact (bool, int, str); None for
    the others."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v}L"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return None


def _sql_value(v) -> str:
    if v is None:
        return "NULL"
    text = sql_literal(v)
    if text is None:
        raise TypeError(f"values_frame: unsupported value {v!r}")
    return text
