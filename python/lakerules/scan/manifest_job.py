"""Distributed scan planning: manifests read by a Spark job when a scan has many to read.

Planning reads every manifest a scan's snapshot lists and the partition summaries do not rule
out (lakerules.scan.planning, step 2). On the driver that is one thread pool over the manifests;
when there are many and they are not in the manifest cache, the same reading runs as a Spark job
instead, so a cluster reads them in parallel (as Iceberg's ``SparkDistributedDataScan`` does):

1. each task reads whole manifests on an executor (the shim's ``ManifestEntries``: Avro through
   Spark's Hadoop file system) and makes a row per live entry, with the lower and upper bounds
   of the filter's columns decoded;
2. in the same job, a conservative filter over those bounds (the pre-filter of
   lakerules.scan.manifests, as Spark column expressions) drops data files whose bounds prove no row
   matches; delete files are all kept;
3. the surviving rows come back to the driver as one Arrow table and become pyiceberg manifest
   entries, with sequence numbers and snapshot ids inherited from their manifest as the Iceberg
   spec says. Planning then runs its exact evaluators over them, as over cached entries.

Which way a scan plans follows Iceberg's settings: the session's
``spark.sql.iceberg.data-planning-mode`` / ``spark.sql.iceberg.delete-planning-mode``, else the
table properties ``read.data-planning-mode`` / ``read.delete-planning-mode``: ``local``,
``distributed`` or ``auto`` (the default: see ``Auto``).
"""

from __future__ import annotations

import os
import uuid
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
from pyiceberg.expressions import And, BooleanExpression, Or
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyspark.sql import Column, DataFrame, functions as F
from pyspark.sql import types as T

from lakerules.spark import jvm as J, settings
from lakerules.errors import LakeError
from lakerules.iceberg.inheritance import inherit
from lakerules.scan.manifests import Ops, may_match

MODES = ("auto", "local", "distributed")
DATA_MODE_CONF, DELETE_MODE_CONF = "spark.sql.iceberg.data-planning-mode", "spark.sql.iceberg.delete-planning-mode"
DATA_MODE_PROP, DELETE_MODE_PROP = "read.data-planning-mode", "read.delete-planning-mode"
MIN_BYTES_KEY = "spark.lakerules.planning.distributedMinBytes"
MIN_BYTES_DEFAULT = 8 << 20  # the job breaks even near 1 MB (bench/RESULTS.md, scale planning)

# Iceberg type -> (kind of its bounds for the shim, Spark type of the decoded bound)
_BOUND_KINDS = {
    IntegerType: ("int", T.IntegerType()), DateType: ("int", T.IntegerType()),
    LongType: ("long", T.LongType()), TimeType: ("long", T.LongType()),
    TimestampType: ("long", T.LongType()), TimestamptzType: ("long", T.LongType()),
    FloatType: ("float", T.FloatType()), DoubleType: ("double", T.DoubleType()),
    StringType: ("string", T.StringType()), BinaryType: ("binary", T.BinaryType()),
}
# Iceberg type -> Spark type a partition value travels in (anything else: its bytes)
_PARTITION_TYPES = {
    IntegerType: T.IntegerType(), DateType: T.IntegerType(), LongType: T.LongType(), TimeType: T.LongType(),
    TimestampType: T.LongType(), TimestamptzType: T.LongType(), FloatType: T.FloatType(),
    DoubleType: T.DoubleType(), BooleanType: T.BooleanType(), StringType: T.StringType(),
}
BOUND_KINDS = {t: kind for t, (kind, _) in _BOUND_KINDS.items()}  # Iceberg type -> the shim's kind of its bounds
_LONG_MAP = T.MapType(T.IntegerType(), T.LongType())
_BYTES_MAP = T.MapType(T.IntegerType(), T.BinaryType())


def planning_modes(conf, table) -> tuple[str, str]:
    """(data, delete) planning mode of a scan of table, from the session, else the table."""
    modes = []
    for key, prop in ((DATA_MODE_CONF, DATA_MODE_PROP), (DELETE_MODE_CONF, DELETE_MODE_PROP)):
        value, where = conf(key), key
        if value is None:
            value, where = table.properties.get(prop), f"table property {prop}"
        mode = (value or "auto").strip().lower()
        if mode not in MODES:
            raise LakeError(f"lakerules: {where}={value!r} is not a planning mode; use one of {', '.join(MODES)}")
        modes.append(mode)
    return modes[0], modes[1]


def min_bytes(conf) -> int:
    return settings.count(MIN_BYTES_KEY, conf(MIN_BYTES_KEY), MIN_BYTES_DEFAULT, "bytes")


