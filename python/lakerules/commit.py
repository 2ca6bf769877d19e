"""Commits through pyiceberg: one statement, one snapshot.

pyiceberg retries a commit that lost a race (``commit.retry.*`` table properties) and validates
it against what was committed meanwhile.
"""

from __future__ import annotations

from pyiceberg.table import Table

LAKERULES_SUMMARY = {"engine-name": "lakerules"}


def append(table: Table, data_files: list, summary: dict | None = None) -> None:
    """A fast append of new data files: the files' rows are added, nothing is removed."""
    if not data_files:
        return
    with table.transaction() as tx:
        with tx.update_snapshot(snapshot_properties={**LAKERULES_SUMMARY, **(summary or {})}).fast_append() as fa:
            for f in data_files:
                fa.append_data_file(f)


def overwrite(table: Table, removed: list, added: list, summary: dict | None = None) -> None:
    """Remove data files and add others in one snapshot."""
    if not removed and not added:
        return
    with table.transaction() as tx:
        with tx.update_snapshot(snapshot_properties={**LAKERULES_SUMMARY, **(summary or {})}).overwrite() as ow:
            for f in removed:
                ow.delete_data_file(f)
            for f in added:
                ow.append_data_file(f)
