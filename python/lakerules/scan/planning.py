"""Scan planning: which data files a scan reads, and which delete files apply to each.

The steps of seed 003 (pyiceberg's hidden partition pruning), plus equality deletes:

1. manifests are pruned with the manifest list's partition summaries, through an inclusive
   projection of the row filter built lazily per partition spec id;
2. manifest entries are pruned by their partition values, then by their column metrics: first in
   bulk over each manifest's cached entries (lakerules.scan.manifests: Arrow columns of partition
   values and bounds, a conservative pre-filter), then one by one by pyiceberg's exact
   evaluators, on what the pre-filter kept;
3. position delete files are indexed by the one data file they name (equal ``file_path`` bounds)
   and otherwise by partition; each applies to data files with a data sequence number <= its own
   whose path lies within its ``file_path`` bounds, in any URI form a local path was written in
   (one comparison of UTF-8 bytes each, as an inclusive metrics test of ``file_path = path``);
4. equality delete files apply to data files of the same spec and partition (or to every data
   file when their spec is unpartitioned) with a data sequence number strictly below their own.

Deletion vectors (Iceberg v3, Puffin files) are refused with a clear error: never ignored.
"""

from __future__ import annotations

import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import chain
from typing import Callable

import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import (
    bind,
    expression_evaluator,
    inclusive_projection,
    manifest_evaluator,
    rewrite_not,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import KeyDefaultDict

from lakerules.scan import deletion_vectors, manifests as cached
from lakerules.iceberg import names, pyiceberg_edge as edge
from lakerules.errors import NotSupported

MANIFEST_THREADS = 8


# (manifests to read, the bound NOT-free row filter) -> (paths of the manifests it read, their
# live entries that may match): reads some manifests elsewhere than this process
RemoteReader = Callable[[list[ManifestFile], BooleanExpression], tuple[set[str], list[ManifestEntry]]]


@dataclass(frozen=True, eq=False)
class PlannedFile:
    """A data file to read, with the delete files that apply to it."""

    file: DataFile
    sequence_number: int
    position_deletes: tuple[DataFile, ...] = ()
    equality_deletes: tuple[DataFile, ...] = ()
    snapshot_id: int | None = None  # the snapshot that added the file
    # the data sequence number of each of equality_deletes, by path (lakerules.scan.read's anti-join)
    equality_sequence: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ScanPlan:
    files: tuple[PlannedFile, ...] = ()
    total_data_files: int = 0
    position_delete_files: tuple[DataFile, ...] = field(default=())
    equality_delete_files: tuple[DataFile, ...] = field(default=())


def plan_scan(table: Table, snapshot_id: int | None, row_filter: BooleanExpression = AlwaysTrue(),
              remote: RemoteReader | None = None, bulk=None) -> ScanPlan:
    """The files of a snapshot that may hold rows matching row_filter, with their deletes.
    ``remote`` may read some of the manifests elsewhere (lakerules.scan.manifest_job); ``bulk``
    reads the manifests not cached into columns (lakerules.scan.manifest_columns.reader)."""
    if snapshot_id is None:
        return ScanPlan()
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise NotSupported(f"lakerules: table {names.table_name(table)} has no snapshot {snapshot_id}")
    metadata = table.metadata
    schema = table.schema()
    manifests = snapshot.manifests(table.io)
    total = sum(
        (m.added_files_count or 0) + (m.existing_files_count or 0) for m in manifests if m.content == ManifestContent.DATA
    )

    # 1. manifests, by their partition summaries; evaluators are built per spec, on first use
    partition_filters = KeyDefaultDict(lambda spec_id: inclusive_projection(schema, metadata.specs()[spec_id])(row_filter))
    manifest_evaluators = KeyDefaultDict(
        lambda spec_id: manifest_evaluator(metadata.specs()[spec_id], schema, partition_filters[spec_id], True)
    )
    manifests = [m for m in manifests if manifest_evaluators[m.partition_spec_id](m)]

    # 2. entries, by partition values, then by column metrics
    def partition_evaluator(spec_id: int):
        partition_type = metadata.specs()[spec_id].partition_type(schema)
        evaluate = expression_evaluator(Schema(*partition_type.fields), partition_filters[spec_id], True)
        return lambda data_file: evaluate(data_file.partition)

    partition_evaluators = KeyDefaultDict(partition_evaluator)
    metrics = edge.inclusive_metrics(schema, row_filter, True, False)
    # the same tests over whole manifests at once, from cached Arrow columns (see manifests.py)
    row_prefilter = _bound(schema, row_filter)
    partition_prefilters = KeyDefaultDict(lambda spec_id: _partition_prefilter(metadata.specs()[spec_id], schema,
                                                                               partition_filters[spec_id]))

    def entries(manifest) -> list[ManifestEntry]:
        keep = partition_evaluators[manifest.partition_spec_id]
        hit = prefetched.get(manifest.manifest_path) or cached.CACHE.get(table.io, manifest)
        candidates = _prefiltered(hit, row_prefilter, partition_prefilters[manifest.partition_spec_id])
        return [e for e in candidates if keep(e.data_file) and metrics(e.data_file)]

    # the manifests a remote reader takes (a Spark job) come back pre-filtered by row metrics
    done, remote_entries = remote(manifests, row_prefilter) if remote is not None else (set(), [])
    if done:
        manifests = [m for m in manifests if m.manifest_path not in done]
    if isinstance(row_filter, AlwaysTrue):
        # every live entry becomes a planned file: pyiceberg's reader makes those objects sooner
        # than columns decoded in the JVM and then turned into objects
        bulk = None
    prefetched = cached.CACHE.fill(manifests, bulk) if bulk is not None else {}
    with ThreadPoolExecutor(MANIFEST_THREADS) as pool:
        all_entries = list(chain.from_iterable(pool.map(entries, manifests)))
    for e in remote_entries:
        if partition_evaluators[e.data_file.spec_id](e.data_file) and metrics(e.data_file):
            all_entries.append(e)

    # 3. and 4. index the delete files
    data: list[ManifestEntry] = []
    positions = _PositionDeleteIndex()
    equality = _EqualityDeleteIndex(metadata)
    position_files: list[DataFile] = []
    for entry in all_entries:
        f = entry.data_file
        if f.file_format == FileFormat.PUFFIN:  # a deletion vector: indexed below, from v3's manifests
            if metadata.format_version < 3:
                raise NotSupported(
                    f"lakerules: table {names.table_name(table)} has deletion vectors ({f.file_path}) but is format "
                    f"version {metadata.format_version}; Iceberg has them in version 3 tables only")
            continue
        if f.content == DataFileContent.DATA:
            data.append(entry)
        elif f.content == DataFileContent.POSITION_DELETES:
            positions.add(entry)
            position_files.append(f)
        elif f.content == DataFileContent.EQUALITY_DELETES:
            equality.add(entry)
        else:
            raise NotSupported(f"lakerules: unknown content {f.content} in {f.file_path}")

    # deletion vectors (format version 3): where a data file has one, its position delete files are not read
    dvs = deletion_vectors.index(table, snapshot.manifests(table.io)) if metadata.format_version >= 3 else {}
    planned = []
    for entry in data:
        seq = entry.sequence_number or 0
        f = entry.data_file
        eq = equality.for_data_file(seq, f)
        dv = deletion_vectors.for_data_file(dvs, f, seq)
        planned.append(
            PlannedFile(
                file=f,
                sequence_number=seq,
                position_deletes=(dv,) if dv is not None else tuple(sorted(positions.for_data_file(seq, f), key=_path)),
                equality_deletes=tuple(sorted(eq, key=_path)),
                snapshot_id=entry.snapshot_id,
                equality_sequence={d.file_path: equality.sequence[d.file_path] for d in eq},
            )
        )
    used_pos = {d.file_path: d for p in planned for d in p.position_deletes}
    used_eq = {d.file_path: d for p in planned for d in p.equality_deletes}
    return ScanPlan(
        files=tuple(planned),
        total_data_files=total,
        position_delete_files=tuple(used_pos.values()),
        equality_delete_files=tuple(used_eq.values()),
    )


def _bound(schema: Schema, expr: BooleanExpression) -> BooleanExpression:
    """expr bound to schema with NOT pushed down, for the pre-filter; AlwaysTrue (test nothing)
    when it does not bind: the exact evaluators then decide."""
    try:
        return bind(schema, rewrite_not(expr), case_sensitive=True)
    except Exception:  # noqa: BLE001 - only the pre-filter gives up; pyiceberg's evaluators still run
        return AlwaysTrue()


def _partition_prefilter(spec, schema: Schema, partition_filter: BooleanExpression):
    """(bound partition filter, partition field id -> position in the partition tuple)."""
    fields = spec.partition_type(schema).fields
    return _bound(Schema(*fields), partition_filter), {f.field_id: i for i, f in enumerate(fields)}


def _prefiltered(manifest: cached.CachedManifest, row_filter: BooleanExpression, partition) -> list[ManifestEntry]:
    """The entries of a cached manifest that the bulk pre-filter keeps (see manifests.may_match)."""
    n = manifest.size
    part_filter, positions = partition
    masks = [
        cached.may_match(row_filter, n, manifest.bounds),
        cached.may_match(part_filter, n, lambda fid, t: _same(manifest.partition_values(positions[fid], t))),
    ]
    masks = [m for m in masks if m is not None]
    if not masks:
        return manifest.entries
    keep = masks[0] if len(masks) == 1 else pc.and_(masks[0], masks[1])
    return manifest.take(pc.indices_nonzero(keep).to_pylist())


def _same(values):
    """A partition value as both bounds of a one-value range."""
    return None if values is None else (values, values)


PATH_FIELD_ID = 2147483546  # file_path of a position delete file (Iceberg's reserved field id)


class _PositionDeleteIndex:
    """Position delete files by the one data file they name (equal ``file_path`` bounds, in
    normal path form), the others by (spec, partition) with their ``file_path`` bounds."""

    def __init__(self):
        self._by_path: dict[str, list[tuple[int, DataFile]]] = defaultdict(list)
        self._by_partition: dict[tuple, list[tuple[int, DataFile, bytes | None, bytes | None]]] = defaultdict(list)

    def add(self, entry: ManifestEntry) -> None:
        f = entry.data_file
        seq = entry.sequence_number or 0
        lower = (f.lower_bounds or {}).get(PATH_FIELD_ID)
        upper = (f.upper_bounds or {}).get(PATH_FIELD_ID)
        named = _decoded(lower) if lower is not None and lower == upper else None
        if named is not None:
            self._by_path[_bare(named)].append((seq, f))
        else:
            self._by_partition[(f.spec_id, _key(f.partition))].append((seq, f, lower, upper))

    def for_data_file(self, data_seq: int, f: DataFile) -> set[DataFile]:
        out = {d for seq, d in self._by_path.get(_bare(f.file_path), ()) if data_seq <= seq}
        ranged = self._by_partition.get((f.spec_id, _key(f.partition)))
        if ranged:
            forms = [form.encode() for form in _path_forms(f.file_path)]
            for seq, d, lower, upper in ranged:
                if data_seq <= seq and (lower is None or upper is None
                                        or any(lower <= form <= upper for form in forms)):
                    out.add(d)
        return out


def _decoded(value: bytes) -> str | None:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _bare(path: str) -> str:
    """One form of a local path however written (file:/x, file:///x, /x): /x."""
    return re.sub(r"^file:/*", "/", path)


def _path_forms(path: str) -> list[str]:
    bare = _bare(path)
    if bare == path and not path.startswith("/"):
        return [path]  # another scheme (s3://...): one form
    return list(dict.fromkeys([path, bare, "file:" + bare, "file://" + bare]))


def _path(f: DataFile) -> str:
    return f.file_path


class _EqualityDeleteIndex:
    """Equality delete files by (spec, partition), and those of unpartitioned specs (global)."""

    def __init__(self, metadata):
        self._metadata = metadata
        self._global: list[tuple[int, DataFile]] = []
        self._by_partition: dict[tuple, list[tuple[int, DataFile]]] = defaultdict(list)
        self.sequence: dict[str, int] = {}  # path -> data sequence number

    def add(self, entry: ManifestEntry) -> None:
        f = entry.data_file
        seq = entry.sequence_number or 0
        self.sequence[f.file_path] = seq
        if self._metadata.specs()[f.spec_id].is_unpartitioned():
            self._global.append((seq, f))
        else:
            self._by_partition[(f.spec_id, _key(f.partition))].append((seq, f))

    def for_data_file(self, data_seq: int, f: DataFile) -> set[DataFile]:
        if not self._global and not self._by_partition:
            return set()
        candidates = chain(self._global, self._by_partition.get((f.spec_id, _key(f.partition)), ()))
        return {d for seq, d in candidates if data_seq < seq}


def _key(partition) -> tuple:
    return tuple(partition) if partition is not None else ()
