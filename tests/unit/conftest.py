"""Fixtures of the rule unit layer: a pyiceberg catalog without Spark (``catalog``), and for rules
that take plans Spark made, tables of the session's lake catalog in a namespace of the test
module (``lake``)."""

from __future__ import annotations

import itertools

import pytest

from unit.rulekit import Ctx, local_catalog

_ids = itertools.count()


@pytest.fixture
def catalog(tmp_path):
    """The embedded default catalog (SQLite) in the test's own folder, namespace ``db``; no Spark."""
    return local_catalog(tmp_path)


class Lake:
    """Tables of the session's lake catalog, created through pyiceberg (no Spark job), in one
    namespace; ``ctx()`` is a rule's context over the session with the test's settings."""

    def __init__(self, spark, catalog, catalogs, ns: str):
        self.spark, self.catalog, self.catalogs, self.ns = spark, catalog, catalogs, ns

    def name(self, table: str) -> str:
        return f"lake.{self.ns}.{table}"

    def table(self, name: str, data, *, partition_by: str | None = None, properties: dict | None = None,
              appends: int = 1):
        """A table of ``data``'s schema, ``data`` appended ``appends`` times (a file per partition
        each time); the pyiceberg Table."""
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.transforms import IdentityTransform

        table = self.catalog.create_table(f"{self.ns}.{name}", data.schema, properties=properties or {})
        if partition_by:
            with table.update_spec() as spec:
                spec.add_field(partition_by, IdentityTransform(), partition_by)
        for _ in range(appends):
            table.append(data)
        return self.catalog.load_table(f"{self.ns}.{name}")

    def ctx(self, **settings) -> Ctx:
        return Ctx(spark=self.spark, catalogs=self.catalogs, settings=settings)


@pytest.fixture(scope="session")
def catalogs(spark):
    from lakerules.iceberg.catalogs import Catalogs

    return Catalogs(spark)


@pytest.fixture(scope="module")
def lake(spark, iceberg_catalog, catalogs):
    ns = f"unit{next(_ids)}"
    iceberg_catalog.create_namespace(ns)
    yield Lake(spark, iceberg_catalog, catalogs, ns)
    for ident in iceberg_catalog.list_tables(ns):
        iceberg_catalog.drop_table(ident)
    iceberg_catalog.drop_namespace(ns)
