"""Session settings (``spark.lakerules.*``) read as numbers: each is its default when unset, its
value when it is one, else a LakeError naming the setting, the value and what it takes; never a
raw parse error, never a value quietly taken for another."""

from __future__ import annotations

import re

from lakerules.errors import LakeError

# Spark's time strings (JavaUtils.timeStringAsMs): a whole number and a unit, milliseconds without one
_DURATION = re.compile(r"(\d+)\s*(us|ms|s|m|min|h|d)?")
_UNIT_MS = {"us": 0.001, "ms": 1, None: 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def count(key: str, value: str | None, default: int, what: str) -> int:
    """A setting that is a count (0 or more) of ``what``."""
    if value is None:
        return default
    try:
        n = int(str(value).strip())
    except ValueError:
        n = -1
    if n < 0:
        raise LakeError(f"lakerules: {key}={value!r} is not a number of {what} (0 or more)")
    return n


def flag(key: str, value: str | None, default: bool) -> bool:
    """A setting that is true or false (any case)."""
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise LakeError(f"lakerules: {key}={value!r} is not true or false")
    return text == "true"


def duration_ms(key: str, value: str | None, default: str, zero: str = "") -> int:
    """A setting that is a duration as Spark writes one (``1d``, ``12h``, ``30min``, ``90s``,
    ``500ms``; a bare number is milliseconds), in milliseconds: 0 or more. ``zero`` says what 0
    means, for the error message."""
    text = default if value is None else value
    m = _DURATION.fullmatch(str(text).strip().lower())
    if m is None:
        negative = str(text).strip().startswith("-")
        raise LakeError(
            f"lakerules: {key}={text!r} is not {'allowed: a duration cannot be negative' if negative else 'a duration'}; "
            f"give a whole number and a unit, for example 1d, 12h, 30min, 90s or 500ms"
            f"{f' ({zero})' if zero else ''}")
    return int(int(m.group(1)) * _UNIT_MS[m.group(2)])


MIN_ORPHAN_AGE = "spark.lakerules.removeOrphanFiles.minAge"


def min_orphan_age_ms(value: str | None) -> int:
    """spark.lakerules.removeOrphanFiles.minAge: how recent a file remove_orphan_files and VACUUM
    never delete (default a day, Iceberg's); 0 turns that floor off."""
    return duration_ms(MIN_ORPHAN_AGE, value, "1d", "0 turns the floor off")
