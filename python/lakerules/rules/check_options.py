"""check_options: read and write options are honored or refused while the statement is planned.

    LakeRelation lake.db.t options=(snapshot-id=42)        checked: a known read option, alone
    WriteToLake append lake.db.t options=(snapshot-property.k=v)   checked: a known write option

An option lakerules does not honor is an error naming it (lakerules.options), before anything
runs; so is a write that write-audit-publish settings (spark.wap.id, spark.wap.branch) would
stage, on a table with write.wap.enabled=true. Which snapshot a read option chooses is decided when the scan is planned
(rules/resolve_scans.py); what a write option sets, when the write commits.
"""

from __future__ import annotations

from lakerules import options
from lakerules.plan import CreateTableAsSelect, LakeRelation, Node, WriteDeletes, WriteMerge, WriteToLake, WriteUpdate


def check_options(plan: Node, ctx) -> Node:
    match plan:
        case LakeRelation(options=opts) if opts:
            options.check_read(plan.table, dict(opts))
        case WriteToLake(options=opts) | CreateTableAsSelect(options=opts):
            if opts:
                options.write_summary(plan.table, dict(opts))
            _check_wap(plan, ctx)
        case WriteDeletes() | WriteUpdate() | WriteMerge():
            _check_wap(plan, ctx)
    return plan


def _check_wap(plan, ctx) -> None:
    if not any(ctx.conf(k) for k in options.WAP_SETTINGS):
        return
    t = plan.table
    if isinstance(plan, CreateTableAsSelect) and not ctx.catalogs.get(t.catalog).table_exists(t.identifier):
        return
    table = ctx.catalogs.load(t.catalog, t.namespace, t.name)
    options.check_wap(table, t, ctx.conf)
