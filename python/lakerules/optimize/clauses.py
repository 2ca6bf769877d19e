"""OPTIMIZE's clauses checked against the table (and rewrite_data_files' and
rewrite_position_delete_files' equivalents): the ZORDER BY / HILBERT BY columns, found in the
schema as written, and the WHERE predicate, which may name only partition columns."""

from __future__ import annotations

from pyiceberg.expressions import AlwaysFalse, AlwaysTrue
from pyiceberg.expressions.visitors import bind, extract_field_ids
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import StructType
from pyspark.sql import functions as F

from lakerules.errors import LakeError
from lakerules.iceberg import schema as schemas
from lakerules.plan.expressions import to_iceberg
from lakerules.plan.nodes import TableRef
from lakerules.spark import jvm as J
from lakerules.write import metrics as column_metrics

def zorder_columns(table, ref: TableRef, paths, clause: str = "ZORDER BY") -> list:
    """[(path, NestedField)] of the ZORDER BY columns (the path as the schema spells it: a struct's
    field is (struct, field), a top-level column named "x.y" is ("x.y",)), or a LakeError saying
    what is wrong."""
    schema = table.schema()
    identity_sources = {f.source_id for f in table.spec().fields if isinstance(f.transform, IdentityTransform)}
    plan = column_metrics.statistics_plan(schema, table.properties)
    out, seen = [], set()
    for path in paths:
        name = display(path)
        fields = _find(schema, path, clause, ref)
        field = fields[-1]
        canonical = tuple(f.name for f in fields)
        if field.field_id in seen:
            raise LakeError(f"lakerules: {clause} names column {name} twice")
        seen.add(field.field_id)
        if not field.field_type.is_primitive:
            spark_type = schemas.iceberg_type_to_spark(field.field_type).simpleString()
            raise LakeError(f"lakerules: {clause} column {name} is of type {spark_type}; clustering needs a primitive column"
                            + (" (name one of its fields, e.g. " + display((*canonical, field.field_type.fields[0].name)) + ")"
                               if isinstance(field.field_type, StructType) and field.field_type.fields else ""))
        if field.field_id in identity_sources:
            raise LakeError(
                f"lakerules: {clause} column {name} is a partition column of {ref} (identity): it has one value per "
                "partition, so clustering by it does nothing; cluster by data columns"
            )
        collector = plan.get(field.field_id)
        if not column_metrics.has_bounds(collector):
            kind = "none" if collector is None else collector.mode.type.value
            raise LakeError(
                f"lakerules: {clause} column {name} has no min/max statistics in {ref} (metrics mode {kind}), so "
                f"clustering by it cannot help skip files; set table property "
                f"write.metadata.metrics.column.{schema.find_column_name(field.field_id)} to truncate(16) or full first"
            )
        out.append((canonical, field))
    return out


def display(path: tuple[str, ...]) -> str:
    """A column path as Spark SQL names it: parts joined by dots, a part holding a dot or a
    backtick quoted with backticks (s.a is field a of struct s; `x.y` is one column).

    >>> display(("s", "a")), display(("x.y",)), display(("q`t",))
    ('s.a', '`x.y`', '`q``t`')
    """
    return ".".join(p if p and "." not in p and "`" not in p else "`" + p.replace("`", "``") + "`" for p in path)


def _find(schema, path: tuple[str, ...], clause: str = "ZORDER BY", ref=None) -> list:
    """The fields along a path of names (case-insensitive, an exact match first), through
    structs only; a LakeError naming the part that is missing or not a struct."""
    fields, out = schema.fields, []
    for i, name in enumerate(path):
        matches = [f for f in fields if f.name.lower() == name.lower()]
        exact = [f for f in matches if f.name == name]
        if not matches:
            here = display(path[:i]) if i else None
            known = ", ".join(display((f.name,)) for f in fields)
            if here is None:
                raise LakeError(f"lakerules: {clause} column {display(path)} does not exist in {ref}; its columns are {known}")
            raise LakeError(f"lakerules: {clause} column {display(path)} does not exist in {ref}: struct {here} has no "
                            f"field {display((name,))}; its fields are {known}")
        field = (exact or matches)[0]
        out.append(field)
        if i < len(path) - 1 and not isinstance(field.field_type, StructType):
            spark_type = schemas.iceberg_type_to_spark(field.field_type).simpleString()
            raise LakeError(f"lakerules: {clause} column {display(path)} does not exist in {ref}: {display(path[:i + 1])} "
                            f"is of type {spark_type}; clustering reaches only fields of structs (not of arrays or maps)")
        fields = field.field_type.fields if isinstance(field.field_type, StructType) else ()
    return out


def partition_predicate(ctx, table, ref: TableRef, where: str | None, statement: str = "OPTIMIZE"):
    """The WHERE as an Iceberg predicate over the table's partition source columns."""
    if where is None:
        return AlwaysTrue()
    spec, schema = table.spec(), table.schema()
    source_ids = {f.source_id for f in spec.fields}
    # the top-level columns holding a partition source (a struct holds one of its fields): the
    # names the WHERE's attributes may have; the translated predicate is checked field by field
    sources = {top.name.lower(): schema.find_column_name(top.field_id) for top in schema.fields
               if source_ids & schemas.field_ids(top)}
    df = ctx.spark.table(_sql_name(ref)).where(where)  # Spark resolves names and types, and says when it cannot
    plan = J.analyzed(df)
    if J.simple_name(plan) != "Filter":
        raise LakeError(f"lakerules: {statement} {ref} WHERE {where}: not a predicate on the table's rows")
    condition = plan.condition()
    names = sorted({a.name() for a in J.from_seq(condition.references().toSeq())})
    if not names:
        # a constant condition (WHERE 1 = 1, WHERE false): every partition, or none
        if not condition.deterministic():
            raise LakeError(f"lakerules: {statement} {ref} WHERE {where}: the predicate must be deterministic")
        value = J.one_row(ctx.spark).select(F.expr(where).cast("boolean")).collect()[0][0]
        return AlwaysTrue() if value is True else AlwaysFalse()
    outside = [n for n in names if n.lower() not in sources]
    partitioned = ", ".join(sorted(schema.find_column_name(i) for i in source_ids)) or "nothing: it is not partitioned"
    if outside or not names and spec.is_unpartitioned():
        raise LakeError(
            f"lakerules: {statement} WHERE may name only partition columns; {', '.join(outside) or where} "
            f"is not one ({ref} is partitioned by {partitioned})"
        )
    expr, exact = to_iceberg(condition)
    if not exact:
        raise LakeError(
            f"lakerules: {statement} {ref} WHERE {where}: the predicate must be comparisons of partition columns with "
            "constants (=, <, <=, >, >=, IN, IS NULL, AND, OR, NOT)"
        )
    extra = extract_field_ids(bind(schema, expr, case_sensitive=False)) - source_ids
    if extra:  # another field of a struct that holds a partition source
        raise LakeError(
            f"lakerules: {statement} WHERE may name only partition columns; "
            f"{', '.join(sorted(schema.find_column_name(i) for i in extra))} is not one ({ref} is partitioned by {partitioned})"
        )
    return expr


def _sql_name(ref: TableRef) -> str:
    return ".".join("`" + p.replace("`", "``") + "`" for p in (ref.catalog, *ref.namespace, ref.name))


