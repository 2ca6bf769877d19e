"""Commits through pyiceberg: one statement, one snapshot.

pyiceberg retries a commit that lost a race (``commit.retry.*`` table properties); row deltas
validate it against what was committed meanwhile (see Validation).
"""

from __future__ import annotations

import contextvars
import math
import re
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import BooleanExpression
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, expression_evaluator, inclusive_projection
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestWriterV2
from pyiceberg.schema import Schema
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.update import AssertRefSnapshotId
from pyiceberg.table.snapshots import (
    IsolationLevel,
    Operation,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.update.snapshot import _FastAppendFiles, _OverwriteFiles, _SnapshotProducer
from pyiceberg.table.update.validate import _added_data_files, _validate_data_files_exist
from pyiceberg.typedef import EMPTY_DICT, KeyDefaultDict
from pyiceberg.utils.bin_packing import ListPacker

from lakerules.iceberg import metadata_cache, names, refs
from lakerules.scan.row_files import isolation_level
from lakerules.errors import CatalogUnavailable, CommitOutcomeUnknown, CommitRejected, ConflictError, LakeError

LAKERULES_SUMMARY = {"engine-name": "lakerules"}
# Session settings spark.lakerules.snapshot-property.<key>=<value> add <key> to the summary of
# every snapshot the session's statements commit (as Iceberg's snapshot-property.<key> write
# option, for a whole session): who or what made a snapshot, a job id, a statement id.
SNAPSHOT_PROPERTY_PREFIX = "spark.lakerules.snapshot-property."
_session = contextvars.ContextVar("lakerules_commit_session", default=None)


def use_session(spark) -> None:
    """The session whose statements the commits of this thread belong to (set per statement)."""
    _session.set(spark)


def snapshot_properties(summary: dict | None = None) -> dict:
    """lakerules' summary properties, the session's snapshot-property settings, then summary's."""
    props = dict(LAKERULES_SUMMARY)
    spark = _session.get()
    if spark is not None:
        for k, v in spark.conf.getAll.items():
            if k.startswith(SNAPSHOT_PROPERTY_PREFIX) and len(k) > len(SNAPSHOT_PROPERTY_PREFIX):
                props[k[len(SNAPSHOT_PROPERTY_PREFIX):]] = v
    props.update(summary or {})
    return props


# Run with the table after a statement wrote its files and before it commits them (tests put
# faults here: an error, a concurrent commit, a process killed before its commit).
before_commit = None


@contextmanager
def _transaction(table: Table):
    """A pyiceberg transaction whose commit failures say whether the commit may have landed.

    An error while the snapshot is staged (manifests written, validation) or a CommitFailedException
    / ValidationException from the commit (pyiceberg deletes what it wrote for them) means nothing
    landed: the statement deletes its files. Any other error from the catalog's commit leaves the
    outcome unknown, and becomes CommitOutcomeUnknown: the files must stay, or a commit that did
    land would name deleted files. A catalog whose database failed the commit reads it back
    (catalogs.guarded): one known not to have landed is like a rejected one."""
    if before_commit is not None:
        before_commit(table)
    _create_target_branch(table)
    tx = _Transaction(table)
    target = refs.target_of(table).branch
    if target != MAIN_BRANCH:
        # A snapshot for another branch (or staged) takes the next sequence number too: a commit to
        # main meanwhile would make the catalog refuse it outright (not a race pyiceberg retries),
        # so main's head is required as well, and such a commit is retried over like any other.
        main = table.metadata.refs.get(MAIN_BRANCH)
        tx._requirements += (_AssertMainHead(ref=MAIN_BRANCH, snapshot_id=main.snapshot_id if main else None),)
    yield tx
    try:
        tx.commit_transaction()
    except ValidationException:
        raise
    except ValueError as e:
        if "sequence number" not in str(e):
            raise CommitOutcomeUnknown(
                f"lakerules: the commit to {names.table_name(table)} failed with an error that does not say whether it "
                f"landed (ValueError: {e}). The statement's new files were kept: check the table's snapshots; "
                "if the commit did not land, CALL <catalog>.system.remove_orphan_files removes them."
            ) from e
        # the catalog refused the snapshot before writing anything: another commit took its sequence number
        for producer in tx._snapshot_producers:
            producer._clean_all_uncommitted()
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
            for producer in tx._snapshot_producers:
                producer._clean_all_uncommitted()
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


class _AssertMainHead(AssertRefSnapshotId):
    """main is still where the write read it (its own type: pyiceberg keeps one requirement per type)."""


def _create_target_branch(table: Table) -> None:
    """A write to a branch that does not exist yet (spark.wap.branch's first write) forks it
    where the statement read main (the table's current snapshot as planned), in a metadata-only
    commit of its own that requires the branch to be still missing, as Iceberg's first write to
    a new branch starts from main."""
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate

    branch = refs.target_of(table).branch
    if branch is None or branch in table.metadata.refs or table.metadata.current_snapshot_id is None:
        return
    tx = Transaction(table)
    tx._stage((SetSnapshotRefUpdate(ref_name=branch, type=SnapshotRefType.BRANCH,
                                     snapshot_id=table.metadata.current_snapshot_id),),
              (AssertRefSnapshotId(ref=branch, snapshot_id=None),))
    try:
        tx.commit_transaction()
    except CommitFailedException:
        table.refresh()  # created meanwhile by another writer: write on top of it
        if branch not in table.metadata.refs:
            raise


def _producer_args(table: Table, summary: dict | None) -> dict:
    """The branch a producer commits to and its snapshot properties: the write's target
    (lakerules.iceberg.refs: a branch, or staged with its wap.id), main when none."""
    target = refs.target_of(table)
    extra = {"wap.id": target.wap_id} if target.branch is None and target.wap_id else {}
    return {"branch": target.branch, "snapshot_properties": snapshot_properties({**(summary or {}), **extra})}


class _Transaction(Transaction):
    """pyiceberg's transaction, whose table_metadata is computed once per state. pyiceberg applies
    the staged updates and deep-copies the whole metadata (every snapshot of the table's history)
    on each access, and a snapshot producer reads it a dozen times per commit: a cost that grew
    with the table's history, not with what the commit changes (the catalog's commit still copies,
    parses and writes the whole metadata once: one metadata JSON per commit). The state is the table's metadata
    (replaced on a refresh) and the staged updates (a new tuple on each stage), held here, so the
    identity test is sound; callers treat the metadata as immutable, as pyiceberg's own code does."""

    _metadata_cache: tuple | None = None

    @property
    def table_metadata(self):
        base, updates = self._table.metadata, self._updates
        cached = self._metadata_cache
        if cached is None or cached[0] is not base or cached[1] is not updates:
            # nothing staged yet: the table's metadata itself, no copy
            cached = self._metadata_cache = (base, updates, super().table_metadata if updates else base)
        return cached[2]


def commit_may_have_landed(error: BaseException) -> bool:
    """Whether a statement that failed with error must keep the files it wrote."""
    return isinstance(error, CommitOutcomeUnknown)


def append(table: Table, data_files: list, summary: dict | None = None, properties: dict | None = None) -> None:
    """Append new data files: the files' rows are added, nothing is removed; small manifests are
    merged (see Manifest merging). ``properties`` are set in the same commit."""
    if not data_files:
        return
    with _transaction(table) as tx:
        if properties:
            tx.set_properties(properties)
        with _Append(operation=Operation.APPEND, transaction=tx, io=table.io,
                     **_producer_args(table, summary)) as fa:
            for f in data_files:
                fa.append_data_file(f)


def overwrite(table: Table, removed: list, added: list, summary: dict | None = None) -> None:
    """Remove data files and add others in one snapshot."""
    if not removed and not added:
        return
    with _transaction(table) as tx:
        args = _producer_args(table, summary)
        operation = Operation.OVERWRITE if tx.table_metadata.snapshot_by_name(args["branch"]) is not None else Operation.APPEND
        with _Overwrite(operation=operation, transaction=tx, io=table.io, **args) as ow:
            for f in removed:
                ow.delete_data_file(f)
            for f in added:
                ow.append_data_file(f)


def replace_table(replacement, data_files: list, summary: dict | None = None) -> None:
    """A replace (lakerules.iceberg.replace) in one commit: the new schema, spec, order, properties and
    location, and main moved to a snapshot of just ``data_files`` (none: main removed, the
    table empty). Its requirements are the table as the replace was planned on."""
    table = replacement.base
    with _transaction(table) as tx:
        tx._stage(replacement.updates, replacement.requirements)
        if data_files:
            with _Append(operation=Operation.APPEND, transaction=tx, io=table.io,
                         **_producer_args(table, summary)) as fa:
                for f in data_files:
                    fa.append_data_file(f)


# ---- manifest merging ----------------------------------------------------------------------------
#
# Every commit writes a manifest for the files it adds; carried over as they are, a table written
# by 1,000 small statements would have 1,000 manifests to read for every query and every commit.
# As Iceberg's MergingSnapshotProducer (append, overwrite, row delta, rewrite), each commit merges
# the manifests of its new snapshot, data and delete manifests apart (never one manifest of both),
# by Iceberg's ManifestMergeManager rules:
# - manifests that name no live file and were not written by this commit are dropped;
# - per partition spec (highest spec id first), the manifests in list order (this commit's new
#   manifest first) are bin-packed by length into bins of commit.manifest.target-size-bytes,
#   packing from the end (the oldest) with a lookback of 1, so order is kept and the bin left
#   under-filled is the newest;
# - a bin of several manifests is merged into one, except the bin holding the first manifest while
#   it has fewer than commit.manifest.min-count-to-merge manifests.
# A merged manifest keeps this commit's added and deleted entries as they are; every other live
# entry becomes EXISTING with its snapshot id and data and file sequence numbers, so the rows and
# which deletes apply to which files do not change; deleted entries of earlier commits are dropped.

MANIFEST_MERGE_ENABLED = "commit.manifest-merge.enabled"
MANIFEST_MIN_MERGE_COUNT = "commit.manifest.min-count-to-merge"
MANIFEST_TARGET_SIZE_BYTES = "commit.manifest.target-size-bytes"
MANIFEST_MERGE_ENABLED_DEFAULT = True  # Iceberg Java's default (pyiceberg's is false)
MANIFEST_MIN_MERGE_COUNT_DEFAULT = 10  # Iceberg Java: 100 (see docs/planning.md, Manifests: at most 9 small manifests)
MANIFEST_TARGET_SIZE_BYTES_DEFAULT = 8 * 1024 * 1024  # Iceberg Java's


@dataclass(frozen=True)
class MergePolicy:
    enabled: bool
    min_count: int
    target_size: int

    @classmethod
    def of(cls, properties: dict) -> "MergePolicy":
        def value(key, default, parse):
            text = properties.get(key)
            if text is None or str(text).strip() == "":
                return default
            try:
                return parse(str(text).strip())
            except ValueError:
                raise LakeError(f"lakerules: table property {key} is {text!r}, which is not a valid value") from None

        def boolean(text: str) -> bool:
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"

        target = value(MANIFEST_TARGET_SIZE_BYTES, MANIFEST_TARGET_SIZE_BYTES_DEFAULT, int)
        if target <= 0:
            raise LakeError(f"lakerules: table property {MANIFEST_TARGET_SIZE_BYTES} must be positive, not {target}")
        return cls(enabled=value(MANIFEST_MERGE_ENABLED, MANIFEST_MERGE_ENABLED_DEFAULT, boolean),
                   min_count=value(MANIFEST_MIN_MERGE_COUNT, MANIFEST_MIN_MERGE_COUNT_DEFAULT, int),
                   target_size=target)


def _manifest_writer(producer: _SnapshotProducer, content: ManifestContent, spec_id: int):
    spec = producer.spec(spec_id)
    if content == ManifestContent.DELETES:
        return _DeleteManifestWriter(spec=spec, schema=producer.schema(), output_file=producer.new_manifest_output(),
                                     snapshot_id=producer.snapshot_id, avro_compression=producer._compression)
    return producer.new_manifest_writer(spec)


def merge_manifests(producer: _SnapshotProducer, manifests: list) -> list:
    """The manifests of the producer's new snapshot (its own new manifests first), merged as the
    table's properties say (see above): data manifests, then delete manifests."""
    policy = MergePolicy.of(producer._transaction.table_metadata.properties)
    live = [m for m in manifests
            if m.added_snapshot_id == producer.snapshot_id or m.has_added_files() or m.has_existing_files()]
    out = []
    for content in (ManifestContent.DATA, ManifestContent.DELETES):
        group = [m for m in live if m.content == content]
        out += _merge_group(producer, policy, content, group) if policy.enabled else group
    return out


def _merge_group(producer, policy: MergePolicy, content: ManifestContent, manifests: list) -> list:
    if not manifests:
        return []
    first = manifests[0]
    by_spec = defaultdict(list)
    for m in manifests:
        by_spec[m.partition_spec_id].append(m)
    out = []
    for spec_id in sorted(by_spec, reverse=True):
        packer = ListPacker(target_weight=policy.target_size, lookback=1, largest_bin_first=False)
        for manifest_bin in packer.pack_end(by_spec[spec_id], lambda m: m.manifest_length):
            if len(manifest_bin) == 1 or (first in manifest_bin and len(manifest_bin) < policy.min_count):
                out += manifest_bin
            else:
                out += _merged(producer, content, spec_id, manifest_bin)
    return out


def _merged(producer, content: ManifestContent, spec_id: int, manifests: list) -> list:
    """One manifest with the entries of manifests ([] when none is left)."""
    own = producer.snapshot_id
    entries = []
    for manifest in manifests:
        for e in manifest.fetch_manifest_entry(producer._io, discard_deleted=False):
            if e.status == ManifestEntryStatus.DELETED:
                if e.snapshot_id == own:  # only this commit's removals; earlier ones are history
                    entries.append(("delete", e))
            elif e.status == ManifestEntryStatus.ADDED and e.snapshot_id == own:
                entries.append(("add", e))
            else:
                entries.append(("existing", e))
    if not entries:
        return []
    with _manifest_writer(producer, content, spec_id) as writer:
        for kind, e in entries:
            getattr(writer, kind)(e)
    return [writer.to_manifest_file()]


class _CleansUp:
    """A snapshot producer that deletes the manifests and manifest lists it wrote when staging its
    snapshot fails (a manifest of the table it cannot read, a failed validation): pyiceberg keeps
    them, as orphans, unless the catalog's commit failed."""

    def _commit(self):
        try:
            return super()._commit()
        except BaseException:
            self._clean_all_uncommitted()
            raise


class _Merging(_CleansUp):
    """A snapshot producer whose new snapshot lists merged manifests. The manifests it wrote that
    the committed snapshot does not list (its new manifest, merged into another) are deleted once
    the commit landed (pyiceberg calls _cleanup_uncommitted then)."""

    _listed: frozenset = frozenset()

    def _process_manifests(self, manifests: list) -> list:
        return self._merge(manifests)

    def _merge(self, manifests: list) -> list:
        out = merge_manifests(self, manifests)
        self._listed = frozenset(m.manifest_path for m in out)
        return out

    def _cleanup_uncommitted(self) -> None:
        super()._cleanup_uncommitted()
        for path in self._written_manifests:
            if path not in self._listed:
                try:
                    self._io.delete(path)
                except Exception:  # noqa: BLE001 - an unlisted file left behind is an orphan, no harm
                    pass


class _Append(_Merging, _FastAppendFiles):
    pass


class _Overwrite(_Merging, _OverwriteFiles):
    pass


# ---- row deltas: data files and delete files in one snapshot ------------------------------------
#
# pyiceberg has no public API to commit delete files. A row delta is an overwrite that also
# adds delete files (written into delete manifests, one per partition spec) and can remove
# delete files (their entries marked DELETED in delete manifests), counted in the summary.
#
# Validation: the transaction starts from the table metadata the statement planned its read on.
# If another commit landed meanwhile, pyiceberg refreshes, calls _validate_concurrency over the
# snapshots in between, and retries; a conflict raises ValidationException and nothing lands.


@dataclass(frozen=True)
class Validation:
    """What a row-level commit must check against commits that landed after its read.

    ``must_exist``: data files the new delete files point at or the commit removes (a delete
    pointing at a file removed meanwhile, e.g. by a concurrent OPTIMIZE, would be lost).
    ``no_new_deletes``: data files whose live rows the commit carries over into new files
    (copy-on-write, rewrites) or deletes rows of by position while writing their new values
    (merge-on-read UPDATE and MERGE): a delete committed against them meanwhile would be lost,
    or the row it deleted would come back with its new value.
    ``conflict_filter``: rows the statement read; under serializable isolation no data file
    that may hold such rows may have been added meanwhile (None: no check).
    ``statement``: the row-level statement validated, ``delete``, ``update`` or ``merge``: its
    isolation level is the table's ``write.<statement>.isolation-level`` (lakerules.scan.row_files.isolation_level).
    """

    must_exist: frozenset = frozenset()
    no_new_deletes: frozenset = frozenset()
    conflict_filter: BooleanExpression | None = None
    statement: str = "delete"


def _parent_manifests_without(producer, gone: set) -> tuple[list, list]:
    """The manifests of ``producer``'s parent snapshot less the live entries whose file path is in
    ``gone``: a manifest naming none of them is kept as it is, the others are written again with
    their other entries (as EXISTING, keeping snapshot ids and sequence numbers). Returns the
    manifests and the entries taken out."""
    manifests, deleted = [], []
    parent = producer._transaction.table_metadata.snapshot_by_id(producer._parent_snapshot_id)
    for manifest in parent.manifests(producer._io):
        entries = manifest.fetch_manifest_entry(producer._io, discard_deleted=True)
        if not any(e.data_file.file_path in gone for e in entries):
            manifests.append(manifest)
            continue
        kept = []
        for e in entries:
            (deleted if e.data_file.file_path in gone else kept).append(e)
        if kept:
            with _manifest_writer(producer, manifest.content, manifest.partition_spec_id) as writer:
                for e in kept:
                    writer.existing(e)
            manifests.append(writer.to_manifest_file())
    return manifests, deleted


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _RowDelta(_Merging, _OverwriteFiles):
    def __init__(self, *args, validation: Validation | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._added_delete_files: list = []
        self._removed_delete_files: set = set()
        self._validation = validation or Validation()

    def add_delete_file(self, delete_file) -> "_RowDelta":
        self._added_delete_files.append(delete_file)
        return self

    def remove_delete_file(self, delete_file) -> "_RowDelta":
        self._removed_delete_files.add(delete_file)
        return self

    def _parent_manifests(self) -> list:
        snapshot = self._transaction.table_metadata.snapshot_by_name(name=self._target_branch)
        return snapshot.manifests(io=self._io) if snapshot else []

    def _removed(self, manifest) -> set:
        return self._deleted_data_files if manifest.content == ManifestContent.DATA else self._removed_delete_files

    def _existing_manifests(self) -> list:
        out = []
        for manifest in self._parent_manifests():
            gone = self._removed(manifest)
            if not gone:
                out.append(manifest)
                continue
            entries = manifest.fetch_manifest_entry(io=self._io, discard_deleted=True)
            keep = [e for e in entries if e.data_file not in gone]
            if len(keep) == len(entries):
                out.append(manifest)
                continue
            if not keep:
                continue
            with _manifest_writer(self, manifest.content, manifest.partition_spec_id) as writer:
                for e in keep:
                    writer.add_entry(ManifestEntry.from_args(
                        status=ManifestEntryStatus.EXISTING,
                        snapshot_id=e.snapshot_id,
                        sequence_number=e.sequence_number,
                        file_sequence_number=e.file_sequence_number,
                        data_file=e.data_file,
                    ))
            out.append(writer.to_manifest_file())
        return out

    def _removed_entries(self, content: ManifestContent) -> list:
        out = []
        for manifest in self._parent_manifests():
            if manifest.content != content:
                continue
            gone = self._removed(manifest)
            if not gone:
                continue
            for e in manifest.fetch_manifest_entry(io=self._io, discard_deleted=True):
                if e.data_file in gone:
                    out.append(ManifestEntry.from_args(
                        status=ManifestEntryStatus.DELETED,
                        snapshot_id=self._snapshot_id,
                        sequence_number=e.sequence_number,
                        file_sequence_number=e.file_sequence_number,
                        data_file=e.data_file,
                    ))
        return out

    def _deleted_entries(self) -> list:
        entries = self._removed_entries(ManifestContent.DATA)
        missing = {f.file_path for f in self._deleted_data_files} - {e.data_file.file_path for e in entries}
        if missing:
            raise ValidationException(f"Data files to remove are not in the table: {sorted(missing)}")
        return entries

    def _process_manifests(self, manifests: list) -> list:
        """pyiceberg's data manifests (new, removed entries, carried over), then the new delete
        manifests (added and removed delete files), then the carried-over delete manifests."""
        by_spec = defaultdict(list)
        for f in self._added_delete_files:
            by_spec[f.spec_id].append(ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED,
                snapshot_id=self._snapshot_id,
                sequence_number=None,
                file_sequence_number=None,
                data_file=f,
            ))
        for e in self._removed_entries(ManifestContent.DELETES):
            by_spec[e.data_file.spec_id].append(e)
        new_deletes = []
        for spec_id, entries in sorted(by_spec.items()):
            with _manifest_writer(self, ManifestContent.DELETES, spec_id) as writer:
                for e in entries:
                    writer.add_entry(e)
            new_deletes.append(writer.to_manifest_file())
        data = [m for m in manifests if m.content == ManifestContent.DATA]
        carried_deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
        return self._merge(data + new_deletes + carried_deletes)

    def _summary(self, snapshot_properties=EMPTY_DICT):
        metadata = self._transaction.table_metadata
        return snapshot_summary(metadata, self._operation, self._parent_snapshot_id, snapshot_properties,
                                added=[*self._added_data_files, *self._added_delete_files],
                                removed=[*self._deleted_data_files, *self._removed_delete_files])

    def _validate_concurrency(self) -> None:
        window = self._commit_window
        if window is None or window.is_empty() or window.head is None:
            return
        table = self._transaction._table
        v = self._validation
        base, head = window.base, window.head
        if v.must_exist:
            _validate_data_files_exist(table, head, set(v.must_exist), base)
        if v.no_new_deletes:
            _validate_no_new_deletes(table, head, v.no_new_deletes, base)
        if v.conflict_filter is not None and isolation_level(table, v.statement) == IsolationLevel.SERIALIZABLE:
            _validate_no_matching_data_added(table, head, v.conflict_filter, base)


def validate_overwrite(table: Table, base_id: int | None, replaced: list, conflict_filter=None,
                       partitions: set | None = None) -> None:
    """An overwrite's validation (write options isolation-level, validate-from-snapshot-id) from
    snapshot base_id to ``table``'s current snapshot (a write's view: its branch head): the
    files it replaces must still be live with no new deletes against them; data added meanwhile
    matching ``conflict_filter`` or in ``partitions`` ((spec id, partition) pairs) conflicts.
    ConflictError, nothing committed."""
    head = table.current_snapshot()
    if head is None or head.snapshot_id == base_id:
        return
    base = table.metadata.snapshot_by_id(base_id) if base_id is not None else None
    try:
        if replaced:
            _validate_data_files_exist(table, head, set(replaced), base)
            _validate_no_new_deletes(table, head, replaced, base)
        if conflict_filter is not None:
            _validate_no_matching_data_added(table, head, conflict_filter, base)
        if partitions:
            hits = [e.data_file.file_path for e in _added_data_files(table, head, None, None, base)
                    if e.data_file.content == DataFileContent.DATA
                    and (e.data_file.spec_id, tuple(e.data_file.partition)) in partitions]
            if hits:
                raise ValidationException(f"data files were added meanwhile in partitions this write replaces: {sorted(hits)[:5]}")
    except ValidationException as e:
        raise ConflictError(
            f"lakerules: conflict on {names.table_name(table)}: {e}. A commit since snapshot {base_id} changed what this "
            "overwrite replaces; nothing was committed. Run it again."
        ) from e


def _validate_no_new_deletes(table: Table, head, data_files, base) -> None:
    """No delete file committed after base (position or equality) may apply to data_files:
    the commit deletes rows of those files by position, or carries their rows over into new
    files, as they were at base; a delete that landed meanwhile would be lost, or a row it
    deleted would come back (Iceberg's validateNoConflictingDeleteFiles)."""
    files = list(data_files)
    for snapshot in _snapshots_between(table, head, base):
        operation = snapshot.summary.operation.value if snapshot.summary else "?"
        for manifest in snapshot.manifests(table.io):
            if manifest.content != ManifestContent.DELETES or manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.status != ManifestEntryStatus.ADDED or entry.snapshot_id != snapshot.snapshot_id:
                    continue
                hit = next((f for f in files if _delete_may_apply(entry.data_file, f, table)), None)
                if hit is not None:
                    raise ValidationException(
                        f"snapshot {snapshot.snapshot_id} ({operation}) committed meanwhile deleted rows of data "
                        f"file {hit.file_path}, which this statement deletes from or rewrites"
                    )


def _snapshots_between(table: Table, head, base) -> list:
    """The snapshots after base up to head (head first)."""
    out, snapshot = [], head
    stop = base.snapshot_id if base is not None else None
    while snapshot is not None and snapshot.snapshot_id != stop:
        out.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = table.metadata.snapshot_by_id(parent) if parent is not None else None
    return out


def _delete_may_apply(delete_file, data_file, table: Table) -> bool:
    if delete_file.content == DataFileContent.POSITION_DELETES:
        return _position_delete_may_apply(delete_file, data_file)
    spec = table.specs()[delete_file.spec_id]
    if spec.is_unpartitioned():
        return True  # a global equality delete
    return delete_file.spec_id == data_file.spec_id and tuple(delete_file.partition or ()) == tuple(data_file.partition or ())


def _validate_no_matching_data_added(table: Table, head, row_filter: BooleanExpression, base) -> None:
    """Serializable isolation: no data file added after base may hold rows matching row_filter,
    judged by its partition and its column metrics (pyiceberg's own check looks at partitions
    only, so any append to a partition would conflict)."""
    schema = table.schema()
    metrics = _InclusiveMetricsEvaluator(schema, row_filter, True, False).eval

    def partition_test(spec_id: int):
        spec = table.specs()[spec_id]
        projected = inclusive_projection(schema, spec)(row_filter)
        return expression_evaluator(Schema(*spec.partition_type(schema).fields), projected, True)

    tests = KeyDefaultDict(partition_test)
    conflicts = [
        e.data_file.file_path
        for e in _added_data_files(table, head, None, None, base)
        if e.data_file.content == DataFileContent.DATA and tests[e.data_file.spec_id](e.data_file.partition)
        and metrics(e.data_file)
    ]
    if conflicts:
        raise ValidationException(
            f"data files that may hold rows this statement had to see were added meanwhile: {sorted(conflicts)[:5]}"
        )


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


def row_delta(table: Table, data_files: list, delete_files: list, summary: dict | None = None, *,
              removed_data_files=(), removed_delete_files=(), validation: Validation | None = None,
              operation: Operation | None = None) -> None:
    """One snapshot adding and removing data files and delete files (position or equality).

    ``table`` must be the metadata the statement read (see Validation); a commit that loses a
    race is validated against what landed meanwhile and retried, or fails with ConflictError.
    """
    if not (data_files or delete_files or removed_data_files or removed_delete_files):
        return
    if (delete_files or removed_delete_files) and table.format_version < 2:
        raise LakeError(f"lakerules: table {names.table_name(table)} is format version 1, which has no delete files")
    if operation is None:
        operation = Operation.OVERWRITE if data_files else Operation.DELETE
    try:
        with _transaction(table) as tx:
            producer = _RowDelta(
                operation=operation,
                transaction=tx,
                io=table.io,
                validation=validation,
                **_producer_args(table, summary),
            )
            with producer:
                for f in data_files:
                    producer.append_data_file(f)
                for f in removed_data_files:
                    producer.delete_data_file(f)
                for f in delete_files:
                    producer.add_delete_file(f)
                for f in removed_delete_files:
                    producer.remove_delete_file(f)
    except ValidationException as e:
        raise ConflictError(
            f"lakerules: conflict on {names.table_name(table)}: {e}. Another commit changed what this statement "
            "read; nothing was committed. Run the statement again."
        ) from e


# ---- rewrites: the same rows in other files (OPTIMIZE) ------------------------------------------
#
# A rewrite removes data files and adds files that hold the same rows with their deletes applied,
# in one snapshot of operation "replace", and removes the delete files that then apply to no live
# data file. The added files keep the data sequence number of the snapshot the rewrite read, as
# Iceberg's RewriteFiles does with use-starting-sequence-number: an equality delete committed at
# or before that snapshot has a sequence number <= it, so it does not apply to them (the spec
# applies equality deletes to strictly older data, and its rows are already gone), while one
# committed concurrently has a higher number and still applies to the rows it was meant for. A
# position delete names files by path: one committed concurrently against a removed file would be
# lost, so the commit fails instead, as it does when a removed file was concurrently removed.


class RewriteConflict(ValidationException):
    """A commit since the rewrite's starting snapshot conflicts with it; nothing was committed."""


def rewrite(table: Table, starting_snapshot_id: int, removed: list, added: list, removed_deletes: list,
            deletes_needed: set[str], summary: dict | None = None) -> list:
    """Replace the data files ``removed`` by ``added`` (the same rows, deletes applied), as read at
    ``starting_snapshot_id``. ``removed_deletes`` are delete files that applied to removed files;
    each is dropped unless still needed by a live data file: ``deletes_needed`` are the paths of
    those needed at the starting snapshot, and after concurrent commits it is computed again.
    Raises RewriteConflict when a concurrent commit removed a removed file or added position deletes
    that may apply to one; pyiceberg retries a commit that lost a race, validating again.
    Returns the delete files removed."""
    if not removed and not added:
        return []
    with _transaction(table) as tx:
        args = _producer_args(table, summary)
        producer = _RewriteFiles(
            tx, table.io, starting_snapshot_id, removed, added, removed_deletes, deletes_needed,
            args["snapshot_properties"], branch=args["branch"],
        )
        with producer:
            pass
    return list(producer._dropped_deletes.values())


def rewrite_deletes(table: Table, starting_snapshot_id: int, removed_deletes: list, added_deletes: list,
                    summary: dict | None = None) -> None:
    """Replace the position delete files ``removed_deletes`` by ``added_deletes`` (the entries of
    the removed ones that still apply, as read at ``starting_snapshot_id``), and nothing else: one
    "replace" snapshot, as Iceberg's RewriteFiles of delete files. Each removed file must still be
    live when the commit lands (a RewriteConflict otherwise: another commit rewrote or dropped it,
    and the new files would repeat its entries); the added files take the new snapshot's
    sequence number (they name only data files older than the files they replace)."""
    if not removed_deletes and not added_deletes:
        return
    with _transaction(table) as tx:
        args = _producer_args(table, summary)
        producer = _RewriteFiles(
            tx, table.io, starting_snapshot_id, [], [], removed_deletes, set(),
            args["snapshot_properties"], branch=args["branch"], added_deletes=added_deletes,
        )
        with producer:
            pass


class _RewriteFiles(_Merging, _SnapshotProducer):
    def __init__(self, transaction, io, starting_snapshot_id: int, removed, added, removed_deletes,
                 deletes_needed: set[str], snapshot_properties: dict, branch: str | None = MAIN_BRANCH,
                 added_deletes: list | None = None):
        super().__init__(operation=Operation.REPLACE, transaction=transaction, io=io,
                         snapshot_properties=snapshot_properties, branch=branch)
        metadata = transaction.table_metadata
        start = metadata.snapshot_by_id(starting_snapshot_id)
        if start is None:
            raise RewriteConflict(f"the snapshot the rewrite read ({starting_snapshot_id}) is no longer in the table")
        # the commit window pyiceberg validates retries against starts where the rewrite read
        self._starting_snapshot_id = starting_snapshot_id
        self._start_sequence_number = start.sequence_number if metadata.format_version >= 2 else None
        self._removed = {f.file_path: f for f in removed}
        self._added_data_files = list(added)
        self._candidate_deletes = {f.file_path: f for f in removed_deletes}
        self._deletes_needed_at_start = set(deletes_needed)
        self._dropped_deletes: dict[str, object] = {}
        # a rewrite of delete files (rewrite_deletes): these added, every candidate removed
        self._added_deletes = list(added_deletes) if added_deletes is not None else None

    def _validate_concurrency(self) -> None:
        """Validation runs in _commit, on the first attempt as on every retry."""

    def _commit(self):
        metadata = self._transaction.table_metadata
        head = metadata.snapshot_by_name(self._target_branch)
        concurrent = self._snapshots_since_start(metadata, head)
        for snapshot in concurrent:
            self._validate_snapshot(snapshot)
        self._dropped_deletes = self._deletes_to_drop(head, bool(concurrent))
        return super()._commit()

    def _snapshots_since_start(self, metadata, head) -> list:
        out, snapshot = [], head
        while snapshot is not None and snapshot.snapshot_id != self._starting_snapshot_id:
            out.append(snapshot)
            parent = snapshot.parent_snapshot_id
            snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
        if snapshot is None:
            raise RewriteConflict(
                f"the snapshot the rewrite read ({self._starting_snapshot_id}) is no longer an ancestor of the "
                "table's current snapshot (rolled back meanwhile)"
            )
        return out

    def _validate_snapshot(self, snapshot) -> None:
        """A concurrent snapshot conflicts when it removed a file being rewritten, or added position
        deletes that may apply to one (equality deletes still apply: see above)."""
        operation = snapshot.summary.operation.value if snapshot.summary else "?"
        for manifest in snapshot.manifests(self._io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(self._io, discard_deleted=False):
                if entry.snapshot_id != snapshot.snapshot_id:
                    continue
                f = entry.data_file
                if entry.status == ManifestEntryStatus.DELETED and f.file_path in self._removed:
                    raise RewriteConflict(
                        f"snapshot {snapshot.snapshot_id} ({operation}) committed meanwhile removed data file "
                        f"{f.file_path}, which this rewrite replaces"
                    )
                if entry.status == ManifestEntryStatus.ADDED and f.content == DataFileContent.POSITION_DELETES:
                    hit = next((d for d in self._removed.values() if _position_delete_may_apply(f, d)), None)
                    if hit is not None:
                        raise RewriteConflict(
                            f"snapshot {snapshot.snapshot_id} ({operation}) committed meanwhile deleted rows of data file "
                            f"{hit.file_path} by position, which this rewrite replaces"
                        )

    def _deletes_to_drop(self, head, moved: bool) -> dict:
        if not self._candidate_deletes:
            return {}
        if self._added_deletes is not None:
            return dict(self._candidate_deletes)
        if moved:
            from lakerules.scan.planning import plan_scan

            plan = plan_scan(self._transaction._table, head.snapshot_id)
            needed = {
                d.file_path
                for p in plan.files
                if p.file.file_path not in self._removed
                for d in (*p.position_deletes, *p.equality_deletes)
            }
        else:
            needed = self._deletes_needed_at_start
        return {path: f for path, f in self._candidate_deletes.items() if path not in needed}

    def _manifests(self):
        metadata = self._transaction.table_metadata
        gone = set(self._removed) | set(self._dropped_deletes)
        manifests, deleted = _parent_manifests_without(self, gone)
        missing = set(self._removed) - {e.data_file.file_path for e in deleted}
        if missing:
            raise RewriteConflict(f"data files this rewrite replaces are no longer in the table: {sorted(missing)}")
        # The deletes really dropped are those still live; another commit may have dropped some.
        live = {e.data_file.file_path for e in deleted}
        if self._added_deletes is not None and set(self._dropped_deletes) - live:
            raise RewriteConflict(
                "delete files this rewrite replaces are no longer in the table (another commit rewrote or "
                f"dropped them): {sorted(set(self._dropped_deletes) - live)[:5]}"
            )
        self._dropped_deletes = {p: f for p, f in self._dropped_deletes.items() if p in live}
        new = []
        by_spec = defaultdict(list)
        for f in self._added_deletes or ():
            by_spec[f.spec_id].append(f)
        for spec_id, files in sorted(by_spec.items()):
            with _manifest_writer(self, ManifestContent.DELETES, spec_id) as writer:
                for f in files:
                    writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                                                             sequence_number=None, file_sequence_number=None, data_file=f))
            new.append(writer.to_manifest_file())
        if self._added_data_files:
            with self.new_manifest_writer(metadata.spec()) as writer:
                for f in self._added_data_files:
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=self._start_sequence_number,
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            new.append(writer.to_manifest_file())
        groups = defaultdict(list)
        for e in deleted:
            content = ManifestContent.DATA if e.data_file.content == DataFileContent.DATA else ManifestContent.DELETES
            groups[(content.value, e.data_file.spec_id)].append(e)
        for (content, spec_id), entries in sorted(groups.items()):
            with _manifest_writer(self, ManifestContent(content), spec_id) as writer:
                for e in entries:
                    writer.delete(e)
            new.append(writer.to_manifest_file())
        return self._merge(new + manifests)  # this commit's manifests first, as Iceberg's

    def _deleted_entries(self):
        return []  # written by _manifests

    def _existing_manifests(self):
        return []  # written by _manifests

    def _summary(self, snapshot_properties=EMPTY_DICT) -> Summary:
        # pyiceberg keeps totals for append/overwrite/delete only: count as an overwrite, then say replace
        totals = snapshot_summary(self._transaction.table_metadata, Operation.OVERWRITE, self._parent_snapshot_id,
                                  snapshot_properties, added=[*self._added_data_files, *(self._added_deletes or ())],
                                  removed=[*self._removed.values(), *self._dropped_deletes.values()])
        properties = {k: v for k, v in totals.model_dump().items() if k != "operation"}
        return Summary(operation=Operation.REPLACE, **properties)


