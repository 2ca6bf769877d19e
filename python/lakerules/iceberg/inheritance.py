"""What a manifest entry inherits from its manifest (Iceberg spec, "Sequence Number Inheritance"
and "Snapshot ID Inheritance"): one rule for every reader of entries, pyiceberg's objects built
from a Spark job's rows or the JVM's columns (lakerules.scan.manifest_job) and v3's own reader
(lakerules.iceberg.v3)."""

from __future__ import annotations

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
