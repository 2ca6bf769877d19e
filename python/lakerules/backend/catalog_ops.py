"""The operations Spark's LakeCatalog (the shim) asks of a lake catalog, answered with its
pyiceberg catalog: namespaces, tables (load, with time travel, branches, tags and metadata
tables; create, replace, alter, drop, rename), each checked (names, folders, format version).
"""

from __future__ import annotations

import json
from typing import Any

from pyiceberg import exceptions as ie
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyiceberg import types as it
from pyiceberg.table.update import SetLocationUpdate

from lakerules.errors import CatalogError, LakeError, NotSupported, UnreadableFile
from lakerules.iceberg import bookkeeping, format_version, names, owners, partitioning, paths, refs
from lakerules.iceberg import pyiceberg_edge as edge, schema as schemas
from lakerules.spark import shared
from lakerules.iceberg.catalogs import Catalogs, kept_as_spelled as _kept_as_spelled, namespace_exists, qualified
from lakerules.iceberg.replace import create_table, plan_replace, previous_folders


def _not_root(catalog: str, namespace, statement: str) -> None:
    if not namespace:
        raise LakeError(f"lakerules: {statement} needs a namespace of catalog {catalog!r} "
                        f"({statement} {catalog}.<namespace>); the catalog itself is none")


class CatalogOps:
    """LakeCatalog's operations on the catalogs of one session (``catalogs``)."""

    def __init__(self, catalogs: Catalogs):
        self.catalogs = catalogs

    def get(self, name: str) -> Catalog:
        return self.catalogs.get(name)

    # ---- dispatch from the shim ------------------------------------------------------------

    def handle(self, catalog: str, op: str, args: dict) -> dict:
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise NotSupported(f"lakerules: catalog operation {op} is not supported")
        return handler(catalog, self.get(catalog), args)

    # ---- namespaces ----------------------------------------------------------------------

    def _op_list_namespaces(self, _name, cat: Catalog, a):
        parent = tuple(a["namespace"])
        if parent and not namespace_exists(cat, parent):
            raise CatalogError("NoSuchNamespace", "no such namespace", parent)
        return {"namespaces": [list(ns) for ns in cat.list_namespaces(parent)]}

    def _op_namespace_exists(self, _name, cat, a):
        return {"exists": namespace_exists(cat, tuple(a["namespace"]))}

    def _op_load_namespace(self, _name, cat, a):
        if not a["namespace"]:
            return {"properties": {}}  # the root
        return {"properties": dict(cat.load_namespace_properties(tuple(a["namespace"])))}

    def _op_create_namespace(self, name, cat, a):
        _not_root(name, a["namespace"], "CREATE NAMESPACE")
        paths.check_identifier(a["namespace"])
        _kept_as_spelled(name, cat, a["namespace"])
        props = a.get("properties") or {}
        if props.get("location"):
            owners.check_namespace_location(cat, f"CREATE NAMESPACE {qualified(name, a['namespace'][:-1], a['namespace'][-1])}",
                                            props["location"])
        cat.create_namespace(tuple(a["namespace"]), props)
        return {}

    def _op_alter_namespace(self, name, cat, a):
        _not_root(name, a["namespace"], "ALTER NAMESPACE")
        if (a["set"] or {}).get("location"):
            owners.check_namespace_location(cat, f"ALTER NAMESPACE {qualified(name, a['namespace'][:-1], a['namespace'][-1])}",
                                            a["set"]["location"])
        cat.update_namespace_properties(tuple(a["namespace"]), set(a["remove"]), a["set"])
        return {}

    def _op_drop_namespace(self, name, cat, a):
        _not_root(name, a["namespace"], "DROP NAMESPACE")
        ns = tuple(a["namespace"])
        if not namespace_exists(cat, ns):
            return {"dropped": False}
        if a.get("cascade"):
            from lakerules.iceberg import cleanup

            # every table's purge is checked before any is dropped
            plans = [cleanup.purge_plan(cat, ident) for ident in cat.list_tables(ns)]
            for plan in plans:
                cleanup.purge(cat, plan)
        cat.drop_namespace(ns)
        return {"dropped": True}

    # ---- tables --------------------------------------------------------------------------

    def _op_list_tables(self, _name, cat, a):
        ns = tuple(a["namespace"])
        if not ns:
            return {"tables": []}  # tables live in namespaces, never at the root
        return {"tables": [{"namespace": list(t[:-1]), "name": t[-1]} for t in cat.list_tables(ns)]}

    def _op_load_table(self, name, cat, a):
        ns, tname = tuple(a["namespace"]), a["name"]
        if not ns:
            # <catalog>.<name>: a table needs a namespace; the name may be one (OPTIMIZE lake.db)
            if namespace_exists(cat, (tname,)):
                raise LakeError(f"lakerules: {qualified(name, (), tname)} is a namespace, not a table; "
                                f"name a table in it ({qualified(name, (), tname)}.<table>)")
            raise CatalogError("NoSuchTable", "no such table", ns, tname)
        try:
            table = cat.load_table((*ns, tname))
        except (ie.NoSuchTableError, ie.NoSuchNamespaceError):
            # lake.db.t.branch_b / lake.db.t.tag_v: table db.t at a branch or tag (Iceberg's names),
            # when no table of that name exists; else lake.db.t.<metadata table>
            ref = refs.split_identifier(tname) if len(ns) >= 2 else None
            if ref is None:
                meta = self._metadata_table(name, cat, a, ns, tname)
                if meta is None:
                    raise
                return meta
            try:
                table = cat.load_table(ns)
            except (ie.NoSuchTableError, ie.NoSuchNamespaceError):
                raise CatalogError("NoSuchTable", "no such table", ns, tname) from None
            shown = qualified(name, ns[:-1], ns[-1])
            if "version" in a or "timestamp_micros" in a:
                raise LakeError(f"lakerules: {qualified(name, ns, tname)} names {ref[0]} {ref[1]!r} of {shown}: "
                                "VERSION AS OF / TIMESTAMP AS OF would choose another snapshot; give one")
            snapshot = table.snapshot_by_id(refs.ref_snapshot_id(table, shown, *ref))
            info = table_info(name, ns, tname, table, snapshot, schemas.snapshot_schema(table.metadata, snapshot))
            info.update({"ref": f"{ref[0]}:{ref[1]}", "table_namespace": list(ns[:-1]), "table_name": ns[-1]})
            return info
        if "version" in a:
            snapshot = _snapshot_by_version(table, a["version"])
        elif "timestamp_micros" in a:
            snapshot = _snapshot_at(table, a["timestamp_micros"])
        else:
            return table_info(name, ns, tname, table, table.current_snapshot(), table.schema())
        schema = table.schemas().get(snapshot.schema_id, table.schema()) if snapshot.schema_id is not None else table.schema()
        return table_info(name, ns, tname, table, snapshot, schema)

    def _metadata_table(self, name, cat, a, ns, tname):
        """A metadata table of a table (``ns.t.<meta>`` or ``ns.`t$<meta>```), as Iceberg's
        catalog answers it when no table has that name; None when it is not one."""
        from lakerules.metadata import tables as M

        split = M.split_name(ns, tname)
        if split is None:
            return None
        base_ident, meta = split
        try:
            table = cat.load_table(base_ident)
        except (ie.NoSuchTableError, ie.NoSuchNamespaceError):
            return None
        base_name = qualified(name, base_ident[:-1], base_ident[-1])
        meta = M.check_name(base_name, meta)
        snapshot = None
        if "version" in a or "timestamp_micros" in a:
            M.check_time_travel(base_name, meta)
            snapshot = _snapshot_by_version(table, a["version"]) if "version" in a else _snapshot_at(table, a["timestamp_micros"])
        return {
            "name": f"{base_name}.{meta}",
            "schema": M.spark_schema(table, meta).json(),
            "partitioning": [],
            "properties": {"provider": "iceberg", M.PROPERTY: meta, M.BASE_PROPERTY: json.dumps(list(base_ident))},
            "snapshot_id": snapshot.snapshot_id if snapshot is not None else -1,
        }

    def _op_table_exists(self, _name, cat, a):
        """Whether the catalog has the table, also when its metadata file is missing or damaged
        (so that DROP TABLE [PURGE] can drop it, as Iceberg's catalogs do)."""
        ns, tname = tuple(a["namespace"]), a["name"]
        if not ns:
            return {"exists": False}
        try:
            cat.load_table((*ns, tname))
        except (ie.NoSuchTableError, ie.NoSuchNamespaceError):
            return {"exists": False}
        except UnreadableFile:
            return {"exists": True}
        return {"exists": True}

    def _op_invalidate_table(self, _name, _cat, _a):
        return {}

    def _op_create_table(self, name, cat, a):
        ns, tname = tuple(a["namespace"]), a["name"]
        table = create_table(name, cat, a, format_version.default_for_new_tables(
            self.catalogs.setting(format_version.DEFAULT_SETTING)))
        return table_info(name, ns, tname, table, None, table.schema())

    def _op_replace_table(self, name, cat, a):
        """REPLACE TABLE / CREATE OR REPLACE TABLE without AS SELECT (the shim's staged table,
        committed when Spark commits it): one commit on the existing table (lakerules.iceberg.replace),
        which is then empty; CREATE OR REPLACE of a missing table creates it."""
        ns, tname = tuple(a["namespace"]), a["name"]
        if not ns or not cat.table_exists((*ns, tname)):
            if a.get("or_create"):
                return self._op_create_table(name, cat, a)
            raise CatalogError("NoSuchTable", "no such table", ns, tname)
        from lakerules.write import commit

        replacement = plan_replace(name, cat, a)
        commit.replace_table(replacement, [])
        table = cat.load_table((*ns, tname))
        return table_info(name, ns, tname, table, table.current_snapshot(), table.schema())

    def _op_alter_table(self, name, cat, a):
        ns, tname = tuple(a["namespace"]), a["name"]
        table = cat.load_table((*ns, tname))
        _alter(table, a["changes"], lambda location, props: owners.check_folders(
            cat, f"ALTER TABLE {qualified(name, ns, tname)}", location, props, own=(*ns, tname)))
        table = cat.load_table((*ns, tname))
        return table_info(name, ns, tname, table, table.current_snapshot(), table.schema())

    def _op_drop_table(self, _name, cat, a):
        ident = (*a["namespace"], a["name"])
        try:
            if a.get("purge"):
                from lakerules.iceberg import cleanup

                cleanup.purge_table(cat, ident)
            else:
                cat.drop_table(ident)
            return {"dropped": True}
        except ie.NoSuchTableError:
            return {"dropped": False}

    def _op_rename_table(self, name, cat, a):
        src, dst = a["from"], a["to"]
        to_ns = list(dst["namespace"])
        if len(to_ns) > 1 and to_ns[0] == name:
            to_ns = to_ns[1:]  # RENAME TO cat.ns.t: Spark passes the name as written
        paths.check_identifier(to_ns, dst["name"])
        _kept_as_spelled(name, cat, to_ns)
        if not namespace_exists(cat, tuple(to_ns)):
            raise CatalogError("NoSuchNamespace", "no such namespace", to_ns)
        cat.rename_table((*src["namespace"], src["name"]), (*to_ns, dst["name"]))
        return {}


