"""Dates and timestamps past Python's years 1 to 9999.

Spark's DATE runs to year 5881580 and its TIMESTAMP to year 294247 (a day or a microsecond count
from 1970), as Iceberg's values do. pyiceberg's partition transforms (years, months of a value,
used to project a predicate onto partitions) and partition names (the snapshot summary's
partition paths) go through Python's date and datetime, which stop at year 9999: an
OverflowError for a value outside, and a failed statement. ``install`` puts exact integer
versions in their place for values out of Python's range (proleptic Gregorian, as Python's and
Java's calendars are); values in range still go through pyiceberg's own code, unchanged. Names
outside years 0-9999 are written as Java's LocalDate writes them: '+10000-01-01', '-0001-12-31'.
"""

from __future__ import annotations

from pyiceberg.utils import datetime as pd

MICROS_PER_DAY = 86_400_000_000
MICROS_PER_HOUR = 3_600_000_000
_installed = False


def civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of days since 1970-01-01 (H. Hinnant's civil_from_days)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _year(y: int) -> str:
    if y > 9999:
        return f"+{y}"
    return f"-{-y:04d}" if y < 0 else f"{y:04d}"


def _date_text(days: int) -> str:
    y, m, d = civil(days)
    return f"{_year(y)}-{m:02d}-{d:02d}"


def _time_text(micros_of_day: int) -> str:
    seconds, micros = divmod(micros_of_day, 1_000_000)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return f"{text}.{micros:06d}" if micros else text


def days_to_years(days: int) -> int:
    return civil(days)[0] - 1970


def days_to_months(days: int) -> int:
    y, m, _ = civil(days)
    return (y - 1970) * 12 + m - 1


def micros_to_years(micros: int) -> int:
    return days_to_years(micros // MICROS_PER_DAY)


def micros_to_months(micros: int) -> int:
    return days_to_months(micros // MICROS_PER_DAY)


def to_human_day(days: int) -> str:
    return _date_text(days)


def to_human_hour(hours: int) -> str:
    days, hour = divmod(hours, 24)
    return f"{_date_text(days)}-{hour:02d}"


def to_human_timestamp(micros: int) -> str:
    days, of_day = divmod(micros, MICROS_PER_DAY)
    return f"{_date_text(days)}T{_time_text(of_day)}"


def to_human_timestamptz(micros: int) -> str:
    return f"{to_human_timestamp(micros)}+00:00"


def _wide(name: str, wide):
    narrow = getattr(pd, name)

    def either(value):
        try:
            return narrow(value)
        except OverflowError:
            return wide(value)

    either.__name__, either.__doc__ = name, narrow.__doc__
    return either


def install() -> None:
    """pyiceberg's calendar helpers, as the transforms call them (pyiceberg.utils.datetime.<name>),
    extended past year 9999."""
    global _installed
    if _installed:
        return
    for name, wide in [("days_to_years", days_to_years), ("days_to_months", days_to_months),
                       ("micros_to_years", micros_to_years), ("micros_to_months", micros_to_months),
                       ("to_human_day", to_human_day), ("to_human_hour", to_human_hour),
                       ("to_human_timestamp", to_human_timestamp), ("to_human_timestamptz", to_human_timestamptz)]:
        setattr(pd, name, _wide(name, wide))
    _installed = True
