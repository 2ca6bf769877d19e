"""Commits through pyiceberg: one statement, one snapshot.

pyiceberg retries a commit that lost a race (``commit.retry.*`` table properties) and validates
it against what was committed meanwhile.
"""

from __future__ import annotations

from collections import defaultdict

from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestWriterV2
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import EMPTY_DICT

from lakerules.errors import LakeError

LAKERULES_SUMMARY = {"engine-name": "lakerules"}


def append(table: Table, data_files: list, summary: dict | None = None) -> None:
    """A fast append of new data files: the files' rows are added, nothing is removed."""
    if not data_files:
        return
    with table.transaction() as tx:
        with tx.update_snapshot(snapshot_properties={**LAKERULES_SUMMARY, **(summary or {})}).fast_append() as fa:
            for f in data_files:
                fa.append_data_file(f)


def overwrite(table: Table, removed: list, added: list, summary: dict | None = None) -> None:
    """Remove data files and add others in one snapshot."""
    if not removed and not added:
        return
    with table.transaction() as tx:
        with tx.update_snapshot(snapshot_properties={**LAKERULES_SUMMARY, **(summary or {})}).overwrite() as ow:
            for f in removed:
                ow.delete_data_file(f)
            for f in added:
                ow.append_data_file(f)


# ---- row deltas: data files and delete files in one snapshot ------------------------------------
#
# pyiceberg has no public API to commit delete files. A row delta is a fast append (every
# existing manifest kept) that also writes the added delete files into delete manifests, one
# per partition spec, and counts them in the snapshot summary.


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _RowDelta(_FastAppendFiles):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._added_delete_files: list = []

    def add_delete_file(self, delete_file) -> "_RowDelta":
        self._added_delete_files.append(delete_file)
        return self

    def _manifests(self):
        manifests = super()._manifests()
        by_spec = defaultdict(list)
        for f in self._added_delete_files:
            by_spec[f.spec_id].append(f)
        table_metadata = self._transaction.table_metadata
        for spec_id, files in sorted(by_spec.items()):
            writer = _DeleteManifestWriter(
                spec=table_metadata.specs()[spec_id],
                schema=self.schema(),
                output_file=self.new_manifest_output(),
                snapshot_id=self._snapshot_id,
                avro_compression=self._compression,
            )
            with writer:
                for f in files:
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            manifests.append(writer.to_manifest_file())
        return manifests

    def _summary(self, snapshot_properties=EMPTY_DICT):
        # the summary counts what _added_data_files holds; delete files are counted as theirs
        saved = self._added_data_files
        self._added_data_files = saved + self._added_delete_files
        try:
            return super()._summary(snapshot_properties)
        finally:
            self._added_data_files = saved


def row_delta(table: Table, data_files: list, delete_files: list, summary: dict | None = None) -> None:
    """One snapshot adding data files and delete files (position or equality)."""
    if not data_files and not delete_files:
        return
    if table.format_version < 2:
        raise LakeError(f"lakerules: table {table.name()} is format version 1, which has no delete files")
    operation = Operation.OVERWRITE if data_files else Operation.DELETE
    with table.transaction() as tx:
        producer = _RowDelta(
            operation=operation,
            transaction=tx,
            io=table.io,
            snapshot_properties={**LAKERULES_SUMMARY, **(summary or {})},
        )
        with producer:
            for f in data_files:
                producer.append_data_file(f)
            for f in delete_files:
                producer.add_delete_file(f)
