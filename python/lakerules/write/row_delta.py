"""Row deltas: data files and delete files added and removed in one snapshot, validated.

pyiceberg has no public API to commit delete files. A row delta is an overwrite that also
adds delete files (written into delete manifests, one per partition spec) and can remove
delete files (their entries marked DELETED in delete manifests), counted in the summary.

Validation: the transaction starts from the table metadata the statement planned its read on.
If another commit landed meanwhile, pyiceberg refreshes, calls the producer's
validate_concurrency over the snapshots in between, and retries; a conflict raises
ValidationException and nothing lands. Overwrites (lakerules.write.files) validate the same way
before they commit (:func:`validate_overwrite`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from pyiceberg.exceptions import ValidationException
from pyiceberg.expressions import BooleanExpression
from pyiceberg.expressions.visitors import expression_evaluator, inclusive_projection
from pyiceberg.manifest import DataFileContent, FileFormat, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import IsolationLevel, Operation
from pyiceberg.typedef import EMPTY_DICT, KeyDefaultDict

from lakerules.iceberg import names, v3
from lakerules.iceberg import pyiceberg_edge as edge
from lakerules.scan.row_files import isolation_level
from lakerules.write.commit import producer_args, snapshot_summary, transaction
from lakerules.write.manifest_merge import Merging, manifest_writer
from lakerules.errors import ConflictError, LakeError


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
    isolation level is the table's ``write.<statement>.isolation-level``
    (lakerules.scan.row_files.isolation_level).
    """

    must_exist: frozenset = frozenset()
    no_new_deletes: frozenset = frozenset()
    conflict_filter: BooleanExpression | None = None
    statement: str = "delete"


