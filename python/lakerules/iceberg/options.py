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
  setting ``spark.lakerules.snapshot-property.<key>`` does for every commit);
- ``isolation-level`` (``serializable`` or ``snapshot``) and ``validate-from-snapshot-id`` (a
  snapshot of the table): an overwrite (``overwritePartitions()``, ``overwrite(condition)``,
  INSERT OVERWRITE) fails with a conflict, nothing committed, when a commit since that snapshot
  (default: the one the write read) removed a file it replaces or deleted rows of one (both
  levels), or added data where it overwrites (serializable: rows matching the overwrite
  condition, or in a replaced partition). An append replaces nothing and conflicts with nothing,
  as in Iceberg: there the options are checked and have nothing to validate.

CREATE TABLE AS SELECT takes ``snapshot-property.<key>`` only (a new table has nothing to
validate against).

Write-audit-publish (``spark.wap.id``, ``spark.wap.branch`` on a table with
``write.wap.enabled=true``) is lakerules.iceberg.refs'. CREATE OR REPLACE TABLE ... AS SELECT over such a
table is refused under those settings (it would replace main's table unaudited).
"""

from __future__ import annotations

from lakerules.errors import LakeError, NotSupported

SNAPSHOT_ID, AS_OF_TIMESTAMP, BRANCH, TAG = "snapshot-id", "as-of-timestamp", "branch", "tag"
READ_OPTIONS = (SNAPSHOT_ID, AS_OF_TIMESTAMP, BRANCH, TAG)
SNAPSHOT_PROPERTY = "snapshot-property."
ISOLATION_LEVEL, VALIDATE_FROM = "isolation-level", "validate-from-snapshot-id"
WRITE_OPTIONS = (f"{SNAPSHOT_PROPERTY}<key>", ISOLATION_LEVEL, VALIDATE_FROM)


PATH = "path"


def _names_table(table, value: str) -> bool:
    """Whether ``path`` (format("iceberg").load(name) / save(name) passes the name so) names this
    table (``table`` a plan.TableRef): the option is then honored, the table being the one read."""
    import re

    parts = [(quoted.replace("``", "`") if quoted else plain).strip()
             for quoted, plain in re.findall(r"`((?:[^`]|``)*)`|([^.`]+)", value)]
    full = [p.lower() for p in (table.catalog, *table.namespace, table.name)]
    if table.ref:
        kind, _, ref = table.ref.partition(":")
        full.append(f"{kind}_{ref}".lower())
    return len(parts) >= 2 and [p.lower() for p in parts] == full[-len(parts):]


def _known_path(table, options: dict) -> set:
    return {k for k, v in options.items() if k.lower() == PATH and _names_table(table, str(v))}


def check_read(table, options: dict) -> None:
    """Refuse read options lakerules does not honor, and combinations that contradict."""
    options = {k: v for k, v in options.items() if k not in _known_path(table, options)}
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
    options = {k: v for k, v in options.items() if k not in _known_path(name, options)}
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


def write_summary(table, options: dict, ctas: bool = False) -> dict:
    """The snapshot summary properties the write options set; any other write option is refused
    (for CREATE TABLE AS SELECT, ``ctas``, every option but snapshot properties)."""
    def is_property(k: str) -> bool:
        return k.lower().startswith(SNAPSHOT_PROPERTY) and len(k) > len(SNAPSHOT_PROPERTY)

    options = {k: v for k, v in options.items() if k not in _known_path(table, options)}
    unknown = sorted(k for k in options if not is_property(k) and k.lower() not in (ISOLATION_LEVEL, VALIDATE_FROM))
    if unknown:
        raise NotSupported(f"lakerules: write option(s) {unknown} on {table} are not supported; "
                           f"the write options lakerules honors are {list(WRITE_OPTIONS)}")
    validating = sorted(k for k in options if k.lower() in (ISOLATION_LEVEL, VALIDATE_FROM))
    if ctas and validating:
        raise NotSupported(f"lakerules: write option(s) {validating} on {table}: creating a table validates "
                           "against no earlier commit; the write options CREATE TABLE AS SELECT honors are "
                           f"'{SNAPSHOT_PROPERTY}<key>'")
    write_validation(table, options)
    return {k[len(SNAPSHOT_PROPERTY):]: v for k, v in options.items() if is_property(k)}


def write_validation(table, options: dict) -> tuple[str | None, int | None]:
    """(isolation level, validate-from snapshot id) the write options give, checked in form
    (the snapshot's existence is checked when the write runs)."""
    opts = {k.lower(): v for k, v in options.items() if k not in _known_path(table, options)}
    level = opts.get(ISOLATION_LEVEL)
    if level is not None:
        level = level.strip().lower()
        if level not in ("serializable", "snapshot"):
            raise LakeError(f"lakerules: writing {table}: write option {ISOLATION_LEVEL} must be serializable or "
                            f"snapshot, not {options_value(opts[ISOLATION_LEVEL])}")
    start = opts.get(VALIDATE_FROM)
    if start is not None:
        try:
            start = int(start.strip())
        except ValueError:
            raise LakeError(f"lakerules: writing {table}: write option {VALIDATE_FROM} must be a snapshot id (a whole "
                            f"number), not {options_value(start)}") from None
    return level, start


def options_value(v) -> str:
    return repr(v)


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
