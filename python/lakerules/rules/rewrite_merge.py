"""rewrite_merge: MERGE INTO a lake table becomes a split write (seed 002, as UPDATE).

    MergeIntoLake lake.db.t ON t.id = s.id
becomes
    WriteMerge lake.db.t merge-on-read: target rows with <file>, <position> FULLOUTER JOIN source
      WHEN MATCHED THEN UPDATE ... / DELETE, WHEN NOT MATCHED THEN INSERT ...
      -> position deletes + new rows, one snapshot

What runs is in lakerules.rowlevel.
"""

from __future__ import annotations

from lakerules.plan import MergeIntoLake, Node, WriteMerge


def rewrite_merge(plan: Node, ctx) -> Node:
    match plan:
        case MergeIntoLake():
            return WriteMerge(table=plan.table, relation=plan.relation, source=plan.source,
                              condition=plan.condition, matched=plan.matched, not_matched=plan.not_matched,
                              not_matched_by_source=plan.not_matched_by_source, jvm=plan.jvm)
        case _:
            return plan
