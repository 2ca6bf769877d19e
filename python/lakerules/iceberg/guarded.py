"""A pyiceberg catalog whose faults are clear errors (see :func:`guarded`), and SQLite's locks
waited for (see :func:`sqlite_locks_wait`).

Both wrap a catalog by subclassing its own class: the catalog returned is an instance of a
subclass of the loaded catalog's class (``GuardedSqlCatalog``, ...) holding the loaded catalog's
state (its engine, properties and file IO; nothing is connected twice), whose methods call the
class's own through ``super()``. A proxy around the catalog would not do: pyiceberg's catalogs
call their own methods through ``self`` (a SQL catalog's commit_table loads the table and writes
the metadata file; create_table, register_table and rename_table load the table they made), and
the tables they return point back at the catalog, whose commit_table their commits call.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field

from pyiceberg import exceptions as ie
from pyiceberg.catalog import Catalog

from lakerules.errors import CatalogUnavailable, UnreadableFile
from lakerules.iceberg import bookkeeping, metadata_files
from lakerules.iceberg.pyiceberg_edge import MetadataWriteHook, catalog_file_io, writes_metadata_files

try:
    from sqlalchemy.exc import DBAPIError
except ImportError:  # no SQL catalog without it: no database faults to guard
    DBAPIError = None


def qualified(catalog: str, namespace, name: str) -> str:
    return ".".join([catalog, *namespace, name])


_SECRET_WORDS = ("password", "secret", "token", "credential", "key")


def shown_property(key: str, value: str) -> str:
    """A catalog property as an error message may show it: secrets and URI passwords masked."""
    if any(w in key.lower() for w in _SECRET_WORDS):
        return "***"
    return re.sub(r"(://[^/:@]*:)[^/@]*@", r"\1***@", str(value))


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
    engine = getattr(cat, "engine", None)
    uri = None if engine is None else shown_property("uri", (props or {}).get("uri", str(engine.url)))
    # the hook: a failed commit's metadata file deleted (a SQL catalog), and every metastore
    # catalog's format-version 3 metadata written (lakerules.iceberg.v3)
    mixins = (_Guarded, MetadataWriteHook) if engine is not None or writes_metadata_files(cat) else (_Guarded,)
    out = _rewrapped(cat, _subclass(mixins, type(cat)))
    out.lakerules_guard = _Guard(name, uri)
    return out


@dataclass
class _Guard:
    """What a guarded catalog's errors name, and the metadata file each thread's call wrote last."""

    name: str
    uri: str | None  # its database, as errors show it; None: a catalog without one
    written: threading.local = field(default_factory=threading.local)

    def failed(self, what: str, e, change: bool, outcome: str = "") -> str:
        cause = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
        verb = "refused the change" if change else "could not be read"
        return (f"lakerules: catalog {self.name!r} could not {what}: its database {self.uri} {verb} ({cause}). "
                f"{outcome or ('Nothing was changed.' if change else '')} Check that the database "
                "(for SQLite, the file and its folder) can be read and written by this process."
                ).replace("  ", " ").strip()

    def what_of(self, op: str, args) -> str:
        if op in ("rename_table",):
            a, b = (Catalog.identifier_to_tuple(x) for x in args[:2])
            return f"rename table {qualified(self.name, a[:-1], a[-1])} to {qualified(self.name, b[:-1], b[-1])}"
        target = Catalog.identifier_to_tuple(args[0]) if args and isinstance(args[0], (str, tuple, list)) else ()
        words = (_READS | _WRITES)[op]
        if op in ("list_namespaces", "list_tables") and not target:
            return f"{words} catalog {self.name}"
        return f"{words} {'.'.join((self.name, *target))}"

    def forget_written(self) -> str | None:
        path, self.written.path = getattr(self.written, "path", None), None
        return path


class _Guarded:
    """In front of a catalog's class (see :func:`guarded`)."""

    lakerules_guard: _Guard

    def _database_call(self, op: str, change: bool, call, args, kwargs):
        """call(*args, **kwargs), a database error of a SQL catalog made a CatalogUnavailable."""
        guard = self.lakerules_guard
        if guard.uri is None:
            return call(*args, **kwargs)
        try:
            return call(*args, **kwargs)
        except DBAPIError as e:
            raise CatalogUnavailable(guard.failed(guard.what_of(op, args), e, change)) from e

    def load_table(self, *args, **kwargs):
        return self._database_call("load_table", False, self._load_named, args, kwargs)

    def _load_named(self, identifier):
        ident = Catalog.identifier_to_tuple(identifier)
        name = self.lakerules_guard.name
        if any(not part.strip() for part in ident[:-1]):  # pyiceberg raises a ValueError for it
            raise ie.NoSuchTableError(f"Table does not exist: {'.'.join(ident)}")
        try:
            table = super().load_table(identifier)
        except UnreadableFile as e:
            raise metadata_files.named(e, qualified(name, ident[:-1], ident[-1])) from e.cause
        metadata_files.remember_table(table.location(), qualified(name, ident[:-1], ident[-1]),
                                      bookkeeping.folders(table.properties, bookkeeping.BORROWS))
        return table

    def writing_metadata(self, metadata_path: str) -> None:  # MetadataWriteHook's, for a SQL catalog
        self.lakerules_guard.written.path = metadata_path

    def _delete_written(self, path: str | None) -> None:
        if path:
            try:
                catalog_file_io(self, path).delete(path)
            except Exception:  # noqa: BLE001 - an orphan at worst; remove_orphan_files finds it
                pass

    def create_table(self, identifier, *args, **kwargs):
        guard = self.lakerules_guard
        if guard.uri is None:
            return super().create_table(identifier, *args, **kwargs)
        ident = Catalog.identifier_to_tuple(identifier)
        guard.forget_written()
        try:
            return super().create_table(identifier, *args, **kwargs)
        except DBAPIError as e:
            ours = guard.forget_written()
            try:
                table = super().load_table(identifier)
                if ours and table.metadata_location == ours:
                    return table  # the row landed, the error came after
            except Exception:  # noqa: BLE001 - not there, or the catalog cannot be read at all
                pass
            self._delete_written(ours)
            what = f"create table {qualified(guard.name, ident[:-1], ident[-1])}"
            raise CatalogUnavailable(guard.failed(what, e, True)) from e

    def commit_table(self, table, requirements, updates):
        guard = self.lakerules_guard
        if guard.uri is None:
            return super().commit_table(table, requirements, updates)
        ident = table.name()
        guard.forget_written()
        try:
            return super().commit_table(table, requirements, updates)
        except CatalogUnavailable as e:  # reading the table back before writing anything
            if guard.forget_written() is None:
                e.landed = False  # nothing written: the commit cannot have landed
            raise
        except DBAPIError as e:
            ours = guard.forget_written()
            landed, current = _commit_landed(super().load_table, ident, table.metadata_location, ours)
            if landed:
                from pyiceberg.table import CommitTableResponse

                return CommitTableResponse(metadata=current.metadata, metadata_location=current.metadata_location)
            what = f"commit to table {qualified(guard.name, ident[:-1], ident[-1])}"
            if landed is False:
                self._delete_written(ours)
                raise CatalogUnavailable(guard.failed(what, e, True, "The commit did not land: nothing was committed."),
                                         landed=False) from e
            raise CatalogUnavailable(guard.failed(what, e, True, "Whether the commit landed is not known: the catalog "
                                                                 "could not be read back."), landed=None) from e


