"""Catalog operations for the shim's LakeCatalog, answered with pyiceberg catalogs.

A lake catalog NAME is configured like Iceberg's Spark catalog: every
``spark.sql.catalog.NAME.<property>`` is passed to pyiceberg's ``load_catalog(NAME, ...)``.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from pyiceberg import exceptions as ie
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table
from pyiceberg.table.update import SetLocationUpdate

from lakerules import far_dates, format_version, metadata_cache, metadata_files, names, owners, partitioning, paths, refs
from lakerules import schema as schemas
from lakerules.errors import CatalogError, CatalogUnavailable, LakeError, NotSupported, UnreadableFile

# Spark passes these as table properties; they are not Iceberg properties.
_SPARK_RESERVED = {"provider", "owner", "location", "is_managed_location", "external", "option.path"}


metadata_cache.install()
metadata_files.install()
far_dates.install()


def qualified(catalog: str, namespace, name: str) -> str:
    return ".".join([catalog, *namespace, name])


_SECRET_WORDS = ("password", "secret", "token", "credential", "key")


def _shown(key: str, value: str) -> str:
    """A catalog property as an error message may show it: secrets and URI passwords masked."""
    if any(w in key.lower() for w in _SECRET_WORDS):
        return "***"
    return re.sub(r"(://[^/:@]*:)[^/@]*@", r"\1***@", str(value))


def _kept_as_spelled(catalog: str, cat: Catalog, namespace) -> None:
    """Refuse a namespace name a SQL catalog would not keep as written: pyiceberg's SQL catalog
    stores a namespace as its parts joined with '.', each stripped of surrounding whitespace, so
    lake.`a.b` would be the nested namespace lake.a.b and lake.` x ` would be lake.x (the same
    namespace, under another name, for every reader)."""
    from pyiceberg.catalog.sql import SqlCatalog

    if not isinstance(cat, SqlCatalog):
        return
    for part in namespace:
        if "." in part:
            problem = ("contains '.', which a SQL catalog uses to separate nested namespaces: it would be "
                       f"the same namespace as {'.'.join((catalog, *part.split('.')))}")
        elif part != part.strip():
            problem = (f"starts or ends with whitespace, which a SQL catalog strips: it would be the namespace "
                       f"{part.strip()!r}" if part.strip() else "is only whitespace, which a SQL catalog cannot store")
        else:
            continue
        raise LakeError(f"lakerules: namespace name {part!r} {problem}. Choose a name without it "
                        f"(catalog {catalog!r} is a pyiceberg SQL catalog)")


def _not_root(catalog: str, namespace, statement: str) -> None:
    if not namespace:
        raise LakeError(f"lakerules: {statement} needs a namespace of catalog {catalog!r} "
                        f"({statement} {catalog}.<namespace>); the catalog itself is none")


def build(name: str, props: dict) -> Catalog:
    """pyiceberg's catalog ``name`` from its properties, with lakerules' handling of its faults
    (guarded) and of SQLite's locks."""
    try:
        catalog = load_catalog(name, **props)
    except Exception as e:  # noqa: BLE001 - pyiceberg raises ValueError, ImportError, ...
        given = ", ".join(f"{k}={_shown(k, v)}" for k, v in sorted(props.items())) or "none"
        raise LakeError(
            f"lakerules: cannot load catalog {name!r} from its spark.sql.catalog.{name}.<property> "
            f"settings ({given}): {type(e).__name__}: {e}. The embedded default needs "
            f"spark.sql.catalog.{name}.type=sql, .uri=sqlite:///<folder>/catalog.db and "
            f".warehouse=file://<folder>; `python -m lakerules conf --warehouse <folder>` prints them"
        ) from e
    return guarded(_sqlite_locks_wait(catalog), name, props)


