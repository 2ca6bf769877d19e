"""Iceberg format version 3 as lakerules writes it: the table metadata JSON, the manifest list
with row lineage, and data files and manifest entries in v3's layout.

pyiceberg 0.12 reads v3 tables but writes none of this (``TableMetadataV3.model_dump_json``
raises, its manifest and manifest list writers stop at version 2, and it reads manifests and
manifest lists with the v2 schema, dropping ``first_row_id``). lakerules.iceberg.pyiceberg_edge
plugs these functions into pyiceberg's snapshot producers and catalogs; this module uses only
pyiceberg's public names.

Row lineage (the spec's "Row Lineage" and "First Row ID Assignment"): the table's
``next-row-id`` is the snapshot's ``first-row-id``; the manifest list gives each data manifest
that has no ``first_row_id`` yet (the commit's new manifest, and after an upgrade from v2 the
older manifests) the next free id, advancing by its added and existing rows; the snapshot's
``added-rows`` is the ids it assigned, and the table's ``next-row-id`` advances by it. A data file
added with a null ``first_row_id`` inherits it from its manifest (the manifest's plus the rows of
the live files before it), so a row's ``_row_id`` is its file's ``first_row_id`` + its position.
Manifests carried over keep the ``first_row_id`` the parent's manifest list gave them.
"""

from __future__ import annotations

import json

from pyiceberg.avro.file import AvroFile, AvroOutputFile
from pyiceberg.manifest import (
    DATA_FILE_TYPE, MANIFEST_ENTRY_SCHEMAS, MANIFEST_LIST_FILE_SCHEMAS, UNASSIGNED_SEQ, DataFile, DataFileContent,
    FileFormat, ManifestContent, ManifestEntry,
    ManifestEntryStatus, ManifestFile, PartitionFieldSummary, data_file_with_partition,
    manifest_entry_schema_with_data_file,
)
from pyiceberg.typedef import IcebergBaseModel

from lakerules.errors import LakeError
from lakerules.iceberg.inheritance import inherit

VERSION = 3
NEXT_ROW_ID = "next-row-id"
_LIST_SCHEMA = MANIFEST_LIST_FILE_SCHEMAS[VERSION]
_V2_DATA_FILE_FIELDS = len(DATA_FILE_TYPE[2].fields)
_V2_MANIFEST_FILE_FIELDS = len(MANIFEST_LIST_FILE_SCHEMAS[2].fields)


# ---- table metadata -----------------------------------------------------------------------------


def metadata_json(metadata) -> str:
    """The table metadata file of a format-version 3 table, as the spec lays it out: pyiceberg's
    v2 serialization of the common fields (its models carry v3's ``next-row-id`` and snapshots'
    ``first-row-id`` / ``added-rows`` under the spec's names) plus the checks v3 adds. A table
    created at v3 has ``next-row-id`` 0 (pyiceberg leaves it unset)."""
    if metadata.format_version != VERSION:
        raise ValueError(f"not a format-version {VERSION} table: {metadata.format_version}")
    data = json.loads(IcebergBaseModel.model_dump_json(metadata, exclude_none=True))
    if data.get(NEXT_ROW_ID) is None:
        if data.get("snapshots"):
            raise LakeError(f"lakerules: the format-version 3 metadata of {metadata.location} has snapshots but no "
                            f"{NEXT_ROW_ID}; it was not written")
        data[NEXT_ROW_ID] = 0
    next_row_id = data[NEXT_ROW_ID]
    for s in data.get("snapshots", []):
        first, added = s.get("first-row-id"), s.get("added-rows")
        if (first is None) != (added is None) or (first is not None and first + added > next_row_id):
            raise LakeError(f"lakerules: snapshot {s.get('snapshot-id')} of {metadata.location} has first-row-id "
                            f"{first} and added-rows {added}, which the table's {NEXT_ROW_ID} {next_row_id} does not "
                            "cover; the metadata was not written")
    return json.dumps(data, separators=(",", ":"))


def upgraded_metadata(metadata):
    """``metadata`` (format version 2) upgraded to 3: the same table, ``next-row-id`` 0. Files
    written before have no row ids until a v3 commit lists their manifests (as Iceberg's upgrade)."""
    from pyiceberg.table.metadata import TableMetadataUtil

    data = json.loads(IcebergBaseModel.model_dump_json(metadata, exclude_none=True))
    data["format-version"] = VERSION
    data[NEXT_ROW_ID] = 0
    return TableMetadataUtil.parse_obj(data)


# ---- manifest entries ---------------------------------------------------------------------------


