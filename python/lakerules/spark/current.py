"""The SparkSession the statement running in this thread belongs to (set per statement by the
backend): for what has no session handed to it, such as a commit's snapshot properties and the
JVM's bulk manifest writing (lakerules.write.manifest_bulk). Threads a statement starts do not
inherit it (a context variable): callers pass the session on to them."""

from __future__ import annotations

import contextvars

_session = contextvars.ContextVar("lakerules_statement_session", default=None)


def use(spark) -> None:
    """The session whose statements this thread runs (None: none)."""
    _session.set(spark)


def session():
    """The session set by :func:`use` in this thread, or None."""
    return _session.get()
