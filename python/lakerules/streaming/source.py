"""A lake table read as a stream: ``spark.readStream.table("lake.db.t")`` or
``spark.readStream.format("iceberg").load("lake.db.t")``.

The stream is the data files each appended snapshot added, snapshot by snapshot along the
table's current history (oldest first), each file's rows as they were appended. The shim's
io.lakerules.LakeStreamSource asks here for the next offset and for the read of the files
between two offsets; planning only reads metadata.

An offset is Iceberg's streaming offset, JSON ``{"version": 1, "snapshot_id": S, "position": P,
"scan_all_files": false}``: every file of the snapshots before S, and the first P files S added,
were read. Spark keeps offsets in the query's checkpoint, so a restarted query goes on where it
stopped.

Options (Iceberg's names):

- ``stream-from-timestamp`` (ms since 1970-01-01 UTC): start with the first snapshot made at or
  after it; ``start-snapshot-id``: start after that snapshot (it must be in the table's history);
  else from the oldest snapshot of the table's current history.
- ``streaming-max-files-per-micro-batch`` / ``streaming-max-rows-per-micro-batch``: at most so
  many files / rows (by the files' record counts; at least one file) per micro-batch.
- Snapshots that only rewrite files (``replace``: OPTIMIZE, rewrite_data_files,
  rewrite_manifests) are skipped. A snapshot that deletes (``delete``) or overwrites
  (``overwrite``: UPDATE, MERGE, INSERT OVERWRITE) stops the stream with an error, unless
  ``streaming-skip-delete-snapshots`` / ``streaming-skip-overwrite-snapshots`` is true: then it
  is skipped (rows it adds are not streamed).
- ``streaming-changelog`` (lakerules'): the stream is the table's changes, snapshot by snapshot,
  as ``create_changelog_view`` lists them (lakerules.procedures.changelog): the table's columns,
  then ``_change_type``, ``_change_ordinal`` (the snapshot's place in the table's current history)
  and ``_commit_snapshot_id``; deletes and overwrites included, carry-overs removed, updates paired
  (UPDATE_BEFORE / UPDATE_AFTER) by the table's identifier fields, else on a v3 table by
  ``_row_id``. An offset's position is then 0 or 1 (the snapshot's changes read or not).
"""

from __future__ import annotations

import json
import threading

from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntryStatus
from pyiceberg.table.snapshots import ancestors_of

from lakerules.scan import read as scan
from lakerules.spark import jvm as J
from lakerules.errors import LakeError, NotSupported

FROM_TIMESTAMP = "stream-from-timestamp"
START_SNAPSHOT = "start-snapshot-id"
MAX_FILES = "streaming-max-files-per-micro-batch"
MAX_ROWS = "streaming-max-rows-per-micro-batch"
SKIP_DELETE = "streaming-skip-delete-snapshots"
SKIP_OVERWRITE = "streaming-skip-overwrite-snapshots"
CHANGELOG = "streaming-changelog"  # lakerules': the table's changes, as create_changelog_view lists them
OPTIONS = (FROM_TIMESTAMP, START_SNAPSHOT, MAX_FILES, MAX_ROWS, SKIP_DELETE, SKIP_OVERWRITE, CHANGELOG)
# set by Spark itself: the table's name
SPARK_OPTIONS = ("path",)

_added: dict[tuple[str, int], list] = {}  # (table uuid, snapshot id) -> the data files it added
_lock = threading.Lock()


def check_options(name: str, options: dict) -> dict:
    unknown = sorted(k for k in options if k not in OPTIONS and k not in SPARK_OPTIONS)
    if unknown:
        raise NotSupported(f"lakerules: streaming read option(s) {unknown} on {name} are not supported; "
                           f"the options lakerules honors are {list(OPTIONS)}")
    if FROM_TIMESTAMP in options and START_SNAPSHOT in options:
        raise LakeError(f"lakerules: streaming {name}: give {FROM_TIMESTAMP} or {START_SNAPSHOT}, not both")
    if _flag(name, options, CHANGELOG):
        given = [k for k in (MAX_FILES, MAX_ROWS, SKIP_DELETE, SKIP_OVERWRITE) if k in options]
        if given:
            raise NotSupported(f"lakerules: streaming {name}: option {given[0]} does not apply with {CHANGELOG}=true "
                               "(each micro-batch is the changes of whole snapshots, deletes and overwrites included)")
    return options


