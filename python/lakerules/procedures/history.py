"""A table's history: Iceberg's snapshot procedures and Delta's DESCRIBE HISTORY and RESTORE.

    CALL lake.system.rollback_to_snapshot(table => 'db.t', snapshot_id => N)
    CALL lake.system.rollback_to_timestamp(table => 'db.t', timestamp => TIMESTAMP '...')
    CALL lake.system.set_current_snapshot(table => 'db.t', snapshot_id => N | ref => 'name')
    CALL lake.system.cherrypick_snapshot(table => 'db.t', snapshot_id => N)
    CALL lake.system.fast_forward(table => 'db.t', branch => 'b', to => 'r')
    CALL lake.system.publish_changes(table => 'db.t', wap_id => 'w')
    DESCRIBE HISTORY lake.db.t [LIMIT n]
    RESTORE [TABLE] lake.db.t [TO] VERSION AS OF <snapshot id> | TIMESTAMP AS OF <expression>

Every check reads the table as loaded when the statement runs; every commit requires what it
read to still hold (the moved branch's snapshot, or for RESTORE and cherry-picks main's head),
so a concurrent commit makes it fail with nothing changed. An error leaves the table as it was.
"""

from __future__ import annotations

import datetime
import time

from pyiceberg.manifest import DataFileContent, ManifestEntryStatus
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, ancestors_of, latest_ancestor_before_timestamp

from lakerules.write import commit, history as moves, manifest_merge
from lakerules.spark import jvm as J
from lakerules.iceberg import names, v3
from pyiceberg.exceptions import ValidationException

from lakerules.errors import ConflictError, LakeError, NotSupported

SNAPSHOT_RESULT = "previous_snapshot_id long, current_snapshot_id long"
PICK_RESULT = "source_snapshot_id long, current_snapshot_id long"
FAST_FORWARD_RESULT = "branch_updated string, previous_ref long, updated_ref long"
HISTORY_RESULT = (
    "version long, timestamp timestamp, userId string, userName string, operation string, "
    "operationParameters map<string,string>, readVersion long, isolationLevel string, isBlindAppend boolean, "
    "operationMetrics map<string,string>"
)
RESTORE_RESULT = (
    "table_size_after_restore long, num_of_files_after_restore long, num_removed_files long, "
    "num_restored_files long, removed_files_size long, restored_files_size long"
)
WAP_ID = "wap.id"
PUBLISHED_WAP_ID = "published-wap-id"
SOURCE_SNAPSHOT_ID = "source-snapshot-id"


def _name(table) -> str:
    return names.table_name(table)


def _snapshot(table, snapshot_id: int, where: str):
    s = table.metadata.snapshot_by_id(snapshot_id)
    if s is None:
        raise LakeError(f"lakerules: {where}: table {_name(table)} has no snapshot {snapshot_id}")
    return s


def _ancestor_ids(metadata, snapshot) -> list[int]:
    return [s.snapshot_id for s in ancestors_of(snapshot, metadata)]


def _current_id(table):
    s = table.metadata.current_snapshot()
    return s.snapshot_id if s is not None else None


# ---- CALL procedures ------------------------------------------------------------------------------


def rollback_to_snapshot(ctx, table, args: dict):
    where = "rollback_to_snapshot"
    sid = args["snapshot_id"]
    _snapshot(table, sid, where)
    current = _current_id(table)
    if sid not in _ancestor_ids(table.metadata, table.metadata.current_snapshot()):
        raise LakeError(f"lakerules: {where}: cannot roll back table {_name(table)} to snapshot {sid}: it is not an "
                        f"ancestor of the current snapshot {current} (set_current_snapshot sets any snapshot)")
    return _set_main(ctx, table, current, sid)


def rollback_to_timestamp(ctx, table, args: dict):
    where = "rollback_to_timestamp"
    ts_ms = args["timestamp"] // 1000  # microseconds -> milliseconds, floored as Iceberg's
    target = latest_ancestor_before_timestamp(table.metadata, ts_ms)
    if target is None:
        raise LakeError(f"lakerules: {where}: cannot roll back table {_name(table)}: no snapshot of its current "
                        f"history is older than {_shown_ms(ts_ms)}")
    return _set_main(ctx, table, _current_id(table), target.snapshot_id)


def set_current_snapshot(ctx, table, args: dict):
    where = "set_current_snapshot"
    sid, ref = args["snapshot_id"], args["ref"]
    if (sid is None) == (ref is None):
        raise LakeError(f"lakerules: {where}: give either snapshot_id or ref, not both and not neither")
    if ref is not None:
        r = table.metadata.refs.get(ref)
        if r is None:
            raise LakeError(f"lakerules: {where}: table {_name(table)} has no branch or tag {ref!r} "
                            f"(it has {sorted(table.metadata.refs)})")
        sid = r.snapshot_id
    _snapshot(table, sid, where)
    return _set_main(ctx, table, _current_id(table), sid)


