"""Data files dropped from a scan by their Parquet bloom filters, read while the scan is planned.

A table that changes all day gains a small file with every change batch, and a batch's keys
spread over the whole key range: no file's bounds exclude a key, so a point query
(``WHERE id = 7``, ``WHERE id IN (...)``) opens every file in a task only to find nothing in
most. Where the table's writers store a bloom filter of the column
(``write.parquet.bloom-filter-enabled.column.<name>``, as Iceberg's own writers do), the driver
reads each file's filters once (io.lakerules.functions.BloomFilterIndex, kept in its JVM across
queries, since data files never change) and drops the files whose filters exclude every value
asked for; the rest are read as before, their deletes applied as planned.

What is probed: top-level conjuncts of the scan's filter that are ``column = value`` or
``column IN (values)`` on an int, long, date or string column whose bloom filter the table's
properties enable. Anything else prunes nothing. ``spark.lakerules.read.bloomFilters=false``
turns it off.

>>> from pyiceberg.expressions import And, EqualTo, GreaterThan, In
>>> from pyiceberg.schema import Schema
>>> from pyiceberg.types import LongType, NestedField, StringType
>>> s = Schema(NestedField(1, "id", LongType()), NestedField(2, "v", StringType()))
>>> props = {"write.parquet.bloom-filter-enabled.column.id": "true"}
>>> probes(s, props, And(EqualTo("id", 7), GreaterThan("v", "a")))
[(1, 'l', [7])]
>>> probes(s, props, In("id", {3, 1}))
[(1, 'l', [1, 3])]
>>> probes(s, {}, EqualTo("id", 7))  # no filters written for it
[]
"""

from __future__ import annotations

from dataclasses import replace

from pyiceberg.expressions import And, BooleanExpression, BoundEqualTo, BoundIn
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, IntegerType, LongType, StringType

from lakerules.spark import bloom_filters, settings
from lakerules.scan.planning import ScanPlan

KEY = "spark.lakerules.read.bloomFilters"
ENABLED = "write.parquet.bloom-filter-enabled.column."
_KINDS = {IntegerType: "i", DateType: "i", LongType: "l", StringType: "s"}


def _conjuncts(expr: BooleanExpression):
    if isinstance(expr, And):
        yield from _conjuncts(expr.left)
        yield from _conjuncts(expr.right)
    else:
        yield expr


def probes(schema: Schema, properties: dict, row_filter: BooleanExpression) -> list[tuple[int, str, list]]:
    """(field id, kind, values) of each conjunct of row_filter that bloom filters can answer."""
    top = {f.field_id: f for f in schema.as_struct().fields}
    out = []
    for part in _conjuncts(row_filter):
        try:
            bound = bind(schema, part, case_sensitive=True)
        except Exception:  # noqa: BLE001 - a conjunct pyiceberg cannot bind prunes nothing here
            continue
        if not isinstance(bound, (BoundEqualTo, BoundIn)):
            continue
        field = bound.term.ref().field
        kind = _KINDS.get(type(field.field_type))
        if field.field_id not in top or kind is None:
            continue
        if str(properties.get(ENABLED + field.name, "false")).strip().lower() != "true":
            continue
        literals = [bound.literal] if isinstance(bound, BoundEqualTo) else list(bound.literals)
        values = sorted(lit.value for lit in literals)
        if kind == "s" and any("\0" in v for v in values):
            continue  # the values cross to the JVM NUL-separated
        out.append((field.field_id, kind, values))
    return out


def kept(spark, conf, table, schema: Schema, files: list, row_filter: BooleanExpression) -> list:
    """The planned ``files`` whose bloom filters admit each conjunct's values (``conf``: the
    session's settings, a function of a key and a default)."""
    if not settings.flag(KEY, conf(KEY, None), True) or len(files) < 2:
        return files
    for field_id, kind, values in probes(schema, table.properties, row_filter):
        keep = bloom_filters.may_contain(spark, [p.file.file_path for p in files], field_id, kind, values)
        files = [p for p, k in zip(files, keep) if k]
        if not files:
            break
    return files


def prune(spark, conf, table, schema: Schema, plan: ScanPlan, row_filter: BooleanExpression) -> ScanPlan:
    """``plan`` without the data files whose bloom filters exclude a conjunct's values."""
    files = kept(spark, conf, table, schema, list(plan.files), row_filter)
    if len(files) == len(plan.files):
        return plan
    return replace(plan, files=tuple(files),
                   position_delete_files=_used(files, plan.position_delete_files, "position_deletes"),
                   equality_delete_files=_used(files, plan.equality_delete_files, "equality_deletes"))


def _used(files, deletes, attr: str) -> tuple:
    """The delete files of ``deletes`` that apply to one of ``files``, in their order."""
    paths = {d.file_path for p in files for d in getattr(p, attr)}
    return tuple(d for d in deletes if d.file_path in paths)
