"""rewrite_merge: MERGE INTO a lake table becomes a split write (seed 002, as UPDATE).

    MergeIntoLake lake.db.t ON t.id = s.id
becomes
    WriteMerge lake.db.t merge-on-read: target rows with <file>, <position> FULLOUTER JOIN source
      WHEN MATCHED THEN UPDATE ... / DELETE, WHEN NOT MATCHED THEN INSERT ...
      -> position deletes + new rows, one snapshot

or, when the table says ``write.merge.mode=copy-on-write`` (or is format v1), a rewrite of the
target files that hold an updated or deleted row. Each action's assignments are resolved here as
Spark's own MERGE resolves them (lakerules.scan.row_files.resolve_assignments): UPDATE SET as UPDATE's, INSERT
with a value or default for every column. Its ON and WHEN conditions are checked as Spark 4 checks
those of its own MERGE (no subquery, aggregate or non-deterministic expression: Spark's
UNSUPPORTED_MERGE_CONDITION errors). MERGE reads its own write.merge.* properties (mode,
isolation level; never write.update.* or write.delete.mode) and write.delete.granularity here,
so a bad value fails before anything is written. What runs is in lakerules.rowlevel.merge, which
narrows the target's files further by the source's keys when the statement executes.

What it leaves alone, built by hand (the rewrite needs a session and the table's catalog:
tests/unit/test_rewrite_merge.py has statements Spark resolved and the plans they become):

>>> from lakerules.plan.nodes import LakeRelation, TableRef
>>> t = TableRef("lake", ("db",), "t")
>>> planned = WriteMerge(table=t, relation=LakeRelation(t, 42, False, (), None), source=None, condition=None)
>>> rewrite_merge(planned, ctx=None) is planned  # a planned command is not planned again
True
"""

from __future__ import annotations

from dataclasses import replace

from lakerules.plan.nodes import MergeIntoLake, Node, WriteMerge
from lakerules.spark import jvm as J
from lakerules.scan.row_files import plan_files, resolve_assignments, statement_properties


def rewrite_merge(plan: Node, ctx) -> Node:
    match plan:
        case MergeIntoLake():
            t = plan.table
            J.check_merge_condition(ctx.spark, "SEARCH", plan.condition)
            matched, not_matched, by_source = (tuple(_resolved(ctx, plan, a) for a in actions) for actions in
                                               (plan.matched, plan.not_matched, plan.not_matched_by_source))
            table = ctx.catalogs.load_for_write(t, ctx.conf)
            mode, granularity = statement_properties(table, "merge")
            # the target read: pruned by the ON condition, unless rows matching nothing must be seen
            files = plan_files(ctx.spark, table, plan.relation, plan.condition, drop_whole=False,
                               prune=not plan.not_matched_by_source, granularity=granularity)
            return WriteMerge(table=t, relation=plan.relation, source=plan.source,
                              condition=plan.condition, matched=matched, not_matched=not_matched,
                              not_matched_by_source=by_source, mode=mode, jvm=plan.jvm, files=files)
        case _:
            return plan


def _resolved(ctx, plan: MergeIntoLake, action):
    if action.condition is not None:
        J.check_merge_condition(ctx.spark, action.kind.upper(), action.condition)
    if action.kind == "delete":
        return action
    return replace(action, assignments=resolve_assignments(ctx.spark, "MERGE INTO", plan.table, plan.relation,
                                                           action.assignments, insert=action.kind == "insert"))