@dataclass(frozen=True)
class Auto:
    """What the auto mode weighs (Iceberg's rule for its distributed scans): manifests are read
    by a Spark job when the cluster has more cores than the driver, there are more than two per
    driver core to read, and they are at least min_bytes long. The job's entries are not cached
    (it returns only what may match), so on one machine, where the driver's cache serves every
    later query, auto keeps planning on the driver; ``distributed`` forces the job anywhere."""

    min_bytes: int
    remote_parallelism: int
    local_parallelism: int

    def distributes(self, manifests: list[ManifestFile]) -> bool:
        return (self.remote_parallelism > self.local_parallelism
                and len(manifests) > 2 * self.local_parallelism
                and sum(m.manifest_length for m in manifests) >= self.min_bytes)


def choose(manifests: list[ManifestFile], cached, modes: tuple[str, str], auto: Auto) -> list[ManifestFile]:
    """The manifests a scan reads with a Spark job: of each content (data, deletes), all of them
    when its mode is distributed; when auto, the uncached ones if ``auto`` says so."""
    remote = []
    for content, mode in ((ManifestContent.DATA, modes[0]), (ManifestContent.DELETES, modes[1])):
        of_kind = [m for m in manifests if m.content == content]
        if mode == "distributed":
            remote += of_kind
        elif mode == "auto":
            uncached = [m for m in of_kind if not cached(m)]
            if uncached and auto.distributes(uncached):
                remote += uncached
    return remote


def remote_reader(spark, conf, table, schema: Schema, cache):
    """The planning.RemoteReader of a scan of table under the session's settings, or None when
    every manifest is read on the driver."""
    modes = planning_modes(conf, table)
    if modes == ("local", "local"):
        return None
    auto = Auto(min_bytes(conf), spark.sparkContext.defaultParallelism, os.cpu_count() or 1)

    def read(manifests: list[ManifestFile], row_filter: BooleanExpression):
        remote = choose(manifests, lambda m: m.manifest_path in cache, modes, auto)
        if not remote:
            return set(), []
        return {m.manifest_path for m in remote}, read_entries(spark, table, schema, remote, row_filter)

    return read


def read_entries(spark, table, schema: Schema, manifests: list[ManifestFile],
                 row_filter: BooleanExpression) -> list[ManifestEntry]:
    """The live entries of manifests that may hold rows matching the bound, NOT-free row_filter
    (every delete file), read by one Spark job per partition spec."""
    by_spec: dict[int, list[ManifestFile]] = defaultdict(list)
    for m in manifests:
        by_spec[m.partition_spec_id].append(m)
    bounds, test = _bound_columns(row_filter), _may_match(row_filter)  # the same for every spec
    entries: list[ManifestEntry] = []
    for spec_id, group in by_spec.items():
        partition_fields = table.metadata.specs()[spec_id].partition_type(schema).fields
        frame = _entries_frame(spark, [m.manifest_path for m in group], partition_fields, bounds)
        if test is not None:  # data files whose bounds rule the filter out stay on the executors
            frame = frame.filter((F.col("content") != 0) | test)
        rows = frame.toArrow()
        by_path = {m.manifest_path: m for m in group}
        entries += _to_entries(rows, by_path, partition_fields, spec_id)
    return entries


# ---- the Spark job --------------------------------------------------------------------------------

def _bound_columns(expr: BooleanExpression) -> dict[int, tuple[str, T.DataType]]:
    """field id -> (kind, Spark type) of every column the filter compares that has bounds to decode."""
    out: dict[int, tuple[str, T.DataType]] = {}

    def visit(e):
        if isinstance(e, (And, Or)):
            visit(e.left)
            visit(e.right)
        elif hasattr(e, "term"):
            field = e.term.ref().field
            kind = _BOUND_KINDS.get(type(field.field_type))
            if kind is not None:
                out[field.field_id] = kind

    visit(expr)
    return out


def _entries_frame(spark, paths: list[str], partition_fields, bounds: dict) -> DataFrame:
    partition = T.StructType([
        T.StructField(f"p{i}", _PARTITION_TYPES.get(type(f.field_type), T.BinaryType()))
        for i, f in enumerate(partition_fields)
    ])
    fields = [
        ("manifest_path", T.StringType()), ("status", T.IntegerType()), ("snapshot_id", T.LongType()),
        ("sequence_number", T.LongType()), ("file_sequence_number", T.LongType()), ("content", T.IntegerType()),
        ("file_path", T.StringType()), ("file_format", T.StringType()), ("partition", partition),
        ("record_count", T.LongType()), ("file_size_in_bytes", T.LongType()), ("column_sizes", _LONG_MAP),
        ("value_counts", _LONG_MAP), ("null_value_counts", _LONG_MAP), ("nan_value_counts", _LONG_MAP),
        ("lower_bounds", _BYTES_MAP), ("upper_bounds", _BYTES_MAP), ("key_metadata", T.BinaryType()),
        ("split_offsets", T.ArrayType(T.LongType())), ("equality_ids", T.ArrayType(T.IntegerType())),
        ("sort_order_id", T.IntegerType()),
    ]
    ids = sorted(bounds)
    for fid in ids:
        fields += [(f"lower_{fid}", bounds[fid][1]), (f"upper_{fid}", bounds[fid][1])]
    schema = T.StructType([T.StructField(n, t) for n, t in fields])
    return J.manifest_entries(spark, paths, schema.json(), [(fid, bounds[fid][0]) for fid in ids])


