"""DESCRIBE of lake tables, as Iceberg's Spark catalog answers it.

    DESCRIBE [EXTENDED | FORMATTED] lake.db.t          Spark's own command (DescribeTableExec)
    DESCRIBE [TABLE] EXTENDED lake.db.t col             planned here: the column's statistics

Spark describes a table from what the table tells it: its columns, partitioning and properties.
The properties are Iceberg's Spark table's (:func:`reserved_properties`: format, provider,
current-snapshot-id, location, format-version, sort-order, identifier-fields, then the table's
own), so "# Detailed Table Information" shows what Iceberg's shows; the "Statistics" row comes
from the table's scan (io.lakerules.LakeStatisticsScan: the snapshot's total-records).

For one column with EXTENDED, Spark would print the statistics a v2 scan reports as Java
``Optional`` text; lakerules answers the command itself, with the rows of Spark's own (v1)
DESCRIBE ... col: col_name, data_type, comment, min, max, num_nulls, distinct_count, avg_col_len,
max_col_len, histogram, each "NULL" when unknown. They are read from the manifests of the
snapshot the table was resolved at, no data file opened:

- min / max: over every live data file's bounds, when exact (as lakerules.rules.
  aggregates_from_metadata answers min() and max()): numbers, dates, timestamps and booleans
  (string and binary bounds may be truncated; Spark keeps no min/max for them either), every
  file with its bound, no NaN possible, and no delete file in the snapshot (deleted rows may
  hold the extreme values);
- num_nulls: the files' null counts summed, when every file has one and no delete file applies;
- distinct_count: the NDV of an Iceberg statistics file (a Puffin theta sketch's ``ndv``) of
  the snapshot, when the table has one;
- avg_col_len, max_col_len, histogram: NULL (Iceberg's metadata keeps none of them).
"""

from __future__ import annotations

import datetime
import math
import struct
from decimal import Decimal

from pyiceberg.table.sorting import NullOrder, SortDirection
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import BooleanType, DateType, DecimalType, DoubleType, FloatType, TimestampType, TimestamptzType

from lakerules.spark import jvm as J
from lakerules.errors import LakeError
from lakerules.plan.nodes import DescribeLakeColumn

# The properties Iceberg's Spark table (SparkTable.properties) computes; a table property of the
# same name is not shown.
RESERVED_PROPERTIES = ("provider", "format", "current-snapshot-id", "location", "format-version",
                       "sort-order", "identifier-fields")
_STATS = ("min", "max", "num_nulls", "distinct_count", "avg_col_len", "max_col_len", "histogram")
_THETA = "apache-datasketches-theta-v1"
_EPOCH = datetime.datetime(1970, 1, 1)


def reserved_properties(table) -> dict[str, str]:
    """Iceberg's Spark table properties of a pyiceberg Table, in Iceberg's order."""
    snapshot = table.current_snapshot()
    props = {
        "format": "iceberg/" + table.properties.get("write.format.default", "parquet"),
        "provider": "iceberg",
        "current-snapshot-id": str(snapshot.snapshot_id) if snapshot is not None else "none",
        "location": table.location(),
        "format-version": str(table.format_version),
    }
    order = sort_order_text(table)
    if order:
        props["sort-order"] = order
    schema = table.schema()
    ids = schema.identifier_field_ids
    if ids:
        props["identifier-fields"] = "[" + ",".join(schema.find_column_name(i) for i in ids) + "]"
    return props


def sort_order_text(table) -> str:
    """The table's sort order as Iceberg's Spark3Util.describe writes it ("" when unsorted):
    ``id ASC NULLS FIRST, bucket(4, kind) DESC NULLS LAST``."""
    schema = table.schema()
    parts = []
    for f in table.sort_order().fields:
        name = schema.find_column_name(f.source_id) or str(f.source_id)
        t = f.transform
        if isinstance(t, IdentityTransform):
            term = name
        elif isinstance(t, BucketTransform):
            term = f"bucket({t.num_buckets}, {name})"
        elif isinstance(t, TruncateTransform):
            term = f"truncate({name}, {t.width})"  # Iceberg's order of the arguments here
        elif isinstance(t, (YearTransform, MonthTransform, DayTransform, HourTransform)):
            term = f"{str(t)}s({name})"
        else:
            term = f"{t}({name})"
        direction = "DESC" if f.direction == SortDirection.DESC else "ASC"
        nulls = "NULLS FIRST" if f.null_order == NullOrder.NULLS_FIRST else "NULLS LAST"
        parts.append(f"{term} {direction} {nulls}")
    return ", ".join(parts)