def table_info(catalog: str, ns, name: str, table: Table, snapshot, schema) -> dict[str, Any]:
    """What the shim's LakeTable holds: name, Spark schema, partitioning, properties, snapshot, and
    the snapshot's total-records (the row count Spark's DESCRIBE TABLE EXTENDED shows). The
    properties are Iceberg's Spark table's: its table properties, and in place of any of the same
    name provider, format, current-snapshot-id, location, format-version, sort-order and
    identifier-fields."""
    from lakerules.metadata import describe

    props = {k: v for k, v in table.properties.items() if k not in describe.RESERVED_PROPERTIES}
    props.pop(shared.METADATA_TABLE_PROPERTY, None)  # marks metadata tables only (lakerules.metadata.tables)
    props.update(describe.reserved_properties(table))
    info = {
        "name": qualified(catalog, ns, name),
        "schema": schemas.iceberg_to_spark(schema).json(),
        "partitioning": partitioning.spec_to_spark(table.spec(), table.schema()),
        "properties": props,
        "snapshot_id": snapshot.snapshot_id if snapshot is not None else -1,
    }
    rows = describe.total_records(snapshot)
    if rows is not None:
        info["total_records"] = rows
    return info


def _snapshot_by_version(table: Table, version: str):
    if version.lstrip("-").isdigit():
        snapshot = table.snapshot_by_id(int(version))
    else:
        snapshot = table.snapshot_by_name(version)
    if snapshot is None:
        raise LakeError(f"lakerules: table {names.table_name(table)} has no snapshot or reference {version!r}")
    return snapshot


