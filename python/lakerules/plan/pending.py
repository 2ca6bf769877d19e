"""Statements lakerules parsed, waiting for Spark to resolve their table.

The parser (lakerules.sql.statements) returns ``SELECT * FROM <table> AS __lakerules_command_N`` so
that Spark resolves the table as it would for its own statement; N names the planned command
kept here. Spark may analyze one parsed plan several times (Spark Connect does, so can views
and EXPLAIN): looking a command up never removes it, and each analysis plans the same command.
The newest entries are kept, up to a bound, so a long-running driver does not grow.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Callable

MARKER = "__lakerules_command_"
KEEP = 4096

_entries: OrderedDict[int, Callable] = OrderedDict()
_ids = itertools.count(1)
_lock = threading.Lock()


def put(run: Callable) -> str:
    """Keep a parsed statement's command; the alias that names it."""
    with _lock:
        n = next(_ids)
        _entries[n] = run
        while len(_entries) > KEEP:
            _entries.popitem(last=False)
    return f"{MARKER}{n}"


def get(alias: str) -> Callable | None:
    """The command an alias names, or None when it is not a marker or no longer kept."""
    if not alias.startswith(MARKER):
        return None
    with _lock:
        return _entries.get(int(alias[len(MARKER):]))


def is_marker(alias: str) -> bool:
    return alias.startswith(MARKER)
