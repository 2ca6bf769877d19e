"""Spark settings changed for a block of a test and put back afterwards."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def settings(spark, conf: dict):
    """The session's settings ``conf`` for the block; afterwards each is as it was (unset if it was)."""
    old = {k: spark.conf.get(k, None) for k in conf}
    try:
        for k, v in conf.items():
            spark.conf.set(k, v)
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
