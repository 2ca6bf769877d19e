"""aggregates_from_metadata alone (lakerules.rules.aggregates_from_metadata): count, min and max
of a planned lake scan with no GROUP BY become one row computed from the manifests, with the
aggregate's own output attributes, when the metadata holds the exact answer; otherwise the plan
is left as it is, the very same object, with a note for EXPLAIN saying why.

The rule refuses no input: whatever it cannot answer exactly, Spark computes."""

from __future__ import annotations

import datetime
from dataclasses import replace

import pyarrow as pa
import pytest

from lakerules.plan.nodes import Filter, LakeRelation, LakeScan, SparkNode, collect, transform_up
from lakerules.rules.aggregates_from_metadata import aggregates_from_metadata
from lakerules.rules.push_filters import push_filters
from lakerules.rules.resolve_scans import resolve_scans
from lakerules.scan import explain
from lakerules.spark import jvm as J
from unit.rulekit import Ctx, NoCatalogs, expr, planned, relation, shown, spark_node

# ---- hand-built plans, no JVM ----------------------------------------------------------------------


def _scan():
    rel = relation()
    return LakeScan(table=rel.table, snapshot_id=None, output=rel.output, iceberg=None, schema=None, plan=None)


LEFT_ALONE = {
    "an aggregate over a relation not planned": lambda: spark_node("Aggregate", relation(), text="[count(1)]"),
    "an aggregate over a join": lambda: spark_node("Aggregate", spark_node("Join", _scan(), _scan()), text="[count(1)]"),
    "an aggregate over a sort": lambda: spark_node("Aggregate", spark_node("Sort", _scan()), text="[count(1)]"),
    "a filter over a scan": lambda: Filter(jvm=expr("id = 1"), kids=(_scan(),), conjuncts=(expr("id = 1"),)),
    "a scan": _scan,
    "a limit over a scan": lambda: spark_node("GlobalLimit", _scan()),
}


@pytest.mark.parametrize("make", LEFT_ALONE.values(), ids=LEFT_ALONE.keys())
def test_left_alone(make):
    plan = make()
    ctx = Ctx(catalogs=NoCatalogs())
    assert aggregates_from_metadata(plan, ctx) is plan
    assert transform_up(plan, lambda n: aggregates_from_metadata(n, ctx)) is plan


# ---- queries Spark optimized, their scans planned -------------------------------------------------

# {t}: partitioned by kind; a (ids 1, 2) and b (ids 10, 11), appended twice: 4 files, 8 rows.
# n has a NULL in each file; d a NaN in b's files.
DATA = pa.table({
    "id": pa.array([1, 2, 10, 11], pa.int64()),
    "kind": ["a", "a", "b", "b"],
    "n": pa.array([None, 1, None, 2], pa.int32()),
    "day": pa.array([datetime.date(2026, 1, d) for d in (2, 1, 9, 3)], pa.date32()),
    "d": pa.array([0.5, 1.5, float("nan"), 2.0]),
})

# (query, its one row, the data files whose manifest entries answered it)
ANSWERED = [
    ("SELECT count(*), min(id), max(id) FROM {t}", (8, 1, 11), 4),
    ("SELECT count(*), min(id), max(day) FROM {t} WHERE kind = 'a'", (4, 1, datetime.date(2026, 1, 2)), 2),
    ("SELECT count(n), min(n), max(n), min(day) FROM {t}", (4, 1, 2, datetime.date(2026, 1, 1)), 4),
    ("SELECT count(d) FROM {t} WHERE kind = 'a'", (4,), 2),  # NaN is a value
    ("SELECT count(*) FROM {t} WHERE kind = 'zz'", (0,), 0),
]

# (query, why it is not answered from metadata)
NOT_ANSWERED = [
    ("SELECT count(id) FROM {t} WHERE id > 5", "the filter does not select whole files by their partition values"),
    ("SELECT count(*) FROM {t} WHERE upper(kind) = 'A'",
     "the filter (upper({t}.kind) = 'A') is not one the metadata can decide"),
    ("SELECT kind, count(*) FROM {t} GROUP BY kind", "GROUP BY"),
    # pyiceberg's writer keeps no NaN counts: even a's files may hold NaN as far as the metadata knows
    ("SELECT max(d) FROM {t} WHERE kind = 'a'", "max({t}.d) AS `max(d)`: a file may hold NaN values"),
    ("SELECT count(DISTINCT id) FROM {t}", "count(DISTINCT {t}.id) AS `count(DISTINCT id)` has DISTINCT or FILTER"),
    ("SELECT count(*) FILTER (WHERE id > 1) FROM {t}",
     "count(1) FILTER (WHERE ({t}.id > 1L)) AS `count(1) FILTER (WHERE (id > 1))` has DISTINCT or FILTER"),
    ("SELECT sum(id) FROM {t}", "sum is not answered from metadata"),
    ("SELECT min(kind) FROM {t}", "min({t}.kind) AS `min(kind)`: bounds of string columns may be truncated"),
]


