"""Which folders each table owns, and which files a table borrows from elsewhere.

A folder belongs to one table. A table owns its location, its ``write.data.path`` and
``write.metadata.path`` when set, and the folders lakerules moved it away from
(``paths.table_folders``). Creating, registering, replacing or moving a table (LOCATION, a
namespace's location, the two path properties, ``register_table``, ALTER TABLE ... SET LOCATION)
so that one of its folders is, is inside, or contains a folder of another live table, or a folder
another live table holds recorded files in, is refused (:func:`check_folders`); so is a namespace
location inside a table's folder. A table created without LOCATION whose default folder is taken
(by a live table, its recorded files, or on disk by the files of a dropped or renamed one) gets a
fresh folder beside it (:func:`default_location`). "Another live table" is any table of any lake
catalog of the session (:func:`peers`).

Cleanup (remove_orphan_files, expire_snapshots, VACUUM, DROP TABLE ... PURGE) checks once that
the table's folders are its own (``paths.Confinement.check_root`` with :func:`holdings`), and
never deletes a file another table borrows: ``add_files`` and ``register_table`` record the
folders of files a table references outside its own folders in its property ``lakerules.borrows``
(lakerules.iceberg.bookkeeping; ``add_files(..., shared => true)`` may add files below another
table's folders, whose folder is recorded too); before a table deletes anything, the files of
every table that borrows from its folders are read from that table's metadata and kept
(:func:`borrowers`). A table that borrows nothing costs one property lookup: nothing is read beyond
the metadata JSON of each table, which the folder checks read anyway (each file once per process:
metadata files never change).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
import urllib.parse

from lakerules.iceberg import bookkeeping, paths
from lakerules.errors import LakeError
from lakerules.iceberg.paths import Holdings, Loc

log = logging.getLogger("lakerules")

BORROWS = bookkeeping.BORROWS
_CACHE_LIMIT = 4096
_cache: dict[str, tuple[str, dict]] = {}  # metadata file -> (location, properties)
_cache_lock = threading.Lock()


class OtherTable:
    """Another table of the catalog's database: its name, folders and what it borrows."""

    def __init__(self, name: str, location: str, properties: dict, metadata_location: str):
        self.name, self.location, self.properties = name, location, properties
        self.metadata_location = metadata_location
        self.folders = tuple(_resolved(paths.table_folders(location, properties)))
        self.borrows = tuple(_resolved(bookkeeping.folders(properties, BORROWS)))


def _resolved(folders) -> list[Loc]:
    out = []
    for f in folders:
        try:
            out.append(paths.resolve(f))
        except LakeError:
            continue
    return out


# ---- what the catalogs hold ---------------------------------------------------------------------


def peers(catalog) -> list:
    """``catalog`` and every other lake catalog of its session (lakerules.iceberg.catalogs sets
    ``lakerules_peers``); a catalog built elsewhere stands alone. Catalogs on one SQL database
    count once: its tables are read in one query, for every catalog in it."""
    every = getattr(catalog, "lakerules_peers", None)
    out, seen = [], set()
    for c in [catalog, *(every() if every is not None else ())]:
        engine = getattr(c, "engine", None)
        k = str(engine.url) if engine is not None else id(c)
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out


def catalog_files(catalog) -> tuple[Loc | None, Loc | None]:
    """The catalog's warehouse root and its database file (SQLite), where it has them."""
    warehouse = None
    if getattr(catalog, "properties", None) and catalog.properties.get("warehouse"):
        try:
            warehouse = paths.resolve(catalog.properties["warehouse"])
        except LakeError:
            warehouse = None
    database = None
    engine = getattr(catalog, "engine", None)
    if engine is not None and engine.dialect.name == "sqlite":
        db = engine.url.database
        if db and db != ":memory:" and not db.startswith("file:"):
            database = paths.resolve(os.path.abspath(db))
    return warehouse, database


