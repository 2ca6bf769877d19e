"""Data files that are gone from disk or damaged there, while the table's metadata still lists them.

A statement that reads such a file (UPDATE, DELETE, MERGE, OPTIMIZE, an INSERT ... SELECT) fails
in Spark's executors with Spark's FAILED_READ_FILE error and a JVM stack, whose advice (REFRESH
TABLE) does not help: :func:`clear` turns it into one line naming the statement, the file, its
table, whether it is missing or damaged, and the two ways out: restore the file, or remove it
from the table with

    CALL lake.system.remove_missing_files(table => 'db.t' [, dry_run => true] [, include_damaged => true])

which, as Delta's FSCK REPAIR TABLE, removes in one commit the entries of the current snapshot
whose files no longer exist (data files, and delete files: rows a missing delete file deleted come
back), with ``include_damaged`` also those whose size differs from the size the table recorded or
that do not start and end as a Parquet file does (truncated or overwritten), and the delete files
that then apply to no live data file. It returns one row per removed file; with ``dry_run`` it
lists them and changes nothing. On a format-version 3 table a missing Puffin file takes all its
deletion vectors with it (their rows come back); a DV in a Puffin file that also holds DVs of
live data files stays when its own data file is removed (it applies to nothing then). The rows of a removed data file are lost: restore the file
instead when there is a copy.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

from pyiceberg.manifest import DataFileContent
from pyiceberg.table.snapshots import Operation

from lakerules.write import row_delta
from lakerules.spark import jvm as J
from lakerules.iceberg import metadata_files, names
from lakerules.errors import LakeError

PROCEDURE = "remove_missing_files"
RESULT = "file_path string, file_content string, problem string"
_CONTENT = {DataFileContent.DATA: "data", DataFileContent.POSITION_DELETES: "position deletes",
            DataFileContent.EQUALITY_DELETES: "equality deletes"}
_MAGIC = b"PAR1"


# ---- a statement's read failure, said clearly ---------------------------------------------------


def read_failure(error: BaseException) -> tuple[str, bool, str] | None:
    """(path, missing, detail) when ``error`` (a Py4J or pyspark error from a Spark job) is Spark's
    failure to read a file (FAILED_READ_FILE.*); None for any other error."""
    ex = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    seen = 0
    while ex is not None and seen < 20:
        seen += 1
        try:
            condition = ex.getCondition() if _has(ex, "getCondition") else None
        except Exception:  # noqa: BLE001 - not a SparkThrowable
            condition = None
        if condition and str(condition).startswith("FAILED_READ_FILE"):
            path = dict(ex.getMessageParameters()).get("path")
            if path:
                cause = ex.getCause()
                detail = _first_line(cause) if cause is not None else str(condition)
                return path, str(condition).endswith("FILE_NOT_EXIST"), detail
        ex = ex.getCause()
    return None


def _has(jobj, method: str) -> bool:
    try:
        return any(m.getName() == method for m in jobj.getClass().getMethods())
    except Exception:  # noqa: BLE001
        return False


def _first_line(jthrowable) -> str:
    text = (jthrowable.getMessage() or "").strip()
    line = text.splitlines()[0] if text else ""
    kind = jthrowable.getClass().getSimpleName()
    return f"{kind}: {line[:200]}" if line else kind


def clear(error: BaseException, statement: str, table_name: str) -> LakeError | None:
    """The LakeError a statement (``statement``: its title, on table ``table_name``) fails with
    when Spark could not read one of a lake table's files; None for any other error."""
    found = read_failure(error)
    if found is None:
        return None
    path, missing, detail = found
    detail = detail.replace(path, "the file").replace(re.sub(r"^file:/*", "/", path), "the file")
    owner = metadata_files.table_of(path, table_name) or table_name
    catalog, _, ident = owner.partition(".")
    if missing:
        problem = f"file {path} of table {owner} is missing: it is gone from disk, and the table still lists it"
        call = f"CALL {catalog}.system.{PROCEDURE}(table => '{ident}')"
    else:
        problem = (f"file {path} of table {owner} cannot be read: it is damaged (truncated or overwritten: "
                   f"{detail})")
        call = f"CALL {catalog}.system.{PROCEDURE}(table => '{ident}', include_damaged => true)"
    return LakeError(f"lakerules: {statement}: {problem}. Nothing was changed. Restore the file, or remove it "
                     f"from the table with {call} (a data file's rows are lost, the rows a delete file deleted "
                     "come back; dry_run => true lists what it removes)")


