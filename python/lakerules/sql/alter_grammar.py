"""The grammar of Iceberg's ALTER TABLE statements that Spark's lacks, as a mixin of lakerules'
sqlglot parser (lakerules.sql.dialect.LakeSpark): partition evolution (ADD / DROP / REPLACE
PARTITION FIELD), branches and tags (CREATE [OR REPLACE] / REPLACE / DROP BRANCH | TAG), write
order (WRITE [DISTRIBUTED BY PARTITION] [LOCALLY] ORDERED BY ... | UNORDERED) and identifier
fields (SET / DROP IDENTIFIER FIELDS). The parser's shared steps (names, errors, the end of a
statement) are LakeSpark.Parser's."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType


class PartitionField(exp.Expression):
    """ALTER TABLE t ADD|DROP|REPLACE PARTITION FIELD: ``this`` the table's name parts, ``op``,
    ``field`` (and for REPLACE ``new``) a :class:`FieldSpec`."""

    arg_types = {"this": True, "op": True, "field": True, "new": False}


class FieldSpec(exp.Expression):
    """A partition field: ``transform`` (None: a column, identity or a field's name) with
    ``args`` ({"lit": "16"} or {"ref": [parts]}), or ``column`` parts; ``alias``."""

    arg_types = {"transform": False, "args": False, "column": False, "alias": False}


class RefStatement(exp.Expression):
    """Iceberg's branch and tag DDL, ALTER TABLE t ...:
    ``CREATE [OR REPLACE] | REPLACE BRANCH|TAG [IF NOT EXISTS] name [AS OF VERSION n] [RETAIN n unit]
    [WITH SNAPSHOT RETENTION [n SNAPSHOTS] [n unit]]`` (no snapshot retention for a tag) and
    ``DROP BRANCH|TAG [IF EXISTS] name``. ``this`` the table's name parts; ``op`` CREATE, REPLACE,
    CREATE OR REPLACE or DROP; ``kind`` BRANCH or TAG; ``name``; ``if_exists`` (IF [NOT] EXISTS);
    ``version``; ``retain_ms``, ``min_snapshots``, ``max_snapshot_age_ms`` (None: not given)."""

    arg_types = {"this": True, "op": True, "kind": True, "name": True, "if_exists": False, "version": False,
                 "retain_ms": False, "min_snapshots": False, "max_snapshot_age_ms": False}


class WriteOrder(exp.Expression):
    """Iceberg's ALTER TABLE t WRITE [DISTRIBUTED BY PARTITION] [[LOCALLY] ORDERED BY fields | UNORDERED],
    the two clauses in either order, each at most once (at least one):
    ``this`` the table's name parts; ``distributed`` (DISTRIBUTED BY PARTITION given), ``locally``,
    ``unordered``, ``fields`` a list of :class:`SortFieldSpec` (None: no ORDERED BY)."""

    arg_types = {"this": True, "distributed": False, "locally": False, "unordered": False, "fields": False}


class SortFieldSpec(exp.Expression):
    """A sort field: ``field`` a :class:`FieldSpec` (a column or a transform), ``desc``,
    ``nulls_first`` (None: the direction's default, as Iceberg: first for ASC, last for DESC)."""

    arg_types = {"field": True, "desc": False, "nulls_first": False}


class IdentifierFields(exp.Expression):
    """ALTER TABLE t SET|DROP IDENTIFIER FIELDS a, b.c | (a, b.c): ``op``, ``fields`` name parts."""

    arg_types = {"this": True, "op": True, "fields": True}


_TIME_UNITS = {"DAYS": 86_400_000, "HOURS": 3_600_000, "MINUTES": 60_000}


# Tokens that continue an expression: after a column name they mean it was not just a name.

# ---- which ALTER TABLE statement, looked ahead on the tokens --------------------------------------


def after_table_name(tokens, j: int) -> int:
    """The index after the multipart name starting at j (words, keywords and quoted names, dotted)."""
    while j < len(tokens):
        tok = tokens[j]
        if tok.token_type == TokenType.IDENTIFIER or (tok.token_type != TokenType.STRING
                                                       and tok.text.replace("_", "a").isalnum()):
            j += 1
            if j < len(tokens) and tokens[j].token_type == TokenType.DOT:
                j += 1
                continue
        return j
    return j


def ref_op_at(tokens, i: int) -> str | None:
    """ALTER TABLE <name> (CREATE [OR REPLACE] | REPLACE | DROP) (BRANCH | TAG): the operation,
    looked ahead from the ALTER token at i without moving; None for any other statement."""
    if [t.text.upper() for t in tokens[i:i + 2]] != ["ALTER", "TABLE"]:
        return None
    j = after_table_name(tokens, i + 2)
    words = [t.text.upper() if t.token_type not in (TokenType.STRING, TokenType.IDENTIFIER) else "" for t in tokens[j:j + 4]]
    if words[:1] in (["CREATE"], ["REPLACE"], ["DROP"]) and words[1:2] in (["BRANCH"], ["TAG"]):
        return words[0]
    if words[:3] == ["CREATE", "OR", "REPLACE"] and words[3:4] in (["BRANCH"], ["TAG"]):
        return "CREATE OR REPLACE"
    return None


def order_op_at(tokens, i: int) -> str | None:
    """ALTER TABLE <name> WRITE ... -> "WRITE ORDER"; ALTER TABLE <name> SET|DROP IDENTIFIER FIELDS
    -> "IDENTIFIER FIELDS"; None otherwise (looked ahead from the ALTER token at i)."""
    if [t.text.upper() for t in tokens[i:i + 2]] != ["ALTER", "TABLE"]:
        return None
    j = after_table_name(tokens, i + 2)
    words = [t.text.upper() if t.token_type not in (TokenType.STRING, TokenType.IDENTIFIER) else "" for t in tokens[j:j + 3]]
    if words[:1] == ["WRITE"] and words[1:2] in (["DISTRIBUTED"], ["LOCALLY"], ["ORDERED"], ["UNORDERED"]):
        return "WRITE ORDER"
    if words[:1] in (["SET"], ["DROP"]) and words[1:3] == ["IDENTIFIER", "FIELDS"]:
        return "IDENTIFIER FIELDS"
    return None


def partition_field_at(tokens, i: int) -> bool:
    """ALTER TABLE <name> ADD|DROP|REPLACE PARTITION FIELD, looked ahead from the ALTER at i."""
    if [t.text.upper() for t in tokens[i:i + 2]] != ["ALTER", "TABLE"]:
        return False
    upper = [t.text.upper() for t in tokens]
    return any(upper[j] in ("ADD", "DROP", "REPLACE") and upper[j + 1] == "PARTITION" and upper[j + 2] == "FIELD"
               for j in range(i + 2, len(upper) - 2))


class AlterTableGrammar:
    """The parser methods of the ALTER TABLE statements above (mixed into LakeSpark.Parser)."""

    # ---- ALTER TABLE ... CREATE / REPLACE / DROP BRANCH / TAG (Iceberg's extensions) --------

    def _parse_ref_statement(self) -> RefStatement:
        self._advance(2)  # ALTER TABLE
        table = self._parse_name_parts("ALTER TABLE needs a table name")
        words = self._upper_words(4)
        if words[:3] == ["CREATE", "OR", "REPLACE"]:
            op, n = "CREATE OR REPLACE", 3
        elif words[:1] in (["CREATE"], ["REPLACE"], ["DROP"]):
            op, n = words[0], 1
        else:
            self._expected("CREATE, REPLACE or DROP BRANCH or TAG after the table name")
        self._advance(n)
        kind = self._curr.text.upper() if not self._at_end() else ""
        if kind not in ("BRANCH", "TAG"):
            self._expected("BRANCH or TAG")
        self._advance()
        if_exists = False
        if op == "CREATE" and self._upper_words(3) == ["IF", "NOT", "EXISTS"]:
            self._advance(3)
            if_exists = True
        elif op == "DROP" and self._upper_words(2) == ["IF", "EXISTS"]:
            self._advance(2)
            if_exists = True
        name = self._ref_name(kind)
        out = RefStatement(this=table, op=op, kind=kind, name=name, if_exists=if_exists)
        if op != "DROP":
            if self._upper_words(3) == ["AS", "OF", "VERSION"]:
                self._advance(3)
                out.set("version", self._whole_number("AS OF VERSION takes a snapshot id"))
            if self._upper_words(1) == ["RETAIN"]:
                self._advance()
                out.set("retain_ms", self._duration("RETAIN"))
            if self._upper_words(3) == ["WITH", "SNAPSHOT", "RETENTION"]:
                if kind == "TAG":
                    self.raise_error("a tag has no snapshot retention (WITH SNAPSHOT RETENTION is for branches)",
                                     self._curr)
                self._advance(3)
                got = False
                if self._upper_words(2)[1:] == ["SNAPSHOTS"]:
                    out.set("min_snapshots", self._whole_number("expected a number of snapshots"))
                    self._advance()
                    got = True
                if not self._at_end() and self._curr.token_type == TokenType.NUMBER:
                    out.set("max_snapshot_age_ms", self._duration("WITH SNAPSHOT RETENTION"))
                    got = True
                if not got:
                    self._expected("<n> SNAPSHOTS and/or <n> DAYS|HOURS|MINUTES after WITH SNAPSHOT RETENTION")
        self._end_of_statement()
        return self.expression(out)

    def _upper_words(self, n: int) -> list[str]:
        return [t.text.upper() for t in self._tokens[self._index:self._index + n]
                if t.token_type not in (TokenType.STRING, TokenType.IDENTIFIER)]

    def _ref_name(self, kind: str) -> str:
        if self._at_end():
            self._error_at_end(f"expected the {kind.lower()}'s name")
        tok = self._curr
        if tok.token_type == TokenType.IDENTIFIER or (tok.token_type != TokenType.STRING
                                                      and tok.text.replace("_", "a").isalnum()):
            self._advance()
            return tok.text
        self.raise_error(f"expected the {kind.lower()}'s name", tok)

    def _whole_number(self, message: str) -> int:
        if self._at_end():
            self._error_at_end(message)
        tok = self._curr
        if tok.token_type != TokenType.NUMBER or not tok.text.isdigit():
            self.raise_error(message, tok)
        self._advance()
        return int(tok.text)

    def _duration(self, what: str) -> int:
        number = self._whole_number(f"{what} takes <n> DAYS, HOURS or MINUTES")
        unit = self._curr.text.upper() if not self._at_end() else ""
        if unit not in _TIME_UNITS:
            self._expected(f"DAYS, HOURS or MINUTES after {what} {number}")
        self._advance()
        return number * _TIME_UNITS[unit]

    # ---- ALTER TABLE ... WRITE ..., SET/DROP IDENTIFIER FIELDS (Iceberg's extensions) -------

    def _parse_write_order(self) -> WriteOrder:
        self._advance(2)  # ALTER TABLE
        table = self._parse_name_parts("ALTER TABLE needs a table name")
        self._advance()  # WRITE
        out = WriteOrder(this=table)
        clauses = 0
        while not self._at_end() and self._curr.token_type != TokenType.SEMICOLON:
            words = self._upper_words(3)
            if words == ["DISTRIBUTED", "BY", "PARTITION"] and not out.args.get("distributed"):
                self._advance(3)
                out.set("distributed", True)
            elif words[:1] == ["UNORDERED"] and out.args.get("fields") is None and not out.args.get("unordered"):
                self._advance()
                out.set("unordered", True)
            elif (words[:3] == ["LOCALLY", "ORDERED", "BY"] or words[:2] == ["ORDERED", "BY"]) \
                    and out.args.get("fields") is None and not out.args.get("unordered"):
                locally = words[0] == "LOCALLY"
                self._advance(3 if locally else 2)
                out.set("locally", locally)
                wrapped = self._match(TokenType.L_PAREN)
                fields = [self._parse_sort_field()]
                while self._match(TokenType.COMMA):
                    fields.append(self._parse_sort_field())
                if wrapped and not self._match(TokenType.R_PAREN):
                    self._expected(", or ) after a sort field")
                out.set("fields", fields)
            else:
                self._expected("DISTRIBUTED BY PARTITION, [LOCALLY] ORDERED BY or UNORDERED (each once)")
            clauses += 1
        if not clauses:
            self._error_at_end("expected DISTRIBUTED BY PARTITION, [LOCALLY] ORDERED BY or UNORDERED after WRITE")
        self._end_of_statement()
        return self.expression(out)

    def _parse_sort_field(self) -> SortFieldSpec:
        field = self._parse_field_spec(alias_allowed=False)
        desc = nulls_first = None
        if self._match(TokenType.DESC):
            desc = True
        elif self._match(TokenType.ASC):
            desc = False
        if self._upper_words(1) == ["NULLS"]:
            self._advance()
            which = self._upper_words(1)
            if which not in (["FIRST"], ["LAST"]):
                self._expected("FIRST or LAST after NULLS")
            self._advance()
            nulls_first = which == ["FIRST"]
        return SortFieldSpec(field=field, desc=bool(desc), nulls_first=nulls_first)

    def _parse_identifier_fields(self) -> IdentifierFields:
        self._advance(2)  # ALTER TABLE
        table = self._parse_name_parts("ALTER TABLE needs a table name")
        op = self._curr.text.upper()
        self._advance(3)  # SET|DROP IDENTIFIER FIELDS
        wrapped = self._match(TokenType.L_PAREN)
        fields = [self._column_parts("a column")]
        while self._match(TokenType.COMMA):
            fields.append(self._column_parts("a column"))
        if wrapped and not self._match(TokenType.R_PAREN):
            self._expected(", or ) after a column")
        self._end_of_statement()
        return self.expression(IdentifierFields(this=table, op=op, fields=fields))

    # ---- ALTER TABLE ... PARTITION FIELD -----------------------------------------------

    def _parse_partition_field(self) -> PartitionField:
        self._advance(2)  # ALTER TABLE
        table = self._parse_name_parts("ALTER TABLE needs a table name")
        op = self._curr.text.upper() if self._curr else ""
        if op not in ("ADD", "DROP", "REPLACE"):
            self._expected("ADD, DROP or REPLACE PARTITION FIELD after the table name")
        self._advance(3)  # op PARTITION FIELD
        field = self._parse_field_spec(alias_allowed=op == "ADD")
        new = None
        if op == "REPLACE":
            if not self._match_text_seq("WITH"):
                self._expected("WITH <new field> after REPLACE PARTITION FIELD <old field>")
            new = self._parse_field_spec(alias_allowed=True)
        self._end_of_statement()
        return self.expression(PartitionField(this=table, op=op, field=field, new=new))

    def _parse_field_spec(self, alias_allowed: bool) -> FieldSpec:
        if self._at_end():
            self._error_at_end("expected a partition field")
        transform = args = column = alias = None
        if self._next and self._next.token_type == TokenType.L_PAREN and self._curr.text.isidentifier():
            transform = self._curr.text
            self._advance(2)
            args = []
            while True:
                if self._curr and self._curr.token_type == TokenType.NUMBER:
                    args.append({"lit": self._curr.text})
                    self._advance()
                else:
                    args.append({"ref": self._column_parts("a column or a number")})
                if self._match(TokenType.COMMA):
                    continue
                if not self._match(TokenType.R_PAREN):
                    self._expected(", or ) in the transform's arguments")
                break
        else:
            column = self._column_parts("a partition field")
        if self._match(TokenType.ALIAS):
            if not alias_allowed:
                self.raise_error("AS names a new partition field; here the field is an existing one", self._prev)
            ident = self._parse_id_var(any_token=False)
            if ident is None:
                self._expected("a name after AS")
            alias = ident.name
        return FieldSpec(transform=transform, args=args, column=column, alias=alias)