def other_tables(catalog, own: tuple | None = None) -> list[OtherTable]:
    """Every table of every lake catalog of the session (:func:`peers`) but ``own`` (an identifier
    of ``catalog``). A SQL catalog answers in one query, for every catalog in its database, and
    each table's location and properties are read from its metadata file (raw JSON, cached per
    file); other catalogs load each table."""
    own = tuple(own) if own is not None else None
    out: list[OtherTable] = []
    for c in peers(catalog):
        engine = getattr(c, "engine", None)
        if engine is not None:
            out += _sql_tables(c, engine, own, catalog.name)
        else:
            out += _loaded_tables(c, own if c is catalog else None)
    return out


def _loaded_tables(catalog, own: tuple | None) -> list[OtherTable]:
    out: list[OtherTable] = []

    def walk(namespace: tuple):
        for ident in catalog.list_tables(namespace):
            if own is not None and tuple(ident) == own:
                continue
            try:
                t = catalog.load_table(ident)
                out.append(OtherTable(".".join((catalog.name, *ident)), t.location(), dict(t.properties),
                                      t.metadata_location))
            except Exception:  # noqa: BLE001 - a table that cannot be loaded has no folders to protect
                log.warning("lakerules: cannot load table %s to check its folders", ident)
        for child in catalog.list_namespaces(namespace):
            walk(tuple(child))

    walk(())
    return out


def _sql_tables(catalog, engine, own, own_catalog: str) -> list[OtherTable]:
    """The tables of every catalog in a SQL catalog's database but ``own`` (of ``own_catalog``,
    which may be another catalog on the same database)."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    own_row = (own_catalog, Catalog.namespace_to_string(own[:-1]), own[-1]) if own else None
    with Session(engine) as session:
        rows = session.execute(select(IcebergTables.catalog_name, IcebergTables.table_namespace,
                                      IcebergTables.table_name, IcebergTables.metadata_location)).all()
    out = []
    for cat, ns, name, metadata_location in rows:
        if (cat, ns, name) == own_row or not metadata_location:
            continue
        location, properties = _read(catalog, metadata_location)
        out.append(OtherTable(f"{cat}.{ns}.{name}", location, properties, metadata_location))
    return out


def _read(catalog, metadata_location: str) -> tuple[str, dict]:
    """(location, properties) of a table metadata file; a file that cannot be read stands for
    the folder it is in (its table is damaged, and its folder is still its own)."""
    found = read_metadata(catalog, metadata_location)
    if found[0] is not None:
        return found
    folder = metadata_location.rsplit("/", 1)[0]
    return (folder[: -len("/metadata")] if folder.endswith("/metadata") else folder), {}


def read_metadata(catalog, metadata_file: str) -> tuple[str | None, dict]:
    """(location, properties) a metadata file names, read as raw JSON (cached per file: metadata
    files never change); (None, {}) when it cannot be read."""
    with _cache_lock:
        hit = _cache.get(metadata_file)
    if hit is not None:
        return hit
    try:
        from pyiceberg.io import load_file_io

        io = load_file_io(dict(getattr(catalog, "properties", {}) or {}), metadata_file)
        with io.new_input(metadata_file).open() as f:
            raw = f.read()
        if metadata_file.endswith(".gz.metadata.json"):
            import gzip

            raw = gzip.decompress(raw)
        doc = json.loads(raw)
        value = (str(doc["location"]), {str(k): str(v) for k, v in (doc.get("properties") or {}).items()})
    except Exception:  # noqa: BLE001 - missing or damaged
        return None, {}
    with _cache_lock:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[metadata_file] = value
    return value


def holdings(catalog, own: tuple | None = None, tables: list[OtherTable] | None = None) -> Holdings:
    """What ``own``'s folders must stay clear of (paths.Holdings), in every catalog of the session."""
    if catalog is None:
        return Holdings()
    warehouses, databases = [], []
    for c in peers(catalog):
        warehouse, database = catalog_files(c)
        if warehouse is not None:
            warehouses.append((c.name, warehouse))
        if database is not None:
            databases.append((c.name, database))
    tables = other_tables(catalog, own) if tables is None else tables
    return Holdings(tuple(warehouses), tuple(databases), tuple((t.name, t.folders) for t in tables if t.folders))


