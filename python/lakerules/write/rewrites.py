"""Rewrites: the same rows in other files (OPTIMIZE, rewrite_data_files, rewrite_position_delete_files)
and the same entries in other manifests (rewrite_manifests), each one "replace" snapshot.

A rewrite removes data files and adds files that hold the same rows with their deletes applied,
in one snapshot of operation "replace", and removes the delete files that then apply to no live
data file. The added files keep the data sequence number of the snapshot the rewrite read, as
Iceberg's RewriteFiles does with use-starting-sequence-number: an equality delete committed at
or before that snapshot has a sequence number <= it, so it does not apply to them (the spec
applies equality deletes to strictly older data, and its rows are already gone), while one
committed concurrently has a higher number and still applies to the rows it was meant for. A
position delete names files by path: one committed concurrently against a removed file would be
lost, so the commit fails instead, as it does when a removed file was concurrently removed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from pyiceberg.exceptions import ValidationException
from pyiceberg.manifest import DataFileContent, FileFormat, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.typedef import EMPTY_DICT

from lakerules.iceberg import names, v3
from lakerules.iceberg import pyiceberg_edge as edge
from lakerules.write.commit import producer_args, snapshot_properties, snapshot_summary, transaction
from lakerules.write.manifest_merge import MergePolicy, Merging, manifest_writer, parent_manifests_without
from lakerules.write.row_delta import position_delete_may_apply
from lakerules.errors import LakeError


class RewriteConflict(ValidationException):
    """A commit since the rewrite's starting snapshot conflicts with it; nothing was committed."""


def rewrite_files(table: Table, starting_snapshot_id: int, removed: list, added: list, removed_deletes: list,
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
    with transaction(table) as tx:
        args = producer_args(table, summary)
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
    with transaction(table) as tx:
        args = producer_args(table, summary)
        producer = _RewriteFiles(
            tx, table.io, starting_snapshot_id, [], [], removed_deletes, set(),
            args["snapshot_properties"], branch=args["branch"], added_deletes=added_deletes,
        )
        with producer:
            pass


class _RewriteFiles(Merging, edge.SnapshotProducer):
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
        self.validate_from(starting_snapshot_id)
        self._start_id = starting_snapshot_id
        self._start_sequence_number = start.sequence_number if metadata.format_version >= 2 else None
        self._removed = {f.file_path: f for f in removed}
        for f in added:
            self.append_data_file(f)
        self._candidate_deletes = {f.file_path: f for f in removed_deletes}
        self._deletes_needed_at_start = set(deletes_needed)
        self._dropped_deletes: dict[str, object] = {}
        # a rewrite of delete files (rewrite_deletes): these added, every candidate removed
        self._added_deletes = list(added_deletes) if added_deletes is not None else None
        # the data files it adds deletion vectors for: another DV for one of them must not land meanwhile
        self._dv_targets = {v3.dv_target(f) for f in self._added_deletes or ()} - {None}

    @property
    def v3_ready(self) -> bool:
        """On a format-version 3 table: data files replaced by files that carry their rows'
        lineage (OPTIMIZE, rewrite_data_files), and delete files replaced by deletion vectors."""
        return all(f.file_format == FileFormat.PUFFIN for f in self._added_deletes or ())

    def validate_concurrency(self) -> None:
        """Validation runs in produce, on the first attempt as on every retry."""

    def produce(self):
        metadata = self.metadata
        head = metadata.snapshot_by_name(self.target_branch)
        concurrent = self._snapshots_since_start(metadata, head)
        for snapshot in concurrent:
            self._validate_snapshot(snapshot)
        self._dropped_deletes = self._deletes_to_drop(head, bool(concurrent))
        return super().produce()

    def _snapshots_since_start(self, metadata, head) -> list:
        out, snapshot = [], head
        while snapshot is not None and snapshot.snapshot_id != self._start_id:
            out.append(snapshot)
            parent = snapshot.parent_snapshot_id
            snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
        if snapshot is None:
            raise RewriteConflict(
                f"the snapshot the rewrite read ({self._start_id}) is no longer an ancestor of the "
                "table's current snapshot (rolled back meanwhile)"
            )
        return out

    def _validate_snapshot(self, snapshot) -> None:
        """A concurrent snapshot conflicts when it removed a file being rewritten, or added position
        deletes that may apply to one (equality deletes still apply: see above)."""
        operation = snapshot.summary.operation.value if snapshot.summary else "?"
        for manifest in snapshot.manifests(self.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            # v3's layout on a v3 table: a deletion vector names its data file
            for entry in v3.entries(self.io, manifest, self.metadata.format_version, discard_deleted=False):
                if entry.snapshot_id != snapshot.snapshot_id:
                    continue
                f = entry.data_file
                if entry.status == ManifestEntryStatus.DELETED and f.file_path in self._removed:
                    raise RewriteConflict(
                        f"snapshot {snapshot.snapshot_id} ({operation}) committed meanwhile removed data file "
                        f"{f.file_path}, which this rewrite replaces"
                    )
                if entry.status == ManifestEntryStatus.ADDED and v3.dv_target(f) in self._dv_targets:
                    raise RewriteConflict(
                        f"snapshot {snapshot.snapshot_id} ({operation}) committed meanwhile a deletion vector for data "
                        f"file {v3.dv_target(f)}, for which this rewrite writes one"
                    )
                if entry.status == ManifestEntryStatus.ADDED and f.content == DataFileContent.POSITION_DELETES:
                    hit = next((d for d in self._removed.values() if position_delete_may_apply(f, d)), None)
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

            plan = plan_scan(self.table, head.snapshot_id)
            needed = {
                d.file_path
                for p in plan.files
                if p.file.file_path not in self._removed
                for d in (*p.position_deletes, *p.equality_deletes)
            }
        else:
            needed = self._deletes_needed_at_start
        return {path: f for path, f in self._candidate_deletes.items() if path not in needed}

    def manifests(self):
        metadata = self.metadata
        gone = set(self._removed) | set(self._dropped_deletes)
        manifests, deleted = parent_manifests_without(self, gone)
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
        self._gone = deleted  # the entries this commit removes, as its summary counts them
        new = []
        by_spec = defaultdict(list)
        for f in self._added_deletes or ():
            by_spec[f.spec_id].append(f)
        for spec_id, files in sorted(by_spec.items()):
            with manifest_writer(self, ManifestContent.DELETES, spec_id) as writer:
                for f in files:
                    writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=self.snapshot_id,
                                                             sequence_number=None, file_sequence_number=None, data_file=f))
            new.append(writer.to_manifest_file())
        if self.added_data_files:
            with self.new_manifest_writer(metadata.spec()) as writer:
                for f in self.added_data_files:
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self.snapshot_id,
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
            with manifest_writer(self, ManifestContent(content), spec_id) as writer:
                for e in entries:
                    writer.delete(e)
            new.append(writer.to_manifest_file())
        return self.merge(new + manifests)  # this commit's manifests first, as Iceberg's

    def deleted_entries(self):
        return []  # written by manifests

    def existing_manifests(self):
        return []  # written by manifests

    def summary(self, snapshot_properties=EMPTY_DICT) -> Summary:
        # pyiceberg keeps totals for append/overwrite/delete only: count as an overwrite, then say replace
        # the entries removed (a Puffin file's DVs share its path: each counts)
        gone = getattr(self, "_gone", None)
        removed = [e.data_file for e in gone] if gone is not None else [*self._removed.values(),
                                                                         *self._dropped_deletes.values()]
        totals = snapshot_summary(self.metadata, Operation.OVERWRITE, self.parent_snapshot_id,
                                  snapshot_properties, added=[*self.added_data_files, *(self._added_deletes or ())],
                                  removed=removed)
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
    with transaction(table) as tx:
        producer = _RewriteManifests(tx, table.io, spec_id, snapshot_properties(summary))
        with producer:
            pass
    return ManifestRewrite(producer._rewritten, producer._added)


