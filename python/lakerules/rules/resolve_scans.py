"""resolve_scans: a lake table relation becomes a planned scan of its data files.

    LakeRelation lake.db.t snapshot=42
becomes
    LakeScan lake.db.t snapshot=42 files=3/3

The snapshot is the one Spark resolved the table at (the current one, or the one named by
VERSION AS OF / TIMESTAMP AS OF). Time travel reads with the schema of that snapshot; a plain
read uses the table's current schema, as Iceberg does.
"""

from __future__ import annotations

from lakerules.plan import LakeRelation, LakeScan, Node
from lakerules.scan import plan_files


def resolve_scans(plan: Node, ctx) -> Node:
    match plan:
        # a lake relation: plan its files at the relation's snapshot
        case LakeRelation():
            return _scan(plan, ctx)
        case _:
            return plan


def _scan(rel: LakeRelation, ctx) -> LakeScan:
    table = ctx.catalogs.load(rel.table.catalog, rel.table.namespace, rel.table.name)
    schema = table.schema()
    if rel.time_travel and rel.snapshot_id is not None:
        snapshot = table.snapshot_by_id(rel.snapshot_id)
        if snapshot is not None and snapshot.schema_id is not None:
            schema = table.schemas().get(snapshot.schema_id, schema)
    tasks, total = plan_files(table, rel.snapshot_id)
    return LakeScan(
        table=rel.table,
        snapshot_id=rel.snapshot_id,
        output=rel.output,
        iceberg=table,
        schema=schema,
        tasks=tuple(tasks),
        total_files=total,
    )
