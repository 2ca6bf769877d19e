"""How many rows a filter keeps, estimated from the manifests' metrics, with no read.

Late materialization's ``auto`` (lakerules.scan.latemat) asks before its first pass: a filter the
bounds already show to be dense (most pages hold a match) is read plainly without spending a
Spark job to find out. The estimate takes each data file's rows spread evenly between its lower
and upper bound of a column, and the conjuncts as independent, as cost-based optimizers do:

- ``c = v`` on an integral column (int, long, date, timestamp): one value of the bounds' range
  (0 outside it); ``IN`` the sum of its values';
- ``c < v``, ``c <= v``, ``c > v``, ``c >= v`` on an integral or floating column: the share of
  the range on the kept side;
- ``c <> v`` (and ``NOT c = v``): all rows but ``c = v``'s; on a column of another type (a
  string), all rows, as an inequality rarely filters much;
- ``c IS NOT NULL`` / ``c IS NULL``: from the null counts;
- AND: the product; OR: the sum (at most all rows).

Anything else (a string equality, a function of a column, a file without bounds for the
column) has no estimate: ``None``, and the caller decides as it did without one.

>>> from pyiceberg.expressions import And, EqualTo, LessThan, NotNull
>>> from pyiceberg.schema import Schema
>>> from pyiceberg.types import IntegerType, NestedField, StringType
>>> from pyiceberg.conversions import to_bytes
>>> from types import SimpleNamespace
>>> schema = Schema(NestedField(1, "k", IntegerType()), NestedField(2, "s", StringType()))
>>> f = SimpleNamespace(record_count=1_000_000, null_value_counts={1: 0},
...                     lower_bounds={1: to_bytes(IntegerType(), 0)}, upper_bounds={1: to_bytes(IntegerType(), 999)})
>>> expected_rows(schema, And(LessThan("k", 10), NotNull("k")), [f])
10000.0
>>> expected_rows(schema, EqualTo("k", 7), [f])
1000.0
>>> expected_rows(schema, EqualTo("k", 5000), [f])
0.0
>>> expected_rows(schema, And(EqualTo("k", 7), EqualTo("s", "x")), [f]) is None
True
"""

from __future__ import annotations

from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundEqualTo,
    BoundGreaterThan,
    BoundGreaterThanOrEqual,
    BoundIn,
    BoundIsNull,
    BoundLessThan,
    BoundLessThanOrEqual,
    BoundNotEqualTo,
    BoundNotIn,
    BoundNotNull,
    Not,
    Or,
)
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    TimestampType,
    TimestamptzType,
)

from lakerules.scan.bounds import file_bounds

_INTEGRAL = (IntegerType, LongType, DateType, TimestampType, TimestamptzType)
_FLOATING = (FloatType, DoubleType)


def expected_rows(schema: Schema, expr: BooleanExpression, files) -> float | None:
    """The rows of ``files`` (DataFiles: record counts, bounds, null counts) that ``expr`` (an
    unbound pyiceberg expression over ``schema``'s column names) is estimated to keep, or None
    when some part of it, in some file, has no estimate."""
    try:
        bound = bind(schema, expr, case_sensitive=True)
    except Exception:  # noqa: BLE001 - a column or literal pyiceberg cannot bind: no estimate
        return None
    total = 0.0
    for f in files:
        share = _share(bound, f)
        if share is None:
            return None
        total += share * f.record_count
    return total


def _share(e, f) -> float | None:
    """The share of file ``f``'s rows bound expression ``e`` keeps, or None."""
    if isinstance(e, AlwaysTrue):
        return 1.0
    if isinstance(e, AlwaysFalse):
        return 0.0
    if isinstance(e, And):
        left, right = _share(e.left, f), _share(e.right, f)
        return None if left is None or right is None else left * right
    if isinstance(e, Or):
        left, right = _share(e.left, f), _share(e.right, f)
        return None if left is None or right is None else min(1.0, left + right)
    if isinstance(e, Not):
        if isinstance(e.child, BoundEqualTo):
            return _not_equal(e.child, f)
        inner = _share(e.child, f)
        return None if inner is None else 1.0 - inner
    if isinstance(e, BoundNotEqualTo):
        return _not_equal(e, f)
    if isinstance(e, BoundNotIn):
        return 1.0 if not isinstance(_field(e).field_type, _INTEGRAL) else _complement(_in(e, f))
    if isinstance(e, (BoundNotNull, BoundIsNull)):
        nulls = (f.null_value_counts or {}).get(_field(e).field_id)
        if nulls is None or not f.record_count:
            return 1.0 if isinstance(e, BoundNotNull) else None
        part = nulls / f.record_count
        return part if isinstance(e, BoundIsNull) else 1.0 - part
    if isinstance(e, BoundIn):
        return _in(e, f)
    if isinstance(e, (BoundEqualTo, BoundLessThan, BoundLessThanOrEqual, BoundGreaterThan, BoundGreaterThanOrEqual)):
        return _compare(e, f, e.literal.value)
    return None


def _field(e):
    return e.term.ref().field


def _compare(e, f, value) -> float | None:
    kind = _field(e).field_type
    bounds = file_bounds(f, _field(e))
    if bounds is None or not isinstance(kind, _INTEGRAL + _FLOATING):
        return None
    low, high = bounds
    if isinstance(kind, _INTEGRAL):
        width = high - low + 1
        if isinstance(e, BoundEqualTo):
            return 1.0 / width if low <= value <= high else 0.0
        kept = {BoundLessThan: value - low, BoundLessThanOrEqual: value - low + 1,
                BoundGreaterThan: high - value, BoundGreaterThanOrEqual: high - value + 1}[type(e)]
        return min(1.0, max(0.0, kept / width))
    if isinstance(e, BoundEqualTo):
        return None if low < high else float(value == low)
    if high <= low:  # one value: kept or not
        keep = {BoundLessThan: low < value, BoundLessThanOrEqual: low <= value,
                BoundGreaterThan: low > value, BoundGreaterThanOrEqual: low >= value}[type(e)]
        return float(keep)
    kept = {BoundLessThan: value - low, BoundLessThanOrEqual: value - low,
            BoundGreaterThan: high - value, BoundGreaterThanOrEqual: high - value}[type(e)]
    return min(1.0, max(0.0, kept / (high - low)))


def _in(e, f) -> float | None:
    if not isinstance(_field(e).field_type, _INTEGRAL):
        return None
    total = 0.0
    for v in e.literals:
        part = _compare(BoundEqualTo(e.term, v), f, v.value)
        if part is None:
            return None
        total += part
    return min(1.0, total)


def _not_equal(e, f) -> float | None:
    if not isinstance(_field(e).field_type, _INTEGRAL):
        return 1.0  # an inequality on a string (or float) column rarely filters much
    return _complement(_compare(BoundEqualTo(e.term, e.literal), f, e.literal.value))


def _complement(share: float | None) -> float | None:
    return None if share is None else 1.0 - share
