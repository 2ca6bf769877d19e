"""The SQL lakerules adds to Spark's, as a sqlglot dialect: Spark plus ``OPTIMIZE``.

Delta Lake's grammar (``DeltaSqlBase.g4``, ``#optimizeTable``)::

    OPTIMIZE table [WHERE partition_predicate] [ZORDER BY (col [, col ...]) | ZORDER BY col [, col ...]]

sqlglot's Spark tokenizer makes ``OPTIMIZE`` a command keyword (the rest of the statement one
opaque string); this dialect takes it back as a plain word and parses the statement into an
:class:`Optimize` node. Syntax errors carry the line and column.

>>> stmt = parse_optimize("OPTIMIZE lake.db.t WHERE day = 25 ZORDER BY (a, b)")
>>> stmt.sql(dialect=LakeSpark)
'OPTIMIZE lake.db.t WHERE day = 25 ZORDER BY (a, b)'
>>> [c.sql() for c in stmt.args["zorder"]]
['a', 'b']
>>> stmt.args["where_text"]
'day = 25'
>>> parse_optimize("OPTIMIZE t ZORDER BY")
Traceback (most recent call last):
...
lakerules.errors.LakeSyntaxError: lakerules: OPTIMIZE syntax error at line 1, column 21: ZORDER BY needs at least one column
  OPTIMIZE t ZORDER BY
                      ^
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel, ParseError
from sqlglot.tokens import TokenType

from lakerules.errors import LakeError, LakeSyntaxError


class Optimize(exp.Expression):
    """OPTIMIZE: ``this`` the table, ``where`` its partition predicate (``where_text`` the
    predicate as written), ``zorder`` the z-order columns."""

    arg_types = {"this": True, "where": False, "where_text": False, "zorder": False}


# Tokens that continue an expression: after a column name they mean it was not just a name.
_OPERATORS = {
    TokenType.PLUS, TokenType.DASH, TokenType.STAR, TokenType.SLASH, TokenType.MOD, TokenType.L_PAREN,
    TokenType.L_BRACKET, TokenType.DCOLON, TokenType.DPIPE, TokenType.EQ, TokenType.GT, TokenType.LT,
}


class LakeSpark(Spark):
    class Tokenizer(Spark.Tokenizer):
        # OPTIMIZE is a word again, not a command keyword that swallows the statement.
        KEYWORDS = {k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "OPTIMIZE"}

    class Parser(Spark.Parser):
        def _parse_statement(self):
            # As sqlglot's own parser takes WHILE: a statement named by its first word.
            if self._curr and self._curr.token_type == TokenType.VAR and self._match_text_seq("OPTIMIZE"):
                return self._parse_optimize()
            return super()._parse_statement()

        def _parse_optimize(self) -> Optimize:
            if self._at_end():
                self._error_at_end("OPTIMIZE needs a table name")
            if self._curr.token_type == TokenType.STRING:
                self.raise_error("OPTIMIZE of a path is not supported; name a table")
            table = self._parse_table_parts()
            if table is None or not table.name:
                self.raise_error("OPTIMIZE needs a table name")
            where = where_text = None
            if self._match(TokenType.WHERE):
                first = self._curr
                where = self._parse_assignment()
                if where is None and self._at_end():
                    self._error_at_end("WHERE needs a predicate")
                if where is None:
                    self.raise_error("WHERE needs a predicate", self._curr)
                where_text = self.sql[first.start : self._prev.end + 1]
            zorder = None
            if self._match_text_seq("ZORDER"):
                if self._at_end():
                    self._error_at_end("expected BY after ZORDER")
                if not self._match_text_seq("BY"):
                    self.raise_error("expected BY after ZORDER", self._curr)
                wrapped = self._match(TokenType.L_PAREN)
                zorder = self._parse_csv(self._parse_zorder_column)
                if wrapped and not self._match(TokenType.R_PAREN):
                    self.raise_error("expected ) after the ZORDER BY columns")
            self._match(TokenType.SEMICOLON)
            return self.expression(Optimize(this=table, where=where, where_text=where_text, zorder=zorder))

        def _at_end(self) -> bool:
            return not self._curr or self._curr.token_type == TokenType.SENTINEL

        def _error_at_end(self, message: str) -> None:
            """A syntax error just after the last token: the statement ended too early."""
            last = self._prev
            raise ParseError.new(message, description=message, line=last.line, col=last.col + 1, highlight="")

        def _parse_zorder_column(self) -> exp.Column:
            start = self._curr
            if self._at_end():
                self._error_at_end("ZORDER BY needs at least one column")
            if start.token_type in (TokenType.R_PAREN, TokenType.COMMA, TokenType.SEMICOLON):
                self.raise_error("ZORDER BY needs at least one column", start)
            column = self._parse_column()
            plain = isinstance(column, exp.Column) and all(isinstance(p, exp.Identifier) for p in column.parts)
            if not plain or (self._curr and self._curr.token_type in _OPERATORS):
                self.raise_error("ZORDER BY takes column names, not expressions", start)
            return column

    class Generator(Spark.Generator):
        TRANSFORMS = {
            **Spark.Generator.TRANSFORMS,
            Optimize: lambda self, e: "OPTIMIZE "
            + self.sql(e, "this")
            + (f" WHERE {self.sql(e, 'where')}" if e.args.get("where") else "")
            + (f" ZORDER BY ({self.expressions(e, key='zorder', flat=True)})" if e.args.get("zorder") else ""),
        }


def parse_optimize(sql: str) -> Optimize:
    """The OPTIMIZE statement of sql, or a LakeSyntaxError that says where its syntax is wrong."""
    try:
        tree = LakeSpark().parse(sql, error_level=ErrorLevel.IMMEDIATE)
    except ParseError as e:
        raise _syntax_error(sql, e) from None
    statements = [t for t in tree if t is not None]
    if len(statements) != 1 or not isinstance(statements[0], Optimize):
        raise LakeError("lakerules: expected one OPTIMIZE statement")
    return statements[0]


def _syntax_error(sql: str, e: ParseError) -> LakeSyntaxError:
    err = e.errors[0] if e.errors else {}
    line, col = err.get("line") or 1, err.get("col") or 1
    near = err.get("highlight") or ""
    description = err.get("description") or str(e)
    col = max(1, col - max(len(near), 1) + 1)  # sqlglot gives the token's last column
    lines = sql.splitlines() or [sql]
    text = lines[min(line, len(lines)) - 1]
    message = f"lakerules: OPTIMIZE syntax error at line {line}, column {col}: {description}\n  {text}\n  {' ' * (col - 1)}^"
    return LakeSyntaxError(message, sql, line, col, near, f": {description}")