def _set_main(ctx, table, previous, target: int):
    if previous != target:
        moves.move_branch(table, MAIN_BRANCH, target)
    return J.result_rows(ctx.spark, [(previous, target)], SNAPSHOT_RESULT)


def cherrypick_snapshot(ctx, table, args: dict):
    return _cherrypick(ctx, table, args["snapshot_id"], "cherrypick_snapshot")


def publish_changes(ctx, table, args: dict):
    wap_id = args["wap_id"]
    staged = [s for s in table.metadata.snapshots if s.summary is not None and s.summary.get(WAP_ID) == wap_id]
    if not staged:
        raise LakeError(f"lakerules: publish_changes: table {_name(table)} has no snapshot staged with "
                        f"wap.id {wap_id!r}")
    if len(staged) > 1:
        raise LakeError(f"lakerules: publish_changes: table {_name(table)} has {len(staged)} snapshots staged with "
                        f"wap.id {wap_id!r} ({[s.snapshot_id for s in staged]}); cherry-pick the one meant "
                        "with cherrypick_snapshot")
    return _cherrypick(ctx, table, staged[0].snapshot_id, "publish_changes")


def _check_pick(metadata, picked, where: str, name: str) -> str | None:
    """Iceberg's CherryPickOperation checks against metadata: the picked snapshot is not already
    an ancestor of main, and its wap.id was not published yet. Returns its wap.id."""
    head = metadata.snapshot_by_name(MAIN_BRANCH)
    ancestors = list(ancestors_of(head, metadata))
    if any(s.snapshot_id == picked.snapshot_id for s in ancestors):
        raise LakeError(f"lakerules: {where}: cannot cherry-pick snapshot {picked.snapshot_id} into {name}: it is "
                        "already an ancestor of the current snapshot")
    wap_id = picked.summary.get(WAP_ID) if picked.summary is not None else None
    if wap_id is not None and any(s.summary is not None and s.summary.get(PUBLISHED_WAP_ID) == wap_id
                                  for s in ancestors):
        raise LakeError(f"lakerules: {where}: cannot cherry-pick snapshot {picked.snapshot_id} into {name}: its "
                        f"wap.id {wap_id!r} was already published")
    return wap_id


def _is_fast_forward(metadata, picked) -> bool:
    head = metadata.snapshot_by_name(MAIN_BRANCH)
    return picked.parent_snapshot_id == (head.snapshot_id if head is not None else None)


class _PickConflict(ValidationException):
    """A cherry-pick's check failed against the table as a retry found it: nothing landed."""


class _CherryPick(commit.AppendFiles):
    """The picked append's data files appended anew; the checks run again on every attempt (a
    failed check is a ValidationException, which tells lakerules' commit path nothing landed)."""

    def __init__(self, picked, where: str, name: str, **kwargs):
        super().__init__(**kwargs)
        self._picked, self._where, self._name = picked, where, name

    def produce(self):
        metadata = self.metadata
        try:
            _check_pick(metadata, self._picked, self._where, self._name)
        except LakeError as e:
            raise _PickConflict(str(e)) from None
        return super().produce()


def _cherrypick(ctx, table, sid: int, where: str):
    picked = _snapshot(table, sid, where)
    metadata = table.metadata
    wap_id = _check_pick(metadata, picked, where, _name(table))
    operation = picked.summary.operation if picked.summary is not None else None
    if _is_fast_forward(metadata, picked):
        # Iceberg fast-forwards whenever the picked snapshot's parent is the current snapshot
        moves.move_branch(table, MAIN_BRANCH, sid)
        return J.result_rows(ctx.spark, [(sid, sid)], PICK_RESULT)
    if operation != Operation.APPEND:
        raise LakeError(
            f"lakerules: {where}: cannot cherry-pick snapshot {sid} ({operation.value if operation else 'unknown'}) "
            f"into {_name(table)}: only an append, or a snapshot whose parent is the current snapshot "
            f"({_current_id(table)}; its parent is {picked.parent_snapshot_id}), can be cherry-picked"
        )
    added = [e.data_file for e in _added_entries(table, picked)]
    summary = {SOURCE_SNAPSHOT_ID: str(sid)}
    if wap_id is not None:
        summary[PUBLISHED_WAP_ID] = wap_id
    try:
        with commit.transaction(table) as tx:
            with _CherryPick(picked, where, _name(table), operation=Operation.APPEND, transaction=tx, io=table.io,
                             snapshot_properties=commit.snapshot_properties(summary)) as fa:
                for f in added:
                    fa.append_data_file(f)
    except _PickConflict as e:
        raise ConflictError(f"lakerules: conflict on {_name(table)}: a commit landed meanwhile, after which "
                            f"{str(e).removeprefix('lakerules: ')}; nothing was committed") from None
    return J.result_rows(ctx.spark, [(sid, _current_id(table))], PICK_RESULT)


