"""Commits through pyiceberg: one statement, one snapshot.

This module is the transaction every commit runs in (:func:`transaction`: the hook tests put
faults in, the target branch, and what a failed commit means for the statement's files), the
snapshot's properties and summary, and the plain commits: append, overwrite, a table replaced.
The other commits build on it: manifest merging (``manifest_merge``), row deltas with delete files
and their validation (``row_delta``), OPTIMIZE's rewrites and rewrite_manifests (``rewrite``),
ref moves and RESTORE (``history``).

pyiceberg retries a commit that lost a race (``commit.retry.*`` table properties); row deltas
validate it against what was committed meanwhile (lakerules.write.row_delta).
"""

from __future__ import annotations

from contextlib import contextmanager

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary, update_snapshot_summaries
from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate

from lakerules.iceberg import metadata_cache, names, refs
from lakerules.spark import current
from lakerules.spark import jvm as J
from lakerules.iceberg import pyiceberg_edge as edge
from lakerules.write.manifest_merge import Merging
from lakerules.errors import CatalogUnavailable, CommitOutcomeUnknown, CommitRejected, MaintenanceRace, UnreadableFile

LAKERULES_SUMMARY = {"engine-name": "lakerules"}
# Session settings spark.lakerules.snapshot-property.<key>=<value> add <key> to the summary of
# every snapshot the session's statements commit (as Iceberg's snapshot-property.<key> write
# option, for a whole session): who or what made a snapshot, a job id, a statement id.
SNAPSHOT_PROPERTY_PREFIX = "spark.lakerules.snapshot-property."


def use_session(spark) -> None:
    """The session whose statements the commits of this thread belong to (set per statement)."""
    current.use(spark)


def snapshot_properties(summary: dict | None = None) -> dict:
    """lakerules' summary properties, the session's snapshot-property settings, then summary's."""
    props = dict(LAKERULES_SUMMARY)
    spark = current.session()
    if spark is not None:
        for k, v in J.settings_with_prefix(spark, SNAPSHOT_PROPERTY_PREFIX).items():
            if len(k) > len(SNAPSHOT_PROPERTY_PREFIX):
                props[k[len(SNAPSHOT_PROPERTY_PREFIX):]] = v
    props.update(summary or {})
    return props


# Run with the table after a statement wrote its files and before it commits them (tests put
# faults here: an error, a concurrent commit, a process killed before its commit).
before_commit = None