# ---- the procedure ----------------------------------------------------------------------------------


def remove_missing_files(ctx, table, args: dict):
    """CALL <catalog>.system.remove_missing_files: see the module's docstring."""
    from lakerules.procedures.history import live_entries
    from lakerules.scan.planning import plan_scan
    from lakerules.rowlevel.run import dangling_deletes

    dry_run, damaged_too = bool(args.get("dry_run")), bool(args.get("include_damaged"))
    snapshot = table.current_snapshot()
    if snapshot is None:
        return J.result_rows(ctx.spark, [], RESULT)
    entries = live_entries(table, snapshot)
    # one file a path (a Puffin file holds the deletion vectors of several data files: all go)
    by_path = {e.data_file.file_path: e.data_file for e in entries.values()}
    problems = _problems(table, list(by_path.values()), damaged_too)
    gone = [by_path[p] for p in sorted(problems)]
    gone_data = [f for f in gone if f.content == DataFileContent.DATA]
    gone_deletes = [f for f in gone if f.content != DataFileContent.DATA]
    rows = [(f.file_path, _CONTENT[f.content], problems[f.file_path]) for f in gone]
    if gone_data and table.format_version >= 2:
        paths = {f.file_path for f in gone_data}
        planned = [p for p in plan_scan(table, snapshot.snapshot_id).files if p.file.file_path in paths]
        for d in dangling_deletes(table, snapshot, planned):
            if d.file_path not in problems:
                gone_deletes.append(d)
                rows.append((d.file_path, _CONTENT[d.content], "applies only to removed data files"))
    if not dry_run and (gone_data or gone_deletes):
        row_delta.commit(table, [], [], {"lakerules.operation": PROCEDURE},
                         removed_data_files=gone_data, removed_delete_files=gone_deletes,
                         validation=row_delta.Validation(must_exist=frozenset(gone_data)), operation=Operation.DELETE)
    return J.result_rows(ctx.spark, rows, RESULT)


def _problems(table, files: list, damaged_too: bool) -> dict[str, str]:
    """path -> what is wrong with it, for the files that are missing (or damaged, ``damaged_too``)."""
    def check(f):
        try:
            return f.file_path, _problem(table, f, damaged_too)
        except Exception as e:  # noqa: BLE001 - a file that cannot be looked at is not declared missing
            raise LakeError(f"lakerules: {PROCEDURE} on {names.table_name(table)}: cannot check {f.file_path}: "
                            f"{type(e).__name__}: {e}. Nothing was changed") from None

    with ThreadPoolExecutor(max_workers=16) as pool:
        return {path: problem for path, problem in pool.map(check, files) if problem is not None}


def _problem(table, f, damaged_too: bool) -> str | None:
    path = f.file_path
    if re.match(r"^(file:|/)", path):  # a local path as written (no percent-decoding, as Spark and pyiceberg)
        local = re.sub(r"^file:/*", "/", path)
        if not os.path.isfile(local):
            return "missing"
        if not damaged_too:
            return None
        size = os.path.getsize(local)
        with open(local, "rb") as h:
            head = h.read(4)
            h.seek(max(0, size - 4))
            tail = h.read(4)
    else:
        source = table.io.new_input(path)
        if not source.exists():
            return "missing"
        if not damaged_too:
            return None
        size = len(source)
        with source.open() as h:
            head = h.read(4)
            h.seek(max(0, size - 4))
            tail = h.read(4)
    if size != f.file_size_in_bytes:
        return f"damaged: {size} bytes, the table recorded {f.file_size_in_bytes}"
    if path.endswith(".parquet") and (head != _MAGIC or tail != _MAGIC):
        return "damaged: not a Parquet file (no PAR1 at its start and end)"
    return None
