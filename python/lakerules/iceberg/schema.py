"""Iceberg schemas as Spark schemas and back.

Spark sees Iceberg ``timestamptz`` as TIMESTAMP and ``timestamp`` as TIMESTAMP_NTZ, as Iceberg's
own Spark integration does. Read schemas carry each field's Iceberg id as ``parquet.field.id``
metadata, which is how Spark's Parquet reader and writer match columns by id.
"""

from __future__ import annotations

import json
from itertools import count

from pyiceberg import types as it
from pyiceberg.schema import Schema
from pyspark.sql import types as st

from lakerules.errors import NotSupported

FIELD_ID = "parquet.field.id"


# ---- Spark -> Iceberg --------------------------------------------------------------------


def spark_json_to_iceberg(schema_json: str) -> Schema:
    """A Spark StructType (as JSON) as an Iceberg schema with provisional ids.

    The catalog assigns fresh ids when it creates the table; these only have to be unique.
    """
    spark_schema = st.StructType.fromJson(json.loads(schema_json))
    return spark_to_iceberg(spark_schema)


def spark_to_iceberg(spark_schema: st.StructType) -> Schema:
    ids = count(1)
    struct = _to_iceberg(spark_schema, ids)
    return Schema(*struct.fields)


def spark_type_to_iceberg(dt: st.DataType, ids=None) -> it.IcebergType:
    return _to_iceberg(dt, ids or count(1))


def _to_iceberg(dt: st.DataType, ids) -> it.IcebergType:
    match dt:
        case st.StructType():
            fields = []
            for f in dt.fields:
                fid = next(ids)
                fields.append(
                    it.NestedField(
                        field_id=fid,
                        name=f.name,
                        field_type=_to_iceberg(f.dataType, ids),
                        required=not f.nullable,
                        doc=f.metadata.get("comment") or None,
                    )
                )
            return it.StructType(*fields)
        case st.ArrayType():
            eid = next(ids)
            return it.ListType(eid, _to_iceberg(dt.elementType, ids), element_required=not dt.containsNull)
        case st.MapType():
            kid, vid = next(ids), next(ids)
            return it.MapType(
                kid, _to_iceberg(dt.keyType, ids), vid, _to_iceberg(dt.valueType, ids),
                value_required=not dt.valueContainsNull,
            )
        case st.BooleanType():
            return it.BooleanType()
        case st.ByteType() | st.ShortType() | st.IntegerType():
            return it.IntegerType()
        case st.LongType():
            return it.LongType()
        case st.FloatType():
            return it.FloatType()
        case st.DoubleType():
            return it.DoubleType()
        case st.DecimalType():
            return it.DecimalType(dt.precision, dt.scale)
        case st.DateType():
            return it.DateType()
        case st.TimestampType():
            return it.TimestamptzType()
        case st.TimestampNTZType():
            return it.TimestampType()
        case st.StringType() | st.CharType() | st.VarcharType():
            return it.StringType()
        case st.BinaryType():
            return it.BinaryType()
    if dt.simpleString() == "variant":  # Spark 4's VARIANT: Iceberg v3's variant, not written by lakerules yet
        raise NotSupported("lakerules: Spark type variant (Iceberg format version 3's variant) is not supported by "
                           "lakerules yet; store the value as a string (to_json) instead")
    raise NotSupported(f"lakerules: Spark type {dt.simpleString()} has no Iceberg equivalent")


# ---- Iceberg -> Spark --------------------------------------------------------------------


def iceberg_to_spark(schema: Schema | it.StructType, with_ids: bool = False) -> st.StructType:
    """The Spark schema of an Iceberg schema; with_ids adds parquet.field.id metadata. A top-level
    column's default values (format version 3) become Spark's column default metadata:
    ``initial-default`` its EXISTS_DEFAULT (what Spark's Parquet reader gives the rows of a file
    without the column) and ``write-default`` its CURRENT_DEFAULT (what an INSERT that omits the
    column writes). A default of a nested field is refused: Spark has no nested defaults."""
    struct = schema.as_struct() if isinstance(schema, Schema) else schema
    out = _to_spark(struct, with_ids)
    for f in struct.fields:
        _no_nested_defaults(f.field_type, f.name)
    if not any(f.initial_default is not None or f.write_default is not None for f in struct.fields):
        return out
    fields = []
    for f, sf in zip(struct.fields, out.fields):
        meta = dict(sf.metadata)
        nullable = sf.nullable
        if f.initial_default is not None:
            meta[EXISTS_DEFAULT] = default_sql(f.field_type, f.initial_default)
            # a read schema (with_ids): Spark's Parquet reader refuses a file without a required
            # column before it fills the default in, so the read declares it optional
            nullable = nullable or with_ids
        if f.write_default is not None:
            meta[CURRENT_DEFAULT] = default_sql(f.field_type, f.write_default)
        fields.append(st.StructField(sf.name, sf.dataType, nullable, meta))
    return st.StructType(fields)


