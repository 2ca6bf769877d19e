"""Structured Streaming into lake tables: each micro-batch one snapshot, exactly once.

``df.writeStream.toTable("lake.db.t")`` (or ``.format("iceberg").start("lake.db.t")``) plans,
for every micro-batch, Spark's WriteToMicroBatchDataSource over the lake table. The registry
turns it into a StreamWriteToLake node (lakerules.plan.nodes), lowered to io.lakerules.LakeStreamWrite;
when Spark executes the batch, the batch's rows reach :func:`run_batch` as a batch DataFrame:
Spark executors write the data files (lakerules.write.files), the driver commits them.

Output modes, as Iceberg's: ``append`` adds the batch's rows; ``complete`` replaces the table's
rows with the batch's (an overwrite per batch). ``update`` is refused by Spark (the table does
not take it).

Exactly once: each commit records the batch id in the table's property
``lakerules.stream.<query id>`` (lakerules.iceberg.bookkeeping: SQL cannot change it) in the same
commit as the batch's rows, and the query id and batch id in the snapshot summary
(``spark.sql.streaming.queryId`` / ``spark.sql.streaming.epochId``, Iceberg's keys). A restarted
query replays the batches its checkpoint has not marked done; a batch the table already holds for
this query (the driver stopped after the commit, before the checkpoint) is skipped: nothing is
written, nothing committed. The property is in the table's current metadata, as Delta keeps its
``txn`` actions through checkpoints, so the record outlives the snapshots that wrote it: expiring
them, a CREATE OR REPLACE, OPTIMIZE or a rollback to before the batch do not make a restarted query
write it again (a table written before the property existed is read from its history too).
"""

from __future__ import annotations

import logging

from pyiceberg.table.snapshots import ancestors_of

from lakerules.write import commit, files as write
from lakerules.spark import jvm as J
from lakerules.iceberg import bookkeeping, options as options_mod, schema as schemas
from lakerules.errors import LakeError, NotSupported

QUERY_ID = "spark.sql.streaming.queryId"
EPOCH_ID = "spark.sql.streaming.epochId"
# Options Spark itself reads from DataStreamWriter.option(...) and keeps in the write options.
SPARK_STREAM_OPTIONS = ("checkpointlocation", "path", "queryname")
MODES = ("append", "complete")
log = logging.getLogger("lakerules")
# Run with (table name, batch id) after a batch's commit landed, before Spark marks the batch done
# in its checkpoint (tests stop the driver here).
after_commit = None


def last_committed_batch(table, query_id: str) -> int | None:
    """The newest batch id the table holds for this query, or None: its property
    ``lakerules.stream.<query id>``, or, for batches committed before lakerules kept it, the
    summary of the newest snapshot (walking back from the current one) that ``query_id`` made."""
    recorded = table.properties.get(bookkeeping.stream_key(query_id))
    if recorded is not None and recorded.lstrip("-").isdigit():
        return int(recorded)
    current = table.current_snapshot()
    if current is None:
        return None
    for snapshot in ancestors_of(current, table.metadata):
        summary = snapshot.summary
        if summary is not None and summary.get(QUERY_ID) == query_id:
            try:
                return int(summary.get(EPOCH_ID))
            except (TypeError, ValueError):
                return None
    return None


def write_summary(node) -> dict:
    """The summary properties of the batch's commit; the stream's write options checked."""
    given = dict(node.options)
    ours = {k: v for k, v in given.items() if k.lower() not in SPARK_STREAM_OPTIONS}
    try:
        summary = options_mod.write_summary(node.table, ours)
    except NotSupported as e:
        raise NotSupported(f"{e} (and, for a stream, Spark's {list(SPARK_STREAM_OPTIONS)})") from None
    return {**summary, QUERY_ID: node.query_id, EPOCH_ID: str(node.batch_id)}


_checked_queries: set[str] = set()


