"""pyiceberg's private names behind public ones: the only module of lakerules that uses them.

lakerules commits what pyiceberg has no public API for (delete files, rewrites, restores, merged
manifests, refs moved with their retention kept), validates commits as Iceberg's Java writers
do, and makes a catalog's faults clear errors. For that it extends pyiceberg's private snapshot
producers, stages updates on its transactions and hooks a catalog's metadata writes. Every other
module uses the public functions and classes below; pyproject.toml pins pyiceberg to one minor.

Each private relied on, and why. tests/test_pyiceberg_private.py reads this list: it checks that
each still exists with these parameters and fingerprints its source, and that this module uses
no private the list lacks, so a pyiceberg upgrade fails that one test naming what changed.

Snapshot producers (SnapshotProducer, FastAppendFiles, OverwriteFiles below subclass them):
- ``pyiceberg.table.update.snapshot._SnapshotProducer(operation, transaction, io, commit_uuid, snapshot_properties, branch)``:
  writes a snapshot's manifests and manifest list, and is what a transaction re-runs on a retry.
- ``pyiceberg.table.update.snapshot._FastAppendFiles(operation, transaction, io, commit_uuid, snapshot_properties, branch)``:
  an append's carried-over manifests.
- ``pyiceberg.table.update.snapshot._OverwriteFiles(operation, transaction, io, commit_uuid, snapshot_properties, branch)``:
  an overwrite's carried-over manifests and the entries of the data files it removes.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._commit()``: the hook that builds the
  snapshot (``produce``): checks that must run on every attempt run first.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._manifests()``: the new snapshot's manifests
  (``manifests``), written by lakerules for rewrites and restores.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._process_manifests(manifests)``: the list
  before it is written (``process_manifests``): where manifests are merged.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._existing_manifests()``: carried-over
  manifests (``existing_manifests``), less the entries a row delta removes.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._deleted_entries()``: removed entries
  (``deleted_entries``), of data and delete files.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._summary(snapshot_properties)``: the summary
  (``summary``), each file counted under its own partition spec.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._validate_concurrency()``: validation against
  commits that landed meanwhile, before a retry (``validate_concurrency``).
- ``pyiceberg.table.update.snapshot._SnapshotProducer._cleanup_uncommitted()``: after the commit
  landed (``cleanup_after_commit``): merged-away manifests are deleted too.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._clean_all_uncommitted()``: deletes every
  manifest and manifest list written, when nothing landed (``clean_all_uncommitted``).
- ``pyiceberg.table.update.UpdateTableMetadata._transaction``: the producer's transaction.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._io``: the file IO manifests are read with.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._operation``: the snapshot's operation.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._parent_snapshot_id``: the branch head the
  snapshot goes on (refreshed on a retry).
- ``pyiceberg.table.update.snapshot._SnapshotProducer._starting_snapshot_id``: where the window a
  retry validates starts (``validate_from``): a rewrite's is the snapshot it read.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._target_branch``: the branch committed to.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._added_data_files``: data files added.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._deleted_data_files``: data files removed.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._compression``: the Avro codec of manifests,
  for delete manifests written by lakerules.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._commit_window``: the snapshots committed
  meanwhile that a retry validates.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._written_manifests``: the manifests written,
  of which those the snapshot does not list are deleted after the commit.
- ``pyiceberg.table.update.snapshot._SnapshotProducer._written_manifest_lists``: the manifest lists
  written, deleted when nothing landed: a v3 snapshot's list is written by lakerules.
- ``pyiceberg.manifest.ManifestWriterV2._meta``: a delete manifest's Avro metadata says
  ``content=deletes`` (pyiceberg writes no delete manifests).
- ``pyiceberg.manifest.ManifestWriter._spec``: the partition spec of a v3 manifest's entry schema.
- ``pyiceberg.manifest.ManifestWriter._schema``: the table schema of a v3 manifest's entry schema.
- ``pyiceberg.manifest.ManifestWriter._output_file``: where a v3 manifest is written, and where the
  JVM writes a merged manifest (lakerules.write.manifest_bulk).
- ``pyiceberg.manifest.ManifestWriter._with_partition(format_version)``: the entry schema (with the
  spec's partition type) a merged manifest written by the JVM has, as pyiceberg's writer has it.

Format version 3 (pyiceberg reads it, writes none of it; lakerules.iceberg.v3 does):
- ``pyiceberg.table.update._apply_table_update(update, base_metadata, context)``: the dispatch that
  applies a table update, given the upgrade of a v2 table to v3 (pyiceberg refuses versions above 2).

Transactions:
- ``pyiceberg.table.Transaction._stage(updates, requirements)``: updates pyiceberg has no API for
  (a ref moved with its retention kept, a replace, a location change), with their requirements.
- ``pyiceberg.table.Transaction._table``: the table a transaction commits to.
- ``pyiceberg.table.Transaction._updates``: the staged updates (CachingTransaction's cache key).
- ``pyiceberg.table.Transaction._requirements``: a requirement of a type already staged (main's
  head, next to the target branch's).
- ``pyiceberg.table.Transaction._snapshot_producers``: the producers whose files go when the
  catalog refused the commit outright.

Validation and metrics:
- ``pyiceberg.table.update.validate._validate_data_files_exist(table, starting_snapshot, data_files, parent_snapshot)``:
  files a commit removes or points deletes at were not removed meanwhile.
- ``pyiceberg.table.update.validate._added_data_files(table, starting_snapshot, data_filter, partition_set, parent_snapshot)``:
  data files added meanwhile (serializable isolation, partition overwrites).
- ``pyiceberg.expressions.visitors._InclusiveMetricsEvaluator(schema, expr, case_sensitive, include_empty_files)``:
  whether a data file may hold matching rows, from its column metrics (scan planning, validation).
- ``pyiceberg.expressions.visitors._StrictMetricsEvaluator(schema, expr, case_sensitive, include_empty_files)``:
  whether every row of a data file matches (a DELETE drops such files unread).

Patched, a public name (:func:`install_spec_manifest_types`): pyiceberg.manifest's
``DATA_FILE_TYPE`` declares ``equality_ids`` (field 135, element 136) as ``list<long>`` in 0.12,
the spec and Iceberg's Java library as ``list<int>``: Iceberg's Java reader fails on such a manifest
(ClassCastException) as soon as it holds an equality delete file (apache/iceberg-python#3840, fixed
after 0.12.0). The writers' data file types are replaced by ones with ``list<int>``; the read
schemas pyiceberg built from them at import keep ``list<long>``, to which ``int`` is promoted, so
manifests written before still read (tests/test_pyiceberg_private.py).

Catalogs (lakerules.iceberg.guarded):
- ``pyiceberg.catalog.MetastoreCatalog._write_metadata(metadata, io, metadata_path)``: which metadata
  file a failed commit or CREATE TABLE wrote, to delete it when it did not land
  (``MetadataWriteHook.writing_metadata``); and where a format-version 3 table's metadata file is
  written by lakerules (lakerules.iceberg.v3.metadata_json): pyiceberg's serializer raises for v3.
- ``pyiceberg.catalog.Catalog._load_file_io(properties, location)``: the file IO that deletes it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator

from pyiceberg.expressions import BooleanExpression
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, _StrictMetricsEvaluator
from pyiceberg.io import FileIO
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntry, ManifestWriterV2
from pyiceberg.schema import Schema
from pyiceberg.serializers import Compressor
from pyiceberg.table import Table, Transaction
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import (
    AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate, UpgradeFormatVersionUpdate, _apply_table_update,
)
from pyiceberg.table.update.snapshot import _FastAppendFiles, _OverwriteFiles, _SnapshotProducer
from pyiceberg.table.update.validate import _added_data_files, _validate_data_files_exist
from pyiceberg.typedef import EMPTY_DICT

from lakerules.errors import NotSupported
from lakerules.iceberg import names, v3

# ---- snapshot producers -------------------------------------------------------------------------


class _PublicHooks:
    """In front of a pyiceberg snapshot producer: its private hooks call public ones, which a
    subclass overrides (calling ``super()`` for pyiceberg's own), and its state read by name."""

    # what pyiceberg calls ...
    def _commit(self):
        return self.produce()

    def _manifests(self):
        return self.manifests()

    def _process_manifests(self, manifests):
        return self.process_manifests(manifests)

    def _existing_manifests(self):
        return self.existing_manifests()

    def _deleted_entries(self):
        return self.deleted_entries()

    def _summary(self, snapshot_properties=EMPTY_DICT):
        return self.summary(snapshot_properties)

    def _validate_concurrency(self):
        return self.validate_concurrency()

    def _cleanup_uncommitted(self):
        return self.cleanup_after_commit()

    # Whether the snapshot this producer makes is right on a format-version 3 table: a subclass
    # that only adds data files and removes whole data files (appends, overwrites; carried files
    # keep their row ids) says so. Others (row deltas, rewrites, restores) are refused there until
    # lakerules writes their v3 parts (deletion vectors, the row ids of rewritten rows).
    v3_ready = False

    # ... calls these: pyiceberg's own unless overridden
    def produce(self) -> tuple:
        """Write the snapshot's manifests and manifest list: its (updates, requirements)."""
        if self.metadata.format_version >= v3.VERSION:
            return self.produce_v3()
        return super()._commit()

    def produce_v3(self) -> tuple:
        """pyiceberg's snapshot, as format version 3 has it (lakerules.iceberg.v3): v3 manifests and
        manifest list, the snapshot's first-row-id and added-rows."""
        metadata = self.metadata
        if not self.v3_ready:
            raise NotSupported(
                f"lakerules: {names.table_name(self.table)} is a format-version 3 table: lakerules writes only appends "
                f"and overwrites of whole files to v3 tables yet, not this {self.operation.value} commit. "
                "Nothing was committed")
        first_row_id = metadata.next_row_id
        if first_row_id is None:
            if metadata.snapshots:
                raise NotSupported(f"lakerules: {names.table_name(self.table)}: format-version 3 metadata without "
                                   "next-row-id; nothing was committed")
            first_row_id = 0
        manifests = self._manifests()
        sequence_number = metadata.next_sequence_number()
        summary = self._summary(self.snapshot_properties)
        path = self.table.location_provider().new_metadata_location(
            f"snap-{self.snapshot_id}-0-{self.commit_uuid}.avro")
        self._written_manifest_lists.append(path)
        parent = metadata.snapshot_by_id(self.parent_snapshot_id) if self.parent_snapshot_id is not None else None
        known = v3.manifest_first_row_ids(self.io, parent.manifest_list) if parent is not None else {}
        next_row_id = v3.write_manifest_list(
            self.io.new_output(path), snapshot_id=self.snapshot_id, parent_snapshot_id=self.parent_snapshot_id,
            sequence_number=sequence_number, first_row_id=first_row_id, manifests=manifests, known=known,
            compression=self._compression)
        snapshot = Snapshot(snapshot_id=self.snapshot_id, parent_snapshot_id=self.parent_snapshot_id,
                            manifest_list=path, sequence_number=sequence_number, summary=summary,
                            schema_id=metadata.current_schema_id, first_row_id=first_row_id,
                            added_rows=next_row_id - first_row_id)
        add = AddSnapshotUpdate(snapshot=snapshot)
        branch = self.target_branch
        if branch is None:
            return (add,), ()
        head = metadata.refs[branch].snapshot_id if branch in metadata.refs else None
        return ((add, SetSnapshotRefUpdate(snapshot_id=self.snapshot_id, parent_snapshot_id=self.parent_snapshot_id,
                                           ref_name=branch, type=SnapshotRefType.BRANCH)),
                (AssertRefSnapshotId(snapshot_id=head, ref=branch),))

    def new_manifest_writer(self, spec):
        """A writer of a data manifest of ``spec``, in the table's format version."""
        if self.metadata.format_version >= v3.VERSION:
            writer = ManifestWriterV3(spec=spec, schema=self.schema(), output_file=self.new_manifest_output(),
                                      snapshot_id=self.snapshot_id, avro_compression=self._compression)
            writer.row_ids = self.parent_row_ids()
            return writer
        return super().new_manifest_writer(spec)

    _row_ids: tuple = (None, None)

    def parent_row_ids(self) -> v3.RowIds:
        """The first_row_id of each live data file of the snapshot this one goes on (read once per
        parent: a retry goes on a new one)."""
        parent_id, ids = self._row_ids
        if ids is None or parent_id != self.parent_snapshot_id:
            parent = self.metadata.snapshot_by_id(self.parent_snapshot_id) if self.parent_snapshot_id is not None else None
            ids = v3.RowIds(self.io, parent.manifest_list if parent is not None else None)
            self._row_ids = (self.parent_snapshot_id, ids)
        return ids

    def manifests(self) -> list:
        """The new snapshot's manifests (written by pyiceberg from the hooks below by default)."""
        return super()._manifests()

    def process_manifests(self, manifests: list) -> list:
        return super()._process_manifests(manifests)

    def existing_manifests(self) -> list:
        return super()._existing_manifests()

    def deleted_entries(self) -> list:
        return super()._deleted_entries()

    def summary(self, snapshot_properties=EMPTY_DICT):
        return super()._summary(snapshot_properties)

    def validate_concurrency(self) -> None:
        """Before a retry: fail (ValidationException) if a commit that landed meanwhile conflicts."""
        return super()._validate_concurrency()

    def cleanup_after_commit(self) -> None:
        """The commit landed: delete the files of failed attempts."""
        return super()._cleanup_uncommitted()

    def clean_all_uncommitted(self) -> None:
        """Nothing landed: delete every manifest and manifest list written."""
        self._clean_all_uncommitted()

    @property
    def transaction(self) -> Transaction:
        return self._transaction

    @property
    def table(self) -> Table:
        return self._transaction._table

    @property
    def metadata(self):
        """The table's metadata as the transaction has it (its staged updates applied)."""
        return self._transaction.table_metadata

    @property
    def io(self) -> FileIO:
        return self._io

    @property
    def operation(self):
        return self._operation

    @property
    def parent_snapshot_id(self) -> int | None:
        return self._parent_snapshot_id

    @property
    def target_branch(self) -> str | None:
        return self._target_branch

    @property
    def added_data_files(self) -> list:
        return self._added_data_files

    @property
    def deleted_data_files(self) -> set:
        return self._deleted_data_files

    @property
    def commit_window(self):
        """(base, head) of the commits that landed meanwhile, or None on the first attempt."""
        return self._commit_window

    @property
    def written_manifests(self) -> list:
        return self._written_manifests

    def validate_from(self, snapshot_id: int | None) -> None:
        """Validate retries against the commits since snapshot_id (default: the parent when created)."""
        self._starting_snapshot_id = snapshot_id

    def new_delete_manifest_writer(self, spec):
        """A writer of a delete manifest of ``spec`` (pyiceberg's writers write data manifests)."""
        if self.metadata.format_version >= v3.VERSION:
            return DeleteManifestWriterV3(spec=spec, schema=self.schema(), output_file=self.new_manifest_output(),
                                          snapshot_id=self.snapshot_id, avro_compression=self._compression)
        return DeleteManifestWriter(spec=spec, schema=self.schema(), output_file=self.new_manifest_output(),
                                    snapshot_id=self.snapshot_id, avro_compression=self._compression)


class SnapshotProducer(_PublicHooks, _SnapshotProducer):
    """A snapshot producer that writes its own manifests (rewrites, restores)."""

    @abstractmethod
    def existing_manifests(self) -> list: ...

    @abstractmethod
    def deleted_entries(self) -> list: ...


class FastAppendFiles(_PublicHooks, _FastAppendFiles):
    """pyiceberg's append: every manifest of the parent carried over."""


class OverwriteFiles(_PublicHooks, _OverwriteFiles):
    """pyiceberg's overwrite: removed data files' entries marked deleted, the rest carried over."""


class DeleteManifestWriter(ManifestWriterV2):
    """A manifest of delete files (format version 2 and later)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class ManifestWriterV3(ManifestWriterV2):
    """A data manifest of a format-version 3 table: v3's entry schema (data files with
    first_row_id, referenced_data_file, content_offset, content_size_in_bytes); a new data file's
    first_row_id is left null, to be inherited from the manifest list (lakerules.iceberg.v3)."""

    @property
    def version(self):
        return v3.VERSION

    def new_writer(self) -> AvroOutputFile[ManifestEntry]:
        schema = v3.entry_schema(self._spec, self._schema)
        return AvroOutputFile[ManifestEntry](output_file=self._output_file, file_schema=schema, record_schema=schema,
                                             schema_name="manifest_entry", metadata=self._meta)

    row_ids = None  # data file path -> its first_row_id where it was listed (v3.RowIds)

    def prepare_entry(self, entry: ManifestEntry) -> ManifestEntry:
        return v3.carried(super().prepare_entry(entry), self.content(), self.row_ids or v3.RowIds(None, None))


class DeleteManifestWriterV3(ManifestWriterV3):
    """A delete manifest of a format-version 3 table (deletion vectors: file_format PUFFIN,
    referenced_data_file, content_offset, content_size_in_bytes)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def install_spec_manifest_types() -> None:
    """Manifests written with the spec's ``equality_ids: list<int>`` (see the module's list)."""
    import pyiceberg.manifest as manifests
    from pyiceberg.types import IntegerType, ListType, NestedField, StructType

    for version, struct in list(manifests.DATA_FILE_TYPE.items()):
        fields = []
        for f in struct.fields:
            if f.field_id == 135 and isinstance(f.field_type, ListType) and not isinstance(f.field_type.element_type, IntegerType):
                f = NestedField(field_id=f.field_id, name=f.name, required=f.required, doc=f.doc,
                                field_type=ListType(element_id=f.field_type.element_id, element_type=IntegerType(),
                                                    element_required=f.field_type.element_required))
            fields.append(f)
        manifests.DATA_FILE_TYPE[version] = StructType(*fields)


