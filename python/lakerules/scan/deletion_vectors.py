"""Deletion vectors (Iceberg format version 3) read by scans.

A v3 table's row-level deletes are deletion vectors: one per data file at most, a
``deletion-vector-v1`` blob in a Puffin file, named by a delete manifest entry (file_format
PUFFIN) with ``referenced_data_file``, ``content_offset`` and ``content_size_in_bytes``. A DV
applies to its data file when the file's data sequence number is at most the DV's; where a
data file has one, position delete files (left from before an upgrade from v2) are not read
for it: the spec has a writer merge them into the DV.

Planning (lakerules.scan.planning) indexes a snapshot's DVs by data file (:func:`index`, the delete
manifests read with v3's schema, which pyiceberg's reader drops) and gives a file with one
``position_deletes == (dv,)``. The scan (lakerules.scan.read) drops the deleted rows inside
Spark's Parquet reader: the DVs are read and decoded once on the driver
(io.lakerules.functions.DeletionVectors) and broadcast as a PositionDeleteSet, whose sorted
positions a file's reader walks batch by batch (io.lakerules.PositionDeletesParquetFormat; no
Python per row, no position column in the query's plan).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from pyiceberg.manifest import DataFile, FileFormat, ManifestContent

from lakerules.errors import LakeError
from lakerules.iceberg import v3
from lakerules.spark import deletion_vectors as DV, jvm as J

NONE, POSITION_FILES, DELETION_VECTOR = 0, 1, 2

_lock = threading.Lock()
_by_manifest: OrderedDict = OrderedDict()  # delete manifest path -> its DV entries
_MANIFESTS = 1024
_sets: OrderedDict = OrderedDict()  # (application, DVs) -> JVM PositionDeleteSet
_SETS = 32


def is_deletion_vector(f: DataFile) -> bool:
    return f.file_format == FileFormat.PUFFIN


def kind(planned) -> int:
    """What deletes a planned file has: none, position delete files, or a deletion vector."""
    if not planned.position_deletes:
        return NONE
    return DELETION_VECTOR if is_deletion_vector(planned.position_deletes[0]) else POSITION_FILES


def _entries(io, manifest) -> list:
    with _lock:
        hit = _by_manifest.get(manifest.manifest_path)
        if hit is not None:
            _by_manifest.move_to_end(manifest.manifest_path)
            return hit
    entries = [e for e in v3.read_entries(io, manifest) if is_deletion_vector(e.data_file)]
    with _lock:
        _by_manifest[manifest.manifest_path] = entries
        while len(_by_manifest) > _MANIFESTS:
            _by_manifest.popitem(last=False)
    return entries


def index(table, manifests) -> dict[str, tuple[DataFile, int]]:
    """The deletion vectors of a snapshot (its ``manifests``), by the data file they reference:
    (the DV's delete file in v3's layout, its data sequence number). Two DVs for one data file are
    an error (the spec allows one per file in a snapshot)."""
    out: dict[str, tuple[DataFile, int]] = {}
    for m in manifests:
        if m.content != ManifestContent.DELETES:
            continue
        for e in _entries(table.io, m):
            referenced, offset, size = v3.deletion_vector_of(e.data_file)
            if referenced is None or offset is None or size is None:
                raise LakeError(f"lakerules: deletion vector {e.data_file.file_path} of {_name(table)} has no "
                                "referenced_data_file, content_offset or content_size_in_bytes; it cannot be read")
            if referenced in out:
                raise LakeError(f"lakerules: {_name(table)} has two deletion vectors for data file {referenced} "
                                f"({out[referenced][0].file_path} and {e.data_file.file_path}); Iceberg allows one")
            out[referenced] = (e.data_file, e.sequence_number or 0)
    return out


def _name(table) -> str:
    from lakerules.iceberg import names

    return names.table_name(table)


def for_data_file(dvs: dict, data_file: DataFile, sequence_number: int) -> DataFile | None:
    """The deletion vector that applies to ``data_file`` (of that data sequence number), if any."""
    hit = dvs.get(data_file.file_path)
    return hit[0] if hit is not None and hit[1] >= sequence_number else None


def delete_set(spark, files: list, names: dict):
    """The JVM PositionDeleteSet of the planned ``files``' deletion vectors, by Spark's name of
    their data files (``names``: data file path -> that name): each DV read and decoded once on
    the driver, broadcast, and cached for the application (the DVs of a file never change)."""
    dvs = sorted((names[p.file.file_path], *_location(p.position_deletes[0])) for p in files)
    key = (spark.sparkContext.applicationId, tuple(dvs))
    with _lock:
        deleted = _sets.get(key)
        if deleted is not None:
            _sets.move_to_end(key)
    if deleted is None:
        deleted = DV.deletion_vector_set(spark, *(list(c) for c in zip(*dvs)))
        with _lock:
            _sets[key] = deleted
            while len(_sets) > _SETS:
                _, evicted = _sets.popitem(last=False)
                evicted.release()
    return deleted


def apply(spark, data_plan, file_attr, pos_attr, files: list, names: dict):
    """Filter(the row is not deleted) over ``data_plan`` (the JVM plan of ``files``' rows with
    Spark's name of their file and their position, attributes ``file_attr`` and ``pos_attr``);
    ``names``: data file path -> Spark's name of it. Scans drop the rows in the reader instead
    (delete_set); the position_deletes metadata table keeps the positions this filter drops."""
    return delete_set(spark, files, names).filterLive(data_plan, file_attr, pos_attr)


def _location(dv: DataFile) -> tuple[str, int, int]:
    _, offset, size = v3.deletion_vector_of(dv)
    return dv.file_path, offset, size