def _int(name: str, options: dict, key: str, minimum: int | None = None) -> int | None:
    if key not in options:
        return None
    try:
        value = int(str(options[key]).strip())
    except ValueError:
        raise LakeError(f"lakerules: streaming {name}: option {key} must be a whole number, not {options[key]!r}") from None
    if minimum is not None and value < minimum:
        raise LakeError(f"lakerules: streaming {name}: option {key} must be at least {minimum}, not {value}")
    return value


def _flag(name: str, options: dict, key: str) -> bool:
    value = str(options.get(key, "false")).strip().lower()
    if value not in ("true", "false"):
        raise LakeError(f"lakerules: streaming {name}: option {key} must be true or false, not {options[key]!r}")
    return value == "true"


def history(table) -> list:
    """The snapshots of the table's current history, oldest first."""
    current = table.current_snapshot()
    return [] if current is None else list(reversed(list(ancestors_of(current, table.metadata))))


def added_files(table, snapshot) -> list:
    """The data files a snapshot added, in manifest order (the order every read of the offset
    sees). Read once per snapshot and kept: a snapshot never changes."""
    key = (str(table.metadata.table_uuid), snapshot.snapshot_id)
    with _lock:
        if key in _added:
            return _added[key]
    files = []
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA or manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if (entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id
                    and entry.data_file.content == DataFileContent.DATA):
                files.append(entry.data_file)
    with _lock:
        _added[key] = files
    return files


def _units(name: str, table, snapshot, options: dict) -> list:
    """What an offset's position counts in a snapshot: the data files an append added; with
    streaming-changelog, the snapshot itself (its changes are one unit), but for a "replace"."""
    operation = snapshot.summary.operation.value if snapshot.summary is not None else "append"
    if _flag(name, options, CHANGELOG):
        return [] if operation == "replace" else [snapshot]
    return added_files(table, snapshot) if operation == "append" else []


def _offset(snapshot_id: int, position: int) -> str:
    return json.dumps({"version": 1, "snapshot_id": snapshot_id, "position": position, "scan_all_files": False})


def _parse(name: str, text: str) -> tuple[int, int]:
    try:
        o = json.loads(text)
        return int(o["snapshot_id"]), int(o["position"])
    except (ValueError, KeyError, TypeError):
        raise LakeError(f"lakerules: streaming {name}: the checkpoint's offset {text!r} is not a lake table's offset") from None


def _start(name: str, table, snapshots: list, options: dict) -> tuple[int, int] | None:
    """Where a new stream starts, per the options: (index into snapshots, position); None when
    the table has no snapshot to start from yet (the stream then starts at its first)."""
    if START_SNAPSHOT in options:
        sid = _int(name, options, START_SNAPSHOT)
        for i, s in enumerate(snapshots):
            if s.snapshot_id == sid:
                return i, len(_units(name, table, s, options))
        raise LakeError(f"lakerules: streaming {name}: snapshot {sid} ({START_SNAPSHOT}) is not in the table's current history")
    if FROM_TIMESTAMP in options:
        ts = _int(name, options, FROM_TIMESTAMP)
        for i, s in enumerate(snapshots):
            if s.timestamp_ms >= ts:
                return i, 0
        return (len(snapshots) - 1, len(_units(name, table, snapshots[-1], options))) if snapshots else None
    return (0, 0) if snapshots else None


def _locate(name: str, table, snapshots: list, text: str) -> tuple[int, int]:
    sid, position = _parse(name, text)
    for i, s in enumerate(snapshots):
        if s.snapshot_id == sid:
            return i, position
    raise LakeError(f"lakerules: streaming {name}: snapshot {sid}, where the stream stopped, is no longer in the "
                    "table's current history (expired or rolled back); start the stream again from a new checkpoint")