@contextmanager
def transaction(table: Table):
    """A pyiceberg transaction whose commit failures say whether the commit may have landed.

    An error while the snapshot is staged (manifests written, validation) or a CommitFailedException
    / ValidationException from the commit (pyiceberg deletes what it wrote for them) means nothing
    landed: the statement deletes its files. Any other error from the catalog's commit leaves the
    outcome unknown, and becomes CommitOutcomeUnknown: the files must stay, or a commit that did
    land would name deleted files. A catalog whose database failed the commit reads it back
    (lakerules.iceberg.guarded): one known not to have landed is like a rejected one."""
    if before_commit is not None:
        before_commit(table)
    _create_target_branch(table)
    tx = edge.CachingTransaction(table)
    target = refs.target_of(table).branch
    if target != MAIN_BRANCH:
        # A snapshot for another branch (or staged) takes the next sequence number too: a commit to
        # main meanwhile would make the catalog refuse it outright (not a race pyiceberg retries),
        # so main's head is required as well, and such a commit is retried over like any other.
        main = table.metadata.refs.get(MAIN_BRANCH)
        edge.require(tx, _AssertMainHead(ref=MAIN_BRANCH, snapshot_id=main.snapshot_id if main else None))
    try:
        yield tx
    except UnreadableFile as e:  # a file of the snapshot the statement read, gone while it staged its commit
        if e.missing and _moved_on(table):
            raise _maintenance_race(table, tx) from e
        raise
    except ValidationException as e:
        if _STARTING_SNAPSHOT_GONE in str(e):
            raise _maintenance_race(table, tx) from e
        raise
    try:
        tx.commit_transaction()
    except ValidationException as e:
        if _STARTING_SNAPSHOT_GONE in str(e):
            raise _maintenance_race(table, tx) from e
        raise
    except ValueError as e:
        if "sequence number" not in str(e):
            raise CommitOutcomeUnknown(
                f"lakerules: the commit to {names.table_name(table)} failed with an error that does not say whether it "
                f"landed (ValueError: {e}). The statement's new files were kept: check the table's snapshots; "
                "if the commit did not land, CALL <catalog>.system.remove_orphan_files removes them."
            ) from e
        # the catalog refused the snapshot before writing anything: another commit took its sequence number
        edge.clean_all_uncommitted(tx)
        raise CommitRejected(
            f"lakerules: conflict on {names.table_name(table)}: other commits landed while this statement committed ({e}); "
            "nothing was committed and the statement's new files were deleted. Run it again."
        ) from e
    except CommitFailedException as e:
        # pyiceberg retried (commit.retry.num-retries) and the catalog still refused: other
        # commits kept landing, or the catalog refuses this table's commits
        raise CommitRejected(
            f"lakerules: conflict on {names.table_name(table)}: the catalog rejected the commit ({e}), as it does when "
            "other commits land while this statement commits, after the table's commit.retry.num-retries "
            "retries; nothing was committed and the statement's new files were deleted. Run it again."
        ) from e
    except CatalogUnavailable as e:
        if e.landed is False:  # read back: it did not land; its files go, as for a rejected commit
            edge.clean_all_uncommitted(tx)
            raise
        raise CommitOutcomeUnknown(
            f"{e} The statement's new files were kept: if the commit did not land, "
            "CALL <catalog>.system.remove_orphan_files removes them."
        ) from e
    except BaseException as e:
        raise CommitOutcomeUnknown(
            f"lakerules: the commit to {names.table_name(table)} failed with an error that does not say whether it "
            f"landed ({type(e).__name__}: {e}). The statement's new files were kept: check the table's "
            "snapshots; if the commit did not land, CALL <catalog>.system.remove_orphan_files removes them."
        ) from e
    # the next statement loads the metadata just written: keep it parsed
    metadata_cache.remember(table.metadata_location, table.metadata)


# pyiceberg's word for a commit whose starting snapshot another commit expired meanwhile
_STARTING_SNAPSHOT_GONE = "Cannot find starting snapshot"


def _moved_on(table: Table) -> bool:
    """Whether the catalog's table is no longer the metadata ``table`` holds (other commits landed)."""
    try:
        return table.catalog.load_table(table.name()).metadata_location != table.metadata_location
    except Exception:  # noqa: BLE001 - cannot tell: the error stays what it was
        return False


def _maintenance_race(table: Table, tx) -> MaintenanceRace:
    """The conflict a statement meets when maintenance removed what it read; the manifests its
    commit had written are deleted (it did not land)."""
    try:
        edge.clean_all_uncommitted(tx)
    except Exception:  # noqa: BLE001 - best effort: remove_orphan_files finds what is left
        pass
    return MaintenanceRace(
        f"lakerules: conflict on {names.table_name(table)}: while this statement ran, other commits landed and "
        "maintenance (expire_snapshots, or another engine's cleanup) removed files of the snapshot it had read; the "
        "table is healthy, nothing was committed and the statement's new files were deleted. Run it again."
    )


# lakerules.write.order.identifier_fields_command still calls it by its former name (that function
# is being rewritten by the statements-as-data change; then this alias goes).
_transaction = transaction


class _AssertMainHead(AssertRefSnapshotId):
    """main is still where the write read it (its own type: pyiceberg keeps one requirement per type)."""


def _create_target_branch(table: Table) -> None:
    """A write to a branch that does not exist yet (spark.wap.branch's first write) forks it
    where the statement read main (the table's current snapshot as planned), in a metadata-only
    commit of its own that requires the branch to be still missing, as Iceberg's first write to
    a new branch starts from main."""
    branch = refs.target_of(table).branch
    if branch is None or branch in table.metadata.refs or table.metadata.current_snapshot_id is None:
        return
    tx = Transaction(table)
    edge.stage(tx, (SetSnapshotRefUpdate(ref_name=branch, type=SnapshotRefType.BRANCH,
                                         snapshot_id=table.metadata.current_snapshot_id),),
               (AssertRefSnapshotId(ref=branch, snapshot_id=None),))
    try:
        tx.commit_transaction()
    except CommitFailedException:
        table.refresh()  # created meanwhile by another writer: write on top of it
        if branch not in table.metadata.refs:
            raise


