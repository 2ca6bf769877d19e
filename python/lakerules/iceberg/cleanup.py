"""What a table's files are, and the cleanup of those it no longer needs: the files its metadata
names (``reachable``), those only some snapshots need (``doomed``), the folders it owns checked and
other tables' borrowed files kept before anything is deleted (``guard``), and DROP TABLE ... PURGE
(``purge_plan``, ``purge``). Every deletion goes through lakerules.iceberg.paths' confinement.

Which files a table needs (``reachable``): for every snapshot its manifest list, every manifest
in it and every data and delete file those manifests name (live or deleted entries), every
metadata JSON in the table's metadata log and the current one, and the statistics and partition
statistics files.
"""

from __future__ import annotations

import logging

from pyiceberg.manifest import DataFileContent

from lakerules.errors import LakeError, UnreadableFile
from lakerules.iceberg import names, owners, paths

log = logging.getLogger("lakerules")


def normalize(path: str) -> str:
    """One spelling of a location (lakerules.iceberg.paths.resolve): local paths without their file:
    scheme (file:/x, file:///x and /x are one file), s3a:// and s3n:// as s3:// (Iceberg's default
    equal schemes), '.', '..' and duplicate slashes resolved."""
    return paths.key(path)


class Manifests:
    """Manifest entries read once per call, by manifest path."""

    def __init__(self, io):
        self.io = io
        self._entries: dict[str, list] = {}

    def entries(self, manifest) -> list:
        if manifest.manifest_path not in self._entries:
            self._entries[manifest.manifest_path] = manifest.fetch_manifest_entry(self.io, discard_deleted=False)
        return self._entries[manifest.manifest_path]


def snapshot_files(snapshot, manifests: Manifests, live_only: bool, unread: list | None = None) -> dict[str, str]:
    """path -> kind ('manifest-list', 'manifest', 'data', 'position-deletes', 'equality-deletes')
    of every file a snapshot names; live_only: only files its live entries name. A manifest list
    or manifest that cannot be read is an error, or, with ``unread``, is added to it and skipped
    (what it names is then not known)."""
    out = {snapshot.manifest_list: "manifest-list"}
    try:
        listed = snapshot.manifests(manifests.io)
    except UnreadableFile as e:
        if unread is None:
            raise
        unread.append(e)
        return out
    for manifest in listed:
        out[manifest.manifest_path] = "manifest"
        try:
            entries = manifests.entries(manifest)
        except UnreadableFile as e:
            if unread is None:
                raise
            unread.append(e)
            continue
        for e in entries:
            if live_only and e.status.value == 2:  # DELETED: this snapshot no longer needs the file
                continue
            out[e.data_file.file_path] = _KIND[e.data_file.content]
    return out


_KIND = {
    DataFileContent.DATA: "data",
    DataFileContent.POSITION_DELETES: "position-deletes",
    DataFileContent.EQUALITY_DELETES: "equality-deletes",
}


def reachable(metadata, metadata_location: str, io, manifests: Manifests | None = None) -> set[str]:
    """Normalized paths of every file the table's metadata names (see the module's doc)."""
    manifests = manifests or Manifests(io)
    paths = {metadata_location, *(e.metadata_file for e in metadata.metadata_log)}
    for snapshot in metadata.snapshots:
        paths.update(snapshot_files(snapshot, manifests, live_only=False))
    paths.update(s.statistics_path for s in metadata.statistics)
    paths.update(s.statistics_path for s in metadata.partition_statistics)
    return {normalize(p) for p in paths}


# ---- before a cleanup deletes anything --------------------------------------------------------


def guard(catalog, table, confined: paths.Confinement) -> set[str]:
    """Before a cleanup of ``table`` deletes anything: its folders must be its own (refused
    otherwise, lakerules.iceberg.owners), and the files other tables borrow from them are returned
    (normalized), to be kept."""
    tables = owners.other_tables(catalog, table.name()) if catalog is not None else []
    confined.check_root(owners.holdings(catalog, table.name(), tables))
    keep: set[str] = set()
    for other in owners.borrowers(confined, tables):
        try:
            from pyiceberg.serializers import FromInputFile

            metadata = FromInputFile.table_metadata(table.io.new_input(other.metadata_location))
            files = reachable(metadata, other.metadata_location, table.io)
        except Exception as e:  # noqa: BLE001 - which files it borrows is not known: delete nothing
            confined.refuse(f"table {other.name} borrows files from this table's folders and its metadata cannot be "
                            f"read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); which of them it "
                            "needs is not known")
        keep.update(p for p in files if confined.inside(p) is not None)
    return keep


# Structured Streaming's checkpoint: a folder holding these (and a ``metadata`` file).
_CHECKPOINT_PARTS = ("offsets", "commits")


def kept_folder(folder_names: set[str]) -> bool:
    """Whether a folder whose entries are ``folder_names`` is never an orphan's: a Structured
    Streaming checkpoint (offsets/, commits/ and metadata). Its files are the stream's state, and
    deleting them makes a restarted stream replay its source."""
    return all(p in folder_names for p in _CHECKPOINT_PARTS) and "metadata" in folder_names



# ---- what only some snapshots need ---------------------------------------------------------------


