"""push_filters alone (lakerules.rules.push_filters): a Filter over a lake relation (through
SubqueryAliases) hands the relation its conjuncts, and keeps them itself; anything else is left
as it is, the very same object.

push_filters refuses no input: any plan is valid for it, and it only adds what pruning may use."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakerules.plan.nodes import DeleteFromLake, Filter, LakeRelation, LakeScan, WriteToLake, transform_up
from lakerules.rules.push_filters import push_filters
from unit.rulekit import alias, expr, relation, shown, spark_node

# ---- hand-built plans, no JVM ---------------------------------------------------------------------


def test_a_filter_over_a_relation_gives_it_its_conjuncts_and_keeps_them():
    rel = relation()
    a, b = expr("kind = 'a'"), expr("id > 1")
    plan = Filter(jvm=expr("kind = 'a' AND id > 1"), kids=(rel,), conjuncts=(a, b))
    out = push_filters(plan, None)
    assert type(out) is Filter and out is not plan
    assert out.jvm is plan.jvm and out.conjuncts == (a, b)  # Spark still filters the rows it reads
    (pushed,) = out.kids
    assert isinstance(pushed, LakeRelation) and pushed.filters == (a, b)
    assert (pushed.table, pushed.output, pushed.jvm) == (rel.table, rel.output, rel.jvm)
    assert rel.filters == () and plan.kids == (rel,)  # the input is unchanged


def test_through_aliases_and_after_the_relations_own_filters():
    earlier, c = expr("id IS NOT NULL"), expr("kind = 'b'")
    rel = relation(filters=(earlier,))
    inner = alias(rel, "x")
    outer = alias(inner, "lake.db.t")
    plan = Filter(jvm=c, kids=(outer,), conjuncts=(c,))
    out = push_filters(plan, None)
    (a1,) = out.kids
    (a2,) = a1.kids
    (pushed,) = a2.kids
    assert (a1.jvm, a2.jvm) == (outer.jvm, inner.jvm)  # the aliases are Spark's own, rebuilt over the new relation
    assert pushed.filters == (earlier, c)
    assert shown(out) == """Expression kind = 'b'
  SubqueryAlias lake.db.t
    SubqueryAlias x
      LakeRelation lake.db.t snapshot=None filters=2
        filter id IS NOT NULL
        filter kind = 'b'"""


def _scan():
    rel = relation()
    return LakeScan(table=rel.table, snapshot_id=None, output=rel.output, iceberg=None, schema=None, plan=None)


def _filter(child):
    c = expr("id = 1")
    return Filter(jvm=c, kids=(child,), conjuncts=(c,))


LEFT_ALONE = {
    "a relation with no filter above": lambda: relation(),
    "an alias over a relation": lambda: alias(relation()),
    "a filter over a projection of a relation": lambda: _filter(spark_node("Project", relation(), text="[id]")),
    "a filter over an opaque Spark subtree": lambda: _filter(spark_node("LocalRelation")),
    "a filter over a planned scan": lambda: _filter(_scan()),
    "a filter over an alias of a planned scan": lambda: _filter(alias(_scan())),
    "a filter with two children": lambda: Filter(jvm=expr("x"), kids=(relation(), relation()), conjuncts=(expr("x"),)),
    "DELETE (its relation is the command's)": lambda: DeleteFromLake(table=relation().table, relation=relation(),
                                                                       condition=expr("id = 1")),
    "a write": lambda: WriteToLake(table=relation().table, mode="append", query=spark_node("LocalRelation")),
}


@pytest.mark.parametrize("make", LEFT_ALONE.values(), ids=LEFT_ALONE.keys())
def test_left_alone(make):
    plan = make()
    assert push_filters(plan, None) is plan
    assert transform_up(plan, lambda n: push_filters(n, None)) is plan


def test_only_the_filter_next_to_the_relation_pushes():
    inner = _filter(relation())
    outer = Filter(jvm=expr("kind = 'a'"), kids=(inner,), conjuncts=(expr("kind = 'a'"),))
    assert push_filters(outer, None) is outer
    out = transform_up(outer, lambda n: push_filters(n, None))
    assert out is not outer and out.jvm is outer.jvm and out.kids[0].jvm is inner.jvm
    assert [c.sql() for c in out.kids[0].kids[0].filters] == ["id = 1"]


# ---- plans Spark optimized, the rule over the whole tree ------------------------------------------

# (query, the plan after push_filters; None: unchanged, the very same object)
FIXTURES = [
    ("SELECT * FROM {t} WHERE kind = 'a' AND id > 1", """
Filter ((kind#0 = a) AND (id#1L > 1))
  LakeRelation {t} snapshot=T filters=2
    filter ({t}.kind = 'a')
    filter ({t}.id > 1L)"""),
    ("SELECT id FROM {t} WHERE v > 1", """
Project [id#0L]
  Filter (v#1 > 1.0)
    LakeRelation {t} snapshot=T filters=1
      filter ({t}.v > 1.0D)"""),
    # time travel: the relation of that snapshot gets the filter as any other
    ("SELECT * FROM {t} VERSION AS OF {first} WHERE id = 1", """
Filter (id#0L = 1)
  LakeRelation {t} snapshot=T1 filters=1
    filter ({t}.id = 1L)"""),
    # a join: each side's own filter goes to its own relation
    ("SELECT a.id, b.kind FROM {t} a JOIN {u} b ON a.id = b.id WHERE a.kind = 'a'", """
Project [id#0L, kind#1]
  Join Inner, (id#0L = id#2L)
    Project [id#0L]
      Filter (kind#3 = a)
        LakeRelation {t} snapshot=T filters=1
          filter (a.kind = 'a')
    LakeRelation {u} snapshot=U filters=0"""),
    ("SELECT * FROM {t}", None),
    # HAVING filters the aggregate's rows, not the table's
    ("SELECT kind, count(*) FROM {t} GROUP BY kind HAVING count(*) > 1", None),
]


@pytest.fixture(scope="module")
def tables(lake):
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "kind": ["a", "b", "a"], "v": [1.0, 2.0, 3.0]})
    t = lake.table("t", data, partition_by="kind", appends=2)
    u = lake.table("u", pa.table({"id": pa.array([1, 2], pa.int64()), "kind": ["x", "y"]}))
    return {"t": lake.name("t"), "u": lake.name("u"), "first": t.history()[0].snapshot_id,
            "T": t.current_snapshot().snapshot_id, "T1": t.history()[0].snapshot_id,
            "U": u.current_snapshot().snapshot_id}


@pytest.mark.parametrize("sql, expected", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_fixture(spark, tables, sql, expected):
    from unit.rulekit import planned

    plan = planned(spark, sql.format(**tables))
    out = transform_up(plan, lambda n: push_filters(n, None))
    if expected is None:
        assert out is plan
    else:
        names = {k: tables[k] for k in ("T", "T1", "U")}
        assert shown(out, **names) == expected.strip().format(**tables)
