"""What a refused statement must look like: a lakerules error naming the problem, no traceback."""

from __future__ import annotations

import pytest


def refused(spark, statement, *needles: str) -> str:
    """The statement (SQL text, or a callable) fails with a lakerules error naming each needle,
    without a Python traceback; the message."""
    with pytest.raises(Exception) as info:
        if callable(statement):
            statement()
        else:
            spark.sql(statement).collect()
    message = str(info.value)
    assert "lakerules" in message, message
    assert "Traceback" not in message and "internal error" not in message, message
    for n in needles:
        assert n in message, f"{n!r} not in {message}"
    return message