EXISTS_DEFAULT, CURRENT_DEFAULT = "EXISTS_DEFAULT", "CURRENT_DEFAULT"  # Spark's column default metadata


def _has_offset(text: str) -> bool:
    return text.endswith("Z") or (len(text) > 6 and text[-6] in "+-" and text[-3] == ":")


def _no_nested_defaults(t: it.IcebergType, path: str) -> None:
    if isinstance(t, it.StructType):
        for f in t.fields:
            if f.initial_default is not None or f.write_default is not None:
                raise NotSupported(f"lakerules: field {path}.{f.name} has a default value; lakerules reads and writes "
                                   "defaults of top-level columns only (Spark has no nested defaults)")
            _no_nested_defaults(f.field_type, f"{path}.{f.name}")
    elif isinstance(t, it.ListType):
        _no_nested_defaults(t.element_type, f"{path}.element")
    elif isinstance(t, it.MapType):
        _no_nested_defaults(t.key_type, f"{path}.key")
        _no_nested_defaults(t.value_type, f"{path}.value")


def default_sql(t: it.IcebergType, value) -> str:
    """Spark SQL that evaluates to ``value`` (an Iceberg default of type ``t``) as the column's
    Spark type: its canonical text as a hex literal cast to a string, then to the type, so that no
    parser setting (escapes, ANSI mode, the session time zone) changes what it reads as.

    >>> default_sql(it.StringType(), "it's")
    "CAST(CAST(X'69742773' AS STRING) AS STRING)"
    >>> default_sql(it.IntegerType(), 5)
    "CAST(CAST(X'35' AS STRING) AS INT)"
    """
    import datetime
    import decimal
    import math

    if isinstance(t, (it.BinaryType, it.FixedType)):
        raise NotSupported(f"lakerules: a {t} column with a default value is not supported yet (Spark's Parquet "
                           "reader cannot fill a binary default into files written before the column)")
    if isinstance(t, it.BooleanType):
        text = "true" if value else "false"
    elif isinstance(t, (it.FloatType, it.DoubleType)) and isinstance(value, float) and not math.isfinite(value):
        text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    elif isinstance(value, decimal.Decimal):
        text = format(value, "f")
    elif isinstance(value, datetime.datetime):
        if isinstance(t, it.TimestamptzType) and value.tzinfo is None:  # an instant, in UTC
            value = value.replace(tzinfo=datetime.timezone.utc)
        text = value.isoformat(sep=" ")
    elif isinstance(value, datetime.date):
        text = value.isoformat()
    else:
        text = str(value)
    if isinstance(t, it.TimestamptzType) and isinstance(value, str) and not _has_offset(value):
        text = value + "+00:00"
    hexed = text.encode("utf-8").hex().upper()
    return f"CAST(CAST(X'{hexed}' AS STRING) AS {_to_spark(t, False).simpleString().upper()})"


def promotable(old: it.IcebergType, new: it.IcebergType) -> bool:
    """Whether files written with a column of type ``old`` read as ``new`` under the same field
    id: the same type, or one of Iceberg's type promotions (int to long, float to double, a
    decimal to one of more precision and the same scale); nested types by kind (their fields are
    matched on their own).

    >>> promotable(it.IntegerType(), it.LongType()), promotable(it.LongType(), it.IntegerType())
    (True, False)
    >>> promotable(it.DecimalType(10, 2), it.DecimalType(12, 2)), promotable(it.DecimalType(10, 2), it.DecimalType(12, 3))
    (True, False)
    """
    if isinstance(old, (it.StructType, it.ListType, it.MapType)) or isinstance(new, (it.StructType, it.ListType, it.MapType)):
        return type(old) is type(new)
    if old == new:
        return True
    if isinstance(old, it.IntegerType) and isinstance(new, it.LongType):
        return True
    if isinstance(old, it.FloatType) and isinstance(new, it.DoubleType):
        return True
    return (isinstance(old, it.DecimalType) and isinstance(new, it.DecimalType) and old.scale == new.scale
            and new.precision >= old.precision)