class Catalogs:
    """The pyiceberg catalogs of one JVM, by Spark catalog name, built on first use."""

    def __init__(self, spark):
        self._spark = spark
        self._catalogs: dict[str, Catalog] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Catalog:
        with self._lock:
            if name not in self._catalogs:
                raw = self._spark._jvm.io.lakerules.Bridge.catalogOptions(name)
                if raw is None:
                    raise LakeError(
                        f"lakerules: catalog {name!r} is not a lake catalog; set "
                        f"spark.sql.catalog.{name}=io.lakerules.LakeCatalog and its properties"
                    )
                self._catalogs[name] = build(name, json.loads(raw))
            return self._catalogs[name]

    def load(self, catalog: str, namespace, name: str) -> Table:
        return self.get(catalog).load_table((*namespace, name))

    def load_for_write(self, t, conf) -> Table:
        """The table a write to ``t`` (a plan.TableRef) plans and commits with: at the head of the
        branch it writes to (its name's branch, or write-audit-publish's), that target attached
        (lakerules.refs); a LakeError for a tag, a missing branch or contradicting settings."""
        table = self.load(t.catalog, t.namespace, t.name)
        return refs.for_write(table, refs.write_target(table, t, refs.parse_ref(t.ref), conf))

    def load_for_statement(self, t, conf, run_fn) -> Table:
        """The table a statement of lakerules.statements runs on: OPTIMIZE (``run_fn.writes_data``)
        as any write (a branch named or write-audit-publish's; staging under spark.wap.id is refused:
        a rewrite publishes no new data to audit); the others on the table itself, never named at a ref."""
        what = " ".join((getattr(run_fn, "description", None) or "this statement").split())[:80]
        if getattr(run_fn, "writes_data", False):
            table = self.load_for_write(t, conf)
            if refs.target_of(table).branch is None:
                raise NotSupported(f"lakerules: {what}: {t} has write.wap.enabled=true and the session sets "
                                   f"spark.wap.id: a rewrite is not staged; unset spark.wap.id to rewrite main's "
                                   "files, or name a branch (<table>.branch_<name>)")
            return table
        if t.ref:
            raise LakeError(f"lakerules: {what}: {t} names a {t.ref.partition(':')[0]}; name the table itself")
        return self.load(t.catalog, t.namespace, t.name)

    def plan_replace(self, catalog: str, args: dict, default_provider: str | None = None):
        """The replace (lakerules.replace) of an existing table of ``catalog`` by the table the
        shim's ``args`` describe (CREATE OR REPLACE ... AS SELECT plans it before writing)."""
        return plan_replace(catalog, self.get(catalog), args, default_provider)

    # ---- dispatch from the shim ------------------------------------------------------------

    def handle(self, catalog: str, op: str, args: dict) -> dict:
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise NotSupported(f"lakerules: catalog operation {op} is not supported")
        return handler(catalog, self.get(catalog), args)

    # ---- namespaces ----------------------------------------------------------------------

    def _op_list_namespaces(self, _name, cat: Catalog, a):
        parent = tuple(a["namespace"])
        if parent and not self._namespace_exists(cat, parent):
            raise CatalogError("NoSuchNamespace", "no such namespace", parent)
        return {"namespaces": [list(ns) for ns in cat.list_namespaces(parent)]}

    def _op_namespace_exists(self, _name, cat, a):
        return {"exists": self._namespace_exists(cat, tuple(a["namespace"]))}

    @staticmethod
    def _namespace_exists(cat: Catalog, ns: tuple) -> bool:
        if not ns:
            return True  # the catalog's root, which holds namespaces (and no tables)
        if any(not part.strip() for part in ns):
            return False  # no catalog keeps such a namespace (pyiceberg refuses to look it up)
        try:
            cat.load_namespace_properties(ns)
            return True
        except ie.NoSuchNamespaceError:
            return False

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
        if not self._namespace_exists(cat, ns):
            return {"dropped": False}
        if a.get("cascade"):
            from lakerules import maintenance

            # every table's purge is checked before any is dropped
            plans = [maintenance.purge_plan(cat, ident) for ident in cat.list_tables(ns)]
            for plan in plans:
                maintenance.purge(cat, plan)
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
            if self._namespace_exists(cat, (tname,)):
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
            info = table_info(name, ns, tname, table, snapshot, table.schema())
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
        from lakerules import metadata_tables as M

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
        iceberg_schema, spec, props, location = _new_table(name, cat, a)
        if not self._namespace_exists(cat, ns):
            raise CatalogError("NoSuchNamespace", "no such namespace", ns)
        props.setdefault(format_version.PROPERTY, str(format_version.DEFAULT))
        # a folder belongs to one table (lakerules.owners)
        tables = owners.other_tables(cat)
        if not location:
            location = owners.default_location(cat, ns, tname, cat.load_namespace_properties(ns).get("location"), tables)
        owners.check_folders(cat, f"CREATE TABLE {qualified(name, ns, tname)}", location, props, tables=tables)
        table = cat.create_table((*ns, tname), iceberg_schema, partition_spec=spec, properties=props, location=location)
        table = _add_name_mapping(table)
        return table_info(name, ns, tname, table, None, table.schema())

    def _op_replace_table(self, name, cat, a):
        """REPLACE TABLE / CREATE OR REPLACE TABLE without AS SELECT (the shim's staged table,
        committed when Spark commits it): one commit on the existing table (lakerules.replace),
        which is then empty; CREATE OR REPLACE of a missing table creates it."""
        ns, tname = tuple(a["namespace"]), a["name"]
        if not ns or not cat.table_exists((*ns, tname)):
            if a.get("or_create"):
                return self._op_create_table(name, cat, a)
            raise CatalogError("NoSuchTable", "no such table", ns, tname)
        from lakerules import commit

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
                from lakerules import maintenance

                maintenance.purge_table(cat, ident)
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
        if not self._namespace_exists(cat, tuple(to_ns)):
            raise CatalogError("NoSuchNamespace", "no such namespace", to_ns)
        cat.rename_table((*src["namespace"], src["name"]), (*to_ns, dst["name"]))
        return {}


