"""Read and write options on lake tables: each one lakerules knows is honored, any other is
refused with an error that names it. Silently ignoring an option (reading the current rows
when a snapshot was asked for) would be a wrong answer.

Read options (``spark.read.option(k, v).table(t)``), Iceberg's names:

- ``snapshot-id``: read that snapshot;
- ``as-of-timestamp``: read the snapshot that was current at that time (milliseconds since
  1970-01-01 UTC), as the table's snapshot log says;
- ``branch`` / ``tag``: read the head of that branch / the snapshot of that tag.

At most one of them, and none on a relation that already travels in time (``VERSION AS OF``).
The snapshot's data is read with the columns Spark resolved for the relation (the table's
current schema), matched by field id.

Write options (``df.writeTo(t).option(k, v)``, ``df.write.option(k, v).insertInto(t)``):

- ``snapshot-property.<key>``: ``<key>`` is set in the commit's snapshot summary (as the session
  setting ``spark.lakerules.snapshot-property.<key>`` does for every commit).

Write-audit-publish (``spark.wap.id``, ``spark.wap.branch`` on a table with
``write.wap.enabled=true``) is lakerules.refs'. CREATE OR REPLACE TABLE ... AS SELECT over such a
table is refused under those settings (it would replace main's table unaudited).
"""

from __future__ import annotations

from lakerules.errors import LakeError, NotSupported

SNAPSHOT_ID, AS_OF_TIMESTAMP, BRANCH, TAG = "snapshot-id", "as-of-timestamp", "branch", "tag"
READ_OPTIONS = (SNAPSHOT_ID, AS_OF_TIMESTAMP, BRANCH, TAG)
SNAPSHOT_PROPERTY = "snapshot-property."


def check_read(table, options: dict) -> None:
    """Refuse read options lakerules does not honor, and combinations that contradict."""
    unknown = sorted(k for k in options if k not in READ_OPTIONS)
    if unknown:
        raise NotSupported(f"lakerules: read option(s) {unknown} on {table} are not supported; "
                           f"the read options lakerules honors are {list(READ_OPTIONS)}")
    chosen = [k for k in READ_OPTIONS if k in options]
    if len(chosen) > 1:
        raise LakeError(f"lakerules: reading {table}: the options {chosen} each choose a snapshot; give one")


def read_snapshot(table, name, options: dict, time_travel: bool) -> int | None:
    """The snapshot id the read options choose on ``table`` (a pyiceberg Table), or None when
    they choose none. ``name`` is the table's name for messages."""
    check_read(name, options)
    if not options:
        return None
    if time_travel:
        raise LakeError(f"lakerules: reading {name}: VERSION AS OF / TIMESTAMP AS OF and the read option "
                        f"{next(iter(options))!r} both choose a snapshot; give one")
    if SNAPSHOT_ID in options:
        snapshot_id = _integer(name, SNAPSHOT_ID, options[SNAPSHOT_ID])
        if table.snapshot_by_id(snapshot_id) is None:
            raise LakeError(f"lakerules: table {name} has no snapshot {snapshot_id} (read option {SNAPSHOT_ID})")
        return snapshot_id
    if AS_OF_TIMESTAMP in options:
        millis = _integer(name, AS_OF_TIMESTAMP, options[AS_OF_TIMESTAMP])
        current = None
        for entry in table.metadata.snapshot_log:
            if entry.timestamp_ms <= millis:
                current = entry.snapshot_id
        if current is None:
            raise LakeError(f"lakerules: table {name} has no snapshot at or before {millis} ms "
                            f"(read option {AS_OF_TIMESTAMP}, milliseconds since 1970-01-01 UTC)")
        return current
    kind = BRANCH if BRANCH in options else TAG
    ref_name = options[kind]
    ref = table.metadata.refs.get(ref_name)
    if ref is None or ref.snapshot_ref_type.value != kind:
        have = sorted(n for n, r in table.metadata.refs.items() if r.snapshot_ref_type.value == kind)
        plural = "branches" if kind == BRANCH else "tags"
        raise LakeError(f"lakerules: table {name} has no {kind} {ref_name!r} (read option {kind}); "
                        f"its {plural} are {have}")
    return ref.snapshot_id


def write_summary(table, options: dict) -> dict:
    """The snapshot summary properties the write options set; any other write option is refused."""
    def is_property(k: str) -> bool:
        return k.lower().startswith(SNAPSHOT_PROPERTY) and len(k) > len(SNAPSHOT_PROPERTY)

    unknown = sorted(k for k in options if not is_property(k))
    if unknown:
        raise NotSupported(f"lakerules: write option(s) {unknown} on {table} are not supported; "
                           f"the write options lakerules honors are '{SNAPSHOT_PROPERTY}<key>'")
    return {k[len(SNAPSHOT_PROPERTY):]: v for k, v in options.items()}


WAP_SETTINGS = ("spark.wap.id", "spark.wap.branch")


def check_wap(table, name, conf) -> None:
    """Refuse a table-replacing write (CTAS/RTAS) that write-audit-publish would stage or send to a
    branch: ``table`` a pyiceberg Table, ``conf(key)`` the session's setting or None."""
    if str(table.properties.get("write.wap.enabled", "false")).strip().lower() != "true":
        return
    set_ = {k: conf(k) for k in WAP_SETTINGS if conf(k)}
    if set_:
        raise NotSupported(
            f"lakerules: {name} has write.wap.enabled=true and the session sets {set_}: replacing the table "
            "cannot be staged or written to a branch, and replacing main's would publish unaudited data; "
            "unset those settings to replace it")


def _integer(name, option: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise LakeError(f"lakerules: reading {name}: read option {option} must be a whole number, not {value!r}") from None
