"""The SQL lakerules adds to Spark's, as a sqlglot dialect: Spark plus ``OPTIMIZE``, ``CALL``,
Iceberg's partition evolution (``ALTER TABLE ... ADD|DROP|REPLACE PARTITION FIELD``) and Delta's
``DESCRIBE HISTORY`` and ``RESTORE``.

Comments anywhere (``/* nightly */ OPTIMIZE ...``), quoted names (backticks, doubled inside) and
string literals are the tokenizer's: no statement is taken apart by regular expressions.

Delta Lake's grammar (``DeltaSqlBase.g4``, ``#optimizeTable``)::

    OPTIMIZE table [WHERE partition_predicate] [ZORDER BY (col [, col ...]) | ZORDER BY col [, col ...]]

and lakerules' Hilbert form of it, ``HILBERT BY`` in place of ``ZORDER BY``.

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
>>> parse_optimize("OPTIMIZE t HILBERT BY a, b").sql(dialect=LakeSpark)
'OPTIMIZE t HILBERT BY (a, b)'
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
from lakerules.sql import nesting
from lakerules.sql.alter_grammar import (
    AlterTableGrammar,
    order_op_at as _order_op_at,
    partition_field_at as _partition_field_at,
    ref_op_at as _ref_op_at,
    IdentifierFields,
    PartitionField,
    RefStatement,
    WriteOrder,
)


class Call(exp.Expression):
    """CALL catalog.namespace.procedure(args): ``this`` the name's parts, ``args`` a list of
    (name or None, the argument's text as written) pairs."""

    arg_types = {"this": True, "args": False}


class Optimize(exp.Expression):
    """OPTIMIZE: ``this`` the table, ``where`` its partition predicate (``where_text`` the
    predicate as written), ``zorder`` the clustering columns, ``curve`` "hilbert" for HILBERT BY
    (absent: ZORDER BY)."""

    arg_types = {"this": True, "where": False, "where_text": False, "zorder": False, "curve": False}


class DescribeHistory(exp.Expression):
    """(DESC | DESCRIBE) HISTORY table [LIMIT n]: ``this`` the table's name parts, ``limit`` an int."""

    arg_types = {"this": True, "limit": False}


class Restore(exp.Expression):
    """RESTORE [TABLE] table [TO] [FOR] (VERSION | SYSTEM_VERSION) AS OF <number | 'ref'>
    | [FOR] (TIMESTAMP | SYSTEM_TIME) AS OF <expression>: ``this`` the table's name parts;
    ``version`` an int (a snapshot id) or ``ref_text`` a branch or tag name (the string literal
    as written, for Spark to read), or ``timestamp_text`` the timestamp expression as written."""

    arg_types = {"this": True, "version": False, "ref_text": False, "timestamp_text": False}


class Vacuum(exp.Expression):
    """VACUUM table [RETAIN number HOURS] [DRY RUN] (Delta's): ``this`` the table's name parts,
    ``hours`` the retention (a number, None when not given), ``dry_run`` a bool."""

    arg_types = {"this": True, "hours": False, "dry_run": False}


_OPERATORS = {
    TokenType.PLUS, TokenType.DASH, TokenType.STAR, TokenType.SLASH, TokenType.MOD, TokenType.L_PAREN,
    TokenType.L_BRACKET, TokenType.DCOLON, TokenType.DPIPE, TokenType.EQ, TokenType.GT, TokenType.LT,
}


class LakeSpark(Spark):
    class Tokenizer(Spark.Tokenizer):
        # OPTIMIZE, CALL and VACUUM are words again, not command keywords that swallow the statement.
        KEYWORDS = {k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k not in ("OPTIMIZE", "CALL", "VACUUM")}

    class Parser(AlterTableGrammar, Spark.Parser):
        def _parse_statement(self):
            # As sqlglot's own parser takes WHILE: a statement named by its first words, told
            # apart in one place (statement_at) and parsed by its entry of STATEMENT_PARSERS.
            kind = statement_at(self._tokens, self._index) if self._curr else None
            if kind in STATEMENT_PARSERS:
                return getattr(self, STATEMENT_PARSERS[kind])()
            return super()._parse_statement()

        def _parse_optimize_statement(self) -> Optimize:
            self._advance()  # OPTIMIZE
            return self._parse_optimize()

        def _parse_call_statement(self) -> Call:
            self._advance()  # CALL
            return self._parse_call()

        def _parse_restore_statement(self) -> Restore:
            self._advance()  # RESTORE
            return self._parse_restore()

        def _parse_vacuum_statement(self) -> Vacuum:
            self._advance()  # VACUUM
            return self._parse_vacuum()

        def _parse_describe_history_statement(self) -> DescribeHistory:
            self._advance(2)  # DESC[RIBE] HISTORY
            return self._parse_describe_history()

        # ---- VACUUM (Delta's DeltaSqlBase.g4, #vacuumTable) ----------------------------------

        def _parse_vacuum(self) -> Vacuum:
            if not self._at_end() and self._curr.token_type == TokenType.STRING:
                self.raise_error("VACUUM of a path is not supported; name a table", self._curr)
            table = self._parse_name_parts("VACUUM needs a table name")
            out = Vacuum(this=table, dry_run=False)
            if self._match_text_seq("RETAIN"):
                if self._at_end():
                    self._error_at_end("RETAIN needs a number of hours")
                tok = self._curr
                if tok.token_type != TokenType.NUMBER:
                    self.raise_error("RETAIN needs a number of hours", tok)
                out.set("hours", float(tok.text))
                self._advance()
                if not self._match_text_seq("HOURS"):
                    self._expected("HOURS")
            if self._match_text_seq("DRY", "RUN"):
                out.set("dry_run", True)
            if not self._at_end() and self._curr.text.upper() in ("USING", "LITE", "FULL"):
                self.raise_error(f"VACUUM ... {self._curr.text.upper()} is not supported", self._curr)
            self._end_of_statement()
            return self.expression(out)

        # ---- DESCRIBE HISTORY, RESTORE (Delta's DeltaSqlBase.g4) ------------------------------

        def _parse_describe_history(self) -> DescribeHistory:
            if not self._at_end() and self._curr.token_type == TokenType.STRING:
                self.raise_error("DESCRIBE HISTORY of a path is not supported; name a table", self._curr)
            table = self._parse_name_parts("DESCRIBE HISTORY needs a table name")
            limit = None
            if self._match(TokenType.LIMIT):
                if self._at_end():
                    self._error_at_end("LIMIT needs a number")
                if self._curr.token_type != TokenType.NUMBER or not self._curr.text.isdigit():
                    self.raise_error("LIMIT needs a whole number of rows", self._curr)
                limit = int(self._curr.text)
                self._advance()
            self._end_of_statement()
            return self.expression(DescribeHistory(this=table, limit=limit))

        def _parse_restore(self) -> Restore:
            self._match(TokenType.TABLE)
            if not self._at_end() and self._curr.token_type == TokenType.STRING:
                self.raise_error("RESTORE of a path is not supported; name a table", self._curr)
            table = self._parse_name_parts("RESTORE needs a table name")
            self._match_text_seq("TO")
            self._match(TokenType.FOR)
            if self._at_end():
                self._error_at_end("expected VERSION AS OF or TIMESTAMP AS OF")
            kind = self._curr.text.upper()
            if kind not in ("VERSION", "SYSTEM_VERSION", "TIMESTAMP", "SYSTEM_TIME"):
                self._expected("VERSION AS OF or TIMESTAMP AS OF")
            self._advance()
            if not (self._match(TokenType.ALIAS) and self._match_text_seq("OF")):
                self._expected("AS OF")
            if self._at_end():
                self._error_at_end("expected a version or a timestamp after AS OF")
            out = Restore(this=table)
            if kind in ("VERSION", "SYSTEM_VERSION"):
                tok = self._curr
                if tok.token_type == TokenType.NUMBER and tok.text.isdigit():
                    out.set("version", int(tok.text))
                elif tok.token_type == TokenType.STRING:
                    out.set("ref_text", self.sql[tok.start : tok.end + 1])
                else:
                    self.raise_error("VERSION AS OF takes a snapshot id (a whole number) or a branch or tag "
                                     "name (a string)", tok)
                self._advance()
            else:
                first = self._curr
                if self._parse_assignment() is None:
                    self._expected("a timestamp expression")
                out.set("timestamp_text", self.sql[first.start : self._prev.end + 1])
            self._end_of_statement()
            return self.expression(out)

        # ---- CALL --------------------------------------------------------------------------

        def _parse_call(self) -> Call:
            if self._at_end():
                self._error_at_end("CALL needs a procedure name")
            name = self._parse_name_parts("CALL needs a procedure name")
            if not self._match(TokenType.L_PAREN):
                self._expected("( after the procedure name")
            args = []
            if not self._match(TokenType.R_PAREN):
                while True:
                    args.append(self._parse_call_arg())
                    if self._match(TokenType.COMMA):
                        continue
                    if not self._match(TokenType.R_PAREN):
                        self._expected(", or ) after an argument")
                    break
            self._end_of_statement()
            return self.expression(Call(this=name, args=args))

        def _parse_call_arg(self):
            name = None
            if self._next and self._next.token_type == TokenType.FARROW and self._curr.token_type in (
                    TokenType.VAR, TokenType.IDENTIFIER) or (self._next and self._next.token_type == TokenType.FARROW):
                name = self._curr.text
                self._advance()
                self._advance()
            if self._at_end() or self._curr.token_type in (TokenType.COMMA, TokenType.R_PAREN):
                self._expected("an argument value")
            first = self._curr
            if self._parse_assignment() is None:
                self._expected("an argument value")
            return name, self.sql[first.start : self._prev.end + 1]

        # ---- shared -----------------------------------------------------------------------

        def _parse_name_parts(self, missing: str) -> list[str]:
            """A multipart name: words or quoted names separated by dots (keywords are words here)."""
            parts = []
            while True:
                if self._at_end():
                    self._error_at_end(missing)
                tok = self._curr
                if tok.token_type == TokenType.IDENTIFIER:
                    parts.append(tok.text)
                elif tok.token_type != TokenType.STRING and tok.text.replace("_", "a").isalnum():
                    parts.append(tok.text)
                else:
                    self.raise_error(missing, tok)
                self._advance()
                if not self._match(TokenType.DOT):
                    return parts

        def _column_parts(self, what: str) -> list[str]:
            if self._at_end():
                self._error_at_end(f"expected {what}")
            start = self._curr
            column = self._parse_column()
            if not isinstance(column, exp.Column) or not all(isinstance(p, exp.Identifier) for p in column.parts):
                self.raise_error(f"expected {what}", start)
            return [p.name for p in column.parts]

        def _expected(self, what: str) -> None:
            if self._at_end():
                self._error_at_end(f"expected {what}")
            self.raise_error(f"expected {what}", self._curr)

        def _end_of_statement(self) -> None:
            self._match(TokenType.SEMICOLON)
            if not self._at_end():
                self.raise_error(f"unexpected {self._curr.text!r} after the statement", self._curr)

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
            zorder = curve = None
            for word in ("ZORDER", "HILBERT"):
                if zorder is None and self._match_text_seq(word):
                    if self._at_end():
                        self._error_at_end(f"expected BY after {word}")
                    if not self._match_text_seq("BY"):
                        self.raise_error(f"expected BY after {word}", self._curr)
                    wrapped = self._match(TokenType.L_PAREN)
                    zorder = self._parse_csv(lambda: self._parse_zorder_column(f"{word} BY"))
                    if wrapped and not self._match(TokenType.R_PAREN):
                        self.raise_error(f"expected ) after the {word} BY columns")
                    curve = "hilbert" if word == "HILBERT" else None
            self._match(TokenType.SEMICOLON)
            return self.expression(Optimize(this=table, where=where, where_text=where_text, zorder=zorder, curve=curve))

        def _at_end(self) -> bool:
            return not self._curr or self._curr.token_type == TokenType.SENTINEL

        def _error_at_end(self, message: str) -> None:
            """A syntax error just after the last token: the statement ended too early."""
            last = self._prev
            raise ParseError.new(message, description=message, line=last.line, col=last.col + 1, highlight="")

        def _parse_zorder_column(self, clause: str = "ZORDER BY") -> exp.Column:
            start = self._curr
            if self._at_end():
                self._error_at_end(f"{clause} needs at least one column")
            if start.token_type in (TokenType.R_PAREN, TokenType.COMMA, TokenType.SEMICOLON):
                self.raise_error(f"{clause} needs at least one column", start)
            column = self._parse_column()
            plain = isinstance(column, exp.Column) and all(isinstance(p, exp.Identifier) for p in column.parts)
            if not plain or (self._curr and self._curr.token_type in _OPERATORS):
                self.raise_error(f"{clause} takes column names, not expressions", start)
            return column

    class Generator(Spark.Generator):
        TRANSFORMS = {
            **Spark.Generator.TRANSFORMS,
            Optimize: lambda self, e: "OPTIMIZE "
            + self.sql(e, "this")
            + (f" WHERE {self.sql(e, 'where')}" if e.args.get("where") else "")
            + (f" {'HILBERT' if e.args.get('curve') == 'hilbert' else 'ZORDER'} BY "
               f"({self.expressions(e, key='zorder', flat=True)})" if e.args.get("zorder") else ""),
        }


def parse_optimize(sql: str) -> Optimize:
    """The OPTIMIZE statement of sql, or a LakeSyntaxError that says where its syntax is wrong."""
    return _parse_one(sql, Optimize, "OPTIMIZE")


def parse_call(sql: str) -> Call:
    r"""The CALL statement of sql.

    >>> c = parse_call("-- nightly\nCALL lake.system.expire_snapshots(table => 'db.t', retain_last => 2);")
    >>> c.this, c.args["args"]
    (['lake', 'system', 'expire_snapshots'], [('table', "'db.t'"), ('retain_last', '2')])
    >>> parse_call("CALL `my.cat`.system.f('a,b', map('k', 'v'))").args["args"]
    [(None, "'a,b'"), (None, "map('k', 'v')")]
    """
    return _parse_one(sql, Call, "CALL")


def parse_partition_field(sql: str) -> PartitionField:
    """An ALTER TABLE ... ADD|DROP|REPLACE PARTITION FIELD statement of sql.

    >>> p = parse_partition_field("ALTER TABLE lake.db.t ADD PARTITION FIELD bucket(4, `a,b`) AS `p(1)`")
    >>> p.this, p.args["op"], p.args["field"].args
    (['lake', 'db', 't'], 'ADD', {'transform': 'bucket', 'args': [{'lit': '4'}, {'ref': ['a,b']}], 'column': None, 'alias': 'p(1)'})
    >>> parse_partition_field("ALTER TABLE lake.db.t/**/,lake.db.u ADD PARTITION FIELD bucket(4, id)")
    Traceback (most recent call last):
    ...
    lakerules.errors.LakeSyntaxError: lakerules: ALTER TABLE syntax error at line 1, column 26: expected ADD, DROP or REPLACE PARTITION FIELD after the table name
      ALTER TABLE lake.db.t/**/,lake.db.u ADD PARTITION FIELD bucket(4, id)
                               ^
    """
    return _parse_one(sql, PartitionField, "ALTER TABLE")


def parse_describe_history(sql: str) -> DescribeHistory:
    """A DESCRIBE HISTORY statement of sql.

    >>> d = parse_describe_history("DESC HISTORY lake.db.`t.1` LIMIT 2")
    >>> d.this, d.args["limit"]
    (['lake', 'db', 't.1'], 2)
    """
    return _parse_one(sql, DescribeHistory, "DESCRIBE HISTORY")


def parse_restore(sql: str) -> Restore:
    """A RESTORE statement of sql.

    >>> r = parse_restore("RESTORE TABLE lake.db.t TO VERSION AS OF 123")
    >>> r.this, r.args["version"]
    (['lake', 'db', 't'], 123)
    >>> parse_restore("RESTORE lake.db.t TIMESTAMP AS OF current_timestamp() - INTERVAL 1 DAY").args["timestamp_text"]
    'current_timestamp() - INTERVAL 1 DAY'
    """
    return _parse_one(sql, Restore, "RESTORE")


def parse_vacuum(sql: str) -> Vacuum:
    """A VACUUM statement of sql.

    >>> v = parse_vacuum("VACUUM lake.db.t RETAIN 200 HOURS DRY RUN")
    >>> v.this, v.args["hours"], v.args["dry_run"]
    (['lake', 'db', 't'], 200.0, True)
    """
    return _parse_one(sql, Vacuum, "VACUUM")


def parse_ref_statement(sql: str) -> RefStatement:
    """An ALTER TABLE ... CREATE/REPLACE/DROP BRANCH/TAG statement of sql.

    >>> r = parse_ref_statement("ALTER TABLE lake.db.t CREATE BRANCH IF NOT EXISTS `b-1` AS OF VERSION 7 "
    ...                         "RETAIN 2 DAYS WITH SNAPSHOT RETENTION 3 SNAPSHOTS 1 HOURS")
    >>> r.this, r.args["op"], r.args["kind"], r.args["name"], r.args["version"], r.args["retain_ms"]
    (['lake', 'db', 't'], 'CREATE', 'BRANCH', 'b-1', 7, 172800000)
    >>> r.args["min_snapshots"], r.args["max_snapshot_age_ms"], r.args["if_exists"]
    (3, 3600000, True)
    >>> parse_ref_statement("ALTER TABLE t DROP TAG IF EXISTS v1").args["if_exists"]
    True
    """
    return _parse_one(sql, RefStatement, "ALTER TABLE")


def parse_write_order(sql: str) -> WriteOrder:
    """An ALTER TABLE ... WRITE statement of sql.

    >>> w = parse_write_order("ALTER TABLE lake.db.t WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY "
    ...                       "bucket(4, id) DESC NULLS FIRST, `a b`")
    >>> w.args["distributed"], w.args["locally"], [f.args["field"].args.get("transform") for f in w.args["fields"]]
    (True, True, ['bucket', None])
    >>> [(f.args["desc"], f.args["nulls_first"]) for f in w.args["fields"]]
    [(True, True), (False, None)]
    >>> parse_write_order("ALTER TABLE t WRITE UNORDERED").args["unordered"]
    True
    """
    return _parse_one(sql, WriteOrder, "ALTER TABLE")


def parse_identifier_fields(sql: str) -> IdentifierFields:
    """An ALTER TABLE ... SET|DROP IDENTIFIER FIELDS statement of sql.

    >>> i = parse_identifier_fields("ALTER TABLE t SET IDENTIFIER FIELDS (id, s.k)")
    >>> i.args["op"], i.args["fields"]
    ('SET', [['id'], ['s', 'k']])
    """
    return _parse_one(sql, IdentifierFields, "ALTER TABLE")


# The one place a lakerules statement is told from Spark's: its kind, by its first words, and the
# parser method of each kind (EXPLAIN is taken apart by lakerules.sql.statements).
STATEMENT_PARSERS = {
    "OPTIMIZE": "_parse_optimize_statement",
    "CALL": "_parse_call_statement",
    "RESTORE": "_parse_restore_statement",
    "VACUUM": "_parse_vacuum_statement",
    "DESCRIBE HISTORY": "_parse_describe_history_statement",
    "PARTITION FIELD": "_parse_partition_field",
    "REF": "_parse_ref_statement",
    "WRITE ORDER": "_parse_write_order",
    "IDENTIFIER FIELDS": "_parse_identifier_fields",
}
STATEMENT_NAMES = {"DESCRIBE HISTORY": "DESCRIBE HISTORY", "PARTITION FIELD": "ALTER TABLE", "REF": "ALTER TABLE",
                   "WRITE ORDER": "ALTER TABLE", "IDENTIFIER FIELDS": "ALTER TABLE"}


def statement_at(tokens, i: int) -> str | None:
    """The kind of lakerules statement starting at token i (a key of STATEMENT_PARSERS, or
    "EXPLAIN"); None for any other statement (Spark's own)."""
    if i >= len(tokens):
        return None
    tok = tokens[i]
    word = tok.text.upper()
    if tok.token_type == TokenType.VAR and word in ("OPTIMIZE", "CALL", "RESTORE", "VACUUM"):
        return word
    if word == "EXPLAIN":
        return "EXPLAIN"
    if tok.token_type in (TokenType.DESC, TokenType.DESCRIBE) and _is_history(tokens, i):
        return "DESCRIBE HISTORY"
    if tok.token_type == TokenType.ALTER:
        if _ref_op_at(tokens, i) is not None:
            return "REF"
        order = _order_op_at(tokens, i)
        if order is not None:
            return order
        if _partition_field_at(tokens, i):
            return "PARTITION FIELD"
    return None


def statement_kind(sql: str) -> str | None:
    r"""Which lakerules statement sql is (a key of STATEMENT_PARSERS, or "EXPLAIN"), by its first
    words after comments; None for anything else (Spark's own statements).

    >>> statement_kind("/* nightly */ OPTIMIZE lake.db.t")
    'OPTIMIZE'
    >>> statement_kind("-- c\n  call lake.system.f()")
    'CALL'
    >>> statement_kind("SELECT 1") is None
    True
    """
    try:
        tokens = LakeSpark().tokenize(sql)
    except Exception:  # noqa: BLE001 - not tokenizable: Spark's parser says what is wrong
        return None
    return statement_at(tokens, 0)


def parse_statement(sql: str):
    """The lakerules statement of sql, parsed (an Optimize, Call, ... node), or None when sql is
    not one (Spark's own statement, or EXPLAIN); a LakeSyntaxError says where its syntax is wrong."""
    try:
        tokens = LakeSpark().tokenize(sql)
    except Exception:  # noqa: BLE001 - not tokenizable: Spark's parser says what is wrong
        return None
    kind = statement_at(tokens, 0)
    if kind is None or kind == "EXPLAIN":
        return None
    name = STATEMENT_NAMES.get(kind, kind)
    try:
        with nesting.parsing(sql, tokens):
            tree = LakeSpark().parser(error_level=ErrorLevel.IMMEDIATE).parse(tokens, sql)
    except ParseError as e:
        raise _syntax_error(sql, e, name) from None
    statements = [t for t in tree if t is not None]
    if len(statements) != 1:
        raise LakeError(f"lakerules: expected one {name} statement")
    return statements[0]


def _is_history(tokens, i: int) -> bool:
    """DESC[RIBE] HISTORY <name>: HISTORY followed by a name. ``DESCRIBE history`` and
    ``DESCRIBE history.t`` describe a table named history (Spark's statement)."""
    return (len(tokens) > i + 2 and tokens[i + 1].text.upper() == "HISTORY" and tokens[i + 1].token_type == TokenType.VAR
            and tokens[i + 2].token_type not in (TokenType.DOT, TokenType.SEMICOLON))


def after_first_word(sql: str) -> str:
    """sql from its second token on (what follows EXPLAIN), comments before it dropped."""
    tokens = LakeSpark().tokenize(sql)
    return sql[tokens[0].end + 1:].lstrip() if tokens else ""


def _parse_one(sql: str, kind: type, name: str):
    try:
        tokens = LakeSpark().tokenize(sql)
        with nesting.parsing(sql, tokens):
            tree = LakeSpark().parser(error_level=ErrorLevel.IMMEDIATE).parse(tokens, sql)
    except ParseError as e:
        raise _syntax_error(sql, e, name) from None
    statements = [t for t in tree if t is not None]
    if len(statements) != 1 or not isinstance(statements[0], kind):
        raise LakeError(f"lakerules: expected one {name} statement")
    return statements[0]


def _syntax_error(sql: str, e: ParseError, name: str = "OPTIMIZE") -> LakeSyntaxError:
    err = e.errors[0] if e.errors else {}
    line, col = err.get("line") or 1, err.get("col") or 1
    near = err.get("highlight") or ""
    description = err.get("description") or str(e)
    col = max(1, col - max(len(near), 1) + 1)  # sqlglot gives the token's last column
    lines = sql.splitlines() or [sql]
    text = lines[min(line, len(lines)) - 1]
    message = f"lakerules: {name} syntax error at line {line}, column {col}: {description}\n  {text}\n  {' ' * (col - 1)}^"
    return LakeSyntaxError(message, sql, line, col, near, f": {description}")
