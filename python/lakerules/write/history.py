"""Commits that change a table's history: a branch moved (rollback, set_current_snapshot, a
cherry-pick's fast-forward, fast_forward), a branch or tag created, moved or dropped, and RESTORE's
snapshot of a former snapshot's files (lakerules.procedures.history runs them).
"""

from __future__ import annotations

from collections import defaultdict

from pyiceberg.exceptions import ValidationException
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update import AssertRefSnapshotId, RemoveSnapshotRefUpdate, SetCurrentSchemaUpdate, SetSnapshotRefUpdate
from pyiceberg.typedef import EMPTY_DICT

from lakerules.iceberg import names, v3
from lakerules.iceberg import schema as schemas
from lakerules.iceberg import pyiceberg_edge as edge
from lakerules.write.commit import snapshot_properties, snapshot_summary, transaction
from lakerules.write.manifest_merge import Merging, entry_key, manifest_writer, parent_manifests_without


def move_branch(table: Table, branch: str, snapshot_id: int) -> None:
    """Point branch at snapshot_id (rollback, set_current_snapshot, a cherry-pick's fast-forward,
    fast_forward) in a metadata-only commit. The branch keeps its retention settings (pyiceberg's
    manage_snapshots drops them: it writes the ref anew), and the commit requires the branch to
    still point where it did when read: a commit that moved it meanwhile makes this one fail
    (CommitRejected), with nothing changed. Not retried: the caller decided on what it read."""
    with transaction(table) as tx:
        ref = tx.table_metadata.refs.get(branch)
        update = SetSnapshotRefUpdate(
            ref_name=branch, type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id,
            max_ref_age_ms=ref.max_ref_age_ms if ref else None,
            max_snapshot_age_ms=ref.max_snapshot_age_ms if ref else None,
            min_snapshots_to_keep=ref.min_snapshots_to_keep if ref else None,
        )
        edge.stage(tx, (*_schema_of(tx, branch, snapshot_id), update),
                   (AssertRefSnapshotId(ref=branch, snapshot_id=ref.snapshot_id if ref else None),))


def _schema_of(tx, branch: str, snapshot_id: int) -> tuple:
    """main moved to a snapshot whose own columns the current schema has under other field ids (a
    replace changed their type since): that snapshot's schema is made current again, so that its
    files read as they were written (lakerules.iceberg.schema.snapshot_schema)."""
    metadata = tx.table_metadata
    if branch != MAIN_BRANCH:
        return ()
    schema = schemas.snapshot_schema(metadata, metadata.snapshot_by_id(snapshot_id))
    return () if schema.schema_id == metadata.current_schema_id else (SetCurrentSchemaUpdate(schema_id=schema.schema_id),)


def set_ref(table: Table, name: str, kind, snapshot_id: int, *, expected: int | None, max_ref_age_ms=None,
            max_snapshot_age_ms=None, min_snapshots_to_keep=None) -> None:
    """Create or move branch or tag ``name`` to snapshot_id with these retention settings, in a
    metadata-only commit that requires the ref to still be at ``expected`` (None: missing)."""
    with transaction(table) as tx:
        update = SetSnapshotRefUpdate(
            ref_name=name, type=kind, snapshot_id=snapshot_id, max_ref_age_ms=max_ref_age_ms,
            max_snapshot_age_ms=max_snapshot_age_ms, min_snapshots_to_keep=min_snapshots_to_keep,
        )
        edge.stage(tx, (update,), (AssertRefSnapshotId(ref=name, snapshot_id=expected),))


def remove_ref(table: Table, name: str, expected: int) -> None:
    """Drop branch or tag ``name``, requiring it to still be at ``expected``."""
    with transaction(table) as tx:
        edge.stage(tx, (RemoveSnapshotRefUpdate(ref_name=name),), (AssertRefSnapshotId(ref=name, snapshot_id=expected),))


class RestoreConflict(ValidationException):
    """The table's current snapshot moved while RESTORE read it; nothing was committed."""


