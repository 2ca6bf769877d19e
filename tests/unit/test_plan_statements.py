"""plan_statements alone (lakerules.rules.plan_statements): a parsed statement on a table whose
type has a planner (``ctx.planners``: OPTIMIZE's) gets its plan while the statement is analyzed,
for EXPLAIN and the executor; every other node, a statement already planned, a statement on a
catalog (CALL) and a statement with no planner come back as the very same object. No Spark: the
table is in a pyiceberg catalog on SQLite in the test's folder, the planner a recording stand-in."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lakerules.errors import LakeError, NotSupported
from lakerules.plan import statements as S
from lakerules.plan.nodes import StatementCommand, transform_up
from lakerules.rules.plan_statements import plan_statements
from unit.rulekit import Ctx, LocalCatalogs, ids_schema, relation, rows, spark_node, table_ref

T = "lake.db.t"
OPTIMIZE = S.Optimize(table=("lake", "db", "t"), zorder=(("id",),), text="OPTIMIZE lake.db.t ZORDER BY (id)")


@dataclass
class Planned:
    """What the stand-in planner decided: the table and snapshot it planned on."""

    table: str
    snapshot_id: int | None

    def describe(self):
        return [f"planned on {self.table} at {self.snapshot_id}"]


def _planner(calls: list):
    def plan(ctx, table, statement):
        calls.append(statement)
        snapshot = table.current_snapshot()
        return Planned(".".join(table.name()), snapshot.snapshot_id if snapshot is not None else None)

    return plan


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.t", ids_schema())
    t.append(rows([1, 2], ["a", "b"]))
    return t


def _ctx(catalog, calls, **settings) -> Ctx:
    return Ctx(catalogs=LocalCatalogs(lake=catalog), settings=settings, planners={S.Optimize: _planner(calls)})


def test_a_statement_with_a_planner_is_planned_ahead(catalog, table):
    calls = []
    node = StatementCommand(table=table_ref(T), statement=OPTIMIZE)
    out = plan_statements(node, _ctx(catalog, calls))
    assert out is not node and out.statement is OPTIMIZE and out.table == node.table
    assert out.planned == Planned("db.t", table.current_snapshot().snapshot_id) and calls == [OPTIMIZE]
    assert out.describe().splitlines() == ["OPTIMIZE lake.db.t ZORDER BY (id)",
                                           f"  planned on db.t at {table.current_snapshot().snapshot_id}"]
    # and through the tree walk, under a parent
    parent = spark_node("Project", node)
    walked = transform_up(parent, lambda n: plan_statements(n, _ctx(catalog, [])))
    assert walked is not parent and walked.kids[0].planned is not None


LEFT_ALONE = {
    "a planned statement": lambda: StatementCommand(table=table_ref(T), statement=OPTIMIZE, planned=Planned("x", 1)),
    "a statement on a catalog (CALL)": lambda: StatementCommand(
        table=None, statement=S.Call(table=None, catalog="lake", procedure="expire_snapshots", args=(("table", "'db.t'"),))),
    "a statement no planner plans ahead": lambda: StatementCommand(
        table=table_ref(T), statement=S.Vacuum(table=("lake", "db", "t"), hours=200.0)),
    "a lake relation": lambda: relation(),
    "a Spark node": lambda: spark_node("LocalRelation"),
}


@pytest.mark.parametrize("name", LEFT_ALONE)
def test_nodes_it_leaves_alone(catalog, table, name):
    calls = []
    node = LEFT_ALONE[name]()
    assert plan_statements(node, _ctx(catalog, calls)) is node
    assert transform_up(node, lambda n: plan_statements(n, _ctx(catalog, calls))) is node
    assert calls == []


def test_a_statement_the_table_refuses_is_refused_while_planned(catalog, table):
    """OPTIMIZE writes data: named at a tag it is refused before it is planned, naming the tag."""
    calls = []
    head = table.current_snapshot().snapshot_id
    table.manage_snapshots().create_tag(head, "v1").commit()
    node = StatementCommand(table=table_ref(T, "tag:v1"), statement=OPTIMIZE)
    with pytest.raises(NotSupported, match="names tag 'v1': a tag is a fixed snapshot and is never written"):
        plan_statements(node, _ctx(catalog, calls))
    # a statement that writes no data, named at a branch: the table itself must be named
    vacuum_planners = {S.Vacuum: _planner(calls)}
    ctx = Ctx(catalogs=LocalCatalogs(lake=catalog), planners=vacuum_planners)
    named = StatementCommand(table=table_ref(T, "branch:b"), statement=S.Vacuum(table=("lake", "db", "t")))
    with pytest.raises(LakeError, match="names a branch; name the table itself"):
        plan_statements(named, ctx)
    assert calls == []
