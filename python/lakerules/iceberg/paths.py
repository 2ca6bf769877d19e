"""Where lakerules may delete files: below one table's own location, and nowhere a link leads.

Every code path that deletes files goes through a ``Confinement`` of the table: remove_orphan_files,
expire_snapshots, DROP TABLE ... PURGE (and DROP NAMESPACE ... CASCADE), and the clean-up of a
statement's own files after its write or commit failed.

A location is resolved before anything is decided (``resolve``): ``file:/x``, ``file:///x``,
``file://localhost/x`` and ``/x`` are one local path; ``s3a://`` and ``s3n://`` are ``s3://``;
``.``, ``..`` and duplicate slashes are resolved lexically. A path is inside the table only if it
is inside it both as written, as resolved, and as resolved after percent-decoding (file IOs differ
in whether they decode ``%2E%2E``; lakerules takes the strictest reading).

Refused, with a LakeError and nothing deleted (``Confinement.check_root``, once per statement):
a table location that is the root of a file system or bucket, that is the warehouse root or
contains it, that contains the catalog's database file, that is itself a symbolic link, or that
contains (or is) another table's location, any table in the catalog's database, in any namespace
(read in bulk: one query for the SQL catalog). remove_orphan_files also refuses a ``location``
outside the table's location or reached through a symbolic link, and a listing that finds another
table's metadata (``*.metadata.json``, ``version-hint.text``) outside the table's metadata folder:
a table of another catalog the database does not know.

Symbolic links (local files; object stores have none): never followed. The listing neither
descends into a linked folder nor lists a linked file, and a deletion walks from the table's
folder one folder at a time without following a link (``O_NOFOLLOW``), so a link swapped in after
the listing is not followed either; a link is left in place, never deleted. The one exception is
the folder a failed write made under ``data/`` (``remove_tree``): it is removed whole with
``shutil.rmtree``, which unlinks the links in it without following them.

Table, namespace and view names that are not safe path segments (``check_name``: empty, ``.``,
``..``, or containing ``/``, ``\\`` or NUL) are refused at CREATE, RENAME and CREATE NAMESPACE,
since a table's default location is ``<warehouse>/<namespace>/<name>``; so are names and
locations pyiceberg's file IO would misread: with ``#`` or ``?`` (a URL's fragment or query), a
tab, line feed or carriage return (which Python's URL parsing drops).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable

from lakerules.errors import LakeError
from lakerules.iceberg.file_walk import open_below, unlink_below, walk_local, walk_remote
from lakerules.iceberg import bookkeeping

log = logging.getLogger("lakerules")

LOCAL = "file"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):(.*)$", re.DOTALL)
_EQUAL_SCHEMES = {"s3a": "s3", "s3n": "s3"}  # Iceberg's default equal schemes
_UNSAFE_NAME = ("/", "\\", "\0")
_URL_MARKS = ("#", "?")
# Python's URL parsing, which pyiceberg's file IO runs every path through, drops these (WHATWG)
_URL_DROPPED = ("\t", "\n", "\r")


def check_location(location: str) -> None:
    """Refuse a table LOCATION pyiceberg's file IO would misread: with '#' or '?' in its path,
    or a tab, line feed or carriage return."""
    path = _SCHEME.sub(lambda m: m.group(2), location)
    if any(c in path for c in _URL_MARKS):
        raise LakeError(
            f"lakerules: LOCATION {location!r} contains '#' or '?', which pyiceberg's file IO reads as the "
            "start of a URL fragment or query, so the table's files could not be found; choose a location without them"
        )
    if any(c in path for c in _URL_DROPPED):
        raise LakeError(
            f"lakerules: LOCATION {location!r} contains a tab, line feed or carriage return, which pyiceberg's "
            "file IO drops from a path (Python's URL parsing), so the table's files could not be found; choose a "
            "location without them"
        )


# ---- names --------------------------------------------------------------------------------------


def check_name(kind: str, name: str, full: str | None = None) -> None:
    """Refuse a table or namespace name that is not one safe path segment (see the module doc)."""
    problem = None
    if name in ("", ".", ".."):
        problem = "is not a usable folder name"
    else:
        bad = [c for c in _UNSAFE_NAME if c in name]
        if bad:
            problem = "contains " + " and ".join({"/": "'/'", "\\": "'\\'", "\0": "a NUL character"}[c] for c in bad)
        elif any(c in name for c in _URL_MARKS):
            problem = ("contains '#' or '?', which pyiceberg's file IO reads as the start of a URL fragment or "
                       "query, so the table's files could not be found")
        elif any(c in name for c in _URL_DROPPED):
            problem = ("contains a tab, line feed or carriage return, which pyiceberg's file IO drops from a path "
                       "(Python's URL parsing), so the table's files could not be found")
    if problem:
        shown = full if full is not None else repr(name)
        raise LakeError(
            f"lakerules: {kind} name {shown} {problem}: a {kind}'s name becomes a folder of table "
            "locations (<warehouse>/<namespace>/<table>), so it cannot be empty, '.' or '..', or contain "
            "'/', '\\', NUL, '#', '?', a tab or a line break (spaces, quotes, '%' and unicode are fine)"
        )


def check_identifier(namespace, name: str | None = None, what: str = "table") -> None:
    """check_name for each part of a namespace and, if given, a table name (which needs a
    namespace: <catalog>.<table> names none)."""
    if name is not None and not namespace:
        raise LakeError(f"lakerules: {what} name {name!r} has no namespace: a lake {what} is named "
                        f"<catalog>.<namespace>.<{what}> (CREATE NAMESPACE makes one)")
    for part in namespace:
        check_name("namespace", part)
    if name is not None:
        check_name(what, name)
    # folder names: a namespace's is its parts joined with '.'; a table's may get a -<8 hex> suffix
    for kind, folder, limit in (("namespace", ".".join(namespace), NAME_BYTES), (what, name, NAME_BYTES - 9)):
        if folder is not None and len(folder.encode("utf-8")) > limit:
            shown = folder if len(folder) <= 40 else f"{folder[:40]}..."
            raise LakeError(f"lakerules: {kind} name {shown!r} is {len(folder.encode('utf-8'))} bytes long: a {kind}'s "
                            f"name becomes a folder name, which file systems limit to {NAME_BYTES} bytes (lakerules "
                            f"takes {kind} names of at most {limit} bytes). Choose a shorter name; nothing was changed")


# The longest folder name common file systems take (ext4, XFS, APFS, NTFS: 255 bytes or characters).
NAME_BYTES = 255


# ---- locations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loc:
    """One location, resolved: ``path`` always starts with '/'; for an object store it is the
    key below the bucket (``authority``)."""

    text: str  # as written
    scheme: str  # 'file' for a local path
    authority: str  # the bucket or host of an object store; '' for a local path
    raw: str  # the path as written (no trailing slash)
    path: str  # '.', '..' and duplicate slashes resolved
    decoded: str  # percent-decoded, then resolved

    @property
    def local(self) -> bool:
        return self.scheme == LOCAL

    @property
    def key(self) -> str:
        """One spelling of the location: a local path, or scheme://bucket/key."""
        return self.path if self.local else f"{self.scheme}://{self.authority}{self.path}"

    @property
    def parts(self) -> list[str]:
        return [p for p in self.path.split("/") if p]

    def uri(self) -> str:
        return f"file://{self.path}" if self.local else self.key

    def child(self, relative: str) -> str:
        """The resolved location + '/' + relative, spelled as written (file:///x or /x)."""
        if self.local:
            base = ("file://" if self.text.startswith("file:") else "") + self.path.rstrip("/")
        else:
            base = self.key.rstrip("/")
        return f"{base}/{relative}"

    def relative_to(self, root: "Loc") -> list[str]:
        return self.parts[len(root.parts):]