# ---- new and moved tables -------------------------------------------------------------------------


def check_folders(catalog, what: str, location: str, properties: dict, own: tuple | None = None,
                  tables: list[OtherTable] | None = None) -> None:
    """Refuse a table at ``location`` with ``properties`` whose folders are not its alone: a folder
    that is, is inside or contains another live table's folder or a folder another live table
    holds recorded files in (lakerules.borrows); a catalog's warehouse root or a folder that holds
    it or a catalog's database; a file system's root; a folder below a file. Every lake catalog
    of the session counts (:func:`peers`). ``what`` names the statement."""
    tables = other_tables(catalog, own) if tables is None else tables
    held = holdings(catalog, own, tables)
    lent = _own_folders(catalog, own)
    # folders other tables hold recorded files in, but those below this table's own folders (its
    # files, lent to them: its cleanup keeps what they reference)
    imported = [(t.name, b) for t in tables for b in t.borrows
                if not any(paths.relation(b, mine) in ("is inside", "is also") for mine in lent)]
    for folder in _resolved(paths.table_folders(location, properties)):
        kind = "location" if paths.key(folder.text) == paths.key(location) else "folder"
        text = paths.shown(folder)
        if not folder.parts:
            _refuse(what, f"its {kind} {text} is the root of a file system or bucket")
        below = _file_on_the_way(folder.path) if folder.local else None
        if below:
            _refuse(what, f"its {kind} {text} is below {below!r}, which is a file, not a folder")
        for name, warehouse in held.warehouses:
            if paths.relation(folder, warehouse) in ("is also", "contains"):
                _refuse(what, f"its {kind} {text} is the warehouse root of catalog {name!r} or contains it, where "
                              "every table of the catalog has its folder")
        for name, database in held.databases:
            if paths.relation(folder, database) in ("is also", "contains"):
                _refuse(what, f"its {kind} {text} contains the database {database.path!r} of catalog {name!r}")
        for name, folders in held.tables:
            for other in folders:
                how = paths.relation(folder, other)
                if how is not None:
                    whose = "location" if other is folders[0] else "folder"
                    _refuse(what, f"its {kind} {text} {how} the {whose} of table {name} ({other.text}); a folder "
                                  "belongs to one table, whose cleanup would delete the other's files")
        for name, borrowed in imported:
            how = paths.relation(folder, borrowed)
            if how is not None:
                _refuse(what, f"its {kind} {text} {how} {borrowed.text}, which holds files table {name} references "
                              "(brought in by add_files or register_table); this table's cleanup would delete them")


def _file_on_the_way(path: str) -> str | None:
    """The first path on the way down to local folder ``path`` (itself included) that exists and is
    not a folder, if any."""
    at = ""
    for part in [p for p in path.split("/") if p]:
        at = f"{at}/{part}"
        if not os.path.exists(at):
            return None
        if not os.path.isdir(at):
            return at
    return None


def _own_folders(catalog, own: tuple | None) -> list[Loc]:
    """The folders table ``own`` of ``catalog`` has now (none for a new table)."""
    if own is None:
        return []
    try:
        t = catalog.load_table(own)
    except Exception:  # noqa: BLE001 - not there (yet): it owns nothing
        return []
    return _resolved(paths.table_folders(t.location(), t.properties))


def check_namespace_location(catalog, what: str, location: str) -> None:
    """A namespace's location must not be (or be inside) a table's folder: its tables' default
    folders would be inside that table's."""
    try:
        loc = paths.resolve(location)
    except LakeError as e:
        _refuse(what, str(e).removeprefix("lakerules: "))
    for t in other_tables(catalog):
        for other in t.folders:
            if paths.relation(loc, other) in ("is also", "is inside"):
                _refuse(what, f"its location {paths.shown(loc)} {paths.relation(loc, other)} the folder of table "
                              f"{t.name} ({other.text}); tables created in the namespace would live in that table's "
                              "folder")


