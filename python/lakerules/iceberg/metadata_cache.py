"""Table metadata, parsed once per file.

Every statement loads its tables (Spark's analysis, then planning), and pyiceberg parses the
table's metadata JSON each time: a file that lists every snapshot, 17-30 ms for 1,000 of them. A
metadata file never changes once written (each commit writes a new one) and pyiceberg's
TableMetadata is frozen, so parsed metadata is kept per file location, for the latest few
(``install`` puts the cache in front of pyiceberg's parser, which every catalog's load calls;
a commit hands over the metadata it just wrote with ``remember``). A file that is missing or
cannot be parsed is an errors.UnreadableFile naming it (the catalog's load names the table).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from pyiceberg.serializers import FromInputFile

FILES = 32
_metadata: OrderedDict[str, Any] = OrderedDict()
_lock = threading.Lock()
_parse = FromInputFile.table_metadata


def _cached(input_file, encoding: str = "utf-8"):
    key = input_file.location
    with _lock:
        if key in _metadata:
            _metadata.move_to_end(key)
            return _metadata[key]
    try:
        parsed = _parse(input_file, encoding)
    except Exception as e:  # noqa: BLE001 - missing, truncated, not JSON, not table metadata
        from lakerules.errors import unreadable

        raise unreadable("metadata file", key, e) from e
    remember(key, parsed)
    return parsed


def remember(location: str | None, metadata) -> None:
    """Keep the parsed metadata of the file at location (e.g. the one a commit just wrote)."""
    if not location or metadata is None:
        return
    with _lock:
        _metadata[location] = metadata
        _metadata.move_to_end(location)
        while len(_metadata) > FILES:
            _metadata.popitem(last=False)


def install() -> None:
    FromInputFile.table_metadata = staticmethod(_cached)


def clear() -> None:
    """Forget every parsed metadata file (the next load of each table parses its file again)."""
    with _lock:
        _metadata.clear()