def _lexical(path: str) -> str:
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return "/" + "/".join(out)


def _loc(text: str, scheme: str, authority: str, raw: str) -> Loc:
    trimmed = raw.rstrip("/") or "/"
    return Loc(text, scheme, authority, trimmed, _lexical(raw), _lexical(urllib.parse.unquote(raw)))


def resolve(location: str) -> Loc:
    """The location resolved (see the module doc); a LakeError for one lakerules cannot place."""
    text = str(location)
    if "\0" in text:
        raise LakeError(f"lakerules: location {text!r} contains a NUL character")
    m = _SCHEME.match(text)
    if m is None:
        # no scheme: a local path, relative ones from the working folder (as pyiceberg reads them)
        return _loc(text, LOCAL, "", text if text.startswith("/") else os.path.abspath(text))
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme == LOCAL:
        if rest.startswith("//"):
            host, slash, path = rest[2:].partition("/")
            if host not in ("", "localhost"):
                raise LakeError(
                    f"lakerules: location {text!r} names host {host!r}; a local location is file:///path "
                    "(or file:/path, or /path)"
                )
            rest = slash + path
        if not rest.startswith("/"):
            raise LakeError(f"lakerules: location {text!r} is not an absolute path (file:///path)")
        return _loc(text, LOCAL, "", rest)
    scheme = _EQUAL_SCHEMES.get(scheme, scheme)
    if not rest.startswith("//"):
        raise LakeError(f"lakerules: location {text!r} has no bucket or host ({scheme}://bucket/path)")
    authority, slash, path = rest[2:].partition("/")
    return _loc(text, scheme, authority.lower(), slash + path)


