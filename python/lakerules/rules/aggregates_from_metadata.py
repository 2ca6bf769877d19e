"""aggregates_from_metadata: ``count(*)``, ``count(col)``, ``min(col)`` and ``max(col)`` of a lake
table, with no GROUP BY, answered from the manifests without opening a data file, as Iceberg's
Spark aggregate push-down does.

    Aggregate [count(1), min(id), max(ts)]
      Project [id, ts]
        Filter (day = DATE'2026-01-02')
          LakeScan lake.db.t
becomes, when the metadata holds the exact answer,
    LocalRelation [count(1), min(id), max(ts)]   (one row; the same output attributes)

It runs after the scans are planned (and after users' rules, which see the scan as for any
query). It holds when:
- the filters (if any) are translated exactly and every file the scan plans matches them whole
  (the residual of the filter on the file's partition is true: a filter on partition values);
- no delete file applies to any of the files;
- every aggregate is count(*), count(col), min(col) or max(col) of a column (no DISTINCT, no
  FILTER), and each file has the metrics it needs: value and null counts for count(col); for
  min/max a lower/upper bound of a number, date, timestamp or boolean column (string and binary
  bounds may be truncated), no NaN (NaN counts known and zero) for floating point columns.

Otherwise the plan is left as it is and Spark reads the files.
EXPLAIN's ``== lakerules scans ==`` section says which happened and why. The setting
``spark.sql.iceberg.aggregate-push-down.enabled`` (Iceberg's, default true) turns it off.

What it leaves alone, built by hand (an answer needs a planned scan:
tests/unit/test_aggregates_from_metadata.py has queries Spark optimized, their rows, and why not):

>>> from lakerules.plan.nodes import LakeRelation, TableRef
>>> rel = LakeRelation(TableRef("lake", ("db",), "t"), 42, False, (), None)
>>> aggregates_from_metadata(rel, ctx=None) is rel
True
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from functools import reduce

from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And
from pyiceberg.expressions.visitors import residual_evaluator_of
from pyiceberg.types import DateType, DecimalType, TimestampType, TimestamptzType

from lakerules.scan import explain, lineage
from lakerules.spark import jvm as J
from lakerules.plan.expressions import to_iceberg
from lakerules.plan.nodes import Filter, LakeScan, Node, SparkNode
from lakerules.scan.bounds import NotExact, bound

ENABLED_KEY = "spark.sql.iceberg.aggregate-push-down.enabled"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def aggregates_from_metadata(plan: Node, ctx) -> Node:
    match plan:
        case SparkNode(kids=(child,)) if J.simple_name(plan.jvm) == "Aggregate":
            chain = _chain(child)
            if chain is None:
                return plan
            scan = chain[-1]
            try:
                if (ctx.conf(ENABLED_KEY) or "true").strip().lower() != "true":
                    raise NotExact(f"{ENABLED_KEY} is false")
                answer, used = _answer(ctx, plan, scan, [n for n in chain if isinstance(n, Filter)])
            except NotExact as why:
                explain.add_note(scan.output, f"aggregate not answered from metadata: {why}")
                return plan
            explain.remember(scan, f"aggregate answered from metadata: {used} data files' manifest entries, "
                                   "no data file read")
            return SparkNode(answer)
        case _:
            return plan


def _chain(node: Node) -> list | None:
    """Project (of columns only) and Filter nodes down to a planned lake scan, or None."""
    out = []
    while True:
        if isinstance(node, LakeScan):
            return [*out, node]
        if isinstance(node, Filter) and len(node.kids) == 1:
            out.append(node)
            node = node.kids[0]
            continue
        if isinstance(node, SparkNode) and len(node.kids) == 1 and J.simple_name(node.jvm) == "Project":
            if not all(J.simple_name(e) == "AttributeReference" for e in J.from_seq(node.jvm.projectList())):
                return None
            out.append(node)
            node = node.kids[0]
            continue
        return None


def _answer(ctx, agg: SparkNode, scan: LakeScan, filters: list):
    if J.from_seq(agg.jvm.groupingExpressions()):
        raise NotExact("GROUP BY")
    computed = lineage.requested(scan.iceberg, scan.schema, scan.output)  # v3's row lineage: no metrics
    columns = {a.expr_id: a.name for a in scan.output if a.name not in computed}
    parts = []
    for node in filters:
        for c in node.conjuncts:
            expr, exact = to_iceberg(c, columns)
            if not exact:
                raise NotExact(f"the filter {c.sql()} is not one the metadata can decide")
            parts.append(expr)
    if scan.plan.position_delete_files or scan.plan.equality_delete_files:
        raise NotExact("delete files apply")
    table, schema = scan.iceberg, scan.schema
    row_filter = reduce(And, parts, AlwaysTrue())
    files = list(scan.plan.files)
    if not isinstance(row_filter, AlwaysTrue):
        specs = table.metadata.specs()
        residuals, kept = {}, []
        for p in files:
            spec_id = p.file.spec_id
            if spec_id not in residuals:
                residuals[spec_id] = residual_evaluator_of(specs[spec_id], row_filter, True, schema)
            residual = residuals[spec_id].residual_for(p.file.partition)
            if isinstance(residual, AlwaysFalse):
                continue
            if not isinstance(residual, AlwaysTrue):
                raise NotExact("the filter does not select whole files by their partition values")
            kept.append(p)
        files = kept
    values = []
    for e in J.from_seq(agg.jvm.aggregateExpressions()):
        values.append(_aggregate(e, files, schema, columns))
    from pyspark.sql.types import StructType

    out_schema = StructType.fromJson(json.loads(agg.jvm.schema().json()))
    frame = J.local_frame(ctx.spark, [tuple(values)], out_schema)
    plan = J.optimized_plan(frame)
    return J.rename_project(ctx.spark, plan, list(J.from_seq(agg.jvm.output()))), len(files)


def _aggregate(e, files, schema, columns: dict):
    if J.simple_name(e) != "Alias" or J.simple_name(e.child()) != "AggregateExpression":
        raise NotExact(f"{e.sql()} is not a plain aggregate")
    ae = e.child()
    if ae.isDistinct() or ae.filter().isDefined():
        raise NotExact(f"{e.sql()} has DISTINCT or FILTER")
    fn = ae.aggregateFunction()
    kind = J.simple_name(fn)
    args = J.from_seq(fn.children())
    if kind == "Count":
        if all(J.simple_name(a) == "Literal" and a.value() is not None for a in args):
            return sum(p.file.record_count for p in files)
        if len(args) != 1:
            raise NotExact(f"{e.sql()}: count of several columns")
        field = _field(args[0], schema, columns, e)
        total = 0
        for p in files:
            values, nulls = p.file.value_counts or {}, p.file.null_value_counts or {}
            if field.field_id not in values or field.field_id not in nulls:
                raise NotExact(f"{e.sql()}: a file has no value or null count of {field.name}")
            total += values[field.field_id] - nulls[field.field_id]
        return total
    if kind not in ("Min", "Max"):
        raise NotExact(f"{kind.lower()} is not answered from metadata")
    field = _field(args[0], schema, columns, e)
    return _python(field.field_type, bound([p.file for p in files], field, kind, e.sql()))


def _field(attr, schema, columns: dict, e):
    if J.simple_name(attr) != "AttributeReference" or attr.exprId().id() not in columns:
        raise NotExact(f"{e.sql()}: its argument is not a column of the table")
    name = columns[attr.exprId().id()]
    try:
        return schema.find_field(name, case_sensitive=False)
    except ValueError:
        raise NotExact(f"{e.sql()}: {name} is not a top-level column") from None


def _python(t, v):
    """A bound as the Python value Spark takes for the column's type."""
    if v is None:
        return None
    if isinstance(t, DateType):
        return datetime.date(1970, 1, 1) + datetime.timedelta(days=v)
    if isinstance(t, (TimestampType, TimestamptzType)):
        value = _EPOCH + datetime.timedelta(microseconds=v)
        return value if isinstance(t, TimestamptzType) else value.replace(tzinfo=None)
    if isinstance(t, DecimalType) and not isinstance(v, Decimal):
        return Decimal(v)
    return v
