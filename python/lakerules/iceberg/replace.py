"""Replacing a table in one commit, as Iceberg's replace transaction does.

CREATE OR REPLACE TABLE [AS SELECT], REPLACE TABLE [AS SELECT], ``df.writeTo(t).createOrReplace()``
/ ``.replace()`` and ``df.write.mode("overwrite").saveAsTable(t)`` on an existing lake table all
come here. The table keeps its UUID, its snapshots and its refs other than ``main``, so time travel
and rollback to the old state keep working; the one commit

- adds the new schema (columns keep the field id of the old column of the same full name; new
  columns get ids above the table's last one, so no id ever means two different columns), or
  makes an identical old schema current again;
- adds the new partition spec (a field keeps the id of an old field with the same source column and
  transform) or makes an identical old one the default;
- makes the write order unsorted, merges the new properties over the old ones (Iceberg keeps the
  old ones too), moves the location when one is given;
- removes ``main`` and, for the AS SELECT forms, points it at a new snapshot (no parent) holding
  just the new rows.

The new rows are written before the commit, as files of the replacement (:attr:`Replacement.staged`,
the table as it will be); if anything fails before the commit lands the table is exactly as it was
and the statement's files are deleted. The commit requires the table as it was planned on: the
same UUID, ``main`` head, current schema, default spec and sort order, last column and partition
ids; a commit of another writer meanwhile makes the replace a conflict (run it again), never a
replace of something it did not see.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema, index_by_name
from pyiceberg.table import StagedTable, Table
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSortOrderUpdate,
    AssertCurrentSchemaId,
    AssertDefaultSortOrderId,
    AssertDefaultSpecId,
    AssertLastAssignedFieldId,
    AssertLastAssignedPartitionId,
    AssertRefSnapshotId,
    AssertTableUUID,
    RemoveSnapshotRefUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSortOrderUpdate,
    SetDefaultSpecUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    update_table_metadata,
)
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from lakerules.errors import CatalogError, LakeError
from lakerules.iceberg import bookkeeping, format_version, owners, partitioning, paths
from lakerules.iceberg import schema as schemas
from lakerules.iceberg.catalogs import kept_as_spelled, namespace_exists, qualified

NAME_MAPPING = "schema.name-mapping.default"


@dataclass(frozen=True)
class Replacement:
    """A planned replace of ``base``: the updates and requirements of its one commit, and
    ``staged``, the table as the commit will leave it (its schema, spec, location and properties
    are what the new rows are written with)."""

    base: Table
    staged: Table
    updates: tuple
    requirements: tuple


def plan(base: Table, schema: Schema, partitioning: PartitionSpec, properties: dict[str, str],
         location: str | None, shown: str) -> Replacement:
    """The replace of ``base`` by a table of ``schema`` (any field ids: they are assigned here),
    partitioned by ``partitioning`` (over ``schema``'s ids), with ``properties`` set and, if
    given, at ``location``. ``shown`` names the table in errors (lake.db.t)."""
    metadata = base.metadata
    updates: list = []
    version = properties.get(format_version.PROPERTY)
    if version is not None:
        version = format_version.checked(version, f"CREATE OR REPLACE TABLE {shown}", metadata.format_version)
        if version > metadata.format_version:
            updates.append(format_version.upgrade_update(version))
    new_schema = _with_ids(schema, metadata.schema(), metadata.last_column_id)
    same = next((s for s in metadata.schemas if s.fields == new_schema.fields
                 and set(s.identifier_field_ids) == set(new_schema.identifier_field_ids)), None)
    if same is None:
        schema_id = max(s.schema_id for s in metadata.schemas) + 1
        new_schema = Schema(*new_schema.fields, schema_id=schema_id)
        updates += [AddSchemaUpdate(schema_=new_schema), SetCurrentSchemaUpdate(schema_id=-1)]
    else:
        new_schema = same
        if same.schema_id != metadata.current_schema_id:
            updates.append(SetCurrentSchemaUpdate(schema_id=same.schema_id))
    updates += _spec_updates(metadata, _remap_spec(partitioning, schema, new_schema))
    if metadata.default_sort_order_id != UNSORTED_SORT_ORDER.order_id:
        if any(o.order_id == UNSORTED_SORT_ORDER.order_id for o in metadata.sort_orders):
            updates.append(SetDefaultSortOrderUpdate(sort_order_id=UNSORTED_SORT_ORDER.order_id))
        else:
            updates += [AddSortOrderUpdate(sort_order=UNSORTED_SORT_ORDER), SetDefaultSortOrderUpdate(sort_order_id=-1)]
    if location is not None and location.rstrip("/") != metadata.location.rstrip("/"):
        updates.append(SetLocationUpdate(location=location.rstrip("/")))
    props = {k: v for k, v in properties.items() if k != format_version.PROPERTY}
    props[NAME_MAPPING] = new_schema.name_mapping.model_dump_json()
    changed = {k: v for k, v in props.items() if metadata.properties.get(k) != v}
    if changed:
        updates.append(SetPropertiesUpdate(updates=changed))
    main = metadata.refs.get(MAIN_BRANCH)
    if main is not None:
        updates.append(RemoveSnapshotRefUpdate(ref_name=MAIN_BRANCH))
    requirements = (
        AssertTableUUID(uuid=metadata.table_uuid),
        AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=main.snapshot_id if main is not None else None),
        AssertCurrentSchemaId(current_schema_id=metadata.current_schema_id),
        AssertLastAssignedFieldId(last_assigned_field_id=metadata.last_column_id),
        AssertDefaultSpecId(default_spec_id=metadata.default_spec_id),
        AssertLastAssignedPartitionId(last_assigned_partition_id=metadata.last_partition_id),
        AssertDefaultSortOrderId(default_sort_order_id=metadata.default_sort_order_id),
    )
    staged_metadata = update_table_metadata(metadata, tuple(updates))
    staged = StagedTable(base.name(), staged_metadata, base.metadata_location, base.io, base.catalog)
    return Replacement(base, staged, tuple(updates), requirements)


# ---- from the shim's arguments ----------------------------------------------------------------

# Spark passes these as table properties; they are not Iceberg properties.
SPARK_RESERVED = {"provider", "owner", "location", "is_managed_location", "external", "option.path"}


def create_table(catalog: str, cat: Catalog, a: dict, default_version: int = format_version.DEFAULT) -> Table:
    """Create the table the shim's arguments ``a`` describe (CREATE TABLE, CTAS): checked (names,
    provider, format version, location), in its own folder (lakerules.iceberg.owners); at
    ``default_version`` (the session's spark.lakerules.default-format-version) unless a
    format-version property says otherwise."""
    ns, tname = tuple(a["namespace"]), a["name"]
    iceberg_schema, spec, props, location = new_table(catalog, cat, a)
    if not namespace_exists(cat, ns):
        raise CatalogError("NoSuchNamespace", "no such namespace", ns)
    props.setdefault(format_version.PROPERTY, str(default_version))
    tables = owners.other_tables(cat)
    if not location:
        location = owners.default_location(cat, ns, tname, cat.load_namespace_properties(ns).get("location"), tables)
    owners.check_folders(cat, f"CREATE TABLE {qualified(catalog, ns, tname)}", location, props, tables=tables)
    table = cat.create_table((*ns, tname), iceberg_schema, partition_spec=spec, properties=props, location=location)
    return _add_name_mapping(table)


def _add_name_mapping(table: Table) -> Table:
    """Spark's Parquet writer puts field ids on struct fields only, not on list elements or map
    keys and values; readers map such files by name through this property, which pyiceberg keeps
    current on every schema change (renames keep the old names)."""
    if "schema.name-mapping.default" in table.properties:
        return table
    with table.transaction() as tx:
        tx.set_properties({"schema.name-mapping.default": table.schema().name_mapping.model_dump_json()})
    return table.refresh()


def new_table(catalog: str, cat: Catalog, a: dict, default_provider: str | None = None):
    """(Iceberg schema, partition spec, properties, location or None) of a table to create or
    replace from the shim's arguments (Spark's columns, transforms and properties), checked.
    ``default_provider``: the session's default data source, which DataFrameWriter.saveAsTable
    names when no format() was given, taken as no USING at all."""
    ns, tname = tuple(a["namespace"]), a["name"]
    paths.check_identifier(ns, tname)
    kept_as_spelled(catalog, cat, ns)
    props = dict(a.get("properties") or {})
    provider = props.get("provider")
    if provider and provider.lower() != "iceberg" and provider != default_provider:
        raise LakeError(
            f"lakerules: lake tables are Iceberg tables; USING {provider} is not supported "
            "(write USING iceberg, or leave USING out)"
        )
    location = props.get("location")
    if location:
        paths.check_location(location)
    props = {k: v for k, v in props.items() if k not in SPARK_RESERVED}
    bookkeeping.check_user_properties(f"table {qualified(catalog, ns, tname)}", props)
    if format_version.PROPERTY in props:
        format_version.checked(props[format_version.PROPERTY], f"CREATE TABLE {qualified(catalog, ns, tname)}")
    iceberg_schema = schemas.spark_json_to_iceberg(a["schema"])
    spec = partitioning.spec_from_spark(a.get("partitioning") or [], iceberg_schema)
    return iceberg_schema, spec, props, location


def plan_replace(catalog: str, cat: Catalog, a: dict, default_provider: str | None = None):
    """The replace of the existing table a names (lakerules.iceberg.replace) by the table a describes."""
    ns, tname = tuple(a["namespace"]), a["name"]
    iceberg_schema, spec, props, location = new_table(catalog, cat, a, default_provider)
    base = cat.load_table((*ns, tname))
    shown = qualified(catalog, ns, tname)
    if location or any(k in props for k in (paths.DATA_PATH, paths.METADATA_PATH)):
        merged = {**base.properties, **props}
        if location and paths.key(location) != paths.key(base.location()):
            merged[paths.PREVIOUS_FOLDERS] = previous_folders(base, base.location())
        owners.check_folders(cat, f"CREATE OR REPLACE TABLE {shown}", location or base.location(), merged,
                             own=(*ns, tname))
        if paths.PREVIOUS_FOLDERS in merged and merged[paths.PREVIOUS_FOLDERS] != base.properties.get(paths.PREVIOUS_FOLDERS):
            props[paths.PREVIOUS_FOLDERS] = merged[paths.PREVIOUS_FOLDERS]
    return plan(base, iceberg_schema, spec, props, location, shown)


def previous_folders(table: Table, *folders: str) -> str:
    """The table's lakerules.previous-folders with ``folders`` added, when it has files (they stay
    in the folders it moves away from, and so does its ownership of them)."""
    known = json.loads(table.properties.get(paths.PREVIOUS_FOLDERS) or "[]")
    if table.metadata.snapshots:
        known += [f for f in folders if f and f not in known]
    return json.dumps(known)



# ---- field ids ------------------------------------------------------------------------------------


def _with_ids(schema: Schema, old: Schema, last_column_id: int) -> Schema:
    """``schema`` with Iceberg's replace ids: a field (struct field, list element, map key or
    value) whose full name the old schema has keeps that field's id when its type is the old one's
    or an allowed promotion of it (schema.promotable: the old snapshots' files read as the new type);
    the others, a column whose type changed otherwise among them, get new ids after
    ``last_column_id``, in order, so that a branch, a tag or a rollback to a snapshot before the
    replace reads its own files with its own schema, and the new schema never reads them as its type."""
    by_name = index_by_name(old)
    fresh = itertools.count(last_column_id + 1)

    def pick(name: str, t: IcebergType) -> int:
        if name in by_name and schemas.promotable(old.find_type(by_name[name]), t):
            return by_name[name]
        return next(fresh)

    def typed(t: IcebergType, prefix: str) -> IcebergType:
        if isinstance(t, StructType):
            return StructType(*(field(f, prefix) for f in t.fields))
        if isinstance(t, ListType):
            name = f"{prefix}.element"
            return ListType(element_id=pick(name, t.element_type), element_type=typed(t.element_type, name),
                            element_required=t.element_required)
        if isinstance(t, MapType):
            key, value = f"{prefix}.key", f"{prefix}.value"
            return MapType(key_id=pick(key, t.key_type), key_type=typed(t.key_type, key),
                           value_id=pick(value, t.value_type), value_type=typed(t.value_type, value),
                           value_required=t.value_required)
        return t

    def field(f: NestedField, prefix: str) -> NestedField:
        name = f"{prefix}.{f.name}" if prefix else f.name
        return NestedField(field_id=pick(name, f.field_type), name=f.name, field_type=typed(f.field_type, name),
                           required=f.required, doc=f.doc)

    return Schema(*(field(f, "") for f in schema.fields))


def _remap_spec(spec: PartitionSpec, schema: Schema, new_schema: Schema) -> PartitionSpec:
    """``spec`` (over ``schema``'s ids) over ``new_schema``'s ids, by the source columns' names."""
    fields = []
    for f in spec.fields:
        source = new_schema.find_field(schema.find_column_name(f.source_id))
        fields.append(PartitionField(source_id=source.field_id, field_id=f.field_id, transform=f.transform, name=f.name))
    return PartitionSpec(*fields)


def _spec_updates(metadata, spec: PartitionSpec) -> list:
    """Make ``spec`` the default: a field keeps the id of an old spec's field with the same source
    and transform (new ones are numbered after the last), and an identical old spec is reused."""
    old_ids = {}
    for s in metadata.partition_specs:
        for f in s.fields:
            old_ids.setdefault((f.source_id, str(f.transform)), f.field_id)
    fresh = itertools.count((metadata.last_partition_id or 999) + 1)
    fields = tuple(PartitionField(source_id=f.source_id, transform=f.transform, name=f.name,
                                  field_id=old_ids.get((f.source_id, str(f.transform))) or next(fresh))
                   for f in spec.fields)
    same = next((s for s in metadata.partition_specs if tuple(s.fields) == fields), None)
    if same is not None:
        return [] if same.spec_id == metadata.default_spec_id else [SetDefaultSpecUpdate(spec_id=same.spec_id)]
    spec_id = max(s.spec_id for s in metadata.partition_specs) + 1
    return [AddPartitionSpecUpdate(spec=PartitionSpec(*fields, spec_id=spec_id)), SetDefaultSpecUpdate(spec_id=-1)]