def _snapshot_at(table: Table, timestamp_micros: int):
    millis = timestamp_micros // 1000
    best = None
    for entry in table.metadata.snapshot_log:
        if entry.timestamp_ms <= millis:
            best = entry
    if best is None:
        raise LakeError(
            f"lakerules: table {names.table_name(table)} has no snapshot at or before timestamp {timestamp_micros} µs"
        )
    return table.snapshot_by_id(best.snapshot_id)


def _alter(table: Table, changes: list[dict], check_folders) -> None:
    """ALTER TABLE changes, applied in one transaction (all or nothing). A new location (SET
    LOCATION) or write.data.path / write.metadata.path is checked first (``check_folders(location,
    properties)``: a folder belongs to one table); the folders the table leaves keep its older files
    and stay its own (lakerules.previous-folders)."""
    column_ops = [c for c in changes if c["op"] not in ("set_property", "remove_property")]
    for c in changes:
        if c["op"] == "unsupported":
            raise NotSupported(f"lakerules: ALTER TABLE change {c['class']} is not supported: {c['description']}")
    sets = {c["key"]: c["value"] for c in changes if c["op"] == "set_property"}
    removes = [c["key"] for c in changes if c["op"] == "remove_property"]
    shown = names.table_name(table)
    if sets:
        bookkeeping.check_user_properties(f"ALTER TABLE {shown} SET TBLPROPERTIES", sets)
    if removes:
        bookkeeping.check_user_properties(f"ALTER TABLE {shown} UNSET TBLPROPERTIES", removes)
    # a property the table does not have: nothing to remove (as Iceberg's catalog, with or without IF EXISTS)
    removes = [k for k in removes if k in table.properties]
    version = sets.pop(format_version.PROPERTY, None)
    if version is not None:
        version = format_version.checked(version, f"ALTER TABLE {names.table_name(table)} SET TBLPROPERTIES",
                                         table.format_version)
    location = sets.pop("location", None)
    moved = [k for k in (paths.DATA_PATH, paths.METADATA_PATH) if k in sets or k in removes]
    if location is not None or moved:
        props = {k: v for k, v in table.properties.items() if k not in removes}
        props.update(sets)
        left = [table.location()] if location is not None else []
        left += [table.properties[k] for k in moved if table.properties.get(k) and props.get(k) != table.properties[k]]
        props[paths.PREVIOUS_FOLDERS] = previous_folders(table, *left)
        check_folders(location or table.location(), props)
        if props[paths.PREVIOUS_FOLDERS] != table.properties.get(paths.PREVIOUS_FOLDERS, "[]"):
            sets[paths.PREVIOUS_FOLDERS] = props[paths.PREVIOUS_FOLDERS]
    with table.transaction() as tx:
        if location is not None:
            paths.check_location(location)
            edge.stage(tx, (SetLocationUpdate(location=location.rstrip("/")),))  # pyiceberg's update_location is not implemented
        if column_ops:
            with tx.update_schema() as us:
                for c in column_ops:
                    _column_change(us, table, c)
        if version is not None and version != table.format_version:
            format_version.upgrade(tx, version)
        if sets:
            tx.set_properties(sets)
        if removes:
            tx.remove_properties(*removes)


