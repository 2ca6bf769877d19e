"""Iceberg's metadata tables, read as Spark tables: ``lake.db.t.<name>`` or ``lake.db.`t$<name>```.

Names, columns and types are those Iceberg's Spark runtime shows (MetadataTableType): snapshots,
history, metadata_log_entries, refs, manifests, all_manifests, files, data_files, delete_files,
all_files, all_data_files, all_delete_files, entries, all_entries, partitions, position_deletes.

The catalog (lakerules.iceberg.catalogs) answers the load of such a name with the metadata table's
schema, marked by a table property; resolve_scans turns the relation into a MetadataScan, and
its lowering builds the rows: metadata-only tables and manifest rows are built on the driver
from the table's metadata and manifests, and cross to Spark as one Arrow table (no Py4J call
per row); ``position_deletes`` is read by Spark from the delete files themselves. Spark's own
Filter and Project stay above, so filters and projections work as on any table.

Time travel (``VERSION AS OF``, ``TIMESTAMP AS OF``, the read options) works on the tables of
one snapshot, as in Iceberg: files, data_files, delete_files, entries, manifests, partitions,
position_deletes; the others describe the whole table and refuse it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFileContent, ManifestContent
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.types import ListType, MapType, NestedField, PrimitiveType, StructType as IStruct
from pyspark.sql import types as T

from lakerules.iceberg import names, v3
from lakerules.metadata import position_deletes
from lakerules.errors import LakeError, NotSupported
from lakerules.plan.nodes import Node
from lakerules.spark import shared

TABLES = (
    "snapshots", "history", "metadata_log_entries", "refs", "manifests", "all_manifests", "files", "data_files",
    "delete_files", "all_files", "all_data_files", "all_delete_files", "entries", "all_entries", "partitions",
    "position_deletes",
)
# the tables of one snapshot: time travel picks the snapshot
SNAPSHOT_TABLES = {"files", "data_files", "delete_files", "entries", "manifests", "partitions", "position_deletes"}

# the property that marks a loaded table as a metadata table (and the base table's identifier)
PROPERTY = shared.METADATA_TABLE_PROPERTY
BASE_PROPERTY = shared.METADATA_TABLE_BASE_PROPERTY

_LONG, _INT, _STR, _BOOL, _BIN, _TS = T.LongType(), T.IntegerType(), T.StringType(), T.BooleanType(), T.BinaryType(), T.TimestampType()


def f(name: str, dt, nullable: bool = True) -> T.StructField:
    return T.StructField(name, dt, nullable)


def split_name(namespace: tuple, name: str) -> tuple[tuple, str] | None:
    """(base table identifier, metadata table name as spelled) for ``ns.t.<name>`` or
    ``ns.`t$<name>```, or None when the name cannot be one."""
    if "$" in name:
        base, _, meta = name.rpartition("$")
        if base:
            return (*namespace, base), meta
        return None
    if len(namespace) >= 2:
        return tuple(namespace), name
    return None


def check_name(base_name: str, meta: str) -> str:
    if meta.lower() not in TABLES:
        raise LakeError(f"lakerules: table {base_name} has no metadata table {meta!r}; its metadata tables are "
                        f"{', '.join(TABLES)}")
    return meta.lower()


def check_time_travel(base_name: str, meta: str) -> None:
    if meta not in SNAPSHOT_TABLES:
        raise NotSupported(f"lakerules: metadata table {base_name}.{meta} describes the whole table and cannot be "
                           f"read at a snapshot (VERSION AS OF, TIMESTAMP AS OF, snapshot-id, ...), as in Iceberg; "
                           f"time travel works on {', '.join(sorted(SNAPSHOT_TABLES))}")


# ---- schemas ----------------------------------------------------------------------------------------


def partition_type(table) -> IStruct:
    """The partition type of every spec of the table together (Iceberg's Partitioning.partitionType):
    one field per partition field id, in field id order."""
    return table.metadata.specs_struct()


def _spark(t) -> T.DataType:
    from lakerules.iceberg.schema import iceberg_type_to_spark

    return iceberg_type_to_spark(t)


def _partition_spark(table) -> T.StructType:
    return T.StructType([f(x.name, _spark(x.field_type)) for x in partition_type(table).fields])


def _leaves(struct: IStruct, prefix: str = "") -> list[tuple[str, NestedField]]:
    """(full name, field) of every primitive column outside lists and maps, as Iceberg's readable
    metrics list them (sorted by name)."""
    out = []
    for x in struct.fields:
        name = f"{prefix}{x.name}"
        if isinstance(x.field_type, IStruct):
            out += _leaves(x.field_type, name + ".")
        elif isinstance(x.field_type, (ListType, MapType)):
            continue
        else:
            out.append((name, x))
    return out


def _metric_columns(table) -> list[tuple[str, NestedField]]:
    return sorted(_leaves(table.schema().as_struct()), key=lambda nx: nx[0])


def _readable_metrics_type(table) -> T.StructType:
    return T.StructType([
        f(name, T.StructType([
            f("column_size", _LONG), f("value_count", _LONG), f("null_value_count", _LONG),
            f("nan_value_count", _LONG), f("lower_bound", _spark(x.field_type)), f("upper_bound", _spark(x.field_type)),
        ]), False)
        for name, x in _metric_columns(table)
    ])


def _file_type(table) -> T.StructType:
    """DataFile.getType(partition type) as Spark shows it; no partition column for a table no
    spec of which has a partition field."""
    fields = [f("content", _INT, False), f("file_path", _STR, False), f("file_format", _STR, False),
              f("spec_id", _INT, False)]
    if partition_type(table).fields:
        fields.append(f("partition", _partition_spark(table), False))
    fields += [
        f("record_count", _LONG, False), f("file_size_in_bytes", _LONG, False),
        f("column_sizes", T.MapType(_INT, _LONG, False)), f("value_counts", T.MapType(_INT, _LONG, False)),
        f("null_value_counts", T.MapType(_INT, _LONG, False)), f("nan_value_counts", T.MapType(_INT, _LONG, False)),
        f("lower_bounds", T.MapType(_INT, _BIN, False)), f("upper_bounds", T.MapType(_INT, _BIN, False)),
        f("key_metadata", _BIN), f("split_offsets", T.ArrayType(_LONG, False)),
        f("equality_ids", T.ArrayType(_INT, False)), f("sort_order_id", _INT), f("first_row_id", _LONG),
        f("referenced_data_file", _STR), f("content_offset", _LONG), f("content_size_in_bytes", _LONG),
    ]
    return T.StructType(fields)


_SUMMARY = T.StructType([f("contains_null", _BOOL, False), f("contains_nan", _BOOL), f("lower_bound", _STR),
                         f("upper_bound", _STR)])
_MANIFESTS = [
    f("content", _INT, False), f("path", _STR, False), f("length", _LONG, False), f("partition_spec_id", _INT, False),
    f("added_snapshot_id", _LONG, False), f("added_data_files_count", _INT, False),
    f("existing_data_files_count", _INT, False), f("deleted_data_files_count", _INT, False),
    f("added_delete_files_count", _INT, False), f("existing_delete_files_count", _INT, False),
    f("deleted_delete_files_count", _INT, False), f("partition_summaries", T.ArrayType(_SUMMARY, False), False),
]


def spark_schema(table, meta: str) -> T.StructType:
    """The metadata table's columns, as Iceberg's Spark runtime shows them."""
    if meta == "snapshots":
        return T.StructType([f("committed_at", _TS, False), f("snapshot_id", _LONG, False), f("parent_id", _LONG),
                             f("operation", _STR), f("manifest_list", _STR), f("summary", T.MapType(_STR, _STR))])
    if meta == "history":
        return T.StructType([f("made_current_at", _TS, False), f("snapshot_id", _LONG, False), f("parent_id", _LONG),
                             f("is_current_ancestor", _BOOL, False)])
    if meta == "metadata_log_entries":
        return T.StructType([f("timestamp", _TS, False), f("file", _STR, False), f("latest_snapshot_id", _LONG),
                             f("latest_schema_id", _INT), f("latest_sequence_number", _LONG)])
    if meta == "refs":
        return T.StructType([f("name", _STR, False), f("type", _STR, False), f("snapshot_id", _LONG, False),
                             f("max_reference_age_in_ms", _LONG), f("min_snapshots_to_keep", _INT),
                             f("max_snapshot_age_in_ms", _LONG)])
    if meta == "manifests":
        return T.StructType(_MANIFESTS)
    if meta == "all_manifests":
        return T.StructType([*_MANIFESTS, f("reference_snapshot_id", _LONG, False)])
    if meta in ("files", "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files"):
        return T.StructType([*_file_type(table).fields, f("readable_metrics", _readable_metrics_type(table))])
    if meta in ("entries", "all_entries"):
        return T.StructType([f("status", _INT, False), f("snapshot_id", _LONG), f("sequence_number", _LONG),
                             f("file_sequence_number", _LONG), f("data_file", _file_type(table), False),
                             f("readable_metrics", _readable_metrics_type(table))])
    if meta == "partitions":
        fields = []
        if partition_type(table).fields:
            fields = [f("partition", _partition_spark(table), False), f("spec_id", _INT, False)]
        return T.StructType([
            *fields, f("record_count", _LONG, False), f("file_count", _INT, False),
            f("total_data_file_size_in_bytes", _LONG, False), f("position_delete_record_count", _LONG, False),
            f("position_delete_file_count", _INT, False), f("equality_delete_record_count", _LONG, False),
            f("equality_delete_file_count", _INT, False), f("last_updated_at", _TS), f("last_updated_snapshot_id", _LONG)])
    if meta == "position_deletes":
        from lakerules.iceberg.schema import iceberg_to_spark

        fields = [f("file_path", _STR, False), f("pos", _LONG, False), f("row", iceberg_to_spark(table.schema()))]
        if partition_type(table).fields:
            fields.append(f("partition", _partition_spark(table), False))
        return T.StructType([*fields, f("spec_id", _INT, False), f("delete_file_path", _STR, False)])
    raise LakeError(f"lakerules: no metadata table {meta!r}")


# ---- the plan node ------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MetadataScan(Node):
    """A read of a metadata table of ``table`` (a TableRef of the base table) at ``snapshot_id``
    (None: the current snapshot)."""

    table: Any
    meta: str
    snapshot_id: int | None
    output: tuple = field(repr=False)

    def describe(self) -> str:
        at = f" snapshot={self.snapshot_id}" if self.snapshot_id is not None else ""
        return f"MetadataScan {self.table}.{self.meta}{at}"


def lower_metadata_scan(ctx, scan: MetadataScan, lower):
    """The JVM plan of a metadata table's rows, with the relation's output attributes (exprIds)."""
    from lakerules.scan import explain
    from lakerules.spark import jvm as J

    t = scan.table
    table = ctx.catalogs.load(t.catalog, t.namespace, t.name)
    at = scan.snapshot_id if scan.snapshot_id is not None else (
        table.current_snapshot().snapshot_id if table.current_snapshot() is not None else None)
    explain.remember_label(scan.output, f"{t}.{scan.meta} (metadata table) snapshot={at}: "
                           + ("read by Spark from the position delete files" if scan.meta == "position_deletes"
                              else "rows built from the table's metadata and manifests, no data file read"))
    df = dataframe(ctx.spark, table, scan.meta, scan.snapshot_id)
    names = [a.name for a in scan.output]
    plan = J.optimized_plan(J.select(df, names))
    return J.rename_project(ctx.spark, plan, [a.jvm for a in scan.output])


def dataframe(spark, table, meta: str, snapshot_id: int | None = None):
    """The metadata table as a DataFrame."""
    schema = spark_schema(table, meta)
    if meta == "position_deletes":
        s = _snapshot(table, snapshot_id)
        files = []
        if s is not None:
            deletes = [m for m in s.manifests(table.io) if m.content == ManifestContent.DELETES]
            files = [e.data_file for entries in _live(table, deletes) for e in entries
                     if e.data_file.content == DataFileContent.POSITION_DELETES]
        return position_deletes.rows(spark, table, s, files, _FileRows(table), schema)
    from pyspark.sql.pandas.types import to_arrow_schema

    rows = ROWS[meta](table, snapshot_id)
    arrow = pa.Table.from_pylist(rows, schema=to_arrow_schema(schema, timezone="UTC"))
    return spark.createDataFrame(arrow, schema)


# ---- rows ------------------------------------------------------------------------------------------


def _snapshot(table, snapshot_id):
    if snapshot_id is not None:
        s = table.snapshot_by_id(snapshot_id)
        if s is None:
            raise LakeError(f"lakerules: table {names.table_name(table)} has no snapshot {snapshot_id}")
        return s
    return table.current_snapshot()


def _micros(ms: int | None):
    return None if ms is None else ms * 1000


def _snapshots(table, _sid):
    out = []
    for s in table.metadata.snapshots:
        summary = s.summary
        out.append({"committed_at": _micros(s.timestamp_ms), "snapshot_id": s.snapshot_id,
                    "parent_id": s.parent_snapshot_id,
                    "operation": summary.operation.value if summary is not None else None,
                    "manifest_list": s.manifest_list,
                    "summary": list(summary.additional_properties.items()) if summary is not None else None})
    return out


def _history(table, _sid):
    md = table.metadata
    current = table.current_snapshot()
    ancestors = {s.snapshot_id for s in ancestors_of(current, md)} if current is not None else set()
    out = []
    for e in md.snapshot_log:
        s = md.snapshot_by_id(e.snapshot_id)
        out.append({"made_current_at": _micros(e.timestamp_ms), "snapshot_id": e.snapshot_id,
                    "parent_id": s.parent_snapshot_id if s is not None else None,
                    "is_current_ancestor": e.snapshot_id in ancestors})
    return out


def _metadata_log_entries(table, _sid):
    md = table.metadata
    entries = [(e.timestamp_ms, e.metadata_file) for e in md.metadata_log]
    entries.append((md.last_updated_ms, table.metadata_location))
    out = []
    for ts, path in entries:
        # the snapshot current at the time: the last of the snapshot log at or before it
        latest = None
        for e in md.snapshot_log:
            if e.timestamp_ms <= ts:
                latest = md.snapshot_by_id(e.snapshot_id)
        out.append({"timestamp": _micros(ts), "file": path,
                    "latest_snapshot_id": latest.snapshot_id if latest is not None else None,
                    "latest_schema_id": latest.schema_id if latest is not None else None,
                    "latest_sequence_number": latest.sequence_number if latest is not None else None})
    return out


def _refs(table, _sid):
    return [{"name": name, "type": str(ref.snapshot_ref_type).upper(), "snapshot_id": ref.snapshot_id,
             "max_reference_age_in_ms": ref.max_ref_age_ms, "min_snapshots_to_keep": ref.min_snapshots_to_keep,
             "max_snapshot_age_in_ms": ref.max_snapshot_age_ms}
            for name, ref in table.metadata.refs.items()]


def _human(table, spec, i: int, raw: bytes | None):
    if raw is None:
        return None
    ptype = spec.partition_type(table.schema()).fields[i].field_type
    return spec.fields[i].transform.to_human_string(ptype, from_bytes(ptype, raw))


def _manifest_rows(table, snapshot, reference: bool):
    specs = table.metadata.specs()
    out = []
    for m in snapshot.manifests(table.io):
        data = m.content == ManifestContent.DATA
        spec = specs[m.partition_spec_id]
        row = {
            "content": int(m.content), "path": m.manifest_path, "length": m.manifest_length,
            "partition_spec_id": m.partition_spec_id, "added_snapshot_id": m.added_snapshot_id,
            "added_data_files_count": m.added_files_count if data else 0,
            "existing_data_files_count": m.existing_files_count if data else 0,
            "deleted_data_files_count": m.deleted_files_count if data else 0,
            "added_delete_files_count": 0 if data else m.added_files_count,
            "existing_delete_files_count": 0 if data else m.existing_files_count,
            "deleted_delete_files_count": 0 if data else m.deleted_files_count,
            "partition_summaries": [
                {"contains_null": s.contains_null, "contains_nan": s.contains_nan,
                 "lower_bound": _human(table, spec, i, s.lower_bound), "upper_bound": _human(table, spec, i, s.upper_bound)}
                for i, s in enumerate(m.partitions or [])],
        }
        if reference:
            row["reference_snapshot_id"] = snapshot.snapshot_id
        out.append(row)
    return out


def _manifests(table, sid):
    s = _snapshot(table, sid)
    return _manifest_rows(table, s, False) if s is not None else []


def _all_manifests(table, _sid):
    return [r for s in table.metadata.snapshots for r in _manifest_rows(table, s, True)]


class _FileRows:
    """DataFiles as rows of the files and entries tables."""

    def __init__(self, table):
        self.table = table
        self.specs = table.metadata.specs()
        self.ptype = partition_type(table)
        self.partitioned = bool(self.ptype.fields)
        self.metrics = _metric_columns(table)

    def partition(self, data_file) -> dict:
        spec = self.specs[data_file.spec_id]
        values = {x.field_id: data_file.partition[i] for i, x in enumerate(spec.fields)}
        return {x.name: values.get(x.field_id) for x in self.ptype.fields}

    def file(self, d, first_row_id: int | None = None) -> dict:
        """``d``'s row; on a v3 table (``d`` read in v3's layout) with its first_row_id (its own,
        else ``first_row_id``: what it inherits) and a deletion vector's fields."""
        row = {"content": int(d.content), "file_path": d.file_path, "file_format": str(d.file_format.value).upper(),
               "spec_id": d.spec_id}
        if self.partitioned:
            row["partition"] = self.partition(d)
        row.update({
            "record_count": d.record_count, "file_size_in_bytes": d.file_size_in_bytes,
            "column_sizes": _pairs(d.column_sizes), "value_counts": _pairs(d.value_counts),
            "null_value_counts": _pairs(d.null_value_counts), "nan_value_counts": _pairs(d.nan_value_counts),
            "lower_bounds": _pairs(d.lower_bounds), "upper_bounds": _pairs(d.upper_bounds),
            "key_metadata": d.key_metadata, "split_offsets": d.split_offsets, "equality_ids": d.equality_ids,
            "sort_order_id": d.sort_order_id, "first_row_id": None, "referenced_data_file": None,
            "content_offset": None, "content_size_in_bytes": None,
        })
        if self.table.format_version >= v3.VERSION:
            own = v3.first_row_id_of(d)
            row["first_row_id"] = own if own is not None else first_row_id
            row["referenced_data_file"], row["content_offset"], row["content_size_in_bytes"] = v3.deletion_vector_of(d)
        return row

    def readable(self, d) -> dict:
        sizes, values, nulls, nans = (d.column_sizes or {}), (d.value_counts or {}), (d.null_value_counts or {}), (d.nan_value_counts or {})
        lower, upper = d.lower_bounds or {}, d.upper_bounds or {}
        out = {}
        for name, x in self.metrics:
            fid = x.field_id
            out[name] = {"column_size": sizes.get(fid), "value_count": values.get(fid),
                         "null_value_count": nulls.get(fid), "nan_value_count": nans.get(fid),
                         "lower_bound": _bound(x.field_type, lower.get(fid)),
                         "upper_bound": _bound(x.field_type, upper.get(fid))}
        return out


