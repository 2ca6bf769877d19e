"""Delta's VACUUM on a lake table, over Iceberg's expire_snapshots and remove_orphan_files.

    VACUUM lake.db.t [RETAIN n HOURS] [DRY RUN]

Files older than the retention that the table no longer needs go: first the snapshots older than
the retention are expired (Iceberg's rules: each branch keeps its head and its
``history.expire.min-snapshots-to-keep`` newest snapshots, tags keep theirs) with the files only
they needed, then the files below the table's location that no metadata names and that are older
than the retention (what failed or killed statements left). The retention defaults to 168 hours
(7 days, Delta's ``delta.deletedFileRetentionDuration`` default).

As Delta's ``spark.databricks.delta.retentionDurationCheck.enabled``, a retention below 168 hours
is refused unless ``spark.lakerules.vacuum.retentionDurationCheck.enabled`` is false: a shorter one
may remove files a reader of an older snapshot or a running writer still needs. remove_orphan_files'
own floor, ``spark.lakerules.removeOrphanFiles.minAge`` (1 day), applies too.

The result is Delta's: one ``path`` column; with DRY RUN the files that would be deleted (nothing
is changed), else the table's location.
"""

from __future__ import annotations

import math
import time

from lakerules.spark import jvm as J, settings
from lakerules.iceberg import cleanup, names, paths
from lakerules.errors import LakeError

CHECK_KEY = "spark.lakerules.vacuum.retentionDurationCheck.enabled"
DEFAULT_HOURS = 168.0
RESULT = "path string"


def run_statement(ctx, table, stmt):
    """VACUUM (lakerules.plan.statements.Vacuum): expire_snapshots + remove_orphan_files older than
    the retention."""
    return run(ctx, table, stmt.hours, stmt.dry_run)


def run(ctx, table, hours: float | None, dry_run: bool):
    from lakerules.procedures import maintenance as M

    spark = ctx.spark
    name = names.table_name(table)
    retain = DEFAULT_HOURS if hours is None else hours
    now_ms = int(time.time() * 1000)
    if not math.isfinite(retain) or retain < 0:
        raise LakeError(f"lakerules: VACUUM {name}: RETAIN {retain:g} HOURS: the retention must be a finite number of "
                        "hours, 0 or more. Nothing was changed")
    if retain * 3600 * 1000 > now_ms:
        raise LakeError(f"lakerules: VACUUM {name}: RETAIN {retain:g} HOURS reaches back before 1970-01-01, before any "
                        f"snapshot: the retention is at most {now_ms // 3_600_000} hours. Nothing was changed")
    check = (spark.conf.get(CHECK_KEY, "true") or "true").strip().lower()
    if check not in ("true", "false"):
        raise LakeError(f"lakerules: {CHECK_KEY} must be true or false, not {check!r}")
    if retain < DEFAULT_HOURS and check == "true":
        raise LakeError(
            f"lakerules: VACUUM {name} RETAIN {retain:g} HOURS: a retention below {DEFAULT_HOURS:g} hours may remove "
            "files that readers of older snapshots or statements still writing need, and corrupt their results. "
            f"If you are certain no statement runs on the table longer than the retention, set {CHECK_KEY} = false "
            "(as Delta's spark.databricks.delta.retentionDurationCheck.enabled). Nothing was changed.")
    min_age = settings.min_orphan_age_ms(spark.conf.get(settings.MIN_ORPHAN_AGE, None))
    if min_age > 0 and retain * 3600 * 1000 < min_age:
        raise LakeError(
            f"lakerules: VACUUM {name} RETAIN {retain:g} HOURS: the retention is below "
            f"spark.lakerules.removeOrphanFiles.minAge ({min_age} ms): files newer than that may belong to a statement "
            "still running. Set that setting lower only when no statement is writing to the table. Nothing was changed.")
    older_than_us = (now_ms - int(retain * 3600 * 1000)) * 1000
    if dry_run:
        rows = _dry_run(ctx, table, now_ms, older_than_us)
        from pyspark.sql.types import StructType

        return J.analyzed(J.local_frame(spark, [(p,) for p in rows], StructType.fromDDL(RESULT)))
    M.expire_snapshots(ctx, table, {"older_than": older_than_us, "retain_last": None, "max_concurrent_deletes": None,
                                     "stream_results": None, "snapshot_ids": None})
    table.refresh()
    M.remove_orphan_files(ctx, table, {"older_than": older_than_us, "location": None, "dry_run": False,
                                        "max_concurrent_deletes": None})
    return J.result_rows(spark, [(table.location(),)], RESULT)


def _dry_run(ctx, table, now_ms: int, older_than_us: int) -> list[str]:
    """What VACUUM would delete: the files only the snapshots it would expire need, and the
    orphan files remove_orphan_files would remove."""
    from lakerules.procedures import maintenance as M

    md = table.metadata
    expired = M.snapshots_to_expire(md, now_ms, older_than_us // 1000, None, None)
    doomed = cleanup.doomed(md, md, set(expired), cleanup.Manifests(table.io)) if expired else {}
    confined = paths.Confinement.of(table, f"VACUUM {names.table_name(table)}")
    borrowed = cleanup.guard(table.catalog, table, confined)
    inside = sorted(p for p in doomed if confined.inside(p) is not None and cleanup.normalize(p) not in borrowed)
    orphans = M.remove_orphan_files(ctx, table, {"older_than": older_than_us, "location": None, "dry_run": True,
                                                  "max_concurrent_deletes": None})
    listed = [r[0] for r in J.dataframe(ctx.spark, orphans).collect()]
    return sorted(set(inside) | set(listed))
