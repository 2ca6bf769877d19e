"""resolve_scans: a lake table relation becomes a planned scan of its data and delete files.

    LakeRelation lake.db.t snapshot=42 filters=1
becomes
    LakeScan lake.db.t snapshot=42 files=3/10 position_deletes=1 equality_deletes=0

The snapshot is the one Spark resolved the table at (the current one, or the one named by
VERSION AS OF / TIMESTAMP AS OF), or the one its read options choose (``snapshot-id``,
``as-of-timestamp``, ``branch``, ``tag``; lakerules.iceberg.options), or, for a plain read of a table with
write-audit-publish on, the head of ``spark.wap.branch`` (lakerules.iceberg.refs). Time travel reads with the schema of that snapshot; a plain
read uses the table's current schema, as Iceberg does. The relation's filters become one
pyiceberg expression; a part that cannot be translated becomes AlwaysTrue (read more, never
less).

Alone, on a metadata table's relation built by hand (a table's scan needs its catalog:
tests/unit/test_resolve_scans.py plans them, and the filters of plans Spark made):

>>> from lakerules.plan.nodes import TableRef
>>> files = LakeRelation(TableRef("lake", ("db",), "t"), snapshot_id=42, time_travel=True, output=(), jvm=None,
...                      metadata_table="files")
>>> resolve_scans(files, ctx=None).describe()  # its rows are built when the plan is lowered
'MetadataScan lake.db.t.files snapshot=42'
"""

from __future__ import annotations

from functools import reduce

from pyiceberg.expressions import AlwaysTrue, And

from lakerules.scan import bloom_filters, lineage, manifest_columns, manifest_job, manifests
from lakerules.metadata import tables as metadata_tables
from lakerules.iceberg import options, refs
from lakerules.iceberg import schema as schemas
from lakerules.errors import LakeError
from lakerules.plan.expressions import to_iceberg
from lakerules.scan.planning import plan_scan
from lakerules.metadata.tables import MetadataScan
from lakerules.plan.nodes import LakeRelation, LakeScan, Node


def resolve_scans(plan: Node, ctx) -> Node:
    match plan:
        # a metadata table: its rows are built when the plan is lowered (lakerules.metadata.tables)
        case LakeRelation(metadata_table=str()):
            return _metadata_scan(plan, ctx)
        # a lake relation: plan its files at the relation's snapshot, pruned by its filters
        case LakeRelation():
            return _scan(plan, ctx)
        case _:
            return plan


def _scan(rel: LakeRelation, ctx) -> LakeScan:
    table = ctx.catalogs.load(rel.table.catalog, rel.table.namespace, rel.table.name)
    manifests.configure(ctx.conf(manifests.CACHE_KEY))
    schema = table.schema()
    opts = dict(rel.options)
    if opts and rel.table.ref:
        raise LakeError(f"lakerules: reading {rel.table}: the name chooses a {rel.table.ref.partition(':')[0]} and the "
                        f"read option {next(iter(opts))!r} a snapshot; give one")
    snapshot_id = options.read_snapshot(table, rel.table, opts, rel.time_travel)
    if snapshot_id is None and not rel.time_travel and not rel.table.ref:
        # write-audit-publish: a plain read reads spark.wap.branch when it exists (lakerules.iceberg.refs)
        snapshot_id = refs.wap_read_snapshot_id(table, rel.table, ctx.conf)
    if snapshot_id is None:
        snapshot_id = rel.snapshot_id
    if rel.time_travel and rel.snapshot_id is not None:
        snapshot = table.snapshot_by_id(rel.snapshot_id)
        if snapshot is not None and snapshot.schema_id is not None:
            schema = table.schemas().get(snapshot.schema_id, schema)
    elif rel.table.ref and snapshot_id is not None:
        # a branch or tag whose head a replace renumbered columns of: its own schema (as the catalog
        # gave Spark the relation's columns, lakerules.backend.catalog_ops)
        schema = schemas.snapshot_schema(table.metadata, table.snapshot_by_id(snapshot_id))
    row_filter = _row_filter(rel, lineage.requested(table, schema, rel.output))
    plan = plan_scan(table, snapshot_id, row_filter,
                     remote=manifest_job.remote_reader(ctx.spark, ctx.conf, table, schema, manifests.CACHE),
                     bulk=manifest_columns.reader(ctx.spark, table))
    return LakeScan(
        table=rel.table,
        snapshot_id=snapshot_id,
        output=rel.output,
        iceberg=table,
        schema=schema,
        plan=bloom_filters.prune(ctx.spark, ctx.conf, table, schema, plan, row_filter),
        row_filter=row_filter,
    )


def _metadata_scan(rel: LakeRelation, ctx) -> MetadataScan:
    snapshot_id = rel.snapshot_id if rel.time_travel else None
    if rel.options:
        table = ctx.catalogs.load(rel.table.catalog, rel.table.namespace, rel.table.name)
        chosen = options.read_snapshot(table, rel.table, dict(rel.options), rel.time_travel)
        if chosen is not None:
            metadata_tables.check_time_travel(str(rel.table), rel.metadata_table)
            snapshot_id = chosen
    return MetadataScan(table=rel.table, meta=rel.metadata_table, snapshot_id=snapshot_id, output=rel.output)


def _row_filter(rel: LakeRelation, computed: tuple[str, ...] = ()):
    """The relation's filters as one pyiceberg expression; a condition on a column the scan
    computes (``computed``: v3's row lineage columns) prunes nothing."""
    columns = {a.expr_id: a.name for a in rel.output if a.name not in computed}
    parts = [to_iceberg(c, columns)[0] for c in rel.filters]
    return reduce(And, parts, AlwaysTrue())