def manifest_header(writer) -> tuple[Schema, dict, object]:
    """What pyiceberg's manifest ``writer`` (not entered) writes in its file's header: the Iceberg
    schema of its entries, its key-value metadata (with ``avro.codec``), and its output file."""
    return writer._with_partition(writer.version), dict(writer._meta), writer._output_file


# ---- transactions -------------------------------------------------------------------------------


class CachingTransaction(Transaction):
    """pyiceberg's transaction, whose table_metadata is computed once per state. pyiceberg applies
    the staged updates and deep-copies the whole metadata (every snapshot of the table's history)
    on each access, and a snapshot producer reads it a dozen times per commit: a cost that grew
    with the table's history, not with what the commit changes (the catalog's commit still copies,
    parses and writes the whole metadata once: one metadata JSON per commit). The state is the
    table's metadata (replaced on a refresh) and the staged updates (a new tuple on each stage),
    held here, so the identity test is sound; callers treat the metadata as immutable, as
    pyiceberg's own code does."""

    _metadata_cache: tuple | None = None

    @property
    def table_metadata(self):
        base, updates = self._table.metadata, self._updates
        cached = self._metadata_cache
        if cached is None or cached[0] is not base or cached[1] is not updates:
            # nothing staged yet: the table's metadata itself, no copy
            cached = self._metadata_cache = (base, updates, super().table_metadata if updates else base)
        return cached[2]