# ---- rewrite_manifests: the same entries in manifests clustered by partition ---------------------


@dataclass(frozen=True)
class ManifestRewrite:
    rewritten: int  # manifests replaced
    added: int  # manifests written


def rewrite_manifests(table: Table, spec_id: int | None = None, summary: dict | None = None) -> ManifestRewrite:
    """Rewrite the current snapshot's manifests of partition spec ``spec_id`` (default: the
    table's current spec), data and delete manifests apart, into manifests of the live entries
    sorted by partition and cut into commit.manifest.target-size-bytes pieces; one snapshot of
    operation "replace" with the same files. Nothing is committed when there is nothing to do (no
    manifest of the spec, or one that would be rewritten into one). A retry after a concurrent
    commit rewrites the manifests of the new current snapshot."""
    if spec_id is None:
        spec_id = table.metadata.default_spec_id
    if spec_id not in table.specs():
        raise LakeError(f"lakerules: rewrite_manifests: table {names.table_name(table)} has no partition spec {spec_id}; "
                        f"its specs are {sorted(table.specs())}")
    if table.current_snapshot() is None:
        return ManifestRewrite(0, 0)
    with _transaction(table) as tx:
        producer = _RewriteManifests(tx, table.io, spec_id, snapshot_properties(summary))
        with producer:
            pass
    return ManifestRewrite(producer._rewritten, producer._added)