@pytest.fixture(scope="module")
def t(lake):
    lake.table("t", DATA, partition_by="kind", appends=2)
    return lake.name("t")


def _scanned(spark, lake, sql):
    """The optimizer's plan of sql with its scans planned (the batch before: push_filters, resolve_scans),
    and the lake relation's JVM node (EXPLAIN looks scans up by it)."""
    plan = planned(spark, sql)
    (rel,) = collect(plan, LakeRelation)
    ctx = lake.ctx()
    plan = transform_up(plan, lambda n: push_filters(n, ctx))
    return transform_up(plan, lambda n: resolve_scans(n, ctx)), rel.jvm


def _explained(scan, relation_jvm) -> str:
    """What EXPLAIN's lakerules section says of the scan, once it is lowered."""
    explain.remember(scan)
    (label,) = explain.scan_notes(relation_jvm)
    return label


@pytest.mark.parametrize("sql, row, files", ANSWERED, ids=[a[0] for a in ANSWERED])
def test_answered(spark, lake, t, sql, row, files):
    plan, rel = _scanned(spark, lake, sql.format(t=t))
    (scan,) = collect(plan, LakeScan)
    assert J.simple_name(plan.jvm) == "Aggregate"
    out = transform_up(plan, lambda n: aggregates_from_metadata(n, lake.ctx()))
    assert type(out) is SparkNode and out.kids == ()
    # the aggregate's own output attributes (what the plan above refers to), over one local row
    assert [a.exprId().id() for a in J.from_seq(out.jvm.output())] == [a.exprId().id() for a in J.from_seq(plan.jvm.output())]
    assert "LocalRelation" in shown(out) and not collect(out, LakeScan)
    assert [tuple(r) for r in J.dataframe(spark, out.jvm).collect()] == [row]
    assert explain.scan_notes(rel)[0].endswith(
        f"aggregate answered from metadata: {files} data files' manifest entries, no data file read")


@pytest.mark.parametrize("sql, why", NOT_ANSWERED, ids=[n[0] for n in NOT_ANSWERED])
def test_not_answered(spark, lake, t, sql, why):
    plan, rel = _scanned(spark, lake, sql.format(t=t))
    assert aggregates_from_metadata(plan, lake.ctx()) is plan
    (scan,) = collect(plan, LakeScan)
    assert _explained(scan, rel).endswith(f"\n  aggregate not answered from metadata: {why.format(t=t)}")


def test_not_answered_when_turned_off(spark, lake, t):
    plan, rel = _scanned(spark, lake, f"SELECT count(*) FROM {t}")
    off = lake.ctx(**{"spark.sql.iceberg.aggregate-push-down.enabled": "false"})
    assert aggregates_from_metadata(plan, off) is plan
    assert _explained(collect(plan, LakeScan)[0], rel).endswith(
        "aggregate not answered from metadata: spark.sql.iceberg.aggregate-push-down.enabled is false")
    assert aggregates_from_metadata(plan, lake.ctx(**{"spark.sql.iceberg.aggregate-push-down.enabled": " TRUE "})) is not plan


def test_not_answered_when_delete_files_apply(spark, lake, t):
    plan, rel = _scanned(spark, lake, f"SELECT count(*) FROM {t}")
    (scan,) = collect(plan, LakeScan)
    # the plan of a scan with a position delete file (any file stands for it here: only its presence counts)
    deleted = replace(scan, plan=replace(scan.plan, position_delete_files=(scan.plan.files[0].file,)))
    with_deletes = transform_up(plan, lambda n: deleted if n is scan else n)
    assert aggregates_from_metadata(with_deletes, lake.ctx()) is with_deletes
    assert _explained(deleted, rel).endswith("aggregate not answered from metadata: delete files apply")