def stage(tx: Transaction, updates: tuple, requirements: tuple = ()) -> None:
    """Stage table updates and their requirements on ``tx`` (one requirement per type is kept)."""
    tx._stage(tuple(updates), tuple(requirements))


class UpgradeToV3(UpgradeFormatVersionUpdate):
    """The upgrade of a format-version 2 table to 3 (pyiceberg applies none above 2)."""


@_apply_table_update.register(UpgradeToV3)
def _upgrade_to_v3(update, base_metadata, context):
    if base_metadata.format_version >= v3.VERSION:
        return base_metadata
    context.add_update(update)
    return v3.upgraded_metadata(base_metadata)


def upgrade_to_v3(tx: Transaction) -> None:
    """Stage the upgrade of ``tx``'s table (format version 2) to format version 3."""
    stage(tx, (UpgradeToV3(format_version=v3.VERSION),))


def require(tx: Transaction, requirement) -> None:
    """Add ``requirement`` to ``tx``'s, even when one of its type is there already."""
    tx._requirements += (requirement,)


def clean_all_uncommitted(tx: Transaction) -> None:
    """Delete the manifests and manifest lists every producer of ``tx`` wrote (nothing landed)."""
    for producer in tx._snapshot_producers:
        producer._clean_all_uncommitted()


