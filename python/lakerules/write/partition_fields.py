"""Iceberg's partition evolution (lakerules.plan.statements.PartitionFieldChange), one metadata
commit each:

    ALTER TABLE t ADD PARTITION FIELD bucket(16, id) [AS name]
    ALTER TABLE t DROP PARTITION FIELD days(ts) | name
    ALTER TABLE t REPLACE PARTITION FIELD days(ts) | name WITH hours(ts) [AS name]
"""

from __future__ import annotations

from lakerules.errors import LakeError
from lakerules.iceberg import names, partitioning
from lakerules.spark import jvm as J


def run(ctx, table, stmt):
    """ADD/DROP/REPLACE PARTITION FIELD on the table."""
    schema = table.schema()
    with table.update_spec() as update:
        if stmt.op == "ADD":
            transform, column, alias = _field(stmt.field, schema)
            _add(table, update, stmt.field, transform, column, alias)
        elif stmt.op == "DROP":
            update.remove_field(_existing_field(table, stmt.field))
        else:
            update.remove_field(_existing_field(table, stmt.field))
            transform, column, alias = _field(stmt.new, schema)
            _add(table, update, stmt.new, transform, column, alias)
    return J.empty_result(ctx.spark)


def _add(table, update, spec, transform, column, alias) -> None:
    """Add a partition field; one the spec has already (same source and transform, or name) is an error."""
    try:
        update.add_field(column, transform, alias)
    except ValueError as e:
        if "already exists" not in str(e) and "Duplicate" not in str(e):
            raise
        raise LakeError(f"lakerules: ALTER TABLE {names.table_name(table)} ADD PARTITION FIELD {spec.shown()}: the "
                        "table's partition spec has that field already. Nothing was changed") from None


def _field(spec, schema):
    """A FieldSpec -> (transform, source column, partition field name or None)."""
    transform, column = partitioning.field_spec(spec, schema, "partition")
    return transform, column, spec.alias


def _existing_field(table, spec) -> str:
    """The name of the current spec's field that spec names, by name or by transform."""
    current, schema = table.spec(), table.schema()
    missing = (f"lakerules: table {names.table_name(table)} has no partition field {spec.shown()!r} in its "
               "current spec")
    if spec.transform is None:
        for f in current.fields:
            if f.name.lower() == ".".join(spec.column).lower():
                return f.name
    try:
        transform, column, _ = _field(spec, schema)
    except LakeError:
        raise LakeError(missing) from None
    source_id = schema.find_field(column).field_id
    for f in current.fields:
        if f.source_id == source_id and f.transform == transform:
            return f.name
    raise LakeError(missing)
