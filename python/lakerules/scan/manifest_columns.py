"""Manifests decoded in the driver's JVM into Arrow columns, for the manifest cache.

The first planning of a table in a process reads each manifest it has not cached. Through
pyiceberg's Avro reader that is a Python object per entry (a ManifestEntry, its DataFile and its
metric maps): seconds for 100,000 files, before the query reads a single row. Here the shim's
``ManifestColumns`` decodes a manifest in the JVM into one Arrow table, one row per live entry:
the entry's fields, its metric maps as binary values, its partition values, and the lower and
upper bounds of every column of the table's schema that the bulk pre-filter compares
(lakerules.scan.manifests.may_match), already decoded. The cache keeps that table; planning's
pre-filter runs over its columns, and only the entries it keeps become pyiceberg ManifestEntry
objects (each made once, then kept), with their sequence numbers and snapshot id inherited from
the manifest as pyiceberg's reader inherits them. The entries are those pyiceberg's reader gives,
field by field (tests/test_manifest_bulk.py).

Used for format-version 1 and 2 tables when planning has a session (queries, row-level
statements); a manifest whose partition types it does not carry, or that the JVM cannot read, is
read by pyiceberg as before.
"""

from __future__ import annotations

import struct
import threading
from collections import defaultdict
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JError
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import ManifestEntry, ManifestFile
from pyiceberg.schema import index_by_id
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BooleanType, DateType, DoubleType, FloatType, IntegerType, LongType, StringType, TimestampType,
    TimestamptzType, TimeType,
)

from lakerules.errors import LakeError
from lakerules.iceberg.inheritance import inherit_columns
from lakerules.scan import manifest_job
from lakerules.scan.manifests import CACHE, arrow_type
from lakerules.spark import manifest_io

# Iceberg type -> how the shim passes a partition value on (anything else: its bytes)
_PARTITION_KINDS = {
    IntegerType: "int", DateType: "int", LongType: "long", TimeType: "long", TimestampType: "long",
    TimestamptzType: "long", FloatType: "float", DoubleType: "double", BooleanType: "boolean", StringType: "string",
}
_ENTRY = ("status", "snapshot_id", "sequence_number", "file_sequence_number", "content", "file_path", "file_format",
          "record_count", "file_size_in_bytes", "key_metadata", "sort_order_id", "split_offsets", "equality_ids",
          "column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds")
MAX_FORMAT_VERSION = 2


def reader(spark, table) -> Callable[[list[ManifestFile]], dict] | None:
    """How the manifest cache reads the manifests of ``table`` it lacks: a function of a list of
    manifests to a dict of their paths to ColumnarManifest (those it leaves out pyiceberg reads);
    None: pyiceberg reads every one."""
    if spark is None or table.metadata.format_version > MAX_FORMAT_VERSION:
        return None
    schema, specs = table.schema(), table.metadata.specs()
    bounds = sorted((fid, kind) for fid, f in index_by_id(schema).items()
                    if (kind := manifest_job.BOUND_KINDS.get(type(f.field_type))) is not None)
    kinds = {fid: kind for fid, kind in bounds}

    def read(manifests: list[ManifestFile]) -> dict:
        chosen = []
        for manifest in manifests:
            spec = specs.get(manifest.partition_spec_id)
            if spec is None:
                continue
            fields = spec.partition_type(schema).fields
            try:
                convert = [manifest_job.partition_value(f.field_type) for f in fields]
            except LakeError:
                continue  # a partition type the columns do not carry: pyiceberg reads it
            chosen.append((manifest, convert, [_PARTITION_KINDS.get(type(f.field_type), "binary") for f in fields]))
        by_spec = defaultdict(list)
        for manifest, convert, partition_kinds in chosen:
            by_spec[manifest.partition_spec_id].append((manifest, convert, partition_kinds))
        out = {}
        for group in by_spec.values():
            try:
                tables = manifest_io.manifest_columns(spark, [m.manifest_path for m, _, _ in group], group[0][2], bounds)
            except (Py4JError, OSError):
                continue  # pyiceberg reads them (and says what is wrong with them, if anything)
            out.update({m.manifest_path: ColumnarManifest(t, m, convert, kinds)
                        for (m, convert, _), t in zip(group, tables)})
        return out

    return read


