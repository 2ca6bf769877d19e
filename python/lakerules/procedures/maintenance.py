"""CALL procedures: Iceberg's table maintenance, with Iceberg's names, arguments and results.

    CALL lake.system.remove_orphan_files(table => 'db.t' [, older_than => TIMESTAMP '...']
                                         [, location => '...'] [, dry_run => true]
                                         [, max_concurrent_deletes => N])
    CALL lake.system.expire_snapshots(table => 'db.t' [, older_than => TIMESTAMP '...']
                                      [, retain_last => N] [, max_concurrent_deletes => N]
                                      [, stream_results => b] [, snapshot_ids => ARRAY(1, 2)])
    CALL lake.system.rewrite_manifests(table => 'db.t' [, spec_id => N])
    CALL lake.system.rewrite_data_files(table => 'db.t' [, strategy => 'binpack' | 'sort']
                                        [, sort_order => 'zorder(a, b)' | 'hilbert(a, b)']
                                        [, options => map('target-file-size-bytes', '...', ...)]
                                        [, where => 'partition predicate'])
    CALL lake.system.rewrite_position_delete_files(table => 'db.t' [, options => map(...)]
                                                   [, where => 'partition predicate'])
    CALL lake.system.remove_missing_files(table => 'db.t' [, dry_run => true] [, include_damaged => true])

remove_missing_files (files gone from disk, or damaged) is lakerules.procedures.missing_files'.
rewrite_data_files runs on OPTIMIZE's engine (lakerules.optimize.rewrite, which statements dispatches it to):
binpack is its compaction, ``zorder(...)`` its ZORDER BY, ``hilbert(...)`` its HILBERT BY.
rewrite_position_delete_files is lakerules.procedures.rewrite_position_delete_files (statements dispatches it there too).

Arguments go by name (any order) or by position (Iceberg's order), not mixed. Each value is any
constant Spark SQL expression, cast to the parameter's type by Spark.

The statement is routed to Python by the shim's parser (lakerules.sql.statements): Spark 4 parses
CALL itself for a ``ProcedureCatalog``, but that interface is marked evolving and has changed
within 4.x (a parameter's default was a SQL string in 4.0 and is a ``DefaultValue`` later), so a
shim compiled against one 4.x release would not link against another; a routed statement needs
no Java at all and its result is an ordinary LocalRelation.

Which files a table needs (``reachable``): for every snapshot its manifest list, every manifest
in it and every data and delete file those manifests name (live or deleted entries), every
metadata JSON in the table's metadata log and the current one, and the statistics and partition
statistics files. remove_orphan_files removes the files under the table location that none of
that names and that are older than ``older_than`` (files being written right now are newer);
expire_snapshots removes the snapshots and then exactly the files that only the removed
snapshots needed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyiceberg.table.refs import SnapshotRefType
from pyspark.sql import functions as F

from lakerules.spark import jvm as J, settings
from lakerules.iceberg import cleanup, names, paths
from lakerules.iceberg.cleanup import guard, kept_folder, normalize, reachable
from lakerules.iceberg.paths import hidden
from lakerules.errors import LakeError, NotSupported

log = logging.getLogger("lakerules")

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Param:
    name: str
    sql_type: str  # the Spark SQL type the argument is cast to
    required: bool = False
    supported: bool = True  # Iceberg's parameter, not supported by lakerules (an error if given)
    why: str = ""  # why it is not supported, said in the error


PROCEDURES: dict[str, tuple[Param, ...]] = {
    "remove_orphan_files": (
        Param("table", "STRING", required=True),
        Param("older_than", "TIMESTAMP"),
        Param("location", "STRING"),
        Param("dry_run", "BOOLEAN"),
        Param("max_concurrent_deletes", "INT"),
        Param("file_list_view", "STRING", supported=False),
        Param("equal_schemes", "MAP<STRING, STRING>", supported=False),
        Param("equal_authorities", "MAP<STRING, STRING>", supported=False),
        Param("prefix_mismatch_mode", "STRING", supported=False),
    ),
    "expire_snapshots": (
        Param("table", "STRING", required=True),
        Param("older_than", "TIMESTAMP"),
        Param("retain_last", "INT"),
        Param("max_concurrent_deletes", "INT"),
        Param("stream_results", "BOOLEAN"),
        Param("snapshot_ids", "ARRAY<BIGINT>"),
    ),
    "rewrite_manifests": (
        Param("table", "STRING", required=True),
        Param("use_caching", "BOOLEAN", supported=False,
              why="it sets whether Iceberg's Spark job caches the manifest entries it shuffles; lakerules "
                  "rewrites manifests in the driver, reading each manifest once, with no Spark job to cache"),
        Param("spec_id", "INT"),
    ),
    # files and tables from elsewhere (lakerules.procedures.imports)
    "add_files": (
        Param("table", "STRING", required=True),
        Param("source_table", "STRING", required=True),
        Param("partition_filter", "MAP<STRING, STRING>"),
        Param("check_duplicate_files", "BOOLEAN"),
        Param("parallelism", "INT"),
        Param("shared", "BOOLEAN"),  # lakerules': files of another table's folders, kept by its cleanup
    ),
    "register_table": (
        Param("table", "STRING", required=True),
        Param("metadata_file", "STRING", required=True),
    ),
    "rewrite_data_files": (
        Param("table", "STRING", required=True),
        Param("strategy", "STRING"),
        Param("sort_order", "STRING"),
        Param("options", "MAP<STRING, STRING>"),
        Param("where", "STRING"),
    ),
    "rewrite_position_delete_files": (  # lakerules.procedures.rewrite_position_delete_files
        Param("table", "STRING", required=True),
        Param("options", "MAP<STRING, STRING>"),
        Param("where", "STRING"),
    ),
    # files gone from disk (lakerules.procedures.missing_files)
    "remove_missing_files": (
        Param("table", "STRING", required=True),
        Param("dry_run", "BOOLEAN"),
        Param("include_damaged", "BOOLEAN"),
    ),
    # a table's history (lakerules.procedures.history)
    "rollback_to_snapshot": (
        Param("table", "STRING", required=True),
        Param("snapshot_id", "BIGINT", required=True),
    ),
    "rollback_to_timestamp": (
        Param("table", "STRING", required=True),
        Param("timestamp", "TIMESTAMP", required=True),
    ),
    "set_current_snapshot": (
        Param("table", "STRING", required=True),
        Param("snapshot_id", "BIGINT"),
        Param("ref", "STRING"),
    ),
    "cherrypick_snapshot": (
        Param("table", "STRING", required=True),
        Param("snapshot_id", "BIGINT", required=True),
    ),
    "fast_forward": (
        Param("table", "STRING", required=True),
        Param("branch", "STRING", required=True),
        Param("to", "STRING", required=True),
    ),
    "publish_changes": (
        Param("table", "STRING", required=True),
        Param("wap_id", "STRING", required=True),
    ),
    # a table's changes as a view (lakerules.procedures.changelog)
    "create_changelog_view": (
        Param("table", "STRING", required=True),
        Param("changelog_view", "STRING"),
        Param("options", "MAP<STRING, STRING>"),
        Param("compute_updates", "BOOLEAN"),
        Param("identifier_columns", "ARRAY<STRING>"),
        Param("net_changes", "BOOLEAN"),
    ),
}

# Procedures whose arguments are typed as Iceberg's are: a value whose type Spark cannot up-cast
# to the parameter's (a string for a snapshot id, a timestamp for a number) is an error, not cast.
_STRICT = {"add_files", "register_table", "rollback_to_snapshot", "rollback_to_timestamp", "set_current_snapshot", "cherrypick_snapshot",
           "fast_forward", "publish_changes"}

RESULTS = {
    "remove_orphan_files": "orphan_file_location string",
    "expire_snapshots": (
        "deleted_data_files_count long, deleted_position_delete_files_count long, "
        "deleted_equality_delete_files_count long, deleted_manifest_files_count long, "
        "deleted_manifest_lists_count long, deleted_statistics_files_count long"
    ),
    "rewrite_manifests": "rewritten_manifests_count int, added_manifests_count int",
    "add_files": "added_files_count long, changed_partition_count long",
    "register_table": "current_snapshot_id long, total_records_count long, total_data_files_count long",
    "rewrite_data_files": (
        "rewritten_data_files_count int, added_data_files_count int, rewritten_bytes_count long, "
        "failed_data_files_count int, removed_delete_files_count int"
    ),
    "rewrite_position_delete_files": (
        "rewritten_delete_files_count int, added_delete_files_count int, rewritten_bytes_count long, "
        "added_bytes_count long"
    ),
    "remove_missing_files": "file_path string, file_content string, problem string",
    "rollback_to_snapshot": "previous_snapshot_id long, current_snapshot_id long",
    "rollback_to_timestamp": "previous_snapshot_id long, current_snapshot_id long",
    "set_current_snapshot": "previous_snapshot_id long, current_snapshot_id long",
    "cherrypick_snapshot": "source_snapshot_id long, current_snapshot_id long",
    "fast_forward": "branch_updated string, previous_ref long, updated_ref long",
    "publish_changes": "source_snapshot_id long, current_snapshot_id long",
    "create_changelog_view": "changelog_view string",
}



# ---- the statement --------------------------------------------------------------------------------


def bind(spark, procedure: str, catalog: str, args: list[tuple[str | None, str]]) -> dict:
    """The procedure's arguments by name, evaluated by Spark and cast to the parameters' types
    (timestamps as microseconds since the epoch); absent optional arguments are None. ``args``:
    (name or None, the argument's text) pairs, as lakerules.sql.dialect parsed the CALL."""
    params = PROCEDURES[procedure]
    by_name = {p.name: p for p in params}
    where = f"CALL {catalog}.system.{procedure}"
    given: dict[str, str] = {}
    named = [name is not None for name, _ in args]
    if any(named) and not all(named):
        raise LakeError(f"lakerules: {where}: mixing positional and named arguments is not supported")
    if args and all(named):
        for raw, text in args:
            name = raw.lower()
            if name not in by_name:
                raise LakeError(f"lakerules: {where}: unknown argument {raw!r}; its arguments are "
                                f"{[p.name for p in params]}")
            if name in given:
                raise LakeError(f"lakerules: {where}: argument {name!r} is given more than once")
            given[name] = text
    else:
        if len(args) > len(params):
            raise LakeError(f"lakerules: {where}: {len(args)} arguments given; it takes at most {len(params)}: "
                            f"{[p.name for p in params]}")
        given = {p.name: text for p, (_, text) in zip(params, args)}
    for p in params:
        if p.required and p.name not in given:
            raise LakeError(f"lakerules: {where}: missing required argument {p.name!r}")
        if not p.supported and p.name in given:
            raise NotSupported(f"lakerules: {where}: argument {p.name!r} is not supported" + (f": {p.why}" if p.why else ""))
    values = {p.name: None for p in params}
    if given:
        names = list(given)
        try:
            # each argument is the statement's own text, read alone; the casts are built as objects
            exprs = []
            if procedure in _STRICT:
                _check_types(spark, where, {name: (F.expr(given[name]), by_name[name].sql_type) for name in names})
            for i, name in enumerate(names):
                cast = F.expr(given[name]).cast(by_name[name].sql_type)
                exprs.append((F.unix_micros(cast) if by_name[name].sql_type == "TIMESTAMP" else cast).alias(f"a{i}"))
            row = J.one_row(spark).select(*exprs).collect()[0]
        except LakeError:
            raise
        except Exception as e:  # noqa: BLE001 - Spark's own error, named by the statement
            raise LakeError(f"lakerules: {where}: cannot evaluate the arguments {given}: {first_line(e)}") from None
        for i, name in enumerate(names):
            values[name] = row[i]
    if values.get("max_concurrent_deletes") is not None and values["max_concurrent_deletes"] <= 0:
        raise LakeError(f"lakerules: {where}: max_concurrent_deletes should have value > 0, value: "
                        f"{values['max_concurrent_deletes']}")
    if values["table"] is None:
        raise LakeError(f"lakerules: {where}: argument 'table' is NULL")
    for p in params:
        # a NULL given by name is not an argument left out: using the default instead would be a silent
        # guess (positional NULLs stand for the arguments before one given, as in Iceberg's calls)
        if p.name in given and values[p.name] is None and (p.required or all(named)):
            default = "" if p.required else "; leave it out for its default"
            raise LakeError(f"lakerules: {where}: argument {p.name!r} is NULL{default}")
    return values


def _check_types(spark, where: str, args: dict) -> None:
    """Each argument's type is the parameter's kind, as Iceberg's procedures require: a string
    for a STRING, a whole number for a BIGINT, a timestamp or date for a TIMESTAMP (Spark's casts
    would take a string as a number, a number as a string, or seconds as a timestamp). A NULL
    literal fits any (a required argument that is NULL is then an error)."""
    from pyspark.sql import types as T

    fits = {
        "STRING": (T.StringType,),
        "BOOLEAN": (T.BooleanType,),
        "INT": (T.ByteType, T.ShortType, T.IntegerType),
        "MAP<STRING, STRING>": (T.MapType,),
        "BIGINT": (T.ByteType, T.ShortType, T.IntegerType, T.LongType),
        "TIMESTAMP": (T.TimestampType, T.TimestampNTZType, T.DateType),
    }
    frame = J.one_row(spark).select(*(col.alias(f"a{i}") for i, (col, _) in enumerate(args.values())))
    for field, (name, (_, sql_type)) in zip(frame.schema.fields, args.items()):
        kinds = fits.get(sql_type)
        if kinds is not None and not isinstance(field.dataType, (T.NullType, *kinds)):
            raise LakeError(f"lakerules: {where}: argument {name!r} must be {sql_type.lower()}, not "
                            f"{field.dataType.simpleString()}")


def first_line(e: Exception) -> str:
    text = str(getattr(e, "desc", None) or e)
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__


# ---- remove_orphan_files ----------------------------------------------------------------------------


def remove_orphan_files(ctx, table, args: dict):
    spark = ctx.spark
    now_ms = int(time.time() * 1000)
    older_than_ms = args["older_than"] // 1000 if args["older_than"] is not None else now_ms - 3 * DAY_MS
    min_age = settings.min_orphan_age_ms(spark.conf.get(settings.MIN_ORPHAN_AGE, None))
    if min_age > 0 and now_ms - older_than_ms < min_age:
        raise LakeError(
            f"lakerules: remove_orphan_files on {names.table_name(table)}: older_than is less than "
            f"spark.lakerules.removeOrphanFiles.minAge ({min_age} ms) ago. Files newer than that may belong "
            "to a statement still running, and removing them would corrupt its commit. Set that setting "
            "lower only when no statement is writing to the table."
        )
    confined = paths.Confinement.of(table, f"remove_orphan_files on {_shown(table)}")
    location = confined.location(args["location"])
    borrowed = guard(table.catalog, table, confined)
    # list first, then read the metadata: a file committed in between is in the metadata
    listed = confined.list_files(location, older_than_ms, table.io, hidden, kept_folder)
    _refuse_other_tables(confined, table, listed)
    table.refresh()
    needed = reachable(table.metadata, table.metadata_location, table.io) | borrowed
    orphans = sorted(p for p in listed if normalize(p) not in needed and not _is_version_hint(p))
    if not args["dry_run"]:
        confined.delete(table.io, orphans, args["max_concurrent_deletes"])
    # a LocalRelation built from Arrow: there may be many
    from pyspark.sql.types import StructType

    return J.analyzed(J.local_frame(spark, [(p,) for p in orphans], StructType.fromDDL(RESULTS["remove_orphan_files"])))


def _is_version_hint(path: str) -> bool:
    return path.endswith("/metadata/version-hint.text")


def _shown(table) -> str:
    return names.table_name(table)


def _refuse_other_tables(confined: paths.Confinement, table, listed: list[str]) -> None:
    """A table's metadata (a metadata JSON or a Hadoop table's version hint) listed outside this
    table's metadata folders: a table the catalog's database does not know (another catalog's)
    lives below this table's location."""
    own = {confined.root.key + "/metadata"}
    if table.properties.get("write.metadata.path"):
        own.add(normalize(table.properties["write.metadata.path"]).rstrip("/"))
    for p in listed:
        name = p.rsplit("/", 1)[-1]
        if (name.endswith(".metadata.json") or name == "version-hint.text") \
                and normalize(p).rsplit("/", 1)[0] not in own:
            confined.refuse(f"{p!r} is another table's metadata below the table's location "
                            f"{confined.root.text!r}; files there belong to that table")


# ---- expire_snapshots -----------------------------------------------------------------------------


def snapshots_to_expire(metadata, now_ms: int, older_than_ms: int | None, retain_last: int | None,
                        snapshot_ids) -> list[int]:
    """Iceberg's rule: each branch keeps its head, and its ancestors while fewer than retain_last
    (the branch's min-snapshots-to-keep, else retain_last, else the table's
    history.expire.min-snapshots-to-keep, default 1) are kept or while they are newer than
    older_than (the branch's max-snapshot-age-ms, else older_than, else the table's
    history.expire.max-snapshot-age-ms, default 5 days); tags keep their snapshot; a snapshot
    on no branch or tag stays while newer than older_than. snapshot_ids expire in any case,
    unless a branch or tag points at one (an error)."""
    props = metadata.properties
    default_keep = retain_last if retain_last is not None else int(props.get("history.expire.min-snapshots-to-keep", 1))
    default_older = older_than_ms if older_than_ms is not None else now_ms - int(
        props.get("history.expire.max-snapshot-age-ms", 5 * DAY_MS))
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    keep, referenced = set(), set()
    for name, ref in metadata.refs.items():
        keep.add(ref.snapshot_id)
        referenced.add(ref.snapshot_id)
        if ref.snapshot_ref_type != SnapshotRefType.BRANCH:
            continue
        n = ref.min_snapshots_to_keep or default_keep
        older = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms else default_older
        kept = 0
        s = by_id.get(ref.snapshot_id)
        while s is not None:
            referenced.add(s.snapshot_id)
            if kept < n or s.timestamp_ms >= older:
                keep.add(s.snapshot_id)
                kept += 1
            else:
                break
            s = by_id.get(s.parent_snapshot_id) if s.parent_snapshot_id is not None else None
        while s is not None:  # the rest of the branch's history is referenced, and old
            referenced.add(s.snapshot_id)
            s = by_id.get(s.parent_snapshot_id) if s.parent_snapshot_id is not None else None
    keep |= {s.snapshot_id for s in metadata.snapshots if s.snapshot_id not in referenced and s.timestamp_ms >= default_older}
    for sid in snapshot_ids or ():
        if sid not in by_id:
            raise LakeError(f"lakerules: expire_snapshots: snapshot {sid} is not a snapshot of the table")
        heads = sorted(n for n, r in metadata.refs.items() if r.snapshot_id == sid)
        if heads:
            raise LakeError(f"lakerules: expire_snapshots: cannot expire snapshot {sid}: still referenced by {heads}")
        keep.discard(sid)
    return [s.snapshot_id for s in metadata.snapshots if s.snapshot_id not in keep]


def expire_snapshots(ctx, table, args: dict):
    spark = ctx.spark
    if args["retain_last"] is not None and args["retain_last"] < 1:
        raise LakeError(f"lakerules: expire_snapshots: retain_last must be at least 1, cannot be: {args['retain_last']}")
    before = table.metadata
    now_ms = int(time.time() * 1000)
    older_than_ms = args["older_than"] // 1000 if args["older_than"] is not None else None
    expired = snapshots_to_expire(before, now_ms, older_than_ms, args["retain_last"], args["snapshot_ids"])
    empty = J.result_rows(spark, [(0, 0, 0, 0, 0, 0)], RESULTS["expire_snapshots"])
    if not expired:
        return empty
    manifests = cleanup.Manifests(table.io)
    # before anything is committed: the table's location is its own. Files the metadata names
    # outside it (added from elsewhere with add_files, or another table's) are never deleted:
    # they are skipped, with a warning, and not counted
    confined = paths.Confinement.of(table, f"expire_snapshots on {_shown(table)}")
    borrowed = guard(table.catalog, table, confined)
    # every manifest list and manifest the clean-up reads, read before the commit: one missing or
    # damaged is an error with the table unchanged, not an expiry committed with its files left
    # (the entries read are kept for after the commit)
    cleanup.doomed(before, before, set(expired), manifests)
    table.maintenance.expire_snapshots().by_ids(expired).commit()
    table.refresh()
    after = table.metadata
    # what the snapshots still in the table need, read from the metadata as committed (which has
    # any snapshot committed meanwhile)
    gone_ids = set(expired) - {s.snapshot_id for s in after.snapshots}
    doomed = {p: kind for p, kind in cleanup.doomed(before, after, gone_ids, manifests).items() if normalize(p) not in borrowed}
    counts = dict.fromkeys(("data", "position-deletes", "equality-deletes", "manifest", "manifest-list", "statistics"), 0)
    by_kind: dict[str, list[str]] = {}
    for p, kind in doomed.items():
        by_kind.setdefault(kind, []).append(p)
    # data and delete files first, the metadata naming them last: an interrupted run leaves
    # unreferenced manifests (orphans), never manifests naming deleted files
    for kind in ("data", "position-deletes", "equality-deletes", "statistics", "manifest", "manifest-list"):
        counts[kind] = confined.delete(table.io, sorted(by_kind.get(kind, [])), args["max_concurrent_deletes"],
                                       strict=False)
    row = tuple(counts[k] for k in ("data", "position-deletes", "equality-deletes", "manifest", "manifest-list", "statistics"))
    return J.result_rows(spark, [row], RESULTS["expire_snapshots"])


# ---- rewrite_manifests ----------------------------------------------------------------------------


def rewrite_manifests(ctx, table, args: dict):
    """Iceberg's rewrite_manifests: the manifests of one partition spec (default the current one)
    rewritten into manifests clustered by partition, data and delete manifests apart, in one
    "replace" snapshot with the same files (lakerules.write.rewrites.rewrite_manifests)."""
    from lakerules.write import rewrites

    done = rewrites.rewrite_manifests(table, args["spec_id"], {"lakerules.operation": "rewrite_manifests"})
    return J.result_rows(ctx.spark, [(done.rewritten, done.added)], RESULTS["rewrite_manifests"])

