"""What a manifest entry inherits from its manifest (Iceberg spec, "Sequence Number Inheritance"
and "Snapshot ID Inheritance"): one rule for every reader of entries, pyiceberg's objects built
from a Spark job's rows or the JVM's columns (lakerules.scan.manifest_job) and v3's own reader
(lakerules.iceberg.v3), and the same rule over a manifest's entries as Arrow columns
(lakerules.scan.manifest_columns)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile


def inherit(entry: ManifestEntry, manifest: ManifestFile) -> ManifestEntry:
    """Sequence numbers and snapshot id an entry leaves null come from its manifest: always in a
    v1 table (sequence number 0), and for entries the manifest's snapshot added."""
    if entry.snapshot_id is None and manifest.added_snapshot_id is not None:
        entry.snapshot_id = manifest.added_snapshot_id
    inherits = manifest.sequence_number == 0 or entry.status == ManifestEntryStatus.ADDED
    if entry.sequence_number is None and inherits:
        entry.sequence_number = manifest.sequence_number
    if entry.file_sequence_number is None and inherits:
        entry.file_sequence_number = manifest.sequence_number
    return entry


def inherit_columns(entries: pa.Table, manifest: ManifestFile) -> pa.Table:
    """``inherit`` over a manifest's entries as Arrow columns (``status``, ``snapshot_id``,
    ``sequence_number``, ``file_sequence_number``): the nulls they inherit filled in."""
    t = entries
    if manifest.added_snapshot_id is not None:
        t = t.set_column(t.schema.get_field_index("snapshot_id"), "snapshot_id",
                         pc.fill_null(t.column("snapshot_id"), manifest.added_snapshot_id))
    fill = pa.scalar(manifest.sequence_number, pa.int64())
    added = None if manifest.sequence_number == 0 else pc.equal(t.column("status"), ManifestEntryStatus.ADDED.value)
    for name in ("sequence_number", "file_sequence_number"):
        values = t.column(name)
        values = pc.fill_null(values, fill) if added is None else pc.if_else(pc.and_(pc.is_null(values), added), fill,
                                                                           values)
        t = t.set_column(t.schema.get_field_index(name), name, values)
    return t