def data_file(df: DataFile, **v3_fields) -> DataFile:
    """``df`` in v3's layout (pyiceberg reads and builds data files in v2's): its v2 fields, then
    first_row_id, referenced_data_file, content_offset, content_size_in_bytes (given or kept)."""
    names = ("first_row_id", "referenced_data_file", "content_offset", "content_size_in_bytes")
    values = [df[i] for i in range(len(df))]
    kept = values[_V2_DATA_FILE_FIELDS:] + [None] * (len(names) - (len(values) - _V2_DATA_FILE_FIELDS))
    out = DataFile(*values[:_V2_DATA_FILE_FIELDS], *[v3_fields.get(n, k) for n, k in zip(names, kept)])
    out.spec_id = df.spec_id
    return out


def first_row_id_of(df: DataFile) -> int | None:
    return df[_V2_DATA_FILE_FIELDS] if len(df) > _V2_DATA_FILE_FIELDS else None


def dv_target(df: DataFile) -> str | None:
    """The data file a deletion vector (a Puffin file's entry, read in v3's layout) applies to;
    None for any other delete or data file."""
    return deletion_vector_of(df)[0] if df.file_format == FileFormat.PUFFIN else None


def deletion_vector_of(df: DataFile) -> tuple[str | None, int | None, int | None]:
    """(referenced_data_file, content_offset, content_size_in_bytes) of a delete file in v3's layout."""
    if len(df) <= _V2_DATA_FILE_FIELDS:
        return None, None, None
    return df[_V2_DATA_FILE_FIELDS + 1], df[_V2_DATA_FILE_FIELDS + 2], df[_V2_DATA_FILE_FIELDS + 3]


def entries(io, manifest: ManifestFile, format_version: int, discard_deleted: bool = True) -> list[ManifestEntry]:
    """The entries of ``manifest`` of a table of ``format_version`` as a commit writes them again:
    in v3's layout on a v3 table (pyiceberg's reader drops first_row_id and the deletion vectors'
    fields, which a manifest written again must keep), pyiceberg's otherwise."""
    if format_version >= VERSION:
        return read_entries(io, manifest, discard_deleted)
    return manifest.fetch_manifest_entry(io, discard_deleted=discard_deleted)


def read_entries(io, manifest: ManifestFile, discard_deleted: bool = True) -> list[ManifestEntry]:
    """The entries (live ones, unless not ``discard_deleted``) of ``manifest`` in v3's layout
    (pyiceberg reads v2's, without row ids and deletion vectors' fields), their snapshot id,
    sequence numbers and spec id inherited from the manifest as the spec says."""
    out = []
    with AvroFile[ManifestEntry](io.new_input(manifest.manifest_path), MANIFEST_ENTRY_SCHEMAS[VERSION],
                                 read_types={-1: ManifestEntry, 2: DataFile},
                                 read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent}) as reader:
        for e in reader:
            if e.status == ManifestEntryStatus.DELETED and discard_deleted:
                continue
            inherit(e, manifest)
            e.data_file.spec_id = manifest.partition_spec_id
            out.append(e)
    return out


def entry(e: ManifestEntry) -> ManifestEntry:
    """A manifest entry in v3's layout."""
    return ManifestEntry(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number, data_file(e.data_file))


def entry_schema(spec, schema):
    """The Avro schema of a v3 manifest's entries for ``spec``."""
    return manifest_entry_schema_with_data_file(
        format_version=VERSION, data_file=data_file_with_partition(spec.partition_type(schema), VERSION))


def carried(e: ManifestEntry, content: ManifestContent, row_ids) -> ManifestEntry:
    """A manifest entry in v3's layout, for a new manifest. A data file written again (EXISTING or
    DELETED: a merged or rewritten manifest) keeps its row ids: the first_row_id it inherited
    where it was listed before is written out (``row_ids``: data file path -> that id, None for a
    file that has none, as one listed before the table's first v3 commit; missing: not known).
    A file whose id cannot be told is refused rather than given new row ids."""
    if e.data_file.file_format == FileFormat.PUFFIN and len(e.data_file) <= _V2_DATA_FILE_FIELDS:
        from lakerules.errors import NotSupported

        raise NotSupported(  # read in v2's layout: its referenced_data_file and offsets are lost
            f"lakerules: a commit would write deletion vector {e.data_file.file_path} again without its "
            "referenced_data_file and offsets (read through pyiceberg's v2 reader); nothing was committed")
    if content != ManifestContent.DATA or e.status == ManifestEntryStatus.ADDED or first_row_id_of(e.data_file) is not None:
        return entry(e)
    path = e.data_file.file_path
    known = row_ids(path)
    if known is _UNKNOWN:
        from lakerules.errors import NotSupported

        raise NotSupported(
            "lakerules: a commit to a format-version 3 table would write data file "
            f"{path} again into a new manifest, but its first_row_id is not known (it is not in the snapshot the "
            "commit starts from); its rows would get new row ids. Nothing was committed")
    return ManifestEntry(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number,
                         data_file(e.data_file, first_row_id=known))


_UNKNOWN = object()