def _new_table(catalog: str, cat: Catalog, a: dict, default_provider: str | None = None):
    """(Iceberg schema, partition spec, properties, location or None) of a table to create or
    replace from the shim's arguments (Spark's columns, transforms and properties), checked.
    ``default_provider``: the session's default data source, which DataFrameWriter.saveAsTable
    names when no format() was given, taken as no USING at all."""
    ns, tname = tuple(a["namespace"]), a["name"]
    paths.check_identifier(ns, tname)
    _kept_as_spelled(catalog, cat, ns)
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
    props = {k: v for k, v in props.items() if k not in _SPARK_RESERVED}
    if format_version.PROPERTY in props:
        format_version.checked(props[format_version.PROPERTY], f"CREATE TABLE {qualified(catalog, ns, tname)}")
    iceberg_schema = schemas.spark_json_to_iceberg(a["schema"])
    spec = partitioning.spec_from_spark(a.get("partitioning") or [], iceberg_schema)
    return iceberg_schema, spec, props, location


def plan_replace(catalog: str, cat: Catalog, a: dict, default_provider: str | None = None):
    """The replace of the existing table a names (lakerules.replace) by the table a describes."""
    from lakerules import replace

    ns, tname = tuple(a["namespace"]), a["name"]
    iceberg_schema, spec, props, location = _new_table(catalog, cat, a, default_provider)
    base = cat.load_table((*ns, tname))
    shown = qualified(catalog, ns, tname)
    if location or any(k in props for k in (paths.DATA_PATH, paths.METADATA_PATH)):
        merged = {**base.properties, **props}
        if location and paths.key(location) != paths.key(base.location()):
            merged[paths.PREVIOUS_FOLDERS] = _previous(base, base.location())
        owners.check_folders(cat, f"CREATE OR REPLACE TABLE {shown}", location or base.location(), merged,
                             own=(*ns, tname))
        if paths.PREVIOUS_FOLDERS in merged and merged[paths.PREVIOUS_FOLDERS] != base.properties.get(paths.PREVIOUS_FOLDERS):
            props[paths.PREVIOUS_FOLDERS] = merged[paths.PREVIOUS_FOLDERS]
    return replace.plan(base, iceberg_schema, spec, props, location, shown)