def key(location: str) -> str:
    """resolve(location).key, and the location itself when it cannot be resolved."""
    try:
        return resolve(location).key
    except LakeError:
        return location


def _under(child: str, parent: str) -> bool:
    return parent == "/" or child == parent or child.startswith(parent + "/")


def within(child: Loc, parent: Loc) -> bool:
    """child is parent or below it, in every reading (as written, resolved, decoded)."""
    return (child.scheme, child.authority) == (parent.scheme, parent.authority) and all(
        _under(c, p) for c, p in ((child.raw, parent.raw), (child.path, parent.path), (child.decoded, parent.decoded)))


def overlaps_into(child: Loc, parent: Loc) -> bool:
    """child is parent or below it in some reading (the test for what a location must not hold)."""
    return (child.scheme, child.authority) == (parent.scheme, parent.authority) and any(
        _under(c, p) for c, p in ((child.raw, parent.raw), (child.path, parent.path), (child.decoded, parent.decoded)))


def _shown(loc: Loc) -> str:
    """A location as written, and what it resolves to where that differs."""
    prefix = "" if loc.local else f"{loc.scheme}://{loc.authority}"
    if loc.path != loc.raw:
        return f"{loc.text!r} (resolves to {prefix}{loc.path})"
    if loc.decoded != loc.path:
        return f"{loc.text!r} (percent-decoded, resolves to {prefix}{loc.decoded})"
    return repr(loc.text)


def _real(path: str) -> str:
    return os.path.realpath(path)


# ---- the folders a table owns -------------------------------------------------------------------

# A table's data and metadata folders when they are not <location>/data and <location>/metadata
# (Iceberg's properties), and the folders lakerules moved it away from (a JSON list), which still
# hold its older files.
DATA_PATH, METADATA_PATH = "write.data.path", "write.metadata.path"
PREVIOUS_FOLDERS = bookkeeping.PREVIOUS_FOLDERS


def table_folders(location: str, properties) -> list[str]:
    """The folders a table's files live in: its location, its write.data.path and
    write.metadata.path, and the folders it had before lakerules moved it (in that order,
    without repeats)."""
    out = [location]
    for prop in (DATA_PATH, METADATA_PATH):
        if properties.get(prop):
            out.append(properties[prop])
    out += bookkeeping.folders(properties, PREVIOUS_FOLDERS)
    seen, unique = set(), []
    for folder in out:
        k = key(folder).rstrip("/")
        if k not in seen:
            seen.add(k)
            unique.append(folder)
    return unique


def relation(a: Loc, b: Loc) -> str | None:
    """How folder ``a`` stands to folder ``b``: "is also" (the same folder), "is inside",
    "contains", or None when they share no file, in every reading (as written, resolved,
    percent-decoded) and, for local folders, with symbolic links resolved."""
    a_in_b, b_in_a = overlaps_into(a, b), overlaps_into(b, a)
    if a.local and b.local:
        ra, rb = _real(a.path), _real(b.path)
        a_in_b, b_in_a = a_in_b or _under(ra, rb), b_in_a or _under(rb, ra)
    if a_in_b and b_in_a:
        return "is also"
    return "is inside" if a_in_b else "contains" if b_in_a else None


def shown(loc: Loc) -> str:
    return _shown(loc)


