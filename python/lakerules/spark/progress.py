"""What Spark's UI and progress bar say while a lake command runs: every Spark job it starts
carries the job description ``lakerules <statement>: <step>`` (e.g. ``lakerules DELETE
lake.db.t: read matching rows``)."""

from __future__ import annotations

import contextlib
import threading

_current = threading.local()


@contextlib.contextmanager
def statement(ctx, title: str):
    sc = ctx.spark.sparkContext
    before = sc.getLocalProperty("spark.job.description")
    previous = getattr(_current, "title", None)
    _current.title = title
    sc.setJobDescription(f"lakerules {title}")
    try:
        yield
    finally:
        _current.title = previous
        sc.setJobDescription(before)


def step(spark, what: str) -> None:
    """Name the step the running command is in (``read matching rows``, ``write delete files``):
    the Spark jobs that follow carry ``lakerules <statement>: <step>`` as their description."""
    title = getattr(_current, "title", None)
    if title is not None:
        spark.sparkContext.setJobDescription(f"lakerules {title}: {what}")