def _files_between(name: str, table, snapshots: list, start, end, options: dict, limits: bool):
    """The files from ``start`` (index, position; None: the first snapshot) up to ``end`` (same;
    None: the newest), and the offset reached; with ``limits``, stopping at the per-batch limits."""
    max_files = _int(name, options, MAX_FILES, 1) if limits else None
    max_rows = _int(name, options, MAX_ROWS, 1) if limits else None
    skip_delete, skip_overwrite = _flag(name, options, SKIP_DELETE), _flag(name, options, SKIP_OVERWRITE)
    index, position = start if start is not None else (0, 0)
    taken, rows, reached = [], 0, None
    while index < len(snapshots):
        snapshot = snapshots[index]
        operation = snapshot.summary.operation.value if snapshot.summary is not None else "append"
        files = _units(name, table, snapshot, options)
        if operation in ("delete", "overwrite") and position == 0 and not _flag(name, options, CHANGELOG):
            skip = skip_delete if operation == "delete" else skip_overwrite
            if not skip:
                option = SKIP_DELETE if operation == "delete" else SKIP_OVERWRITE
                raise LakeError(f"lakerules: streaming {name}: snapshot {snapshot.snapshot_id} is a {operation}, which "
                                f"a stream of appended rows cannot follow; set {option}=true to skip such snapshots")
        stop = len(files)
        if end is not None and index == end[0]:
            stop = min(stop, end[1])
        while position < stop:
            f = files[position]
            if (max_files is not None and len(taken) >= max_files) or \
                    (max_rows is not None and taken and rows + f.record_count > max_rows):
                return taken, (index, position)
            taken.append(f)
            rows += getattr(f, "record_count", 0)  # a data file's; a snapshot (streaming-changelog) counts none
            position += 1
        reached = (index, position)
        if end is not None and index >= end[0]:
            break
        index, position = index + 1, 0
    return taken, reached


def latest(ctx, args: dict) -> str:
    """The offset the next micro-batch reads up to (JSON {"offset": ...}): the start offset
    (null for a stream that has not read anything) when there is nothing new. ``cap``: an offset
    not to go past (availableNow); start "max": the newest offset, with no limit (the cap)."""
    table, name, options = _load(ctx, args)
    snapshots = history(table)
    start_text, cap_text = args.get("start"), args.get("cap")
    if start_text in (None, "max"):
        start = _start(name, table, snapshots, options)
        if start is None:
            return json.dumps({"offset": None})
    else:
        start = _locate(name, table, snapshots, start_text)
    end = _locate(name, table, snapshots, cap_text) if cap_text else None
    taken, reached = _files_between(name, table, snapshots, start, end, options, limits=start_text != "max")
    if start_text == "max":
        reached = reached or start
        return json.dumps({"offset": _offset(snapshots[reached[0]].snapshot_id, reached[1])})
    if not taken or reached is None:
        return json.dumps({"offset": start_text})
    return json.dumps({"offset": _offset(snapshots[reached[0]].snapshot_id, reached[1])})


def batch(ctx, args: dict):
    """The JVM plan reading the files after ``start`` (or from the stream's start) up to ``end``."""
    table, name, options = _load(ctx, args)
    snapshots = history(table)
    start = _start(name, table, snapshots, options) if args.get("start") is None else \
        _locate(name, table, snapshots, args["start"])
    end = _locate(name, table, snapshots, args["end"])
    files, _ = _files_between(name, table, snapshots, start, end, options, limits=False)
    if _flag(name, options, CHANGELOG):
        from lakerules.procedures import changelog

        ordinals = {s.snapshot_id: i for i, s in enumerate(snapshots)}
        return J.analyzed(changelog.stream_changes(ctx, table, [(ordinals[s.snapshot_id], s) for s in files]))
    df = scan.read_files(ctx.spark, table.schema(), files)
    return J.analyzed(df)


def _load(ctx, args: dict):
    catalog, parts = args["catalog"], args["table"]
    name = ".".join([catalog, *parts])
    options = check_options(name, dict(args.get("options") or {}))
    table = ctx.catalogs.load(catalog, tuple(parts[:-1]), parts[-1])
    return table, name, options
