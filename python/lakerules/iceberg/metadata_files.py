"""Reading a table's metadata files: a missing or damaged one is an error that names the table and
the file (errors.UnreadableFile), not whatever the reader tripped on (pyiceberg's FileNotFoundError,
or a SystemError, UnicodeDecodeError or pydantic ValidationError naming no file).

``install`` puts the translation around pyiceberg's readers of manifest lists
(``Snapshot.manifests``) and manifests (``ManifestFile.fetch_manifest_entry``), which every
planner, commit and maintenance procedure calls; the metadata JSON is read through
lakerules.iceberg.metadata_cache. A missing file becomes a ``MissingFile``, which is also a
FileNotFoundError, so code reading tables with pyiceberg in the same process still catches it.

The tables the catalogs loaded are remembered by location, so that an error from a reader that
knows only a file's path can name the table it belongs to.
"""

from __future__ import annotations

import threading

from pyiceberg.manifest import ManifestFile
from pyiceberg.table.snapshots import Snapshot

from lakerules.iceberg import paths
from lakerules.errors import LakeError, UnreadableFile, unreadable

_lock = threading.Lock()
_tables: dict[str, str] = {}  # table location (paths.key) -> its name, catalog first
_borrowed: dict[str, tuple[str, ...]] = {}  # table name -> the folders it borrows files from (paths.key)
_TABLES = 4096
_installed = False


def remember_table(location: str | None, name: str, borrows=()) -> None:
    """Remember a table loaded: its location, and the folders it borrows files from
    (lakerules.iceberg.bookkeeping.BORROWS)."""
    if not location:
        return
    folders = tuple(paths.key(f).rstrip("/") for f in borrows)
    with _lock:
        _tables.pop(paths.key(location).rstrip("/"), None)
        _tables[paths.key(location).rstrip("/")] = name
        _borrowed[name] = folders
        while len(_tables) > _TABLES:
            _borrowed.pop(_tables.pop(next(iter(_tables))), None)


def table_of(path: str, reader: str | None = None) -> str | None:
    """The name of the table a file belongs to: ``reader`` (the statement's table) when the file
    is in a folder it borrows from (another table's, or one of files it imported); else the
    remembered table whose location holds path (the innermost one)."""
    key = paths.key(path)
    with _lock:
        if reader is not None and any(key.startswith(f + "/") for f in _borrowed.get(reader, ())):
            return reader
        found = [(len(loc), name) for loc, name in _tables.items() if key.startswith(loc + "/")]
    return max(found)[1] if found else None


def named(e: UnreadableFile, table: str | None = None) -> UnreadableFile:
    if e.table is None:
        e.table = table or table_of(e.path)
    return e


def _read(kind: str, path: str, read):
    try:
        return read()
    except LakeError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a damaged file makes the reader raise
        raise named(unreadable(kind, path, e)) from e


def install() -> None:
    global _installed
    if _installed:
        return
    manifests, entries = Snapshot.manifests, ManifestFile.fetch_manifest_entry

    def snapshot_manifests(self, io):
        return _read("manifest list", self.manifest_list, lambda: manifests(self, io))

    def fetch_manifest_entry(self, io, discard_deleted: bool = True):
        return _read("manifest", self.manifest_path, lambda: entries(self, io, discard_deleted))

    snapshot_manifests.__doc__, fetch_manifest_entry.__doc__ = manifests.__doc__, entries.__doc__
    Snapshot.manifests = snapshot_manifests
    ManifestFile.fetch_manifest_entry = fetch_manifest_entry
    _installed = True