def _added_entries(table, snapshot) -> list:
    out = []
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snapshot.snapshot_id:
                out.append(e)
    return out


def fast_forward(ctx, table, args: dict):
    where = "fast_forward"
    branch, to = args["branch"], args["to"]
    refs = table.metadata.refs
    b = refs.get(branch)
    if b is None:
        raise LakeError(f"lakerules: {where}: table {_name(table)} has no branch {branch!r} (it has {sorted(refs)})")
    if b.snapshot_ref_type != SnapshotRefType.BRANCH:
        raise LakeError(f"lakerules: {where}: {branch!r} of table {_name(table)} is a tag, not a branch")
    t = refs.get(to)
    if t is None:
        raise LakeError(f"lakerules: {where}: table {_name(table)} has no branch or tag {to!r} (it has {sorted(refs)})")
    if t.snapshot_id != b.snapshot_id:
        target = table.metadata.snapshot_by_id(t.snapshot_id)
        if b.snapshot_id not in _ancestor_ids(table.metadata, target):
            raise LakeError(f"lakerules: {where}: cannot fast-forward {branch!r} of table {_name(table)} to {to!r}: "
                            f"{branch!r}'s head {b.snapshot_id} is not an ancestor of {to!r}'s head {t.snapshot_id}")
        moves.move_branch(table, branch, t.snapshot_id)
    return J.result_rows(ctx.spark, [(branch, b.snapshot_id, t.snapshot_id)], FAST_FORWARD_RESULT)


