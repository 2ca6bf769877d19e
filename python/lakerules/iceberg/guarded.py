"""A pyiceberg catalog whose faults are clear errors (see :func:`guarded`), and SQLite's locks
waited for (see :func:`sqlite_locks_wait`)."""

from __future__ import annotations

import re
import threading

from pyiceberg import exceptions as ie  # noqa: F401
from pyiceberg.catalog import Catalog

from lakerules.errors import CatalogUnavailable, UnreadableFile
from lakerules.iceberg import metadata_files


_SECRET_WORDS = ("password", "secret", "token", "credential", "key")


def shown_property(key: str, value: str) -> str:
    """A catalog property as an error message may show it: secrets and URI passwords masked."""
    if any(w in key.lower() for w in _SECRET_WORDS):
        return "***"
    return re.sub(r"(://[^/:@]*:)[^/@]*@", r"\1***@", str(value))


def qualified(catalog: str, namespace, name: str) -> str:
    return ".".join([catalog, *namespace, name])


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

    uri = shown_property("uri", (props or {}).get("uri", str(engine.url)))
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


def sqlite_locks_wait(cat: Catalog) -> Catalog:
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