def renumbered(current: Schema, old: Schema) -> list[str]:
    """The names of ``old``'s fields that ``current`` has under another field id: a replace that
    changed their type (or a drop and add of the name) gave them new ids, so files written with
    ``old`` do not read as them."""
    from pyiceberg.schema import index_by_name

    now = index_by_name(current)
    return [name for name, fid in index_by_name(old).items() if name in now and now[name] != fid]


def snapshot_schema(metadata, snapshot) -> Schema:
    """The schema a read of ``snapshot`` (a branch's or tag's head, main after a rollback) uses:
    the table's current one, unless some of the snapshot's own columns are :func:`renumbered`
    there; then the snapshot's own, whose ids its files carry."""
    current = metadata.schema()
    if snapshot is None or snapshot.schema_id is None or snapshot.schema_id == current.schema_id:
        return current
    own = next((s for s in metadata.schemas if s.schema_id == snapshot.schema_id), None)
    return own if own is not None and renumbered(current, own) else current


def field_ids(field: it.NestedField) -> set[int]:
    """The field's id and those of every field inside it (struct fields, list elements, map keys
    and values).

    >>> field_ids(it.NestedField(1, "s", it.StructType(it.NestedField(2, "l", it.ListType(3, it.LongType())))))
    {1, 2, 3}
    """
    t = field.field_type
    if isinstance(t, it.StructType):
        return {field.field_id}.union(*(field_ids(f) for f in t.fields))
    if isinstance(t, it.ListType):
        return {field.field_id} | field_ids(t.element_field)
    if isinstance(t, it.MapType):
        return {field.field_id} | field_ids(t.key_field) | field_ids(t.value_field)
    return {field.field_id}


def nested_ids(fields) -> str | None:
    """The field ids of list elements and map keys and values under ``fields`` (Iceberg
    NestedFields), which Spark's Parquet writer cannot take from a schema's metadata, as the tree
    the shim's NestedIdParquetFormat reads; None when there are none (no list or map).

    >>> from pyiceberg.types import NestedField, ListType, MapType, StructType, LongType, StringType
    >>> nested_ids([NestedField(1, "id", LongType()), NestedField(2, "xs", ListType(4, LongType()))])
    '{"f": {"xs": {"e": 4, "t": null}}}'
    >>> nested_ids([NestedField(3, "m", MapType(5, StringType(), 6, StructType(NestedField(7, "l", ListType(8, StringType())))))])
    '{"f": {"m": {"k": 5, "v": 6, "kt": null, "vt": {"f": {"l": {"e": 8, "t": null}}}}}}'
    >>> nested_ids([NestedField(1, "id", LongType())]) is None
    True
    """
    def node(t):
        match t:
            case it.StructType():
                inner = {f.name: n for f in t.fields if (n := node(f.field_type)) is not None}
                return {"f": inner} if inner else None
            case it.ListType():
                return {"e": t.element_id, "t": node(t.element_type)}
            case it.MapType():
                return {"k": t.key_id, "v": t.value_id, "kt": node(t.key_type), "vt": node(t.value_type)}
        return None

    tree = node(it.StructType(*fields))
    return json.dumps(tree) if tree is not None else None


def iceberg_type_to_spark(t: it.IcebergType, with_ids: bool = False) -> st.DataType:
    return _to_spark(t, with_ids)


def _to_spark(t: it.IcebergType, with_ids: bool) -> st.DataType:
    match t:
        case it.StructType():
            fields = []
            for f in t.fields:
                meta = {}
                if with_ids:
                    meta[FIELD_ID] = f.field_id
                if f.doc:
                    meta["comment"] = f.doc
                fields.append(st.StructField(f.name, _to_spark(f.field_type, with_ids), not f.required, meta))
            return st.StructType(fields)
        case it.ListType():
            return st.ArrayType(_to_spark(t.element_type, with_ids), not t.element_required)
        case it.MapType():
            return st.MapType(
                _to_spark(t.key_type, with_ids), _to_spark(t.value_type, with_ids), not t.value_required
            )
        case it.BooleanType():
            return st.BooleanType()
        case it.IntegerType():
            return st.IntegerType()
        case it.LongType():
            return st.LongType()
        case it.FloatType():
            return st.FloatType()
        case it.DoubleType():
            return st.DoubleType()
        case it.DecimalType():
            return st.DecimalType(t.precision, t.scale)
        case it.DateType():
            return st.DateType()
        case it.TimestamptzType():
            return st.TimestampType()
        case it.TimestampType():
            return st.TimestampNTZType()
        case it.StringType():
            return st.StringType()
        case it.BinaryType() | it.FixedType():
            return st.BinaryType()
    raise NotSupported(
        f"lakerules: Iceberg type {t} is not supported by lakerules yet (no Spark type reads it exactly)"
    )
