"""Manifest merging: the manifests of each new snapshot merged as Iceberg's Java writers merge them.

Every commit writes a manifest for the files it adds; carried over as they are, a table written
by 1,000 small statements would have 1,000 manifests to read for every query and every commit.
As Iceberg's MergingSnapshotProducer (append, overwrite, row delta, rewrite), each commit merges
the manifests of its new snapshot, data and delete manifests apart (never one manifest of both),
by Iceberg's ManifestMergeManager rules:
- manifests that name no live file and were not written by this commit are dropped;
- per partition spec (highest spec id first), the manifests in list order (this commit's new
  manifest first) are bin-packed by length into bins of commit.manifest.target-size-bytes,
  packing from the end (the oldest) with a lookback of 1, so order is kept and the bin left
  under-filled is the newest;
- a bin of several manifests is merged into one, except the bin holding the first manifest while
  it has fewer than commit.manifest.min-count-to-merge manifests.
A merged manifest keeps this commit's added and deleted entries as they are; every other live
entry becomes EXISTING with its snapshot id and data and file sequence numbers, so the rows and
which deletes apply to which files do not change; deleted entries of earlier commits are dropped.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pyiceberg.manifest import ManifestContent, ManifestEntryStatus
from pyiceberg.utils.bin_packing import ListPacker
from py4j.protocol import Py4JError

from lakerules.errors import LakeError
from lakerules.iceberg import v3
from lakerules.write import manifest_bulk

MANIFEST_MERGE_ENABLED = "commit.manifest-merge.enabled"
MANIFEST_MIN_MERGE_COUNT = "commit.manifest.min-count-to-merge"
MANIFEST_TARGET_SIZE_BYTES = "commit.manifest.target-size-bytes"
MANIFEST_MERGE_ENABLED_DEFAULT = True  # Iceberg Java's default (pyiceberg's is false)
MANIFEST_MIN_MERGE_COUNT_DEFAULT = 10  # Iceberg Java: 100 (see README: at most 9 small manifests)
MANIFEST_TARGET_SIZE_BYTES_DEFAULT = 8 * 1024 * 1024  # Iceberg Java's


@dataclass(frozen=True)
class MergePolicy:
    enabled: bool
    min_count: int
    target_size: int

    @classmethod
    def of(cls, properties: dict) -> "MergePolicy":
        def value(key, default, parse):
            text = properties.get(key)
            if text is None or str(text).strip() == "":
                return default
            try:
                return parse(str(text).strip())
            except ValueError:
                raise LakeError(f"lakerules: table property {key} is {text!r}, which is not a valid value") from None

        def boolean(text: str) -> bool:
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"

        target = value(MANIFEST_TARGET_SIZE_BYTES, MANIFEST_TARGET_SIZE_BYTES_DEFAULT, int)
        if target <= 0:
            raise LakeError(f"lakerules: table property {MANIFEST_TARGET_SIZE_BYTES} must be positive, not {target}")
        return cls(enabled=value(MANIFEST_MERGE_ENABLED, MANIFEST_MERGE_ENABLED_DEFAULT, boolean),
                   min_count=value(MANIFEST_MIN_MERGE_COUNT, MANIFEST_MIN_MERGE_COUNT_DEFAULT, int),
                   target_size=target)


def manifest_writer(producer, content: ManifestContent, spec_id: int):
    """A writer of a new manifest of ``content`` (data or deletes) and partition spec ``spec_id``
    for ``producer`` (a lakerules.iceberg.pyiceberg_edge producer)."""
    spec = producer.spec(spec_id)
    if content == ManifestContent.DELETES:
        return producer.new_delete_manifest_writer(spec)
    return producer.new_manifest_writer(spec)


def merge_manifests(producer, manifests: list) -> list:
    """The manifests of the producer's new snapshot (its own new manifests first), merged as the
    table's properties say (see above): data manifests, then delete manifests. On a format-version
    3 table, a carried data file's first_row_id is written out (lakerules.iceberg.v3.carried)."""
    policy = MergePolicy.of(producer.metadata.properties)
    live = [m for m in manifests
            if m.added_snapshot_id == producer.snapshot_id or m.has_added_files() or m.has_existing_files()]
    out = []
    for content in (ManifestContent.DATA, ManifestContent.DELETES):
        group = [m for m in live if m.content == content]
        out += _merge_group(producer, policy, content, group) if policy.enabled else group
    return out