def producer_args(table: Table, summary: dict | None) -> dict:
    """The branch a producer commits to and its snapshot properties: the write's target
    (lakerules.iceberg.refs: a branch, or staged with its wap.id), main when none."""
    target = refs.target_of(table)
    extra = {"wap.id": target.wap_id} if target.branch is None and target.wap_id else {}
    return {"branch": target.branch, "snapshot_properties": snapshot_properties({**(summary or {}), **extra})}


def snapshot_summary(metadata, operation: Operation, parent_snapshot_id, snapshot_properties, *,
                     added, removed) -> Summary:
    """The snapshot summary (counts and totals) of a commit adding and removing data and delete
    files. Each file is counted under its own partition spec: pyiceberg's producers count added
    files under the current spec, which fails for delete files against an older spec's files."""
    schema, specs = metadata.schema(), metadata.specs()
    limit = int(metadata.properties.get(TableProperties.WRITE_PARTITION_SUMMARY_LIMIT,
                                        TableProperties.WRITE_PARTITION_SUMMARY_LIMIT_DEFAULT))
    collector = SnapshotSummaryCollector(partition_summary_limit=limit)
    for f in added:
        collector.add_file(data_file=f, schema=schema, partition_spec=specs[f.spec_id])
    for f in removed:
        collector.remove_file(data_file=f, schema=schema, partition_spec=specs[f.spec_id])
    parent = metadata.snapshot_by_id(parent_snapshot_id) if parent_snapshot_id is not None else None
    return update_snapshot_summaries(
        Summary(operation=operation, **collector.build(), **snapshot_properties),
        previous_summary=parent.summary if parent is not None else None,
    )


def commit_may_have_landed(error: BaseException) -> bool:
    """Whether a statement that failed with error must keep the files it wrote."""
    return isinstance(error, CommitOutcomeUnknown)


class AppendFiles(Merging, edge.FastAppendFiles):
    """An append whose new snapshot's manifests are merged (lakerules.write.manifest_merge)."""

    v3_ready = True  # new data files; carried files keep their row ids (lakerules.iceberg.v3)


class OverwriteFiles(Merging, edge.OverwriteFiles):
    """An overwrite whose new snapshot's manifests are merged."""

    v3_ready = True  # whole data files removed and added; carried files keep their row ids


def append(table: Table, data_files: list, summary: dict | None = None, properties: dict | None = None) -> None:
    """Append new data files: the files' rows are added, nothing is removed; small manifests are
    merged (lakerules.write.manifest_merge). ``properties`` are set in the same commit."""
    if not data_files:
        return
    with transaction(table) as tx:
        if properties:
            tx.set_properties(properties)
        with AppendFiles(operation=Operation.APPEND, transaction=tx, io=table.io,
                         **producer_args(table, summary)) as fa:
            for f in data_files:
                fa.append_data_file(f)


def overwrite(table: Table, removed: list, added: list, summary: dict | None = None,
              properties: dict | None = None) -> None:
    """Remove data files and add others in one snapshot; ``properties`` are set in the same commit."""
    if not removed and not added:
        return
    with transaction(table) as tx:
        if properties:
            tx.set_properties(properties)
        args = producer_args(table, summary)
        operation = Operation.OVERWRITE if tx.table_metadata.snapshot_by_name(args["branch"]) is not None else Operation.APPEND
        with OverwriteFiles(operation=operation, transaction=tx, io=table.io, **args) as ow:
            for f in removed:
                ow.delete_data_file(f)
            for f in added:
                ow.append_data_file(f)


def replace_table(replacement, data_files: list, summary: dict | None = None) -> None:
    """A replace (lakerules.iceberg.replace) in one commit: the new schema, spec, order, properties and
    location, and main moved to a snapshot of just ``data_files`` (none: main removed, the
    table empty). Its requirements are the table as the replace was planned on."""
    table = replacement.base
    with transaction(table) as tx:
        edge.stage(tx, replacement.updates, replacement.requirements)
        if data_files:
            with AppendFiles(operation=Operation.APPEND, transaction=tx, io=table.io,
                             **producer_args(table, summary)) as fa:
                for f in data_files:
                    fa.append_data_file(f)
