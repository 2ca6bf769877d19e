"""rewrite_delete: DELETE FROM a lake table becomes a write of position deletes (seed 002).

    DeleteFromLake lake.db.t WHERE kind = 'spam'
becomes
    WriteDeletes lake.db.t merge-on-read: INSERT INTO lake.db.t.DELETE (file_path, pos)
        SELECT <file>, <position> FROM lake.db.t WHERE kind = 'spam'

or, when the table says ``write.delete.mode=copy-on-write`` (or is format v1), a rewrite of the
files that hold matched rows. ``TRUNCATE TABLE lake.db.t`` is DELETE without WHERE (TruncateLake:
one snapshot that removes every data and delete file), with no result rows. The table's write.delete.* properties (mode, isolation level,
granularity) are read here, so a bad value fails before anything is written. The files are
planned here (lakerules.scan.row_files.plan_files: which may hold matching rows, which are dropped whole), so
EXPLAIN shows them; what runs is in lakerules.rowlevel.run, which plans again only if the table
moved since.

What it leaves alone, built by hand (the rewrite needs the table's catalog:
tests/unit/test_rewrite_delete.py has statements Spark resolved and the plans they become):

>>> from lakerules.plan.nodes import LakeRelation, TableRef
>>> t = TableRef("lake", ("db",), "t")
>>> planned = TruncateLake(table=t, relation=LakeRelation(t, 42, False, (), None))
>>> rewrite_delete(planned, ctx=None) is planned  # a planned command is not planned again
True
"""

from __future__ import annotations

from lakerules.plan.nodes import DeleteFromLake, Node, TruncateLake, WriteDeletes
from lakerules.scan.row_files import check_condition, plan_files, statement_properties


def rewrite_delete(plan: Node, ctx) -> Node:
    match plan:
        case DeleteFromLake():
            t = plan.table
            check_condition("DELETE FROM", t, plan.condition)
            table = ctx.catalogs.load_for_write(t, ctx.conf)
            mode, granularity = statement_properties(table, "delete")
            files = None if plan.condition is None else plan_files(ctx.spark, table, plan.relation, plan.condition,
                                                                   drop_whole=True, granularity=granularity)
            command = TruncateLake if plan.truncate else WriteDeletes
            return command(table=t, relation=plan.relation, condition=plan.condition,
                           mode=mode, jvm=plan.jvm, files=files)
        case _:
            return plan