def _previous(table: Table, *folders: str) -> str:
    """The table's lakerules.previous-folders with ``folders`` added, when it has files (they stay
    in the folders it moves away from, and so does its ownership of them)."""
    known = json.loads(table.properties.get(paths.PREVIOUS_FOLDERS) or "[]")
    if table.metadata.snapshots:
        known += [f for f in folders if f and f not in known]
    return json.dumps(known)


# ---- the catalog's own faults ------------------------------------------------------------------------

# Catalog methods that only read, and those that change the catalog, by what the error says.
_READS = {"load_table": "load table", "table_exists": "look up table", "list_tables": "list the tables of",
          "list_namespaces": "list the namespaces of", "load_namespace_properties": "read namespace",
          "namespace_exists": "look up namespace"}
_WRITES = {"drop_table": "drop table", "rename_table": "rename table", "create_namespace": "create namespace",
           "drop_namespace": "drop namespace", "update_namespace_properties": "alter namespace",
           "register_table": "register table"}


def guarded(cat: Catalog, name: str, props: dict | None = None) -> Catalog:
    """The catalog ``name``, whose faults are clear errors: a table whose metadata file is missing
    or damaged is an UnreadableFile naming the table (and every table loaded is remembered by
    location, so that a damaged manifest names its table too); a SQL catalog's database that
    cannot be written or read (read-only file or folder, a disk error, a server that refuses) is a
    CatalogUnavailable naming the catalog, its database and what was done. A commit or CREATE TABLE
    that fails there is checked against the catalog afterwards: one that did land is a success, one
    that did not leaves nothing behind (its new metadata file is deleted)."""
    load_table = cat.load_table

    def load(identifier):
        ident = Catalog.identifier_to_tuple(identifier)
        if any(not part.strip() for part in ident[:-1]):  # pyiceberg raises a ValueError for it
            raise ie.NoSuchTableError(f"Table does not exist: {'.'.join(ident)}")
        try:
            table = load_table(identifier)
        except UnreadableFile as e:
            raise metadata_files.named(e, qualified(name, ident[:-1], ident[-1])) from e.cause
        metadata_files.remember_table(table.location(), qualified(name, ident[:-1], ident[-1]))
        return table

    cat.load_table = load
    engine = getattr(cat, "engine", None)
    if engine is None:
        return cat
    from sqlalchemy.exc import DBAPIError

    uri = _shown("uri", (props or {}).get("uri", str(engine.url)))
    written = threading.local()  # the metadata file this thread's catalog call wrote last
    write_metadata = cat._write_metadata

    def recording_write_metadata(metadata, io, metadata_path):
        written.path = metadata_path
        return write_metadata(metadata, io, metadata_path)

    cat._write_metadata = recording_write_metadata

    def failed(what: str, e: DBAPIError, change: bool, outcome: str = "") -> str:
        cause = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
        verb = "refused the change" if change else "could not be read"
        return (f"lakerules: catalog {name!r} could not {what}: its database {uri} {verb} ({cause}). "
                f"{outcome or ('Nothing was changed.' if change else '')} Check that the database "
                "(for SQLite, the file and its folder) can be read and written by this process."
                ).replace("  ", " ").strip()

    def what_of(op: str, args) -> str:
        if op in ("rename_table",):
            a, b = (Catalog.identifier_to_tuple(x) for x in args[:2])
            return f"rename table {qualified(name, a[:-1], a[-1])} to {qualified(name, b[:-1], b[-1])}"
        target = Catalog.identifier_to_tuple(args[0]) if args and isinstance(args[0], (str, tuple, list)) else ()
        words = (_READS | _WRITES)[op]
        if op in ("list_namespaces", "list_tables") and not target:
            return f"{words} catalog {name}"
        return f"{words} {'.'.join((name, *target))}"

    def wrap(op: str, change: bool):
        inner = getattr(cat, op)

        def call(*args, **kwargs):
            try:
                return inner(*args, **kwargs)
            except DBAPIError as e:
                raise CatalogUnavailable(failed(what_of(op, args), e, change)) from e

        setattr(cat, op, call)

    for op in _READS:
        if hasattr(cat, op):
            wrap(op, change=False)
    for op in _WRITES:
        if hasattr(cat, op):
            wrap(op, change=True)

    def forget_written() -> str | None:
        path, written.path = getattr(written, "path", None), None
        return path

    def delete_written(path: str | None) -> None:
        if path:
            try:
                cat._load_file_io(location=path).delete(path)
            except Exception:  # noqa: BLE001 - an orphan at worst; remove_orphan_files finds it
                pass

    create_table = cat.create_table

    def create(identifier, *args, **kwargs):
        ident = Catalog.identifier_to_tuple(identifier)
        forget_written()
        try:
            return create_table(identifier, *args, **kwargs)
        except DBAPIError as e:
            ours = forget_written()
            try:
                table = load_table(identifier)
                if ours and table.metadata_location == ours:
                    return table  # the row landed, the error came after
            except Exception:  # noqa: BLE001 - not there, or the catalog cannot be read at all
                pass
            delete_written(ours)
            raise CatalogUnavailable(failed(f"create table {qualified(name, ident[:-1], ident[-1])}", e, True)) from e

    cat.create_table = create
    commit_table = cat.commit_table

    def commit(table, requirements, updates):
        ident = table.name()
        forget_written()
        try:
            return commit_table(table, requirements, updates)
        except CatalogUnavailable as e:  # reading the table back before writing anything
            if forget_written() is None:
                e.landed = False  # nothing written: the commit cannot have landed
            raise
        except DBAPIError as e:
            ours = forget_written()
            landed, current = _commit_landed(load_table, ident, table.metadata_location, ours)
            if landed:
                from pyiceberg.table import CommitTableResponse

                return CommitTableResponse(metadata=current.metadata, metadata_location=current.metadata_location)
            what = f"commit to table {qualified(name, ident[:-1], ident[-1])}"
            if landed is False:
                delete_written(ours)
                raise CatalogUnavailable(failed(what, e, True, "The commit did not land: nothing was committed."),
                                         landed=False) from e
            raise CatalogUnavailable(failed(what, e, True, "Whether the commit landed is not known: the catalog "
                                                           "could not be read back."), landed=None) from e

    cat.commit_table = commit
    return cat