def _merge_group(producer, policy: MergePolicy, content: ManifestContent, manifests: list) -> list:
    if not manifests:
        return []
    first = manifests[0]
    by_spec = defaultdict(list)
    for m in manifests:
        by_spec[m.partition_spec_id].append(m)
    out = []
    for spec_id in sorted(by_spec, reverse=True):
        packer = ListPacker(target_weight=policy.target_size, lookback=1, largest_bin_first=False)
        for manifest_bin in packer.pack_end(by_spec[spec_id], lambda m: m.manifest_length):
            if len(manifest_bin) == 1 or (first in manifest_bin and len(manifest_bin) < policy.min_count):
                out += manifest_bin
            else:
                out += _merged(producer, content, spec_id, manifest_bin)
    return out


def _merged(producer, content: ManifestContent, spec_id: int, manifests: list) -> list:
    """One manifest with the entries of manifests ([] when none is left): written by the JVM
    where it can (lakerules.write.manifest_bulk), else entry by entry here."""
    spark = manifest_bulk.session_for(producer)
    if spark is not None:
        try:
            return manifest_bulk.merged(spark, producer, manifest_writer(producer, content, spec_id), content, spec_id,
                                        manifests)
        except (Py4JError, ValueError):
            pass  # written here instead; a file the JVM left is deleted with the unlisted manifests
    return _merged_here(producer, content, spec_id, manifests)


def _merged_here(producer, content: ManifestContent, spec_id: int, manifests: list) -> list:
    own = producer.snapshot_id
    entries = []
    for manifest in manifests:
        for e in v3.entries(producer.io, manifest, producer.metadata.format_version, discard_deleted=False):
            if e.status == ManifestEntryStatus.DELETED:
                if e.snapshot_id == own:  # only this commit's removals; earlier ones are history
                    entries.append(("delete", e))
            elif e.status == ManifestEntryStatus.ADDED and e.snapshot_id == own:
                entries.append(("add", e))
            else:
                entries.append(("existing", e))
    if not entries:
        return []
    with manifest_writer(producer, content, spec_id) as writer:
        for kind, e in entries:
            getattr(writer, kind)(e)
    return [writer.to_manifest_file()]


class CleansUp:
    """A snapshot producer that deletes the manifests and manifest lists it wrote when staging its
    snapshot fails (a manifest of the table it cannot read, a failed validation): pyiceberg keeps
    them, as orphans, unless the catalog's commit failed."""

    def produce(self):
        try:
            return super().produce()
        except BaseException:
            self.clean_all_uncommitted()
            raise


class Merging(CleansUp):
    """A snapshot producer whose new snapshot lists merged manifests. The manifests it wrote that
    the committed snapshot does not list (its new manifest, merged into another) are deleted once
    the commit landed (pyiceberg calls cleanup_after_commit then)."""

    _listed: frozenset = frozenset()

    def process_manifests(self, manifests: list) -> list:
        return self.merge(manifests)

    def merge(self, manifests: list) -> list:
        out = merge_manifests(self, manifests)
        self._listed = frozenset(m.manifest_path for m in out)
        return out

    def cleanup_after_commit(self) -> None:
        super().cleanup_after_commit()
        for path in self.written_manifests:
            if path not in self._listed:
                try:
                    self.io.delete(path)
                except Exception:  # noqa: BLE001 - an unlisted file left behind is an orphan, no harm
                    pass


def entry_key(e):
    """A live entry's name: its file path; a deletion vector's, with the data file it references
    (a Puffin file holds several, which a commit may keep or remove one by one)."""
    target = v3.dv_target(e.data_file)
    return e.data_file.file_path if target is None else (e.data_file.file_path, target)


def _named(e, gone: set) -> bool:
    """Whether ``gone`` names entry ``e``: by its file path, or by its entry_key (a deletion
    vector alone of its Puffin file's)."""
    return e.data_file.file_path in gone or entry_key(e) in gone


def parent_manifests_without(producer, gone: set) -> tuple[list, list]:
    """The manifests of ``producer``'s parent snapshot less the live entries whose file path is in
    ``gone`` (or, a deletion vector alone, its (file path, referenced data file)): a manifest naming none of them is kept as it is, the others are written again with
    their other entries (as EXISTING, keeping snapshot ids and sequence numbers). Returns the
    manifests and the entries taken out."""
    manifests, deleted = [], []
    parent = producer.metadata.snapshot_by_id(producer.parent_snapshot_id)
    for manifest in parent.manifests(producer.io):
        entries = v3.entries(producer.io, manifest, producer.metadata.format_version)
        if not any(_named(e, gone) for e in entries):
            manifests.append(manifest)
            continue
        kept = []
        for e in entries:
            (deleted if _named(e, gone) else kept).append(e)
        if kept:
            with manifest_writer(producer, manifest.content, manifest.partition_spec_id) as writer:
                for e in kept:
                    writer.existing(e)
            manifests.append(writer.to_manifest_file())
    return manifests, deleted