# the pre-filter's tests over the decoded bounds, as Spark columns
_COLUMN_OPS = Ops(
    gt=lambda bound, v: bound > F.lit(v), ge=lambda bound, v: bound >= F.lit(v),
    lt=lambda bound, v: bound < F.lit(v), le=lambda bound, v: bound <= F.lit(v),
    and_=lambda a, b: a & b, or_=lambda a, b: a | b,
    keep=lambda out: ~F.coalesce(out, F.lit(False)), none=lambda: F.lit(False),
)


def _may_match(expr: BooleanExpression) -> Column | None:
    """A Spark column that is false only where a data file's bounds prove no row matches the
    bound expr; None: keep every file (lakerules.scan.manifests.may_match over Spark columns)."""

    def column(field_id: int, iceberg_type):
        if type(iceberg_type) not in _BOUND_KINDS:
            return None
        return F.col(f"lower_{field_id}"), F.col(f"upper_{field_id}")

    return may_match(expr, 0, column, _COLUMN_OPS)


# ---- back on the driver ---------------------------------------------------------------------------

def _to_entries(rows: pa.Table, manifests: dict[str, ManifestFile], partition_fields, spec_id: int):
    convert = [partition_value(f.field_type) for f in partition_fields]
    out = []
    for r in rows.select([n for n in rows.column_names if not n.startswith(("lower_", "upper_"))
                          or n in ("lower_bounds", "upper_bounds")]).to_pylist():
        manifest = manifests[r["manifest_path"]]
        values = r["partition"] or {}
        partition = Record(*[c(values.get(f"p{i}")) for i, c in enumerate(convert)])
        out.append(entry_of(r, partition, spec_id, manifest))
    return out


def entry_of(r: dict, partition: Record, spec_id: int, manifest: ManifestFile) -> ManifestEntry:
    """The manifest entry of one decoded row (maps as dicts or key-value pairs, lists as lists),
    with what it inherits from its manifest."""
    data_file = DataFile.from_args(
        content=DataFileContent(r["content"]),
        file_path=r["file_path"],
        file_format=FileFormat(r["file_format"].upper()),
        partition=partition,
        record_count=r["record_count"],
        file_size_in_bytes=r["file_size_in_bytes"],
        column_sizes=_as_dict(r["column_sizes"]),
        value_counts=_as_dict(r["value_counts"]),
        null_value_counts=_as_dict(r["null_value_counts"]),
        nan_value_counts=_as_dict(r["nan_value_counts"]),
        lower_bounds=_as_dict(r["lower_bounds"]),
        upper_bounds=_as_dict(r["upper_bounds"]),
        key_metadata=r["key_metadata"],
        split_offsets=r["split_offsets"],
        equality_ids=r["equality_ids"],
        sort_order_id=r["sort_order_id"],
    )
    data_file.spec_id = spec_id
    entry = ManifestEntry.from_args(
        status=ManifestEntryStatus(r["status"]),
        snapshot_id=r["snapshot_id"],
        sequence_number=r["sequence_number"],
        file_sequence_number=r["file_sequence_number"],
        data_file=data_file,
    )
    return inherit(entry, manifest)


def _as_dict(pairs):
    return None if pairs is None else dict(pairs)


def partition_value(iceberg_type):
    """How a partition value that travelled as its Spark type (or its bytes) becomes the value
    pyiceberg's manifest reader gives."""
    if type(iceberg_type) in _PARTITION_TYPES:
        return lambda v: v
    if isinstance(iceberg_type, DecimalType):
        scale = iceberg_type.scale
        return lambda v: None if v is None else Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale)
    if isinstance(iceberg_type, UUIDType):
        return lambda v: None if v is None else uuid.UUID(bytes=bytes(v))
    if isinstance(iceberg_type, (FixedType, BinaryType)):
        return lambda v: None if v is None else bytes(v)
    raise LakeError(f"lakerules: distributed planning cannot read partition values of type {iceberg_type}")
