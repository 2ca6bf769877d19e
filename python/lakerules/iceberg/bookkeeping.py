"""The table properties lakerules keeps for itself: records that protect data, out of users' reach.

Three records live in a table's properties, because that is the one place every engine, every
copy of the metadata and every later snapshot carries them (expire, replace, rollback and OPTIMIZE
keep a table's properties as they are):

- ``lakerules.borrows``: the folders outside the table's own that hold files it references (files
  brought in by ``add_files``, with or without ``shared``, and by ``register_table``);
  other tables' cleanup keeps every file the table references there, and no table may be created
  or moved onto them (lakerules.iceberg.owners);
- ``lakerules.previous-folders``: the folders lakerules moved the table away from, which still
  hold its older files and stay its own (lakerules.iceberg.paths.table_folders);
- ``lakerules.stream.<query id>``: the last micro-batch a streaming query committed to the table
  (lakerules.streaming.sink), as Delta keeps its ``txn`` actions: a restarted query skips what the
  table already holds, even after maintenance expired the snapshots that wrote it.

Erasing one would lose data (a borrower's files deleted by the owner's cleanup, an old folder
taken by a new table, a batch written twice), so SQL cannot set or remove them, as Iceberg
reserves ``format-version``: SET / UNSET TBLPROPERTIES, CREATE TABLE's and REPLACE's TBLPROPERTIES
and a writer's table properties naming one are refused (:func:`check_user_properties`). lakerules
writes them in the same commit as the change they record.
"""

from __future__ import annotations

import json

from lakerules.errors import LakeError

BORROWS = "lakerules.borrows"
PREVIOUS_FOLDERS = "lakerules.previous-folders"
STREAM_PREFIX = "lakerules.stream."

_WHAT = {
    BORROWS: "the folders of files it references outside its own, which other tables' cleanup keeps",
    PREVIOUS_FOLDERS: "the folders it was moved from, which still hold its older files",
    STREAM_PREFIX: "the last micro-batch a streaming query committed, which keeps a restarted stream exactly-once",
}


def protected(key: str) -> bool:
    """Whether ``key`` is one of lakerules' records (see the module doc)."""
    k = key.lower()
    return k in (BORROWS, PREVIOUS_FOLDERS) or k.startswith(STREAM_PREFIX)


def check_user_properties(what: str, keys) -> None:
    """Refuse a statement (``what``: "ALTER TABLE lake.db.t SET TBLPROPERTIES") that sets or
    removes one of lakerules' records."""
    for key in keys:
        if protected(key):
            record = _WHAT[STREAM_PREFIX if key.lower().startswith(STREAM_PREFIX) else key.lower()]
            raise LakeError(f"lakerules: {what}: table property {key!r} is lakerules' own record of {record}; "
                            "it cannot be set or removed by SQL (changing it could lose or duplicate data). "
                            "Nothing was changed")


def folders(properties, key: str) -> list[str]:
    """The folders record ``key`` (``BORROWS`` or ``PREVIOUS_FOLDERS``, a JSON list) of a table's
    ``properties`` names; none when it is missing or not a list."""
    try:
        value = json.loads(properties.get(key) or "[]")
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def stream_key(query_id: str) -> str:
    """The property that records the last batch ``query_id`` committed."""
    return f"{STREAM_PREFIX}{query_id}"