def restore(table: Table, from_snapshot_id: int, removed: list, readded: list, summary: dict | None = None,
            row_ids: dict | None = None, restored_snapshot_id: int | None = None) -> None:
    """One overwrite snapshot on top of from_snapshot_id (main's head, as read): the live entries
    ``removed`` (of the head) are marked deleted, the entries ``readded`` (of the snapshot
    restored) are added again with their own data sequence numbers, so that every delete file
    applies to exactly the data files it applied to in the restored snapshot (Iceberg's
    RewriteFiles keeps data sequence numbers the same way). On a format-version 3 table (entries
    read in v3's layout) a data file added again keeps the first_row_id it had in the snapshot
    restored (``row_ids``: data file path -> that id, None for a file that had none), so its rows
    keep their ids. Fails with RestoreConflict if main moved meanwhile."""
    with transaction(table) as tx:
        restored = tx.table_metadata.snapshot_by_id(restored_snapshot_id) if restored_snapshot_id is not None else None
        schema = schemas.snapshot_schema(tx.table_metadata, restored)
        if schema.schema_id != tx.table_metadata.current_schema_id:  # its files' columns, as lakerules.iceberg.schema says
            edge.stage(tx, (SetCurrentSchemaUpdate(schema_id=schema.schema_id),))
        with _Restore(tx, table.io, from_snapshot_id, removed, readded, snapshot_properties(summary), row_ids or {}):
            pass


class _Restore(Merging, edge.SnapshotProducer):
    v3_ready = True  # a data file added again keeps its first_row_id (restore), DVs keep their fields

    def __init__(self, transaction, io, from_snapshot_id: int, removed: list, readded: list, snapshot_properties: dict,
                 row_ids: dict):
        super().__init__(operation=Operation.OVERWRITE, transaction=transaction, io=io,
                         snapshot_properties=snapshot_properties)
        self._from = from_snapshot_id
        self._removed = {entry_key(e): e for e in removed}
        self._readded = list(readded)
        self._restored_ids = row_ids

    def validate_concurrency(self) -> None:
        """produce checks that main is still where the restore read it, on every attempt."""

    def produce(self):
        head = self.metadata.snapshot_by_name(MAIN_BRANCH)
        if head is None or head.snapshot_id != self._from:
            raise RestoreConflict(
                f"lakerules: conflict on {names.table_name(self.table)}: RESTORE read snapshot {self._from}, but "
                f"the table's current snapshot is now {head.snapshot_id if head else None} (a commit landed "
                "meanwhile); nothing was committed. Run it again."
            )
        return super().produce()

    def manifests(self):
        metadata = self.metadata
        manifests, deleted = parent_manifests_without(self, set(self._removed))
        new = []
        groups = defaultdict(list)
        for kind, entries in (("add", self._readded), ("delete", deleted)):
            for e in entries:
                content = ManifestContent.DATA if e.data_file.content == DataFileContent.DATA else ManifestContent.DELETES
                groups[(content.value, e.data_file.spec_id)].append((kind, e))
        v2 = metadata.format_version >= 2
        for (content, spec_id), entries in sorted(groups.items()):
            with manifest_writer(self, ManifestContent(content), spec_id) as writer:
                for kind, e in entries:
                    if kind == "delete":
                        writer.delete(e)
                    else:
                        writer.add_entry(ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED, snapshot_id=self.snapshot_id,
                            sequence_number=e.sequence_number if v2 else None, file_sequence_number=None,
                            data_file=self._as_restored(e.data_file)))
            new.append(writer.to_manifest_file())
        return self.merge(new + manifests)

    def _as_restored(self, f):
        """A data file of the snapshot restored, on a v3 table with the first_row_id it had there."""
        if self.metadata.format_version < v3.VERSION or f.content != DataFileContent.DATA:
            return f
        if f.file_path not in self._restored_ids:
            raise RestoreConflict(f"lakerules: RESTORE of {names.table_name(self.table)}: the row ids of data file "
                                  f"{f.file_path} in the snapshot restored are not known; nothing was committed")
        first = self._restored_ids[f.file_path]
        return v3.data_file(f, first_row_id=first) if first is not None else v3.data_file(f)

    def deleted_entries(self):
        return []  # written by manifests

    def existing_manifests(self):
        return []  # written by manifests

    def summary(self, snapshot_properties=EMPTY_DICT) -> Summary:
        return snapshot_summary(self.metadata, Operation.OVERWRITE, self.parent_snapshot_id,
                                snapshot_properties, added=[e.data_file for e in self._readded],
                                removed=[e.data_file for e in self._removed.values()])
