"""rewrite_update: UPDATE on a lake table becomes the seed's split write (seed 002).

    UpdateLake lake.db.t SET kind = 'ok' WHERE id = 7
becomes
    WriteUpdate lake.db.t merge-on-read: INSERT INTO lake.db.t.UPDATE (file_path, pos, <new columns>)
        SELECT <file>, <position>, <row with SET kind = 'ok'> FROM lake.db.t WHERE id = 7

or a copy-on-write rewrite of the affected files when the table says
``write.update.mode=copy-on-write`` (or is format v1). The assignments are resolved here as
Spark's own UPDATE resolves them (lakerules.scan.row_files.resolve_assignments): one value per column, nested
fields folded into their struct, store-assignment casts and NOT NULL checks. The table's
write.update.* properties (mode, isolation level) and write.delete.granularity are read here too,
so a bad value fails before anything is written. What runs is in lakerules.rowlevel.

What it leaves alone, built by hand (the rewrite needs a session and the table's catalog:
tests/unit/test_rewrite_update.py has statements Spark resolved and the plans they become):

>>> from lakerules.plan.nodes import DeleteFromLake, LakeRelation, TableRef
>>> t = TableRef("lake", ("db",), "t")
>>> delete = DeleteFromLake(table=t, relation=LakeRelation(t, 42, False, (), None))
>>> rewrite_update(delete, ctx=None) is delete
True
"""

from __future__ import annotations

from lakerules.plan.nodes import Node, UpdateLake, WriteUpdate
from lakerules.scan.row_files import check_condition, plan_files, resolve_assignments, statement_properties


def rewrite_update(plan: Node, ctx) -> Node:
    match plan:
        case UpdateLake():
            t = plan.table
            check_condition("UPDATE", t, plan.condition)
            assignments = resolve_assignments(ctx.spark, "UPDATE", t, plan.relation, plan.assignments)
            table = ctx.catalogs.load_for_write(t, ctx.conf)
            mode, granularity = statement_properties(table, "update")
            if plan.condition is None:
                granularity = None  # every row changes: the files are rewritten, no delete files
            files = plan_files(ctx.spark, table, plan.relation, plan.condition, drop_whole=False,
                               granularity=granularity)
            return WriteUpdate(table=t, relation=plan.relation, assignments=assignments,
                               condition=plan.condition, mode=mode, jvm=plan.jvm, files=files)
        case _:
            return plan