@dataclass(frozen=True)
class Holdings:
    """What the session's catalogs hold that no table may take over (lakerules.iceberg.owners
    builds it): their warehouse roots and database files (catalog name, where), and the folders
    of every other table, by name."""

    warehouses: tuple[tuple[str, Loc], ...] = ()
    databases: tuple[tuple[str, Loc], ...] = ()
    tables: tuple[tuple[str, tuple[Loc, ...]], ...] = ()


# ---- the confinement ----------------------------------------------------------------------------


class Confinement:
    """The files one table may delete: those below the folders it owns (see the module doc):
    its location and, when set, its data and metadata folders and the folders it was moved from.

    ``what`` names the statement in error messages ("remove_orphan_files on lake.db.t")."""

    def __init__(self, location: str, what: str, folders: Iterable[str] = ()):
        self.what = what
        try:
            self.root = resolve(location)
            others = [resolve(f) for f in folders]
        except LakeError as e:
            self.refuse(f"the table's location cannot be placed: {str(e).removeprefix('lakerules: ')}")
        self.roots = (self.root, *(f for f in others if f.key != self.root.key and not within(f, self.root)))
        self._reals = {r.key: (_real(r.path) if r.local else None) for r in self.roots}
        self._real_root = self._reals[self.root.key]

    @classmethod
    def of(cls, table, what: str) -> "Confinement":
        return cls(table.location(), what, table_folders(table.location(), table.properties)[1:])

    def refuse(self, problem: str):
        raise LakeError(f"lakerules: {self.what}: {problem}; nothing was deleted")

    # ---- the table's folders, checked once ---------------------------------------------------

    def check_root(self, holdings: Holdings) -> None:
        """Refuse folders that are not the table's alone (see the module doc): a file system's
        root, a symbolic link, the warehouse root or a folder holding it or the catalog's
        database, and a folder that is, is inside or contains another table's."""
        for root in self.roots:
            what = "location" if root is self.root else "folder"
            text = _shown(root)
            if not root.parts:
                self.refuse(f"the table's {what} {text} is the root of a file system or bucket")
            if root.local and os.path.islink(root.path.rstrip("/")):
                self.refuse(f"the table's {what} {text} is a symbolic link (to {os.readlink(root.path)!r}); "
                            "lakerules deletes nothing through a link")
            for catalog, warehouse in holdings.warehouses:
                if relation(root, warehouse) in ("is also", "contains"):
                    self.refuse(f"the table's {what} {text} is the warehouse root {warehouse.text!r} of catalog "
                                f"{catalog!r} or contains it; files there belong to other tables and to the catalog")
            for catalog, database in holdings.databases:
                if relation(root, database) in ("is also", "contains"):
                    self.refuse(f"the table's {what} {text} contains the database {database.path!r} of catalog "
                                f"{catalog!r}")
            for name, folders in holdings.tables:
                for other in folders:
                    how = relation(root, other)
                    if how is not None:
                        self.refuse(f"the table's {what} {text} {how} the {'location' if other is folders[0] else 'folder'} "
                                    f"of table {name} ({other.text}); files there belong to that table")

    def _root_of(self, loc: Loc) -> Loc | None:
        return next((r for r in self.roots if loc.path != r.path and within(loc, r)), None)

    # ---- paths ---------------------------------------------------------------------------------

    def inside(self, path: str) -> Loc | None:
        """The path resolved, if it is strictly below one of the table's folders in every reading."""
        try:
            loc = resolve(path)
        except LakeError:
            return None
        return loc if self._root_of(loc) is not None else None

    def check_paths(self, paths: Iterable[str], what: str = "file") -> None:
        """Refuse if any path is outside the table's location (before anything is deleted)."""
        outside = [p for p in paths if self.inside(p) is None]
        if outside:
            more = f" and {len(outside) - 1} more" if len(outside) > 1 else ""
            self.refuse(f"the table names {what} {outside[0]!r}{more} outside its location {self.root.text!r}; "
                        "lakerules deletes only files below a table's own folders")

    def location(self, location: str | None) -> Loc:
        """remove_orphan_files' location argument: the table's location or a folder below it,
        reached without a symbolic link."""
        if location is None:
            return self.root
        try:
            loc = resolve(location)
        except LakeError as e:
            self.refuse(str(e).removeprefix("lakerules: "))
        if not within(loc, self.root):
            shown = _shown(loc)
            self.refuse(f"location {shown} is not inside the table's location {self.root.text!r}; "
                        "files there may belong to other tables")
        if loc.local:
            link = self._link_on_the_way(loc.relative_to(self.root))
            if link:
                self.refuse(f"location {location!r} is reached through the symbolic link {link!r}; "
                            "lakerules neither lists nor deletes through a link")
        return loc

    def _link_on_the_way(self, parts: list[str]) -> str | None:
        path = self._real_root
        for part in parts:
            path = f"{path}/{part}"
            if os.path.islink(path):
                return path
        return None

    # ---- listing -------------------------------------------------------------------------------

    def list_files(self, location: Loc, older_than_ms: int | None, io, hidden, kept=lambda names: False) -> list[str]:
        """Every file below location (a Loc from ``location``) last modified before older_than_ms,
        except those ``hidden(relative_path)`` skips and those in a folder ``kept(the names in
        it)`` keeps whole, spelled as location + relative path. Local: walked without following a
        link (links are not listed). Elsewhere: the table's pyarrow file IO (its s3.*, gcs.*
        settings apply), else pyarrow's file system for the URI."""
        if location.local:
            start = "/".join([self._real_root.rstrip("/"), *location.relative_to(self.root)])
            relatives = walk_local(start, older_than_ms, hidden, kept)
        else:
            relatives = walk_remote(location.text.rstrip("/"), older_than_ms, io, hidden, kept)
        return [location.child(r) for r in relatives]

    # ---- deleting ------------------------------------------------------------------------------

    def delete(self, io, paths: list[str], threads: int | None = None, strict: bool = True) -> int:
        """Delete files below the table's location (and the hidden .<name>.crc Hadoop writes next
        to a local file); returns how many were deleted. strict: any path outside is refused
        before anything is deleted; else such paths are skipped (the clean-up after a failure).
        A missing file, a link, a folder, or a path through a link is left alone."""
        if strict:
            self.check_paths(paths)
        located = []
        for p in paths:
            loc = self.inside(p)
            if loc is None:
                log.warning("lakerules: %s: not deleting %s, outside the table's location %s", self.what, p, self.root.text)
                continue
            located.append((p, loc))
        if not located:
            return 0

        def one(item) -> bool:
            path, loc = item
            if loc.local:
                root = self._root_of(loc)
                parts = loc.relative_to(root)
                return unlink_below(self._reals[root.key], parts, also=f".{parts[-1]}.crc")
            try:
                io.delete(path)
                return True
            except FileNotFoundError:
                return False

        with ThreadPoolExecutor(max(1, min(threads or 4, len(located)))) as pool:
            return sum(pool.map(one, located))

    def remove_tree(self, spark, path: str) -> None:
        """Remove a folder a failed write made below the table's location, best effort."""
        loc = self.inside(path)
        if loc is None:
            log.warning("lakerules: %s: not removing %s, outside the table's location %s", self.what, path, self.root.text)
            return
        try:
            if loc.local:
                root = self._root_of(loc)
                parts = loc.relative_to(root)
                fd = open_below(self._reals[root.key], parts[:-1])
                if fd is None:
                    return
                try:
                    st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        shutil.rmtree(parts[-1], dir_fd=fd)
                finally:
                    os.close(fd)
            else:
                from lakerules.spark import jvm as J

                J.hadoop_delete_tree(spark, path)
        except FileNotFoundError:
            return  # the write made no folder (or its files are gone already): nothing was left behind
        except Exception as e:  # noqa: BLE001 - best effort clean-up after a failed write
            log.warning("lakerules: could not remove %s after a failed write (%s: %s); "
                        "CALL <catalog>.system.remove_orphan_files removes what is left", path, type(e).__name__, e)


# ---- conventions ----------------------------------------------------------------------------------


def hidden(relative: str) -> bool:
    """Hadoop's and Spark's convention: a path with a part starting with '.' or '_' (but not a
    partition directory such as _c=1) is not a table file: temporary files, checksums, markers."""
    return any(part.startswith(".") or (part.startswith("_") and "=" not in part)
               for part in relative.split("/"))
