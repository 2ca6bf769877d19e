"""JVM classes as Python reaches them: each made once per gateway, and the classes pyspark
names by their short name imported one by one. ``spark._jvm.a.b.C`` asks the JVM for each
segment, and every segment but the last is a class lookup that fails through every jar on the
classpath (the first one also through each of pyspark's star-imported packages). Measured on a
run of small statements: about 3 ms a name, a fifth of the JVM's CPU."""

from __future__ import annotations

from py4j.java_gateway import JavaClass, JavaMember, java_import
from pyspark.sql import SparkSession


class _Class(JavaClass):
    """A JVM class whose static methods are looked up once (a JavaClass asks the JVM each time)."""

    def __getattr__(self, name):
        member = JavaClass.__getattr__(self, name)
        if isinstance(member, JavaMember):
            self.__dict__[name] = member
        return member


_classes: dict = {}  # (gateway client, class name) -> _Class


def jclass(spark: SparkSession, fqn: str) -> JavaClass:
    """The JVM class ``fqn`` (a primitive's name too: ``int``, ``long``), made once per gateway;
    nothing is asked of the JVM until a member is used."""
    return jclass_of(spark._sc._gateway._gateway_client, fqn)


def jclass_of(client, fqn: str) -> JavaClass:
    """jclass, by the gateway client (a JVM object's ``_gateway_client``)."""
    key = (client, fqn)
    cls = _classes.get(key)
    if cls is None:
        cls = _classes[key] = _Class(fqn, client)
    return cls


# Classes pyspark names by their short name on every column function and conversion
# (``jvm.functions.col``): imported one by one, the JVM finds each at once instead of after a
# failed lookup in each of pyspark's star-imported packages.
_PYSPARK_NAMES = ("org.apache.spark.sql.functions", "org.apache.spark.api.python.PythonUtils",
                  "org.apache.spark.sql.api.python.PythonSQLUtils")


def import_pyspark_names(spark: SparkSession) -> None:
    """Import _PYSPARK_NAMES into the session's JVM view (spark.lakerules attaches its registry)."""
    for name in _PYSPARK_NAMES:
        java_import(spark._jvm, name)