def warn_checkpoint_in_table(ctx, node) -> None:
    """Once per query: a checkpoint inside a lake table's folder is a hazard (cleanup by tools
    that do not recognise it, copies of the table, a DROP ... PURGE), so the stream is warned.
    lakerules' own cleanup never deletes a checkpoint (lakerules.iceberg.cleanup.kept_folder)."""
    if node.query_id in _checked_queries:
        return
    _checked_queries.add(node.query_id)
    given = {k.lower(): v for k, v in node.options}.get("checkpointlocation")
    checkpoint = given or J.checkpoint_root(ctx.spark, node.query_id)
    if not checkpoint:
        return
    from lakerules.iceberg import owners, paths

    try:
        loc = paths.resolve(checkpoint)
        tables = owners.other_tables(ctx.catalogs.get(node.table.catalog))
    except Exception:  # noqa: BLE001 - a warning only
        return
    for other in tables:
        if any(paths.relation(loc, f) in ("is inside", "is also") for f in other.folders):
            log.warning("lakerules: the checkpoint %s of the streaming query %s into %s is inside the folder of lake "
                        "table %s; lakerules' cleanup keeps it, but other tools' may not, and it goes with the table's "
                        "folder. Keep checkpoints outside tables' folders.", checkpoint, node.query_id, node.table,
                        other.name)
            return


def run_batch(ctx, node, df) -> None:
    """Write and commit one micro-batch (df: its rows), unless the table already holds it."""
    t = node.table
    warn_checkpoint_in_table(ctx, node)
    if node.mode not in MODES:
        raise NotSupported(f"lakerules: streaming output mode {node.mode!r} into {t} is not supported; "
                           f"lake tables take {list(MODES)}")
    summary = write_summary(node)  # before anything is written: a bad option changes nothing
    table = ctx.catalogs.load(t.catalog, t.namespace, t.name)
    done = last_committed_batch(table, node.query_id)
    if done is not None and node.batch_id <= done:
        log.info("lakerules: %s already holds batch %s of streaming query %s (up to %s); skipped",
                 t, node.batch_id, node.query_id, done)
        return
    options_mod.check_wap(table, str(t), lambda k: ctx.spark.conf.get(k, None))
    rows = aligned(ctx.spark, table, df, str(t))
    removed = write._current_files(table) if node.mode == "complete" else []
    written = write.write_data_files(ctx, t.catalog, table, rows)
    try:
        done_now = {bookkeeping.stream_key(node.query_id): str(node.batch_id)}
        if node.mode == "append":
            commit.append(table, written, summary, done_now)
        else:
            commit.overwrite(table, removed, written, summary, done_now)
    except BaseException as e:
        write.discard(table, written, e)
        raise
    if after_commit is not None:
        after_commit(str(t), node.batch_id)


def aligned(spark, table, df, name: str):
    """The batch's columns as the table's, matched by name (as Iceberg's streaming writes match
    them): a table column the stream lacks is NULL (it must be optional), a stream column the
    table lacks is an error, and each type must widen to the table's without loss (Spark's
    up-cast: int to bigint, float to double, ...), else an error before anything is written."""
    case_sensitive = str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    key = (lambda s: s) if case_sensitive else str.lower
    given = {key(f.name): f for f in df.schema.fields}
    fields = table.schema().as_struct().fields
    wanted = {key(f.name) for f in fields}
    extra = [f.name for f in df.schema.fields if key(f.name) not in wanted]
    if extra:
        raise LakeError(f"lakerules: the stream's columns {extra} are not columns of {name}; "
                        f"its columns are {[f.name for f in fields]}")
    from pyspark.sql import functions as F

    columns = []

    for f in fields:
        target = schemas.iceberg_type_to_spark(f.field_type)
        source = given.get(key(f.name))
        if source is None:
            if f.required:
                raise LakeError(f"lakerules: the stream has no column {f.name!r}, which {name} requires (NOT NULL)")
            columns.append(F.lit(None).cast(target).alias(f.name))
            continue
        if source.dataType != target:
            if not J.can_up_cast(spark, source.dataType, target):
                raise LakeError(f"lakerules: the stream's column {source.name!r} is {source.dataType.simpleString()}, "
                                f"which does not widen to {name}'s {f.name} {target.simpleString()} without loss")
        columns.append(df[J.quote(source.name)].cast(target).alias(f.name))
    return df.select(*columns)
