"""check_options: read and write options are honored or refused while the statement is planned.

    LakeRelation lake.db.t options=(snapshot-id=42)        checked: a known read option, alone
    WriteToLake append lake.db.t options=(snapshot-property.k=v)   checked: a known write option

An option lakerules does not honor is an error naming it (lakerules.iceberg.options), before anything
runs; so is a write whose target contradicts itself (lakerules.iceberg.refs): to a tag, to a branch the
table lacks, or to a branch while write-audit-publish settings name another. Which snapshot a
read option chooses is decided when the scan is planned (rules/resolve_scans.py); what a write
option sets, when the write commits.

Alone, on nodes built by hand (tests/unit/test_check_options.py has the write targets):

>>> from lakerules.plan.nodes import TableRef
>>> t = TableRef("lake", ("db",), "t")
>>> rel = LakeRelation(t, snapshot_id=42, time_travel=False, output=(), jvm=None, options=(("snapshot-id", "42"),))
>>> check_options(rel, ctx=None) is rel  # checked, and never rewritten
True
>>> check_options(LakeRelation(t, 42, False, (), None, options=(("split-size", "1"),)), ctx=None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lakerules.errors.NotSupported: lakerules: read option(s) ['split-size'] on lake.db.t are not supported; ...
"""

from __future__ import annotations

from lakerules.iceberg import options, refs
from lakerules.plan.nodes import CreateTableAsSelect, LakeRelation, Node, WriteDeletes, WriteMerge, WriteToLake, WriteUpdate


def check_options(plan: Node, ctx) -> Node:
    match plan:
        case LakeRelation(options=opts) if opts:
            options.check_read(plan.table, dict(opts))
        case WriteToLake(options=opts) | CreateTableAsSelect(options=opts):
            if opts:
                options.write_summary(plan.table, dict(opts), ctas=isinstance(plan, CreateTableAsSelect))
            _check_target(plan, ctx)
        case WriteDeletes() | WriteUpdate() | WriteMerge():
            _check_target(plan, ctx)
    return plan


def _check_target(plan, ctx) -> None:
    t = plan.table
    if not t.ref and not any(ctx.conf(k) for k in refs.WAP_SETTINGS):
        return
    if isinstance(plan, CreateTableAsSelect):
        if ctx.catalogs.get(t.catalog).table_exists(t.identifier):
            options.check_wap(ctx.catalogs.load(t.catalog, t.namespace, t.name), t, ctx.conf)
        return
    ctx.catalogs.load_for_write(t, ctx.conf)  # a LakeError when the target contradicts itself
