"""Write order and distribution, as Iceberg's Spark extensions set them and its writers honor them.

    ALTER TABLE t WRITE ORDERED BY a, days(ts) DESC NULLS FIRST     sort order (a, days(ts)), write.distribution-mode=range
    ALTER TABLE t WRITE LOCALLY ORDERED BY a                        sort order (a), distribution mode unchanged
    ALTER TABLE t WRITE DISTRIBUTED BY PARTITION [[LOCALLY] ORDERED BY a | UNORDERED]
                                                                    write.distribution-mode=hash; sort order (a) or none
    ALTER TABLE t WRITE UNORDERED                                   no sort order, write.distribution-mode=none
    ALTER TABLE t SET IDENTIFIER FIELDS id, s.k | DROP IDENTIFIER FIELDS id

The sort order is the table's default sort order (Iceberg metadata: pyiceberg's ``sort_order()``),
the distribution mode the table property ``write.distribution-mode``; each statement is one
commit. As in Iceberg's extensions, DISTRIBUTED BY PARTITION decides the mode (hash) whichever
ordering clause goes with it, and every statement replaces the sort order (with none when it
has no ORDERED BY). Sort fields are columns or Iceberg transforms (``bucket(n, c)``, ``truncate(w, c)``,
``years``, ``months``, ``days``, ``hours``); ASC is the default, with nulls first for ASC and last
for DESC, as Iceberg.

lakerules' data writes honor them (:func:`layout`): INSERT, ``writeTo``, UPDATE's new rows,
MERGE's updated and inserted rows and copy-on-write rewrites are distributed (``hash``: by
partition; ``range``: by range of the partition values and sort fields; ``none`` or unset: as
the write comes) and sorted within each file by partition, then the sort order; OPTIMIZE without
ZORDER BY sorts each rewritten file by it. Data files written under a sort order record its id
(``sort_order_id``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.table.sorting import NullOrder, SortDirection, UNSORTED_SORT_ORDER
from pyiceberg.transforms import IdentityTransform

from lakerules.write import commit
from lakerules.spark import jvm as J
from lakerules.iceberg import names, partitioning
from lakerules.errors import LakeError

DISTRIBUTION_MODE = "write.distribution-mode"
MODES = ("none", "hash", "range")


def run_write_order(ctx, table, stmt):
    """ALTER TABLE ... WRITE (lakerules.plan.statements.WriteOrderChange): the sort order and the
    distribution mode, in one metadata commit."""
    _set_order(table, stmt)
    return J.empty_result(ctx.spark)


def _field(spec, schema):
    """A sort field as the dialect parsed it (FieldSpec) -> (transform, source column name)."""
    return partitioning.field_spec(spec, schema, "sort")


def _set_order(table, stmt) -> None:
    fields = stmt.fields or ()
    if stmt.distributed:
        mode = "hash"
    elif stmt.unordered:
        mode = "none"
    elif stmt.locally:
        mode = None
    else:
        mode = "range"
    schema = table.schema()
    resolved = []
    for f in fields:
        transform, column = _field(f.field, schema)
        desc = f.desc
        nulls_first = f.nulls_first
        if nulls_first is None:
            nulls_first = not desc
        resolved.append((column, transform, desc, nulls_first))
    with commit.transaction(table) as tx:
        with tx.update_sort_order() as order:
            for column, transform, desc, nulls_first in resolved:
                null_order = NullOrder.NULLS_FIRST if nulls_first else NullOrder.NULLS_LAST
                (order.desc if desc else order.asc)(column, transform, null_order)
        if mode is not None and table.properties.get(DISTRIBUTION_MODE) != mode:
            tx.set_properties({DISTRIBUTION_MODE: mode})


def run_identifier_fields(ctx, table, stmt):
    """ALTER TABLE ... SET|DROP IDENTIFIER FIELDS (lakerules.plan.statements.IdentifierFieldsChange).
    SET replaces the identifier fields; DROP removes the fields named (each must be one). Iceberg's
    rules apply (required, primitive, not floating point; pyiceberg checks)."""
    op, fields = stmt.op, [".".join(p) for p in stmt.fields]
    schema = table.schema()
    columns = []
    for name in fields:
        try:
            columns.append(schema.find_column_name(schema.find_field(name, case_sensitive=False).field_id))
        except ValueError:
            raise LakeError(f"lakerules: ALTER TABLE {names.table_name(table)} {op} IDENTIFIER FIELDS: no column "
                            f"{name!r}") from None
    current = [schema.find_column_name(i) for i in schema.identifier_field_ids]
    if op == "SET":
        for column in columns:
            problem = _identifier_problem(schema, column)
            if problem:
                raise LakeError(f"lakerules: ALTER TABLE {names.table_name(table)} SET IDENTIFIER FIELDS: column "
                                f"{column!r} {problem}. Nothing was changed")
    if op == "DROP":
        missing = [n for n in columns if n not in current]
        if missing:
            raise LakeError(f"lakerules: ALTER TABLE {names.table_name(table)} DROP IDENTIFIER FIELDS: {missing} "
                            f"are not identifier fields (they are {current})")
        columns = [n for n in current if n not in columns]
    try:
        with commit._transaction(table) as tx:
            with tx.update_schema() as update:
                update.set_identifier_fields(*columns)
    except ValueError as e:
        raise LakeError(f"lakerules: ALTER TABLE {names.table_name(table)} {op} IDENTIFIER FIELDS: {e}") from None
    return J.empty_result(ctx.spark)


def _identifier_problem(schema, column: str) -> str | None:
    """Why a column cannot be an identifier field (Iceberg's rules), or None."""
    from pyiceberg.types import DoubleType, FloatType

    field = schema.find_field(column)
    if not field.field_type.is_primitive:
        kind = type(field.field_type).__name__.removesuffix("Type").lower()
        return f"is a {kind}: identifier fields are primitive columns"
    if not field.required:
        return ("is nullable: identifier fields must be required (NOT NULL) columns, as Iceberg requires; declare "
                "the column NOT NULL when the table is created, or choose NOT NULL columns")
    if isinstance(field.field_type, (DoubleType, FloatType)):
        return f"is {field.field_type}: identifier fields cannot be floating-point columns"
    for parent in _parents(schema.as_struct(), field.field_id, ()) or ():
        if not parent.field_type.is_struct:
            return f"is inside {parent.name!r}, a list or map: identifier fields cannot be inside one"
        if not parent.required:
            return (f"is inside {parent.name!r}, a nullable struct: identifier fields and the structs holding them "
                    "must be required (NOT NULL)")
    return None


def _parents(type_, field_id: int, path: tuple):
    """The fields holding field ``field_id``, outermost first (a list's or map's own fields
    included), or None when it is not below ``type_``."""
    if type_.is_struct:
        fields = type_.fields
    elif type_.is_primitive:
        fields = ()
    else:  # a list's element, a map's key and value
        fields = [getattr(type_, a) for a in ("element_field", "key_field", "value_field") if hasattr(type_, a)]
    for f in fields:
        if f.field_id == field_id:
            return path
        found = _parents(f.field_type, field_id, (*path, f))
        if found is not None:
            return found
    return None


# ---- honoring it ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How a write lays its rows out: ``mode`` the distribution (none, hash, range), ``sort`` Spark
    sort columns (the sort order's fields), ``sort_order_id`` recorded in the data files (None:
    unsorted)."""

    mode: str
    sort: tuple
    sort_order_id: int | None


def layout(table, catalog: str) -> Layout:
    """The table's distribution mode and sort order as Spark columns over the written columns (the
    table's top-level names); a LakeError for a distribution mode that is not Iceberg's."""
    mode = str(table.properties.get(DISTRIBUTION_MODE, "none")).strip().lower()
    if mode not in MODES:
        raise LakeError(f"lakerules: table {names.table_name(table)} has {DISTRIBUTION_MODE}={mode!r}; "
                        f"it must be one of {list(MODES)}")
    order = table.sort_order()
    if order.is_unsorted:
        return Layout(mode, (), None)
    fields = [(f.source_id, f.transform, f.direction == SortDirection.DESC, f.null_order == NullOrder.NULLS_FIRST)
              for f in order.fields]
    return Layout(mode, sort_columns(table, catalog, fields), order.order_id)


def sort_columns(table, catalog: str, fields) -> tuple:
    """Spark sort columns (built as objects) over the table's top-level names, for sort fields
    (source field id, Iceberg transform, descending, nulls first)."""
    schema = table.schema()
    columns = []
    for source_id, transform, desc, first in fields:
        source = schema.find_field(source_id)
        path = partitioning._path(schema, source_id)
        col = J.column(*path)
        if not isinstance(transform, IdentityTransform):
            col, _ = partitioning._transform_expr(transform, source.field_type, col, catalog,
                                                  f"sort field {transform} of column {'.'.join(path)}")
        columns.append(col.desc_nulls_first() if desc and first else col.desc_nulls_last() if desc
                       else col.asc_nulls_first() if first else col.asc_nulls_last())
    return tuple(columns)


def parse_sort_order(table, text: str, where: str) -> tuple:
    """Sort fields (source field id, transform, descending, nulls first) of a sort order written as
    Iceberg's procedures take it ('a ASC NULLS FIRST, bucket(4, b) DESC'), read by the grammar of
    ALTER TABLE ... WRITE ORDERED BY (ASC by default; nulls first for ASC, last for DESC)."""
    from lakerules.sql import dialect, statements

    try:
        stmt = statements.write_order_of(dialect.parse_write_order(f"ALTER TABLE t WRITE ORDERED BY {text}"))
    except LakeError as e:
        raise LakeError(f"lakerules: {where}: sort_order {text!r} is not a sort order: "
                        f"{str(e).splitlines()[0].split(': ', 2)[-1]}") from None
    if stmt.distributed or stmt.locally or stmt.unordered:
        raise LakeError(f"lakerules: {where}: sort_order {text!r} is not a sort order: it must be sort fields only "
                        "('a ASC NULLS FIRST, b DESC')")
    schema = table.schema()
    out = []
    for f in stmt.fields or ():
        try:
            transform, column = _field(f.field, schema)
        except LakeError as e:
            raise LakeError(f"lakerules: {where}: sort_order {text!r}: {str(e).split('lakerules: ', 1)[-1]}") from None
        desc = f.desc
        nulls_first = f.nulls_first
        out.append((schema.find_field(column).field_id, transform, desc, not desc if nulls_first is None else nulls_first))
    if not out:
        raise LakeError(f"lakerules: {where}: sort_order {text!r} names no column")
    return tuple(out)


def table_sort_fields(table) -> tuple[tuple, int | None]:
    """The table's sort order as sort fields, and its id; ((), None) when unsorted."""
    order = table.sort_order()
    if order.is_unsorted:
        return (), None
    return tuple((f.source_id, f.transform, f.direction == SortDirection.DESC, f.null_order == NullOrder.NULLS_FIRST)
                 for f in order.fields), order.order_id


__all__ = ["run_write_order", "run_identifier_fields", "layout", "Layout", "parse_sort_order", "sort_columns", "table_sort_fields",
           "UNSORTED_SORT_ORDER"]
