"""check_options: read and write options are honored or refused while the statement is planned.

    LakeRelation lake.db.t options=(snapshot-id=42)        checked: a known read option, alone
    WriteToLake append lake.db.t options=(snapshot-property.k=v)   checked: a known write option

An option lakerules does not honor is an error naming it (lakerules.options), before anything
runs. Which snapshot a read option chooses is decided when the scan is planned
(rules/resolve_scans.py); what a write option sets, when the write commits.
"""

from __future__ import annotations

from lakerules import options
from lakerules.plan import CreateTableAsSelect, LakeRelation, Node, WriteToLake


def check_options(plan: Node, ctx) -> Node:
    match plan:
        case LakeRelation(options=opts) if opts:
            options.check_read(plan.table, dict(opts))
        case WriteToLake(options=opts) | CreateTableAsSelect(options=opts) if opts:
            options.write_summary(plan.table, dict(opts))
    return plan
