"""rewrite_delete: DELETE FROM a lake table becomes a write of position deletes (seed 002).

    DeleteFromLake lake.db.t WHERE kind = 'spam'
becomes
    WriteDeletes lake.db.t merge-on-read: INSERT INTO lake.db.t.DELETE (file_path, pos)
        SELECT <file>, <position> FROM lake.db.t WHERE kind = 'spam'

or, when the table says ``write.delete.mode=copy-on-write`` (or is format v1), a rewrite of the
files that hold matched rows. What runs is in lakerules.rowlevel.
"""

from __future__ import annotations

from lakerules.plan import DeleteFromLake, Node, WriteDeletes
from lakerules.row_plans import delete_mode


def rewrite_delete(plan: Node, ctx) -> Node:
    match plan:
        case DeleteFromLake():
            t = plan.table
            table = ctx.catalogs.load(t.catalog, t.namespace, t.name)
            return WriteDeletes(table=t, relation=plan.relation, condition=plan.condition,
                                mode=delete_mode(table), jvm=plan.jvm)
        case _:
            return plan