def _partition_key(entry) -> tuple:
    """Partition values in order, nulls first (as Iceberg's comparators), then the path."""
    return (tuple((v is not None, v) for v in (entry.data_file.partition or ())), entry.data_file.file_path)


class _RewriteManifests(_SnapshotProducer):
    def __init__(self, transaction, io, spec_id: int, snapshot_properties: dict):
        super().__init__(operation=Operation.REPLACE, transaction=transaction, io=io,
                         snapshot_properties=snapshot_properties)
        self._spec_id = spec_id
        self._rewritten = 0
        self._added = 0
        self._entries = 0

    def _validate_concurrency(self) -> None:
        """The same files before and after: nothing another commit did conflicts with it."""

    def _commit(self):
        try:
            manifests = self._rewrite()
            if manifests is None:
                return (), ()
            self._new_manifests = manifests
            return super()._commit()
        except BaseException:
            self._clean_all_uncommitted()  # as _CleansUp: the manifests _rewrite wrote
            raise

    def _manifests(self):
        return self._new_manifests

    def _rewrite(self) -> list | None:
        """The new snapshot's manifests, or None when nothing is to be rewritten."""
        policy = MergePolicy.of(self._transaction.table_metadata.properties)
        parent = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
        current = parent.manifests(self._io) if parent is not None else []
        new, kept, self._rewritten, self._added, self._entries = [], [], 0, 0, 0
        self._kept = 0
        for content in (ManifestContent.DATA, ManifestContent.DELETES):
            chosen = [m for m in current if m.content == content and m.partition_spec_id == self._spec_id]
            kept += [m for m in current if m.content == content and m.partition_spec_id != self._spec_id]
            pieces = max(1, math.ceil(sum(m.manifest_length for m in chosen) / policy.target_size))
            if not chosen or (len(chosen) == 1 and pieces == 1):
                kept += chosen
                continue
            entries = sorted((e for m in chosen for e in m.fetch_manifest_entry(self._io, discard_deleted=True)),
                             key=_partition_key)
            self._rewritten += len(chosen)
            self._entries += len(entries)
            size = math.ceil(len(entries) / pieces) if entries else 0
            for start in range(0, len(entries), size or 1):
                with _manifest_writer(self, content, self._spec_id) as writer:
                    for e in entries[start:start + size]:
                        writer.existing(e)
                new.append(writer.to_manifest_file())
                self._added += 1
        if not self._rewritten:
            return None
        self._kept = len(kept)
        return new + kept

    def _deleted_entries(self):
        return []

    def _existing_manifests(self):
        return []

    def _summary(self, snapshot_properties=EMPTY_DICT) -> Summary:
        # the totals of the parent, unchanged (counted as an overwrite of nothing), then say replace
        totals = snapshot_summary(self._transaction.table_metadata, Operation.OVERWRITE, self._parent_snapshot_id,
                                  snapshot_properties, added=[], removed=[])
        properties = {k: v for k, v in totals.model_dump().items() if k != "operation"}
        properties.update({"manifests-created": str(self._added), "manifests-kept": str(self._kept),
                           "manifests-replaced": str(self._rewritten), "entries-processed": str(self._entries)})
        return Summary(operation=Operation.REPLACE, **properties)