def default_location(catalog, namespace: tuple, name: str, namespace_location: str | None,
                     tables: list[OtherTable] | None = None) -> str:
    """Where a table created without LOCATION goes: ``<namespace location or warehouse/<ns>>/<name>``,
    or, when that folder is taken (by a live table, or on disk: a dropped or renamed table's files
    are still there), or when the name reads as another path once percent-decoded,
    ``<name>-<random>`` beside it."""
    if namespace_location:
        base = namespace_location.rstrip("/")
    else:
        warehouse = (getattr(catalog, "properties", {}) or {}).get("warehouse")
        if not warehouse:
            raise LakeError(f"lakerules: CREATE TABLE {'.'.join((*namespace, name))}: the catalog has no warehouse "
                            "and the namespace no location; give the table a LOCATION")
        base = f"{warehouse.rstrip('/')}/{'.'.join(namespace)}"
    candidate = f"{base}/{name}"
    tables = other_tables(catalog) if tables is None else tables
    if urllib.parse.unquote(name) == name and not _taken(candidate, tables):
        return candidate
    safe = name.replace("%", "_")
    return f"{base}/{safe}-{uuid.uuid4().hex[:8]}"


def _taken(location: str, tables: list[OtherTable]) -> bool:
    try:
        loc = paths.resolve(location)
    except LakeError:
        return False
    if loc.local and os.path.isdir(loc.path) and any(os.scandir(loc.path)):
        return True
    return any(paths.relation(loc, other) is not None for t in tables for other in (*t.folders, *t.borrows))


def _refuse(what: str, problem: str):
    raise LakeError(f"lakerules: {what}: {problem}. Choose another location; nothing was changed")


# ---- borrowed files -------------------------------------------------------------------------------


def borrowers(confined: paths.Confinement, tables: list[OtherTable]) -> list[OtherTable]:
    """Those of ``tables`` that borrow files from below ``confined``'s folders (their property
    ``lakerules.borrows`` names one): the owner's cleanup keeps every file their metadata names."""
    return [t for t in tables if any(paths.relation(b, r) is not None for b in t.borrows for r in confined.roots)]


def common_folder(file_paths: list[str]) -> str:
    """The deepest folder holding every one of ``file_paths`` (spelled as they are)."""
    parts = [p.rstrip("/").split("/")[:-1] for p in file_paths]
    common = parts[0]
    for other in parts[1:]:
        n = 0
        while n < min(len(common), len(other)) and common[n] == other[n]:
            n += 1
        common = common[:n]
    return "/".join(common)


def outermost(folders) -> list[str]:
    """``folders`` without those inside another of them (by path segments), sorted."""
    unique = sorted({f.rstrip("/") for f in folders})
    return [f for f in unique if not any(o != f and f.startswith(o + "/") for o in unique)]


def borrowing(table, folders: list[str]) -> dict | None:
    """The table's lakerules.borrows with ``folders`` added, as the property to set in the commit
    that brings their files in; None when it knows them all already."""
    known = bookkeeping.folders(table.properties, BORROWS)
    merged = outermost([*known, *folders])
    return {BORROWS: json.dumps(merged)} if merged != sorted(known) else None


def owners_of(catalog, file_paths, own: tuple | None) -> list[tuple[str, str]]:
    """(table, folder) of the other tables whose folders ``file_paths`` lie in (add_files' check)."""
    tables = other_tables(catalog, own)
    out: list[tuple[str, str]] = []
    for p in file_paths:
        try:
            loc = paths.resolve(p)
        except LakeError:
            continue
        for t in tables:
            for folder in t.folders:
                if paths.relation(loc, folder) in ("is inside", "is also") and (t.name, folder.text) not in out:
                    out.append((t.name, folder.text))
    return out
