"""A property test (issue 16 item 5): namespace, table and column names and string and binary
values drawn from a hostile alphabet - quotes, backticks, backslashes, '%', '#', '?', '/', '..',
spaces, newlines, tabs, NUL, emoji, right-to-left marks, '%20', '${x}', '--' - run through the
whole statement cycle, with spark.sql.parser.escapedStringLiterals true and false:

CREATE NAMESPACE, CREATE TABLE (unpartitioned, or identity / truncate / bucket on the hostile
columns; merge-on-read or copy-on-write), INSERT, a SELECT filtered on a hostile value, DELETE,
UPDATE, MERGE INTO, lakerules.delete_by_key on all three columns (equality deletes, null-safe),
OPTIMIZE, DROP TABLE ... PURGE. Values reach Spark as SQL literals written the way a user must
write them under each setting. After every statement lakerules and pyiceberg must read exactly the
rows of a plain model (pyiceberg only while the table has no equality deletes, which it cannot
read), and DML must return the model's row counts. A name lakerules refuses (a table or namespace
name that is empty, '.' or '..', or holds '/', '\\', NUL, '#', '?', a tab or a line break; a
namespace name with '.' or whitespace around it, which the SQL catalog would not keep as written)
must be refused with a clear error, creating nothing; the cycle then goes on with the name those
characters taken out.

Profiles (env LAKERULES_PROFILE, as tests/test_model.py): `small` (default, `make test`): a
fixed worst-case example and 1 derandomized example per setting; `soak` (`make soak`):
LAKERULES_SOAK_EXAMPLES (default 40) examples per setting, derandomized unless
LAKERULES_SOAK_RANDOM is set. Each run prints its counts.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import lakerules
import profiles_util
import settings_util

PROFILE = profiles_util.PROFILE
CHOSEN = profiles_util.register("hostile-small", "hostile-soak", small_examples=1, derandomize=True)
STATS = {"examples": 0, "statements": 0, "refused names": 0, "checks": 0, "rows checked": 0}
_tables = itertools.count()

# one piece a draw: single characters and the sequences that break quoting and paths
PIECES = ["'", '"', "`", "\\", "%", "#", "?", "/", ".", "..", " ", "\n", "\t", "\0", "\U0001F600", "\u200f",
          "\u202e", "é", "日本", "%20", "%2F", "''", "``", "\\'", "\\n", "${x}", "--", "/*", "=", ":", "*",
          "a", "b", "Z", "0", "_"]
# lakerules.iceberg.paths refuses these in table and namespace names: path separators, NUL, what pyiceberg's
# file IO reads as a URL's fragment or query, and what Python's URL parsing drops
UNSAFE_IN_NAMES = ("/", "\\", "\0", "#", "?", "\t", "\n", "\r")


# Spark substitutes ${var} in any SQL text before parsing (spark.sql.variable.substitute): a name
# cannot hold it in SQL, and a value holding it is written as hex (then lakerules, which must never
# turn values into SQL text, would lose it if it did)
NAME_PIECES = [p for p in PIECES if "${" not in p]


def _text(min_pieces: int, max_pieces: int, pieces=PIECES):
    return st.lists(st.sampled_from(pieces), min_size=min_pieces, max_size=max_pieces).map("".join)


@st.composite
def cases(draw):
    namespace = draw(_text(1, 5, NAME_PIECES))
    table = draw(_text(1, 5, NAME_PIECES))
    c1 = draw(_text(1, 4, NAME_PIECES).filter(lambda s: s.lower() != "id"))
    c2 = draw(_text(1, 4, NAME_PIECES).filter(lambda s: s.lower() not in ("id", c1.lower())))
    strings = st.one_of(st.none(), _text(0, 5))
    binaries = st.one_of(st.none(), st.binary(max_size=6), _text(0, 3).map(lambda s: s.encode()))
    rows = draw(st.lists(st.tuples(strings, binaries), min_size=1, max_size=6))
    return {
        "namespace": namespace, "table": table, "c1": c1, "c2": c2,
        "partitioning": draw(st.sampled_from(["", "identity", "truncate", "bucket1", "bucket2"])),
        "mode": draw(st.sampled_from(["merge-on-read", "copy-on-write"])),
        "rows": [(i, s, b) for i, (s, b) in enumerate(rows)],
        "extra": draw(strings.filter(lambda s: s is not None)),  # appended by UPDATE
        "binary": draw(binaries),
        "merge": draw(st.lists(st.tuples(strings, binaries), min_size=1, max_size=4)),
    }


WORST = {  # every hostile piece at once, tried first with escapedStringLiterals
    "namespace": "it's `a` \"b\" %20 ..\u200f\U0001F600", "table": "x\ny\t%2F'\"`` $x \u202e日本",
    "c1": "c.1 'q' `b` \\n %", "c2": "c2 \" -- /* ? # \0",
    "partitioning": "identity", "mode": "merge-on-read",
    "rows": [(0, "'", b"'"), (1, "\\", b"\\"), (2, "a\nb\\'c", b"\0\xff"), (3, None, None), (4, "", b""),
             (5, "\\'\"`%#?/..\0\U0001F600\u200f", "x".encode())],
    "extra": "\\${x}", "binary": b"\\'\0", "merge": [("'", b"\n"), (None, b"z"), ("..", None)],
}
WORST_UNESCAPED = {  # the same pieces the other way round, tried first without the setting
    "namespace": "\U0001F600 ``%2F'\"q\" -- \u202e", "table": "..' /* %25 `x` \u200f日本\\",
    "c1": "c2 \" -- /* ? # \0", "c2": "c.1 'q' `b` \\n %", "partitioning": "bucket2", "mode": "copy-on-write",
    "rows": [(0, "\\'", b"\\'"), (1, "'", None), (2, "\0\t\r\n", b"\x00"), (3, "..", b"..%"), (4, None, b"")],
    "extra": "' OR 1=1 --", "binary": None, "merge": [("\\", b"'"), ("'", b"\\"), (None, None)],
}


# ---- SQL text, as a user writes it ------------------------------------------------------------


def ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def string_literal(v: str | None, escaped: bool) -> str:
    """v as a string literal of the SQL text, under spark.sql.parser.escapedStringLiterals."""
    if v is None:
        return "CAST(NULL AS STRING)"
    if "${" in v:  # Spark would substitute it in the SQL text
        return f"CAST(X'{v.encode().hex()}' AS STRING)"
    if not escaped:  # backslash escapes: a backslash and the quote are escaped, the rest is as is
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    # escapedStringLiterals: the text between the quotes is the value; the lexer still pairs a
    # backslash with the next character, so no closing quote may follow a backslash
    for quote in ("'", '"'):
        if quote not in v and not v.endswith("\\"):
            return quote + v + quote
    return f"CAST(X'{v.encode().hex()}' AS STRING)"


def binary_literal(v: bytes | None) -> str:
    return "CAST(NULL AS BINARY)" if v is None else f"X'{v.hex()}'"


# ---- the cycle ------------------------------------------------------------------------------------


class Cycle:
    def __init__(self, spark, catalog, case: dict, escaped: bool):
        self.spark, self.catalog, self.case, self.escaped = spark, catalog, case, escaped
        self.log: list[str] = []
        self.rows = {r[0]: r for r in case["rows"]}
        self.equality_deletes = False

    def sql(self, text: str):
        self.log.append(text)
        STATS["statements"] += 1
        return self.spark.sql(text).collect()

    def fail(self, message: str):
        raise AssertionError(f"{message}\nescapedStringLiterals={self.escaped}, statements:\n" + ";\n".join(
            repr(s) for s in self.log))

    def s(self, v):
        return string_literal(v, self.escaped)

    def name_or_refusal(self, kind: str, name: str, statement) -> str:
        """The name to go on with: as drawn if lakerules takes it, else (after checking the refusal)
        without the characters it refuses. A namespace name must also be kept as spelled by the
        SQL catalog: no '.', no whitespace around it."""
        unsafe = name in ("", ".", "..") or any(c in name for c in UNSAFE_IN_NAMES)
        if kind == "namespace":
            unsafe = unsafe or "." in name or name != name.strip()
        if not unsafe:
            return name
        try:
            statement(name)
        except Exception as e:  # noqa: BLE001 - the refusal is the point
            message = str(e)
            if "lakerules" not in message or "Traceback" in message or "internal error" in message:
                self.fail(f"{kind} name {name!r}: not a clear refusal: {message}")
            STATS["refused names"] += 1
        else:
            self.fail(f"{kind} name {name!r} was taken; lakerules refuses it")
        safe = "".join(c for c in name if c not in UNSAFE_IN_NAMES + ((".",) if kind == "namespace" else ()))
        safe = safe.strip() if kind == "namespace" else safe
        return safe if safe not in ("", ".", "..") else f"safe{next(_tables)}"

    def run(self):
        case, c1, c2 = self.case, self.case["c1"], self.case["c2"]
        ns = self.name_or_refusal("namespace", case["namespace"], lambda n: self.sql(f"CREATE NAMESPACE lake.{ident(n)}"))
        ns = f"{ns}{next(_tables)}"  # fresh for each example
        self.sql(f"CREATE NAMESPACE lake.{ident(ns)}")
        self.ns = ns
        try:
            self._table_cycle(ns, c1, c2)
        finally:
            self.spark.sql(f"DROP NAMESPACE IF EXISTS lake.{ident(ns)} CASCADE")
        STATS["examples"] += 1

    def _table_cycle(self, ns, c1, c2):
        case = self.case
        columns = f"(id BIGINT, {ident(c1)} STRING, {ident(c2)} BINARY)"
        partitioning = {"": "", "identity": f"PARTITIONED BY ({ident(c1)})",
                        "truncate": f"PARTITIONED BY (truncate(2, {ident(c1)}))",
                        "bucket1": f"PARTITIONED BY (bucket(3, {ident(c1)}))",
                        "bucket2": f"PARTITIONED BY (bucket(3, {ident(c2)}))"}[case["partitioning"]]
        modes = ", ".join(f"'write.{op}.mode' = '{case['mode']}'" for op in ("delete", "update", "merge"))
        create = f"{columns} {partitioning} TBLPROPERTIES ({modes})"
        name = self.name_or_refusal("table", case["table"],
                                    lambda n: self.sql(f"CREATE TABLE lake.{ident(ns)}.{ident(n)} {create}"))
        if name != case["table"]:
            assert self.catalog.list_tables(ns) == [], "a refused CREATE TABLE left a table"
        self.table, self.identifier = f"lake.{ident(ns)}.{ident(name)}", (ns, name)
        self.sql(f"CREATE TABLE {self.table} {create}")
        t = self.table
        values = ", ".join(f"({i}, {self.s(s)}, {binary_literal(b)})" for i, s, b in case["rows"])
        self.sql(f"INSERT INTO {t} VALUES {values}")
        self.check("INSERT")

        # a read filtered on a hostile value (pushed down, pruned by partition and metrics)
        probe = next((s for _, s, _ in case["rows"] if s is not None), case["extra"])
        got = sorted(r[0] for r in self.sql(f"SELECT id FROM {t} WHERE {ident(c1)} = {self.s(probe)}"))
        if got != sorted(i for i, s, _ in self.rows.values() if s == probe):
            self.fail(f"SELECT WHERE {c1!r} = {probe!r} read ids {got}")

        # DELETE rows equal to one value
        victim = case["rows"][-1][1]
        (r,) = self.sql(f"DELETE FROM {t} WHERE {ident(c1)} = {self.s(victim)}")
        gone = [i for i, s, _ in self.rows.values() if victim is not None and s == victim]
        self.expect_count("DELETE", r.num_affected_rows, len(gone))
        for i in gone:
            del self.rows[i]
        self.check("DELETE")

        # UPDATE: append the extra text, set the binary
        target = case["rows"][0][1]
        (r,) = self.sql(f"UPDATE {t} SET {ident(c1)} = concat({ident(c1)}, {self.s(case['extra'])}), "
                        f"{ident(c2)} = {binary_literal(case['binary'])} "
                        f"WHERE {ident(c1)} = {self.s(target)} OR id = 1")
        hit = [i for i, s, _ in self.rows.values() if (target is not None and s == target) or i == 1]
        self.expect_count("UPDATE", r.num_affected_rows, len(hit))
        for i in hit:
            s = self.rows[i][1]
            self.rows[i] = (i, None if s is None else s + case["extra"], case["binary"])
        self.check("UPDATE")

        # MERGE: ids 0, 2, 4, ... of the source hit existing rows (when still there), the rest are new
        source = [(2 * k, s, b) for k, (s, b) in enumerate(case["merge"])] + [(100, case["extra"], case["binary"])]
        deleting = case["merge"][0][0]
        src = ", ".join(f"({i}L, {self.s(s)}, {binary_literal(b)})" for i, s, b in source)
        (r,) = self.sql(
            f"MERGE INTO {t} AS t USING (SELECT * FROM VALUES {src} AS s(id, {ident(c1)}, {ident(c2)})) AS s "
            f"ON t.id = s.id "
            f"WHEN MATCHED AND s.{ident(c1)} = {self.s(deleting)} THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {ident(c1)} = s.{ident(c1)}, {ident(c2)} = s.{ident(c2)} "
            f"WHEN NOT MATCHED THEN INSERT *")
        deleted = updated = inserted = 0
        for i, s, b in source:
            if i in self.rows:
                if deleting is not None and s == deleting:
                    del self.rows[i]
                    deleted += 1
                else:
                    self.rows[i] = (i, s, b)
                    updated += 1
            else:
                self.rows[i] = (i, s, b)
                inserted += 1
        self.expect_count("MERGE deleted", r.num_deleted_rows, deleted)
        self.expect_count("MERGE updated", r.num_updated_rows, updated)
        self.expect_count("MERGE inserted", r.num_inserted_rows, inserted)
        self.check("MERGE")

        # equality deletes on all three columns (null-safe), some keys matching nothing
        from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

        keys = [r for k, r in enumerate(sorted(self.rows.values(), key=lambda r: r[0])) if k % 2 == 0]
        misses = [(i, s, b) for i, s, b in keys if i != 100][:1]
        misses = [(i, (s or "") + "\0", b) for i, s, b in misses]
        schema = StructType([StructField("id", LongType()), StructField(c1, StringType()), StructField(c2, BinaryType())])
        self.log.append(f"delete_by_key(on=[id, {c1!r}, {c2!r}], keys={keys + misses!r})")
        STATS["statements"] += 1
        lakerules.delete_by_key(self.spark, t, self.spark.createDataFrame(keys + misses, schema), on=["id", c1, c2])
        for i, _, _ in keys:
            del self.rows[i]
        self.equality_deletes = True
        self.check("delete_by_key")

        self.sql(f"OPTIMIZE {t}")
        self.equality_deletes = self._has_equality_deletes()
        self.check("OPTIMIZE")

        self.sql(f"DROP TABLE {t} PURGE")
        if self.catalog.table_exists(self.identifier):
            self.fail("DROP TABLE ... PURGE left the table")

    def _has_equality_deletes(self) -> bool:
        table = self.catalog.load_table(self.identifier)
        snapshot = table.current_snapshot()
        return snapshot is not None and any(
            e.data_file.content.value == 2  # EQUALITY_DELETES, live in the current snapshot
            for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io, discard_deleted=True))

    def expect_count(self, what: str, got: int, expected: int):
        if got != expected:
            self.fail(f"{what} returned {got} rows, the model has {expected}")

    def check(self, after: str):
        expected = sorted(self.rows.values(), key=repr)
        c1, c2 = self.case["c1"], self.case["c2"]
        ours = sorted(((r[0], r[1], None if r[2] is None else bytes(r[2])) for r in
                       self.spark.sql(f"SELECT id, {ident(c1)}, {ident(c2)} FROM {self.table}").collect()), key=repr)
        if ours != expected:
            self.fail(f"after {after}: lakerules reads {ours}, the model has {expected}")
        readers = 1
        if not self.equality_deletes:
            arrow = self.catalog.load_table(self.identifier).scan().to_arrow()
            theirs = sorted(zip(arrow.column("id").to_pylist(), arrow.column(c1).to_pylist(), arrow.column(c2).to_pylist()),
                            key=repr)
            if theirs != expected:
                self.fail(f"after {after}: pyiceberg reads {theirs}, the model has {expected}")
            readers = 2
        STATS["checks"] += 1
        STATS["rows checked"] += readers * len(expected)


def escaped_string_literals(spark, value: bool):
    return settings_util.settings(spark, {"spark.sql.parser.escapedStringLiterals": str(value).lower()})


@pytest.mark.parametrize("escaped", [True, False], ids=["escapedStringLiterals", "unescaped"])
def test_hostile_names_and_values_round_trip(spark, iceberg_catalog, escaped):
    profile = CHOSEN
    before = dict(STATS)

    @settings(profile)
    @given(case=cases())
    @example(case=WORST if escaped else WORST_UNESCAPED)
    def run(case):
        with escaped_string_literals(spark, escaped):
            Cycle(spark, iceberg_catalog, case, escaped).run()

    run()
    counts = {k: STATS[k] - before[k] for k in STATS}
    print(f"\nhostile alphabet ({PROFILE}, escapedStringLiterals={escaped}): {counts}")


def test_string_literal_renders_every_value_in_both_settings(spark):
    """The helper the property test writes its SQL with: each literal reads back as the value
    under its setting (so a failure above is lakerules', not the test's quoting)."""
    values = ["'", "\\", "\\'", "a\\", "'\"", "x'y\"z\\", "\0\n\t\U0001F600\u200f", "", "${x}", "--", "/*"]
    for escaped in (True, False):
        with escaped_string_literals(spark, escaped):
            exprs = ", ".join(f"{string_literal(v, escaped)} AS c{k}" for k, v in enumerate(values))
            (row,) = spark.sql(f"SELECT {exprs}").collect()
            assert list(row) == values, escaped
    assert re.fullmatch(r"X'[0-9a-f]*'", binary_literal(b"\0'\\"))


# ---- what this test found, kept as plain tests ------------------------------------------------------


@pytest.mark.parametrize("column,partition", [("k\0 \n#%20", "bucket(3, {c})"), ("k\0", "{c}"),
                                              (".", "truncate(2, {c})"), (".x", "{c}")])
def test_partition_folders_of_hostile_column_names(spark, ns, engines, partition, column):
    """Spark escapes what a folder name cannot hold, but not NUL: a partition field named after a
    column holding one made every write fail ('Mkdirs failed to create ...'). Nor a leading '.':
    the folder of a partition field named '.' or '._trunc' is hidden from listings, so an INSERT
    committed nothing and returned normally, its rows lost."""
    c = ident(column)
    table = f"lake.{ns}.nul"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, {c} STRING) PARTITIONED BY ({partition.format(c=c)})")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, NULL), (3, 'abc')")
    (r,) = spark.sql(f"DELETE FROM {table} WHERE {c} = 'abc'").collect()
    assert r.num_affected_rows == 1
    assert engines.lakerules(table, "id") == engines.pyiceberg(table, "id") == [(1,), (2,)]


def test_a_written_file_a_listing_would_hide_fails_the_write(spark, tmp_path):
    """The net under the fix above: a Parquet file hidden only by a partition folder (a name with
    '=' starting with '.') fails the write instead of being skipped with its rows; hidden staging
    and _temporary/ folders of abandoned task attempts are still skipped."""
    from lakerules.write import files as write
    from lakerules.errors import LakeError

    (tmp_path / "p=1").mkdir()
    (tmp_path / "p=1" / "part-0.parquet").write_bytes(b"x")
    (tmp_path / "_temporary" / "0" / "._t=1").mkdir(parents=True)
    (tmp_path / "_temporary" / "0" / "._t=1" / "part-1.parquet").write_bytes(b"x")
    assert write._list_files(spark, f"file://{tmp_path}") == [("p=1/part-0.parquet", 1)]
    (tmp_path / "._trunc=x61").mkdir()
    (tmp_path / "._trunc=x61" / "part-2.parquet").write_bytes(b"x")
    for listing in (write._list_files, write._list_files_hadoop):
        with pytest.raises(LakeError, match="made a file on a hidden path, '._trunc=x61/part-2.parquet'"):
            listing(spark, f"file://{tmp_path}")


def test_attribute_ids_and_names_cross_in_one_call(spark):
    """lakerules.spark.attributes reads a plan's column names and exprIds as one string: names with
    its separators (commas, digits after them), line breaks, NUL and characters outside the BMP read
    back exactly, each with its own exprId."""
    from pyspark.sql import functions as F

    from lakerules.spark import attributes, jvm as J

    names = ["1,2", ",", "12,3,x", "a\nb", "\0", "\U0001F600,\U0001F600", "日本", ""]
    df = spark.range(1).select(*[F.lit(i).alias(n) for i, n in enumerate(names)])
    output = df._jdf.queryExecution().analyzed().output()
    got = attributes.with_objects(output)
    assert [name for _, name, _ in got] == names
    assert [ident for ident, _, _ in got] == [a.exprId().id() for a in J.from_seq(output)]
    assert [a.name() for _, _, a in got] == names
    assert attributes.expr_ids(output) == [ident for ident, _, _ in got]