_PATH_FIELD_ID = 2147483546


def _position_delete_may_apply(delete_file, data_file) -> bool:
    """As scan planning decides: same spec and partition, and the data file's path within the
    delete file's file_path bounds (compared in the written form and in local-path normal form)."""
    if delete_file.spec_id != data_file.spec_id or tuple(delete_file.partition or ()) != tuple(data_file.partition or ()):
        return False
    lower = (delete_file.lower_bounds or {}).get(_PATH_FIELD_ID)
    upper = (delete_file.upper_bounds or {}).get(_PATH_FIELD_ID)
    if lower is None or upper is None:
        return True
    def normal(p: str) -> str:
        return re.sub(r"^file:/*", "/", p)

    lo, hi, path = lower.decode("utf-8", "replace"), upper.decode("utf-8", "replace"), data_file.file_path
    return lo <= path <= hi or normal(lo) <= normal(path) <= normal(hi)


# ---- history: moving a branch, restoring a snapshot's files ------------------------------------


def move_branch(table: Table, branch: str, snapshot_id: int) -> None:
    """Point branch at snapshot_id (rollback, set_current_snapshot, a cherry-pick's fast-forward,
    fast_forward) in a metadata-only commit. The branch keeps its retention settings (pyiceberg's
    manage_snapshots drops them: it writes the ref anew), and the commit requires the branch to
    still point where it did when read: a commit that moved it meanwhile makes this one fail
    (CommitRejected), with nothing changed. Not retried: the caller decided on what it read."""
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate

    with _transaction(table) as tx:
        ref = tx.table_metadata.refs.get(branch)
        update = SetSnapshotRefUpdate(
            ref_name=branch, type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id,
            max_ref_age_ms=ref.max_ref_age_ms if ref else None,
            max_snapshot_age_ms=ref.max_snapshot_age_ms if ref else None,
            min_snapshots_to_keep=ref.min_snapshots_to_keep if ref else None,
        )
        tx._stage((update,), (AssertRefSnapshotId(ref=branch, snapshot_id=ref.snapshot_id if ref else None),))


