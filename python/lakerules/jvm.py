"""Small helpers at the Py4J edge: Scala collections, Options, Datasets, and plan nodes.

Everything that touches Spark's internal (Scala) classes by name lives here, so that a change
between Spark versions is mended in one place.
"""

from __future__ import annotations

from typing import Any, Iterable

from pyspark.sql import DataFrame, SparkSession

CATALYST = "org.apache.spark.sql.catalyst"


def jclass(spark: SparkSession, fqn: str):
    """A JVM class by its full name (constructors and static methods)."""
    from py4j.java_gateway import JavaClass

    return JavaClass(fqn, spark.sparkContext._gateway._gateway_client)


def to_seq(spark: SparkSession, items: Iterable[Any]):
    """A Python iterable as an immutable Scala Seq."""
    lst = spark._jvm.java.util.ArrayList()
    for item in items:
        lst.add(item)
    return spark._jvm.scala.jdk.javaapi.CollectionConverters.asScala(lst).toList()


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


def some(spark: SparkSession, value):
    return spark._jvm.scala.Option.apply(value)


def none(spark: SparkSession):
    return spark._jvm.scala.Option.empty()


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


def alias(spark: SparkSession, child, name: str, expr_id, metadata=None):
    """Alias(child, name) with a given exprId, so a replaced subplan keeps its parent's references."""
    meta = some(spark, metadata) if metadata is not None else none(spark)
    empty = to_seq(spark, [])
    return jclass(spark, f"{CATALYST}.expressions.Alias")(child, name, expr_id, empty, meta, empty)


def project(spark: SparkSession, exprs: list, child):
    return jclass(spark, f"{CATALYST}.plans.logical.Project")(to_seq(spark, exprs), child)


def empty_result(spark: SparkSession):
    """The plan a command returns when it has no rows to show (what Spark's v2 writes return)."""
    from pyspark.sql.types import StructType

    return analyzed(spark.createDataFrame([], StructType([])))


def result_rows(spark: SparkSession, rows: list[tuple], schema: str):
    """A LocalRelation of a few result rows, e.g. DML's num_affected_rows."""
    return analyzed(spark.createDataFrame(rows, schema))


def subquery_alias(spark: SparkSession, name: str, child):
    identifier = jclass(spark, f"{CATALYST}.AliasIdentifier")(name)
    return jclass(spark, f"{CATALYST}.plans.logical.SubqueryAlias")(identifier, child)