def _database_method(op: str, change: bool):
    def method(self, *args, **kwargs):
        return self._database_call(op, change, getattr(super(_Guarded, self), op), args, kwargs)

    method.__name__ = method.__qualname__ = op
    return method


for _op in (*_READS, *_WRITES):
    if _op != "load_table":
        setattr(_Guarded, _op, _database_method(_op, _op in _WRITES))


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


def sqlite_locks_wait(cat: Catalog) -> Catalog:
    """A SQL catalog on SQLite shared by several processes: a commit waits up to 30 s for
    another process's lock (SQLite's default is 5 s), and a lock held longer is a failed commit,
    which pyiceberg refreshes and retries (and lakerules reports as a conflict once the retries
    run out), not an internal error. SQLite rolls back a statement or COMMIT that found the
    database locked, so nothing of that attempt landed."""
    engine = getattr(cat, "engine", None)
    if engine is None or engine.dialect.name != "sqlite":
        return cat
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _busy_timeout(dbapi_connection, _record):
        dbapi_connection.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")

    engine.dispose()  # connections opened before the listener
    return _rewrapped(cat, _subclass((_SqliteLocksFail,), type(cat)))


class _SqliteLocksFail:
    """In front of a SQL catalog's class on SQLite (see :func:`sqlite_locks_wait`)."""

    def commit_table(self, table, requirements, updates):
        from pyiceberg.exceptions import CommitFailedException
        from sqlalchemy.exc import OperationalError

        try:
            return super().commit_table(table, requirements, updates)
        except OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            raise CommitFailedException(f"the SQLite catalog stayed locked by another writer: {e.orig}") from e


@functools.cache
def _subclass(mixins: tuple, base: type) -> type:
    """``base`` with ``mixins`` in front of it (one class per pair)."""
    return type(mixins[0].__name__.strip("_") + base.__name__, (*mixins, base), {"__module__": __name__})


def _rewrapped(cat: Catalog, cls: type) -> Catalog:
    """A catalog of ``cls`` (a subclass of ``cat``'s class) holding ``cat``'s state."""
    out = cls.__new__(cls)
    out.__dict__.update(vars(cat))
    return out