def set_ref(table: Table, name: str, kind, snapshot_id: int, *, expected: int | None, max_ref_age_ms=None,
            max_snapshot_age_ms=None, min_snapshots_to_keep=None) -> None:
    """Create or move branch or tag ``name`` to snapshot_id with these retention settings, in a
    metadata-only commit that requires the ref to still be at ``expected`` (None: missing)."""
    from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate

    with _transaction(table) as tx:
        update = SetSnapshotRefUpdate(
            ref_name=name, type=kind, snapshot_id=snapshot_id, max_ref_age_ms=max_ref_age_ms,
            max_snapshot_age_ms=max_snapshot_age_ms, min_snapshots_to_keep=min_snapshots_to_keep,
        )
        tx._stage((update,), (AssertRefSnapshotId(ref=name, snapshot_id=expected),))


def remove_ref(table: Table, name: str, expected: int) -> None:
    """Drop branch or tag ``name``, requiring it to still be at ``expected``."""
    from pyiceberg.table.update import AssertRefSnapshotId, RemoveSnapshotRefUpdate

    with _transaction(table) as tx:
        tx._stage((RemoveSnapshotRefUpdate(ref_name=name),), (AssertRefSnapshotId(ref=name, snapshot_id=expected),))


class RestoreConflict(ValidationException):
    """The table's current snapshot moved while RESTORE read it; nothing was committed."""


