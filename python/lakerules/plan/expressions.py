"""Spark (Catalyst) expressions as pyiceberg expressions.

``to_iceberg`` answers with the translation and whether it is exact. Where a part cannot be
translated it becomes AlwaysTrue, which is right for pruning (read more, never less) but not for
deciding what a write removes; callers that need exactness check the flag.

>>> # EqualTo(kind#1, 'a') AND IsNotNull(id#0)  ->  And(EqualTo('kind', 'a'), NotNull('id'))
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotNull,
    Or,
    StartsWith,
)

from lakerules.spark import jvm as J

_COMPARISONS = {
    "EqualTo": EqualTo,
    "LessThan": LessThan,
    "LessThanOrEqual": LessThanOrEqual,
    "GreaterThan": GreaterThan,
    "GreaterThanOrEqual": GreaterThanOrEqual,
}
_FLIPPED = {
    "EqualTo": "EqualTo",
    "LessThan": "GreaterThan",
    "LessThanOrEqual": "GreaterThanOrEqual",
    "GreaterThan": "LessThan",
    "GreaterThanOrEqual": "LessThanOrEqual",
}
_INEXACT = object()


def to_iceberg(expr, columns: dict[int, str] | None = None) -> tuple[BooleanExpression, bool]:
    """(translation, exact). ``columns`` maps exprIds of the table's attributes to column names;
    without it every attribute reference is taken to be a column of the table."""
    translator = _Translator(columns)
    result = translator.visit(expr)
    return result, translator.exact


class _Translator:
    def __init__(self, columns):
        self.columns = columns
        self.exact = True

    def inexact(self) -> BooleanExpression:
        self.exact = False
        return AlwaysTrue()

    def visit(self, e) -> BooleanExpression:
        name = J.simple_name(e)
        match name:
            case "And":
                return And(self.visit(e.left()), self.visit(e.right()))
            case "Or":
                return Or(self.visit(e.left()), self.visit(e.right()))
            case "Not":
                inner = _Translator(self.columns)
                child = inner.visit(e.child())
                if not inner.exact:
                    # NOT of an over-approximation is not an over-approximation.
                    return self.inexact()
                return Not(child)
            case "Literal":
                value = e.value()
                if value is True:
                    return AlwaysTrue()
                if value is False or value is None:
                    return AlwaysFalse()
                return self.inexact()
            case "IsNull" | "IsNotNull":
                column = self.column(e.child())
                if column is None:
                    return self.inexact()
                return IsNull(column) if name == "IsNull" else NotNull(column)
            case "EqualNullSafe":
                return self.equal_null_safe(e)
            case "In":
                return self.in_list(e)
            case "InSet":
                return self.in_set(e)
            case "StartsWith":
                column, value = self.column(e.left()), self.literal(e.right())
                if column is None or value is _INEXACT or value is None:
                    return self.inexact()
                return StartsWith(column, value)
            case _ if name in _COMPARISONS:
                return self.comparison(name, e)
        return self.inexact()

    def comparison(self, name: str, e) -> BooleanExpression:
        left, right = e.left(), e.right()
        column, value = self.column(left), self.literal(right)
        if column is None:
            column, value, name = self.column(right), self.literal(left), _FLIPPED[name]
        if column is None or value is _INEXACT:
            return self.inexact()
        if value is None:
            return AlwaysFalse()  # a comparison with NULL is never true
        if isinstance(value, float) and value != value:
            return IsNaN(column) if name == "EqualTo" else self.inexact()
        return _COMPARISONS[name](column, value)

    def equal_null_safe(self, e) -> BooleanExpression:
        column, value = self.column(e.left()), self.literal(e.right())
        if column is None:
            column, value = self.column(e.right()), self.literal(e.left())
        if column is None or value is _INEXACT:
            return self.inexact()
        return IsNull(column) if value is None else EqualTo(column, value)

    def in_list(self, e) -> BooleanExpression:
        column = self.column(e.value())
        values = [self.literal(v) for v in J.from_seq(e.list())]
        if column is None or any(v is _INEXACT for v in values):
            return self.inexact()
        values = [v for v in values if v is not None]
        return In(column, values) if values else AlwaysFalse()

    def in_set(self, e) -> BooleanExpression:
        column = self.column(e.child())
        if column is None:
            return self.inexact()
        dt = e.child().dataType()
        values = [_internal_value(v, dt) for v in J.from_seq(e.hset())]
        if any(v is _INEXACT for v in values):
            return self.inexact()
        values = [v for v in values if v is not None]
        return In(column, values) if values else AlwaysFalse()

    def column(self, e) -> str | None:
        """The column's Iceberg name: a struct's field (GetStructField over a table column) is
        named by its path, "s.a", as pyiceberg binds it."""
        fields = []
        # a cast to the type the column has already (an UPDATE's condition as analyzed): the column
        while J.simple_name(e) == "Cast" and e.child().dataType().equals(e.dataType()):
            e = e.child()
        while J.simple_name(e) == "GetStructField":
            fields.append(e.childSchema().apply(e.ordinal()).name())
            e = e.child()
        if J.simple_name(e) != "AttributeReference":
            return None
        base = e.name() if self.columns is None else self.columns.get(e.exprId().id())
        if base is None:
            return None
        return ".".join([base, *reversed(fields)])

    def literal(self, e) -> Any:
        if J.simple_name(e) == "Literal":
            return _internal_value(e.value(), e.dataType())
        if e.foldable() and e.deterministic():
            # a constant expression (e.g. CAST('a' AS STRING)): Spark folds it to its value
            return _internal_value(e.eval(None), e.dataType())
        return _INEXACT


def _internal_value(value, dt) -> Any:
    """A Catalyst internal value as the Python value pyiceberg binds for that type."""
    if value is None:
        return None
    kind = J.simple_name(dt).rstrip("$")
    match kind:
        case "StringType":
            return value.toString()
        case "IntegerType" | "LongType" | "ShortType" | "ByteType" | "BooleanType":
            return value
        case "FloatType" | "DoubleType":
            return float(value)
        case "DateType":
            return int(value)  # days since epoch; binds to an Iceberg date
        case "TimestampType" | "TimestampNTZType":
            return int(value)  # micros since epoch
        case _ if kind.startswith("DecimalType"):
            # Py4J hands a java.math.BigDecimal over as a Python Decimal
            return Decimal(value.toJavaBigDecimal())
        case "BinaryType":
            return bytes(value)
    return _INEXACT