def _pairs(m):
    return None if m is None else list(m.items())


def _bound(t, raw):
    if raw is None or not isinstance(t, PrimitiveType):
        return None
    value = from_bytes(t, raw)
    if hasattr(value, "hex") and type(value).__name__ == "UUID":
        return str(value)
    return value


_CONTENTS = {
    "files": None, "all_files": None,
    "data_files": {DataFileContent.DATA}, "all_data_files": {DataFileContent.DATA},
    "delete_files": {DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES},
    "all_delete_files": {DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES},
}


def _all_manifest_files(table) -> list:
    """Every manifest of every snapshot, each once."""
    seen: dict[str, Any] = {}
    for s in table.metadata.snapshots:
        for m in s.manifests(table.io):
            seen.setdefault(m.manifest_path, m)
    return list(seen.values())


def _live(table, manifests) -> list[list]:
    """The live entries of each manifest, read by a thread pool through the process's manifest
    cache (lakerules.scan.manifests: planning shares it; a manifest never changes)."""
    from concurrent.futures import ThreadPoolExecutor

    from lakerules.scan import manifests as cached

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda m: cached.CACHE.get(table.io, m).entries, manifests))


def _files_of(meta: str):
    def rows(table, sid):
        wanted = _CONTENTS[meta]
        if meta.startswith("all_"):
            manifests = _all_manifest_files(table)
        else:
            s = _snapshot(table, sid)
            manifests = s.manifests(table.io) if s is not None else []
        fr = _FileRows(table)
        out = []
        manifests = [m for m in manifests
                     if wanted is None or (m.content == ManifestContent.DATA) == (DataFileContent.DATA in wanted)]
        listed = _v3_entries(table, manifests, meta.startswith("all_"), sid) if table.format_version >= v3.VERSION \
            else [(entries, {}) for entries in _live(table, manifests)]
        for entries, ids in listed:
            for e in entries:
                d = e.data_file
                if wanted is not None and d.content not in wanted:
                    continue
                row = fr.file(d, ids.get(d.file_path))
                row["readable_metrics"] = fr.readable(d)
                out.append(row)
        return out
    return rows


