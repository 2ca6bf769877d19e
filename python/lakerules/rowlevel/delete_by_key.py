"""Deleting by key, for producers that delete rows by a key (CDC): equality delete files (on a
format version 3 table, deletion vectors: lakerules.rowlevel.keys_v3).

    lakerules.delete_by_key(spark, "lake.db.t", keys_df, on=["id"])

writes the distinct key rows as equality delete files (Spark executors, partitioned like the
table) and commits them in one snapshot: every row of the table's current data whose ``on``
columns equal a key row (NULL matching NULL) is deleted; rows added later are not.

lakerules and DuckDB read equality deletes; pyiceberg (0.12) refuses to scan a table that has any
("PyIceberg does not yet support equality deletes"). OPTIMIZE rewrites the data files they apply
to and drops them (files of minFileSize or more only with deleteFileThreshold=1), after which
pyiceberg reads the table again.
"""

from __future__ import annotations

from pyiceberg.manifest import DataFileContent
from pyspark.sql import DataFrame, SparkSession

from lakerules.write import commit, row_delta
from lakerules.spark import jvm as J
from lakerules.iceberg import names, schema as schemas
from lakerules.rowlevel import keys_v3
from lakerules.errors import LakeError
from lakerules.write.files import discard, write_files


def delete_by_key(spark: SparkSession, catalogs, table_name: str, keys: DataFrame, on: list[str]) -> int:
    """Delete the rows whose ``on`` columns equal a row of ``keys``; returns the keys written.
    ``catalogs``: the attached session's (lakerules.iceberg.catalogs.Catalogs)."""
    if not on:
        raise LakeError("lakerules: delete_by_key needs at least one key column in on=[...]")
    catalog_name, namespace, name = _resolve(spark, table_name)
    commit.use_session(spark)
    from lakerules.plan.nodes import TableRef

    # to the branch write-audit-publish names, or staged, as every write (lakerules.iceberg.refs)
    table = catalogs.load_for_write(TableRef(catalog_name, tuple(namespace), name),
                                             lambda key: spark.conf.get(key, None))
    schema, spec = table.schema(), table.spec()
    key_fields = [_column(table, schema, c) for c in on]
    if table.format_version >= 3:  # deletion vectors of the rows the keys match (lakerules.rowlevel.keys_v3)
        return _by_deletion_vectors(spark, table, TableRef(catalog_name, tuple(namespace), name), keys, key_fields)
    # The files are partitioned like the table, so the partition source columns must be known.
    needed = list(key_fields)
    for pf in spec.fields:
        source = schema.find_field(pf.source_id)
        if source.field_id not in {f.field_id for f in needed}:
            if source.name not in keys.columns:
                raise LakeError(
                    f"lakerules: {table_name} is partitioned by {pf.transform}({source.name}); the keys must "
                    f"have column {source.name} too, so each delete lands in its partition"
                )
            needed.append(source)
    missing = [f.name for f in needed if f.name not in keys.columns]
    if missing:
        raise LakeError(f"lakerules: the keys DataFrame has no column(s) {missing}")
    rows = keys.select(
        *[J.column(f.name).cast(schemas.iceberg_type_to_spark(f.field_type)).alias(f.name) for f in needed]
    ).dropDuplicates()
    rows = rows.persist()
    try:
        count = rows.count()
        if count == 0:
            return 0
        written = write_files(
            spark, catalog_name, table, rows, fields=needed,
            content=DataFileContent.EQUALITY_DELETES, equality_ids=[f.field_id for f in key_fields], cluster=True,
        )
        try:
            row_delta.commit(table, [], written, {"lakerules.operation": "delete_by_key"})
        except BaseException as e:
            discard(table, written, e)
            raise
        return count
    finally:
        rows.unpersist()


def _by_deletion_vectors(spark, table, t, keys: DataFrame, key_fields: list) -> int:
    missing = [f.name for f in key_fields if f.name not in keys.columns]
    if missing:
        raise LakeError(f"lakerules: the keys DataFrame has no column(s) {missing}")
    rows = keys.select(
        *[J.column(f.name).cast(schemas.iceberg_type_to_spark(f.field_type)).alias(f.name) for f in key_fields]
    ).dropDuplicates().persist()
    try:
        count = rows.count()
        if count:
            keys_v3.delete(spark, table, t, rows, key_fields)
        return count
    finally:
        rows.unpersist()


def _resolve(spark, name: str) -> tuple[str, tuple[str, ...], str]:
    parts = J.name_parts(spark, name)
    if len(parts) >= 3 or (len(parts) == 2 and J.catalog_options(spark, parts[0]) is not None):
        catalog, rest = parts[0], parts[1:]
    else:
        catalog, rest = spark.catalog.currentCatalog(), parts
    if J.catalog_options(spark, catalog) is None:
        J.catalog_manager(spark).catalog(catalog)  # initializes it
        if J.catalog_options(spark, catalog) is None:
            raise LakeError(f"lakerules: {name} is not a table of a lake catalog")
    if len(rest) < 2:
        raise LakeError(f"lakerules: {name}: name the table as catalog.namespace.table")
    return catalog, tuple(rest[:-1]), rest[-1]


def _column(table, schema, name: str):
    try:
        return schema.find_field(name)
    except ValueError:
        raise LakeError(f"lakerules: {names.table_name(table)} has no column {name!r}") from None