# ---- validation and metrics ---------------------------------------------------------------------


def validate_data_files_exist(table: Table, head, data_files, base) -> None:
    """ValidationException if a commit after snapshot ``base`` up to ``head`` removed one of data_files."""
    _validate_data_files_exist(table, head, set(data_files), base)


def added_data_file_entries(table: Table, head, base) -> Iterator[ManifestEntry]:
    """The entries of the data files added by the commits after snapshot ``base`` up to ``head``."""
    return _added_data_files(table, head, None, None, base)


def inclusive_metrics(schema: Schema, expr: BooleanExpression, case_sensitive: bool = True,
                      include_empty_files: bool = False) -> Callable[[DataFile], bool]:
    """A test of whether a data file may hold rows matching expr, from its column metrics."""
    return _InclusiveMetricsEvaluator(schema, expr, case_sensitive, include_empty_files).eval


def strict_metrics(schema: Schema, expr: BooleanExpression, case_sensitive: bool = True) -> Callable[[DataFile], bool]:
    """A test of whether every row of a data file matches expr, from its column metrics (top-level
    columns only)."""
    return _StrictMetricsEvaluator(schema, expr, case_sensitive).eval


# ---- catalogs -----------------------------------------------------------------------------------


class MetadataWriteHook:
    """In front of a pyiceberg catalog class: ``writing_metadata(path)`` is called before the
    catalog writes a table metadata file (a commit, CREATE TABLE)."""

    def writing_metadata(self, metadata_path: str) -> None:
        """Override: the catalog is about to write ``metadata_path``."""

    def _write_metadata(self, metadata, io, metadata_path):
        self.writing_metadata(metadata_path)
        if metadata.format_version >= v3.VERSION:
            output = io.new_output(metadata_path)
            with output.create(overwrite=False) as stream:
                stream.write(Compressor.get_compressor(metadata_path).bytes_compressor()(
                    v3.metadata_json(metadata).encode("utf-8")))
            return None
        return super()._write_metadata(metadata, io, metadata_path)


def writes_metadata_files(catalog) -> bool:
    """Whether ``catalog`` writes table metadata files itself (MetadataWriteHook can stand in front
    of it), as pyiceberg's metastore catalogs do; a REST catalog's server writes its own."""
    return isinstance(catalog, MetastoreCatalog)


def catalog_file_io(catalog, location: str) -> FileIO:
    """The file IO ``catalog`` reads and writes ``location`` with."""
    return catalog._load_file_io(location=location)