def doomed(before, after, gone_ids: set, manifests: Manifests) -> dict[str, str]:
    """path -> kind of the files that only the snapshots gone_ids of ``before`` needed: those
    none of ``after``'s other snapshots needs (a data or delete file is needed by the live entries
    of a remaining snapshot's manifests) and, after the commit, that its metadata no longer names.
    Before the commit (after is before) it is what the expiry would delete, or more."""
    still: set[str] = set()
    for snapshot in after.snapshots:
        if snapshot.snapshot_id not in gone_ids:
            still.update(snapshot_files(snapshot, manifests, live_only=True))
    for s in [*after.statistics, *after.partition_statistics]:
        if after is not before or s.snapshot_id not in gone_ids:
            still.add(s.statistics_path)
    still = {normalize(p) for p in still}
    candidates: dict[str, str] = {}
    for snapshot in before.snapshots:
        if snapshot.snapshot_id in gone_ids:
            candidates.update(snapshot_files(snapshot, manifests, live_only=True))
    for s in [*before.statistics, *before.partition_statistics]:
        if s.snapshot_id in gone_ids:
            candidates[s.statistics_path] = "statistics"
    return {p: kind for p, kind in candidates.items() if normalize(p) not in still}


# ---- DROP TABLE ... PURGE ---------------------------------------------------------------------------


_PURGE_ORDER = ("data", "position-deletes", "equality-deletes", "statistics", "manifest", "manifest-list", "metadata")


def purge_plan(catalog, identifier) -> tuple:
    """What DROP TABLE ... PURGE deletes, checked before anything is dropped: (identifier, table,
    the confinement, path -> kind of every file the table's metadata names, the metadata files that
    could not be read). Refused (a LakeError) if the table's location is not its own; DROP TABLE
    without PURGE drops such a table and keeps its files. Files the metadata names outside the
    table's location are kept (see purge).

    A table whose metadata file is missing or damaged is dropped from the catalog and nothing is
    deleted (as Iceberg's catalogs do): which files are its own is not known (table None). A
    manifest list or manifest that cannot be read is skipped: the files it names are not known, and
    stay; the rest go."""
    try:
        table = catalog.load_table(identifier)
    except UnreadableFile as e:
        return identifier, None, None, {}, [e]
    confined = paths.Confinement.of(table, f"DROP TABLE {names.table_name(table)} PURGE")
    unread: list[UnreadableFile] = []
    try:
        borrowed = guard(catalog, table, confined)
        manifests = Manifests(table.io)
        metadata = table.metadata
        files: dict[str, str] = {}
        for snapshot in metadata.snapshots:
            files.update(snapshot_files(snapshot, manifests, live_only=False, unread=unread))
        for s in [*metadata.statistics, *metadata.partition_statistics]:
            files[s.statistics_path] = "statistics"
        for p in [table.metadata_location, *(e.metadata_file for e in metadata.metadata_log)]:
            files[p] = "metadata"
        files = {p: kind for p, kind in files.items() if normalize(p) not in borrowed}
    except LakeError as e:
        raise LakeError(f"{e}. DROP TABLE without PURGE drops the table and keeps its files") from None
    return identifier, table, confined, files, unread


def purge(catalog, plan: tuple) -> int:
    """Drop the table of purge_plan and delete its files: data and delete files first, the
    metadata that names them last. Files outside the table's location (added from elsewhere, or
    another table's) are skipped with a warning, and so, with a warning naming each, are the
    files named only by metadata files that could not be read. Returns how many were deleted."""
    identifier, table, confined, files, unread = plan
    catalog.drop_table(table.name() if table is not None else identifier)
    if table is None:
        problem = unread[0]
        folder = problem.path.rsplit("/metadata/", 1)[0] if "/metadata/" in problem.path else None
        log.warning(
            "lakerules: DROP TABLE %s PURGE dropped the table from the catalog but deleted none of its files: "
            "%s; which files are the table's is not known without it.%s", problem.table or identifier,
            _what_went_wrong(problem), f" Its folder was {folder}; delete it by hand if nothing else uses it."
            if folder else "")
    by_kind: dict[str, list[str]] = {}
    for p, kind in files.items():
        by_kind.setdefault(kind, []).append(p)
    deleted = sum(confined.delete(table.io, sorted(by_kind.get(kind, [])), strict=False) for kind in _PURGE_ORDER) \
        if table is not None else 0
    if table is not None and unread:
        log.warning(
            "lakerules: DROP TABLE %s PURGE deleted %d files but not those named only by %s, which could not "
            "be read: they stay in %s (CALL <catalog>.system.remove_orphan_files cannot find them now that "
            "the table is dropped; delete them by hand).", names.table_name(table), deleted,
            "; ".join(_what_went_wrong(e) for e in {e.path: e for e in unread}.values()), table.location())
    return deleted


def _what_went_wrong(e: UnreadableFile) -> str:
    return f"its {e.kind} {e.path} is {'missing' if e.missing else 'damaged'}"


def purge_table(catalog, identifier) -> int:
    """DROP TABLE ... PURGE through the confinement (pyiceberg's purge_table deletes whatever the
    metadata names, wherever it is)."""
    return purge(catalog, purge_plan(catalog, identifier))