def commit(table: Table, data_files: list, delete_files: list, summary: dict | None = None, *,
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
        with transaction(table) as tx:
            producer = _RowDelta(
                operation=operation,
                transaction=tx,
                io=table.io,
                validation=validation,
                **producer_args(table, summary),
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


class _RowDelta(Merging, edge.OverwriteFiles):
    def __init__(self, *args, validation: Validation | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._added_delete_files: list = []
        self._removed_delete_files: set = set()
        self._validation = validation or Validation()

    @property
    def v3_ready(self) -> bool:
        """On a format-version 3 table: deletion vectors added, never position delete files."""
        return all(f.file_format == FileFormat.PUFFIN for f in self._added_delete_files)

    def add_delete_file(self, delete_file) -> "_RowDelta":
        self._added_delete_files.append(delete_file)
        return self

    def remove_delete_file(self, delete_file) -> "_RowDelta":
        self._removed_delete_files.add(delete_file)
        return self

    def _parent_manifests(self) -> list:
        snapshot = self.metadata.snapshot_by_name(name=self.target_branch)
        return snapshot.manifests(io=self.io) if snapshot else []

    def _removed(self, manifest) -> set:
        return self.deleted_data_files if manifest.content == ManifestContent.DATA else self._removed_delete_files

    def existing_manifests(self) -> list:
        out = []
        for manifest in self._parent_manifests():
            gone = self._removed(manifest)
            if not gone:
                out.append(manifest)
                continue
            entries = v3.entries(self.io, manifest, self.metadata.format_version)
            keep = [e for e in entries if e.data_file not in gone]
            if len(keep) == len(entries):
                out.append(manifest)
                continue
            if not keep:
                continue
            with manifest_writer(self, manifest.content, manifest.partition_spec_id) as writer:
                for e in keep:
                    writer.add_entry(_carried(e, ManifestEntryStatus.EXISTING, e.snapshot_id))
            out.append(writer.to_manifest_file())
        return out

    def _removed_entries(self, content: ManifestContent) -> list:
        """The parent's live entries of ``content`` this commit removes, marked deleted: a delete
        file's every entry (a Puffin file's DVs all go with it; those that stay are listed again)."""
        out = []
        for manifest in self._parent_manifests():
            if manifest.content != content:
                continue
            gone = self._removed(manifest)
            if not gone:
                continue
            for e in v3.entries(self.io, manifest, self.metadata.format_version):
                if e.data_file in gone:
                    out.append(_carried(e, ManifestEntryStatus.DELETED, self.snapshot_id))
        return out

    def deleted_entries(self) -> list:
        entries = self._removed_entries(ManifestContent.DATA)
        missing = {f.file_path for f in self.deleted_data_files} - {e.data_file.file_path for e in entries}
        if missing:
            raise ValidationException(f"Data files to remove are not in the table: {sorted(missing)}")
        return entries

    def process_manifests(self, manifests: list) -> list:
        """pyiceberg's data manifests (new, removed entries, carried over), then the new delete
        manifests (added and removed delete files), then the carried-over delete manifests."""
        by_spec = defaultdict(list)
        for f in self._added_delete_files:
            by_spec[f.spec_id].append(ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED,
                snapshot_id=self.snapshot_id,
                sequence_number=None,
                file_sequence_number=None,
                data_file=f,
            ))
        for e in self._removed_entries(ManifestContent.DELETES):
            by_spec[e.data_file.spec_id].append(e)
        new_deletes = []
        for spec_id, entries in sorted(by_spec.items()):
            with manifest_writer(self, ManifestContent.DELETES, spec_id) as writer:
                for e in entries:
                    writer.add_entry(e)
            new_deletes.append(writer.to_manifest_file())
        data = [m for m in manifests if m.content == ManifestContent.DATA]
        carried_deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
        return self.merge(data + new_deletes + carried_deletes)

    def summary(self, snapshot_properties=EMPTY_DICT):
        # the delete entries really removed (not the files named: a Puffin file's DVs share its
        # path, and its siblings that stay are counted again among the added)
        removed_deletes = [e.data_file for e in self._removed_entries(ManifestContent.DELETES)]
        return snapshot_summary(self.metadata, self.operation, self.parent_snapshot_id, snapshot_properties,
                                added=[*self.added_data_files, *self._added_delete_files],
                                removed=[*self.deleted_data_files, *removed_deletes])

    def validate_concurrency(self) -> None:
        window = self.commit_window
        if window is None or window.is_empty() or window.head is None:
            return
        table = self.table
        v = self._validation
        base, head = window.base, window.head
        if v.must_exist:
            edge.validate_data_files_exist(table, head, v.must_exist, base)
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
            edge.validate_data_files_exist(table, head, replaced, base)
            _validate_no_new_deletes(table, head, replaced, base)
        if conflict_filter is not None:
            _validate_no_matching_data_added(table, head, conflict_filter, base)
        if partitions:
            hits = [e.data_file.file_path for e in edge.added_data_file_entries(table, head, base)
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
        return position_delete_may_apply(delete_file, data_file)
    spec = table.specs()[delete_file.spec_id]
    if spec.is_unpartitioned():
        return True  # a global equality delete
    return delete_file.spec_id == data_file.spec_id and tuple(delete_file.partition or ()) == tuple(data_file.partition or ())


def _validate_no_matching_data_added(table: Table, head, row_filter: BooleanExpression, base) -> None:
    """Serializable isolation: no data file added after base may hold rows matching row_filter,
    judged by its partition and its column metrics (pyiceberg's own check looks at partitions
    only, so any append to a partition would conflict)."""
    schema = table.schema()
    metrics = edge.inclusive_metrics(schema, row_filter, True, False)

    def partition_test(spec_id: int):
        spec = table.specs()[spec_id]
        projected = inclusive_projection(schema, spec)(row_filter)
        return expression_evaluator(Schema(*spec.partition_type(schema).fields), projected, True)

    tests = KeyDefaultDict(partition_test)
    conflicts = [
        e.data_file.file_path
        for e in edge.added_data_file_entries(table, head, base)
        if e.data_file.content == DataFileContent.DATA and tests[e.data_file.spec_id](e.data_file.partition)
        and metrics(e.data_file)
    ]
    if conflicts:
        raise ValidationException(
            f"data files that may hold rows this statement had to see were added meanwhile: {sorted(conflicts)[:5]}"
        )


_PATH_FIELD_ID = 2147483546


def position_delete_may_apply(delete_file, data_file) -> bool:
    """As scan planning decides: same spec and partition, and the data file's path within the
    delete file's file_path bounds (compared in the written form and in local-path normal form);
    a deletion vector (read in v3's layout) applies to the one data file it names."""
    if delete_file.spec_id != data_file.spec_id or tuple(delete_file.partition or ()) != tuple(data_file.partition or ()):
        return False
    referenced = v3.dv_target(delete_file)
    if referenced is not None:
        return referenced == data_file.file_path
    lower = (delete_file.lower_bounds or {}).get(_PATH_FIELD_ID)
    upper = (delete_file.upper_bounds or {}).get(_PATH_FIELD_ID)
    if lower is None or upper is None:
        return True

    def normal(p: str) -> str:
        return re.sub(r"^file:/*", "/", p)

    lo, hi, path = lower.decode("utf-8", "replace"), upper.decode("utf-8", "replace"), data_file.file_path
    return lo <= path <= hi or normal(lo) <= normal(path) <= normal(hi)


def _carried(e, status, snapshot_id: int):
    """A parent manifest's entry written again with ``status``: its file and sequence numbers kept."""
    return ManifestEntry.from_args(status=status, snapshot_id=snapshot_id, sequence_number=e.sequence_number,
                                   file_sequence_number=e.file_sequence_number, data_file=e.data_file)