def _partition_key(entry) -> tuple:
    """Partition values in order, nulls first (as Iceberg's comparators), then the path."""
    return (tuple((v is not None, v) for v in (entry.data_file.partition or ())), entry.data_file.file_path)


class _RewriteManifests(edge.SnapshotProducer):
    # v3: entries read and written in v3's layout, each data file with its first_row_id written out
    # (the manifest list gives the new manifests fresh first_row_ids, which their files' own override)
    v3_ready = True

    def __init__(self, transaction, io, spec_id: int, snapshot_properties: dict):
        super().__init__(operation=Operation.REPLACE, transaction=transaction, io=io,
                         snapshot_properties=snapshot_properties)
        self._spec_id = spec_id
        self._rewritten = 0
        self._added = 0
        self._entries = 0

    def validate_concurrency(self) -> None:
        """The same files before and after: nothing another commit did conflicts with it."""

    def produce(self):
        try:
            manifests = self._rewrite()
            if manifests is None:
                return (), ()
            self._new_manifests = manifests
            return super().produce()
        except BaseException:
            self.clean_all_uncommitted()  # as CleansUp: the manifests _rewrite wrote
            raise

    def manifests(self):
        return self._new_manifests

    def _rewrite(self) -> list | None:
        """The new snapshot's manifests, or None when nothing is to be rewritten."""
        policy = MergePolicy.of(self.metadata.properties)
        parent = self.metadata.snapshot_by_id(self.parent_snapshot_id)
        current = parent.manifests(self.io) if parent is not None else []
        new, kept, self._rewritten, self._added, self._entries = [], [], 0, 0, 0
        self._kept = 0
        for content in (ManifestContent.DATA, ManifestContent.DELETES):
            chosen = [m for m in current if m.content == content and m.partition_spec_id == self._spec_id]
            kept += [m for m in current if m.content == content and m.partition_spec_id != self._spec_id]
            pieces = max(1, math.ceil(sum(m.manifest_length for m in chosen) / policy.target_size))
            if not chosen or (len(chosen) == 1 and pieces == 1):
                kept += chosen
                continue
            entries = sorted((e for m in chosen for e in v3.entries(self.io, m, self.metadata.format_version)),
                             key=_partition_key)
            self._rewritten += len(chosen)
            self._entries += len(entries)
            size = math.ceil(len(entries) / pieces) if entries else 0
            for start in range(0, len(entries), size or 1):
                with manifest_writer(self, content, self._spec_id) as writer:
                    for e in entries[start:start + size]:
                        writer.existing(e)
                new.append(writer.to_manifest_file())
                self._added += 1
        if not self._rewritten:
            return None
        self._kept = len(kept)
        return new + kept

    def deleted_entries(self):
        return []

    def existing_manifests(self):
        return []

    def summary(self, snapshot_properties=EMPTY_DICT) -> Summary:
        # the totals of the parent, unchanged (counted as an overwrite of nothing), then say replace
        totals = snapshot_summary(self.metadata, Operation.OVERWRITE, self.parent_snapshot_id,
                                  snapshot_properties, added=[], removed=[])
        properties = {k: v for k, v in totals.model_dump().items() if k != "operation"}
        properties.update({"manifests-created": str(self._added), "manifests-kept": str(self._kept),
                           "manifests-replaced": str(self._rewritten), "entries-processed": str(self._entries)})
        return Summary(operation=Operation.REPLACE, **properties)

