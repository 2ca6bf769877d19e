"""Partition specs: Spark's PARTITIONED BY transforms <-> Iceberg, and partition values in the JVM.

Writing computes each row's partition with Spark expressions (and the shim's bucket/truncate
functions), never in Python. Each partition field becomes a directory column whose text is an
exact, reversible encoding of the partition value, so that the driver recovers every written
file's partition from its path.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable
from urllib.parse import unquote

from pyiceberg import types as it
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyspark.sql import Column
from pyspark.sql import functions as F

from lakerules.spark import jvm as J
from lakerules.errors import LakeError, NotSupported

FIRST_PARTITION_FIELD_ID = 1000
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

_TIME_TRANSFORMS = {
    "years": YearTransform, "year": YearTransform,
    "months": MonthTransform, "month": MonthTransform,
    "days": DayTransform, "day": DayTransform, "date": DayTransform,
    "hours": HourTransform, "hour": HourTransform, "date_hour": HourTransform,
}
_NAME_SUFFIX = {
    YearTransform: "year", MonthTransform: "month", DayTransform: "day", HourTransform: "hour",
    BucketTransform: "bucket", TruncateTransform: "trunc",
}


# ---- Spark transforms -> Iceberg spec ----------------------------------------------------


def parse_transform(name: str, args: list[dict]) -> tuple[Transform, str]:
    """A Spark transform (as the shim serialises it) as an Iceberg transform and its column path."""
    refs = [".".join(a["ref"]) for a in args if "ref" in a]
    lits = [a["lit"] for a in args if "lit" in a]
    if len(refs) != 1 or any("expr" in a for a in args):
        raise NotSupported(f"lakerules: partition transform {name}({_show(args)}) must name exactly one column")
    column = refs[0]
    lname = name.lower()
    if lname == "identity" and not lits:
        return IdentityTransform(), column
    if lname in _TIME_TRANSFORMS and not lits:
        return _TIME_TRANSFORMS[lname](), column
    if lname == "bucket" and len(lits) == 1:
        return BucketTransform(_positive(lits[0], name)), column
    if lname in ("truncate", "trunc") and len(lits) == 1:
        return TruncateTransform(_positive(lits[0], name)), column
    raise NotSupported(
        f"lakerules: unsupported partition transform {name}({_show(args)}); supported are identity, "
        "bucket(N, col), truncate(W, col), years(col), months(col), days(col), hours(col)"
    )


def _show(args: list[dict]) -> str:
    return ", ".join(".".join(a["ref"]) if "ref" in a else str(a.get("lit", a.get("expr"))) for a in args)


def _positive(text: str, name: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise LakeError(f"lakerules: {name} needs an integer parameter, got {text!r}") from None
    if n <= 0:
        raise LakeError(f"lakerules: {name} needs a positive parameter, got {n}")
    return n


def field_name(transform: Transform, column: str) -> str:
    """The partition field name Iceberg gives a transform of a column."""
    suffix = _NAME_SUFFIX.get(type(transform))
    return column if suffix is None else f"{column}_{suffix}"


def spec_from_spark(partitioning: list[dict], schema: Schema) -> PartitionSpec:
    fields = []
    for i, t in enumerate(partitioning):
        transform, column = parse_transform(t["name"], t["args"])
        source = _find(schema, column)
        check_transform(transform, source, column)
        fields.append(
            PartitionField(
                source_id=source.field_id,
                field_id=FIRST_PARTITION_FIELD_ID + i,
                transform=transform,
                name=field_name(transform, column),
            )
        )
    return PartitionSpec(*fields)


def field_spec(spec, schema: Schema, what: str) -> tuple[Transform, str]:
    """A column or transform as the dialect parsed it (a FieldSpec: ``transform`` and ``args``,
    or ``column`` name parts) -> (transform, the source column's name in schema), checked by the
    partition transforms' rules; ``what`` ("partition", "sort") names it in errors."""
    name = spec.transform
    if name is not None:
        transform, column = parse_transform(name, list(spec.args or ()))
    else:
        transform, column = IdentityTransform(), ".".join(spec.column)
    try:
        source = schema.find_field(column, case_sensitive=False)
    except ValueError:
        raise LakeError(f"lakerules: {what} column {column!r} is not a column of the table") from None
    check_transform(transform, source, column)
    return transform, schema.find_column_name(source.field_id)


def check_transform(transform: Transform, source: it.NestedField, column: str) -> None:
    if not transform.can_transform(source.field_type):
        raise LakeError(
            f"lakerules: cannot partition by {transform}({column}): the transform is not defined "
            f"for type {source.field_type}"
        )
    if isinstance(source.field_type, (it.FloatType, it.DoubleType)) and isinstance(transform, IdentityTransform):
        raise NotSupported(f"lakerules: identity partitioning on floating point column {column} is not supported")


def _find(schema: Schema, column: str) -> it.NestedField:
    field = schema.find_field(column, case_sensitive=False) if _has(schema, column) else None
    if field is None:
        raise LakeError(f"lakerules: partition column {column!r} is not a column of the table")
    return field


def _has(schema: Schema, column: str) -> bool:
    try:
        schema.find_field(column, case_sensitive=False)
        return True
    except ValueError:
        return False


# ---- Iceberg spec -> Spark transforms ----------------------------------------------------


def spec_to_spark(spec: PartitionSpec, schema: Schema) -> list[dict]:
    """The spec as Spark transforms (what DESCRIBE shows); void fields are left out."""
    out = []
    for f in spec.fields:
        if isinstance(f.transform, VoidTransform):
            continue
        try:
            ref = {"ref": list(_path(schema, f.source_id))}
        except LakeError:  # a dropped source column
            continue
        match f.transform:
            case IdentityTransform():
                out.append({"name": "identity", "args": [ref]})
            case BucketTransform():
                out.append({"name": "bucket", "args": [{"lit": str(f.transform.num_buckets)}, ref]})
            case TruncateTransform():
                out.append({"name": "truncate", "args": [ref, {"lit": str(f.transform.width)}]})
            case YearTransform():
                out.append({"name": "years", "args": [ref]})
            case MonthTransform():
                out.append({"name": "months", "args": [ref]})
            case DayTransform():
                out.append({"name": "days", "args": [ref]})
            case HourTransform():
                out.append({"name": "hours", "args": [ref]})
    return out


# ---- partition values in the JVM ---------------------------------------------------------

MICROS_PER_HOUR = 3_600_000_000
MICROS_PER_DAY = 86_400_000_000


@dataclass(frozen=True)
class PartitionColumn:
    """One partition field as a directory column: the expression, and how to read its text back."""

    dir_name: str
    expr: Column
    decode: Callable[[str], Any]


def partition_columns(spec: PartitionSpec, schema: Schema, catalog: str, taken: set[str]) -> list[PartitionColumn]:
    out = []
    for f in spec.fields:
        # the folder name: Spark escapes what a path cannot hold, but not NUL (a file system refuses
        # it), nor a leading '.', which hides the folder from every listing (its files were never
        # committed: the rows were lost); '_' leads hidden names too, unless they hold '='
        name = f.name.replace("\0", "_")
        name = _free_name(f"p{name}" if name.startswith((".", "_")) else name, taken)
        taken.add(name)
        source = schema.find_field(f.source_id)
        path = _path(schema, f.source_id)
        col = J.column(*path)
        expr, decode = _transform_expr(f.transform, source.field_type, col, catalog,
                                       f"partition field {f.name} ({f.transform} of column {'.'.join(path)})")
        out.append(PartitionColumn(name, expr.alias(name), decode))
    return out


def decode_path(columns: list[PartitionColumn], relative_dir: str) -> tuple:
    """Partition values from a written file's directory, e.g. 'ts_day=19723/id_bucket=5'."""
    parts = [p for p in relative_dir.split("/") if p]
    if len(parts) != len(columns):
        raise LakeError(f"lakerules: unexpected partition directory {relative_dir!r} for {len(columns)} fields")
    values = []
    for column, part in zip(columns, parts):
        key, _, text = part.partition("=")
        if unquote(key) != column.dir_name:
            raise LakeError(f"lakerules: unexpected partition directory {part!r}, expected {column.dir_name}")
        text = unquote(text)
        values.append(None if text == HIVE_NULL else column.decode(text))
    return tuple(values)


def _free_name(name: str, taken: set[str]) -> str:
    candidate = name
    while candidate.lower() in {t.lower() for t in taken}:
        candidate = f"{candidate}_p"
    return candidate


def _path(schema: Schema, field_id: int) -> tuple[str, ...]:
    """The names from the top of the schema down to a (possibly nested) field, each as it is."""
    def walk(struct, prefix):
        for f in struct.fields:
            if f.field_id == field_id:
                return (*prefix, f.name)
            if isinstance(f.field_type, it.StructType):
                found = walk(f.field_type, (*prefix, f.name))
                if found:
                    return found
        return None

    found = walk(schema.as_struct(), ())
    if found is None:
        raise LakeError(f"lakerules: partition source column {field_id} is not in the table schema")
    return found


def _micros(col: Column, t: it.IcebergType) -> Column:
    """Microseconds since the epoch, exact, for timestamptz (TIMESTAMP) and timestamp (TIMESTAMP_NTZ)."""
    if isinstance(t, it.TimestamptzType):
        return F.unix_micros(col)
    return F.timestamp_diff("MICROSECOND", F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"), col)


def _floor_div(value: Column, divisor: int) -> Column:
    """Floor division on longs, exact for negative values too (integral div, no decimals), and
    for every long: div truncates toward zero, one less when a negative value leaves a remainder
    (value - pmod(value, d) overflows near the smallest long: wrapped, without ANSI mode, into
    another partition's value)."""
    d = F.lit(divisor)
    return F.call_function("div", value, d) - F.when((value < 0) & (value % d != 0), 1).otherwise(0)


def _days(col: Column, t: it.IcebergType) -> Column:
    if isinstance(t, it.DateType):
        return F.unix_date(col)
    return _floor_div(_micros(col, t), MICROS_PER_DAY).cast("int")


def _as_date(col: Column, t: it.IcebergType) -> Column:
    return col if isinstance(t, it.DateType) else F.date_from_unix_date(_days(col, t))


def _hex_text(text: str) -> str:
    return bytes.fromhex(text[1:]).decode("utf-8")


def _hex_bytes(text: str) -> bytes:
    return bytes.fromhex(text[1:])


def _bool(text: str) -> bool:
    return text == "true"


def _int_or_fail(value: Column, col: Column, what: str) -> Column:
    """value (a BIGINT) as the INT an Iceberg partition value is, or the write fails with an
    error naming the partition field and the value, whatever spark.sql.ansi.enabled says (a cast
    without ANSI would wrap it into another partition's value, one pruning then skips)."""
    fits = value.between(-(2**31), 2**31 - 1)
    message = F.concat(
        F.lit(f"lakerules: {what} cannot hold the value for "), col.cast("string"),
        F.lit(": the partition value is a 32-bit INT, and this one is out of its range. Nothing was committed."))
    return F.when(value.isNull() | fits, value.cast("int")).otherwise(F.raise_error(message).cast("int"))


def _transform_expr(transform: Transform, t: it.IcebergType, col: Column, catalog: str, what: str = "a partition field"):
    """The partition value of ``col`` (the source column), built as objects: names never go
    through SQL text; lakerules' own functions are called by their quoted multipart name."""
    fn = f"{J.quote(catalog)}.system"
    match transform:
        case IdentityTransform():
            return _identity(t, col)
        case BucketTransform():
            return F.call_function(f"{fn}.bucket", F.lit(transform.num_buckets), col), int
        case TruncateTransform():
            truncated = F.call_function(f"{fn}.truncate", F.lit(transform.width), col)
            return _identity(t, truncated)
        case YearTransform():
            return F.year(_as_date(col, t)) - 1970, int
        case MonthTransform():
            d = _as_date(col, t)
            return (F.year(d) - 1970) * 12 + F.month(d) - 1, int
        case DayTransform():
            return _days(col, t), int
        case HourTransform():
            return _int_or_fail(_floor_div(_micros(col, t), MICROS_PER_HOUR), col, what), int
    raise NotSupported(f"lakerules: writing partition transform {transform} is not supported")


def _identity(t: it.IcebergType, col: Column):
    """Exact text for an identity partition value (strings and bytes as hex: '' must stay '')."""
    match t:
        case it.StringType():
            return F.concat(F.lit("x"), F.hex(col)), _hex_text
        case it.BinaryType() | it.FixedType():
            return F.concat(F.lit("x"), F.hex(col)), _hex_bytes
        case it.IntegerType() | it.LongType():
            return col, int
        case it.BooleanType():
            return col.cast("string"), _bool
        case it.DecimalType():
            return col.cast("string"), Decimal
        case it.DateType():
            return F.unix_date(col), int
        case it.TimestamptzType():
            return F.unix_micros(col), int
        case it.TimestampType():
            epoch = F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")
            return F.timestamp_diff("MICROSECOND", epoch, col), int
    raise NotSupported(f"lakerules: identity partitioning on type {t} is not supported")