class ColumnarManifest:
    """The live entries of one manifest as Arrow columns (see above); the cache's CachedManifest
    interface: ``size``, ``take(indices)``, ``entries``, ``bounds``, ``partition_values``."""

    def __init__(self, columns: pa.Table, manifest: ManifestFile, convert: list, bound_kinds: dict[int, str]):
        self._columns = columns
        self._manifest = manifest
        self._convert = convert
        self._bound_kinds = bound_kinds
        self.size = columns.num_rows
        self._made: list = [None] * self.size
        self._lock = threading.Lock()

    @property
    def entries(self) -> list[ManifestEntry]:
        return self.take(range(self.size))

    def take(self, indices) -> list[ManifestEntry]:
        indices = list(indices)
        with self._lock:
            missing = [i for i in indices if self._made[i] is None]
            if missing:
                taken = self._columns.take(pa.array(missing, pa.int64()))
                rows = taken.select(list(_ENTRY)).to_pylist()
                parts = [taken.column(f"p{k}").to_pylist() for k in range(len(self._convert))]
                for j, (i, row) in enumerate(zip(missing, rows)):
                    partition = Record(*[c(p[j]) for c, p in zip(self._convert, parts)])
                    self._made[i] = self._entry(row, partition)
            return [self._made[i] for i in indices]

    def _entry(self, r: dict, partition: Record) -> ManifestEntry:
        decoded = {**r, **{k: _long_map(r[k]) for k in _LONG_MAPS}, **{k: _bytes_map(r[k]) for k in _BYTES_MAPS},
                   "split_offsets": _numbers(r["split_offsets"], "q"), "equality_ids": _numbers(r["equality_ids"], "i")}
        return manifest_job.entry_of(decoded, partition, self._manifest.partition_spec_id, self._manifest)

    def inherited(self) -> pa.Table:
        """The columns with the snapshot id and sequence numbers entries inherit from the manifest
        filled in (as pyiceberg's reader inherits them)."""
        return inherit_columns(self._columns, self._manifest)

    def bounds(self, field_id: int, iceberg_type) -> tuple[pa.Array, pa.Array] | None:
        """(lower, upper) bound of a column per entry (null where a file has none)."""
        kind = arrow_type(iceberg_type)
        if kind is None:
            return None
        if self._bound_kinds.get(field_id) == manifest_job.BOUND_KINDS.get(type(iceberg_type)):
            lower, upper = self._columns.column(f"lower_{field_id}"), self._columns.column(f"upper_{field_id}")
            return lower.combine_chunks().cast(kind), upper.combine_chunks().cast(kind)
        # another type than the columns were decoded for: from the maps' bytes
        out = []
        for name in ("lower_bounds", "upper_bounds"):
            values = []
            for raw in self._columns.column(name).to_pylist():
                b = (_bytes_map(raw) or {}).get(field_id)
                values.append(None if b is None else from_bytes(iceberg_type, b))
            out.append(pa.array(values, kind))
        return out[0], out[1]

    def partition_values(self, position: int, iceberg_type) -> pa.Array | None:
        kind = arrow_type(iceberg_type)
        if kind is None or position >= len(self._convert):
            return None
        column = self._columns.column(f"p{position}").combine_chunks()
        try:
            return column.cast(kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None  # a value of an unexpected kind: test nothing


def carry(merged: ManifestFile, inputs: list[ManifestFile], snapshot_id: int) -> None:
    """Cache the live entries of ``merged``, a manifest a commit (``snapshot_id``) merged from
    ``inputs`` into EXISTING entries, from the inputs' cached columns: the next planning need not
    read it. Nothing when an input is not cached as columns, or holds entries this commit added
    (their sequence numbers are assigned at the commit)."""
    parts, first = [], None
    for m in inputs:
        cached = CACHE.peek(m.manifest_path)
        if not isinstance(cached, ColumnarManifest) or m.sequence_number is None or m.sequence_number < 0:
            return
        if first is None:
            first = cached
        elif cached._columns.schema != first._columns.schema or cached._bound_kinds != first._bound_kinds:
            return
        columns = cached.inherited()
        if pc.any(pc.equal(columns.column("snapshot_id"), snapshot_id)).as_py():
            return
        parts.append(columns)
    if first is None:
        return
    table = pa.concat_tables(parts)
    if table.num_rows != (merged.added_files_count or 0) + (merged.existing_files_count or 0):
        return  # not the entries the JVM kept: the next planning reads the manifest
    table = table.set_column(table.schema.get_field_index("status"), "status",
                             pa.array([0] * table.num_rows, pa.int32()))  # EXISTING
    CACHE.put(merged.manifest_path, ColumnarManifest(table, merged, first._convert, first._bound_kinds))


_LONG_MAPS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
_BYTES_MAPS = ("lower_bounds", "upper_bounds")


def _long_map(raw: bytes | None) -> dict | None:
    return None if raw is None else dict(struct.iter_unpack("<iq", raw))


def _bytes_map(raw: bytes | None) -> dict | None:
    if raw is None:
        return None
    out, at = {}, 0
    while at < len(raw):
        key, n = struct.unpack_from("<ii", raw, at)
        out[key] = raw[at + 8:at + 8 + n]
        at += 8 + n
    return out


def _numbers(raw: bytes | None, code: str) -> list | None:
    return None if raw is None else [v for (v,) in struct.iter_unpack("<" + code, raw)]