def total_records(snapshot) -> int | None:
    """The row count Iceberg's Spark scan reports for a snapshot: its summary's total-records (0
    without a snapshot; None when the summary lacks it)."""
    if snapshot is None:
        return 0
    summary = snapshot.summary
    value = summary.get("total-records") if summary is not None else None
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


# ---- DESCRIBE [TABLE] EXTENDED t col ----------------------------------------------------------


def column_rows(ctx, node: DescribeLakeColumn):
    """The command's result: Spark's rows for the column, then its statistics."""
    rows = [("col_name", node.column), ("data_type", node.data_type),
            ("comment", node.comment if node.comment is not None else "NULL")]
    stats = column_statistics(ctx, node) if node.metadata_table is None else {}
    rows += [(k, stats.get(k, "NULL")) for k in _STATS]
    return J.result_rows(ctx.spark, rows, node.result_schema)


def column_statistics(ctx, node: DescribeLakeColumn) -> dict[str, str]:
    """min, max, num_nulls and distinct_count of the column, where the metadata holds them."""
    from lakerules.scan.planning import plan_scan
    from lakerules.scan.bounds import NotExact, bound

    if node.snapshot_id is None:
        return {"num_nulls": "0", "distinct_count": "0"}  # no snapshot: no rows
    t = node.table
    table = ctx.catalogs.load(t.catalog, t.namespace, t.name)
    snapshot = table.snapshot_by_id(node.snapshot_id)
    if snapshot is None:
        raise LakeError(f"lakerules: snapshot {node.snapshot_id} of {t} is gone (expired since the statement "
                        "was planned); run it again")
    schema = table.schemas().get(snapshot.schema_id, table.schema()) if snapshot.schema_id is not None \
        else table.schema()
    col = next((f for f in schema.fields if f.name == node.column), None)
    if col is None:
        return {}
    out: dict[str, str] = {}
    ndv = _ndv(table, snapshot.snapshot_id, col.field_id)
    if ndv is not None:
        out["distinct_count"] = ndv
    plan = plan_scan(table, snapshot.snapshot_id)
    if plan.position_delete_files or plan.equality_delete_files:
        return out  # rows the deletes remove may hold the extremes and the nulls
    files = [p.file for p in plan.files]
    nulls = [(f.null_value_counts or {}).get(col.field_id) for f in files]
    if all(n is not None for n in nulls):
        out["num_nulls"] = str(sum(nulls))
    for kind, key in (("Min", "min"), ("Max", "max")):
        try:
            value = bound(files, col, kind, f"{key}({col.name})")
        except NotExact:
            continue
        if value is not None:
            out[key] = _text(col.field_type, value)
    return out


def _ndv(table, snapshot_id: int, field_id: int) -> str | None:
    """The distinct count a statistics file of the snapshot holds for the field (Iceberg's Spark
    scan reports it the same way), or None."""
    for stats in table.metadata.statistics or []:
        if stats.snapshot_id != snapshot_id:
            continue
        for blob in stats.blob_metadata:
            if blob.type == _THETA and blob.fields == [field_id] and (blob.properties or {}).get("ndv"):
                return str(int(blob.properties["ndv"]))
    return None


def _text(t, v) -> str:
    """A bound as Spark's DESCRIBE ... col shows a column statistic (CatalogColumnStat's
    external string): dates yyyy-MM-dd, timestamps yyyy-MM-dd HH:mm:ss.SSSSSS (UTC)."""
    if isinstance(t, BooleanType):
        return "true" if v else "false"
    if isinstance(t, DateType):
        return (datetime.date(1970, 1, 1) + datetime.timedelta(days=v)).isoformat()
    if isinstance(t, (TimestampType, TimestamptzType)):
        return (_EPOCH + datetime.timedelta(microseconds=v)).strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(t, DecimalType):
        return format(v if isinstance(v, Decimal) else Decimal(v), "f")
    if isinstance(t, FloatType):
        return _java_double(_shortest_float32(v))
    if isinstance(t, DoubleType):
        return _java_double(v)
    return str(v)


def _shortest_float32(v: float) -> float:
    """The shortest decimal that reads back as the same 32-bit float (Java's Float.toString)."""
    target = struct.pack("<f", v)
    for digits in range(1, 10):
        candidate = float(f"{v:.{digits}g}")
        if struct.pack("<f", candidate) == target:
            return candidate
    return v


def _java_double(v: float) -> str:
    """Java's Double.toString: the shortest digits, plain from 1e-3 to 1e7, else d.dddE<n>."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(float(v))  # plain in this range
    sign, digits, exp = Decimal(repr(float(v))).normalize().as_tuple()
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{len(text) - 1 + exp}"