def restore(table: Table, from_snapshot_id: int, removed: list, readded: list, summary: dict | None = None) -> None:
    """One overwrite snapshot on top of from_snapshot_id (main's head, as read): the live entries
    ``removed`` (of the head) are marked deleted, the entries ``readded`` (of the snapshot
    restored) are added again with their own data sequence numbers, so that every delete file
    applies to exactly the data files it applied to in the restored snapshot (Iceberg's
    RewriteFiles keeps data sequence numbers the same way). Fails with RestoreConflict if main
    moved meanwhile."""
    with _transaction(table) as tx:
        with _Restore(tx, table.io, from_snapshot_id, removed, readded, snapshot_properties(summary)):
            pass


class _Restore(_Merging, _SnapshotProducer):
    def __init__(self, transaction, io, from_snapshot_id: int, removed: list, readded: list, snapshot_properties: dict):
        super().__init__(operation=Operation.OVERWRITE, transaction=transaction, io=io,
                         snapshot_properties=snapshot_properties)
        self._from = from_snapshot_id
        self._removed = {e.data_file.file_path: e for e in removed}
        self._readded = list(readded)

    def _validate_concurrency(self) -> None:
        """_commit checks that main is still where the restore read it, on every attempt."""

    def _commit(self):
        head = self._transaction.table_metadata.snapshot_by_name(MAIN_BRANCH)
        if head is None or head.snapshot_id != self._from:
            raise RestoreConflict(
                f"lakerules: conflict on {names.table_name(self._transaction._table)}: RESTORE read snapshot {self._from}, but "
                f"the table's current snapshot is now {head.snapshot_id if head else None} (a commit landed "
                "meanwhile); nothing was committed. Run it again."
            )
        return super()._commit()

    def _manifests(self):
        metadata = self._transaction.table_metadata
        manifests, deleted = _parent_manifests_without(self, set(self._removed))
        new = []
        groups = defaultdict(list)
        for kind, entries in (("add", self._readded), ("delete", deleted)):
            for e in entries:
                content = ManifestContent.DATA if e.data_file.content == DataFileContent.DATA else ManifestContent.DELETES
                groups[(content.value, e.data_file.spec_id)].append((kind, e))
        v2 = metadata.format_version >= 2
        for (content, spec_id), entries in sorted(groups.items()):
            with _manifest_writer(self, ManifestContent(content), spec_id) as writer:
                for kind, e in entries:
                    if kind == "delete":
                        writer.delete(e)
                    else:
                        writer.add_entry(ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                            sequence_number=e.sequence_number if v2 else None, file_sequence_number=None,
                            data_file=e.data_file))
            new.append(writer.to_manifest_file())
        return self._merge(new + manifests)

    def _deleted_entries(self):
        return []  # written by _manifests

    def _existing_manifests(self):
        return []  # written by _manifests

    def _summary(self, snapshot_properties=EMPTY_DICT) -> Summary:
        return snapshot_summary(self._transaction.table_metadata, Operation.OVERWRITE, self._parent_snapshot_id,
                                snapshot_properties, added=[e.data_file for e in self._readded],
                                removed=[e.data_file for e in self._removed.values()])
