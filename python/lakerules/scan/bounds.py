"""Exact answers from the manifests: a column's minimum or maximum over data files' metrics, when
the metrics hold it (``bound``), else why not (``NotExact``). Used by the aggregate rule
(count/min/max from metadata) and by DESCRIBE EXTENDED ... col. ``file_bounds``: one file's
bounds of a column (MERGE's key pruning, lakerules.scan.selectivity)."""

from __future__ import annotations

from pyiceberg.conversions import from_bytes
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    TimestampType,
    TimestamptzType,
)


_BOUNDED = (IntegerType, LongType, FloatType, DoubleType, DateType, TimestampType, TimestamptzType, DecimalType,
            BooleanType)


def file_bounds(data_file, field) -> tuple | None:
    """(lower, upper) of ``field`` in one data file's metrics, as Python values, or None when the
    file has no such bounds (or they were written for another type, before a promotion)."""
    lower = (data_file.lower_bounds or {}).get(field.field_id)
    upper = (data_file.upper_bounds or {}).get(field.field_id)
    if lower is None or upper is None:
        return None
    try:
        return from_bytes(field.field_type, lower), from_bytes(field.field_type, upper)
    except Exception:  # noqa: BLE001 - a bound written for another type (before a promotion)
        return None


class NotExact(Exception):
    """The metadata does not hold the exact answer: why, for EXPLAIN."""



def bound(files, field, kind: str, what: str):
    """The exact minimum (``kind`` "Min") or maximum ("Max") of ``field`` over the data files'
    metrics, as the bound's Python value (None when every file holds only nulls); NotExact,
    naming ``what``, when the metrics do not hold it."""
    if not isinstance(field.field_type, _BOUNDED):
        raise NotExact(f"{what}: bounds of {field.field_type} columns may be truncated")
    best = None
    for f in files:
        values, nulls = f.value_counts or {}, f.null_value_counts or {}
        fid = field.field_id
        if fid in values and fid in nulls and values[fid] == nulls[fid]:
            continue  # only nulls: nothing to take
        if isinstance(field.field_type, (FloatType, DoubleType)) and (f.nan_value_counts or {}).get(fid) != 0:
            raise NotExact(f"{what}: a file may hold NaN values")
        bounds = (f.lower_bounds if kind == "Min" else f.upper_bounds) or {}
        if fid not in bounds:
            raise NotExact(f"{what}: a file has no {'lower' if kind == 'Min' else 'upper'} bound of {field.name}")
        try:
            v = from_bytes(field.field_type, bounds[fid])
        except Exception:  # noqa: BLE001 - a bound written for another type (before a promotion)
            raise NotExact(f"{what}: a file's bound of {field.name} is of another type") from None
        if best is None or (v < best if kind == "Min" else v > best):
            best = v
    return best