def _default(table: Table, path: tuple, field_type, c: dict, verb: str = "ADD COLUMN {} ... DEFAULT"):
    """A column default's value for Iceberg (format version 3: ADD COLUMN's sets the new column's
    initial-default, which rows written before read, and its write-default; ALTER COLUMN ... SET
    DEFAULT's the write-default), from the text the shim made of the value Spark folded the
    expression to; None for DEFAULT NULL."""
    shown = ".".join(path)
    verb = verb.format(shown)
    if table.format_version < 3:
        raise NotSupported(f"lakerules: {verb} on {names.table_name(table)}: column default "
                           f"values need Iceberg format version 3 (the table has {table.format_version}; upgrade it "
                           "with SET TBLPROPERTIES ('format-version'='3')). Nothing was changed")
    if len(path) > 1:
        raise NotSupported(f"lakerules: {verb}: lakerules gives defaults to top-level "
                           "columns only (Spark has no nested defaults). Nothing was changed")
    if c.get("default_sql") is not None:
        raise NotSupported(f"lakerules: {verb}: the default {c['default_sql']!r} is not a constant Spark could fold; "
                           "give a constant. Nothing was changed")
    if c.get("default_unsupported"):
        raise NotSupported(f"lakerules: {verb}: a default of type {c['default_unsupported']} "
                           "is not supported (Iceberg's defaults are of primitive types). Nothing was changed")
    text = c.get("default")
    if text is None:
        return None
    _check_default_range(table, verb, field_type, text)
    match field_type:
        case it.BooleanType():
            return text == "true"
        case it.IntegerType() | it.LongType():
            return int(text)
        case it.FloatType() | it.DoubleType():
            return float(text)
        case it.BinaryType() | it.FixedType():
            raise NotSupported(f"lakerules: {verb}: a binary column's default is not "
                               "supported yet (Spark's Parquet reader cannot fill it into older files). Nothing "
                               "was changed")
    return text  # dates, times, decimals, strings: pyiceberg reads their single-value JSON text