def _commit_landed(load_table, ident, base: str | None, ours: str | None):
    """(whether the commit that wrote metadata file ``ours`` over ``base`` landed: True, False or
    None when the catalog cannot tell, the table as the catalog has it now)."""
    try:
        current = load_table(ident)
    except Exception:  # noqa: BLE001 - the catalog cannot be read either
        return None, None
    location = current.metadata_location
    if ours is not None and (location == ours or any(e.metadata_file == ours for e in current.metadata.metadata_log)):
        return True, current
    # the catalog's update is conditional on the base: not at ours (nor past it) means not landed
    return False, current


SQLITE_BUSY_TIMEOUT_MS = 30000


def _sqlite_locks_wait(cat: Catalog) -> Catalog:
    """A SQL catalog on SQLite shared by several processes: a commit waits up to 30 s for
    another process's lock (SQLite's default is 5 s), and a lock held longer is a failed commit,
    which pyiceberg refreshes and retries (and lakerules reports as a conflict once the retries
    run out), not an internal error. SQLite rolls back a statement or COMMIT that found the
    database locked, so nothing of that attempt landed."""
    engine = getattr(cat, "engine", None)
    if engine is None or engine.dialect.name != "sqlite":
        return cat
    from pyiceberg.exceptions import CommitFailedException
    from sqlalchemy import event
    from sqlalchemy.exc import OperationalError

    @event.listens_for(engine, "connect")
    def _busy_timeout(dbapi_connection, _record):
        dbapi_connection.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")

    engine.dispose()  # connections opened before the listener
    commit_table = cat.commit_table

    def commit_table_locks_fail(table, requirements, updates):
        try:
            return commit_table(table, requirements, updates)
        except OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            raise CommitFailedException(f"the SQLite catalog stayed locked by another writer: {e.orig}") from e

    cat.commit_table = commit_table_locks_fail
    return cat