class RowIds:
    """The first_row_id of each live data file of a snapshot, as the spec's inheritance gives it
    (its own, else its manifest's plus the rows of the live files before it that inherit too),
    read on first use from the snapshot's manifest list and data manifests (v3's schema)."""

    def __init__(self, io, manifest_list: str | None):
        self._io, self._list, self._ids = io, manifest_list, None

    def __call__(self, path: str):
        if self._ids is None:
            self._ids = {} if self._list is None else self._read()
        return self._ids.get(path, _UNKNOWN)

    def all(self) -> dict:
        """Every live data file's first_row_id (None: it has none), by path."""
        if self._ids is None:
            self._ids = {} if self._list is None else self._read()
        return dict(self._ids)

    def _read(self) -> dict:
        out = {}
        with AvroFile[ManifestFile](self._io.new_input(self._list), _LIST_SCHEMA,
                                    read_types={-1: ManifestFile, 508: PartitionFieldSummary},
                                    read_enums={517: ManifestContent}) as manifests:
            listed = list(manifests)
        for m in listed:
            if m.content != ManifestContent.DATA:
                continue
            nxt = m[_V2_MANIFEST_FILE_FIELDS] if len(m) > _V2_MANIFEST_FILE_FIELDS else None
            out.update(inherited_first_row_ids(read_entries(self._io, m), nxt))  # v2 manifests: None
        return out


def inherited_first_row_ids(entries: list, first: int | None) -> dict:
    """Data file path -> first_row_id for the entries of one data manifest (in v3's layout, in
    file order) whose first_row_id in the manifest list is ``first``: a file's own, else (a live
    one) the next id of the manifest's range, which its rows then take; None where there is none."""
    out, nxt = {}, first
    for e in entries:
        own = first_row_id_of(e.data_file)
        if own is None and nxt is not None and e.status != ManifestEntryStatus.DELETED:
            own, nxt = nxt, nxt + e.data_file.record_count
        out[e.data_file.file_path] = own
    return out


# ---- manifest lists -----------------------------------------------------------------------------


def manifest_first_row_ids(io, manifest_list: str) -> dict[str, int]:
    """The first_row_id the manifest list at ``manifest_list`` gives each manifest (by path);
    pyiceberg reads manifest lists with v2's schema, which drops it."""
    out = {}
    with AvroFile[ManifestFile](io.new_input(manifest_list), _LIST_SCHEMA,
                                read_types={-1: ManifestFile, 508: PartitionFieldSummary},
                                read_enums={517: ManifestContent}) as reader:
        for m in reader:
            first = m[_V2_MANIFEST_FILE_FIELDS] if len(m) > _V2_MANIFEST_FILE_FIELDS else None
            if first is not None:
                out[m.manifest_path] = first
    return out


def write_manifest_list(output_file, *, snapshot_id: int, parent_snapshot_id: int | None, sequence_number: int,
                        first_row_id: int, manifests: list, known: dict[str, int], compression) -> int:
    """Write a v3 manifest list of ``manifests`` (pyiceberg's ManifestFile records) and return the
    table's next row id after it. Each data manifest keeps the first_row_id ``known`` gives it
    (from the parent's list), else gets the next free id (its added and existing rows are then
    taken); delete manifests have none. New manifests get the commit's sequence number."""
    next_row_id = first_row_id
    records = []
    for m in manifests:
        values = [m[i] for i in range(_V2_MANIFEST_FILE_FIELDS)]
        out = ManifestFile(*values, None)
        if out.sequence_number == UNASSIGNED_SEQ or out.min_sequence_number == UNASSIGNED_SEQ:
            if out.added_snapshot_id != snapshot_id:
                raise ValueError(f"manifest {out.manifest_path} of snapshot {out.added_snapshot_id} has no sequence number")
            if out.sequence_number == UNASSIGNED_SEQ:
                out.sequence_number = sequence_number
            if out.min_sequence_number == UNASSIGNED_SEQ:
                out.min_sequence_number = sequence_number
        if out.content == ManifestContent.DATA:
            first = known.get(out.manifest_path)
            if first is None:
                first = next_row_id
                next_row_id += (out.added_rows_count or 0) + (out.existing_rows_count or 0)
            out[_V2_MANIFEST_FILE_FIELDS] = first
        records.append(out)
    meta = {"snapshot-id": str(snapshot_id),
            "parent-snapshot-id": str(parent_snapshot_id) if parent_snapshot_id is not None else "null",
            "sequence-number": str(sequence_number), "first-row-id": str(first_row_id),
            "format-version": str(VERSION), "avro.codec": compression}
    with AvroOutputFile[ManifestFile](output_file=output_file, file_schema=_LIST_SCHEMA, record_schema=_LIST_SCHEMA,
                                      schema_name="manifest_file", metadata=meta) as writer:
        writer.write_block(records)
    return next_row_id