def _v3_entries(table, manifests: list, every_snapshot: bool, sid, discard_deleted: bool = True) -> list:
    """(entries in v3's layout, data file path -> the first_row_id it inherits) of each manifest of
    a v3 table; the manifests' first_row_ids from the manifest list of snapshot ``sid`` (or of
    every snapshot: the all_ tables)."""
    firsts: dict = {}
    snapshots = table.metadata.snapshots if every_snapshot else [_snapshot(table, sid)]
    for s in snapshots:
        if s is not None:
            firsts.update(v3.manifest_first_row_ids(table.io, s.manifest_list))
    out = []
    for m in manifests:
        entries = v3.read_entries(table.io, m, discard_deleted)
        ids = v3.inherited_first_row_ids(entries, firsts.get(m.manifest_path)) \
            if m.content == ManifestContent.DATA else {}
        out.append((entries, ids))
    return out


def _entries_of(meta: str):
    def rows(table, sid):
        if meta == "all_entries":
            manifests = _all_manifest_files(table)
        else:
            s = _snapshot(table, sid)
            manifests = s.manifests(table.io) if s is not None else []
        fr = _FileRows(table)
        out = []
        listed = _v3_entries(table, manifests, meta == "all_entries", sid, discard_deleted=False) \
            if table.format_version >= v3.VERSION else \
            [(m.fetch_manifest_entry(table.io, discard_deleted=False), {}) for m in manifests]
        for entries, ids in listed:
            for e in entries:
                out.append({"status": int(e.status), "snapshot_id": e.snapshot_id, "sequence_number": e.sequence_number,
                            "file_sequence_number": e.file_sequence_number,
                            "data_file": fr.file(e.data_file, ids.get(e.data_file.file_path)),
                            "readable_metrics": fr.readable(e.data_file)})
        return out
    return rows


