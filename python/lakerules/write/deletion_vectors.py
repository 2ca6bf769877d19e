"""Deletion vectors written (Iceberg format version 3): a DELETE's deleted rows as one
``deletion-vector-v1`` blob per data file, all in one Puffin file per statement.

The spec keeps at most one DV per data file in a snapshot: a data file that has one gets a new
DV holding its old positions and the new ones, and the commit removes the old DV's entry. A
delete manifest removes a delete file by its path, and a Puffin file may hold DVs of other data
files too (another writer's, or an earlier statement's): those siblings are listed again in the
same commit, unchanged (same file, offset and length), so no other file loses its DV.

The positions are grouped, merged with the old DVs, encoded (portable 64-bit roaring bitmaps,
length, magic, CRC-32) and written in the JVM (io.lakerules.functions.DeletionVectors.writePuffin);
this module gives it the rows and the old DVs, and makes the delete files of what it wrote.
"""

from __future__ import annotations

import json
import uuid

from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from lakerules.iceberg import v3
from lakerules.scan import deletion_vectors as read_dvs
from lakerules.spark import deletion_vectors as DV, jvm as J, progress
from lakerules.write.files import _delete_dir as delete_dir, _new_target as new_target

CREATED_BY = "lakerules"


def _upgraded_positions(spark, touched: list) -> DataFrame | None:
    """(file_path, pos) of the position delete files (left from before the table's upgrade to v3)
    that apply to the touched data files without a DV yet: their DV merges them (the spec has a
    writer do so; readers then ignore those files for it). The delete files themselves stay: they
    may apply to other data files."""
    from pyspark.sql import functions as F

    from lakerules.scan.read import POSITION_DELETE_SCHEMA, normal_path, normal_path_col, read_files

    older = [p for p in touched if read_dvs.kind(p) == read_dvs.POSITION_FILES]
    if not older:
        return None
    delete_files = list({d.file_path: d for p in older for d in p.position_deletes}.values())
    pairs = sorted({(normal_path(p.file.file_path), p.file.file_path) for p in older})
    lookup = J.local_frame(spark, pairs, StructType([StructField("d_path", StringType()),
                                                     StructField("data_path", StringType())]))
    rows = read_files(spark, POSITION_DELETE_SCHEMA, delete_files)
    return (rows.select(normal_path_col(F.col("file_path")).alias("d_path"), F.col("pos"))
            .join(F.broadcast(lookup), "d_path")
            .select(F.col("data_path").alias("file_path"), "pos"))


def write(spark, table, snapshot, rows: DataFrame, touched: list, removed_whole: list,
          collected=None, kinds: str = "d", skip=()) -> tuple[list, list, list]:
    """Write the deletion vectors of ``rows`` (file_path: the manifest's data file path, pos) for the
    ``touched`` files (PlannedFiles) into one new Puffin file: (its delete files, the siblings
    listed again, the delete files they replace). ``removed_whole``: PlannedFiles the commit removes.
    ``collected`` (lakerules.write.position_deletes.Collected), when complete, holds ``rows``'
    positions already on the driver (those of the ``kinds``), and ``skip`` the data file paths rows
    leaves out: then the DVs are written from them, with no Spark job (unless position delete files
    from before the table's upgrade apply to a touched file: their rows are read with ``rows``)."""
    progress.step(spark, "write deletion vectors")
    by_path = {p.file.file_path: p for p in touched}
    bases = [(p.file.file_path, *_location(p.position_deletes[0])) for p in touched
             if read_dvs.kind(p) == read_dvs.DELETION_VECTOR]
    target = new_target(table)
    puffin = f"{target}/{uuid.uuid4()}-deletes.puffin"
    older = _upgraded_positions(spark, touched)
    try:
        if collected is not None and collected.complete and older is None:
            result = json.loads(DV.write_collected_deletion_vectors(spark, collected.handle, kinds, skip, puffin,
                                                                    CREATED_BY, bases))
        else:
            rows = rows.select("file_path", "pos")
            if older is not None:
                rows = rows.unionByName(older)
            result = json.loads(DV.write_deletion_vectors(spark, J.analyzed(rows), puffin, CREATED_BY, bases))
    except BaseException:
        delete_dir(spark, table, target)  # a Puffin file left half written
        raise
    added = []
    for blob in result["blobs"]:
        f = by_path[blob["file"]].file
        added.append(_delete_file(puffin, result["size"], f, blob["file"], blob["offset"], blob["length"],
                                  blob["cardinality"]))
    written = {b["file"] for b in result["blobs"]}
    replaced = [by_path[path].position_deletes[0] for path in written
                if read_dvs.kind(by_path[path]) == read_dvs.DELETION_VECTOR]
    return added, _siblings(table, snapshot, replaced, written | {p.file.file_path for p in removed_whole}), replaced


def _location(dv: DataFile) -> tuple[str, int, int]:
    _, offset, size = v3.deletion_vector_of(dv)
    return dv.file_path, offset, size


def _delete_file(puffin: str, size: int, data_file: DataFile, referenced: str, offset: int, length: int,
                 cardinality: int) -> DataFile:
    out = DataFile.from_args(
        _table_format_version=v3.VERSION, content=DataFileContent.POSITION_DELETES, file_path=puffin,
        file_format=FileFormat.PUFFIN, partition=data_file.partition, record_count=cardinality,
        file_size_in_bytes=size, referenced_data_file=referenced, content_offset=offset,
        content_size_in_bytes=length)
    out.spec_id = data_file.spec_id
    return out


def _siblings(table, snapshot, replaced: list, done: set) -> list:
    """The DVs of other data files that share a Puffin file with a replaced DV, listed again."""
    paths = {d.file_path for d in replaced}
    if not paths:
        return []
    out = []
    for referenced, (dv, _) in sorted(read_dvs.index(table, snapshot.manifests(table.io)).items()):
        if dv.file_path in paths and referenced not in done:
            out.append(v3.data_file(dv))
    return out
