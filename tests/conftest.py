"""One local[2] SparkSession for the whole run, a fresh namespace per test, and readers of the
same tables through pyiceberg and DuckDB's iceberg extension."""

from __future__ import annotations

import datetime
import glob
import itertools
import os
import time
from pathlib import Path

import pytest

import jvm_archive
import lakerules

_ids = itertools.count()

# JVM options of every Spark JVM the tests start: this session's, and through the environment
# (spark-submit adds SPARK_SUBMIT_OPTS) spark-sql's, Connect's and the driver processes'
# (tests/jvm_archive.py says why each).
TEST_JVM_OPTIONS = f"{jvm_archive.TEST_JVM_OPTIONS} {lakerules.jvm_archive.options()}".strip()
os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {TEST_JVM_OPTIONS}".strip()

# Spark hands timestamps to Python in the process's local zone: make that UTC.
os.environ["TZ"] = "UTC"
time.tzset()


# The test files that take longest (make test on 2 cores, 2026-11-27: 100 s down to 50 s), run
# first: the two workers take files in collection order, so a long file collected last would keep
# one worker busy after the other ran out of work (simulated on that run's times: 788 s -> 770 s).
SLOWEST_FIRST = ("test_v3", "test_optimize", "test_faults", "test_anchor_interop", "test_anchor_differential",
                 "test_jvm_drivers", "test_changelog",
                 "test_scan_planning",
                 "test_connect", "test_sql_text", "test_rowlevel_semantics", "test_streaming", "test_concurrency",
                 "test_history")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: files and tests keep their order


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(warehouse):
    spark = lakerules.session(
        warehouse=warehouse,
        master="local[2]",
        app_name="lakerules-tests",
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.sql.session.timeZone": "UTC",
            # pyspark's call sites for DataFrame errors: each DataFrame or Column call of the
            # tests and of lakerules' executors would cost eight more Py4J calls
            "spark.python.sql.dataFrameDebugging.enabled": "false",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


@pytest.fixture
def ns(spark):
    """A fresh namespace lake.t<N>, dropped (with its tables) after the test."""
    name = f"t{next(_ids)}"
    spark.sql(f"CREATE NAMESPACE lake.{name}")
    yield name
    spark.sql(f"DROP NAMESPACE IF EXISTS lake.{name} CASCADE")


@pytest.fixture(scope="session")
def lake2_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lake2")


@pytest.fixture
def lake2(spark, lake2_root):
    """A second lake catalog of the session, lake2, with a SQLite database and warehouse of its own,
    configured for the test (one folder for the whole run: Spark and lakerules keep a catalog's
    settings from its first use on); (its folder, its pyiceberg catalog)."""
    from pyiceberg.catalog import load_catalog

    props = {"type": "sql", "uri": f"sqlite:///{lake2_root}/catalog.db", "warehouse": f"file://{lake2_root}"}
    settings = {"spark.sql.catalog.lake2": "io.lakerules.LakeCatalog",
                **{f"spark.sql.catalog.lake2.{k}": v for k, v in props.items()}}
    for k, v in settings.items():
        spark.conf.set(k, v)
    yield lake2_root, load_catalog("lake2", **props)
    for k in settings:
        spark.conf.unset(k)


@pytest.fixture(scope="session")
def iceberg_catalog(warehouse, spark):
    from pyiceberg.catalog import load_catalog

    return load_catalog("lake", **lakerules.embedded_catalog(warehouse))


def _extension(name: str) -> str:
    import importlib

    module = importlib.import_module(f"duckdb_extension_{name}")
    paths = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "**", f"{name}.duckdb_extension"), recursive=True)
    assert paths, f"no {name} extension file in {module.__file__}"
    return paths[0]


@pytest.fixture(scope="session")
def duck():
    import duckdb

    con = duckdb.connect()
    for name in ("avro", "iceberg"):
        con.execute(f"LOAD '{_extension(name)}'")
    con.execute("SET TimeZone='UTC'")
    return con


@pytest.fixture
def engines(spark, iceberg_catalog, duck):
    """rows(table, columns) from each engine, as sorted lists of tuples (None-safe)."""
    return Engines(spark, iceberg_catalog, duck)


class Engines:
    def __init__(self, spark, catalog, duck):
        self.spark, self.catalog, self.duck = spark, catalog, duck

    def lakerules(self, table: str, columns: str = "*") -> list[tuple]:
        return _sorted(tuple(r) for r in self.spark.sql(f"SELECT {columns} FROM {table}").collect())

    def pyiceberg(self, table: str, columns: str = "*") -> list[tuple]:
        t = self.catalog.load_table(table.split(".", 1)[1])
        arrow = t.scan().to_arrow()
        if columns != "*":
            arrow = arrow.select([c.strip() for c in columns.split(",")])
        return _sorted(tuple(row.values()) for row in arrow.to_pylist())

    def duckdb(self, table: str, columns: str = "*") -> list[tuple]:
        t = self.catalog.load_table(table.split(".", 1)[1])
        if t.current_snapshot() is None:
            return []
        location = t.metadata_location.replace("'", "''")
        return _sorted(self.duck.execute(f"SELECT {columns} FROM iceberg_scan('{location}')").fetchall())

    def assert_same(self, table: str, columns: str = "*", expected: list[tuple] | None = None) -> list[tuple]:
        ours = self.lakerules(table, columns)
        assert self.pyiceberg(table, columns) == ours, "pyiceberg reads differently"
        assert self.duckdb(table, columns) == ours, "DuckDB reads differently"
        if expected is not None:
            assert ours == _sorted(expected)
        return ours


def _norm(v):
    """Engines disagree only in representation: aware datetimes become naive UTC, Spark's
    struct Rows become dicts (as pyiceberg and DuckDB give structs)."""
    from pyspark.sql import Row

    if isinstance(v, Row):
        return {k: _norm(x) for k, x in v.asDict().items()}
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    if isinstance(v, (list, tuple)):
        return type(v)(_norm(x) for x in v)
    if isinstance(v, dict):  # keys in one order, so that rows sort alike
        return {k: _norm(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    return v


def _sorted(rows) -> list[tuple]:
    rows = [tuple(_norm(v) for v in r) for r in rows]
    return sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))