def _partitions(table, sid):
    s = _snapshot(table, sid)
    if s is None:
        return []
    fr = _FileRows(table)
    groups: dict[str, dict] = {}
    for entries in _live(table, s.manifests(table.io)):
        for e in entries:
            d = e.data_file
            part = fr.partition(d) if fr.partitioned else {}
            key = json.dumps(part, sort_keys=True, default=str)
            row = groups.get(key)
            if row is None:
                row = groups[key] = {
                    "record_count": 0, "file_count": 0, "total_data_file_size_in_bytes": 0,
                    "position_delete_record_count": 0, "position_delete_file_count": 0,
                    "equality_delete_record_count": 0, "equality_delete_file_count": 0,
                    "last_updated_at": None, "last_updated_snapshot_id": None}
                if fr.partitioned:
                    row["partition"], row["spec_id"] = part, d.spec_id
            written = table.snapshot_by_id(e.snapshot_id) if e.snapshot_id is not None else None
            if written is not None and (row["last_updated_at"] is None
                                        or row["last_updated_at"] < _micros(written.timestamp_ms)):
                row["last_updated_at"] = _micros(written.timestamp_ms)
                row["last_updated_snapshot_id"] = written.snapshot_id
            if d.content == DataFileContent.DATA:
                row["record_count"] += d.record_count
                row["file_count"] += 1
                row["total_data_file_size_in_bytes"] += d.file_size_in_bytes
            elif d.content == DataFileContent.POSITION_DELETES:
                row["position_delete_record_count"] += d.record_count
                row["position_delete_file_count"] += 1
            else:
                row["equality_delete_record_count"] += d.record_count
                row["equality_delete_file_count"] += 1
    return list(groups.values())


ROWS = {
    "snapshots": _snapshots, "history": _history, "metadata_log_entries": _metadata_log_entries, "refs": _refs,
    "manifests": _manifests, "all_manifests": _all_manifests, "partitions": _partitions,
    **{m: _files_of(m) for m in _CONTENTS}, "entries": _entries_of("entries"), "all_entries": _entries_of("all_entries"),
}
