"""push_filters: a Filter directly over a lake relation gives the relation its conditions.

    Filter (ts >= 2026-01-02 AND kind = 'a')
      SubqueryAlias lake.db.t
        LakeRelation lake.db.t
becomes the same tree with the relation's ``filters`` = (ts >= 2026-01-02, kind = 'a'), which
resolve_scans uses to prune manifests and files. The Filter stays: pruning only skips files
that cannot hold a matching row; Spark still filters the rows it reads.

Alone, on a plan built by hand (in a session the conjuncts are Catalyst expressions; here their
SQL text stands for them). tests/unit/test_push_filters.py has plans Spark made:

>>> from lakerules.plan.nodes import TableRef
>>> rel = LakeRelation(TableRef("lake", ("db",), "t"), snapshot_id=42, time_travel=False, output=(), jvm=None)
>>> plan = Filter(jvm=None, kids=(rel,), conjuncts=("ts >= DATE'2026-01-02'", "kind = 'a'"))
>>> out = push_filters(plan, ctx=None)
>>> out.kids[0].describe(), out.kids[0].filters
('LakeRelation lake.db.t snapshot=42 filters=2', ("ts >= DATE'2026-01-02'", "kind = 'a'"))
>>> out.conjuncts == plan.conjuncts, push_filters(rel, ctx=None) is rel  # nothing to change: the same node
(True, True)
"""

from __future__ import annotations

from dataclasses import replace

from lakerules.spark import jvm as J
from lakerules.plan.nodes import Filter, LakeRelation, Node, SparkNode


def push_filters(plan: Node, ctx) -> Node:
    match plan:
        # a filter over a lake relation, through the aliases Spark names relations with
        case Filter(kids=(child,)) if _relation_under(child) is not None:
            return plan.with_children((_add_filters(child, plan.conjuncts),))
        case _:
            return plan


def _is_alias(node: Node) -> bool:
    return isinstance(node, SparkNode) and not isinstance(node, Filter) and len(node.kids) == 1 and J.simple_name(node.jvm) == "SubqueryAlias"


def _relation_under(node: Node) -> LakeRelation | None:
    while _is_alias(node):
        node = node.kids[0]
    return node if isinstance(node, LakeRelation) else None


def _add_filters(node: Node, conjuncts: tuple) -> Node:
    if isinstance(node, LakeRelation):
        return replace(node, filters=node.filters + tuple(conjuncts))
    return node.with_children((_add_filters(node.kids[0], conjuncts),))