def _add_name_mapping(table: Table) -> Table:
    """Spark's Parquet writer puts field ids on struct fields only, not on list elements or map
    keys and values; readers map such files by name through this property, which pyiceberg keeps
    current on every schema change (renames keep the old names)."""
    if "schema.name-mapping.default" in table.properties:
        return table
    with table.transaction() as tx:
        tx.set_properties({"schema.name-mapping.default": table.schema().name_mapping.model_dump_json()})
    return table.refresh()


def table_info(catalog: str, ns, name: str, table: Table, snapshot, schema) -> dict[str, Any]:
    """What the shim's LakeTable holds: name, Spark schema, partitioning, properties, snapshot, and
    the snapshot's total-records (the row count Spark's DESCRIBE TABLE EXTENDED shows). The
    properties are Iceberg's Spark table's: its table properties, and in place of any of the same
    name provider, format, current-snapshot-id, location, format-version, sort-order and
    identifier-fields."""
    from lakerules import describe

    props = {k: v for k, v in table.properties.items() if k not in describe.RESERVED_PROPERTIES}
    props.pop("lakerules.metadata-table", None)  # marks metadata tables only (lakerules.metadata_tables)
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
        props[paths.PREVIOUS_FOLDERS] = _previous(table, *left)
        check_folders(location or table.location(), props)
        if props[paths.PREVIOUS_FOLDERS] != table.properties.get(paths.PREVIOUS_FOLDERS, "[]"):
            sets[paths.PREVIOUS_FOLDERS] = props[paths.PREVIOUS_FOLDERS]
    with table.transaction() as tx:
        if location is not None:
            paths.check_location(location)
            tx._stage((SetLocationUpdate(location=location.rstrip("/")),))  # pyiceberg's update_location is not implemented
        if column_ops:
            with tx.update_schema() as us:
                for c in column_ops:
                    _column_change(us, table, c)
        if version is not None and version != table.format_version:
            tx.upgrade_table_version(version)
        if sets:
            tx.set_properties(sets)
        if removes:
            tx.remove_properties(*removes)


def _column_change(us, table: Table, c: dict) -> None:
    path = tuple(c["path"])
    op = c["op"]
    if op == "add_column":
        from pyspark.sql.types import _parse_datatype_json_string

        field_type = schemas.spark_type_to_iceberg(_parse_datatype_json_string(c["type"]))
        if not c["nullable"]:
            raise LakeError(
                f"lakerules: cannot add required column {'.'.join(path)}: existing rows have no value for it"
            )
        us.add_column(path, field_type, doc=c.get("comment"))
        _move(us, path, c)
    elif op == "rename_column":
        us.rename_column(path, c["new_name"])
    elif op == "delete_column":
        if c["if_exists"] and not _column_exists(table, path):
            return
        us.delete_column(path)
    elif op == "update_column_type":
        from pyspark.sql.types import _parse_datatype_json_string

        us.update_column(path, field_type=schemas.spark_type_to_iceberg(_parse_datatype_json_string(c["type"])))
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
