"""The executor: the one place planned commands run (write files, commit).

Planning (the rules, lowering) builds a tree of lakerules nodes and runs nothing; a command
node becomes one JVM command node (io.lakerules.LakeCommand) whose ``run`` Spark calls once,
when it executes the statement. That call lands here: node type -> the function that runs it.
Each returns the JVM plan of the statement's result rows (a LocalRelation).

Every Spark job a command runs carries a job description naming the statement and its step
(lakerules.spark.progress).
"""

from __future__ import annotations

import logging

from lakerules.errors import MaintenanceRace
from lakerules.execute import statements
from lakerules.metadata import describe
from lakerules.spark import jvm as J, progress
from lakerules.plan import convert, nodes as P
from lakerules.rowlevel import merge as rowlevel_merge, run as rowlevel
from lakerules.streaming import sink as streaming
from lakerules.write import files as write

log = logging.getLogger("lakerules")

_VERBS = {
    P.WriteToLake: "INSERT",
    P.CreateTableAsSelect: "CREATE TABLE AS SELECT",
    P.WriteDeletes: "DELETE",
    P.TruncateLake: "TRUNCATE TABLE",
    P.DescribeLakeColumn: "DESCRIBE",
    P.WriteUpdate: "UPDATE",
    P.WriteMerge: "MERGE",
}


# A statement that meets maintenance removing the snapshot it read (errors.MaintenanceRace: nothing
# committed) runs again on the table as it is then, up to this many times in all.
RACE_ATTEMPTS = 3


def execute(ctx, node: P.Command):
    """Run a planned command once; the JVM plan of its result rows. Afterwards Spark's cached
    plans over the table are computed again from what it now holds, as after Spark's own writes."""
    t = node.table
    for attempt in range(1, RACE_ATTEMPTS + 1):
        try:
            if isinstance(node, P.StatementCommand):
                with progress.statement(ctx, title(node)):
                    t, result = statements.run(ctx, node)
            else:
                result = _run(ctx, node)
            break
        except MaintenanceRace:
            # nothing landed and the table is healthy: run it again on the table as it is now
            if attempt == RACE_ATTEMPTS:
                raise
            log.info("lakerules: %s met maintenance that removed what it read; running it again (attempt %d)",
                     title(node), attempt + 1)
    if node.changes_table and t is not None:
        J.recache_table(ctx.spark, [t.catalog, *t.namespace, t.name])
    return result


def execute_stream_batch(ctx, node: P.StreamWriteToLake, df):
    """Write one micro-batch's rows (df) to the lake table and commit them, once per batch id
    (lakerules.streaming.sink); afterwards cached plans over the table are computed again."""
    with progress.statement(ctx, f"streaming batch {node.batch_id} ({node.mode}) to {node.table}"):
        streaming.run_batch(ctx, node, df)
    t = node.table
    J.recache_table(ctx.spark, [t.catalog, *t.namespace, t.name])


def _run(ctx, node: P.Command):
    with progress.statement(ctx, title(node)):
        match node:
            case P.WriteToLake():
                return write.run_write(ctx, node, convert.to_jvm(ctx, node.query))
            case P.CreateTableAsSelect():
                return write.run_ctas(ctx, node, convert.to_jvm(ctx, node.query))
            case P.TruncateLake():
                rowlevel.run_delete(ctx, node)
                return None  # TRUNCATE TABLE shows no rows
            case P.WriteDeletes():
                return rowlevel.run_delete(ctx, node)
            case P.DescribeLakeColumn():
                return describe.column_rows(ctx, node)
            case P.WriteUpdate():
                return rowlevel.run_update(ctx, node)
            case P.WriteMerge():
                return rowlevel_merge.run_merge(ctx, node)
            case _:
                raise TypeError(f"lakerules: no executor for plan node {type(node).__name__}")


def title(node: P.Command) -> str:
    if isinstance(node, P.StatementCommand):
        return " ".join(node.statement.describe().split())[:200]
    if isinstance(node, P.WriteToLake):
        verb = {"append": "INSERT INTO", "overwrite": "INSERT OVERWRITE", "dynamic": "INSERT OVERWRITE (dynamic)"}[node.mode]
        return f"{verb} {node.table}"
    return f"{_VERBS.get(type(node), type(node).__name__)} {node.table}"