def _check_default_range(table: Table, verb: str, field_type, text: str) -> None:
    """A default every reader can take: an Iceberg single-value (ISO-8601 dates and timestamps,
    years 1 to 9999) that Spark's Parquet reader can fill into older files (a DECIMAL of more than
    18 digits only with an unscaled value of 64 bits: Spark's vectorized reader fills it as a long)."""
    import datetime
    import decimal

    problem = None
    if isinstance(field_type, it.DecimalType) and field_type.precision > 18:
        unscaled = int(decimal.Decimal(text).scaleb(field_type.scale))
        if not -(2 ** 63) <= unscaled < 2 ** 63:
            problem = (f"Spark's Parquet reader fills a {field_type} default into files written before it only when its "
                       "unscaled value fits 64 bits (|value| below 9223372036854775808 units of the scale)")
    elif isinstance(field_type, (it.DateType, it.TimestampType, it.TimestamptzType, it.TimestampNanoType,
                                 it.TimestamptzNanoType)):
        try:
            if isinstance(field_type, it.DateType):
                datetime.date.fromisoformat(text)
            else:
                datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            problem = "Iceberg keeps defaults as ISO-8601 values, of years 1 to 9999"
    if problem:
        raise LakeError(f"lakerules: {verb} on {names.table_name(table)}: the default {text!r} cannot be the column's "
                        f"default: {problem}. Nothing was changed")


def _column_change(us, table: Table, c: dict) -> None:
    path = tuple(c["path"])
    op = c["op"]
    if op == "add_column":
        from pyspark.sql.types import _parse_datatype_json_string

        field_type = schemas.spark_type_to_iceberg(_parse_datatype_json_string(c["type"]))
        default = _default(table, path, field_type, c) if c.get("has_default") else None
        if not c["nullable"] and default is None:
            raise LakeError(
                f"lakerules: cannot add required column {'.'.join(path)}: existing rows have no value for it"
            )
        us.add_column(path, field_type, doc=c.get("comment"), required=not c["nullable"], default_value=default)
        _move(us, path, c)
    elif op == "update_column_default":
        field = table.schema().find_field(".".join(path))
        value = None  # DROP DEFAULT (or DEFAULT NULL): an INSERT that omits the column writes null
        if c.get("has_default") or c.get("default_sql") is not None:
            value = _default(table, path, field.field_type, c, "ALTER COLUMN {} SET DEFAULT")
        if value is None and field.write_default is None:
            return  # no default to drop (a v1 or v2 table has none)
        if value is None and field.required:
            raise LakeError(f"lakerules: ALTER COLUMN {'.'.join(path)} DROP DEFAULT on {names.table_name(table)}: the "
                            "column is required (NOT NULL): an INSERT that omits it would have no value. Nothing was "
                            "changed")
        us.set_default_value(path, value)
    elif op == "rename_column":
        us.rename_column(path, c["new_name"])
    elif op == "delete_column":
        if c["if_exists"] and not _column_exists(table, path):
            return
        us.delete_column(path)
    elif op == "update_column_type":
        from pyspark.sql.types import _parse_datatype_json_string

        spark_type = _parse_datatype_json_string(c["type"])
        new_type = schemas.spark_type_to_iceberg(spark_type)
        old_type = table.schema().find_field(".".join(path)).field_type
        if not schemas.promotable(old_type, new_type):
            was = schemas.iceberg_type_to_spark(old_type).simpleString()
            raise LakeError(
                f"lakerules: ALTER TABLE {names.table_name(table)} ALTER COLUMN {'.'.join(path)} TYPE: {was} cannot "
                f"become {spark_type.simpleString()}; Iceberg changes a column's type only by promotion (int to bigint, float to double, "
                "decimal(P,S) to decimal(P',S) with P' > P), so that the files already written read as the new type. "
                "Nothing was changed")
        us.update_column(path, field_type=new_type)
    elif op == "update_column_nullability":
        if not c["nullable"]:
            raise LakeError(f"lakerules: cannot make column {'.'.join(path)} NOT NULL: existing rows may hold nulls")
        us.update_column(path, required=False)
    elif op == "update_column_comment":
        us.update_column(path, doc=c["comment"])
    elif op == "update_column_position":
        _move(us, path, c)


def _move(us, path: tuple, c: dict) -> None:
    if c.get("first"):
        us.move_first(path)
    elif c.get("after"):
        us.move_after(path, (*path[:-1], c["after"]))


def _column_exists(table: Table, path: tuple) -> bool:
    try:
        table.schema().find_field(".".join(path))
        return True
    except ValueError:
        return False