def _shown_ms(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(sep=" ", timespec="milliseconds")


# ---- DESCRIBE HISTORY -----------------------------------------------------------------------------


_METRIC_PREFIXES = ("added-", "deleted-", "removed-", "changed-partition-count")


def history_rows(metadata, limit: int | None) -> list[tuple]:
    """One row per snapshot of main's history, newest first (see HISTORY_RESULT)."""
    rows = []
    for s in ancestors_of(metadata.current_snapshot(), metadata):
        if limit is not None and len(rows) >= limit:
            break
        summary = dict(s.summary.additional_properties) if s.summary is not None else {}
        iceberg_op = s.summary.operation.value if s.summary is not None else None
        operation = summary.pop("lakerules.operation", None) or iceberg_op
        params = {k: v for k, v in summary.items() if not k.startswith(_METRIC_PREFIXES) and not k.startswith("total-")}
        if iceberg_op is not None and operation != iceberg_op:
            params["iceberg.operation"] = iceberg_op
        metrics = {k: v for k, v in summary.items() if k.startswith(_METRIC_PREFIXES)}
        when = datetime.datetime.fromtimestamp(s.timestamp_ms / 1000, datetime.timezone.utc)
        rows.append((s.snapshot_id, when, None, None, operation.upper() if operation else None, params,
                     s.parent_snapshot_id, None, iceberg_op == Operation.APPEND.value, metrics))
    return rows


def run_describe_history(ctx, table, stmt):
    """DESCRIBE HISTORY t [LIMIT n] (lakerules.plan.statements.DescribeHistory)."""
    return J.analyzed(J.local_frame(ctx.spark, history_rows(table.metadata, stmt.limit), _schema(HISTORY_RESULT)))


def _schema(ddl: str):
    from pyspark.sql.types import StructType

    return StructType.fromDDL(ddl)


# ---- RESTORE --------------------------------------------------------------------------------------


def run_restore(ctx, table, stmt):
    """RESTORE (lakerules.plan.statements.Restore): the timestamp or the ref, if any, evaluated now
    (a constant expression of the statement, read alone and cast by Spark, as CALL arguments are),
    then the snapshot it names restored."""
    from pyspark.sql import functions as F

    timestamp_us = ref = None
    if stmt.timestamp_text is not None:
        timestamp_us = _constant(ctx, F.unix_micros(F.expr(stmt.timestamp_text).cast("TIMESTAMP")), "the timestamp",
                                 stmt.timestamp_text)
    if stmt.ref_text is not None:  # a string literal, read by Spark as it reads its own
        ref = _constant(ctx, F.expr(stmt.ref_text).cast("STRING"), "the version", stmt.ref_text)
    return _restore(ctx, table, stmt.version, ref, timestamp_us)


def _constant(ctx, column, what: str, text: str):
    """The value of a constant expression of the statement, evaluated by Spark; an error if NULL."""
    try:
        value = J.one_row(ctx.spark).select(column).collect()[0][0]
    except Exception as e:  # noqa: BLE001 - Spark's own error, named by the statement
        first = str(getattr(e, "desc", None) or e).strip().splitlines()
        raise LakeError(f"lakerules: RESTORE: cannot evaluate {what} {text!r}: "
                        f"{first[0] if first else type(e).__name__}") from None
    if value is None:
        raise LakeError(f"lakerules: RESTORE: {what} {text!r} is NULL")
    return value


def _restore_target(table, version, ref, timestamp_us):
    metadata = table.metadata
    if ref is not None:
        r = metadata.refs.get(ref)
        if r is None:
            raise LakeError(f"lakerules: RESTORE: table {_name(table)} has no branch or tag {ref!r} "
                            f"(it has {sorted(metadata.refs)})")
        return metadata.snapshot_by_id(r.snapshot_id)
    if version is not None:
        return _snapshot(table, version, "RESTORE")
    # TIMESTAMP AS OF: the snapshot that was current then (the snapshot log), as time travel reads
    ts_ms = timestamp_us // 1000
    if ts_ms > time.time() * 1000:  # as Delta: the table's state then is not known yet
        raise LakeError(f"lakerules: RESTORE: the timestamp {_shown_ms(ts_ms)} is in the future; table {_name(table)} "
                        "can be restored to a time that has passed. Nothing was changed")
    then = [e for e in metadata.snapshot_log if e.timestamp_ms <= ts_ms]
    if not then or metadata.snapshot_by_id(then[-1].snapshot_id) is None:
        raise LakeError(f"lakerules: RESTORE: table {_name(table)} has no snapshot that was current at "
                        f"{_shown_ms(ts_ms)}" + (" (that snapshot was expired)" if then else ""))
    return metadata.snapshot_by_id(then[-1].snapshot_id)


def live_entries(table, snapshot) -> dict:
    """path -> live manifest entry (data and delete files) of a snapshot, in v3's layout on a v3
    table (a deletion vector under (path, its data file): several share a Puffin file)."""
    out = {}
    if snapshot is None:
        return out
    for manifest in snapshot.manifests(table.io):
        for e in v3.entries(table.io, manifest, table.format_version):
            out[manifest_merge.entry_key(e)] = e
    return out


def _restore(ctx, table, version, ref, timestamp_us):
    target = _restore_target(table, version, ref, timestamp_us)
    head = table.metadata.current_snapshot()
    then, now = live_entries(table, target), live_entries(table, head)
    for path in then.keys() & now.keys():
        # (a deletion vector applies to the one data file it names, whatever its sequence number)
        if then[path].sequence_number != now[path].sequence_number and isinstance(path, str):
            raise NotSupported(
                f"lakerules: RESTORE of {_name(table)} to snapshot {target.snapshot_id}: file {path} is live in both "
                f"snapshots with different data sequence numbers ({then[path].sequence_number} then, "
                f"{now[path].sequence_number} now), so the deletes that apply to it differ; restoring it is not "
                "supported. Nothing was changed.")
    removed = [now[p] for p in sorted(now.keys() - then.keys(), key=str)]
    readded = [then[p] for p in sorted(then.keys() - now.keys(), key=str)]
    data = [e.data_file for e in then.values() if e.data_file.content == DataFileContent.DATA]
    row = (sum(f.file_size_in_bytes for f in data), len(data), len(removed), len(readded),
           sum(e.data_file.file_size_in_bytes for e in removed), sum(e.data_file.file_size_in_bytes for e in readded))
    if head is not None and target.snapshot_id != head.snapshot_id and (removed or readded):
        try:
            row_ids = v3.RowIds(table.io, target.manifest_list).all() if table.format_version >= v3.VERSION else None
            moves.restore(table, head.snapshot_id, removed, readded,
                          {"lakerules.operation": "restore", "lakerules.restored-snapshot-id": str(target.snapshot_id)},
                          row_ids, restored_snapshot_id=target.snapshot_id)
        except moves.RestoreConflict as e:
            raise ConflictError(str(e)) from None
    return J.result_rows(ctx.spark, [row], RESTORE_RESULT)


# ---- branch and tag DDL (Iceberg's ALTER TABLE ... CREATE/REPLACE/DROP BRANCH/TAG) -----------------


def run_ref_change(ctx, table, stmt):
    """ALTER TABLE ... BRANCH/TAG (lakerules.plan.statements.RefChange).
    As Iceberg's runtime: CREATE fails on an existing ref (IF NOT EXISTS: nothing happens when a
    ref of that kind exists), REPLACE on a missing one, CREATE OR REPLACE does either; the ref
    points at AS OF VERSION's snapshot, else the current one; REPLACE keeps the retention it had
    unless given; DROP fails on a missing ref (IF EXISTS: nothing happens) and never drops main."""
    from dataclasses import asdict

    _ref_ddl(table, stmt.op, stmt.kind.lower(), stmt.name, asdict(stmt))
    return J.empty_result(ctx.spark)


# Iceberg's SnapshotRef: each retention setting given is positive; the ages are milliseconds in a
# long, the count an int (what Iceberg's readers of the metadata take)
_RETENTION = (("retain_ms", "RETAIN", "max-ref-age-ms", 2**63 - 1),
              ("max_snapshot_age_ms", "WITH SNAPSHOT RETENTION <n> DAYS|HOURS|MINUTES", "max-snapshot-age-ms", 2**63 - 1),
              ("min_snapshots", "WITH SNAPSHOT RETENTION <n> SNAPSHOTS", "min-snapshots-to-keep", 2**31 - 1))


def _check_retention(a: dict, where: str) -> None:
    """Refuse a retention setting Iceberg refuses (before anything is committed)."""
    for key, clause, prop, most in _RETENTION:
        value = a.get(key)
        if value is None:
            continue
        if value <= 0:
            raise LakeError(f"lakerules: {where}: {clause} gives {prop}={value}; it must be greater than 0 "
                            "(leave the clause out for the table's default). Nothing was changed")
        if value > most:
            raise LakeError(f"lakerules: {where}: {clause} gives {prop}={value}, more than the largest value Iceberg "
                            f"stores ({most}). Nothing was changed")


def _ref_ddl(table, op: str, kind: str, name: str, a: dict) -> None:
    metadata = table.metadata
    existing = metadata.refs.get(name)
    where = f"ALTER TABLE {_name(table)} {op} {kind.upper()} {names.shown_ref(name)}"
    if existing is not None and existing.snapshot_ref_type.value != kind:
        if op == "DROP" or op != "CREATE" or not a.get("if_exists"):
            raise LakeError(f"lakerules: {where}: {name!r} is a {existing.snapshot_ref_type.value} of the table, "
                            f"not a {kind}")
    if op == "DROP":
        if existing is None:
            if a.get("if_exists"):
                return
            raise LakeError(f"lakerules: {where}: the table has no {kind} {name!r}")
        if name == MAIN_BRANCH:
            raise LakeError(f"lakerules: {where}: the main branch cannot be dropped")
        moves.remove_ref(table, name, existing.snapshot_id)
        return
    if existing is None:  # a new ref: its name follows lakerules.iceberg.names' rule (existing ones still move)
        names.check_ref_name(name, kind, where)
    _check_retention(a, where)
    if op == "CREATE" and existing is not None:
        if a.get("if_exists"):
            return
        raise LakeError(f"lakerules: {where}: the table already has a {existing.snapshot_ref_type.value} {name!r}")
    if op == "REPLACE" and existing is None:
        raise LakeError(f"lakerules: {where}: the table has no {kind} {name!r} to replace")
    version = a.get("version")
    if version is not None:
        snapshot_id = _snapshot(table, version, where).snapshot_id
    else:
        snapshot_id = _current_id(table)
        if snapshot_id is None:
            raise LakeError(f"lakerules: {where}: the table has no snapshot yet; write to it first, then "
                            f"create the {kind}")
    if kind == "tag" and name == MAIN_BRANCH:
        raise LakeError(f"lakerules: {where}: main is the table's main branch")
    keep = existing if existing is not None else None

    def chosen(key: str, attr: str):
        return a[key] if a.get(key) is not None else (getattr(keep, attr) if keep is not None else None)

    moves.set_ref(
        table, name, SnapshotRefType(kind), snapshot_id,
        expected=existing.snapshot_id if existing is not None else None,
        max_ref_age_ms=chosen("retain_ms", "max_ref_age_ms"),
        max_snapshot_age_ms=chosen("max_snapshot_age_ms", "max_snapshot_age_ms") if kind == "branch" else None,
        min_snapshots_to_keep=chosen("min_snapshots", "min_snapshots_to_keep") if kind == "branch" else None,
    )
