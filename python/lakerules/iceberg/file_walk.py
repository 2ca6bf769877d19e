"""Files below a table's folder, listed and deleted without following a symbolic link (local
folders: one folder at a time with O_NOFOLLOW, so a link swapped in after the listing is not
followed either), and listed through pyarrow's file systems elsewhere. lakerules.iceberg.paths'
Confinement is the one caller: every deletion is checked there first."""

from __future__ import annotations

import os
import stat


def open_below(real_root: str, parts: list[str]) -> int | None:
    """A descriptor of real_root/parts, each folder opened without following a link; None if
    one is missing, not a folder, or a link."""
    try:
        fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # the table's folder itself is missing (nothing was written yet)
        return None
    for part in parts:
        try:
            nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:  # ENOENT, ENOTDIR, ELOOP (a link)
            os.close(fd)
            return None
        os.close(fd)
        fd = nfd
    return fd


def unlink_below(real_root: str, parts: list[str], also: str | None = None) -> bool:
    """Unlink the regular file real_root/parts (and ``also`` beside it, if there), reached
    without following a link; False if it is missing, a link or not a file."""
    if not parts:
        return False
    fd = open_below(real_root, parts[:-1])
    if fd is None:
        return False
    try:
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        try:
            os.unlink(parts[-1], dir_fd=fd)
        except FileNotFoundError:
            return False
        if also:
            try:
                if stat.S_ISREG(os.stat(also, dir_fd=fd, follow_symlinks=False).st_mode):
                    os.unlink(also, dir_fd=fd)
            except OSError:
                pass
        return True
    finally:
        os.close(fd)


def walk_local(start: str, older_than_ms: int | None, hidden, kept) -> list[str]:
    if os.path.islink(start) or not os.path.isdir(start):
        return []
    out: list[str] = []

    def visit(folder: str, relative: str) -> None:
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return
        if kept({e.name for e in entries}):
            return
        for e in entries:
            if e.is_symlink():
                continue  # neither followed nor listed
            rel = f"{relative}/{e.name}" if relative else e.name
            if hidden(e.name):
                continue
            if e.is_dir(follow_symlinks=False):
                visit(e.path, rel)
            elif e.is_file(follow_symlinks=False):
                if older_than_ms is not None and e.stat(follow_symlinks=False).st_mtime_ns // 1_000_000 >= older_than_ms:
                    continue
                out.append(rel)

    visit(start, "")
    return out


def walk_remote(location: str, older_than_ms: int | None, io, hidden, kept) -> list[str]:
    from pyarrow import fs as pafs

    if hasattr(io, "parse_location") and hasattr(io, "fs_by_scheme"):
        scheme, netloc, root = io.parse_location(location, io.properties)
        filesystem = io.fs_by_scheme(scheme, netloc)
    else:
        filesystem, root = pafs.FileSystem.from_uri(location)
    root = root.rstrip("/")
    if filesystem.get_file_info(root).type == pafs.FileType.NotFound:
        return []
    infos = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
    names: dict[str, set[str]] = {}  # folder (relative) -> the names in it
    for info in infos:
        folder, _, name = info.path[len(root) + 1:].rpartition("/")
        names.setdefault(folder, set()).add(name)
        while folder:  # folders an object store only implies
            parent, _, part = folder.rpartition("/")
            names.setdefault(parent, set()).add(part)
            folder = parent
    skipped = tuple(f + "/" for f, n in names.items() if f and kept(n))
    out = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        relative = info.path[len(root) + 1:]
        if hidden(relative) or relative.startswith(skipped) or (names.get("") and kept(names[""])):
            continue
        if older_than_ms is not None and info.mtime_ns is not None and info.mtime_ns // 1_000_000 >= older_than_ms:
            continue
        out.append(relative)
    return out


